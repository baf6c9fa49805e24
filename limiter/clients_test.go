package limiter_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 27: what clients and operators see.

// clientsClock is a second 1 h 30 s into a UTC day: the minute resets in
// 30 s, the day in 82,770 s.
const clientsClock = 20834*86400 + 3600 + 30

// Each quota header form, on a 200 and on a 429, with exact values: two
// token windows and a request window, 300 tokens spent by a first request.
func TestQuotaHeaderForms(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"quota_headers": ["tokenratelimit", "openai", "ietf"],`,
			`"token_per_minute": 1000, "token_per_day": 1500, "query_per_minute": 5`))
		p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 200, 100))...)

		x := p.Request(key)
		got := x.ResponseHeaders("text/event-stream")
		policy := `"item0.token_per_minute";q=1000;w=60;qu="tokens", "item0.query_per_minute";q=5;w=60, "item0.token_per_day";q=1500;w=86400;qu="tokens"`
		for name, want := range map[string]string{
			// The tightest window: the minute (700 left; the day has 1,200).
			"X-TokenRateLimit-Limit": "1000", "X-TokenRateLimit-Remaining": "700", "X-TokenRateLimit-Reset": "30",
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "700", "x-ratelimit-reset-tokens": "30s",
			// This request counted: 3 of 5 left.
			"x-ratelimit-limit-requests": "5", "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "30s",
			"RateLimit-Policy": policy,
			"RateLimit":        `"item0.token_per_minute";r=700;t=30, "item0.query_per_minute";r=3;t=30`,
		} {
			assert.Equal(t, want, plugintest.Header(got, name), name)
		}
		x.P.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(1, 600, 100)), true)
		x.Answer().Done()

		local := p.Request(key).RequireRejected(429)
		for name, want := range map[string]string{
			"Retry-After": "30", "retry-after-ms": "30000",
			"X-TokenRateLimit-Limit": "1000", "X-TokenRateLimit-Remaining": "0", "X-TokenRateLimit-Reset": "30",
			"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30s",
			// Not counted: what it would have left.
			"x-ratelimit-remaining-requests": "2",
			"RateLimit-Policy":               policy,
			"RateLimit":                      `"item0.token_per_minute";r=0;t=30, "item0.query_per_minute";r=2;t=30`,
			"content-type":                   "application/json",
		} {
			assert.Equal(t, want, plugintest.Header(local.Headers, name), name)
		}
		assert.JSONEq(t, `{"error":{"message":"Token rate limit exceeded: the limit of 1000 tokens per minute is used up (rule_item=0; key=s...#0f2c10bf). Try again in 30s.",
			"type":"tokens","param":null,"code":"rate_limit_exceeded"}}`, string(local.Data))
	})
}

// Without rejected_msg, a rejection is an error in the request's API's own
// shape, naming the limit and when it has room again; other paths keep the
// text they had; a configured rejected_msg wins everywhere.
func TestRejectionSpeaksTheAPI(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig("", `"query_per_minute": 1`))
		require.True(t, p.Request(key).Passed())
		for _, c := range []struct{ path, contentType, body string }{
			{"/v1/messages", "application/json", `{"type":"error","error":{"type":"rate_limit_error",
				"message":"Request rate limit exceeded: the limit of 1 requests per minute is reached (rule_item=0; key=s...#0f2c10bf). Try again in 30s."}}`},
			{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "application/json", `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED",
				"message":"Request rate limit exceeded: the limit of 1 requests per minute is reached (rule_item=0; key=s...#0f2c10bf). Try again in 30s."}}`},
			{"/v1/responses", "application/json", `{"error":{"type":"requests","param":null,"code":"rate_limit_exceeded",
				"message":"Request rate limit exceeded: the limit of 1 requests per minute is reached (rule_item=0; key=s...#0f2c10bf). Try again in 30s."}}`},
			{"/v1/some/other/api", "text/plain; charset=utf-8", `Too many requests`},
		} {
			local := p.SendTo(c.path, key).Answer().RequireRejected(429)
			assert.Equal(t, c.contentType, plugintest.Header(local.Headers, "content-type"), c.path)
			if c.contentType == "application/json" {
				assert.JSONEq(t, c.body, string(local.Data), c.path)
			} else {
				assert.Equal(t, c.body, string(local.Data), c.path)
			}
		}
		// An Anthropic client on a path of its own is known by its version header.
		local := p.SendTo("/anthropic/proxy", key, [2]string{"anthropic-version", "2023-06-01"}).Answer().RequireRejected(429)
		assert.Contains(t, string(local.Data), `"rate_limit_error"`)

		p.Stop()
		p = plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"rejected_msg": "slow down",`, `"query_per_minute": 1`))
		require.True(t, p.Request(key).Passed())
		local = p.SendTo("/v1/messages", key).Answer().RequireRejected(429)
		assert.Equal(t, "slow down", string(local.Data), "rejected_msg wins")
	})
}

