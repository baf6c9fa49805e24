package limiter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 14, "Nothing gets through unadmitted or uncharged": requests whose
// model or subject the limiter read otherwise than their upstream does, or
// that no limit applied to. Through the plugin (Go and WASM mode) on a real
// Redis.

// opusWeighted prices claude-opus-4 at 5 per input and 25 per output token,
// every other model at 1: 100 input and 10 output tokens cost 750 or 110.
const opusWeighted = `"token_count_strategy": "weighted", "token_weights": {"models": {"claude-opus-4": {"input": 5, "output": 25}}},`

// "(6, model part) Per-model weights (token_count_strategy: weighted,
// token_weights.models) can be dodged: (a) a large body (over
// token_reservation.max_body_bytes) with the "model" key twice:
// estimate.Request reads the first with gjson.GetBytes, upstreams read the
// last — make it the last top-level "model"".
func TestHardening6LastModelOfALargeBody(t *testing.T) {
	redis := redistest.Start(t)
	key := [2]string{"x-api-key", "sk-1"}
	padding := `"messages":[{"role":"user","content":"` + strings.Repeat("pad ", 64) + `"}]`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			name, body string
			want       int64
		}{
			{"the last of two models", `{"model":"claude-sonnet-4",` + padding + `,"model":"claude-opus-4"}`, 750},
			{"the last, written with an escape", `{"model":"claude-sonnet-4",` + padding + `,"\u006dodel":"claude-opus-4"}`, 750},
			{"not one nested deeper", `{"model":"claude-opus-4",` + padding + `,"metadata":{"model":"claude-sonnet-4"}}`, 750},
			{"one model, priced as such", `{"model":"claude-sonnet-4",` + padding + `}`, 110},
		} {
			t.Run(c.name, func(t *testing.T) {
				redis.Do("FLUSHALL")
				p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"token_reservation": {"max_body_bytes": 64}, `+opusWeighted, `"token_per_day": 1000000`))
				x := p.SendBody(c.body, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(100, 0, 0, 10))...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}

// "(6, model part) … (b) a Gemini path with %3A
// (`/v1beta/models/gemini-2.5-pro%3AgenerateContent`) or other
// percent-encoding — estimate.ModelFromPath must decode the path segment the
// way the upstream does".
func TestHardening6PercentEncodedGeminiPath(t *testing.T) {
	redis := redistest.Start(t)
	key := [2]string{"x-api-key", "sk-1"}
	const body = `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for path, want := range map[string]int64{
			"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse":     750,
			"/v1beta/models/gemini-2.5-pro%3AstreamGenerateContent?alt=sse":   750,
			"/v1beta/models/gemini-2.5-pro%3astreamGenerateContent?alt=sse":   750,
			"/v1beta/%6Dodels/gemini%2D2.5-pro:streamGenerateContent?alt=sse": 750,
			"/v1beta/models/gemini-2.5-flash%3AstreamGenerateContent?alt=sse": 110,
		} {
			t.Run(path, func(t *testing.T) {
				redis.Do("FLUSHALL")
				p := plugintest.Start(t, redis, plugintest.APIKeyConfig(
					`"token_count_strategy": "weighted", "token_weights": {"models": {"gemini-2.5-pro": {"input": 5, "output": 25}}},`,
					`"token_per_day": 1000000`))
				x := sendBodyTo(p, path, body, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.GeminiStream(100, 10))...)
				assert.Equal(t, want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}

// "(6, model part) … (c) a dated alias of a listed model
// (`claude-opus-4-20250514` when `claude-opus-4` is listed) gets the default
// weights — `token_weights.models` keys accept `regexp:<re>` (RE2, as rule
// keys do) and prefixes (`claude-opus-4*`), besides exact names."
func TestHardening6DatedModelAlias(t *testing.T) {
	redis := redistest.Start(t)
	key := [2]string{"x-api-key", "sk-1"}
	weights := `"token_count_strategy": "weighted", "token_weights": {"models": {
		"claude-opus-4*": {"input": 5, "output": 25},
		"claude-opus-4-1*": {"input": 6, "output": 30},
		"regexp:^gpt-4o-\\d{4}-\\d{2}-\\d{2}$": {"input": 2, "output": 8}}},`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			model string
			want  int64
		}{
			{"claude-opus-4", 750},
			{"claude-opus-4-20250514", 750},
			{"claude-opus-4-1-20250805", 900}, // the longest prefix
			{"gpt-4o-2024-08-06", 280},
			{"gpt-4o", 110},
		} {
			t.Run(c.model, func(t *testing.T) {
				redis.Do("FLUSHALL")
				p := plugintest.Start(t, redis, plugintest.APIKeyConfig(weights, `"token_per_day": 1000000`))
				x := p.SendBody(`{"model":"`+c.model+`","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(100, 0, 0, 10))...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
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

// "(8, config parts) (a) Query parameters and cookies take the first of
// duplicate values (config.QueryParam, config.CookieValue) while many
// frameworks take the last: … a client sending `?key=a&key=b` must not get a
// budget other than the one the upstream/auth sees".
func TestHardening8RepeatedQueryParameter(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{q|limit_by_per_param|apikey|" + v + "}" }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		redis.Do("FLUSHALL")
		p := plugintest.Start(t, redis, `{"rule_name": "q", "rule_items": [{"limit_by_per_param": "apikey",
			"limit_keys": [{"key": "*", "token_per_day": 100}]}], `+plugintest.RedisSection+`}`)
		require.True(t, spendOn(p, "/v1/chat/completions?apikey=mine").Passed())
		assert.Equal(t, int64(100), p.DayCounter(subject("mine")))

		// Whichever value the upstream takes, "mine" is used up.
		spendOn(p, "/v1/chat/completions?apikey=fresh&apikey=mine").RequireRejected(429)
		spendOn(p, "/v1/chat/completions?apikey=mine&apikey=fresh").RequireRejected(429)
		spendOn(p, "/v1/chat/completions?apikey=mine&apikey=x&apikey=fresh").RequireRejected(429)

		// Both readings are charged.
		require.True(t, spendOn(p, "/v1/chat/completions?apikey=a&apikey=b").Passed())
		assert.Equal(t, int64(100), p.DayCounter(subject("a")))
		assert.Equal(t, int64(100), p.DayCounter(subject("b")))
		assert.Equal(t, int64(0), p.DayCounter(subject("fresh")), "rejected: charged nothing")
	})
}

// "(8, config parts) (a) Query parameters and cookies take the first of
// duplicate values …": the same for cookies.
func TestHardening8RepeatedCookie(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{c|limit_by_per_cookie|session|" + v + "}" }
	cookie := func(v string) [2]string { return [2]string{"cookie", v} }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		redis.Do("FLUSHALL")
		p := plugintest.Start(t, redis, `{"rule_name": "c", "rule_items": [{"limit_by_per_cookie": "session",
			"limit_keys": [{"key": "*", "token_per_day": 100}]}], `+plugintest.RedisSection+`}`)
		require.True(t, spendOn(p, "/v1/chat/completions", cookie("session=mine")).Passed())
		spendOn(p, "/v1/chat/completions", cookie("session=fresh; theme=dark; session=mine")).RequireRejected(429)
		spendOn(p, "/v1/chat/completions", cookie("session=mine; session=fresh")).RequireRejected(429)
		require.True(t, spendOn(p, "/v1/chat/completions", cookie("session=a; session=b")).Passed())
		assert.Equal(t, int64(100), p.DayCounter(subject("a")))
		assert.Equal(t, int64(100), p.DayCounter(subject("b")))
	})
}

// "(8, config parts) … (b) Per-IP limits key IPv6 per /128, so one client
// with a /64 has 2^64 budgets: new top-level option `ipv6_prefix_length`
// (int 1–128, default 64)".
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
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, config(""))
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
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, config(`"ipv6_prefix_length": 48, `))
			require.True(t, from(p, "[2001:db8:1:2::5]:443").Passed())
			from(p, "[2001:db8:1:ffff::5]:443").RequireRejected(429)
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip||2001:db8:1::/48}"))
		})

		t.Run("a /128 is each address", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, config(`"ipv6_prefix_length": 128, `))
			require.True(t, from(p, "[2001:db8:1:2::5]:443").Passed())
			assert.True(t, from(p, "[2001:db8:1:2::6]:443").Passed())
			assert.Equal(t, int64(100), p.DayCounter("atrl:{ip|limit_by_per_ip||2001:db8:1:2::5}"))
		})
	})
}

// "(8, config parts) … (c) A request that matches no rule item is
// unlimited: new key `unmatched_threshold`, shaped like `global_threshold`
// …, applying to requests that match no rule item, all of them sharing one
// subject (its Redis key must differ from global_threshold's …). Under
// rule_match_mode all it applies when no item matched."
func TestHardening8UnmatchedThreshold(t *testing.T) {
	redis := redistest.Start(t)
	const unmatched = "atrl:{chat|unmatched_threshold||}"
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, mode := range []string{"first", "all"} {
			t.Run(mode, func(t *testing.T) {
				redis.Do("FLUSHALL")
				p := plugintest.Start(t, redis, `{"rule_name": "chat", "rule_match_mode": "`+mode+`",
					"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_day": 1000}]}],
					"unmatched_threshold": {"token_per_day": 100}, `+plugintest.RedisSection+`}`)
				require.True(t, spendOn(p, "/v1/chat/completions").Passed())
				assert.Equal(t, int64(100), p.DayCounter(unmatched))
				assert.Contains(t, strings.Join(p.Host.GetDebugLogs(), "\n"), `rule chat: unmatched_threshold matched limit key "*"`)

				// Every request no rule item matches shares the budget.
				spendOn(p, "/v1/chat/completions").RequireRejected(429)
				spendOn(p, "/v1/chat/completions", [2]string{"x-api-key", "sk-2"}).RequireRejected(429)

				// A matched request is limited by its item only.
				require.True(t, spendOn(p, "/v1/chat/completions", [2]string{"x-api-key", "sk-1"}).Passed())
				assert.Equal(t, int64(100), p.DayCounter(plugintest.APIKeySubject))
				assert.Equal(t, int64(100), p.DayCounter(unmatched))
				assert.Equal(t, int64(0), p.DayCounter("atrl:{chat|global_threshold||}"), "not global_threshold's counter")
			})
		}
	})
}
