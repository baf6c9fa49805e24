package limiter_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 53, point 1: the plugin counts what it charges, per route, model
// and consumer, and its rejections by kind of limit; histograms of the
// reservation's estimate against the charge and of Redis's latency.
// Through the plugin (Go and WASM mode) on a real Redis.

// seriesName is the full name of a metric of the test route and upstream.
func seriesName(model, consumer, metric string) string {
	return "route.test-route-default.upstream.test-cluster-default.model." + model + ".consumer." + consumer + ".metric." + metric
}

// metricValue reads a counter of the test route and upstream, after a tick
// (the plugin adds what requests counted from its tick); defined says
// whether the plugin defined it.
func metricValue(p *plugintest.Plugin, model, consumer, metric string) (n uint64, defined bool) {
	p.SendPostponed()
	n, err := p.Host.GetCounterMetric(seriesName(model, consumer, metric))
	return n, err == nil
}

// histogramValue reads the last value a histogram recorded, after a tick.
func histogramValue(p *plugintest.Plugin, name string) (uint64, error) {
	p.SendPostponed()
	return p.Host.GetHistogramMetric(name)
}

// The counters of what is charged.
const (
	inputTokens     = "token_ratelimit_input_tokens"
	outputTokens    = "token_ratelimit_output_tokens"
	cacheReadTokens = "token_ratelimit_cache_read_tokens"
	cacheWriteTok   = "token_ratelimit_cache_write_tokens"
	reasoningTokens = "token_ratelimit_reasoning_tokens"
	estimatedInput  = "token_ratelimit_estimated_input_tokens"
	estimatedOutput = "token_ratelimit_estimated_output_tokens"
	chargedTokens   = "token_ratelimit_charged_tokens"
	costNanodollars = "token_ratelimit_cost_nanodollars"
	estimateRatio   = "token_ratelimit_estimate_ratio_percent"
	redisLatency    = "redis.redis.static.metric.token_ratelimit_redis_latency_ms"
)

// consumerConfig limits the consumer team-a (x-mse-consumer) with limits.
func consumerConfig(extra, limits string) string {
	return `{"rule_name": "spend", ` + extra + `
		"rule_items": [{"limit_by_consumer": "", "limit_keys": [{"key": "team-a", ` + limits + `}]}],
		` + plugintest.RedisSection + `}`
}

// teamALimits are a day's tokens and dollars.
const teamALimits = `"token_per_day": 1000000, "usd_per_day": 100`

const teamASubject = "atrl:{spend|limit_by_consumer|x-mse-consumer|team-a}"