// A money limit's rejection names the budget in dollars.
func TestRejectionNamesTheBudget(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"pricing": {"*": {"input": 2.5, "output": 10}}, "pricing_catalog": "off",`, `"usd_per_day": 0.001`))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":400,"completion_tokens":100}}`) // $0.002
		local := p.Request(key).RequireRejected(429)
		assert.Contains(t, string(local.Data), `Spending limit exceeded: the budget of $0.001 per day is used up (rule_item=0; key=s...#0f2c10bf). Try again in 22h59m30s.`)
		assert.Contains(t, string(local.Data), `"type":"usd"`)
		assert.Equal(t, "82770000", plugintest.Header(local.Headers, "retry-after-ms"))
	})
}

// shadow_mode: everything is counted and charged as usual, nothing is
// rejected; what would have been is counted and logged.
func TestShadowMode(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"shadow_mode": true, "show_limit_quota_header": true,`,
			`"token_per_minute": 500, "query_per_minute": 2, "max_concurrent_requests": 1`))
		var open []*plugintest.Exchange
		for i := range 4 {
			x := p.Request(key)
			require.True(t, x.Passed(), "request %d: shadow_mode rejects nothing", i)
			open = append(open, x)
		}
		// Read at once: in WASM mode the emulator's log lines are views of
		// the module's memory, which it reuses.
		logs := strings.Join(p.Host.GetWarnLogs(), "\n")
		assert.Contains(t, logs, "shadow_mode: rule chat would have answered 429: Too many concurrent requests: at most 1 may be in progress at once (rule_item=0; key=s...#0f2c10bf)")
		assert.Equal(t, 1, strings.Count(logs, "shadow_mode:"), "one line every 10 s")
		for _, x := range open {
			x.Respond("application/json", `{"usage":{"prompt_tokens":150,"completion_tokens":50}}`)
		}
		minute := ":" + strconv.Itoa(clientsClock/60)
		assert.Equal(t, int64(800), redis.Int("GET", plugintest.APIKeySubject+":t60"+minute), "every response charged, past the limit")
		assert.Equal(t, int64(4), redis.Int("GET", plugintest.APIKeySubject+":q60"+minute), "every request counted")
		assert.Equal(t, uint64(3), counted(p, "none", "token_ratelimit_shadow_reject_count"), "requests 2 to 4 would have been rejected")
		assert.Zero(t, counted(p, "none", rejected))

		x := p.Request(key)
		require.True(t, x.Passed())
		headers := x.ResponseHeaders("application/json")
		assert.Equal(t, "0", plugintest.Header(headers, "X-TokenRateLimit-Remaining"), "the headers show the real quota")
		x.Done()
	})
}

// A request that matches no rule item passes unlimited: it is counted, and
// a warning says what the rule items found in it (never a value).
func TestUnmatchedRequestsAreCountedAndWarned(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 500`))
		for range 3 {
			x := p.Request([2]string{"authorization", "Bearer sk-secret"}) // the SDK's header, not x-api-key
			require.True(t, x.Passed())
			x.Done()
		}
		assert.Equal(t, uint64(3), counted(p, "none", "token_ratelimit_unmatched_count"))
		logs := strings.Join(p.Host.GetWarnLogs(), "\n")
		assert.Equal(t, 1, strings.Count(logs, "matched no rule item"), "rate-limited: %s", logs)
		assert.Contains(t, logs, "rule chat: a request to /v1/chat/completions matched no rule item and passed unlimited (0 more since the last line); limit_by_header x-api-key: absent. "+
			"Check that clients send what the rule items read, or set unmatched_threshold to limit such requests")
		assert.NotContains(t, logs, "sk-secret")

		p.Request([2]string{"x-api-key", "sk-2"}).Done() // present, but no key matches it
		assert.Equal(t, uint64(4), counted(p, "none", "token_ratelimit_unmatched_count"))

		p.Stop()
		p = plugintest.Start(t, redis, `{"rule_name": "chat", "rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_minute": 500}]}],
			"unmatched_threshold": {"query_per_minute": 100}, `+plugintest.RedisSection+`}`)
		p.Request([2]string{"x-api-key", "sk-2"}).Done()
		assert.Equal(t, uint64(1), counted(p, "none", "token_ratelimit_unmatched_count"), "limited by unmatched_threshold, still counted")
		assert.NotContains(t, strings.Join(p.Host.GetWarnLogs(), "\n"), "matched no rule item", "but it is limited: no warning")

		// Beside a global threshold: counted, limited by it, not warned of.
		p.Stop()
		p = plugintest.Start(t, redis, `{"rule_name": "chat", "global_threshold": {"token_per_minute": 5000},
			"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_minute": 500}]}], `+plugintest.RedisSection+`}`)
		p.Request([2]string{"x-api-key", "sk-2"}).Done()
		p.Request(plugintest.APIKey).Done()
		assert.Equal(t, uint64(1), counted(p, "none", "token_ratelimit_unmatched_count"), "sk-2 matched no rule item")
		assert.NotContains(t, strings.Join(p.Host.GetWarnLogs(), "\n"), "matched no rule item", "limited by global_threshold: no warning")
	})
}

