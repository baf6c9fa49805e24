package limiter_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// A Redis that answers late (issue 50, point 3: "A Redis hang leaves
// charges wrong"). A Redis that hangs (SIGSTOP, a long fork, a slow script)
// runs what it was sent when it resumes, long after the gateway answered
// the plugin with a failure once redis.timeout passed (redistest.GiveUp,
// Late.Run). What an admission the plugin gave up on takes is undone
// whenever Redis runs it, and a refund of unused reservation is tried
// again until it lands: Redis ends with the usage of what it admitted,
// not that and reservations.

// lateConfig reserves, counts requests and limits concurrency, under a
// failure_mode (local: one worker).
func lateConfig(mode string) string {
	share := ""
	if mode == "local" {
		share = `"local_share": 1, `
	}
	return `{"rule_name": "chat", "failure_mode": "` + mode + `", ` + share + `"concurrency_lease_seconds": 600, ` + plugintest.ReservationOn + `
		"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1",
			"token_per_day": 100000, "query_per_day": 100, "max_concurrent_requests": 1}]}],
		` + plugintest.RedisSection + `}`
}

// scriptCallsPending counts the script calls (not probes) the plugin sent
// from its own context and that are not answered yet.
func scriptCallsPending(p *plugintest.Plugin) int {
	n := 0
	for _, c := range p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID) {
		if bytes.Contains(c.Query, []byte("EVAL")) {
			n++
		}
	}
	return n
}

// lateCounters are a subject's day tokens, day requests and leases held.
type lateCounters struct{ tokens, requests, leases int64 }

func readLate(redis *redistest.Server) lateCounters {
	now := redis.Now()
	return lateCounters{
		tokens:   plugintest.Counter(redis, plugintest.APIKeySubject, "t86400", now),
		requests: plugintest.Counter(redis, plugintest.APIKeySubject, "q86400", now),
		leases:   plugintest.Leases(redis, plugintest.APIKeySubject),
	}
}

