package limiter_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Request windows, concurrency limits and sliding windows, through the
// plugin (Go and WASM mode) on a real Redis.

func TestRequestWindowAdmitsExactlyItsLimit(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.Do("FLUSHALL")
		redis.SetClock(float64((redis.Now()/86400+1)*86400) + 0.5) // tomorrow: no day boundary mid-test
		defer redis.SetClock(0)
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig("", `"query_per_day": 5000`))
		key := plugintest.APIKey
		for i := 1; i <= 5000; i++ {
			x := p.Request(key)
			if !x.Passed() {
				t.Fatalf("request %d of 5,000 was rejected", i)
			}
			x.Done()
		}
		last := p.Request(key)
		local := last.RequireRejected(429)
		assert.Contains(t, string(local.Data), "Request rate limit exceeded: the limit of 5000 requests per day is reached")
		assert.Equal(t, "86400", plugintest.Header(local.Headers, "Retry-After"), "until the day resets")
		last.Done()
		assert.Equal(t, int64(5000), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "q86400"))
	})
}

func TestConcurrencyLimit(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		start := plugintest.AnHourAhead(redis, 1)
		p := plugintest.StartOnEmptyRedisAt(t, redis, start, plugintest.APIKeyConfig(`"concurrency_lease_seconds": 60,`, `"max_concurrent_requests": 5`))
		key := plugintest.APIKey
		held := func() int64 { return plugintest.Leases(redis, plugintest.APIKeySubject) }

		// 8 streams opened at once: 5 go, 3 are told to retry in a second.
		var open []*plugintest.Exchange
		for i := 0; i < 8; i++ {
			x := p.Request(key)
			if x.Passed() {
				x.ResponseHeaders("text/event-stream")
				open = append(open, x)
				continue
			}
			local := x.RequireRejected(429)
			assert.Contains(t, string(local.Data), "concurrent requests")
			assert.Contains(t, string(local.Data), "at most 5 may be in progress", "in the OpenAI error of a chat completion")
			assert.Equal(t, "1", plugintest.Header(local.Headers, "Retry-After"))
			assert.Equal(t, "1000", plugintest.Header(local.Headers, "retry-after-ms"))
			x.Done()
		}
		require.Len(t, open, 5)
		assert.Equal(t, int64(5), held())

		// One finishes: the next is admitted.
		open[0].Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 10, 10))...)
		assert.Equal(t, int64(4), held())
		next := p.Request(key)
		require.True(t, next.Passed())
		next.ResponseHeaders("text/event-stream")
		assert.False(t, p.Request(key).Passed(), "full again")

		// A client reset (stream done without the last chunk) frees its slot
		// at the next tick, whose answer the gateway always delivers.
		open[1].Done()
		assert.Equal(t, int64(5), held(), "released from the tick")
		p.SendPostponed()
		assert.Equal(t, int64(4), held())
		assert.True(t, p.Request(key).Passed())

		// A gateway that crashes never ends its streams: their leases expire
		// after concurrency_lease_seconds and the next admission sweeps them.
		redis.SetClock(start + 59)
		assert.False(t, p.Request(key).Passed(), "leases still valid")
		redis.SetClock(start + 61)
		x := p.Request(key)
		assert.True(t, x.Passed(), "the crashed gateway's leases expired")
		assert.Equal(t, int64(1), held(), "only the new request holds a lease")
	})
}

