package config

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Fallbacks are model_fallbacks: for a model whose budget has no room, the
// models to serve instead, tried in order in the same admission. Keys match
// models as token_weights.models and pricing do (a name, "<prefix>*",
// "regexp:<re>", and "*" for every model no other key matches); each value
// is a list of model names. A fallback is one
// step: the fallbacks of a fallback are never tried.

// MaxFallbacks bounds a model_fallbacks list: each candidate is checked in
// the admission call, on every request that names the model.
const MaxFallbacks = 7

// Fallback is an entry of model_fallbacks.
type Fallback struct {
	Key    string // as configured
	Kind   ModelKind
	Name   string         // ModelExact: the name; ModelPrefix: the prefix
	Regexp *regexp.Regexp // ModelRegexp
	// Models are the models to serve instead, in order.
	Models []string
}

// FallbacksOf returns the models a request for model may be served instead,
// in order (nil: none): those of the entry that matches it (an exact name
// first, then the longest prefix, then the first regexp, then "*"). A pattern's list
// may name model itself: the caller skips it.
func (c *Config) FallbacksOf(model string) []string {
	if len(c.Fallbacks) == 0 || model == "" || model == UnknownModel {
		return nil
	}
	if models, ok := c.fallbacks.lookup(model); ok {
		return models
	}
	return c.fallbacksAny
}

// readFallbacks reads model_fallbacks.
func readFallbacks(c *Config, path string, v gjson.Result) error {
	c.Fallbacks, c.fallbacks, c.fallbacksAny = nil, modelIndex[[]string]{}, nil
	err := readModelKeyed(path, ", each a list of the models to serve instead", v, true, func(rule ModelRule, at string, list gjson.Result) error {
		f := Fallback{Key: rule.Key, Kind: rule.Kind, Name: rule.Name, Regexp: rule.Regexp}
		var err error
		if f.Models, err = readFallbackModels(at, rule.Key, rule.Kind, list); err != nil {
			return err
		}
		c.Fallbacks = append(c.Fallbacks, f)
		if rule.Key == AnyKey {
			c.fallbacksAny = f.Models
		} else {
			c.fallbacks.add(f.Kind, f.Name, f.Regexp, f.Models)
		}
		return nil
	})
	c.fallbacks.build()
	return err
}

// readFallbackModels reads the list of one model_fallbacks entry (key, of
// kind kind): model names, each once, at most MaxFallbacks, an exact key not
// among them.
func readFallbackModels(path, key string, kind ModelKind, v gjson.Result) ([]string, error) {
	if !v.IsArray() {
		return nil, fieldErr(path, "must be a list of the models to serve instead, got ", describe(v))
	}
	list := v.Array()
	switch {
	case len(list) == 0:
		return nil, fieldErr(path, "must name at least one model to serve instead (remove the entry for none)")
	case len(list) > MaxFallbacks:
		return nil, fieldErr(path, "names ", strconv.Itoa(len(list)), " models: at most ", strconv.Itoa(MaxFallbacks), " are tried")
	}
	models := make([]string, 0, len(list))
	for i, e := range list {
		at := path + "[" + strconv.Itoa(i) + "]"
		m, err := readString(at, e)
		switch {
		case err != nil:
			return nil, err
		case m == "":
			return nil, fieldErr(at, "must not be empty")
		case strings.HasPrefix(m, RegexpKeyPrefix) || strings.Contains(m, AnyKey):
			return nil, fieldErr(at, "must name a model to serve, not a pattern: got ", quote(m))
		case m == UnknownModel || strings.IndexFunc(m, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
			return nil, fieldErr(at, "must name a model to serve (no spaces or control characters): got ", quote(m))
		case kind == ModelExact && m == key:
			return nil, fieldErr(at, "is the model itself: a model cannot fall back to itself")
		}
		for _, prev := range models {
			if prev == m {
				return nil, fieldErr(at, "names ", quote(m), " twice")
			}
		}
		models = append(models, m)
	}
	return models, nil
}

// checkFallbacks refuses model_fallbacks that could never serve a fallback:
// a fallback is tried when a limit that depends on the model has no room,
// and without such a limit none does.
func (c *Config) checkFallbacks() error {
	if len(c.Fallbacks) == 0 {
		return nil
	}
	if c.HasModelLimits() {
		return nil
	}
	if c.Reservation.Enabled && (c.PricesByModel() || len(c.Cost.ModelWeights) > 0) {
		return nil // a cheaper model's reservation may fit where the model's does not
	}
	return fieldErr(fallbacksField, "no limit depends on the model, so a fallback would never be served: ",
		"add per_model, limit_by_model or limit_by_per_model limits, or, with token_reservation, ",
		"prices by model (pricing) or token_weights.models")
}

// FallbackNotes are lines about model_fallbacks worth logging when the plugin
// starts: a model served instead that has fallbacks of its own, which a
// request falling back to it does not try (a fallback is one step).
func (c *Config) FallbackNotes() []string {
	var notes []string
	for _, f := range c.Fallbacks {
		for _, m := range f.Models {
			var next []string
			for _, n := range c.FallbacksOf(m) {
				if n != m { // a pattern's list naming m itself: never tried for m
					next = append(next, n)
				}
			}
			if len(next) > 0 {
				notes = append(notes, fallbacksField+"."+f.Key+": "+quote(m)+" has fallbacks of its own ("+
					strings.Join(next, ", ")+"), which a request falling back to it does not try: a fallback is one step")
			}
		}
	}
	return notes
}
