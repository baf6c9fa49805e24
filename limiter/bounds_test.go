package limiter_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Token counts and limits at the bounds of what int64 and Lua's doubles
// hold: output caps, reported usage and configured limits far past any real
// request, through the plugin (Go and WASM mode) on a real Redis. Each
// test keeps a point of issue 14 ("Nothing gets through unadmitted or
// uncharged") closed, and is named after it (go test -run TestHardening).

// An output cap of 2^63−1 is estimated at estimate.MaxTokens, not wrapped
// negative: a used-up window rejects it, a window with room rejects it when
// it can never fit (at once under over_limit_action: queue), and the
// largest limit holds it. Issue 14, point 2: "Huge output caps overflow
// int64. "max_output_tokens": 9223372036854775807 makes prompt + cap wrap
// negative […]: admitted past a used-up window even with failure_mode:
// deny, X-TokenRateLimit-Remaining reads 9223372036854774784, and the
// charge fails." And: "a request whose estimate exceeds a window's limit is
// rejected (or, with over_limit_action: queue, rejected at once since it
// can never fit)".
func TestHardening2HugeOutputCap(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	huge := `{"model":"gpt-4o","max_output_tokens":9223372036854775807,"input":"Hi"}`
	strategies := []struct{ name, extra string }{
		{"total_tokens", ""},
		{"weighted", `"token_count_strategy": "weighted", "token_weights": {"output": 4},`},
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		for _, s := range strategies {
			t.Run(s.name+": a used-up window rejects it", func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+s.extra+
					`"failure_mode": "deny", "show_limit_quota_header": true,`, `"token_per_minute": 1000`))
				used := p.SendBody(plugintest.ChatBody(10), key).Answer()
				require.True(t, used.Passed())
				used.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1000, 0))...)
				require.Equal(t, int64(1000), p.MinuteCounter(plugintest.APIKeySubject), "the minute is used up")

				x := p.SendBody(huge, key).Answer()
				local := x.RequireRejected(429)
				assert.Equal(t, "0", plugintest.Header(local.Headers, "X-TokenRateLimit-Remaining"))
				x.Done()
				assert.Equal(t, int64(1000), p.MinuteCounter(plugintest.APIKeySubject), "nothing reserved, nothing given back")
			})

			t.Run(s.name+": with room, it can never fit", func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+s.extra+
					`"show_limit_quota_header": true,`, `"token_per_minute": 1000000`))
				x := p.SendBody(huge, key).Answer()
				x.RequireRejected(429)
				x.Done()
				assert.Empty(t, redis.Keys(plugintest.APIKeySubject+":*"), "nothing reserved")
			})

			t.Run(s.name+": the largest limit holds the largest estimate", func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+s.extra+
					`"show_limit_quota_header": true,`, `"token_per_minute": 9007199254740992`))
				x := p.SendBody(huge, key).Answer()
				require.True(t, x.Passed())
				headers := x.ResponseHeaders("text/event-stream")
				assert.Equal(t, strconv.FormatInt(1<<53-estimate.MaxTokens, 10), plugintest.Header(headers, "X-TokenRateLimit-Remaining"),
					"it reserved MaxTokens")
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 10, 20))...)
				want := int64(30)
				if s.name == "weighted" {
					want = 10 + 20*4
				}
				assert.Equal(t, want, p.MinuteCounter(plugintest.APIKeySubject), "reconciled to its usage")
			})
		}

		t.Run("queue: rejected at once, since it can never fit", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+
				`"over_limit_action": "queue", "max_queue_wait_ms": 600000,`, `"token_per_minute": 1000`))
			x := p.SendBody(huge, key).Answer()
			x.RequireRejected(429)
			assert.Zero(t, p.RetriesPending(), "not waiting")
			x.Done()
		})
	})
}

