package limiter_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// metricName is the full name of a counter of the test route and upstream.
func metricName(model, metric string) string {
	return "route.test-route-default.upstream.test-cluster-default.model." + model + ".consumer.none.metric." + metric
}

// counted reads a counter of the test route, upstream and consumer; 0 when
// it was never defined.
func counted(p *plugintest.Plugin, model, metric string) uint64 {
	n, err := p.Host.GetCounterMetric(metricName(model, metric))
	if err != nil {
		return 0
	}
	return n
}

// bodyNaming is a chat completion request body naming model.
func bodyNaming(model string) string {
	quoted, _ := json.Marshal(model)
	return `{"model":` + string(quoted) + `,"max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`
}

// forgetModels starts a test from an empty set of models with counters (see
// limiter.ForgetMetricModels), and leaves none behind.
func forgetModels(t *testing.T) {
	limiter.ForgetMetricModels()
	t.Cleanup(limiter.ForgetMetricModels)
}

const (
	rejected      = "token_ratelimit_count"
	admitFailure  = "token_ratelimit_redis_failure_count"
	chargeFailure = "token_ratelimit_charge_failure_count"
)

func TestMetricsCountUnderTheModelTheRequestNames(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("rejected after its body was read: the body's model", func(t *testing.T) {
			forgetModels(t)
			// 100 tokens a day; the body reserves 1 + 100: over the limit.
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100`))
			p.SendBody(bodyNaming("gpt-4o-mini"), key).Answer().RequireRejected(429)
			p.SendBody(bodyNaming("gpt-4o-mini"), key).Answer().RequireRejected(429)
			p.SendBody(bodyNaming("claude-sonnet-4"), key).Answer().RequireRejected(429)
			assert.Equal(t, uint64(2), counted(p, "gpt-4o-mini", rejected))
			assert.Equal(t, uint64(1), counted(p, "claude-sonnet-4", rejected))
			assert.Zero(t, counted(p, "none", rejected))
		})

		t.Run("rejected without its body read: model.none, even with a model in the path", func(t *testing.T) {
			forgetModels(t)
			// No reservation, no per-model weights: admission happens at the
			// headers, and the body is never read, not even for metrics.
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100`))
			x := p.Request(key)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 100))...)
			y := p.SendTo("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", key).Answer()
			y.RequireRejected(429)
			y.Done()
			z := p.Send(key).Answer()
			z.RequireRejected(429)
			z.Done()
			assert.Equal(t, uint64(2), counted(p, "none", rejected))
			assert.Zero(t, counted(p, "gemini-2_5-flash", rejected))
		})

		t.Run("a model's dots and odd bytes are replaced, and a long one cut", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100`))
			for _, model := range []string{
				"gemini-2.5-flash",
				`accounts/fireworks/models/llama-v3p1-8b:free+beta`,
				"evil.metric.token_ratelimit_count route \"x\"\n\tmodèle",
				strings.Repeat("abcdefgh", 20),
			} {
				p.SendBody(bodyNaming(model), key).Answer().RequireRejected(429)
			}
			for _, name := range []string{
				"gemini-2_5-flash",
				"accounts/fireworks/models/llama-v3p1-8b:free+beta",
				"evil_metric_token_ratelimit_count_route__x___mod__le", // è is two bytes
				strings.Repeat("abcdefgh", 8),
			} {
				assert.Equal(t, uint64(1), counted(p, name, rejected), "model.%s", name)
			}
			assert.Zero(t, counted(p, "gemini-2.5-flash", rejected), "a dot would split the segment")
		})

		t.Run("an admission Redis fails: the body's model", func(t *testing.T) {
			forgetModels(t)
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+`"failure_mode": "deny",`, `"token_per_day": 100000`))
			x := p.SendBody(bodyNaming("gpt-4o-mini"), key)
			calls := p.Host.GetRedisCalloutAttributesFromContext(x.ID)
			require.Len(t, calls, 1)
			p.Host.CallOnRedisCallResponse(calls[0].CalloutID, 0, []byte("-ERR Error running script: out of memory\r\n"))
			x.RequireRejected(503)
			x.Done()
			assert.Equal(t, uint64(1), counted(p, "gpt-4o-mini", admitFailure))
			assert.Zero(t, counted(p, "none", admitFailure))
		})

		t.Run("a charge Redis fails: the body's model", func(t *testing.T) {
			forgetModels(t)
			// Per-model weights read the body (no reservation).
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(
				`"token_count_strategy": "weighted", "token_weights": {"models": {"claude-sonnet-4.5": {"output": 5}}},`,
				`"token_per_day": 100000`))
			x := p.SendBody(bodyNaming("claude-sonnet-4.5"), key).Answer()
			require.True(t, x.Passed())
			x.ResponseHeaders("text/event-stream")
			p.Host.CallOnResponseBody(x.ID, []byte(plugintest.AnthropicStream(10, 0, 0, 20)), true)
			calls := p.Host.GetRedisCalloutAttributesFromContext(x.ID)
			require.Len(t, calls, 1, "the charge")
			p.Host.CallOnRedisCallResponse(calls[0].CalloutID, 0, []byte("-ERR Error running script: out of memory\r\n"))
			p.Host.CompleteHttpContext(x.ID)
			p.Host.Tick()
			calls = p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)
			require.Len(t, calls, 1, "its retry")
			p.Host.CallOnRedisCallResponse(calls[0].CalloutID, 0, []byte("-ERR Error running script: out of memory\r\n"))
			assert.Equal(t, uint64(1), counted(p, "claude-sonnet-4_5", chargeFailure))
			assert.Zero(t, counted(p, "none", chargeFailure))
			assert.Zero(t, p.DayCounter(plugintest.APIKeySubject), "nothing charged")
		})
	})
}

func TestMetricsGiveAtMostSoManyModelsCountersOfTheirOwn(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTestOnFreshVM(t, func(t *testing.T) {
		forgetModels(t)
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100`))
		model := func(i int) string { return fmt.Sprintf("model-%03d", i) }
		for i := 0; i < limiter.MaxMetricModels+5; i++ {
			p.SendBody(bodyNaming(model(i)), key).Answer().RequireRejected(429)
		}
		for i := 0; i < limiter.MaxMetricModels; i++ {
			assert.Equal(t, uint64(1), counted(p, model(i), rejected), "model.%s", model(i))
		}
		for i := limiter.MaxMetricModels; i < limiter.MaxMetricModels+5; i++ {
			_, err := p.Host.GetCounterMetric(metricName(model(i), rejected))
			assert.Error(t, err, "no counter of its own for model.%s", model(i))
		}
		assert.Equal(t, uint64(5), counted(p, "other", rejected), "the models past the cap")

		// A model that has counters keeps them after the cap is reached;
		// a new one still goes to model.other.
		p.SendBody(bodyNaming(model(0)), key).Answer().RequireRejected(429)
		p.SendBody(bodyNaming("yet-another"), key).Answer().RequireRejected(429)
		assert.Equal(t, uint64(2), counted(p, model(0), rejected))
		assert.Equal(t, uint64(6), counted(p, "other", rejected))
		assert.Zero(t, counted(p, "none", rejected))
	})
}