// openAIStreamWithDetails is an OpenAI chat stream reporting cached
// prompt tokens and reasoning tokens.
func openAIStreamWithDetails(prompt, cached, completion, reasoning int) []string {
	return []string{
		`data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}],"usage":null}` + "\n\n",
		fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}}`+"\n\n",
			prompt, completion, prompt+completion, cached, reasoning),
		"data: [DONE]\n\n",
	}
}

// A stream of 10 bytes of content and no usage: charged an estimate.
var streamWithoutUsage = []string{
	`data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"abcdefgh"},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"ij"},"finish_reason":"stop"}]}` + "\n\n",
	"data: [DONE]\n\n",
}

func TestMetricsCountWhatIsCharged(t *testing.T) {
	redis := redistest.Start(t)
	teamA := [2]string{"x-mse-consumer", "team-a"}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("usage reported, priced, with a reservation", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.StartOnEmptyRedis(t, redis, consumerConfig(plugintest.ReservationOn+pricing, teamALimits))
			get := func(model, metric string) uint64 {
				t.Helper()
				n, defined := metricValue(p, model, "team-a", metric)
				require.True(t, defined, "%s of model %s is defined", metric, model)
				return n
			}

			// OpenAI, streamed, its usage with cached and reasoning tokens:
			// 1,200 input (1,024 from the cache), 300 output (128 reasoning).
			x := p.SendBody(plugintest.ChatBody(1000), teamA).Answer()
			require.True(t, x.Passed())
			reserved := p.DayCounter(teamASubject)
			require.Positive(t, reserved, "the reservation")
			x.Respond("text/event-stream", openAIStreamWithDetails(1200, 1024, 300, 128)...)
			assert.Equal(t, int64(1500), p.DayCounter(teamASubject), "charged the usage")
			assert.Equal(t, uint64(1200), get("gpt-4o", inputTokens))
			assert.Equal(t, uint64(300), get("gpt-4o", outputTokens))
			assert.Equal(t, uint64(1024), get("gpt-4o", cacheReadTokens))
			assert.Equal(t, uint64(128), get("gpt-4o", reasoningTokens))
			assert.Equal(t, uint64(1500), get("gpt-4o", chargedTokens))
			// 176 × $2.50 + 1,024 × $1.25 + 300 × $10 per million tokens.
			assert.Equal(t, uint64(176*2500+1024*1250+300*10_000), get("gpt-4o", costNanodollars))
			_, defined := metricValue(p, "gpt-4o", "team-a", cacheWriteTok)
			assert.False(t, defined, "no cache write reported: no counter")
			ratio, err := histogramValue(p, seriesName("gpt-4o", "team-a", estimateRatio))
			require.NoError(t, err)
			assert.Equal(t, uint64((reserved*100+750)/1500), ratio, "the reservation (%d) over the charge (1,500), in percent", reserved)

			// Anthropic, a cache write: 10 + 2,000 written + 500 read input, 40 output.
			x = p.SendBody(chatNaming("claude-sonnet-4-5"), teamA).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(10, 2000, 500, 40))...)
			assert.Equal(t, uint64(2510), get("claude-sonnet-4-5", inputTokens))
			assert.Equal(t, uint64(40), get("claude-sonnet-4-5", outputTokens))
			assert.Equal(t, uint64(500), get("claude-sonnet-4-5", cacheReadTokens))
			assert.Equal(t, uint64(2000), get("claude-sonnet-4-5", cacheWriteTok))
			assert.Equal(t, uint64(2550), get("claude-sonnet-4-5", chargedTokens))
			// 10 × $3 + 500 × $0.30 + 2,000 × $3.75 + 40 × $15 per million.
			assert.Equal(t, uint64(10*3000+500*300+2000*3750+40*15_000), get("claude-sonnet-4-5", costNanodollars))
			_, defined = metricValue(p, "claude-sonnet-4-5", "team-a", reasoningTokens)
			assert.False(t, defined, "Anthropic reports no reasoning apart")

			// A second OpenAI answer adds to the first's counters.
			x = p.SendBody(plugintest.ChatBody(1000), teamA).Answer()
			x.Respond("text/event-stream", openAIStreamWithDetails(100, 0, 20, 0)...)
			assert.Equal(t, uint64(1300), get("gpt-4o", inputTokens))
			assert.Equal(t, uint64(320), get("gpt-4o", outputTokens))
			assert.Equal(t, uint64(1024), get("gpt-4o", cacheReadTokens))
			assert.Equal(t, uint64(1620), get("gpt-4o", chargedTokens))
			assert.Equal(t, uint64(176*2500+1024*1250+300*10_000+100*2500+20*10_000), get("gpt-4o", costNanodollars))
			assert.Equal(t, int64(1500+2550+120), p.DayCounter(teamASubject), "every counter is what Redis was charged")
			assert.Equal(t, int64(176*2500+1024*1250+300*10_000+10*3000+500*300+2000*3750+40*15_000+100*2500+20*10_000),
				plugintest.Counter(p.Redis, teamASubject, "u86400", p.Redis.Now()), "and the money window")
		})

		t.Run("no usage reported: the estimate, in counters of its own", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.StartOnEmptyRedis(t, redis, consumerConfig(plugintest.ReservationOn+pricing, teamALimits))
			x := p.SendBody(chatNaming("gpt-4o-mini"), teamA).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", streamWithoutUsage...)
			// The prompt "Hi" is 9 tokens by the estimate; 10 bytes of text are 3.
			assert.Equal(t, int64(9+3), p.DayCounter(teamASubject))
			for metric, want := range map[string]uint64{
				estimatedInput:                    plugintest.ChatBodyPrompt,
				estimatedOutput:                   3,
				chargedTokens:                     12,
				costNanodollars:                   9*150 + 3*600, // $0.15 and $0.60 per million
				"token_ratelimit_estimated_count": 1,
			} {
				n, defined := metricValue(p, "gpt-4o-mini", "team-a", metric)
				assert.True(t, defined, metric)
				assert.Equal(t, want, n, metric)
			}
			for _, metric := range []string{inputTokens, outputTokens} {
				_, defined := metricValue(p, "gpt-4o-mini", "team-a", metric)
				assert.False(t, defined, "%s counts reported usage only", metric)
			}
			_, err := histogramValue(p, seriesName("gpt-4o-mini", "team-a", estimateRatio))
			assert.Error(t, err, "an estimate is not compared with itself")
		})

		t.Run("without pricing no money counter; without reservation no estimate's histogram; model.none without the body", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.StartOnEmptyRedis(t, redis, consumerConfig("", `"token_per_day": 1000000`))
			x := p.Send(teamA).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 70, 30))...)
			for metric, want := range map[string]uint64{inputTokens: 70, outputTokens: 30, chargedTokens: 100} {
				n, defined := metricValue(p, "none", "team-a", metric)
				assert.True(t, defined, metric)
				assert.Equal(t, want, n, metric)
			}
			_, defined := metricValue(p, "none", "team-a", costNanodollars)
			assert.False(t, defined, "no pricing")
			_, err := histogramValue(p, seriesName("none", "team-a", estimateRatio))
			assert.Error(t, err, "nothing reserved")

			// An upstream error without usage is charged nothing, and counts nothing.
			x = p.Send(teamA).Answer()
			require.True(t, x.Passed())
			x.P.Host.CallOnResponseHeaders(x.ID, [][2]string{{":status", "500"}, {"content-type", "application/json"}}, false)
			x.P.Host.CallOnResponseBody(x.ID, []byte(`{"error":{"message":"boom"}}`), true)
			x.Done()
			n, _ := metricValue(p, "none", "team-a", chargedTokens)
			assert.Equal(t, uint64(100), n)
			_, defined = metricValue(p, "none", "team-a", "token_ratelimit_estimated_count")
			assert.False(t, defined)
		})
	})
}

// The counters of what is charged are added from the tick, at most 100 ms
// after the request settled; when the gateway is done with the plugin (a
// reload, a stop) before a tick, they are added then, not lost.
func TestMetricsCountedBeforeThePluginIsDone(t *testing.T) {
	redis := redistest.Start(t)
	teamA := [2]string{"x-mse-consumer", "team-a"}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, consumerConfig("", `"token_per_day": 1000000`))
		x := p.Send(teamA).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 70, 30))...)
		require.True(t, p.Host.FinishVM(), "nothing left to send: done at once")
		n, err := p.Host.GetCounterMetric(seriesName("none", "team-a", chargedTokens))
		require.NoError(t, err)
		assert.Equal(t, uint64(100), n, "counted when the plugin was done, no tick between")
		ms, err := p.Host.GetHistogramMetric(redisLatency)
		require.NoError(t, err, "Redis's latency recorded too")
		assert.Less(t, ms, uint64(1000))
	})
}

func TestMetricsCountRejectionsByKindOfLimit(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	kinds := map[string]string{
		"tokens":      "token_ratelimit_rejected_tokens_count",
		"money":       "token_ratelimit_rejected_money_count",
		"requests":    "token_ratelimit_rejected_requests_count",
		"concurrency": "token_ratelimit_rejected_concurrency_count",
	}
	// requireOnly checks that the rejection counted under its kind, and in
	// token_ratelimit_count, and under no other kind.
	requireOnly := func(t *testing.T, p *plugintest.Plugin, model, kind string) {
		t.Helper()
		for k, metric := range kinds {
			n, defined := metricValue(p, model, "none", metric)
			if k == kind {
				assert.True(t, defined, metric)
				assert.Equal(t, uint64(1), n, metric)
			} else {
				assert.False(t, defined, "%s: not a rejection of this kind", metric)
			}
		}
		n, _ := metricValue(p, model, "none", rejected)
		assert.Equal(t, uint64(1), n, "the Higress counter counts every kind")
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("tokens", func(t *testing.T) {
			forgetModels(t)
			// The reservation (9 + 10) is over 5 tokens a day.
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 5`))
			p.SendBody(chatNaming("gpt-4o"), key).Answer().RequireRejected(429)
			requireOnly(t, p, "gpt-4o", "tokens")
		})

		t.Run("money", func(t *testing.T) {
			forgetModels(t)
			// The reservation priced (9 × $2.50 + 10 × $10 per million) is
			// over a millionth of a dollar a day.
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+pricing, `"token_per_day": 100000, "usd_per_day": 0.000001`))
			p.SendBody(chatNaming("gpt-4o"), key).Answer().RequireRejected(429)
			requireOnly(t, p, "gpt-4o", "money")
		})

		t.Run("requests", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"query_per_minute": 1`))
			x := p.Request(key)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
			p.Request(key).RequireRejected(429)
			requireOnly(t, p, "none", "requests")
		})

		t.Run("concurrency", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"max_concurrent_requests": 1`))
			first := p.Request(key)
			require.True(t, first.Passed())
			p.Request(key).RequireRejected(429)
			first.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
			requireOnly(t, p, "none", "concurrency")
		})
	})
}

// Redis's latency is recorded per Redis endpoint, from a call to its
// answer on the host's clock: an admission answered 60 ms after it was
// sent records at least 60 (and less than the second the redis.timeout
// allows).
func TestMetricsRecordRedisLatency(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
		// Redis has the scripts after a first request: the call is not
		// sent again with the script's source (a try of its own).
		p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
		x := p.Send(key)
		time.Sleep(60 * time.Millisecond)
		x.Answer()
		require.True(t, x.Passed())
		ms, err := histogramValue(p, redisLatency)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ms, uint64(60))
		assert.Less(t, ms, uint64(1000))

		// The charge at the end is timed too: answered at once, it records
		// less (the emulator keeps the last value recorded).
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
		ms, err = histogramValue(p, redisLatency)
		require.NoError(t, err)
		assert.Less(t, ms, uint64(60))
		assert.True(t, strings.HasPrefix(redisLatency, "redis.redis.static."), "per Redis endpoint, not per route")
	})
}