// An admission the gateway gave up on (its answer came after redis.timeout)
// is decided by failure_mode, and cancelled from the tick: undone if Redis
// ran it, refused if Redis runs it later. Its reservation, its request
// count and its concurrency lease are all given back, under every
// failure_mode; the request is charged as failure_mode charges a request
// Redis could not decide (allow and deny: not at all; local: its usage, in
// the local windows, caught up to Redis).
func TestAdmissionGivenUpOnIsUndoneWhenRedisRunsItLate(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	body := plugintest.ChatBody(1000)
	usage := func(tokens int) []string { return plugintest.SSEEvents(plugintest.OpenAIStream(1, tokens, 0)) }

	// admitted sends one request Redis admits in time, which uses 30
	// tokens: what Redis holds before the one it answers late.
	admitted := func(t *testing.T, p *plugintest.Plugin) {
		x := p.SendBody(body, key).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", usage(30)...)
		p.SendPostponed()
		require.Equal(t, lateCounters{30, 1, 0}, readLate(redis))
	}
	// givenUp sends a request whose admission the gateway gives up on, and
	// checks that failure_mode decided it.
	givenUp := func(t *testing.T, p *plugintest.Plugin, mode string) (*plugintest.Exchange, *redistest.Late) {
		x := p.SendBody(body, key)
		require.Equal(t, types.ActionPause, x.Action, "the admission waits for Redis")
		late := redistest.GiveUp(t, p.Host, redis, x.ID)
		require.Equal(t, 1, late.Len(), "one admission call")
		if mode == "deny" {
			x.RequireRejected(503)
		} else {
			require.True(t, x.Passed(), "failure_mode %s", mode)
		}
		return x, late
	}
	// finish ends the request: a response that used 30 tokens when it went
	// upstream.
	finish := func(x *plugintest.Exchange, mode string) {
		if mode == "deny" {
			x.Done()
		} else {
			x.Respond("text/event-stream", usage(30)...)
		}
	}
	// want is what Redis ends with: the request admitted in time, and the
	// one given up on only where failure_mode charges it (local: its usage
	// and its request, counted in the local windows and caught up).
	want := func(mode string) lateCounters {
		if mode == "local" {
			return lateCounters{60, 2, 0}
		}
		return lateCounters{30, 1, 0}
	}

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 30)
		for _, mode := range []string{"allow", "deny", "local"} {
			t.Run(mode+"/Redis runs it after the plugin gave up, before the cancel", func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, lateConfig(mode))
				admitted(t, p)
				x, late := givenUp(t, p, mode)
				require.Equal(t, 1, late.Run())
				took := readLate(redis)
				require.Greater(t, took.tokens, int64(1000+30), "Redis ran it: it reserved")
				require.Equal(t, lateCounters{took.tokens, 2, 1}, took, "and counted a request, and took a lease")
				finish(x, mode)
				p.SendPostponed()
				p.SendPostponed()
				assert.Equal(t, want(mode), readLate(redis), "undone: its reservation, request and lease")
				y := p.SendBody(body, key).Answer()
				assert.True(t, y.Passed(), "the lease is free again")
			})

			t.Run(mode+"/the cancel lands before Redis runs it", func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, lateConfig(mode))
				admitted(t, p)
				x, late := givenUp(t, p, mode)
				p.SendPostponed() // the cancel
				late.Run()        // then Redis runs the admission: it takes nothing
				finish(x, mode)
				p.SendPostponed()
				p.SendPostponed()
				assert.Equal(t, want(mode), readLate(redis))
			})
		}

		// The case: Redis hangs; the admission times out, and so
		// do the cancel's first tries; when Redis resumes it runs them all,
		// in order, and the next try lands.
		t.Run("allow/Redis hangs: the cancel's tries time out too, then one lands", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, lateConfig("allow"))
			admitted(t, p)
			x, late := givenUp(t, p, "allow")
			for range 2 {
				p.Host.Tick()
				tried := redistest.GiveUp(t, p.Host, redis, proxytest.PluginContextID)
				require.Equal(t, 1, tried.Len(), "the cancel, tried again")
				late.And(tried)
			}
			x.Respond("text/event-stream", usage(30)...)
			assert.Equal(t, 3, late.Run(), "Redis resumes: the admission, then the cancel's two tries")
			p.SendPostponed()
			p.SendPostponed()
			assert.Equal(t, lateCounters{30, 1, 0}, readLate(redis))
			assert.Zero(t, p.RetriesPending(), "nothing more to send")
			assert.Zero(t, countedAnyModel(p, chargeFailure), "the cancel landed")
		})

		// A queued request's retry goes out from the tick, whose answers
		// come: but one that comes after redis.timeout is a failure too.
		t.Run("allow/a queued request's retry given up on", func(t *testing.T) {
			second := freshRedisAt(t, redis, 0.95)
			p := plugintest.Start(t, redis, queueConfig(""))
			for range 10 {
				require.True(t, p.Request(key).Passed())
			}
			x := p.Request(key)
			require.Nil(t, x.Local(), "queued")
			redis.SetClock(redis.Clock() + 0.1) // the second turns: its retry goes out
			p.Host.Tick()
			late := redistest.GiveUp(t, p.Host, redis, proxytest.PluginContextID)
			require.Equal(t, 1, late.Len(), "the retry")
			require.True(t, x.Passed(), "failure_mode allow")
			late.Run()
			bucket := plugintest.APIKeySubject + ":q1:" + strconv.FormatInt(int64(second)+1, 10)
			require.Equal(t, int64(1), redis.Int("GET", bucket), "Redis ran it late: counted")
			p.SendPostponed()
			assert.Zero(t, redis.Int("GET", bucket), "undone")
			x.Done()
		})
	})
}

