package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
)

const pricedYAML = `
rule_name: spend
rule_items:
  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "*"
        usd_per_day: 20
        usd_per_hour: 2.5
pricing:
  gpt-4o:            {input: 2.5, output: 10, cache_read: 1.25}
  "claude-sonnet-4*": {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}
  "regexp:^o\\d":    {input: 15, output: 60}
  "*":               {input: 0.075, output: 0.3}
redis:
  service_name: redis.static
`

func TestParsePricing(t *testing.T) {
	c := mustParse(t, fromYAML(t, pricedYAML))
	w := c.Items[0].Keys[0].Windows
	require.Equal(t, []Window{
		{Field: "usd_per_hour", Unit: UnitUSD, Seconds: 3600, Limit: 2_500_000_000},
		{Field: "usd_per_day", Unit: UnitUSD, Seconds: 86400, Limit: 20_000_000_000},
	}, w, "in nanodollars")
	price := func(model string) Price {
		p, _, ok := c.Pricing.PriceOf(model, "")
		require.True(t, ok, model)
		return p
	}
	// Picodollars per token: $2.50 per million tokens is 2,500,000.
	require.Equal(t, textPrice(2_500_000, 10_000_000, 1_250_000, 2_500_000), price("gpt-4o"), "cache_write defaults to input")
	require.Equal(t, textPrice(3_000_000, 15_000_000, 300_000, 3_750_000), price("claude-sonnet-4-20250514"))
	require.Equal(t, textPrice(15_000_000, 60_000_000, 15_000_000, 15_000_000), price("o3"))
	require.Equal(t, textPrice(75_000, 300_000, 75_000, 75_000), price("my-finetune"), `"*"`)
	require.Equal(t, price("my-finetune"), price(""), `a request naming no model: "*"`)
	require.Equal(t, pricing.Strictest(textPrice(15_000_000, 60_000_000, 15_000_000, 15_000_000), pricing.Dearest("openai")),
		price(UnknownModel), "the dearest of each kind, of pricing and of the catalog's OpenAI models")
}

// textPrice is a price that gives its input, output and cache kinds, the
// others at their defaults.
func textPrice(input, output, cacheRead, cacheWrite int64) Price {
	u := pricing.Unset
	return Price{Input: input, Output: output, CacheRead: cacheRead, CacheWrite: cacheWrite,
		Reasoning: u, InputAudio: u, OutputAudio: u, InputImage: u, OutputImage: u}.WithDefaults()
}

func TestNanoUSD(t *testing.T) {
	c := mustParse(t, fromYAML(t, pricedYAML))
	p := &c.Pricing
	// 1,000 input (200 read from the cache) and 100 output tokens of gpt-4o:
	// 800 × 2.5 + 200 × 1.25 + 100 × 10 = 3,250 µ$ per million... in
	// nanodollars: 800×2,500 + 200×1,250 + 100×10,000 = 3,250,000.
	require.Equal(t, int64(3_250_000), p.NanoUSD(pricing.Tokens{Input: 1000, Output: 100, CacheRead: 200}, "gpt-4o", ""))
	// Cache writes at their own price.
	require.Equal(t, int64(1000*3_750), p.NanoUSD(pricing.Tokens{Input: 1000, CacheWrite: 1000}, "claude-sonnet-4-5", ""))
	// One token at $0.075 per million is 75 nanodollars; at $0.0005, half
	// a nanodollar, rounded up.
	require.Equal(t, int64(75), p.NanoUSD(pricing.Tokens{Input: 1, Output: 0}, "llama", ""))
	tiny := Pricing{Any: &Price{Input: 500}, Catalog: false}
	require.Equal(t, int64(1), tiny.NanoUSD(pricing.Tokens{Input: 1, Output: 0}, "x", ""))
	require.Equal(t, int64(1), tiny.NanoUSD(pricing.Tokens{Input: 2, Output: 0}, "x", ""))
	require.Equal(t, int64(2), tiny.NanoUSD(pricing.Tokens{Input: 3, Output: 0}, "x", ""))
	require.Equal(t, int64(0), p.NanoUSD(pricing.Tokens{}, "llama", ""))
	// Bounded: negative counts are 0, huge ones saturate at MaxLimit.
	require.Equal(t, int64(0), p.NanoUSD(pricing.Tokens{Input: -5, Output: -5, CacheRead: -1, CacheWrite: -1}, "gpt-4o", ""))
	require.Equal(t, int64(MaxLimit), p.NanoUSD(pricing.Tokens{Input: 1 << 62, Output: 1 << 62}, "o1", ""))
	// Exact: a million requests add up to a million times one, in integers.
	var sum int64
	for range 1_000_000 {
		sum += p.NanoUSD(pricing.Tokens{Input: 1234, Output: 567, CacheRead: 89}, "gpt-4o", "")
	}
	require.Equal(t, 1_000_000*p.NanoUSD(pricing.Tokens{Input: 1234, Output: 567, CacheRead: 89}, "gpt-4o", ""), sum)
	require.Equal(t, "20", FormatUSD(20_000_000_000))
	require.Equal(t, "0.5", FormatUSD(500_000_000))
	require.Equal(t, "0.000003251", FormatUSD(3251))
}

