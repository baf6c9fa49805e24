package main

import (
	"strconv"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// The hooks main.go registers, each seen doing its part on a request, in Go
// mode and WASM mode, against a real redis-server. The limiter's behaviour in
// depth is tested in limiter/, through the same harness.

// TestMain builds the plugin for WASM mode; Go mode runs the hooks main.go's
// init registered.
func TestMain(m *testing.M) { plugintest.Main(m) }

// Request headers (paused until Redis answers), the Redis reply, response
// headers and body, the end of the stream (the charge), a rejection and its
// metric.
func TestAdmitsChargesAndRejectsOnRealRedis(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.Do("FLUSHALL")
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 1000`))
		key := plugintest.APIKey

		first := p.Send(key)
		assert.Equal(t, types.HeaderStopAllIterationAndWatermark, first.Action, "paused until Redis answers")
		assert.False(t, first.Passed())
		first.Answer()
		require.True(t, first.Passed(), "budget left: resumed")
		first.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(20, 400, 200))...)
		assert.Equal(t, int64(600), p.DayCounter(plugintest.APIKeySubject))

		p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(5, 300, 300))...)
		assert.Equal(t, int64(1200), p.DayCounter(plugintest.APIKeySubject), "charged past the limit, not stopped at it")

		third := p.Request(key)
		local := third.RequireRejected(429)
		reset, err := strconv.Atoi(plugintest.Header(local.Headers, "X-TokenRateLimit-Reset"))
		require.NoError(t, err)
		code := `"code":"insufficient_quota"` // the day reopens later than max_retry_wait: the SDKs are told not to retry
		if reset <= 60 {
			code = `"code":"rate_limit_exceeded"`
		}
		assert.Contains(t, string(local.Data), code, "an OpenAI error, for a chat completion")
		assert.True(t, reset > 0 && reset <= 86400, "reset %d", reset)
		assert.Equal(t, strconv.Itoa(reset), plugintest.Header(local.Headers, "Retry-After"))
		third.Done()
		assert.Equal(t, int64(1200), p.DayCounter(plugintest.APIKeySubject), "a rejected request costs nothing")

		rejections, err := p.Host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer.none.metric.token_ratelimit_count")
		require.NoError(t, err)
		assert.Equal(t, uint64(1), rejections)

		_, err = p.Host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer.none.metric.token_ratelimit_charge_failure_count")
		assert.Error(t, err, "no charge failed")

		other := p.Request([2]string{"x-api-key", "sk-2"})
		assert.True(t, other.Passed(), "another key is not limited")
		assert.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(other.ID))
	})
}

// The request body: with token_reservation, admission waits for it and
// reserves its estimate; the charge settles the reservation to the usage.
func TestRequestBodyIsReadBeforeAdmission(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.Do("FLUSHALL")
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100000`))
		x := p.Send(plugintest.APIKey)
		assert.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), "no admission before the body")
		p.Host.CallOnRequestBody(x.ID, []byte(plugintest.ChatBody(500)), true)
		require.Len(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), 1, "the body's end sends the admission")
		x.Answer()
		require.True(t, x.Passed())
		reserved := p.DayCounter(plugintest.APIKeySubject)
		assert.Greater(t, reserved, int64(500), "the prompt and max_tokens are reserved while the request runs")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(3, 40, 60))...)
		assert.Equal(t, int64(100), p.DayCounter(plugintest.APIKeySubject), "the reservation settled to the usage")
	})
}

// The tick: a queued request (over_limit_action: queue) is retried from the
// plugin's context when its window turns.
func TestTickRetriesAQueuedRequest(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.Do("FLUSHALL")
		start := float64(redis.Now() + 3600)
		redis.SetClock(start + 0.05)
		defer redis.SetClock(0)
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"over_limit_action": "queue",`, `"query_per_second": 1`))
		key := plugintest.APIKey
		p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 1))...)
		waiting := p.Request(key)
		require.False(t, waiting.Passed(), "over the limit: it waits")
		require.Nil(t, waiting.Local(), "waiting, not rejected")
		for i := 0; i < 15 && !waiting.Passed(); i++ { // 100 ms a tick
			p.Tick([]*plugintest.Exchange{waiting})
		}
		require.True(t, waiting.Passed(), "admitted from the tick once the second turned")
		waiting.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 1))...)
	})
}

// Request and response hooks of a request no rule matches: nothing is asked
// of Redis, nothing is changed.
func TestRequestsNoRuleMatchesAreNotTouched(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 1`))
		x := p.Send([2]string{"x-api-key", "sk-other"}, [2]string{"accept-encoding", "gzip"})
		assert.Equal(t, types.ActionContinue, x.Action)
		assert.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID))
		assert.Equal(t, "gzip", plugintest.Header(p.Host.GetCurrentRequestHeaders(x.ID), "accept-encoding"), "left as it was")
		x.Respond("application/json", `{"usage":{"prompt_tokens":5,"completion_tokens":5}}`)
		assert.Empty(t, redis.Keys("*"))

		limited := p.Send(plugintest.APIKey, [2]string{"accept-encoding", "gzip"})
		assert.False(t, test.HasHeader(p.Host.GetCurrentRequestHeaders(limited.ID), "accept-encoding"),
			"a limited request asks for an uncompressed answer, whose usage can be read")
		limited.Answer().Done()
	})
}

// The plugin start: a configuration the parser refuses fails the start.
func TestInvalidConfigurationsRefuseToStart(t *testing.T) {
	plugintest.RunTest(t, func(t *testing.T) {
		for _, config := range []string{
			`{"rule_name": "x", ` + plugintest.RedisSection + `}`,
			`{"rule_name": "x", "global_threshold": {"token_per_minute": 0}, ` + plugintest.RedisSection + `}`,
			`{"rule_name": "x", "global_threshold": {"token_per_minute": 10}}`,
			`{"rule_name": "x", "global_threshold": {"token_per_minute": 10}, "failure_mode": "maybe", ` + plugintest.RedisSection + `}`,
		} {
			host, status := plugintest.NewTestHost([]byte(config))
			assert.Equal(t, types.OnPluginStartStatusFailed, status, config)
			host.Reset()
		}
	})
}
