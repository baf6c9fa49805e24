package limiter_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

func TestAllWindowsOfAKeyAreEnforcedInOneCall(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		key := plugintest.APIKey

		t.Run("the minute runs out first", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 1000, "token_per_day": 100000`))
			x := p.Request(key)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(3, 700, 300))...)
			local := p.Request(key).RequireRejected(429)
			reset, _ := strconv.Atoi(plugintest.Header(local.Headers, "Retry-After"))
			assert.True(t, reset >= 1 && reset <= 60, "the minute decides: retry within a minute, got %d", reset)
		})

		t.Run("the day runs out while the minute is open", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 100000, "token_per_day": 1000`))
			x := p.Request(key)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(3, 700, 300))...)
			local := p.Request(key).RequireRejected(429)
			reset, _ := strconv.Atoi(plugintest.Header(local.Headers, "Retry-After"))
			want := 86400 - redis.Now()%86400
			assert.InDelta(t, want, reset, 2, "the day decides: retry at the end of the day")
		})

		t.Run("one Redis call per phase whatever the number of windows", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_second": 100000, "token_per_minute": 100000, "token_per_hour": 100000, "token_per_day": 100000`))
			x := p.Send(key)
			require.Len(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), 1)
			x.Answer() // NOSCRIPT, then EVAL: the script is loaded from now on
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
			y := p.Send(key)
			assert.Equal(t, 1, redis.Answer(p.Host, y.ID), "one admission call")
			y.ResponseHeaders("text/event-stream")
			p.Host.CallOnResponseBody(y.ID, []byte(plugintest.OpenAIStream(1, 5, 5)), true)
			assert.Equal(t, 1, redis.Answer(p.Host, y.ID), "one charge call")
			p.Host.CompleteHttpContext(y.ID)
			assert.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(y.ID), "charged once")
			windows := map[string]bool{} // (two requests may be charged a second apart: two t1 buckets)
			for _, k := range redis.Keys(plugintest.APIKeySubject + ":t*") {
				windows[strings.Split(strings.TrimPrefix(k, plugintest.APIKeySubject+":"), ":")[0]] = true
			}
			assert.Equal(t, map[string]bool{"t1": true, "t60": true, "t3600": true, "t86400": true}, windows, "every window was charged")
		})
	})
}