// Two rule items reading one header, of two types: a warning when the
// plugin starts (a request both match is limited by both); of one type, a
// line at info (they merge).
func TestItemsReadingOneValueAreLogged(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.Start(t, redis, `{"rule_name": "chat", "rule_items": [
			{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-premium-1", "token_per_minute": 100000}]},
			{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_minute": 10000}]},
			{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-free-", "token_per_minute": 1000}]}],
			`+plugintest.RedisSection+`}`)
		warnings := strings.Join(p.Host.GetWarnLogs(), "\n")
		assert.Contains(t, warnings, "rule chat: rule_items[0] (limit_by_header x-api-key) and rule_items[1] (limit_by_per_header x-api-key) read the same value")
		assert.NotContains(t, warnings, "rule_items[1] (limit_by_per_header x-api-key) and rule_items[2]")
		assert.Contains(t, strings.Join(p.Host.GetInfoLogs(), "\n"),
			"rule chat: rule_items[1] (limit_by_per_header x-api-key) and rule_items[2] (limit_by_per_header x-api-key) name one subject")
	})
}

// quotaHeaderNames are the headers that say what a limit has left: each
// quota header form, and the wait of a rejection.
var quotaHeaderNames = []string{
	"Retry-After", "retry-after-ms",
	"X-TokenRateLimit-Limit", "X-TokenRateLimit-Remaining", "X-TokenRateLimit-Reset",
	"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
	"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
	"RateLimit",
}

// quotaHeadersOf are the quotaHeaderNames a response carries, by name.
func quotaHeadersOf(headers [][2]string) map[string]string {
	got := map[string]string{}
	for _, name := range quotaHeaderNames {
		if v := plugintest.Header(headers, name); v != "" {
			got[name] = v
		}
	}
	return got
}