// Point 8 of the hardening issue: "Leases renew only on response body
// chunks, so a long non-streaming call can lose its slot." A request in
// progress renews its leases from the plugin's tick, whether its response
// streams or has not begun. Renewals are paced by the gateway's clock: in
// WASM mode the machine's, as Envoy gives it (it was Go mode only while
// the emulator gave WASM modules wazero's clock, 1 ms more per reading).
func TestHardening8LeaseRenewedWhileTheRequestIsInProgress(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		start := plugintest.AnHourAhead(redis, 1)
		// A 3 s lease is renewed every second while the request lasts.
		p := plugintest.StartOnEmptyRedisAt(t, redis, start, plugintest.APIKeyConfig(`"concurrency_lease_seconds": 3,`, `"max_concurrent_requests": 1`))
		key := plugintest.APIKey
		x := p.Request(key)
		require.True(t, x.Passed())
		score := func() float64 {
			return redis.Do("ZSCORE", plugintest.APIKeySubject+":c", redis.Do("ZRANGE", plugintest.APIKeySubject+":c", "0", "0").Array()[0].String()).Float()
		}
		assert.Equal(t, start+3, score())
		p.SendPostponed()
		assert.Equal(t, start+3, score(), "not renewed before a second has passed")
		// No response yet (a long non-streaming call): the tick renews.
		redis.SetClock(start + 2)
		time.Sleep(1100 * time.Millisecond)
		p.SendPostponed()
		assert.Equal(t, start+5, score(), "renewed from the time of the renewal")
		redis.SetClock(start + 4)
		assert.False(t, p.Request(key).Passed(), "the renewed lease still holds the slot")
		x.Respond("application/json", `{"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		p.SendPostponed()
		assert.True(t, p.Request(key).Passed(), "released at the end")
	})
}

// The boundary burst: 10 requests at 0:59 and 10 at 1:01 against 10 a
// minute; a fixed window lets the second ten through, a sliding one does not.
func TestSlidingWindowThroughThePlugin(t *testing.T) {
	redis := redistest.Start(t)
	for _, c := range []struct {
		windowType string
		late       int
	}{{"fixed", 10}, {"sliding", 0}} {
		t.Run(c.windowType, func(t *testing.T) {
			plugintest.RunTest(t, func(t *testing.T) {
				redis.Do("FLUSHALL")
				minute := plugintest.AnHourAhead(redis, 60)
				defer redis.SetClock(0)
				p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"window_type": "`+c.windowType+`",`, `"query_per_minute": 10`))
				key := plugintest.APIKey
				burst := func(at float64) int {
					redis.SetClock(at)
					admitted := 0
					for i := 0; i < 10; i++ {
						x := p.Request(key)
						if x.Passed() {
							admitted++
						}
						x.Done()
					}
					return admitted
				}
				assert.Equal(t, 10, burst(minute+59))
				assert.Equal(t, c.late, burst(minute+61))
			})
		})
	}
}

// Token windows, a request window and a concurrency limit together still
// make one Redis call at admission and one at the end.
func TestEveryLimitAtOnceIsOneCallPerPhase(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedisWithScript(t, redis, plugintest.APIKeyConfig(`"window_type": "sliding",`,
			`"token_per_minute": 10000, "token_per_day": 100000, "query_per_minute": 100, "max_concurrent_requests": 5`))
		x := p.Send(plugintest.APIKey)
		assert.Equal(t, 1, redis.Answer(p.Host, x.ID), "one call at admission")
		require.True(t, x.Passed())
		x.ResponseHeaders("text/event-stream")
		events := plugintest.SSEEvents(plugintest.OpenAIStream(3, 100, 50))
		for i, e := range events {
			p.Host.CallOnResponseBody(x.ID, []byte(e), i == len(events)-1)
		}
		assert.Equal(t, 1, redis.Answer(p.Host, x.ID), "one call at the end")
		p.Host.CompleteHttpContext(x.ID)
		assert.Equal(t, 0, redis.Answer(p.Host, x.ID), "nothing more when the stream is done")
		assert.Equal(t, int64(150), p.MinuteCounter(plugintest.APIKeySubject))
		assert.Equal(t, int64(1), plugintest.Counter(redis, plugintest.APIKeySubject, "q60", redis.Now()))
		assert.Equal(t, int64(0), plugintest.Leases(redis, plugintest.APIKeySubject), "the lease was released")
	})
}
