package limiter_test

import (
	"strconv"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// over_limit_action: queue, through the plugin (Go and WASM mode) on a real
// Redis whose clock the test moves with the gateway's tick (100 ms).

// freshRedisAt empties Redis and sets its clock to a whole second an hour
// ahead plus offset seconds, until the test ends; it returns that second.
func freshRedisAt(t *testing.T, redis *redistest.Server, offset float64) float64 {
	second := plugintest.AnHourAhead(redis, 1)
	redis.StartOver(t, second+offset)
	return second
}

// queueConfig limits the one API key to 10 requests a second, queueing.
func queueConfig(extra string) string {
	return plugintest.APIKeyConfig(`"over_limit_action": "queue", `+extra, `"query_per_second": 10`)
}

// TestQueue runs every queue test on one Redis and one compiled WASM module
// (compiling one takes seconds).
func TestQueue(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("queueAdmitsOverLimitRequestsWhenTheWindowTurns", func(t *testing.T) { queueAdmitsOverLimitRequestsWhenTheWindowTurns(t, redis) })
		t.Run("queueRejectsWhenRoomComesAfterTheMaximumWait", func(t *testing.T) { queueRejectsWhenRoomComesAfterTheMaximumWait(t, redis) })
		t.Run("queueWaitsForAConcurrencySlotUntilItsMaximum", func(t *testing.T) { queueWaitsForAConcurrencySlotUntilItsMaximum(t, redis) })
		t.Run("queuedRequestWhoseClientLeavesMakesWayForTheNext", func(t *testing.T) { queuedRequestWhoseClientLeavesMakesWayForTheNext(t, redis) })
		t.Run("queueAsksOnceATickPerLineAndGivesUpOnTimeWhenRedisIsSlow", func(t *testing.T) { queueAsksOnceATickPerLineAndGivesUpOnTimeWhenRedisIsSlow(t, redis) })
		t.Run("queueUndoesTheAdmissionOfAClientThatLeftMidRetry", func(t *testing.T) { queueUndoesTheAdmissionOfAClientThatLeftMidRetry(t, redis) })
		t.Run("queueWaitsForTokensAndRejectsWhatCanNeverFit", func(t *testing.T) { queueWaitsForTokensAndRejectsWhatCanNeverFit(t, redis) })
	})
}

func queueAdmitsOverLimitRequestsWhenTheWindowTurns(t *testing.T, redis *redistest.Server) {
	second := freshRedisAt(t, redis, 0.05)
	p := plugintest.Start(t, redis, queueConfig(""))
	key := plugintest.APIKey

	// 20 requests against 10 a second: 10 go at once, 10 wait.
	var all, waiting []*plugintest.Exchange
	for i := 0; i < 20; i++ {
		x := p.Request(key)
		all = append(all, x)
		if !x.Passed() {
			require.Nil(t, x.Local(), "request %d was rejected instead of queued", i+1)
			waiting = append(waiting, x)
		}
	}
	require.Len(t, waiting, 10, "the first 10 go at once")
	bucket := func(s int64) int64 { return redis.Int("GET", plugintest.APIKeySubject+":q1:"+strconv.FormatInt(s, 10)) }
	assert.Equal(t, int64(10), bucket(int64(second)), "the waiting ones are not counted")

	// The second ends 950 ms on: nothing goes before, all 10 then, in
	// arrival order, none rejected.
	order := map[uint32]int{}
	for tick := 1; tick <= 12; tick++ {
		p.Tick(waiting)
		for _, x := range waiting {
			require.Nil(t, x.Local(), "a queued request was rejected at tick %d", tick)
			if _, seen := order[x.ID]; x.Passed() && !seen {
				order[x.ID] = tick*1000 + len(order)
			}
		}
		if tick < 10 {
			require.Empty(t, order, "admitted at tick %d, before the window turned", tick)
		}
	}
	require.Len(t, order, 10, "every queued request admitted")
	for i, x := range waiting {
		assert.Equal(t, 10*1000+i, order[x.ID], "request %d admitted at tick 10 (1 s on), in arrival order", i+11)
	}
	assert.Equal(t, int64(10), bucket(int64(second)+1), "counted in the next second")
	for _, x := range all {
		x.Done()
	}
}