// Consumers the configuration names get counters of their own; every
// other consumer counts under "other", so a client header cannot make
// counters without end. Issue 14, point 5: "Unbounded metrics from a
// client header. A counter is created per distinct x-mse-consumer value
// [...] 200 rejected requests with distinct 8 KB values made 200
// counters."
func TestHardening5MetricsDoNotGrowWithClientConsumers(t *testing.T) {
	redis := redistest.Start(t)
	config := `{"rule_name": "chat", "rule_items": [
		{"limit_by_consumer": "", "limit_keys": [{"key": "alice", "query_per_day": 1}]},
		{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "query_per_day": 1}]}],
		` + plugintest.RedisSection + `}`
	counter := func(p *plugintest.Plugin, consumer string) (uint64, error) {
		return p.Host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer." +
			consumer + ".metric.token_ratelimit_count")
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, config)
		for i := 0; i < 2; i++ {
			p.Request([2]string{"x-mse-consumer", "alice"})
		}
		const clients = 200
		consumers := make([]string, clients)
		for i := range consumers {
			consumers[i] = strconv.Itoa(i) + strings.Repeat("x", 8<<10)
			require.True(t, p.Request([2]string{"x-mse-consumer", consumers[i]}).Passed())
			p.Request([2]string{"x-mse-consumer", consumers[i]}).RequireRejected(429)
		}
		n, err := counter(p, "alice")
		require.NoError(t, err)
		assert.Equal(t, uint64(1), n, "a configured consumer by name")
		n, err = counter(p, "other")
		require.NoError(t, err)
		assert.Equal(t, uint64(clients), n, "every other consumer under one name")
		for _, c := range consumers[:5] {
			_, err := counter(p, c)
			assert.Error(t, err, "no counter of its own")
		}
	})
}
