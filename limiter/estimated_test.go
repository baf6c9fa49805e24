package limiter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// contentEvents is an OpenAI chat stream of n content events ("word <i> ")
// without usage, and the bytes of text they carry.
func contentEvents(n int) (events []string, textBytes int) {
	for i := 0; i < n; i++ {
		text := fmt.Sprintf("word %d ", i)
		textBytes += len(text)
		events = append(events, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"`+text+`"},"finish_reason":null}]}`+"\n\n")
	}
	return events, textBytes
}

// A response that reports no usage is charged an estimate, in every mode:
// the request's prompt estimate (its body's, or by its declared size when
// the body was not read) plus the output text the client received, both at
// bytes_per_token (4), and counted in token_ratelimit_estimated_count.
func TestResponsesWithoutUsagePayAnEstimate(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	length := [2]string{"content-length", "400"} // 100 prompt tokens, by size
	events, textBytes := contentEvents(40)
	require.Equal(t, 310, textBytes)
	const estimate = 100 + 78 // 310 bytes of text: 78 tokens, rounded up
	const estimated = "token_ratelimit_estimated_count"
	config := plugintest.APIKeyConfig(`"stream_usage": "off",`, `"token_per_day": 100000`)

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("a stream that never reports usage", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.Request(key, length)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
			assert.Equal(t, int64(estimate), p.DayCounter(plugintest.APIKeySubject))
			assert.Equal(t, uint64(1), counted(p, "none", estimated))
		})

		t.Run("a client that leaves before the usage event", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.Request(key, length)
			require.True(t, x.Passed())
			x.ResponseHeaders("text/event-stream")
			for _, e := range plugintest.SSEEvents(plugintest.OpenAIStream(40, 5000, 5000))[:40] {
				p.Host.CallOnResponseBody(x.ID, []byte(e), false)
			}
			x.DoneAndTick()
			assert.Equal(t, int64(estimate), p.DayCounter(plugintest.APIKeySubject), "not the 10,000 it would have reported")
			assert.Equal(t, uint64(1), counted(p, "none", estimated))
		})

		t.Run("the estimate from the body the plugin read", func(t *testing.T) {
			// Reservation reads the body; the estimate takes its prompt.
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+`"stream_usage": "off",`, `"token_per_day": 100000`))
			body := `{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 85) + `"}]}`
			x := p.SendBody(body, key).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
			charged := p.DayCounter(plugintest.APIKeySubject)
			assert.InDelta(t, 100+78, charged, 10, "about 100 prompt tokens (the message) and 78 of output, not the 50 reserved for output")
			assert.Equal(t, uint64(1), counted(p, "gpt-4o", estimated))
		})

		t.Run("garbage, binary or compressed: the prompt estimate", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.Request(key, length)
			require.True(t, x.Passed())
			gzipped := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + strings.Repeat("\xab\x00\xff{\"usage\"", 30)
			x.Respond("application/json", gzipped[:100], gzipped[100:])
			assert.Equal(t, int64(100), p.DayCounter(plugintest.APIKeySubject))
			assert.Equal(t, uint64(1), counted(p, "none", estimated))
		})

		// Issue 35, point 3: no Content-Length (a chunked body), the body
		// not read: its bytes that pass count, whether the host buffered
		// them while the admission waited (they pass when it resumes the
		// request) or hands them over after.
		prompt := strings.Repeat("abcd", 10_000) // 40 KB: 10,000 tokens at 4 bytes each
		chunkOf := func(i, n int) string { return prompt[i*len(prompt)/n : (i+1)*len(prompt)/n] }
		sendChunked := func(p *plugintest.Plugin, chunks, whileWaiting int) *plugintest.Exchange {
			x := p.Send(key)
			for i := range chunks {
				if i == whileWaiting {
					x.Answer()
				}
				p.Host.CallOnRequestBody(x.ID, []byte(chunkOf(i, chunks)), i == chunks-1)
			}
			if whileWaiting == chunks {
				x.Answer()
			}
			return x
		}
		for _, c := range []struct {
			name                 string
			chunks, whileWaiting int // chunks sent before Redis answers
		}{
			{"the whole body while the admission waits", 1, 1},
			{"8 chunks, all while it waits", 8, 8},
			{"8 chunks after the admission", 8, 0},
		} {
			t.Run("no Content-Length, "+c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, config)
				x := sendChunked(p, c.chunks, c.whileWaiting)
				require.True(t, x.Passed())
				x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
				assert.Equal(t, int64(10_000+78), p.DayCounter(plugintest.APIKeySubject))
			})
		}
		t.Run("no Content-Length, 2 of 8 chunks while the admission waits", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := sendChunked(p, 8, 2)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
			// Envoy passes the two buffered chunks when the request resumes,
			// and gives the next chunks alone; the emulator gives them again
			// with the third, which counts them twice here (a quarter more).
			charged := p.DayCounter(plugintest.APIKeySubject)
			assert.GreaterOrEqual(t, charged, int64(10_000+78))
			assert.LessOrEqual(t, charged, int64(10_000+2_500+78))
		})

		t.Run("an upstream error without usage costs nothing", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.Request(key, length)
			require.True(t, x.Passed())
			require.Equal(t, 0, int(p.Host.CallOnResponseHeaders(x.ID, [][2]string{{":status", "503"}, {"content-type", "application/json"}}, false)))
			p.Host.CallOnResponseBody(x.ID, []byte(`{"error":{"message":"overloaded"}}`), true)
			x.DoneAndTick()
			assert.Zero(t, p.DayCounter(plugintest.APIKeySubject))
			assert.Zero(t, counted(p, "none", estimated))
		})
	})
}