// makeRunLimits are the limits of make run's example
// (tools/localgw/example.yaml): every API key 100 tokens a minute and $1 a
// day, all keys together $20 a day, of which the last $5 are kept for
// x-priority: high; every model at $2.50/$10 per million tokens (the
// catalog off, so that a request is admitted at its headers: these tests
// send none of the bodies whose model the catalog would price); every
// quota header form.
const makeRunLimits = `{"rule_name": "local-demo",
	"priority": {"levels": ["high", "low"], "header": "x-priority"},
	"global_threshold": {"usd_per_day": 20, "reserve": {"high": 25}},
	"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100, "usd_per_day": 1}]}],
	"pricing": {"*": {"input": 2.5, "output": 10}}, "pricing_catalog": "off",
	"quota_headers": ["tokenratelimit", "openai", "ietf"],
	` + plugintest.RedisSection + `}`

// Issue 52, point 6: under make run's limits, each header form describes
// one limit, on a 200 and on each 429: its limit, remaining and reset are
// one window's. A dollar 429 (the key's day spent, its token minute
// untouched) said x-ratelimit-limit-tokens: 100 (the minute's) with
// remaining 0 and the day's reset. Now the OpenAI form, which names tokens
// and requests only, is left out of a rejection by a limit it cannot name:
// its token window with room beside a 429 read as "not limited" (issue 36),
// and a 0 with the day's reset mixed two limits. Retry-After, the
// X-TokenRateLimit form and RateLimit name the day.
func TestQuotaHeadersDescribeOneLimit(t *testing.T) {
	redis := redistest.Start(t)
	spender := [2]string{"x-api-key", "demo-1"}
	chatty := [2]string{"x-api-key", "demo-2"}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.StartOver(t, clientsClock) // the minute resets in 30 s, the day in 82,770 s
		p := plugintest.Start(t, redis, makeRunLimits)

		// A 200: the key's minute (the tightest token window) in the
		// X-TokenRateLimit and OpenAI forms; RateLimit the tightest window
		// of each kind, the key's day ($1 left of it; all keys' low share:
		// $15).
		x := p.Request(spender)
		assert.Equal(t, map[string]string{
			"X-TokenRateLimit-Limit": "100", "X-TokenRateLimit-Remaining": "100", "X-TokenRateLimit-Reset": "30",
			"x-ratelimit-limit-tokens": "100", "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "30s",
			"RateLimit": `"item0.token_per_minute";r=100;t=30, "item0.usd_per_day";r=1000000000;t=82770`,
		}, quotaHeadersOf(x.ResponseHeaders("application/json")), "a 200")
		// 300,000 input and 30,000 output tokens: $1.05, past the key's day.
		x.P.Host.CallOnResponseBody(x.ID, []byte(`{"usage":{"prompt_tokens":300000,"completion_tokens":30000}}`), true)
		x.Answer().Done()

		// A minute later: the key's minute is untouched, its day spent.
		redis.SetClock(clientsClock + 60)
		local := p.Request(spender).RequireRejected(429)
		assert.Contains(t, string(local.Data), "Spending limit exceeded: the budget of $1 per day is used up")
		assert.Equal(t, map[string]string{
			"Retry-After": "82710", "retry-after-ms": "82710000",
			"X-TokenRateLimit-Limit": "1", "X-TokenRateLimit-Remaining": "0", "X-TokenRateLimit-Reset": "82710",
			"RateLimit": `"item0.token_per_minute";r=100;t=30, "item0.usd_per_day";r=0;t=82710`,
		}, quotaHeadersOf(local.Headers), "a dollar 429: the day, and no OpenAI form")

		// Another key's minute spent (80 + 40 tokens: $0.0006): a token 429,
		// the minute in every form.
		p.Request(chatty).Respond("application/json", `{"usage":{"prompt_tokens":80,"completion_tokens":40}}`)
		local = p.Request(chatty).RequireRejected(429)
		assert.Equal(t, map[string]string{
			"Retry-After": "30", "retry-after-ms": "30000",
			"X-TokenRateLimit-Limit": "100", "X-TokenRateLimit-Remaining": "0", "X-TokenRateLimit-Reset": "30",
			"x-ratelimit-limit-tokens": "100", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "30s",
			"RateLimit": `"item0.token_per_minute";r=0;t=30, "item0.usd_per_day";r=999400000;t=82710`,
		}, quotaHeadersOf(local.Headers), "a token 429")
	})
}