// A response reporting absurd usage costs MaxTokens: under weighted prices
// it once overflowed into a negative charge that gave the window back.
// Issue 14, point 2: "usage numbers from responses (tokenusage gives
// int64) are clamped the same way before charging".
func TestHardening2HugeUsage(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	const most = "9007199254740992" // the largest count tokenusage reads
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		for _, s := range []struct{ name, extra string }{
			{"total_tokens", ""},
			{"weighted", `"token_count_strategy": "weighted", "token_weights": {"output": 1000000},`},
		} {
			for _, reserve := range []string{"", plugintest.ReservationOn} {
				t.Run(fmt.Sprintf("%s, reservation %t", s.name, reserve != ""), func(t *testing.T) {
					p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(reserve+s.extra, `"token_per_minute": 1000000000`))
					x := p.SendBody(plugintest.ChatBody(10), key).Answer()
					require.True(t, x.Passed())
					x.Respond("application/json", `{"id":"chatcmpl-1","object":"chat.completion","choices":[],`+
						`"usage":{"prompt_tokens":`+most+`,"completion_tokens":`+most+`,"total_tokens":18014398509481984}}`)
					assert.Equal(t, estimate.MaxTokens, p.MinuteCounter(plugintest.APIKeySubject), "charged MaxTokens")
					next := p.SendBody(plugintest.ChatBody(10), key).Answer()
					next.RequireRejected(429)
					next.Done()
				})
			}
		}
	})
}

// Limits above 2^53 are refused when the plugin starts; 2^53 itself works
// in every layer. Issue 14, point 7: "A limit of 2^63−512 or more (an
// operator's "unlimited") breaks every admission of that key (Lua
// doubles); under rule_match_mode: all with failure_mode allow, that
// failure rolls back the other layers and the request goes through
// uncharged."
func TestHardening7HugeLimits(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("above 2^53: refused at start", func(t *testing.T) {
			for _, limits := range []string{
				`"token_per_day": 9223372036854775295`,
				`"token_per_minute": 9007199254740993`,
				`"query_per_second": 9223372036854775807`,
				`"max_concurrent_requests": 1e17`,
			} {
				host, status := plugintest.NewTestHost([]byte(plugintest.APIKeyConfig(`"rule_match_mode": "all",`, limits)))
				assert.Equal(t, types.OnPluginStartStatusFailed, status, limits)
				host.Reset()
			}
		})

		t.Run("2^53 under rule_match_mode all: admitted and charged in every layer", func(t *testing.T) {
			redis.AvoidWindowEdge(60, 10)
			p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "chat", "rule_match_mode": "all", "failure_mode": "allow", "show_limit_quota_header": true,
				"rule_items": [
					{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_minute": 9007199254740992, "query_per_minute": 9007199254740992, "max_concurrent_requests": 9007199254740992}]},
					{"limit_by_header": "x-team", "limit_keys": [{"key": "blue", "token_per_minute": 1000}]}],
				`+plugintest.RedisSection+`}`)
			team := "atrl:{chat|limit_by_header|x-team|blue}"
			for i := 0; i < 2; i++ {
				x := p.Request(plugintest.APIKey, [2]string{"x-team", "blue"})
				require.True(t, x.Passed(), "request %d", i)
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 300, 200))...)
			}
			assert.Equal(t, int64(1000), p.MinuteCounter(plugintest.APIKeySubject), "the 2^53 layer is charged")
			assert.Equal(t, int64(1000), p.MinuteCounter(team), "and so is the other one")
			x := p.Request(plugintest.APIKey, [2]string{"x-team", "blue"})
			x.RequireRejected(429)
			x.DoneAndTick()
			assert.Equal(t, int64(2), plugintest.Counter(redis, plugintest.APIKeySubject, "q60", redis.Now()),
				"the rejected request is uncounted in the other layer")
		})

		t.Run("a bucket of a 2^53 limit charged past it holds 2^53 and rejects", func(t *testing.T) {
			redis.AvoidWindowEdge(60, 10)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"failure_mode": "allow", "show_limit_quota_header": true,`, `"token_per_minute": 9007199254740992`))
			key := plugintest.APIKey
			// Each response reports 2 × 2^53 tokens, charged MaxTokens.
			charges := int(1<<53/estimate.MaxTokens) + 1
			for i := 0; i < charges; i++ {
				x := p.Request(key)
				require.True(t, x.Passed(), "charge %d", i)
				x.Respond("application/json", `{"choices":[],"usage":{"prompt_tokens":9007199254740992,"completion_tokens":9007199254740992}}`)
			}
			assert.Equal(t, int64(1<<53), p.MinuteCounter(plugintest.APIKeySubject), "the bucket holds 2^53")
			x := p.Request(key)
			local := x.RequireRejected(429)
			assert.Equal(t, "9007199254740992", plugintest.Header(local.Headers, "X-TokenRateLimit-Limit"))
			x.Done()
			n, err := p.Host.GetCounterMetric(metricName("none", "token_ratelimit_charge_failure_count"))
			assert.True(t, err != nil || n == 0, "no charge failed")
		})
	})
}
