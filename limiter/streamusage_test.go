package limiter_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

const (
	estimated = "token_ratelimit_estimated_count"
)

// streamBody is an OpenAI chat completions request that streams without
// asking for its usage, as the official SDKs send it by default.
const streamBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`

// readStream reads a recorded OpenAI chat completions stream of the
// streamusage package: the stream with include_usage (the usage-only chunk
// reports 19 + 10 tokens), and the same without that chunk.
func readStream(t *testing.T) (withUsage, withoutUsage string) {
	t.Helper()
	with, err := os.ReadFile("../streamusage/testdata/chat_stream.sse")
	require.NoError(t, err)
	without, err := os.ReadFile("../streamusage/testdata/chat_stream_without_usage.sse")
	require.NoError(t, err)
	return string(with), string(without)
}

// sendBodyTo sends a request's headers (with its Content-Length) and body
// to a path, without answering its Redis calls yet.
func sendBodyTo(p *plugintest.Plugin, path, body string, extra ...[2]string) *plugintest.Exchange {
	p.T.Helper()
	x := p.SendTo(path, append(extra, [2]string{"content-length", strconv.Itoa(len(body))})...)
	x.Action = p.Host.CallOnRequestBody(x.ID, []byte(body), true)
	return x
}

// upstreamSees returns the body and headers the request goes upstream with.
func upstreamSees(x *plugintest.Exchange) (body string, headers [][2]string) {
	return string(x.P.Host.GetCurrentRequestBody(x.ID)), x.P.Host.GetCurrentRequestHeaders(x.ID)
}

// clientGets plays the upstream's response (headers, then the body in
// chunks, the last marked as such; none when chunks is empty) and returns
// the body the client gets and the response headers. The end of the
// response may be held until Redis answers its charge; heldEnd tells
// whether it was.
func clientGets(t *testing.T, x *plugintest.Exchange, headers [][2]string, chunks []string) (body string, respHeaders [][2]string, heldEnd bool) {
	t.Helper()
	host := x.P.Host
	require.Equal(t, types.ActionContinue, host.CallOnResponseHeaders(x.ID, append([][2]string{{":status", "200"}}, headers...), false))
	respHeaders = host.GetCurrentResponseHeaders(x.ID)
	var b strings.Builder
	for i, c := range chunks {
		last := i == len(chunks)-1
		action := host.CallOnResponseBody(x.ID, []byte(c), last)
		if last && action == types.ActionPause {
			heldEnd = true
			x.Answer()
			action = host.GetCurrentHttpStreamAction(x.ID)
		}
		require.Equal(t, types.ActionContinue, action, "chunk %d of %d held back", i+1, len(chunks))
		b.Write(host.GetCurrentResponseBody(x.ID))
	}
	x.Done()
	return b.String(), respHeaders, heldEnd
}

var sse = [][2]string{{"content-type", "text/event-stream; charset=utf-8"}}

// TestStreamUsage holds stream_usage to what the README says, in Go and
// WASM mode (one test, so that the module is compiled once).
func TestStreamUsage(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		t.Run("streams are asked for their usage", func(t *testing.T) { streamsAreAskedForTheirUsage(t, redis) })
		t.Run("streams that need no asking", func(t *testing.T) { streamsThatNeedNoAsking(t, redis) })
		t.Run("streams cut before their usage", func(t *testing.T) { streamsCutBeforeTheirUsagePayTheEstimate(t, redis) })
		t.Run("streams as lax and Go upstreams read them", func(t *testing.T) { streamsAsLaxUpstreamsReadThem(t, redis) })
	})
}

// Issue 35, point 8: "stream": "true" or 1, which pydantic's lax mode
// (vLLM, LiteLLM) takes for true, streams there: it is asked for its usage,
// its value kept. A JSON body sent as text/plain (or with no Content-Type)
// is decoded by a Go upstream (Ollama) all the same: it is asked too.
func streamsAsLaxUpstreamsReadThem(t *testing.T, redis *redistest.Server) {
	key := plugintest.APIKey
	withUsage, withoutUsage := readStream(t)
	for _, c := range []struct {
		name, contentType, body, upstream string
	}{
		{"stream as a string", "application/json", `{"model":"m","stream":"true","messages":[]}`,
			`{"stream_options":{"include_usage":true},"model":"m","stream":"true","messages":[]}`},
		{"stream as a number", "application/json", `{"model":"m","stream":1,"messages":[]}`,
			`{"stream_options":{"include_usage":true},"model":"m","stream":1,"messages":[]}`},
		{"JSON sent as text/plain", "text/plain", `{"model":"m","stream":true,"messages":[]}`,
			`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[]}`},
		{"JSON sent without a Content-Type", "", `{"model":"m","stream":true,"messages":[]}`,
			`{"stream_options":{"include_usage":true},"model":"m","stream":true,"messages":[]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			headers := [][2]string{{":authority", "llm.example.com"}, {":method", "POST"}, {":path", "/v1/chat/completions"},
				{"content-length", strconv.Itoa(len(c.body))}, key}
			if c.contentType != "" {
				headers = append(headers, [2]string{"content-type", c.contentType})
			}
			x := &plugintest.Exchange{P: p, ID: p.Host.InitializeHttpContext()}
			x.Action = p.Host.CallOnRequestHeaders(x.ID, headers, false)
			x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
			x.Answer()
			require.True(t, x.Passed())
			body, _ := upstreamSees(x)
			assert.Equal(t, c.upstream, body)
			got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(withUsage))
			assert.Equal(t, withoutUsage, got, "the client gets the stream it asked for")
			assert.Equal(t, int64(29), p.DayCounter(plugintest.APIKeySubject), "charged the usage the stream reported")
		})
	}
}

