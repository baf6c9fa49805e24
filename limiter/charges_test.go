package limiter_test

import (
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Charges are confirmed: the last chunk of a response waits for Redis to
// take its charge, a failed charge is tried once more from the plugin's
// tick (whose answers the gateway always delivers), a retry of a charge that
// did reach Redis is not counted twice, and a charge that fails twice is
// counted in token_ratelimit_charge_failure_count.
func TestChargesAreConfirmedRetriedOnceAndCounted(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	const scriptError = "-ERR Error running script: out of memory\r\n"
	stream := plugintest.OpenAIStream(3, 120, 80)

	// streamed admits a request and streams the response up to its last
	// chunk, which the plugin holds: it returns the pending charge call.
	streamed := func(t *testing.T, p *plugintest.Plugin) (*plugintest.Exchange, proxytest.RedisCalloutAttribute) {
		x := p.Request(key)
		require.True(t, x.Passed())
		x.ResponseHeaders("text/event-stream")
		got := p.Host.CallOnResponseBody(x.ID, []byte(stream), true)
		assert.Equal(t, types.ActionPause, got, "the end of the response waits for the charge")
		calls := p.Host.GetRedisCalloutAttributesFromContext(x.ID)
		require.Len(t, calls, 1, "the charge, sent while the stream can still get its answer")
		return x, calls[0]
	}
	// fresh starts the plugin on an empty Redis.
	fresh := func(t *testing.T) *plugintest.Plugin {
		return plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
	}
	resumed := func(t *testing.T, p *plugintest.Plugin, x *plugintest.Exchange) {
		assert.Equal(t, types.ActionContinue, p.Host.GetCurrentHttpStreamAction(x.ID), "the end of the response went on")
		assert.Equal(t, stream, string(p.Host.GetCurrentResponseBody(x.ID)), "unchanged")
		x.Done()
	}

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("answered: the end goes on, charged once", func(t *testing.T) {
			p := fresh(t)
			x, _ := streamed(t, p)
			x.Answer()
			resumed(t, p, x)
			p.SendPostponed()
			assert.Equal(t, int64(200), p.DayCounter(plugintest.APIKeySubject))
			assert.Zero(t, counted(p, "none", chargeFailure))
		})

		t.Run("failed once: retried from the tick, charged once", func(t *testing.T) {
			p := fresh(t)
			x, call := streamed(t, p)
			p.Host.CallOnRedisCallResponse(call.CalloutID, 0, []byte(scriptError))
			resumed(t, p, x)
			assert.Zero(t, p.DayCounter(plugintest.APIKeySubject), "not charged yet")
			require.Equal(t, 0, p.RetriesPending(), "the retry waits for the tick")
			p.SendPostponed()
			assert.Equal(t, int64(200), p.DayCounter(plugintest.APIKeySubject))
			assert.Zero(t, counted(p, "none", chargeFailure))
		})

		t.Run("answer lost after Redis applied it: the retry is not counted twice", func(t *testing.T) {
			p := fresh(t)
			x, call := streamed(t, p)
			redis.Forward(call.Query) // Redis runs it; the gateway times the call out
			p.Host.CallOnRedisCallResponse(call.CalloutID, 1, nil)
			resumed(t, p, x)
			assert.Equal(t, int64(200), p.DayCounter(plugintest.APIKeySubject))
			p.SendPostponed()
			assert.Equal(t, int64(200), p.DayCounter(plugintest.APIKeySubject), "the retry found the charge applied")
			assert.Zero(t, counted(p, "none", chargeFailure))
		})

		t.Run("failed twice: counted, the response unharmed", func(t *testing.T) {
			p := fresh(t)
			x, call := streamed(t, p)
			p.Host.CallOnRedisCallResponse(call.CalloutID, 1, nil)
			resumed(t, p, x)
			p.Host.Tick()
			retries := p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)
			require.Len(t, retries, 1, "one retry, from the plugin's context")
			p.Host.CallOnRedisCallResponse(retries[0].CalloutID, 0, []byte(scriptError))
			assert.Equal(t, uint64(1), counted(p, "none", chargeFailure))
			p.SendPostponed()
			assert.Zero(t, p.RetriesPending(), "no third try")
			assert.Zero(t, p.DayCounter(plugintest.APIKeySubject))
		})

		t.Run("a stream reset before its end: charged from the tick", func(t *testing.T) {
			p := fresh(t)
			x := p.Request(key)
			require.True(t, x.Passed())
			x.ResponseHeaders("text/event-stream")
			events := plugintest.SSEEvents(stream)
			for _, e := range events[:len(events)-1] { // the usage event came; [DONE] did not
				require.Equal(t, types.ActionContinue, p.Host.CallOnResponseBody(x.ID, []byte(e), false))
			}
			x.Done()
			assert.Zero(t, p.DayCounter(plugintest.APIKeySubject), "the stream is gone: its charge waits for the tick")
			p.SendPostponed()
			assert.Equal(t, int64(200), p.DayCounter(plugintest.APIKeySubject))
		})
	})
}
