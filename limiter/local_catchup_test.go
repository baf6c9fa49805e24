package limiter_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// localReservedConfig is localConfig with token_reservation, and room in
// the minute for a 1,001-token reservation (a 1,000-token output cap).
var localReservedConfig = strings.Replace(
	strings.Replace(localConfig, `"token_per_minute": 1000`, `"token_per_minute": 100000`, 1),
	`"local_share": 1,`, `"local_share": 1, `+plugintest.ReservationOn, 1)

// loseCatchUpAnswer ticks the plugin, lets Redis run the catch-up call
// the tick sends, and then fails it, as the gateway does when the answer
// does not come within redis.timeout. (Redis restarted empty answers the
// first call NOSCRIPT: that answer comes, and the call goes again with the
// script's source.) The cancel of an admission that failed during the
// outage, which the same tick sends (the plugin cannot tell a refused
// connection from a call Redis may still run), is answered.
func loseCatchUpAnswer(t *testing.T, p *plugintest.Plugin, redis *redistest.Server) {
	t.Helper()
	p.Host.Tick()
	for {
		var catchUp []proxytest.RedisCalloutAttribute
		for _, c := range p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID) {
			if cancelCall.Match(c.Query) {
				p.Host.CallOnRedisCallResponse(c.CalloutID, 0, redis.Forward(c.Query))
				continue
			}
			catchUp = append(catchUp, c)
		}
		require.Len(t, catchUp, 1, "one catch-up call")
		reply := redis.Forward(catchUp[0].Query)
		if bytes.HasPrefix(reply, []byte("-NOSCRIPT")) {
			p.Host.CallOnRedisCallResponse(catchUp[0].CalloutID, 0, reply)
			continue
		}
		p.Host.CallOnRedisCallResponse(catchUp[0].CalloutID, 1, nil)
		return
	}
}

// cancelCall matches the query of an admission's cancel: its options name
// the admission's marker, '!<seconds>/<marker id>' (see charge.lua).
var cancelCall = regexp.MustCompile(`![0-9]+/`)

// A stream admitted by the local windows during an outage reserves its
// estimate there; the catch-up adds the reservation to Redis while the
// stream is still going; the stream's refund (it used less) then follows
// it to Redis, into the bucket the reservation went into, instead of
// stopping at the local window's zero. Also when the catch-up's answer was
// lost and its retry is still to go: the refund goes after it.
func TestLocalRefundAfterTheCatchUpReachesRedis(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	// admitDuringOutage admits a stream with a 1,001-token reservation by
	// the local windows, and brings Redis back.
	admitDuringOutage := func(t *testing.T, p *plugintest.Plugin) *plugintest.Exchange {
		redis.Stop()
		x := p.SendBody(plugintest.ChatBody(1000), key).Answer()
		require.True(t, x.Passed(), "admitted by the local windows")
		x.ResponseHeaders("text/event-stream")
		redis.Restart()
		return x
	}
	finish := func(p *plugintest.Plugin, x *plugintest.Exchange, used int) {
		p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(1, used, 0)), true)
		x.Done()
	}
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("caught up, then refunded", func(t *testing.T) {
			redis.AvoidWindowEdge(60, 20)
			p := plugintest.Start(t, redis, localReservedConfig)
			x := admitDuringOutage(t, p)
			p.SendPostponed() // the catch-up: the reservation goes to Redis
			assert.Equal(t, int64(1000+plugintest.ChatBodyPrompt), p.MinuteCounter(plugintest.APIKeySubject), "the reservation, caught up")
			finish(p, x, 30)
			p.SendPostponed() // the refund
			assert.Equal(t, int64(30), p.MinuteCounter(plugintest.APIKeySubject), "what the stream used")
			for range 3 {
				p.SendPostponed()
			}
			assert.Equal(t, int64(30), p.MinuteCounter(plugintest.APIKeySubject), "refunded once")
			assert.Zero(t, p.RetriesPending())
		})

		t.Run("the catch-up's answer lost, refunded before its retry", func(t *testing.T) {
			redis.AvoidWindowEdge(60, 20)
			p := plugintest.Start(t, redis, localReservedConfig)
			x := admitDuringOutage(t, p)
			loseCatchUpAnswer(t, p, redis)
			assert.Equal(t, int64(1000+plugintest.ChatBodyPrompt), p.MinuteCounter(plugintest.APIKeySubject), "Redis ran it")
			finish(p, x, 30)
			for range 3 {
				p.SendPostponed() // the retry (applied already), then the refund
			}
			assert.Equal(t, int64(30), p.MinuteCounter(plugintest.APIKeySubject), "the reservation once, the refund once")
		})
	})
}

// A catch-up call that reached Redis but whose answer was lost (the
// gateway timed it out) is sent again under the same charge id: Redis
// counts it once.
func TestLocalCatchUpWhoseAnswerIsLostCountsOnce(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 20)
		p := plugintest.StartOnEmptyRedis(t, redis, localConfig)
		key := plugintest.APIKey
		redis.Stop()
		x := p.Request(key)
		require.True(t, x.Passed(), "admitted by the local windows")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 300, 0))...)
		redis.Restart()

		loseCatchUpAnswer(t, p, redis)
		assert.Equal(t, int64(300), p.MinuteCounter(plugintest.APIKeySubject), "Redis ran it")
		p.SendPostponed() // the retry
		assert.Equal(t, int64(300), p.MinuteCounter(plugintest.APIKeySubject), "the retry found it applied")
		for range 3 {
			p.SendPostponed()
		}
		assert.Equal(t, int64(300), p.MinuteCounter(plugintest.APIKeySubject), "counted once")
		assert.Zero(t, p.RetriesPending())
		caught, err := p.Host.GetCounterMetric("redis.redis.static.metric.token_ratelimit_local_caught_up_tokens")
		require.NoError(t, err)
		assert.Equal(t, uint64(300), caught)
	})
}