// A streaming OpenAI chat completion that does not ask for its usage is
// rewritten to ask; the usage-only chunk the upstream then sends is read
// and charged, and taken out of what the client gets, which is the stream
// it asked for byte for byte, however the body is cut.
func streamsAreAskedForTheirUsage(t *testing.T, redis *redistest.Server) {
	key := plugintest.APIKey
	withUsage, withoutUsage := readStream(t)
	usageAt := strings.Index(withUsage, `"choices":[],"usage"`)
	require.Positive(t, usageAt)
	synthetic := plugintest.OpenAIStream(30, 1234, 567)
	events := plugintest.SSEEvents(synthetic)
	syntheticWithout := strings.Join(events[:len(events)-2], "") + events[len(events)-1]
	cases := []struct {
		name          string
		stream, wants string
		chunks        []string
		usage         int64
	}{
		{"one chunk per event", withUsage, withoutUsage, plugintest.SSEEvents(withUsage), 29},
		{"the whole stream in one chunk", withUsage, withoutUsage, []string{withUsage}, 29},
		{"cut inside the usage chunk", withUsage, withoutUsage, plugintest.CutAt(withUsage, usageAt-40, usageAt+7, usageAt+100), 29},
		{"one byte per chunk", withUsage, withoutUsage, plugintest.Bytewise(withUsage), 29},
		{"many events, cut at odd places", synthetic, syntheticWithout, plugintest.CutAt(synthetic, 7, 500, 501, len(synthetic)-30), 1234 + 567},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			x := sendBodyTo(p, "/v1/chat/completions", streamBody, key).Answer()
			require.True(t, x.Passed())
			body, headers := upstreamSees(x)
			assert.JSONEq(t, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hello."}],"stream_options":{"include_usage":true}}`, body)
			assert.Empty(t, plugintest.Header(headers, "content-length"), "the body changed length: no Content-Length goes upstream")

			got, respHeaders, held := clientGets(t, x, append(sse, [2]string{"content-length", strconv.Itoa(len(c.stream))}), c.chunks)
			assert.Equal(t, c.wants, got, "the client gets the stream without the usage chunk")
			assert.Empty(t, plugintest.Header(respHeaders, "content-length"), "the filtered body is shorter: no Content-Length")
			assert.True(t, held, "the end of the response waited for the charge")
			assert.Equal(t, c.usage, p.DayCounter(plugintest.APIKeySubject), "charged exactly the usage")
			assert.Equal(t, uint64(1), injectedCount(p))
			assert.Zero(t, counted(p, "none", estimated))
		})
	}

	t.Run("legacy completions", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
		x := sendBodyTo(p, "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say hello.","stream":true,"stream_options":{"include_obfuscation":false}}`, key).Answer()
		require.True(t, x.Passed())
		body, _ := upstreamSees(x)
		assert.Equal(t, `{"model":"gpt-3.5-turbo-instruct","prompt":"Say hello.","stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}`, body,
			"include_usage added to the stream_options the client sent, every other byte kept")
		content := ""
		for _, text := range []string{"Hello", "!", " How", " can I help?"} {
			content += `data: {"id":"cmpl-1","object":"text_completion","created":1753401234,"choices":[{"text":"` + text + `","index":0,"logprobs":null,"finish_reason":null}],"model":"gpt-3.5-turbo-instruct","usage":null}` + "\n\n"
		}
		usage := `data: {"id":"cmpl-1","object":"text_completion","created":1753401234,"choices":[],"model":"gpt-3.5-turbo-instruct","usage":{"prompt_tokens":3,"completion_tokens":6,"total_tokens":9}}` + "\n\n"
		done := "data: [DONE]\n\n"
		got, _, _ := clientGets(t, x, sse, []string{content, usage, done})
		assert.Equal(t, content+done, got)
		assert.Equal(t, int64(9), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), injectedCount(p))
	})

	t.Run("with token_reservation: the reservation reconciled to the usage", func(t *testing.T) {
		redis.Do("FLUSHALL")
		forgetModels(t)
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100000`))
		x := sendBodyTo(p, "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"max_tokens":400,"messages":[{"role":"user","content":"Say hello."}]}`, key)
		assert.Equal(t, types.ActionPause, x.Action, "admission waits for Redis")
		x.Answer()
		require.True(t, x.Passed())
		assert.Greater(t, p.DayCounter(plugintest.APIKeySubject), int64(400), "reserved")
		body, _ := upstreamSees(x)
		assert.Contains(t, body, `"stream_options":{"include_usage":true}`)
		got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(withUsage))
		assert.Equal(t, withoutUsage, got)
		assert.Equal(t, int64(29), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), injectedCount(p))
	})

	t.Run("failure_mode allow: not charged, still what the client asked for", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
		x := sendBodyTo(p, "/v1/chat/completions", streamBody, key)
		calls := p.Host.GetRedisCalloutAttributesFromContext(x.ID)
		require.Len(t, calls, 1)
		p.Host.CallOnRedisCallResponse(calls[0].CalloutID, 1, nil) // the admission call failed
		require.True(t, x.Passed())
		body, _ := upstreamSees(x)
		assert.Contains(t, body, `"stream_options":{"include_usage":true}`)
		got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(withUsage))
		assert.Equal(t, withoutUsage, got)
		assert.Zero(t, p.DayCounter(plugintest.APIKeySubject))
	})
}