func TestQuotaHeaders(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		key := plugintest.APIKey

		t.Run("on every admitted response, for the tightest window", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"show_limit_quota_header": true,`, `"token_per_minute": 1000, "token_per_day": 1500`))
			p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 200, 100))...)
			x := p.Request(key)
			headers := x.ResponseHeaders("text/event-stream")
			// minute: 700 left of 1,000; day: 1,200 left of 1,500: the minute is tighter.
			assert.Equal(t, "1000", plugintest.Header(headers, "X-TokenRateLimit-Limit"))
			assert.Equal(t, "700", plugintest.Header(headers, "X-TokenRateLimit-Remaining"))
			reset, _ := strconv.Atoi(plugintest.Header(headers, "X-TokenRateLimit-Reset"))
			assert.True(t, reset >= 1 && reset <= 60, "reset %d", reset)
			x.Done()
		})

		t.Run("on rejections", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"show_limit_quota_header": true, "rejected_code": 403, "rejected_msg": "{\"error\":\"quota\"}",`, `"token_per_day": 100`))
			p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 200, 100))...)
			local := p.Request(key).RequireRejected(403)
			assert.Equal(t, `{"error":"quota"}`, string(local.Data))
			assert.Equal(t, "100", plugintest.Header(local.Headers, "X-TokenRateLimit-Limit"))
			assert.Equal(t, "0", plugintest.Header(local.Headers, "X-TokenRateLimit-Remaining"))
			assert.NotEmpty(t, plugintest.Header(local.Headers, "X-TokenRateLimit-Reset"))
		})

		t.Run("off by default, except Reset and Retry-After on rejections", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100`))
			x := p.Request(key)
			headers := x.ResponseHeaders("text/event-stream")
			assert.False(t, test.HasHeader(headers, "X-TokenRateLimit-Limit"))
			assert.False(t, test.HasHeader(headers, "X-TokenRateLimit-Remaining"))
			x.P.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, 200, 100)), true)
			x.Done()
			local := p.Request(key).RequireRejected(429)
			assert.False(t, test.HasHeader(local.Headers, "X-TokenRateLimit-Limit"))
			assert.NotEmpty(t, plugintest.Header(local.Headers, "X-TokenRateLimit-Reset"))
			assert.NotEmpty(t, plugintest.Header(local.Headers, "Retry-After"))
		})
	})
}

func TestPerIPLimits(t *testing.T) {
	redis := redistest.Start(t)
	perIP := func(extra, source string) string {
		return `{"rule_name": "ip", ` + extra + `"rule_items": [{"limit_by_per_ip": "` + source + `",
			"limit_keys": [{"key": "0.0.0.0/0", "token_per_day": 100}, {"key": "::/0", "token_per_day": 100}]}], ` + plugintest.RedisSection + `}`
	}
	spend := func(p *plugintest.Plugin, xff string) *plugintest.Exchange {
		x := p.Request([2]string{"x-forwarded-for", xff})
		if x.Passed() {
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 0))...)
		}
		return x
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("spoofed left-most entries do not escape with xff_num_trusted_hops", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, perIP(`"xff_num_trusted_hops": 1,`, "from-header-x-forwarded-for"))
			// client 203.0.113.7 → trusted load balancer 10.0.0.1 → gateway
			require.True(t, spend(p, "198.51.100.1, 203.0.113.7, 10.0.0.1").Passed())
			for _, spoof := range []string{"198.51.100.2", "1.1.1.1, 2.2.2.2", "::1"} {
				x := spend(p, spoof+", 203.0.113.7, 10.0.0.1")
				x.RequireRejected(429)
			}
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip|x-forwarded-for|203.0.113.7}"))
			assert.True(t, spend(p, "198.51.100.1, 203.0.113.8, 10.0.0.1").Passed(), "another client has its own budget")
		})

		t.Run("without it the left-most entry counts, as in Higress", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, perIP("", "from-header-x-forwarded-for"))
			require.True(t, spend(p, "198.51.100.1, 203.0.113.7").Passed())
			spend(p, "198.51.100.1, 203.0.113.7").RequireRejected(429)
			assert.True(t, spend(p, "198.51.100.2, 203.0.113.7").Passed(), "a spoofed entry gets a fresh budget: why the option matters")
		})

		t.Run("from the connection's address, v4 and v6", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, perIP("", "from-remote-addr"))
			for _, peer := range []string{"192.0.2.10:51000", "[2001:db8::5]:443"} {
				require.NoError(t, p.Host.SetProperty([]string{"source", "address"}, []byte(peer)))
				require.True(t, spend(p, "6.6.6.6").Passed(), peer)
				spend(p, "7.7.7.7").RequireRejected(429)
			}
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip||2001:db8::/64}"), "an IPv6 client is its /64")
		})
	})
}

// spendOn sends a request (to a path, with headers), answers it with 60 +
// 40 tokens when it passes, and returns it (a rejected one, to be looked at).
func spendOn(p *plugintest.Plugin, path string, extra ...[2]string) *plugintest.Exchange {
	p.T.Helper()
	x := p.SendTo(path, extra...).Answer()
	if x.Passed() {
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 60, 40))...)
	}
	return x
}

// An IPv6 client is its /64 by default, or the network
// ipv6_prefix_length sets: a client with a /64 has one budget, not 2^64.
// Issue 14, point 8: "(8, config parts) … (b) Per-IP limits key IPv6 per
// /128, so one client with a /64 has 2^64 budgets: new top-level option
// `ipv6_prefix_length` (int 1–128, default 64)".
func TestHardening8IPv6ClientsShareTheirPrefix(t *testing.T) {
	redis := redistest.Start(t)
	config := func(extra string) string {
		return `{"rule_name": "ip", ` + extra + `"rule_items": [{"limit_by_per_ip": "from-remote-addr",
			"limit_keys": [{"key": "0.0.0.0/0", "token_per_day": 100}, {"key": "::/0", "token_per_day": 100}]}], ` + plugintest.RedisSection + `}`
	}
	from := func(p *plugintest.Plugin, peer string) *plugintest.Exchange {
		p.T.Helper()
		require.NoError(p.T, p.Host.SetProperty([]string{"source", "address"}, []byte(peer)))
		return spendOn(p, "/v1/chat/completions")
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("a /64 by default", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config(""))
			require.True(t, from(p, "[2001:db8:1:2::5]:443").Passed())
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip||2001:db8:1:2::/64}"))
			for _, peer := range []string{"[2001:db8:1:2::6]:443", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", "2001:db8:1:2::7"} {
				from(p, peer).RequireRejected(429)
			}
			assert.True(t, from(p, "[2001:db8:1:3::5]:443").Passed(), "another /64 is another client")
			assert.True(t, from(p, "192.0.2.1:5000").Passed(), "IPv4: per address")
			from(p, "[::ffff:192.0.2.1]:5000").RequireRejected(429)
			assert.True(t, from(p, "192.0.2.2:5000").Passed())
		})

		t.Run("ipv6_prefix_length sets the network", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config(`"ipv6_prefix_length": 48, `))
			require.True(t, from(p, "[2001:db8:1:2::5]:443").Passed())
			from(p, "[2001:db8:1:ffff::5]:443").RequireRejected(429)
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip||2001:db8:1::/48}"))
		})

		t.Run("a /128 is each address", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config(`"ipv6_prefix_length": 128, `))
			require.True(t, from(p, "[2001:db8:1:2::5]:443").Passed())
			assert.True(t, from(p, "[2001:db8:1:2::6]:443").Passed())
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip||2001:db8:1:2::5}"))
		})
	})
}

func TestGlobalThreshold(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "all", "global_threshold": {"token_per_day": 50}, `+plugintest.RedisSection+`}`)
		require.True(t, p.Request().Passed())
		p.Request([2]string{"x-api-key", "anything"}).Respond("application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":20}}`)
		p.Request().RequireRejected(429)
		assert.Equal(t, int64(60), p.DayCounter("atrl:{all|global_threshold||}"))
		assert.Contains(t, strings.Join(p.Host.GetDebugLogs(), "\n"), `rule all: global_threshold matched limit key "*" (1 windows)`,
			"at debug level the plugin says what matched")
	})
}

// unmatched_threshold limits the requests no rule item matches, all of
// them in one subject of its own (not global_threshold's), under either
// rule_match_mode. Issue 14, point 8: "(8, config parts) … (c) A request
// that matches no rule item is unlimited: new key `unmatched_threshold`,
// shaped like `global_threshold` …, applying to requests that match no
// rule item, all of them sharing one subject (its Redis key must differ
// from global_threshold's …). Under rule_match_mode all it applies when no
// item matched."
func TestHardening8UnmatchedThreshold(t *testing.T) {
	redis := redistest.Start(t)
	const unmatched = "atrl:{chat|unmatched_threshold||}"
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, mode := range []string{"first", "all"} {
			t.Run(mode, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "chat", "rule_match_mode": "`+mode+`",
					"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_day": 1000}]}],
					"unmatched_threshold": {"token_per_day": 100}, `+plugintest.RedisSection+`}`)
				require.True(t, spendOn(p, "/v1/chat/completions").Passed())
				assert.Equal(t, int64(100), p.DayCounter(unmatched))
				assert.Contains(t, strings.Join(p.Host.GetDebugLogs(), "\n"), `rule chat: unmatched_threshold matched limit key "*"`)

				// Every request no rule item matches shares the budget.
				spendOn(p, "/v1/chat/completions").RequireRejected(429)
				spendOn(p, "/v1/chat/completions", [2]string{"x-api-key", "sk-2"}).RequireRejected(429)

				// A matched request is limited by its item only.
				require.True(t, spendOn(p, "/v1/chat/completions", plugintest.APIKey).Passed())
				assert.Equal(t, int64(100), p.DayCounter(plugintest.APIKeySubject))
				assert.Equal(t, int64(100), p.DayCounter(unmatched))
				assert.Equal(t, int64(0), p.DayCounter("atrl:{chat|global_threshold||}"), "not global_threshold's counter")
			})
		}
	})
}