func TestParsePricingInvalid(t *testing.T) {
	items := `"rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"k","usd_per_day":5}]}],`
	for _, tc := range []struct{ name, config, msg string }{
		{"catalog off, money without pricing", `{"rule_name":"r","pricing_catalog":"off",` + items + redisOK + `}`,
			"rule_items[0].limit_keys[0].usd_per_day: counts money: set pricing, the price of each model in US dollars per million tokens (pricing_catalog is off)"},
		{"catalog off, no price for other models", `{"rule_name":"r","pricing_catalog":false,` + items + `"pricing":{"gpt-4o":{"input":1,"output":2}},` + redisOK + `}`,
			`pricing: no price for the models no entry names: add a "*" entry, since rule_items[0].limit_keys[0].usd_per_day counts every model's requests in dollars (pricing_catalog is off)`},
		{"catalog off, a per_model entry's exact model unpriced", `{"rule_name":"r","pricing_catalog":"off","rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"k","token_per_day":5,"per_model":[{"model":"o3","usd_per_day":5}]}]}],"pricing":{"gpt-4o":{"input":1,"output":2}},` + redisOK + `}`,
			`pricing: no price for model "o3", which rule_items[0].limit_keys[0].per_model[0].usd_per_day counts in dollars`},
		{"pricing_catalog neither on nor off", `{"rule_name":"r","pricing_catalog":"yes",` + items + redisOK + `}`,
			`pricing_catalog: must be on or off, got string "yes"`},
		{"negative price", `{"rule_name":"r",` + items + `"pricing":{"*":{"input":-1,"output":2}},` + redisOK + `}`,
			`pricing."*".input: must be a number between 0 and 1000000, got number -1`},
		{"price as a string", `{"rule_name":"r",` + items + `"pricing":{"*":{"input":"1","output":2}},` + redisOK + `}`,
			`pricing."*".input: must be a number between 0 and 1000000, got string "1"`},
		{"output missing", `{"rule_name":"r",` + items + `"pricing":{"*":{"input":1}},` + redisOK + `}`,
			`pricing."*".output: required`},
		{"unknown price field", `{"rule_name":"r",` + items + `"pricing":{"*":{"input":1,"output":1,"cache_creation":1}},` + redisOK + `}`,
			`pricing."*".cache_creation: unknown field`},
		{"zero dollars", `{"rule_name":"r","rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"k","usd_per_day":0}]}],"pricing":{"*":{"input":1,"output":1}},` + redisOK + `}`,
			"rule_items[0].limit_keys[0].usd_per_day: must be more than 0 US dollars, got number 0"},
		{"too many dollars", `{"rule_name":"r","rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"k","usd_per_day":1e9}]}],"pricing":{"*":{"input":1,"output":1}},` + redisOK + `}`,
			"rule_items[0].limit_keys[0].usd_per_day: must be a number between 0 and 9000000, got number 1e9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(gjson.Parse(tc.config))
			require.EqualError(t, err, tc.msg)
		})
	}
	// Priced exactly, a per_model entry needs no "*".
	mustParse(t, `{"rule_name":"r","pricing_catalog":"off","rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"k","token_per_day":5,"per_model":[{"model":"gpt-4o","usd_per_day":5}]}]}],"pricing":{"gpt-4o":{"input":1,"output":2}},`+redisOK+`}`)
	// With the catalog (on by default), money needs no pricing at all.
	for _, on := range []string{``, `"pricing_catalog":"on",`, `"pricing_catalog":true,`} {
		c := mustParse(t, `{"rule_name":"r",`+on+items+redisOK+`}`)
		require.True(t, c.Pricing.Catalog && c.Pricing.Money && c.PricesByModel(), on)
	}
}

