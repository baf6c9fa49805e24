package limiter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// localConfig limits sk-1 to 1,000 tokens a minute, keeps that limit in
// the worker while Redis fails (one worker: local_share 1), and opens the
// breaker after 3 failed calls.
const localConfig = `{"rule_name": "chat", "failure_mode": "local", "local_share": 1,
	"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_minute": 1000}]}],
	"redis": {"service_name": "redis.static", "timeout": 1000, "breaker_failures": 3, "breaker_probe_ms": 50}}`

// While Redis is down, the subject is held to its limit by the worker's
// own window (± one request's usage, as Redis holds it without
// reservation); once Redis answers again, what was used during the outage
// is added to the Redis window it belongs to, from the tick, once.
func TestLocalLimitHoldsDuringAnOutageAndCatchesUp(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 20)
		p := plugintest.StartOnEmptyRedis(t, redis, localConfig)
		key := plugintest.APIKey
		usage := func(tokens int) []string {
			return plugintest.SSEEvents(plugintest.OpenAIStream(1, tokens, 0))
		}
		p.Request(key).Respond("text/event-stream", usage(200)...)
		require.Equal(t, int64(200), p.MinuteCounter(plugintest.APIKeySubject))

		redis.Stop()
		used, admitted := 0, 0
		for i := 0; ; i++ {
			require.Less(t, i, 20, "the local limit never closed")
			x := p.Request(key)
			if !x.Passed() {
				local := x.RequireRejected(429)
				assert.Equal(t, "rule_item=0; key=s...#0f2c10bf", plugintest.Header(local.Headers, "X-TokenRateLimit-Scope"))
				x.Done()
				break
			}
			x.Respond("text/event-stream", usage(150)...)
			used, admitted = used+150, admitted+1
		}
		assert.Equal(t, 1050, used, "checked before, charged after: the limit, and at most one request's usage more")
		decided, err := p.Host.GetCounterMetric(metricName("none", "token_ratelimit_local_decision_count"))
		require.NoError(t, err)
		assert.Equal(t, uint64(admitted+1), decided)

		// Redis is back: the breaker closes on a probe, then the tick adds
		// the outage's usage to the minute, once.
		redis.Restart()
		redis.Do("SET", plugintest.Bucket(plugintest.APIKeySubject, "t60", p.Redis.Now()), "200") // the minute as it was before the outage
		tickUntilProbe(t, p)
		p.SendPostponed()
		p.SendPostponed()
		assert.Equal(t, int64(200+used), p.MinuteCounter(plugintest.APIKeySubject), "the outage's usage, caught up")
		for range 3 {
			p.SendPostponed()
		}
		assert.Equal(t, int64(200+used), p.MinuteCounter(plugintest.APIKeySubject), "caught up once")
		caught, err := p.Host.GetCounterMetric("redis.redis.static.metric.token_ratelimit_local_caught_up_tokens")
		require.NoError(t, err)
		assert.Equal(t, uint64(used), caught)
		p.Request(key).RequireRejected(429) // Redis decides again: 1,250 of 1,000
	})
}

// A request Redis admitted whose charge fails twice (Redis went down
// mid-stream) is not lost with failure_mode local: it waits in the local
// window and is added to Redis once Redis answers.
func TestLocalKeepsAFailedChargeForTheCatchUp(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 20)
		p := plugintest.StartOnEmptyRedis(t, redis, localConfig)
		x := p.Request(plugintest.APIKey)
		require.True(t, x.Passed())
		redis.Stop()
		x.ResponseHeaders("text/event-stream")
		p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(1, 300, 0)), true)
		x.Answer()        // the charge fails
		p.SendPostponed() // and its retry
		p.Host.CompleteHttpContext(x.ID)
		redis.Restart()
		p.SendPostponed()
		assert.Equal(t, int64(300), p.MinuteCounter(plugintest.APIKeySubject))
		failures, _ := p.Host.GetCounterMetric(metricName("none", "token_ratelimit_charge_failure_count"))
		assert.Zero(t, failures, "kept, not lost")
	})
}

// Redis flapping (down, up, down, up) under 20 requests in flight at a
// time: every request is decided (none left paused), every token is
// counted in Redis exactly once (admitted by Redis, or decided locally and
// caught up), and each change of the breaker is logged once.
func TestRedisFlappingUnderConcurrency(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 30)
		p := plugintest.StartOnEmptyRedis(t, redis, strings.Replace(localConfig, `"token_per_minute": 1000`, `"token_per_minute": 1000000`, 1))
		key := plugintest.APIKey
		minute := func() string { return plugintest.Bucket(plugintest.APIKeySubject, "t60", p.Redis.Now()) }
		round := func(up bool) {
			batch := make([]*plugintest.Exchange, 20)
			for i := range batch {
				batch[i] = p.Send(key) // all in flight before Redis answers any
			}
			for _, x := range batch {
				x.Answer()
			}
			for i, x := range batch {
				require.True(t, x.Passed(), "request %d (Redis up: %v) was not let through", i, up)
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 7, 3))...)
			}
		}
		var kept string
		for cycle := range 2 {
			round(true)
			kept = redis.Do("GET", minute()).String()
			redis.Stop()
			round(false)
			round(false)
			redis.Restart() // with its data: a partition that healed
			redis.Do("SET", minute(), kept)
			tickUntilProbe(t, p)
			p.SendPostponed() // the probe's answer closes the breaker
			p.SendPostponed() // the catch-up
			assert.Equal(t, int64(10*20*3*(cycle+1)), p.MinuteCounter(plugintest.APIKeySubject), "cycle %d: each token once", cycle)
		}
		assert.Equal(t, 2, logged(p.Host.GetWarnLogs(), "the circuit breaker opens"))
		assert.Equal(t, 2, logged(p.Host.GetInfoLogs(), "the circuit breaker closes"))
	})
}
