package main

import (
	"testing"

	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	key := [2]string{"x-api-key", "sk-1"}
	scriptLoaded := func() bool {
		return redis.Do("SCRIPT", "EXISTS", scripts.Limiter.SHA1).Array()[0].Integer() == 1
	}
	// open admits n streams and sends their response headers.
	open := func(p *plugin, n int, body string) []*exchange {
		var xs []*exchange
		for i := 0; i < n; i++ {
			x := p.sendBody(body, key).answer()
			require.True(t, x.passed(), "stream %d admitted", i+1)
			x.responseHeaders("text/event-stream")
			xs = append(xs, x)
		}
		return xs
	}
	finish := func(xs []*exchange, usage int) {
		for _, x := range xs {
			require.Equal(t, 0, len(x.p.host.GetRedisCalloutAttributesFromContext(x.id)))
			x.p.host.CallOnResponseBody(x.id, []byte(openAIStream(2, usage/2, usage-usage/2)), true)
			x.done()
		}
	}
	test.RunTest(t, func(t *testing.T) {
		t.Run("checked and charged after: usage in flight lands in the new counters", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.AvoidWindowEdge(86400, 10)
			p := startPlugin(t, redis, apiKeyConfig(`"failure_mode": "deny",`, `"token_per_day": 100000`))
			before := open(p, 3, chatBody(1000))
			redis.Restart()
			after := open(p, 1, chatBody(1000))
			assert.True(t, scriptLoaded(), "reloaded by the first admission after the restart (no 503: failure_mode is deny)")
			finish(before, 300)
			finish(after, 500)
			assert.Equal(t, int64(3*300+500), p.dayCounter(apiKeySubject), "every usage charged once, none lost")
		})

		t.Run("reserved: refunds of reservations the restart lost never go below zero", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.AvoidWindowEdge(86400, 10)
			p := startPlugin(t, redis, apiKeyConfig(reservationOn+`"failure_mode": "deny",`, `"token_per_day": 100000`))
			before := open(p, 3, chatBody(1000))
			redis.Restart()

			// Streams admitted before the restart end first: their
			// reservations went with the old counters, and so do their
			// refunds. What comes after is charged exactly.
			finish(before, 300)
			assert.Equal(t, int64(0), p.dayCounter(apiKeySubject), "nothing to give back in an empty Redis")
			after := open(p, 1, chatBody(1000))
			reserved := p.dayCounter(apiKeySubject)
			require.Greater(t, reserved, int64(1000))
			finish(after, 500)
			assert.Equal(t, int64(500), p.dayCounter(apiKeySubject), "the new stream charged exactly")

			// Ending while new streams are in flight, their refunds (reserved
			// − used each) can take back at most what the window holds: the
			// counter never goes below zero, and what is lost is at most the
			// reservations the restart wiped (README, Known limits).
			before = open(p, 3, chatBody(1000))
			redis.Restart()
			after = open(p, 1, chatBody(1000))
			finish(before, 300)
			assert.Equal(t, int64(0), p.dayCounter(apiKeySubject), "3 refunds of %d each stop at zero", reserved-300)
			finish(after, 500)
			assert.GreaterOrEqual(t, p.dayCounter(apiKeySubject), int64(0))
			next := open(p, 1, chatBody(1000))
			finish(next, 700)
			assert.Equal(t, int64(700), p.dayCounter(apiKeySubject), "the window counts on from zero, not from below")
		})
	})
}
