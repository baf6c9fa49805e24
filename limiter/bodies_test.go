package limiter_test

import (
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Which bodies the plugin reads, and when a request may go on, whatever
// the request's framing and headers say: a request body that ends with
// trailers, a response to a request that asked to upgrade, a body whose
// content headers claim another type or an identity coding. Through the
// plugin (Go and WASM mode) on a real Redis. Each test keeps a point of
// issue 14 ("Nothing gets through unadmitted or uncharged") closed, and
// is named after it (go test -run TestHardening).

// A request that ends with trailers is admitted and reserved like any
// other, and nothing of it goes on before that. Issue 14, point 1:
// "Request trailers skip admission. With the body read first
// (token_reservation, or per-model weights), OnRequestHeaders waits for the
// end of the body; a request that ends with trailers never delivers an
// end-of-stream body chunk [...] and Envoy forwards the request unadmitted
// and uncharged."
func TestHardening1RequestTrailersAreAdmitted(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	trailers := [][2]string{{"x-checksum", "5d41402abc4b2a76"}}
	body := plugintest.ChatBody(100) // its prompt estimate, + 100
	const reserved = plugintest.ChatBodyPrompt + 100

	// endsWithTrailers sends a request whose body ends with trailers, and
	// returns the action of its trailers hook.
	endsWithTrailers := func(p *plugintest.Plugin, extra ...[2]string) (*plugintest.Exchange, types.Action) {
		x := p.Send(append(extra, key)...)
		require.Equal(t, types.HeaderStopIteration, x.Action, "the headers wait for the body")
		require.Equal(t, types.ActionPause, p.Host.CallOnRequestBody(x.ID, []byte(body), false), "the body is buffered")
		return x, p.Host.CallOnRequestTrailers(x.ID, trailers)
	}

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("over the limit: rejected, three times", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.Do("SET", plugintest.Bucket(plugintest.APIKeySubject, "t86400", redis.Now()), "1100")
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 1000`))
			for i := 0; i < 3; i++ {
				x, action := endsWithTrailers(p)
				assert.Equal(t, types.ActionPause, action, "the trailers wait for Redis")
				x.Answer()
				x.RequireRejected(429)
			}
			assert.Equal(t, int64(1100), p.DayCounter(plugintest.APIKeySubject))
		})

		t.Run("room left: reserved, then reconciled", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 1000`))
			x, action := endsWithTrailers(p)
			require.Equal(t, types.ActionPause, action)
			x.Answer()
			require.True(t, x.Passed(), "admitted: the trailers go on")
			assert.Equal(t, int64(reserved), p.DayCounter(plugintest.APIKeySubject))
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(3, 20, 30))...)
			assert.Equal(t, int64(50), p.DayCounter(plugintest.APIKeySubject))
		})

		t.Run("per-model weights read the body the same way", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.Do("SET", plugintest.Bucket(plugintest.APIKeySubject, "t86400", redis.Now()), "1100")
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(
				`"token_count_strategy": "weighted", "token_weights": {"models": {"gpt-4o": {"output": 4}}},`, `"token_per_day": 1000`))
			x, action := endsWithTrailers(p)
			assert.Equal(t, types.ActionPause, action)
			x.Answer()
			x.RequireRejected(429)
		})

		t.Run("trailers right after the headers: no body, still admitted first", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.Do("SET", plugintest.Bucket(plugintest.APIKeySubject, "t86400", redis.Now()), "1100")
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 1000`))
			x := p.Send(key)
			require.Equal(t, types.HeaderStopIteration, x.Action)
			assert.Equal(t, types.ActionPause, p.Host.CallOnRequestTrailers(x.ID, trailers))
			x.Answer()
			x.RequireRejected(429)
		})

		t.Run("no body chunk passes while Redis decides", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.Do("SET", plugintest.Bucket(plugintest.APIKeySubject, "t86400", redis.Now()), "1100")
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"stream_usage": "off",`, `"token_per_day": 1000`))
			x := p.Send(key)
			require.Equal(t, types.HeaderStopAllIterationAndWatermark, x.Action)
			assert.Equal(t, types.ActionPause, p.Host.CallOnRequestBody(x.ID, []byte(body), false))
			assert.Equal(t, types.ActionPause, p.Host.CallOnRequestTrailers(x.ID, trailers))
			x.Answer()
			x.RequireRejected(429)
		})

		t.Run("a stream asked for its usage: rewritten before its trailers go", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 1000`))
			x := p.Send(key).Answer()
			require.True(t, x.Passed())
			require.Equal(t, types.ActionPause, p.Host.CallOnRequestBody(x.ID, []byte(streamBody), false))
			assert.Equal(t, types.ActionContinue, p.Host.CallOnRequestTrailers(x.ID, trailers))
			sent, _ := upstreamSees(x)
			assert.Contains(t, sent, `"stream_options":{"include_usage":true}`)
		})
	})
}

// The response of a request that asked to upgrade but did not switch
// protocols is read and charged; a WebSocket that did is not read. Issue
// 14, point 4: "Connection: upgrade + Upgrade: websocket on a plain request
// makes the wrapper skip the response body: three 1,000-token responses
// charged 0."
func TestHardening4UpgradeHeadersDoNotHideTheResponse(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	upgrade := [][2]string{{"connection", "Upgrade"}, {"upgrade", "websocket"}}
	usage := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}],"usage":{"prompt_tokens":400,"completion_tokens":600,"total_tokens":1000}}`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("a POST that asks to upgrade is answered 200: charged", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			for i := 0; i < 3; i++ {
				x := p.Request(append(upgrade, key)...)
				require.True(t, x.Passed())
				x.Respond("application/json", usage)
			}
			assert.Equal(t, int64(3000), p.DayCounter(plugintest.APIKeySubject))
		})

		t.Run("with reservation, its body is read and reserved", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100000`))
			x := p.SendBody(plugintest.ChatBody(5000), append(upgrade, key)...).Answer()
			require.True(t, x.Passed())
			assert.Equal(t, int64(5000+plugintest.ChatBodyPrompt), p.DayCounter(plugintest.APIKeySubject), "the body's cap, not the default")
			x.Respond("application/json", usage)
			assert.Equal(t, int64(1000), p.DayCounter(plugintest.APIKeySubject))
		})

		t.Run("a WebSocket handshake that switches protocols: not read", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			headers := [][2]string{{":authority", "llm.example.com"}, {":method", "GET"}, {":path", "/v1/realtime"}, key}
			x := &plugintest.Exchange{P: p, ID: p.Host.InitializeHttpContext()}
			x.Action = p.Host.CallOnRequestHeaders(x.ID, append(headers, upgrade...), true)
			x.Answer()
			require.True(t, x.Passed())
			require.Equal(t, types.ActionContinue, p.Host.CallOnResponseHeaders(x.ID, [][2]string{{":status", "101"}, {"connection", "Upgrade"}, {"upgrade", "websocket"}}, false))
			frame := "\x81\x05hello" + usage // a WebSocket frame is not an HTTP body to parse
			assert.Equal(t, types.ActionContinue, p.Host.CallOnResponseBody(x.ID, []byte(frame), false))
			assert.Equal(t, frame, string(p.Host.GetCurrentResponseBody(x.ID)), "passed as it came")
			x.DoneAndTick()
			assert.Zero(t, p.DayCounter(plugintest.APIKeySubject))
		})
	})
}

// The body is read whatever its Content-Type claims, and identity is no
// encoding: per-model weights apply to the model it names. Issue 14,
// point 6: "Per-model weights can be dodged: Content-Encoding: identity;
// Content-Type: application/json; x=octet-stream (the wrapper matches a
// substring and hides the body)".
func TestHardening6ContentHeadersDoNotHideTheBody(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	// Output tokens of gpt-4o cost 10, others 1: the body's model decides.
	config := plugintest.APIKeyConfig(plugintest.ReservationOn+
		`"token_count_strategy": "weighted", "token_weights": {"models": {"gpt-4o": {"output": 10}}},`, `"token_per_day": 100000`)
	body := plugintest.ChatBody(100)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			name    string
			headers [][2]string
		}{
			{"Content-Encoding: identity", [][2]string{{"content-encoding", "identity"}}},
			{"a Content-Type parameter naming octet-stream", [][2]string{{"content-type", "application/json; x=octet-stream"}}},
			{"a binary Content-Type on a JSON body", [][2]string{{"content-type", "application/octet-stream"}}},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, config)
				x := p.SendBody(body, append(c.headers, key)...).Answer()
				require.True(t, x.Passed())
				assert.Equal(t, int64(plugintest.ChatBodyPrompt+100*10), p.DayCounter(plugintest.APIKeySubject), "reserved at gpt-4o's weights")
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(3, 20, 30))...)
				assert.Equal(t, int64(20+30*10), p.DayCounter(plugintest.APIKeySubject), "charged at gpt-4o's weights")
			})
		}

		t.Run("a body in a coding it does not read is estimated at the bound, at the dearest weights", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, strings.Replace(config, `"enabled": true`, `"enabled": true, "max_body_bytes": 400`, 1))
			x := p.Send(key, [2]string{"content-encoding", "br"}, [2]string{"content-length", "40"}).Answer()
			require.True(t, x.Passed(), "not held for a body it cannot read")
			assert.Equal(t, int64(100+1024*10), p.DayCounter(plugintest.APIKeySubject), "its model cannot be told: gpt-4o's output weight")
		})
		t.Run("a gzip body is read decompressed", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.SendBody(gzipped(t, body), key, [2]string{"content-encoding", "gzip"}).Answer()
			require.True(t, x.Passed())
			assert.Equal(t, int64(plugintest.ChatBodyPrompt+100*10), p.DayCounter(plugintest.APIKeySubject), "reserved at gpt-4o's weights")
		})
	})
}
