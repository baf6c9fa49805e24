package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/tools/localgw/gateway"
	"github.com/tokenlimit/ai-token-ratelimit/tools/mockllm/llm"
)

// apiShapes are one streaming and one whole-JSON request of each API the
// plugin reads usage from, each with a usage of its own (input, output,
// cached part of the input) and the end its body must arrive with.
var apiShapes = []struct {
	name, path, body, usage string
	total                   int64
	ending                  string
}{
	{"openai chat stream", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, "311,97,100", 408, "data: [DONE]\n\n"},
	{"openai chat JSON", "/v1/chat/completions", `{"model":"m"}`, "123,45", 168, `"total_tokens":168,"prompt_tokens_details":{"cached_tokens":0}}}`},
	{"openai responses stream", "/v1/responses", `{"model":"m","stream":true}`, "250,50,20", 300, `"type":"response.completed"}` + "\n\n"},
	{"openai responses JSON", "/v1/responses", `{"model":"m"}`, "70,7", 77, `"total_tokens":77}}`},
	{"anthropic stream with cache reads", "/v1/messages", `{"model":"m","stream":true,"max_tokens":64}`, "400,60,300", 460, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	{"anthropic JSON with cache reads", "/v1/messages", `{"model":"m","max_tokens":64}`, "150,30,100", 180, `"output_tokens":30}}`},
	{"gemini SSE stream, cumulative usage", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{}`, "222,33,50", 255, "\"modelVersion\":\"gemini-x\"}\r\n\r\n"},
	{"gemini JSON array stream", "/v1beta/models/gemini-x:streamGenerateContent", `{}`, "88,12", 100, "}]"},
	{"gemini JSON", "/v1beta/models/gemini-x:generateContent", `{}`, "77,11", 88, `"modelVersion":"gemini-x"}`},
}

// TestLimiterEndToEnd runs one stack (failure_mode deny) through the
// limiter's life: exact charges of every API shape, rejections, streams cut
// by the client, many clients at once, and Redis restarting and going away.
// The subtests run in order and share the stack; each uses keys of its own.
func TestLimiterEndToEnd(t *testing.T) {
	s := startStack(t, testConfig("deny", 1000))
	s.avoidDayEdge()

	t.Run("a second gateway in the same process is refused", func(t *testing.T) {
		_, err := gateway.New(gateway.Options{Wasm: pluginWasm, Config: []byte(testConfig("deny", 1000)),
			Upstream: "http://127.0.0.1:9", Redis: "127.0.0.1:9", Log: io.Discard})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "already running in this process")
	})

	t.Run("every API shape is charged exactly", func(t *testing.T) {
		for i, c := range apiShapes {
			key := "big-shape-" + strconv.Itoa(i)
			resp, body := s.do(request{path: c.path, body: c.body, key: key, usage: c.usage,
				headers: []string{"Accept-Encoding", "gzip", llm.HeaderEvents, "6"}})
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.name, body)
			assert.True(t, strings.HasSuffix(body, c.ending), "%s: the body arrived whole:\n%s", c.name, body)
			assert.Equal(t, "1000000000", resp.Header.Get("X-TokenRateLimit-Limit"), c.name)
			assert.NotEmpty(t, resp.Header.Get("X-TokenRateLimit-Remaining"), c.name)
			s.waitIdle()
			assert.Equal(t, c.total, s.counter(key), "%s: charged input + output", c.name)

			seen := s.upstream.withKey(key)
			require.Len(t, seen, 1, c.name)
			assert.Empty(t, seen[0].header.Get("Accept-Encoding"), "%s: a limited request asks for an uncompressed body", c.name)
			assert.NotEmpty(t, seen[0].header.Get("X-Request-Id"), "%s: the gateway adds x-request-id as Envoy does", c.name)
		}
	})

	t.Run("an OpenAI stream that does not ask for its usage is asked, and the client never sees it", func(t *testing.T) {
		for _, c := range []struct{ name, path, body string }{
			{"chat", "/v1/chat/completions", `{"model":"m","stream":true}`},
			{"chat, other stream_options", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false}}`},
		} {
			key := "big-ask-" + strings.ReplaceAll(c.name, " ", "-")
			resp, body := s.do(request{path: c.path, body: c.body, key: key, usage: "311,97", headers: []string{llm.HeaderEvents, "6"}})
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", c.name, body)
			s.waitIdle()
			// The mock sends the usage chunk only when the request asks.
			assert.Equal(t, int64(408), s.counter(key), "%s: charged the usage the stream was asked for", c.name)
			assert.Contains(t, body, `"usage":null`, "%s: the other chunks say the usage was asked for", c.name)
			assert.NotContains(t, body, `"choices":[]`, "%s: the usage chunk was taken out", c.name)
			assert.True(t, strings.HasSuffix(body, "}\n\ndata: [DONE]\n\n"), "%s: the stream ends as it would have:\n%s", c.name, body)
			assert.Equal(t, 8, strings.Count(body, "data: "), "%s: 6 content chunks, the finish chunk and [DONE]", c.name)
		}
	})

	t.Run("an unlimited request passes untouched, without a Redis call", func(t *testing.T) {
		calls := s.gw.Stats().RedisCalls
		resp, body := s.do(request{path: "/v1/chat/completions", body: `{}`, usage: "5,5",
			headers: []string{"Accept-Encoding", "gzip", "X-Request-Id", "req-1"}})
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Empty(t, resp.Header.Get("X-TokenRateLimit-Limit"))
		s.waitIdle()
		assert.Equal(t, calls, s.gw.Stats().RedisCalls)
		seen := s.upstream.withKey("")
		require.NotEmpty(t, seen)
		assert.Equal(t, "gzip", seen[len(seen)-1].header.Get("Accept-Encoding"))
		assert.Equal(t, "req-1", seen[len(seen)-1].header.Get("X-Request-Id"))
	})

	t.Run("429 with the quota headers once the budget is used", func(t *testing.T) {
		const key = "small-429" // 100 tokens a day
		call := request{path: "/v1/chat/completions", body: `{"model":"m"}`, key: key, usage: "30,30"}
		for i, remaining := range []string{"100", "40"} {
			resp, body := s.do(call)
			require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i+1, body)
			assert.Equal(t, remaining, resp.Header.Get("X-TokenRateLimit-Remaining"), "request %d, before its own charge", i+1)
			s.waitIdle()
		}
		assert.Equal(t, int64(120), s.counter(key), "the second request was charged in full, past the limit")

		resp, body := s.do(call)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, rejectedMsg, body)
		reset, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err, "Retry-After: %q", resp.Header.Get("Retry-After"))
		assert.True(t, reset > 0 && reset <= 86400, "the day window resets within a day: %d", reset)
		assert.Equal(t, resp.Header.Get("Retry-After"), resp.Header.Get("X-TokenRateLimit-Reset"))
		assert.Equal(t, "100", resp.Header.Get("X-TokenRateLimit-Limit"))
		assert.Equal(t, "0", resp.Header.Get("X-TokenRateLimit-Remaining"))
		s.waitIdle()
		assert.Len(t, s.upstream.withKey(key), 2, "the rejected request never reached the upstream")
		assert.Equal(t, int64(120), s.counter(key), "a rejection costs nothing")
	})

	t.Run("a stream reaches the client event by event", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req := s.newRequest(ctx, request{path: "/v1/messages", body: `{"stream":true}`, key: "big-timing", usage: "10,10",
			headers: []string{llm.HeaderEvents, "3", llm.HeaderDelay, "2000"}})
		start := time.Now()
		resp, err := s.client.Do(req)
		require.NoError(t, err)
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		assert.Equal(t, "event: message_start\n", first)
		// The mock pauses 2 s after each event: the first one comes before the first pause ends.
		assert.Less(t, time.Since(start), 2*time.Second, "the first event was held back")
		cancel()
		resp.Body.Close()
		s.waitIdle()
	})

	t.Run("a client that goes away mid-stream ends the stream without hanging", func(t *testing.T) {
		cases := []struct {
			name, path, body string
			least, most      int64 // what it is charged
			why              string
		}{
			// The body is 55 bytes: a prompt estimate of 14 tokens. The
			// client left after 3 events of "tokN " (5 bytes each); the
			// plugin may have seen a few more.
			{"openai", "/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true}}`, 14 + 4, 14 + 13,
				"the stream was cut before its usage event: charged its estimate, the prompt's and the text received"},
			{"anthropic", "/v1/messages", `{"stream":true}`, 500 + 1, 500 + 1,
				"the end of the stream reached the plugin, which charged what message_start reported (500 in, 1 out)"},
		}
		for _, c := range cases {
			key := "big-gone-" + c.name
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			// 100 events 50 ms apart: five seconds of stream, the final usage at the very end.
			req := s.newRequest(ctx, request{path: c.path, body: c.body, key: key, usage: "500,500",
				headers: []string{llm.HeaderEvents, "100", llm.HeaderDelay, "50"}})
			resp, err := s.client.Do(req)
			require.NoError(t, err)
			rd := bufio.NewReader(resp.Body)
			for events := 0; events < 3; {
				line, err := rd.ReadString('\n')
				require.NoError(t, err)
				if strings.HasPrefix(line, "data: ") {
					events++
				}
			}
			left := time.Now()
			cancel() // the client goes away
			resp.Body.Close()

			s.waitIdle()
			assert.Less(t, time.Since(left), 3*time.Second, "%s: the gateway kept going after the client left", c.name)
			seen := s.upstream.withKey(key)
			require.Len(t, seen, 1)
			assert.True(t, seen[0].cancelled, "%s: the upstream request was cancelled", c.name)
			assert.Less(t, seen[0].ended.Sub(left), 3*time.Second, "%s: the upstream stream stopped early", c.name)
			charged := s.counter(key)
			assert.True(t, charged >= c.least && charged <= c.most, "%s: charged %d, not %d to %d: %s", c.name, charged, c.least, c.most, c.why)

			resp2, body := s.do(request{path: c.path, body: c.body, key: key, usage: "7,3"})
			require.Equal(t, http.StatusOK, resp2.StatusCode, body)
			s.waitIdle()
			assert.Equal(t, charged+10, s.counter(key), "%s: later requests work and are charged", c.name)
		}
	})

	t.Run("50 concurrent clients against one limit", func(t *testing.T) { concurrentClients(t, s) })
	t.Run("Redis restarts mid-run", func(t *testing.T) { redisRestart(t, s) })
	t.Run("Redis down: failure_mode deny answers 503", func(t *testing.T) { redisDownDeny(t, s) })
}