// Requests that ask for their usage already, do not stream, or are not
// OpenAI completions are not touched, and neither are their responses; with
// stream_usage: off nothing is, and a stream that did not ask pays its
// estimate.
func streamsThatNeedNoAsking(t *testing.T, redis *redistest.Server) {
	key := plugintest.APIKey
	withUsage, withoutUsage := readStream(t)
	for _, c := range []struct {
		name, path, body string
		keepsLength      bool // the request goes upstream with its Content-Length
	}{
		{"already asking", "/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello."}]}`, false},
		{"not a stream", "/v1/chat/completions", `{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"Say hello."}]}`, false},
		{"not an OpenAI completions path", "/v1/messages", `{"model":"claude-sonnet-4","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"Say hello."}]}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			x := sendBodyTo(p, c.path, c.body, key).Answer()
			require.True(t, x.Passed())
			body, headers := upstreamSees(x)
			assert.Equal(t, c.body, body, "the body goes upstream as it came")
			if c.keepsLength {
				assert.Equal(t, strconv.Itoa(len(c.body)), plugintest.Header(headers, "content-length"))
			}
			got, respHeaders, _ := clientGets(t, x, append(sse, [2]string{"content-length", strconv.Itoa(len(withUsage))}), plugintest.SSEEvents(withUsage))
			assert.Equal(t, withUsage, got, "the response reaches the client whole, its usage chunk too")
			assert.Equal(t, strconv.Itoa(len(withUsage)), plugintest.Header(respHeaders, "content-length"))
			assert.Equal(t, int64(29), p.DayCounter(plugintest.APIKeySubject))
			assert.Zero(t, injectedCount(p))
		})
	}

	t.Run("stream_usage off: untouched, charged by estimate", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"stream_usage": "off",`, `"token_per_day": 100000`))
		x := sendBodyTo(p, "/v1/chat/completions", streamBody, key).Answer()
		require.True(t, x.Passed())
		body, headers := upstreamSees(x)
		assert.Equal(t, streamBody, body)
		assert.Equal(t, strconv.Itoa(len(streamBody)), plugintest.Header(headers, "content-length"))
		// Not asked, the upstream sends no usage chunk.
		got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(withoutUsage))
		assert.Equal(t, withoutUsage, got)
		// 84 bytes of body: 21 prompt tokens; "Hello! How can I help
		// you today?": 32 bytes of text, 8 tokens.
		assert.Equal(t, int64(21+8), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
		assert.Zero(t, injectedCount(p))
	})
}

// A stream asked for its usage that ends before the usage chunk (the
// client leaves, the upstream resets or gives up after some content) pays
// its estimate: its prompt by the body's size plus the text that came, at
// bytes_per_token. So does one whose response cannot be read (compressed),
// which is passed on untouched.
func streamsCutBeforeTheirUsagePayTheEstimate(t *testing.T, redis *redistest.Server) {
	key := plugintest.APIKey
	withUsage, _ := readStream(t)
	events := plugintest.SSEEvents(withUsage)
	const prompt = 21 // the 84 bytes of streamBody
	// The first 5 events carry "", "Hello", "!", " How", " can": 14 bytes of text.
	const firstFive = 4
	start := func(t *testing.T) (*plugintest.Plugin, *plugintest.Exchange) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
		x := sendBodyTo(p, "/v1/chat/completions", streamBody, key).Answer()
		require.True(t, x.Passed())
		return p, x
	}

	t.Run("the client leaves, or the upstream resets, mid-stream", func(t *testing.T) {
		p, x := start(t)
		require.Equal(t, types.ActionContinue, p.Host.CallOnResponseHeaders(x.ID, append([][2]string{{":status", "200"}}, sse...), false))
		for _, e := range events[:5] {
			require.Equal(t, types.ActionContinue, p.Host.CallOnResponseBody(x.ID, []byte(e), false))
		}
		x.DoneAndTick() // the stream ends without its last chunk
		assert.Equal(t, int64(prompt+firstFive), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
	})

	t.Run("the upstream ends the stream before the usage chunk", func(t *testing.T) {
		p, x := start(t)
		cut := strings.Join(events[:5], "")
		got, _, _ := clientGets(t, x, sse, []string{cut, ""})
		assert.Equal(t, cut, got)
		assert.Equal(t, int64(prompt+firstFive), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
	})

	// One reading: the filter takes out the usage chunk whose usage was
	// charged. A usage chunk the parser does not read (its key escaped,
	// which no upstream is known to do) is not charged, and the client
	// gets it rather than a stream whose usage vanished unread.
	t.Run("a usage chunk whose usage is not read goes to the client", func(t *testing.T) {
		p, x := start(t)
		unread := strings.Join(events[:5], "") + `data: {"id":"c","choices":[],"\u0075sage":{"prompt_tokens":19,"completion_tokens":10}}` + "\n\n"
		got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(unread))
		assert.Equal(t, unread, got)
		assert.Equal(t, int64(prompt+firstFive), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
	})

	t.Run("the upstream fails after some content", func(t *testing.T) {
		p, x := start(t)
		failed := strings.Join(events[:5], "") + `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}` + "\n\n"
		got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(failed))
		assert.Equal(t, failed, got)
		assert.Equal(t, int64(prompt+firstFive), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
	})

	t.Run("the stream ends before its response headers", func(t *testing.T) {
		p, x := start(t)
		x.DoneAndTick()
		assert.Equal(t, int64(prompt), p.DayCounter(plugintest.APIKeySubject))
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
	})

	t.Run("a compressed response is passed on untouched", func(t *testing.T) {
		p, x := start(t)
		gzipped := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + strings.Repeat("\xab\x00\xff", 40)
		got, headers, _ := clientGets(t, x, append(sse, [2]string{"content-encoding", "gzip"}, [2]string{"content-length", strconv.Itoa(len(gzipped))}),
			[]string{gzipped[:50], gzipped[50:]})
		assert.Equal(t, gzipped, got)
		assert.Equal(t, strconv.Itoa(len(gzipped)), plugintest.Header(headers, "content-length"))
		p.SendPostponed() // the plugin never saw the body: charged from the tick
		assert.Equal(t, int64(prompt), p.DayCounter(plugintest.APIKeySubject), "unreadable: the prompt's estimate")
		assert.Equal(t, uint64(1), counted(p, "none", estimated))
	})
}

// injectedCount is the worker's count of requests asked for their stream's
// usage, which the tick adds to the gateway's counter.
func injectedCount(p *plugintest.Plugin) uint64 {
	p.Host.Tick()
	n, _ := p.Host.GetCounterMetric("token_ratelimit_stream_usage_injected_count")
	return n
}

// TestStreamUsageDuplicateKeys: a streaming request whose body repeats its
// stream or include_usage keys (or spells them in another case) still goes
// upstream asking for its usage, in a body with one "stream":true and one
// include_usage, and the usage the stream reports is charged exactly. The
// upstream here behaves as a real one: it sends the usage chunk only when
// the body it gets asks for it, read as encoding/json reads it (the last
// duplicate wins, keys match without case).
func TestStreamUsageDuplicateKeys(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		key := plugintest.APIKey
		withUsage, withoutUsage := readStream(t)
		const messages = `"messages":[{"role":"user","content":"Say hello."}]`
		cases := []struct {
			name, contentType, body string
		}{
			{"stream false then true", "application/json", `{"model":"gpt-4o","stream":false,"stream":true,` + messages + `}`},
			{"include_usage true then false", "application/json", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true,"include_usage":false},` + messages + `}`},
			{"a JSON media type with a suffix", "application/vnd.api+json; charset=utf-8", streamBody},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
				x := &plugintest.Exchange{P: p, ID: p.Host.InitializeHttpContext()}
				p.Host.CallOnRequestHeaders(x.ID, [][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
					{":path", "/v1/chat/completions"}, {"content-type", c.contentType}, key,
					{"content-length", strconv.Itoa(len(c.body))}}, false)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				x.Answer()
				require.True(t, x.Passed())

				body, _ := upstreamSees(x)
				stream, includeUsage := upstreamReads(t, body)
				assert.True(t, stream, "the upstream streams: %s", body)
				assert.True(t, includeUsage, "the upstream is asked for the usage: %s", body)
				assert.Equal(t, 1, strings.Count(body, `"stream":`), "one stream member: %s", body)
				assert.Equal(t, 1, strings.Count(body, `"include_usage":`), "one include_usage member: %s", body)

				sent := withoutUsage
				if stream && includeUsage {
					sent = withUsage
				}
				got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(sent))
				assert.Equal(t, withoutUsage, got, "the client gets the stream without the usage chunk")
				assert.Equal(t, int64(29), p.DayCounter(plugintest.APIKeySubject), "charged exactly the usage")
				assert.Equal(t, uint64(1), injectedCount(p))
				assert.Zero(t, counted(p, "none", estimated))
			})
		}
	})
}

// upstreamReads reads a request body as a Go upstream does (encoding/json
// into a struct: the last duplicate wins, keys match without case) and
// tells whether it streams and asks for the usage.
func upstreamReads(t *testing.T, body string) (stream, includeUsage bool) {
	t.Helper()
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	d := json.NewDecoder(bytes.NewReader([]byte(body)))
	require.NoError(t, d.Decode(&req), "the body goes upstream as JSON: %s", body)
	return req.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
}
