package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perModelItems limits each consumer's models, which gives fallbacks a limit
// that depends on the model.
const perModelItems = `{"limit_by_per_consumer":"","limit_keys":[{"key":"*","token_per_day":1000,
	"per_model":[{"model":"*","token_per_minute":100}]}]}`

func TestFallbacksOf(t *testing.T) {
	c := mustParse(t, withItems(perModelItems, `"model_fallbacks":{
		"gpt-4o":["gpt-4o-mini"],
		"claude-opus-4*":["claude-opus-4-1","claude-sonnet-4-5"],
		"claude-*":["claude-haiku-4-5"],
		"regexp:^gemini-.*-pro$":["gemini-2.5-flash","gemini-2.5-flash-lite"]},`))
	for model, want := range map[string][]string{
		"gpt-4o":          {"gpt-4o-mini"},
		"gpt-4o-mini":     nil,
		"claude-opus-4-5": {"claude-opus-4-1", "claude-sonnet-4-5"}, // the longest prefix
		"claude-opus-4-1": {"claude-opus-4-1", "claude-sonnet-4-5"}, // itself among them: the plugin skips it
		"claude-3-haiku":  {"claude-haiku-4-5"},
		"gemini-2.5-pro":  {"gemini-2.5-flash", "gemini-2.5-flash-lite"},
		"":                nil,
		UnknownModel:      nil,
	} {
		assert.Equal(t, want, c.FallbacksOf(model), model)
	}
	assert.Equal(t, []string{`model_fallbacks.claude-opus-4*: "claude-opus-4-1" has fallbacks of its own (claude-sonnet-4-5), ` +
		`which a request falling back to it does not try: a fallback is one step`,
		`model_fallbacks.claude-opus-4*: "claude-sonnet-4-5" has fallbacks of its own (claude-haiku-4-5), which a request falling back to it does not try: a fallback is one step`},
		c.FallbackNotes())
}

// "*" is every model no other key matches, after the regexps too.
func TestFallbacksOfAnyModel(t *testing.T) {
	c := mustParse(t, withItems(perModelItems, `"model_fallbacks":{"*":["cheap"],"regexp:^gemini-":["gemini-2.5-flash"],"gpt-*":["gpt-4o-mini"]},`))
	assert.Equal(t, []string{"gemini-2.5-flash"}, c.FallbacksOf("gemini-2.5-pro"))
	assert.Equal(t, []string{"gpt-4o-mini"}, c.FallbacksOf("gpt-4o"))
	assert.Equal(t, []string{"cheap"}, c.FallbacksOf("o3"))
	assert.Equal(t, []string{"cheap"}, c.FallbacksOf("cheap"), "itself among them: the plugin skips it")
}

func TestFallbacksErrors(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{withItems(perModelItems, `"model_fallbacks":["gpt-4o-mini"],`),
			"model_fallbacks: must be an object keyed by model name, each a list of the models to serve instead, got array"},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":"gpt-4o-mini"},`),
			`model_fallbacks.gpt-4o: must be a list of the models to serve instead, got string "gpt-4o-mini"`},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":[]},`),
			"model_fallbacks.gpt-4o: must name at least one model to serve instead (remove the entry for none)"},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":["gpt-4o-mini","gpt-4o"]},`),
			"model_fallbacks.gpt-4o[1]: is the model itself: a model cannot fall back to itself"},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":["a","a"]},`),
			`model_fallbacks.gpt-4o[1]: names "a" twice`},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":["gpt-4o-mini*"]},`),
			`model_fallbacks.gpt-4o[0]: must name a model to serve, not a pattern: got "gpt-4o-mini*"`},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":["mini model"]},`),
			`model_fallbacks.gpt-4o[0]: must name a model to serve (no spaces or control characters): got "mini model"`},
		{withItems(perModelItems, `"model_fallbacks":{"gpt-4o":["","b"]},`),
			"model_fallbacks.gpt-4o[0]: must not be empty"},
		{withItems(perModelItems, `"model_fallbacks":{"m":["a","b","c","d","e","f","g","h"]},`),
			"model_fallbacks.m: names 8 models: at most 7 are tried"},
		{withItems(`{"limit_by_header":"x-key","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"model_fallbacks":{"gpt-4o":["gpt-4o-mini"]},`),
			"model_fallbacks: no limit depends on the model, so a fallback would never be served: add per_model, limit_by_model or " +
				"limit_by_per_model limits, or, with token_reservation, prices by model (pricing) or token_weights.models"},
	} {
		_, err := ParseString(tt.json)
		require.EqualError(t, err, tt.want, tt.json)
	}
}

// Without model limits, a fallback helps where a cheaper model's reservation
// fits a window its own does not: prices (or weights) by model, reserved.
func TestFallbacksWithPricesUnderReservation(t *testing.T) {
	moneyItem := `{"limit_by_header":"x-key","limit_keys":[{"key":"k","usd_per_day":10}]}`
	prices := `"pricing":{"gpt-4o":{"input":2.5,"output":10},"*":{"input":0.15,"output":0.6}},"model_fallbacks":{"gpt-4o":["gpt-4o-mini"]},`
	c := mustParse(t, withItems(moneyItem, prices, `"token_reservation":{"enabled":true},`))
	assert.Equal(t, []string{"gpt-4o-mini"}, c.FallbacksOf("gpt-4o"))
	_, err := ParseString(withItems(moneyItem, prices))
	require.ErrorContains(t, err, "model_fallbacks: no limit depends on the model", "unreserved, a money window checks what was spent: the model does not change it")
}
