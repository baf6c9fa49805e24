package limiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// breakerConfig limits sk-1 to 1,000 tokens a day, denies when Redis
// fails, and opens the breaker after 3 failed calls, probing after 50 ms.
const breakerConfig = `{"rule_name": "chat", "failure_mode": "deny",
	"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_day": 1000}]}],
	"redis": {"service_name": "redis.static", "timeout": 1000, "breaker_failures": 3, "breaker_probe_ms": 50}}`

// tickUntilProbe ticks until a probe is out, as time passes (bounded).
func tickUntilProbe(t *testing.T, p *plugintest.Plugin) {
	t.Helper()
	for range 1000 {
		p.Host.Tick()
		if p.RetriesPending() > 0 {
			require.Equal(t, 1, p.RetriesPending())
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no probe within 1,000 ticks")
}

func logged(logs []string, text string) int {
	n := 0
	for _, l := range logs {
		if strings.Contains(l, text) {
			n++
		}
	}
	return n
}

// After breaker_failures failed calls, requests are decided by
// failure_mode at once, with no Redis call; probes go out from the tick,
// one at a time, waiting longer after each failure; the first answer
// closes the breaker and requests go to Redis again. Each change is
// logged once.
func TestBreakerStopsWaitingOnAFailingRedis(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, breakerConfig)
		key := plugintest.APIKey
		redis.Stop()
		defer redis.Restart()
		for range 3 {
			x := p.Send(key)
			require.Equal(t, 1, len(p.Host.GetRedisCalloutAttributesFromContext(x.ID)), "closed: the request asks Redis")
			x.Answer().RequireRejected(503)
		}
		opens := "the circuit breaker opens"
		assert.Equal(t, 1, logged(p.Host.GetWarnLogs(), opens))
		for range 5 {
			x := p.Send(key)
			assert.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), "open: no Redis call")
			x.RequireRejected(503) // decided in the request-headers hook
		}
		assert.Equal(t, 1, logged(p.Host.GetWarnLogs(), opens), "logged once, not per request")
		assert.Equal(t, 3, logged(p.Host.GetWarnLogs(), "token rate limit check failed"), "the failed calls only")
		opened, err := p.Host.GetCounterMetric("redis.redis.static.metric.token_ratelimit_breaker_open_count")
		require.NoError(t, err)
		assert.Equal(t, uint64(1), opened)

		// Probes: none at once, then one at a time; the doubling of the
		// wait is the breaker's own test (scripts), as WASM mode's clock
		// is the emulator's, moving with each reading.
		p.Host.Tick()
		assert.Zero(t, p.RetriesPending(), "no probe before breaker_probe_ms")
		tickUntilProbe(t, p)
		p.Host.Tick()
		require.Equal(t, 1, p.RetriesPending(), "one probe at a time")
		p.SendPostponed() // answered: Redis is down
		assert.Zero(t, p.RetriesPending())
		tickUntilProbe(t, p)
		redis.Restart()
		p.SendPostponed() // the probe gets its answer: the breaker closes
		assert.Equal(t, 1, logged(p.Host.GetInfoLogs(), "circuit breaker closes"))
		x := p.Send(key)
		require.Equal(t, 1, len(p.Host.GetRedisCalloutAttributesFromContext(x.ID)), "closed again: the request asks Redis")
		require.True(t, x.Answer().Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 0))...)
		assert.Equal(t, int64(10), p.DayCounter(plugintest.APIKeySubject))
		openMs, err := p.Host.GetCounterMetric("redis.redis.static.metric.token_ratelimit_breaker_open_ms")
		require.NoError(t, err)
		assert.Positive(t, openMs, "the time it was open")
	})
}

// A single failure, or failures between answers, do not open it; with
// breaker_failures 0 it never opens.
func TestBreakerNeedsFailuresInARow(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		for _, failures := range []string{`"breaker_failures": 3`, `"breaker_failures": 0`} {
			redis.Do("FLUSHALL")
			config := strings.Replace(breakerConfig, `"breaker_failures": 3`, failures, 1)
			p := plugintest.Start(t, redis, config)
			key := plugintest.APIKey
			for round := range 4 {
				redis.Stop()
				for range 2 {
					p.Request(key).RequireRejected(503)
				}
				if failures == `"breaker_failures": 0` {
					p.Request(key).RequireRejected(503)
				}
				redis.Restart()
				x := p.Send(key)
				require.Equal(t, 1, len(p.Host.GetRedisCalloutAttributesFromContext(x.ID)), "%s, round %d: still asking Redis", failures, round)
				require.True(t, x.Answer().Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 0))...)
			}
			assert.Zero(t, logged(p.Host.GetWarnLogs(), "circuit breaker opens"), failures)
			p.Stop()
		}
	})
}
