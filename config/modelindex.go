package config

import (
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// modelIndex looks a model name up among entries keyed the way
// token_weights.models and pricing are: an exact name, a prefix
// ("claude-opus-4*") or a regexp ("regexp:<re>"). An exact name wins, then
// the longest prefix the name starts with (two prefixes of one length
// cannot both match), then the first regexp in configuration order that
// matches it. A lookup of an exact name costs one map access.
type modelIndex[V any] struct {
	exact    map[string]V
	patterns []modelPattern[V] // the prefixes, longest first, then the regexps in configuration order
}

type modelPattern[V any] struct {
	kind   ModelKind
	prefix string         // ModelPrefix
	re     *regexp.Regexp // ModelRegexp
	value  V
}

// add indexes an entry; build must be called once they all are.
func (ix *modelIndex[V]) add(kind ModelKind, name string, re *regexp.Regexp, v V) {
	if ix.exact == nil {
		ix.exact = map[string]V{}
	}
	switch kind {
	case ModelExact:
		ix.exact[name] = v
	case ModelPrefix:
		ix.patterns = append(ix.patterns, modelPattern[V]{kind: kind, prefix: name, value: v})
	case ModelRegexp:
		ix.patterns = append(ix.patterns, modelPattern[V]{kind: kind, re: re, value: v})
	}
}

// build orders the patterns: the prefixes, longest first, before the
// regexps, which keep their configuration order.
func (ix *modelIndex[V]) build() {
	slices.SortStableFunc(ix.patterns, func(a, b modelPattern[V]) int {
		switch {
		case a.kind != b.kind:
			return int(a.kind) - int(b.kind) // ModelPrefix before ModelRegexp
		case a.kind == ModelPrefix:
			return len(b.prefix) - len(a.prefix)
		}
		return 0
	})
}

// lookup returns the value of the entry that matches model, if any; ""
// matches none.
func (ix *modelIndex[V]) lookup(model string) (V, bool) {
	if v, ok := ix.exact[model]; ok {
		return v, true
	}
	if model != "" {
		for i := range ix.patterns {
			p := &ix.patterns[i]
			if p.kind == ModelPrefix && strings.HasPrefix(model, p.prefix) || p.kind == ModelRegexp && p.re.MatchString(model) {
				return p.value, true
			}
		}
	}
	var zero V
	return zero, false
}

// readModelKeyed reads an object keyed by model, as token_weights.models,
// pricing and model_fallbacks are (what must be said of its values: "must
// be an object keyed by model name" and then what): f gets each key,
// its path and its value, in order, and a rule parsed from the key (a name,
// "<prefix>*" or "regexp:<re>"; for "*", Kind ModelPrefix and no name,
// when anyKey allows it). Empty and repeated keys are refused.
func readModelKeyed(path, what string, v gjson.Result, anyKey bool, f func(rule ModelRule, at string, value gjson.Result) error) (err error) {
	if !v.IsObject() {
		return fieldErr(path, "must be an object keyed by model name", what, ", got ", describe(v))
	}
	seen := map[string]bool{}
	v.ForEach(func(k, value gjson.Result) bool {
		key := k.String()
		at := child(path, key)
		switch {
		case key == "":
			err = fieldErr(path, "model names must not be empty")
		case seen[key]:
			err = fieldErr(at, "duplicate field")
		}
		if err != nil {
			return false
		}
		seen[key] = true
		rule := ModelRule{Key: key, Kind: ModelPrefix} // "*": every model no other key matches
		if key != AnyKey || !anyKey {
			if err = rule.parseKey(at); err != nil {
				return false
			}
		}
		err = f(rule, at, value)
		return err == nil
	})
	return err
}