func queueRejectsWhenRoomComesAfterTheMaximumWait(t *testing.T, redis *redistest.Server) {
	second := freshRedisAt(t, redis, 0.05)
	p := plugintest.Start(t, redis, queueConfig(`"max_queue_wait_ms": 200, `))
	key := plugintest.APIKey

	// Room comes 950 ms on, later than 200 ms: the late ten are
	// rejected at once, told when the window turns.
	passed := 0
	for i := 0; i < 20; i++ {
		x := p.Request(key)
		if x.Passed() {
			passed++
		} else {
			local := x.RequireRejected(429)
			assert.Equal(t, "1", plugintest.Header(local.Headers, "Retry-After"))
		}
		x.Done()
	}
	assert.Equal(t, 10, passed)

	// 150 ms before the window turns, they wait, and go when it does.
	redis.SetClock(second + 1.85)
	var waiting []*plugintest.Exchange
	for i := 0; i < 20; i++ {
		x := p.Request(key)
		if !x.Passed() {
			require.Nil(t, x.Local(), "request %d was rejected instead of queued", i+1)
			waiting = append(waiting, x)
		}
	}
	require.Len(t, waiting, 10)
	p.Tick(waiting)
	for _, x := range waiting {
		assert.False(t, x.Passed(), "admitted before the window turned")
	}
	p.Tick(waiting)
	for i, x := range waiting {
		assert.True(t, x.Passed(), "queued request %d admitted once the window turned", i+1)
	}
}

func queueWaitsForAConcurrencySlotUntilItsMaximum(t *testing.T, redis *redistest.Server) {
	freshRedisAt(t, redis, 0)
	p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"over_limit_action": "queue", "max_queue_wait_ms": 300, `, `"max_concurrent_requests": 1`))
	key := plugintest.APIKey
	held := func() int64 { return plugintest.Leases(redis, plugintest.APIKeySubject) }

	first := p.Request(key)
	require.True(t, first.Passed())
	first.ResponseHeaders("text/event-stream")
	second, third := p.Request(key), p.Request(key)
	waiting := []*plugintest.Exchange{second, third}
	require.Nil(t, second.Local())
	require.Nil(t, third.Local())

	// A slot frees when the first ends (its lease is released from the
	// next tick, before the line moves): the second, first in line, takes
	// it at that tick; the third waits on.
	p.Tick(waiting)
	assert.False(t, second.Passed())
	first.Done()
	p.Tick(waiting)
	require.True(t, second.Passed(), "the first in line takes the freed slot")
	assert.False(t, third.Passed())
	assert.Nil(t, third.Local(), "200 ms waited of 300")
	assert.Equal(t, int64(1), held())

	// The third waits its 300 ms, then is told it is a concurrency limit.
	p.Tick(waiting)
	local := third.RequireRejected(429)
	assert.Contains(t, string(local.Data), "at most 1 may be in progress")
	assert.Equal(t, "1", plugintest.Header(local.Headers, "Retry-After"))
	assert.Equal(t, int64(1), held(), "the one given up on took no slot")
	second.DoneAndTick()
	third.DoneAndTick()
	assert.Equal(t, int64(0), held())
}

func queuedRequestWhoseClientLeavesMakesWayForTheNext(t *testing.T, redis *redistest.Server) {
	freshRedisAt(t, redis, 0)
	p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"over_limit_action": "queue", `, `"max_concurrent_requests": 1`))
	key := plugintest.APIKey

	first := p.Request(key)
	require.True(t, first.Passed())
	second, third := p.Request(key), p.Request(key)
	waiting := []*plugintest.Exchange{second, third}
	p.Tick(waiting)

	// The second's client leaves; when the slot frees, the third takes it.
	second.Done()
	assert.Nil(t, second.Local(), "a client that left is sent nothing")
	first.Done()
	p.Tick(waiting)
	assert.True(t, third.Passed(), "the next in line takes the slot")
	assert.False(t, second.Passed())
	third.DoneAndTick()
	assert.Equal(t, int64(0), plugintest.Leases(redis, plugintest.APIKeySubject), "every lease released")
}

