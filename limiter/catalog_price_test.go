package limiter_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	listprices "github.com/tokenlimit/ai-token-ratelimit/pricing"
)

// Issue 55, point 1: money limits without pricing, at the list prices of
// the catalog built into the plugin. Through the plugin (Go and WASM mode)
// on a real Redis. The prices asserted are the providers' published list
// prices, per million tokens.

// converseAnswer is a Bedrock Converse response reporting its usage.
func converseAnswer(input, output int) string {
	return `{"output":{"message":{"role":"assistant","content":[{"text":"Hi."}]}},"stopReason":"end_turn",` +
		`"usage":{"inputTokens":` + strconv.Itoa(input) + `,"outputTokens":` + strconv.Itoa(output) + `,"totalTokens":` + strconv.Itoa(input+output) + `},"metrics":{"latencyMs":80}}`
}

// "A dollar limit without pricing holds at the catalog's prices": each
// request is charged its model's list price, to the nanodollar, on the
// route its provider serves.
func TestMoneyPricedFromTheCatalog(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			name, path, body, contentType, answer string
			want                                  int64 // nanodollars
		}{
			{"gpt-4o, dated ($2.50/$10, cache reads $1.25)", "/v1/chat/completions", chatNaming("gpt-4o-2024-08-06"), "text/event-stream",
				plugintest.OpenAIStream(1, 1000, 200), 1000*2_500 + 200*10_000},
			{"claude-sonnet-4-5 ($3/$15, cache writes $3.75, reads $0.30)", "/v1/messages",
				`{"model":"claude-sonnet-4-5-20250929","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`, "text/event-stream",
				plugintest.AnthropicStream(100, 2000, 5000, 300), 100*3_000 + 2000*3_750 + 5000*300 + 300*15_000},
			{"gemini-2.5-flash on its path ($0.30/$2.50)", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
				`{"contents":[{"parts":[{"text":"Hi"}]}]}`, "text/event-stream",
				plugintest.GeminiStream(1000, 200), 1000*300 + 200*2_500},
			{"a Bedrock id on its path, cross-region ($3/$15)", "/model/us.anthropic.claude-3-5-sonnet-20240620-v1:0/converse",
				`{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`, "application/json",
				converseAnswer(1000, 200), 1000*3_000 + 200*15_000},
			{"an Azure deployment of gpt-4o (deployments), at Azure's price ($2.50/$10)", "/openai/deployments/prod/chat/completions?api-version=2024-10-21",
				chatNaming("gpt-4o-mini"), "text/event-stream", plugintest.OpenAIStream(1, 1000, 200), 1000*2_500 + 200*10_000},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"deployments": {"prod": "gpt-4o"},`, `"usd_per_day": 100`))
				x := p.Call("POST", c.path, c.body, key).Answer()
				require.True(t, x.Passed())
				x.Respond(c.contentType, plugintest.SSEEvents(c.answer)...)
				assert.Equal(t, c.want, dollarsToday(p, plugintest.APIKeySubject))
			})
		}
	})
}

// The limit holds at those prices: $0.01 a day is two gpt-4o requests of
// 1,000 input and 200 output tokens ($0.0045 each), not three.
func TestMoneyLimitHoldsAtCatalogPrices(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"usd_per_day": 0.01`))
		for range 3 {
			x := p.SendBody(chatNaming("gpt-4o"), key).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1000, 200))...)
		}
		assert.Equal(t, int64(3*4_500_000), dollarsToday(p, plugintest.APIKeySubject), "the third went while something was left")
		p.SendBody(chatNaming("gpt-4o"), key).Answer().RequireRejected(429)
	})
}

// A pricing entry wins over the catalog; "*" prices what the catalog does
// not list; without "*", an unlisted model is charged its provider's
// dearest catalog price, and counted.
func TestMoneyPricingEntriesAndUnlistedModels(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		// charge is what one request of 1,000 input and 200 output tokens
		// of model costs under prices, and the unlisted-model counter of
		// model after it (each plugin in a subtest of its own: one host at
		// a time).
		charge := func(name, prices, model string) (cost int64, unlisted uint64, counted bool) {
			t.Run(name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(prices, `"usd_per_day": 1000`))
				x := p.SendBody(chatNaming(model), key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1000, 200))...)
				cost = dollarsToday(p, plugintest.APIKeySubject)
				unlisted, counted = metricValue(p, model, "none", "token_ratelimit_unlisted_model_count")
			})
			return
		}
		own := `"pricing": {"gpt-4o": {"input": 1, "output": 1}, "*": {"input": 0.5, "output": 0.5}},`
		got, _, _ := charge("own entry", own, "gpt-4o")
		assert.Equal(t, int64(1200*1_000), got, "its own entry, not the list price")
		got, _, _ = charge("catalog before any", own, "gpt-4o-mini")
		assert.Equal(t, int64(1000*150+200*600), got, "the catalog before \"*\"")
		got, _, counted := charge("any", own, "my-finetune")
		assert.Equal(t, int64(1200*500), got, "\"*\" for a model the catalog does not list")
		assert.False(t, counted, "priced by \"*\": not counted")

		dearest := listprices.Dearest("openai")
		got, n, _ := charge("unlisted", "", "my-finetune")
		assert.Equal(t, dearest.NanoUSD(listprices.Tokens{Input: 1000, Output: 200}), got, "OpenAI's dearest on an OpenAI path")
		assert.Greater(t, got, int64(1000*2_500+200*10_000), "dearer than gpt-4o")
		assert.Equal(t, uint64(1), n, "counted")
		_, _, counted = charge("listed", "", "gpt-4o")
		assert.False(t, counted, "a listed model is not counted")
	})
}

// The quota endpoint, asked with ?model=, says the model's price and where
// it comes from.
func TestQuotaAnswerSaysThePrice(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	config := `{"rule_name": "chat", "quota_path": "/v1/quota", "pricing": {"my-llama": {"input": 0.2, "output": 0.6}},
		"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "usd_per_day": 5}]}],
		` + plugintest.RedisSection + `}`
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, config)
		price := func(model string) gjson.Result {
			t.Helper()
			local := p.Call("GET", "/v1/quota?model="+model, "", key).Answer().RequireRejected(200)
			return gjson.GetBytes(local.Data, "price")
		}
		got := price("claude-sonnet-4-5-20250929")
		assert.Equal(t, `catalog anthropic/claude-sonnet-4-5 3 15 0.3 3.75`, got.Get("source").Str+" "+got.Get("listed_as").Str+" "+
			got.Get("usd_per_million_tokens.input").Raw+" "+got.Get("usd_per_million_tokens.output").Raw+" "+
			got.Get("usd_per_million_tokens.cache_read").Raw+" "+got.Get("usd_per_million_tokens.cache_write").Raw, got.Raw)
		got = price("my-llama")
		assert.Equal(t, `pricing my-llama 0.2 0.6`, got.Get("source").Str+" "+got.Get("entry").Str+" "+
			got.Get("usd_per_million_tokens.input").Raw+" "+got.Get("usd_per_million_tokens.output").Raw, got.Raw)
		got = price("my-other-model")
		assert.Equal(t, "unlisted openai", got.Get("source").Str+" "+got.Get("provider").Str, got.Raw)
		local := p.Call("GET", "/v1/quota", "", key).Answer().RequireRejected(200)
		assert.False(t, gjson.GetBytes(local.Data, "price").Exists(), "no model asked, no price: %s", local.Data)
	})
}
