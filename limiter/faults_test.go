package limiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Redis restarting while streams are in flight (an empty Redis on the same
// address: no counters, no scripts). Other faults have their own tests:
// error, garbage and wrong-shape replies, a failed or timed-out call, Redis
// stopped then back (TestRedisTroubleAppliesTheFailureModeAndNeverLeavesARequestPaused),
// a Redis that never answers (e2e), streams that never finish
// (TestConcurrencyLimit), a client leaving mid-retry (queue_test.go).

func TestRedisRestartMidRun(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	scriptLoaded := func() bool {
		return redis.Do("SCRIPT", "EXISTS", scripts.Limiter.SHA1).Array()[0].Integer() == 1
	}
	// open admits n streams and sends their response headers.
	open := func(p *plugintest.Plugin, n int, body string) []*plugintest.Exchange {
		var xs []*plugintest.Exchange
		for i := 0; i < n; i++ {
			x := p.SendBody(body, key).Answer()
			require.True(t, x.Passed(), "stream %d admitted", i+1)
			x.ResponseHeaders("text/event-stream")
			xs = append(xs, x)
		}
		return xs
	}
	finish := func(xs []*plugintest.Exchange, usage int) {
		for _, x := range xs {
			require.Equal(t, 0, len(x.P.Host.GetRedisCalloutAttributesFromContext(x.ID)))
			x.P.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, usage/2, usage-usage/2)), true)
			x.Done()
		}
	}
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("checked and charged after: usage in flight lands in the new counters", func(t *testing.T) {
			redis.AvoidWindowEdge(86400, 10)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"failure_mode": "deny",`, `"token_per_day": 100000`))
			before := open(p, 3, plugintest.ChatBody(1000))
			redis.Restart()
			after := open(p, 1, plugintest.ChatBody(1000))
			assert.True(t, scriptLoaded(), "reloaded by the first admission after the restart (no 503: failure_mode is deny)")
			finish(before, 300)
			finish(after, 500)
			assert.Equal(t, int64(3*300+500), p.DayCounter(plugintest.APIKeySubject), "every usage charged once, none lost")
		})

		t.Run("reserved: refunds of reservations the restart lost never go below zero", func(t *testing.T) {
			redis.AvoidWindowEdge(86400, 10)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+`"failure_mode": "deny",`, `"token_per_day": 100000`))
			before := open(p, 3, plugintest.ChatBody(1000))
			redis.Restart()

			// Streams admitted before the restart end first: their
			// reservations went with the old counters, and so do their
			// refunds. What comes after is charged exactly.
			finish(before, 300)
			assert.Equal(t, int64(0), p.DayCounter(plugintest.APIKeySubject), "nothing to give back in an empty Redis")
			after := open(p, 1, plugintest.ChatBody(1000))
			reserved := p.DayCounter(plugintest.APIKeySubject)
			require.Greater(t, reserved, int64(1000))
			finish(after, 500)
			assert.Equal(t, int64(500), p.DayCounter(plugintest.APIKeySubject), "the new stream charged exactly")

			// Ending while new streams are in flight, their refunds (reserved
			// − used each) can take back at most what the window holds: the
			// counter never goes below zero, and what is lost is at most the
			// reservations the restart wiped (README, Known limits).
			before = open(p, 3, plugintest.ChatBody(1000))
			redis.Restart()
			after = open(p, 1, plugintest.ChatBody(1000))
			finish(before, 300)
			assert.Equal(t, int64(0), p.DayCounter(plugintest.APIKeySubject), "3 refunds of %d each stop at zero", reserved-300)
			finish(after, 500)
			assert.GreaterOrEqual(t, p.DayCounter(plugintest.APIKeySubject), int64(0))
			next := open(p, 1, plugintest.ChatBody(1000))
			finish(next, 700)
			assert.Equal(t, int64(700), p.DayCounter(plugintest.APIKeySubject), "the window counts on from zero, not from below")
		})
	})
}

func TestRedisTroubleAppliesTheFailureModeAndNeverLeavesARequestPaused(t *testing.T) {
	redis := redistest.Start(t)
	failures := []struct {
		name   string
		status int32
		reply  string
	}{
		{"unreachable or timed out", 1, ""},
		{"error reply", 0, "-ERR Error running script: out of memory\r\n"},
		{"garbage", 0, "this is not RESP at all"},
		{"wrong shape", 0, "*2\r\n:1\r\n:5\r\n"},
		{"empty", 0, ""},
	}
	plugintest.RunTest(t, func(t *testing.T) {
		for _, mode := range []string{"allow", "deny"} {
			for _, f := range failures {
				t.Run(mode+"/"+f.name, func(t *testing.T) {
					p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"failure_mode": "`+mode+`",`, `"token_per_day": 1000`))
					x := p.Send(plugintest.APIKey)
					calls := p.Host.GetRedisCalloutAttributesFromContext(x.ID)
					require.Len(t, calls, 1)
					p.Host.CallOnRedisCallResponse(calls[0].CalloutID, f.status, []byte(f.reply))
					if mode == "allow" {
						assert.True(t, x.Passed(), "allowed through")
						x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
					} else {
						local := x.RequireRejected(503)
						assert.Contains(t, string(local.Data), "failure_mode is deny")
						x.Done()
					}
					assert.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), "no call left behind")
					failures, err := p.Host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer.none.metric.token_ratelimit_redis_failure_count")
					require.NoError(t, err)
					assert.Equal(t, uint64(1), failures)
				})
			}
		}

		t.Run("scripts flushed: reloaded once, then by digest again", func(t *testing.T) {
			redis.AvoidWindowEdge(86400, 10)
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 1000`))
			key := plugintest.APIKey
			p.Request(key).Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 0))...)
			redis.Do("SCRIPT", "FLUSH")
			x := p.Send(key)
			assert.Equal(t, 2, redis.Answer(p.Host, x.ID), "NOSCRIPT, then EVAL")
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 0))...)
			y := p.Send(key)
			assert.Equal(t, 1, redis.Answer(p.Host, y.ID))
			y.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 0))...)
			assert.Equal(t, int64(300), p.DayCounter(plugintest.APIKeySubject), "nothing lost, nothing charged twice")
		})

		t.Run("scripts flushed: charges sent as the stream ends are not lost", func(t *testing.T) {
			// Envoy ends the stream before Redis answers the charge, and the
			// reply to a call of a finished stream is dropped: a charge answered
			// NOSCRIPT could never be retried. The admission loads the script.
			redis.Do("FLUSHALL")
			redis.Do("SCRIPT", "FLUSH")
			redis.AvoidWindowEdge(86400, 10)
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			for i := 1; i <= 3; i++ {
				x := p.Request(plugintest.APIKey)
				require.True(t, x.Passed())
				x.ResponseHeaders("text/event-stream")
				p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, 30, 20)), true) // the charge leaves
				p.Host.CompleteHttpContext(x.ID)                                                  // the stream is over
				x.Answer()                                                                        // Redis answers now
				assert.Equal(t, int64(50*i), p.DayCounter(plugintest.APIKeySubject), "request %d", i)
			}
		})

		t.Run("Redis stopped, then back: no plugin restart needed", func(t *testing.T) {
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"failure_mode": "deny",`, `"token_per_day": 1000`))
			key := plugintest.APIKey
			redis.Stop()
			p.Request(key).RequireRejected(503)
			redis.Restart()
			x := p.Request(key)
			require.True(t, x.Passed(), "the fresh Redis has no scripts and no counters: reloaded, admitted")
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 0))...)
			assert.Equal(t, int64(10), p.DayCounter(plugintest.APIKeySubject))
		})
	})
}