// A refund of unused reservation (the charge of a response that used less
// than its request reserved: a negative difference) whose first tries fail
// is tried again from the tick until it lands, not dropped after two:
// Redis ends at the real usage. A try that timed out and ran late, and the
// one that lands, are applied once (the charge's id). While the breaker is
// open, the refund waits for it to close.
func TestRefundRetriedUntilItLands(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	config := plugintest.APIKeyConfig(plugintest.ReservationOn+`"concurrency_lease_seconds": 600,`, `"token_per_day": 100000, "max_concurrent_requests": 1`)
	breaking := strings.Replace(config, `"timeout": 1000`, `"timeout": 1000, "breaker_failures": 3, "breaker_probe_ms": 50`, 1)
	require.NotEqual(t, config, breaking)

	// refunding admits a request reserving about 1,000 tokens and ends its
	// response with 30 used: the refund's first try goes out with the last
	// chunk, which it holds, and the gateway gives up on it.
	refunding := func(t *testing.T, p *plugintest.Plugin) (*plugintest.Exchange, *redistest.Late) {
		x := p.SendBody(plugintest.ChatBody(1000), key).Answer()
		require.True(t, x.Passed())
		require.Greater(t, p.DayCounter(plugintest.APIKeySubject), int64(1000), "reserved")
		x.ResponseHeaders("text/event-stream")
		require.Equal(t, types.ActionPause, p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(1, 30, 0)), true), "held for the refund")
		first := redistest.GiveUp(t, p.Host, redis, x.ID)
		require.Equal(t, 1, first.Len(), "the refund's first try")
		require.Equal(t, types.ActionContinue, p.Host.GetCurrentHttpStreamAction(x.ID), "the end goes on once the try failed")
		p.Host.CompleteHttpContext(x.ID)
		return x, first
	}
	// failedAgain has the tick try the refund again, and the gateway give up.
	failedAgain := func(t *testing.T, p *plugintest.Plugin) *redistest.Late {
		p.Host.Tick()
		again := redistest.GiveUp(t, p.Host, redis, proxytest.PluginContextID)
		require.Equal(t, 1, again.Len(), "the refund, tried again")
		return again
	}
	leases := func() int64 { return plugintest.Leases(redis, plugintest.APIKeySubject) }

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 30)

		t.Run("its first two tries fail: the third lands", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			refunding(t, p)
			failedAgain(t, p)
			p.SendPostponed()
			assert.Equal(t, int64(30), p.DayCounter(plugintest.APIKeySubject), "the real usage")
			assert.Zero(t, leases(), "the lease released")
			assert.Zero(t, countedAnyModel(p, chargeFailure))
			assert.Zero(t, p.RetriesPending(), "nothing more to send")
		})

		for _, ranFirst := range []bool{true, false} {
			name := "a try Redis ran late, then the one that lands: applied once"
			if !ranFirst {
				name = "the try that lands, then one Redis ran late: applied once"
			}
			t.Run(name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, config)
				_, late := refunding(t, p)
				late.And(failedAgain(t, p))
				if ranFirst {
					require.Equal(t, 2, late.Run())
					assert.Equal(t, int64(30), p.DayCounter(plugintest.APIKeySubject))
				}
				p.SendPostponed()
				late.Run()
				assert.Equal(t, int64(30), p.DayCounter(plugintest.APIKeySubject), "given back once")
			})
		}

		t.Run("the breaker opens: held until it closes, then lands", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, breaking)
			refunding(t, p)
			failedAgain(t, p)
			failedAgain(t, p) // the third failure in a row: the breaker opens
			for range 5 {
				p.Host.Tick()
				require.Zero(t, scriptCallsPending(p), "nothing is sent while the breaker is open")
			}
			tickUntilProbe(t, p)
			redis.Answer(p.Host, proxytest.PluginContextID) // the probe is answered: the breaker closes
			p.SendPostponed()
			assert.Equal(t, int64(30), p.DayCounter(plugintest.APIKeySubject), "the real usage")
			assert.Zero(t, countedAnyModel(p, chargeFailure))
		})
	})
}

// Without a breaker (redis.breaker_failures 0), a Redis that refuses
// connections fails every try at once: what gives back is tried again at
// most 100 a tick (the first tries aside), and all of it lands once
// Redis is back.
func TestGiveBacksTriedAgainAtMostAHundredATick(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	config := strings.Replace(plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100000000`),
		`"timeout": 1000`, `"timeout": 1000, "breaker_failures": 0`, 1)
	// scripts counts the script calls the tick sent, and fails them as the
	// gateway does when Redis refuses the connection.
	scripts := func(p *plugintest.Plugin) int {
		n := scriptCallsPending(p)
		// (A copy: the emulator removes each answered call from the list in place.)
		for _, c := range slices.Clone(p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)) {
			p.Host.CallOnRedisCallResponse(c.CalloutID, 1, nil)
		}
		require.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID), "nothing sent again at once")
		return n
	}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, config)
		redis.Stop()
		defer redis.Restart()
		const n = 120
		for i := range n {
			x := p.SendBody(plugintest.ChatBody(100), key).Answer() // no reply: Redis may run it late
			require.True(t, x.Passed(), "request %d: failure_mode allow", i)
			x.Done()
		}
		p.Host.Tick()
		assert.Equal(t, n, scripts(p), "the cancels' first tries")
		p.Host.Tick()
		assert.Equal(t, 100, scripts(p), "tried again: 100")
		p.Host.Tick()
		assert.Equal(t, 100, scripts(p), "the 20 left, then 80 of those tried last tick")
		redis.Restart()
		for range 3 {
			p.Host.Tick()
			for _, c := range slices.Clone(p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)) {
				p.Host.CallOnRedisCallResponse(c.CalloutID, 0, redis.Forward(c.Query))
			}
		}
		assert.Zero(t, p.RetriesPending(), "every cancel landed")
		assert.Zero(t, countedAnyModel(p, chargeFailure))
	})
}
