package limiter_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 26, money: budgets in dollars, priced by model, counted exactly in
// nanodollars. Through the plugin (Go and WASM mode) on a real Redis.

// pricing prices gpt-4o at $2.50/$10 per million input/output tokens
// (cache reads $1.25), gpt-4o-mini at $0.15/$0.60, claude-sonnet-4* at
// $3/$15 (cache reads $0.30, writes $3.75), every other model at $1/$2.
const pricing = `"pricing": {
	"gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25},
	"gpt-4o-mini": {"input": 0.15, "output": 0.6},
	"claude-sonnet-4*": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
	"*": {"input": 1, "output": 2}},`

// dollarsToday reads the money day counter of a subject, in nanodollars.
func dollarsToday(p *plugintest.Plugin, subject string) int64 {
	return plugintest.Counter(p.Redis, subject, "u86400", p.Redis.Now())
}

// "A key whose cheap requests add up to just under its daily dollars is
// admitted for one more expensive request and then rejected."
func TestMoneyDailyBudget(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		// $0.01 a day.
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(pricing+`"show_limit_quota_header": true,`, `"usd_per_day": 0.01`))
		use := func(model string, prompt, completion int) {
			t.Helper()
			x := p.SendBody(chatNaming(model), key).Answer()
			require.True(t, x.Passed(), "%s: %d of 10,000,000 nanodollars used", model, dollarsToday(p, plugintest.APIKeySubject))
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, prompt, completion))...)
		}
		// 47 cheap requests: 47 × (1,000 × 150 + 100 × 600) = 47 × 210,000.
		for range 47 {
			use("gpt-4o-mini", 1000, 100)
		}
		assert.Equal(t, int64(47*210_000), dollarsToday(p, plugintest.APIKeySubject), "$0.00987")
		// Under the budget: one more, an expensive one, goes (2,000 × 2,500
		// + 1,000 × 10,000 = 15,000,000: $0.015), and the key is over.
		use("gpt-4o", 2000, 1000)
		assert.Equal(t, int64(47*210_000+15_000_000), dollarsToday(p, plugintest.APIKeySubject))
		x := p.SendBody(chatNaming("gpt-4o-mini"), key).Answer()
		local := x.RequireRejected(429)
		assert.NotEmpty(t, plugintest.Header(local.Headers, "Retry-After"))
		assert.Equal(t, "0.01", plugintest.Header(local.Headers, "X-TokenRateLimit-Limit"), "in dollars")
		x.Done()
	})
}

// Cache reads and writes are priced at their own rates, input without
// them, output as reported; with token_reservation, the estimate priced is
// reserved and reconciled to the exact cost.
func TestMoneyPricedAsBilled(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, reserve := range []string{"", plugintest.ReservationOn} {
			t.Run(fmt.Sprintf("reservation %v", reserve != ""), func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(reserve+pricing, `"usd_per_day": 100, "token_per_day": 1000000`))
				x := p.SendBody(chatNaming("claude-sonnet-4-5"), key).Answer()
				require.True(t, x.Passed())
				if reserve != "" {
					// Reserved: the prompt estimate and max_tokens 10 at sonnet's prices.
					assert.Positive(t, dollarsToday(p, plugintest.APIKeySubject), "reserved")
				}
				// 100 input, 2,000 written to the cache, 5,000 read from it, 300 output.
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(100, 2000, 5000, 300))...)
				want := int64(100*3_000 + 2000*3_750 + 5000*300 + 300*15_000)
				assert.Equal(t, want, dollarsToday(p, plugintest.APIKeySubject), "$0.0138, to the nanodollar")
				assert.Equal(t, int64(100+2000+5000+300), p.DayCounter(plugintest.APIKeySubject), "tokens as before")
			})
		}
	})
}

// Issue 35, point 1: a Gemini route priced as the model its path names,
// not the cheaper one its body names (which Gemini ignores); an Azure
// deployment as the model deployments maps it to.
func TestMoneyPricedAsTheRoutesModel(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	prices := `"pricing": {"gemini-2.5-pro": {"input": 1.25, "output": 10}, "gemini-2.0-flash-lite": {"input": 0.075, "output": 0.3},
		"gpt-4o": {"input": 2.5, "output": 10}, "*": {"input": 0.01, "output": 0.01}}, "deployments": {"prod": "gpt-4o"},`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			path, body, usage string
			want              int64 // nanodollars
		}{
			{"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", `{"model":"gemini-2.0-flash-lite","contents":[{"parts":[{"text":"Hi"}]}]}`,
				plugintest.GeminiStream(1000, 200), 1000*1_250 + 200*10_000},
			{"/openai/deployments/prod/chat/completions?api-version=2024-10-21", chatNaming("gpt-4o-mini"),
				plugintest.OpenAIStream(1, 1000, 200), 1000*2_500 + 200*10_000},
		} {
			t.Run(c.path, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(prices, `"usd_per_day": 100`))
				x := p.Call("POST", c.path, c.body, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(c.usage)...)
				assert.Equal(t, c.want, dollarsToday(p, plugintest.APIKeySubject))
			})
		}
	})
}
