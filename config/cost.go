package config

import (
	"math"
	"strconv"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// MatchMode says how many rule items apply to one request.
type MatchMode uint8

const (
	MatchFirst MatchMode = iota // "first": the first matching item only (Higress before 2.2.4)
	MatchAll                    // "all" (default, Higress since 2.2.4): every matching item, each with its first matching key
)

// Reservation is token_reservation: estimate a request's cost before
// admitting it, reserve it in every window, and reconcile with the usage the
// response reports.
type Reservation struct {
	Enabled                 bool
	BytesPerToken           int64 // prompt bytes per estimated token; 0 (the default): the calibrated count (estimate/count.go)
	DefaultCompletionTokens int64 // output estimate when the request names no cap
	MaxBodyBytes            int64 // larger bodies are estimated by size, unparsed
}

// Defaults of token_reservation.
const (
	DefaultCompletionTokens         = 1024
	DefaultMaxBodyBytes             = 1 << 20
	maxReservationBodyBytes         = 64 << 20
	maxWeight                       = 1e6
	defaultWeight           float64 = 1
)

// SizeBytesPerToken is the bytes per token of what is counted by its size:
// a body that cannot be read, the text of a response that reports no usage.
// It is bytes_per_token, else estimate's default
// (estimate.Options.SizeBytesPerToken).
func (r Reservation) SizeBytesPerToken() int64 {
	return estimate.Options{BytesPerToken: r.BytesPerToken}.SizeBytesPerToken()
}

// estimateOptions are the options a request body is read with
// (Config.EstimateOptions): token_reservation's numbers, in the ranges its
// parsing allows. Only token_reservation reserves the estimate: without
// it, a body read before admission is read for its model alone
// (ModelOnly), its prompt being its size, which is all a response without
// usage is charged by. The model of a body too large to parse is looked
// for when what a request costs depends on it (per-model weights or
// prices).
func (c *Config) estimateOptions() estimate.Options {
	r := &c.Reservation
	return estimate.Options{
		BytesPerToken:           r.BytesPerToken,
		DefaultCompletionTokens: r.DefaultCompletionTokens,
		MaxBodyBytes:            r.MaxBodyBytes,
		ModelOfLargeBodies:      len(c.Cost.ModelWeights) > 0 || c.PricesByModel(),
		ModelOnly:               !r.Enabled,
	}
}

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
	// ModelWeights are token_weights.models, in configuration order: they
	// override Weights for the models they match (see weightsFor).
	ModelWeights []ModelRule

	// Built from ModelWeights by indexModels, for weightsFor.
	models    modelIndex[Weights]
	strictest Weights // the largest weight of each kind, of UnknownModel
}

// Tokens is what a response with these counts costs; input includes the
// cache reads and writes. Weighted costs are rounded up to whole tokens.
//
// The counts come from a response or a request's estimate, which a client
// or an upstream may set to anything: each is taken in [0,
// estimate.MaxTokens], and the cost saturates at estimate.MaxTokens, so it
// never wraps into a negative charge and Redis's Lua always holds it exactly.
// This is where a request's counts become what it is charged or reserved
// (with Pricing.NanoUSD): the reservation, the charge and the amounts the
// scripts are sent trust this bound and do not bound them again.
func (c *Cost) Tokens(input, output, cacheRead, cacheCreation int64, model string) int64 {
	input, output = bound(input), bound(output)
	cacheRead, cacheCreation = bound(cacheRead), bound(cacheCreation)
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
		// Clamped before converting: up to 4 × MaxTokens × maxWeight does
		// not fit an int64. 1e-9: 0.1*30 must not round up to 4.
		return int64(math.Ceil(min(sum, float64(estimate.MaxTokens)) - 1e-9))
	}
	return min(input+output, estimate.MaxTokens) // no overflow: each is at most MaxTokens
}

// bound takes a token count into [0, estimate.MaxTokens].
func bound(n int64) int64 { return min(max(n, 0), estimate.MaxTokens) }

// weightsFor returns the weights of a model: those of its exact name in
// token_weights.models, else of the longest prefix it starts with, else of
// the first regexp (in configuration order) that matches it, else the
// token_weights ones. A request that names no model ("") gets the
// token_weights ones; one whose model cannot be told (UnknownModel) the
// largest weight of each kind, of any model. It runs on every charge: an
// exact name costs one map lookup.
func (c *Cost) weightsFor(model string) Weights {
	if model == UnknownModel && len(c.ModelWeights) > 0 {
		return c.strictest
	}
	if w, ok := c.models.lookup(model); ok {
		return w
	}
	return c.Weights
}