// With the catalog, a model's price comes from its entry, else the
// catalog (the route's provider first), else "*", else its provider's
// dearest; each answer says where it came from.
func TestPriceOfSaysWhereThePriceComesFrom(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"k","usd_per_day":5}]}],
		"pricing":{"gpt-4o":{"input":1,"output":2}},`+redisOK+`}`)
	p := &c.Pricing
	source := func(model, provider string) PriceSource {
		_, s, ok := p.PriceOf(model, provider)
		require.True(t, ok, model)
		return s
	}
	assert.Equal(t, PriceSource{From: FromEntry, Key: "gpt-4o"}, source("gpt-4o", ""))
	assert.Equal(t, PriceSource{From: FromCatalog, Provider: "openai", Model: "gpt-4o-mini"}, source("gpt-4o-mini", ""))
	assert.Equal(t, PriceSource{From: FromCatalog, Provider: "anthropic", Model: "claude-sonnet-4-5"}, source("claude-sonnet-4-5-20250929", "anthropic"))
	assert.Equal(t, "aws", source("anthropic.claude-3-5-sonnet-20240620-v1:0", "aws").Provider, "a Bedrock route's model at Bedrock's price")
	assert.Equal(t, PriceSource{From: FromDearest, Provider: "anthropic"}, source("claude-99", ""), "its name says Anthropic")
	assert.Equal(t, PriceSource{From: FromDearest, Provider: "google"}, source("my-tuned", "google"), "its route says Google")
	assert.Equal(t, PriceSource{From: FromStrictest, Provider: "google"}, source(UnknownModel, "google"))
	price, _, _ := p.PriceOf(UnknownModel, "google")
	assert.Equal(t, pricing.Strictest(textPrice(1_000_000, 2_000_000, 1_000_000, 1_000_000), pricing.Dearest("google")), price)
	notes := c.pricingNotes(time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), "2027-01-01")
	assert.Len(t, notes, 1)
	assert.Contains(t, notes[0], "provider's dearest price")
	notes = c.pricingNotes(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "2027-01-01")
	assert.Len(t, notes, 2, "from the day a price changes, the catalog is said to be out of date")
	assert.Contains(t, notes[1], "prices it lists changed on 2027-01-01")
	assert.Len(t, c.pricingNotes(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), ""), 1, "a catalog that knows of no change")
	assert.Equal(t, []string{"gpt-4o"}, c.NamedModels())

	// The route's provider is what its path and API say.
	for _, tc := range []struct {
		path string
		api  estimate.Dialect
		want string
	}{
		{"/v1/chat/completions", estimate.DialectOpenAIChat, ""},
		{"/v1/messages", estimate.DialectAnthropic, "anthropic"},
		{"/v1beta/models/gemini-2.5-pro:generateContent", estimate.DialectGemini, "google"},
		{"/model/us.anthropic.claude-3-5-sonnet-20240620-v1:0/converse", estimate.DialectOther, "aws"},
		{"/openai/deployments/prod/chat/completions", estimate.DialectOpenAIChat, "azure"},
	} {
		assert.Equal(t, tc.want, PriceProvider(c.Route(tc.path), tc.api), tc.path)
	}

	// Without money windows nor entries, nothing is priced.
	plain := mustParse(t, withItems(item(`"limit_by_header":"h"`, `"*"`)))
	_, _, ok := plain.Pricing.PriceOf("gpt-4o", "")
	assert.False(t, ok)
	assert.Empty(t, plain.PricingNotes())
}
