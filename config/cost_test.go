package config

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

func TestCostOptionsInvalid(t *testing.T) {
	for _, c := range []struct{ name, extra, want string }{
		{"match mode", `,"rule_match_mode":"any"`, `rule_match_mode: must be "first" or "all", got "any"`},
		{"match mode type", `,"rule_match_mode":1`, `rule_match_mode: must be a string, got number 1`},
		{"reservation type", `,"token_reservation":true`, `token_reservation: must be an object, got true`},
		{"reservation enabled", `,"token_reservation":{"enabled":"yes"}`, `token_reservation.enabled: must be a boolean, got string "yes"`},
		{"bytes per token 0", `,"token_reservation":{"bytes_per_token":0}`, `token_reservation.bytes_per_token: must be an integer between 1 and 1048576, got number 0`},
		{"default completion negative", `,"token_reservation":{"default_completion_tokens":-1}`, `token_reservation.default_completion_tokens: must be an integer between 0 and 1099511627776, got number -1`},
		{"max body 0", `,"token_reservation":{"max_body_bytes":0}`, `token_reservation.max_body_bytes: must be an integer between 1 and 67108864, got number 0`},
		{"reservation typo", `,"token_reservation":{"enable":true}`, `token_reservation.enable: unknown field (did you mean enabled?)`},
		{"strategy", `,"token_count_strategy":"tokens"`, `token_count_strategy: must be "total_tokens", "input_tokens", "output_tokens" or "weighted", got "tokens"`},
		{"weights without weighted", `,"token_weights":{"output":4}`, `token_weights: only used with token_count_strategy "weighted", which is not set`},
		{"weights type", `,"token_count_strategy":"weighted","token_weights":[1]`, `token_weights: must be an object, got array`},
		{"negative weight", `,"token_count_strategy":"weighted","token_weights":{"output":-1}`, `token_weights.output: must be a number between 0 and 1000000, got number -1`},
		{"string weight", `,"token_count_strategy":"weighted","token_weights":{"input":"1"}`, `token_weights.input: must be a number between 0 and 1000000, got string "1"`},
		{"weight typo", `,"token_count_strategy":"weighted","token_weights":{"cache_reads":0.1}`, `token_weights.cache_reads: unknown field (did you mean cache_read?)`},
		{"models type", `,"token_count_strategy":"weighted","token_weights":{"models":[]}`, `token_weights.models: must be an object keyed by model name, got array`},
		{"model weight", `,"token_count_strategy":"weighted","token_weights":{"models":{"gpt-4o":{"output":"x"}}}`, `token_weights.models.gpt-4o.output: must be a number between 0 and 1000000, got string "x"`},
		{"nested models", `,"token_count_strategy":"weighted","token_weights":{"models":{"gpt-4o":{"models":{}}}}`, `token_weights.models.gpt-4o.models: unknown field`},
		{"model regexp", `,"token_count_strategy":"weighted","token_weights":{"models":{"regexp:claude-(":{"input":2}}}`, "token_weights.models.\"regexp:claude-(\": invalid regexp \"claude-(\": error parsing regexp: missing closing ): `claude-(`"},
		{"model star inside", `,"token_count_strategy":"weighted","token_weights":{"models":{"claude-*-4":{"input":2}}}`, `token_weights.models."claude-*-4": '*' may only end a model name, as a prefix ("claude-opus-4*"), got "claude-*-4"`},
		{"model two stars", `,"token_count_strategy":"weighted","token_weights":{"models":{"claude**":{"input":2}}}`, `token_weights.models."claude**": '*' may only end a model name, as a prefix ("claude-opus-4*"), got "claude**"`},
		{"model star alone", `,"token_count_strategy":"weighted","token_weights":{"models":{"*":{"input":2}}}`, `token_weights.models."*": a prefix must not be empty (token_weights' own weights apply to every model no key matches)`},
		{"model duplicate", `,"token_count_strategy":"weighted","token_weights":{"models":{"a*":{},"a*":{}}}`, `token_weights.models."a*": duplicate field`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseString(withGlobal(c.extra))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestCostOptionsDefaultsAndValues(t *testing.T) {
	c := mustParse(t, withGlobal(""))
	assert.Equal(t, MatchAll, c.MatchMode, "Higress 2.2.4's: every matching rule item applies")
	assert.Equal(t, MatchFirst, mustParse(t, withGlobal(`,"rule_match_mode":"first"`)).MatchMode)
	assert.Equal(t, Reservation{DefaultCompletionTokens: 1024, MaxBodyBytes: 1 << 20}, c.Reservation)
	assert.Equal(t, int64(4), c.Reservation.SizeBytesPerToken())
	assert.Equal(t, CountTotal, c.Cost.Strategy)

	c = mustParse(t, withGlobal(`,"rule_match_mode":"all","token_reservation":{"enabled":true,"bytes_per_token":3},
		"token_count_strategy":"weighted","token_weights":{"output":4,"cache_read":0.1,
		"models":{"claude-opus-4":{"input":5,"output":25},"cheap":{}}}`))
	assert.Equal(t, MatchAll, c.MatchMode)
	assert.Equal(t, Reservation{Enabled: true, BytesPerToken: 3, DefaultCompletionTokens: 1024, MaxBodyBytes: 1 << 20}, c.Reservation)
	assert.Equal(t, int64(3), c.Reservation.SizeBytesPerToken())
	assert.Equal(t, Weights{Input: 1, Output: 4, CacheRead: 0.1, CacheCreation: 1}, c.Cost.Weights)
	assert.Equal(t, []ModelRule{
		{Key: "claude-opus-4", Kind: ModelExact, Name: "claude-opus-4", Weights: Weights{Input: 5, Output: 25, CacheRead: 0.1, CacheCreation: 1}},
		{Key: "cheap", Kind: ModelExact, Name: "cheap", Weights: c.Cost.Weights},
	}, c.Cost.ModelWeights, "in configuration order; unset weights come from the defaults")
}

func TestCostTokens(t *testing.T) {
	weighted := Cost{Strategy: CountWeighted, Weights: Weights{Input: 1, Output: 4, CacheRead: 0.1, CacheCreation: 1.25},
		ModelWeights: []ModelRule{{Key: "big", Kind: ModelExact, Name: "big", Weights: Weights{Input: 5, Output: 25, CacheRead: 0.5, CacheCreation: 6.25}}}}
	weighted.indexModels()
	for _, c := range []struct {
		name                                  string
		cost                                  Cost
		input, output, cacheRead, cacheCreate int64
		model                                 string
		want                                  int64
	}{
		{"total", Cost{}, 1000, 200, 300, 0, "", 1200},
		{"input", Cost{Strategy: CountInput}, 1000, 200, 300, 0, "", 1000},
		{"output", Cost{Strategy: CountOutput}, 1000, 200, 300, 0, "", 200},
		// 400 uncached + 30 (300 cache reads × 0.1) + 250 (200 writes × 1.25) + 800 (200 output × 4)
		{"weighted", weighted, 900, 200, 300, 200, "", 1480},
		{"weighted rounds up", weighted, 1, 0, 1, 0, "", 1},
		{"no float noise", weighted, 30, 0, 30, 0, "", 3},
		{"per model", weighted, 900, 200, 300, 200, "big", 2000 + 150 + 1250 + 5000},
		{"unknown model: default weights", weighted, 900, 200, 300, 200, "other", 1480},
	} {
		assert.Equal(t, c.want, c.cost.Tokens(c.input, c.output, c.cacheRead, c.cacheCreate, c.model), c.name)
	}
}

func TestMatchAllLayersEveryMatchingItem(t *testing.T) {
	cfg := `{"rule_name":"r","rule_match_mode":"all","rule_items":[
		{"limit_by_per_consumer":"","limit_keys":[{"key":"*","token_per_day":100000}]},
		{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"10.0.0.0/8","token_per_minute":1000},{"key":"0.0.0.0/0","token_per_minute":500}]},
		{"limit_by_header":"x-tier","limit_keys":[{"key":"free","token_per_minute":100}]}],` + redisOK + `}`
	c := mustParse(t, cfg)
	r := &fakeRequest{headers: map[string]string{"x-mse-consumer": "alice"}, peer: "10.1.2.3:5000"}
	got := c.MatchAll(r, nil)
	require.Len(t, got, 2, "consumer and IP; no x-tier header")
	assert.Equal(t, "alice", got[0].Value)
	assert.Equal(t, "10.1.2.3", got[1].Value)
	assert.Equal(t, "10.0.0.0/8", got[1].Key.Key, "first matching key of the item")

	r.headers["x-tier"] = "free"
	assert.Len(t, c.MatchAll(r, nil), 3)

	first := mustParse(t, strings.Replace(cfg, `"all"`, `"first"`, 1))
	got = first.MatchAll(r, got[:0])
	require.Len(t, got, 1, "first mode: one")
	assert.Equal(t, "alice", got[0].Value)
}

// Every count a response reports, or an estimate names, costs at most
// estimate.MaxTokens, and so does their sum: a huge or negative count never
// wraps into a negative charge (which gave a window back) nor sends Redis a
// number its Lua cannot hold.
func TestCostTokensSaturate(t *testing.T) {
	const most = estimate.MaxTokens
	huge := int64(math.MaxInt64)
	weighted := Cost{Strategy: CountWeighted, Weights: Weights{Input: 1, Output: maxWeight, CacheRead: maxWeight, CacheCreation: maxWeight}}
	for _, c := range []struct {
		name                                  string
		cost                                  Cost
		input, output, cacheRead, cacheCreate int64
		want                                  int64
	}{
		{"total of two huge counts", Cost{}, 1, huge, 0, 0, most},
		{"total of two counts just under the bound", Cost{}, most - 1, most - 1, 0, 0, most},
		{"total exactly at the bound", Cost{}, most - 10, 10, 0, 0, most},
		{"input", Cost{Strategy: CountInput}, huge, 5, 0, 0, most},
		{"output", Cost{Strategy: CountOutput}, 5, huge, 0, 0, most},
		{"weighted huge output", weighted, 1, huge, 0, 0, most},
		{"weighted huge cache reads", weighted, huge, 0, huge, 0, most},
		{"weighted: a price past the bound", weighted, 0, most / 1000, 0, 0, most},
		{"weighted exactly at the bound", weighted, 0, most / maxWeight, 0, 0, most},
		{"negative counts count as none", Cost{}, -5, math.MinInt64, 0, 0, 0},
		{"weighted negative counts", weighted, -1, -1, -1, -1, 0},
		{"cache counts above the input", weighted, 10, 0, huge, huge, most},
	} {
		got := c.cost.Tokens(c.input, c.output, c.cacheRead, c.cacheCreate, "")
		assert.Equal(t, c.want, got, c.name)
	}
}

// token_weights.models keys may be prefixes ("claude-opus-4*") and regexps
// as well as exact names, so that dated aliases and snapshots
// (claude-opus-4-20250514) pay their model's weights (issue 14, point 6c:
// they paid the default ones). Precedence: the exact name, then the longest
// prefix, then the regexps in configuration order.
func TestModelWeightsMatchDatedAliases(t *testing.T) {
	c := mustParse(t, withGlobal(`,"token_count_strategy":"weighted","token_weights":{"models":{
		"regexp:opus":            {"input": 2},
		"claude-*":               {"input": 3},
		"claude-opus-4*":         {"input": 4},
		"claude-opus-4":          {"input": 5},
		"regexp:^claude-opus-4-": {"input": 6},
		"regexp:^gpt-4o-\\d{4}-": {"input": 7},
		"gpt-4o*":                {"input": 8}}}`))
	for model, want := range map[string]int64{
		"claude-opus-4":            500, // exact, before the prefixes and regexps that match it too
		"claude-opus-4-20250514":   400, // the longest prefix, before "claude-*" and the regexps
		"claude-opus-4-1":          400,
		"claude-sonnet-4-20250514": 300, // a shorter prefix
		"claude-":                  300, // a prefix matches itself
		"claude":                   100, // shorter than every prefix: the defaults
		"big-opus":                 200, // no exact name, no prefix: the first matching regexp
		"gpt-4o-2024-08-06":        800, // a prefix before a regexp, whatever their order
		"gpt-4":                    100,
		"":                         100, // no model named: the defaults
		"Claude-opus-4":            200, // case-sensitive, as upstreams are ("regexp:opus" still matches)
	} {
		assert.Equal(t, want, c.Cost.Tokens(100, 0, 0, 0, model), model)
	}

	// Regexps in configuration order, whatever their keys.
	c = mustParse(t, withGlobal(`,"token_count_strategy":"weighted","token_weights":{"models":{
		"regexp:z": {"input": 2}, "regexp:a": {"input": 3}}}`))
	assert.Equal(t, int64(200), c.Cost.Tokens(100, 0, 0, 0, "az"))
	c = mustParse(t, withGlobal(`,"token_count_strategy":"weighted","token_weights":{"models":{
		"regexp:a": {"input": 3}, "regexp:z": {"input": 2}}}`))
	assert.Equal(t, int64(300), c.Cost.Tokens(100, 0, 0, 0, "az"))
}
