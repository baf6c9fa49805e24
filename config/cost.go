package config

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// MatchMode says how many rule items apply to one request.
type MatchMode uint8

const (
	MatchFirst MatchMode = iota // "first" (default, Higress): the first matching item
	MatchAll                    // "all": every matching item, each with its first matching key
)

// Reservation is token_reservation: estimate a request's cost before
// admitting it, reserve it in every window, and reconcile with the usage the
// response reports.
type Reservation struct {
	Enabled                 bool
	BytesPerToken           int64 // prompt bytes per estimated token
	DefaultCompletionTokens int64 // output estimate when the request names no cap
	MaxBodyBytes            int64 // larger bodies are estimated by size, unparsed
}

// Defaults of token_reservation.
const (
	DefaultBytesPerToken            = 4
	DefaultCompletionTokens         = 1024
	DefaultMaxBodyBytes             = 1 << 20
	maxReservationBodyBytes         = 64 << 20
	maxWeight                       = 1e6
	reservationField                = "token_reservation"
	weightsField                    = "token_weights"
	modelWeightsField               = "models"
	defaultWeight           float64 = 1
)

// CountStrategy is token_count_strategy: which reported tokens a request costs.
type CountStrategy uint8

const (
	CountTotal    CountStrategy = iota // "total_tokens" (default): input + output
	CountInput                         // "input_tokens"
	CountOutput                        // "output_tokens"
	CountWeighted                      // "weighted": by token_weights
)

var countStrategies = [...]string{
	CountTotal:    "total_tokens",
	CountInput:    "input_tokens",
	CountOutput:   "output_tokens",
	CountWeighted: "weighted",
}

func (s CountStrategy) String() string {
	if int(s) < len(countStrategies) {
		return countStrategies[s]
	}
	return "CountStrategy(" + strconv.Itoa(int(s)) + ")"
}

// Weights price each kind of token for the weighted strategy.
type Weights struct {
	Input         float64 // input tokens not served from or written to a cache
	Output        float64
	CacheRead     float64
	CacheCreation float64
}

// Cost turns token counts into what a request is charged.
type Cost struct {
	Strategy CountStrategy
	Weights  Weights
	// ModelWeights override Weights for the model the request names.
	ModelWeights map[string]Weights
}

// Tokens is what a response with these counts costs; input includes the
// cache reads and writes. Weighted costs are rounded up to whole tokens.
func (c *Cost) Tokens(input, output, cacheRead, cacheCreation int64, model string) int64 {
	switch c.Strategy {
	case CountInput:
		return input
	case CountOutput:
		return output
	case CountWeighted:
		w := c.weightsFor(model)
		uncached := max(input-cacheRead-cacheCreation, 0)
		sum := float64(uncached)*w.Input + float64(output)*w.Output +
			float64(cacheRead)*w.CacheRead + float64(cacheCreation)*w.CacheCreation
		return int64(math.Ceil(sum - 1e-9)) // 1e-9: 0.1*30 must not round up to 4
	}
	return input + output
}

func (c *Cost) weightsFor(model string) Weights {
	if w, ok := c.ModelWeights[model]; ok {
		return w
	}
	return c.Weights
}

func parseMatchMode(path string, v gjson.Result) (MatchMode, error) {
	m, err := enumField(path, v, "first", "all") // MatchFirst, MatchAll
	return MatchMode(m), err
}

var reservationFields = []string{"enabled", "bytes_per_token", "default_completion_tokens", "max_body_bytes"}