func queueAsksOnceATickPerLineAndGivesUpOnTimeWhenRedisIsSlow(t *testing.T, redis *redistest.Server) {
	freshRedisAt(t, redis, 0)
	p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"over_limit_action": "queue", "max_queue_wait_ms": 300, `, `"max_concurrent_requests": 1`))
	key := plugintest.APIKey
	pending := func(xs []*plugintest.Exchange) (n int) {
		for _, x := range xs {
			n += len(p.Host.GetRedisCalloutAttributesFromContext(x.ID))
		}
		return n
	}

	first := p.Request(key)
	require.True(t, first.Passed())
	var waiting []*plugintest.Exchange
	for i := 0; i < 6; i++ {
		waiting = append(waiting, p.Request(key))
	}
	require.Equal(t, 0, pending(waiting), "the five behind the first in line did not ask Redis")

	// Six waiting: one call a tick, the first in line's.
	p.Tick(waiting)
	redis.SetClock(redis.Clock() + 0.1)
	p.Host.Tick()
	require.Equal(t, 1, p.RetriesPending(), "one retry for the whole line")
	require.Equal(t, 0, pending(waiting))

	// Redis does not answer the retry for two ticks: the others' 300 ms
	// end, and they are rejected on time; the first in line waits for
	// its answer, which rejects it too.
	redis.SetClock(redis.Clock() + 0.1)
	p.Host.Tick()
	for _, x := range waiting {
		require.Nil(t, x.Local(), "300 ms have not passed")
	}
	redis.SetClock(redis.Clock() + 0.1)
	p.Host.Tick()
	assert.Nil(t, waiting[0].Local(), "Redis has not answered the first in line")
	for _, x := range waiting[1:] {
		x.RequireRejected(429)
	}
	assert.Equal(t, 1, p.RetriesPending(), "only the first in line asked Redis")
	p.AnswerAll(waiting)
	waiting[0].RequireRejected(429)
	first.Done()
	for _, x := range waiting {
		x.Done()
	}
	p.SendPostponed()
	assert.Equal(t, int64(0), plugintest.Leases(redis, plugintest.APIKeySubject))
}

// A client that leaves while its retry is with Redis: the admission the
// retry won is undone when its answer comes (a retry goes out on the
// plugin's own context, whose answers are never dropped).
func queueUndoesTheAdmissionOfAClientThatLeftMidRetry(t *testing.T, redis *redistest.Server) {
	second := freshRedisAt(t, redis, 0.95)
	p := plugintest.Start(t, redis, queueConfig(""))
	key := plugintest.APIKey
	for i := 0; i < 10; i++ {
		require.True(t, p.Request(key).Passed())
	}
	leaving, next := p.Request(key), p.Request(key)
	require.Nil(t, leaving.Local())

	// The window turns; the first in line's retry goes out, and its
	// client leaves before Redis answers.
	redis.SetClock(redis.Clock() + 0.1)
	p.Host.Tick()
	require.Equal(t, 1, p.RetriesPending())
	p.Host.CompleteHttpContext(leaving.ID)
	assert.Equal(t, 1, redis.Answer(p.Host, proxytest.PluginContextID), "the retry; its answer leaves the rollback to the next tick")
	p.Tick([]*plugintest.Exchange{next}) // the rollback goes out before the line moves

	assert.True(t, next.Passed(), "the next in line goes")
	assert.Nil(t, leaving.Local(), "nothing is sent to a client that left")
	assert.Equal(t, int64(1), redis.Int("GET", plugintest.APIKeySubject+":q1:"+strconv.FormatInt(int64(second)+1, 10)),
		"only the next in line counts in the new second")
}

// Reservations queue too: a request waits for the tokens it reserves, and
// one that could never fit (it reserves more than the window holds) is
// rejected at once rather than after waiting in vain.
func queueWaitsForTokensAndRejectsWhatCanNeverFit(t *testing.T, redis *redistest.Server) {
	minute := plugintest.AnHourAhead(redis, 60)
	p := plugintest.StartOnEmptyRedisAt(t, redis, minute+59.85, plugintest.APIKeyConfig(plugintest.ReservationOn+`"over_limit_action": "queue", `, `"token_per_minute": 1000`))
	key := plugintest.APIKey

	first := p.SendBody(plugintest.ChatBody(600), key).Answer()
	require.True(t, first.Passed())
	tooBig := p.SendBody(plugintest.ChatBody(1001), key).Answer()
	tooBig.RequireRejected(429)
	waiting := p.SendBody(plugintest.ChatBody(600), key).Answer()
	require.Nil(t, waiting.Local(), "600 more do not fit this minute: it waits")

	p.Tick([]*plugintest.Exchange{waiting})
	assert.False(t, waiting.Passed())
	p.Tick([]*plugintest.Exchange{waiting})
	assert.True(t, waiting.Passed(), "the minute turned: it goes, reserving in the new one")
	reserved := func(m float64) int64 {
		return plugintest.Counter(redis, plugintest.APIKeySubject, "t60", int64(m))
	}
	assert.Greater(t, reserved(minute), int64(600))
	assert.Equal(t, reserved(minute), reserved(minute+60), "the same reservation, in the new minute")
	first.Done()
	waiting.Done()
}