// A concurrency limit's 429: the OpenAI form, which has no header for it,
// is left out; the X-TokenRateLimit form and RateLimit name the limit, and
// Retry-After its second.
func TestConcurrencyRejectionHeadersDescribeOneLimit(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"quota_headers": ["tokenratelimit", "openai", "ietf"],`,
			`"token_per_minute": 100, "max_concurrent_requests": 1`))
		held := p.Request(key)
		require.True(t, held.Passed())
		local := p.Request(key).RequireRejected(429)
		assert.Equal(t, map[string]string{
			"Retry-After": "1", "retry-after-ms": "1000",
			"X-TokenRateLimit-Limit": "1", "X-TokenRateLimit-Remaining": "0", "X-TokenRateLimit-Reset": "1",
			"RateLimit": `"item0.token_per_minute";r=100;t=30, "item0.max_concurrent_requests";r=0;t=1`,
		}, quotaHeadersOf(local.Headers))
		held.Respond("application/json", `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	})
}

// makeRunConfig is make run's example configuration
// (tools/localgw/example.yaml) as make run hands it to the plugin: the JSON
// internal/configfile reads from the file, as make run and atrl read it.
func makeRunConfig(t *testing.T) string {
	t.Helper()
	configs, err := configfile.Load("../tools/localgw/example.yaml")
	require.NoError(t, err)
	require.Len(t, configs, 1, "make run's example is one configuration")
	return string(configs[0].JSON)
}

// quotaSample is docs/clients.md's quota answer under make run: the line
// after the curl it shows.
var quotaSample = regexp.MustCompile(`(?m)^curl -s http://127\.0\.0\.1:10000/v1/quota -H 'x-api-key: demo-1'\n(.+)$`)

// Issue 52, point 8: docs/clients.md's sample quota answer is what make
// run's example answers, byte for byte, at the time and after the call
// the page names (the sample lacked the global day's levels).
func TestClientsDocQuotaSampleIsMakeRunsAnswer(t *testing.T) {
	page, err := os.ReadFile("../docs/clients.md")
	require.NoError(t, err)
	sample := quotaSample.FindSubmatch(page)
	require.NotNil(t, sample, "docs/clients.md shows no quota answer of make run")
	redis := redistest.Start(t)
	key := [2]string{"x-api-key", "demo-1"}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.StartOver(t, 20834*86400+10*3600+18) // 10:00:18 UTC: the minute resets in 42 s, the day in 50,382 s
		p := plugintest.Start(t, redis, makeRunConfig(t))
		x := p.SendBody(chatNaming("mock"), key).Answer()
		require.True(t, x.Passed())
		x.Respond("application/json", `{"usage":{"prompt_tokens":30,"completion_tokens":20}}`) // $0.000275
		local := p.Call("GET", "/v1/quota", "", key).Answer().RequireRejected(200)
		assert.Equal(t, string(sample[1]), string(local.Data))
	})
}

// The X-TokenRateLimit form of a 200 names the tightest token window
// however the request's subjects fall into Redis calls: the key's token
// minute, never the global dollar day whose nanodollars left happen to be
// fewer than the minute's tokens left. Each call's script picks token
// windows first; the plugin compared the calls' answers by the number left
// alone, so with the key and all keys in different slots the headers
// switched to the day's nanodollars as it neared its end.
func TestQuotaHeadersNameTokensFirstAcrossCalls(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, `{"rule_name": "calls",
			"global_threshold": {"usd_per_day": 0.005},
			"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 10000000}]}],
			"pricing": {"*": {"input": 2.5, "output": 10}}, "pricing_catalog": "off",
			"quota_headers": ["tokenratelimit"],
			`+plugintest.RedisSection+`}`)
		x := p.Request(plugintest.APIKey)
		assert.Equal(t, map[string]string{
			"X-TokenRateLimit-Limit": "10000000", "X-TokenRateLimit-Remaining": "10000000", "X-TokenRateLimit-Reset": "30",
		}, quotaHeadersOf(x.ResponseHeaders("application/json")))
		x.Respond("application/json", `{"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	})
}
