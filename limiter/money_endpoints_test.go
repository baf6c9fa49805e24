package limiter_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
)

// moneyQuotaConfig gives the key sk-1 $0.01 a day (and tokens a minute),
// priced as money_test.go prices models, with the quota endpoint, the
// admin API and overrides on.
func moneyQuotaConfig() string {
	return `{"rule_name": "chat", "quota_path": "/v1/quota", "limit_overrides": true, ` + pricing + `
		"admin": {"path": "/atrl", "consumer": "ops"},
		"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_minute": 100000, "usd_per_day": 0.01}]}],
		` + plugintest.RedisSection + `}`
}

// The quota endpoint and the admin API show a money window in US dollars,
// to the nanodollar a priced response cost; an override of usd_per_day, in
// dollars, changes what the next request may spend; a reset of kind usd
// clears it; a grant of dollars is refused.
func TestMoneyQuotaAndAdmin(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, moneyQuotaConfig())
		use := func(model string, prompt, completion int) *plugintest.Exchange {
			t.Helper()
			x := p.SendBody(chatNaming(model), key).Answer()
			if x.Passed() {
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, prompt, completion))...)
			}
			return x
		}
		// usdLimit is the money window's entry in a local answer's document.
		usdLimit := func(x *plugintest.Exchange) gjson.Result {
			t.Helper()
			local := x.RequireRejected(200)
			l := gjson.GetBytes(local.Data, "subjects.0.limits.1")
			require.Equal(t, "usd", l.Get("kind").Str, "%s", local.Data)
			return l
		}
		// withoutReset is the raw entry without its reset seconds, which move.
		withoutReset := func(l gjson.Result) string {
			reset := l.Get("reset_seconds").Int()
			assert.True(t, reset >= 1 && reset <= 86400, l.Raw)
			return resetSeconds.ReplaceAllString(l.Raw, "")
		}

		// 1,000 × $0.15 + 100 × $0.60 per million: $0.00021.
		require.True(t, use("gpt-4o-mini", 1000, 100).Passed())
		require.Equal(t, int64(210_000), dollarsToday(p, plugintest.APIKeySubject))
		x := p.Call("GET", "/v1/quota", "", key).Answer()
		assert.Equal(t, `{"kind":"usd","window":"day","limit":0.01,"used":0.00021,"remaining":0.00979}`, withoutReset(usdLimit(x)))
		d := document(t, p.Call("GET", "/v1/quota", "", key).Answer(), 200)
		assert.Equal(t, quota.Limit{Kind: "usd", Window: "day", Limit: 10_000_000, Used: 210_000, Remaining: 9_790_000}, limitsOf(d.Subjects[0])[1],
			"read back in nanodollars")
		assert.Equal(t, quota.Limit{Kind: "tokens", Window: "minute", Limit: 100000, Used: 1100, Remaining: 98900}, limitsOf(d.Subjects[0])[0])

		// $0.015 more: over the day's $0.01, the next request is refused.
		require.True(t, use("gpt-4o", 2000, 1000).Passed())
		use("gpt-4o-mini", 1, 1).RequireRejected(429)

		// Raised to $0.02 through the admin API: the next request goes.
		x = p.Call("PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"usd_per_day": 0.02}}`, ops).Answer()
		assert.Equal(t, `{"kind":"usd","window":"day","limit":0.02,"used":0.01521,"remaining":0.00479,"overridden":true}`,
			withoutReset(usdLimit(x)))
		assert.Equal(t, "20000000", redis.Do("HGET", plugintest.APIKeySubject+":o", "u86400").String(), "in nanodollars, under the window's spec")
		require.True(t, use("gpt-4o-mini", 1000, 100).Passed(), "within the override")
		assert.Equal(t, int64(15_420_000), dollarsToday(p, plugintest.APIKeySubject))

		// A grant of dollars is refused, and changes nothing.
		assert.Equal(t, `usd: a grant gives back tokens only; to give a subject money back, reset its money windows ("kind":"usd") or raise its usd_per_* limit with an override`,
			errorOf(t, p.Call("POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1", "usd": 0.01}`, ops), 400))
		assert.Contains(t, errorOf(t, p.Call("PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"usd_per_day": 0}}`, ops), 400),
			"limits.usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got 0")

		// Back to $0.01: refused again; a reset of the money window, which
		// leaves the tokens, lets requests go.
		document(t, p.Call("DELETE", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1"}`, ops).Answer(), 200)
		use("gpt-4o-mini", 1, 1).RequireRejected(429)
		d = document(t, p.Call("POST", "/atrl/reset", `{"rule_item": 0, "value": "sk-1", "kind": "usd"}`, ops).Answer(), 200)
		assert.Equal(t, quota.Limit{Kind: "usd", Window: "day", Limit: 10_000_000, Used: 0, Remaining: 10_000_000}, limitsOf(d.Subjects[0])[1])
		assert.Equal(t, int64(1100+3000+1100), d.Subjects[0].Limits[0].Used, "the tokens are another window")
		require.True(t, use("gpt-4o-mini", 1000, 100).Passed())
		assert.Equal(t, int64(210_000), dollarsToday(p, plugintest.APIKeySubject))
	})
}

// resetSeconds is the reset_seconds member of a document's limit.
var resetSeconds = regexp.MustCompile(`,"reset_seconds":[0-9]+`)