func parseReservation(path string, v gjson.Result) (Reservation, error) {
	r := Reservation{BytesPerToken: DefaultBytesPerToken, DefaultCompletionTokens: DefaultCompletionTokens, MaxBodyBytes: DefaultMaxBodyBytes}
	if !v.IsObject() {
		return r, fieldErr(path, "must be an object, got ", describe(v))
	}
	err := walkObject(path, v, reservationFields, func(key string, fv gjson.Result) (err error) {
		if !isSet(fv) {
			return nil
		}
		p := child(path, key)
		switch key {
		case "enabled":
			r.Enabled, err = boolField(p, fv)
		case "bytes_per_token":
			r.BytesPerToken, err = intField(p, fv, 1, 1<<20)
		case "default_completion_tokens":
			r.DefaultCompletionTokens, err = intField(p, fv, 0, 1<<40)
		case "max_body_bytes":
			r.MaxBodyBytes, err = intField(p, fv, 1, maxReservationBodyBytes)
		default:
			return errUnknownField
		}
		return err
	}, nil)
	return r, err
}

func parseCountStrategy(path string, v gjson.Result) (CountStrategy, error) {
	s, err := enumField(path, v, countStrategies[:]...)
	return CountStrategy(s), err
}

var weightFields = []string{"input", "output", "cache_read", "cache_creation"}

// parseWeights reads one weights object over base; allowModels says whether
// a "models" map of overrides may appear in it.
func parseWeights(path string, v gjson.Result, base Weights, allowModels bool) (Weights, map[string]Weights, error) {
	w := base
	var models map[string]Weights
	if !v.IsObject() {
		return w, nil, fieldErr(path, "must be an object, got ", describe(v))
	}
	known := weightFields
	if allowModels {
		known = append(append([]string{}, weightFields...), modelWeightsField)
	}
	var modelsVal gjson.Result
	err := walkObject(path, v, known, func(key string, fv gjson.Result) error {
		if !isSet(fv) {
			return nil
		}
		var dst *float64
		switch key {
		case "input":
			dst = &w.Input
		case "output":
			dst = &w.Output
		case "cache_read":
			dst = &w.CacheRead
		case "cache_creation":
			dst = &w.CacheCreation
		case modelWeightsField:
			if !allowModels {
				return errUnknownField
			}
			modelsVal = fv
			return nil
		default:
			return errUnknownField
		}
		if fv.Type != gjson.Number || fv.Num < 0 || fv.Num > maxWeight || math.IsNaN(fv.Num) {
			return fieldErr(child(path, key), "must be a number between 0 and 1000000, got ", describe(fv))
		}
		*dst = fv.Num
		return nil
	}, nil)
	if err != nil || !isSet(modelsVal) {
		return w, nil, err
	}
	mp := child(path, modelWeightsField)
	if !modelsVal.IsObject() {
		return w, nil, fieldErr(mp, "must be an object keyed by model name, got ", describe(modelsVal))
	}
	models = map[string]Weights{}
	modelsVal.ForEach(func(k, mv gjson.Result) bool {
		name := k.String()
		if name == "" {
			err = fieldErr(mp, "model names must not be empty")
			return false
		}
		if _, dup := models[name]; dup {
			err = fieldErr(child(mp, name), "duplicate field")
			return false
		}
		// A model's weights start from the defaults above: set only what differs.
		models[name], _, err = parseWeights(child(mp, name), mv, w, false)
		return err == nil
	})
	return w, models, err
}

// parseCostOptions reads rule_match_mode, token_reservation,
// token_count_strategy and token_weights.
func (c *Config) parseCostOptions(matchMode, reservation, strategy, weights gjson.Result) (err error) {
	if isSet(matchMode) {
		if c.MatchMode, err = parseMatchMode("rule_match_mode", matchMode); err != nil {
			return err
		}
	}
	if isSet(reservation) {
		if c.Reservation, err = parseReservation(reservationField, reservation); err != nil {
			return err
		}
	}
	if isSet(strategy) {
		if c.Cost.Strategy, err = parseCountStrategy("token_count_strategy", strategy); err != nil {
			return err
		}
	}
	if isSet(weights) {
		if c.Cost.Strategy != CountWeighted {
			return fieldErr(weightsField, `only used with token_count_strategy "weighted", which is not set`)
		}
		c.Cost.Weights, c.Cost.ModelWeights, err = parseWeights(weightsField, weights, c.Cost.Weights, true)
	}
	return err
}
