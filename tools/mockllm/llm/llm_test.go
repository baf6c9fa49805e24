package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/tokenusage"
)

// post sends one request to the mock and returns the response, body read.
func post(t *testing.T, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(raw)
}

// sseData returns the data of every event of a stream, in order, and the
// names of the named ones.
func sseData(t *testing.T, stream string) (data []string, names []string) {
	t.Helper()
	stream = strings.ReplaceAll(stream, "\r\n", "\n")
	require.True(t, strings.HasSuffix(stream, "\n\n"), "the stream does not end with a whole event: %q", stream)
	for _, event := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		for _, line := range strings.Split(event, "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				names = append(names, name)
			} else if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			} else {
				t.Fatalf("unexpected line %q", line)
			}
		}
	}
	return data, names
}

func TestEveryShapeReportsTheAskedUsage(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	usage := []string{HeaderUsage, "123,45,20", HeaderEvents, "5"}

	t.Run("chat stream with include_usage", func(t *testing.T) {
		resp, body := post(t, srv.URL+"/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true}}`, usage...)
		assert.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
		data, _ := sseData(t, body)
		require.Len(t, data, 5+3, "5 content chunks, the finish chunk, the usage chunk, [DONE]")
		for _, d := range data[:6] {
			assert.Equal(t, gjson.Null, gjson.Get(d, "usage").Type, "content chunks carry usage:null: %s", d)
			assert.True(t, gjson.Get(d, "usage").Exists())
		}
		u := gjson.Get(data[6], "usage")
		assert.Equal(t, int64(123), u.Get("prompt_tokens").Int())
		assert.Equal(t, int64(45), u.Get("completion_tokens").Int())
		assert.Equal(t, int64(168), u.Get("total_tokens").Int())
		assert.Equal(t, int64(20), u.Get("prompt_tokens_details.cached_tokens").Int())
		assert.Equal(t, "[DONE]", data[7])
	})
	t.Run("chat stream without include_usage has no usage at all", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1/chat/completions", `{"stream":true}`, usage...)
		assert.NotContains(t, body, "usage")
		data, _ := sseData(t, body)
		assert.Len(t, data, 5+2)
	})
	t.Run("chat JSON", func(t *testing.T) {
		resp, body := post(t, srv.URL+"/v1/chat/completions", `{"model":"m"}`, usage...)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Equal(t, "tok0 tok1 tok2 tok3 tok4 ", gjson.Get(body, "choices.0.message.content").String())
		assert.Equal(t, int64(168), gjson.Get(body, "usage.total_tokens").Int())
		assert.Equal(t, "m", gjson.Get(body, "model").String())
	})
	t.Run("responses stream", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1/responses", `{"stream":true}`, usage...)
		data, names := sseData(t, body)
		require.Equal(t, len(data), len(names))
		assert.Equal(t, "response.created", names[0])
		assert.Equal(t, 5, strings.Count(strings.Join(names, " "), "response.output_text.delta"))
		assert.Equal(t, "response.completed", names[len(names)-1])
		for i, d := range data {
			assert.Equal(t, names[i], gjson.Get(d, "type").String())
			assert.Equal(t, int64(i), gjson.Get(d, "sequence_number").Int())
		}
		assert.Equal(t, gjson.Null, gjson.Get(data[0], "response.usage").Type)
		u := gjson.Get(data[len(data)-1], "response.usage")
		assert.Equal(t, int64(123), u.Get("input_tokens").Int())
		assert.Equal(t, int64(20), u.Get("input_tokens_details.cached_tokens").Int())
		assert.Equal(t, int64(45), u.Get("output_tokens").Int())
		assert.Equal(t, int64(168), u.Get("total_tokens").Int())
	})
	t.Run("responses JSON", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1/responses", `{}`, usage...)
		assert.Equal(t, int64(168), gjson.Get(body, "usage.total_tokens").Int())
		assert.Equal(t, "completed", gjson.Get(body, "status").String())
	})
	t.Run("anthropic stream: input without the cache reads, cumulative output at the end", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1/messages", `{"stream":true}`, usage...)
		data, names := sseData(t, body)
		assert.Equal(t, []string{"message_start", "content_block_start", "ping",
			"content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_delta",
			"content_block_stop", "message_delta", "message_stop"}, names)
		start := gjson.Get(data[0], "message.usage")
		assert.Equal(t, int64(103), start.Get("input_tokens").Int())
		assert.Equal(t, int64(20), start.Get("cache_read_input_tokens").Int())
		assert.Equal(t, int64(0), start.Get("cache_creation_input_tokens").Int())
		assert.Equal(t, int64(45), gjson.Get(data[9], "usage.output_tokens").Int())
	})
	t.Run("anthropic JSON", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1/messages", `{}`, usage...)
		assert.Equal(t, int64(103), gjson.Get(body, "usage.input_tokens").Int())
		assert.Equal(t, int64(20), gjson.Get(body, "usage.cache_read_input_tokens").Int())
		assert.Equal(t, int64(45), gjson.Get(body, "usage.output_tokens").Int())
	})
	t.Run("gemini SSE: cumulative usage, CRLF events", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1beta/models/gem:streamGenerateContent?alt=sse", `{}`, usage...)
		assert.Contains(t, body, "\r\n\r\n")
		data, _ := sseData(t, body)
		require.Len(t, data, 5)
		prev := int64(-1)
		for _, d := range data {
			c := gjson.Get(d, "usageMetadata.candidatesTokenCount").Int()
			assert.Greater(t, c, prev, "cumulative")
			prev = c
			assert.Equal(t, int64(123), gjson.Get(d, "usageMetadata.promptTokenCount").Int())
		}
		last := gjson.Get(data[4], "usageMetadata")
		assert.Equal(t, int64(45), last.Get("candidatesTokenCount").Int())
		assert.Equal(t, int64(168), last.Get("totalTokenCount").Int())
		assert.Equal(t, int64(20), last.Get("cachedContentTokenCount").Int())
		assert.Equal(t, "STOP", gjson.Get(data[4], "candidates.0.finishReason").String())
	})
	t.Run("gemini stream without alt=sse is a JSON array", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1beta/models/gem:streamGenerateContent", `{}`, usage...)
		var chunks []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(body), &chunks))
		require.Len(t, chunks, 5)
		assert.Equal(t, int64(168), gjson.GetBytes(chunks[4], "usageMetadata.totalTokenCount").Int())
	})
	t.Run("gemini JSON", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1beta/models/gem:generateContent", `{}`, usage...)
		assert.Equal(t, int64(168), gjson.Get(body, "usageMetadata.totalTokenCount").Int())
		assert.Equal(t, "gem", gjson.Get(body, "modelVersion").String())
	})
	t.Run("gemini's v1 API, which the @google/genai SDK calls at a custom base URL", func(t *testing.T) {
		_, body := post(t, srv.URL+"/v1/models/gem:generateContent", `{}`, usage...)
		assert.Equal(t, int64(168), gjson.Get(body, "usageMetadata.totalTokenCount").Int())
	})
}

func TestUsageWithoutTheHeaderComesFromTheRequest(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	pad := strings.Repeat("x", 397)
	cases := []struct {
		path, body    string
		input, output string // where the usage's input and output counts are
		want          int64
	}{
		{"/v1/chat/completions", `{"max_tokens":7,"p":"` + pad + `"}`, "usage.prompt_tokens", "usage.completion_tokens", 7},
		{"/v1/chat/completions", `{"max_completion_tokens":9,"p":"` + pad + `"}`, "usage.prompt_tokens", "usage.completion_tokens", 9},
		{"/v1/chat/completions", `{"p":"` + pad + `"}`, "usage.prompt_tokens", "usage.completion_tokens", DefaultOutputTokens},
		{"/v1/responses", `{"max_output_tokens":11,"p":"` + pad + `"}`, "usage.input_tokens", "usage.output_tokens", 11},
		{"/v1/messages", `{"max_tokens":13,"p":"` + pad + `"}`, "usage.input_tokens", "usage.output_tokens", 13},
		{"/v1beta/models/g:generateContent", `{"generationConfig":{"maxOutputTokens":15},"p":"` + pad + `"}`,
			"usageMetadata.promptTokenCount", "usageMetadata.candidatesTokenCount", 15},
	}
	for _, c := range cases {
		_, body := post(t, srv.URL+c.path, c.body)
		assert.Equal(t, c.want, gjson.Get(body, c.output).Int(), "output is the cap or 16: %s %s", c.path, body)
		assert.Equal(t, int64(len(c.body)/4), gjson.Get(body, c.input).Int(), "input is the body's bytes / 4: %s %s", c.path, body)
	}
}

func TestEventsAreFlushedOneByOneWithTheDelay(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	req.Header.Set(HeaderEvents, "4")
	req.Header.Set(HeaderDelay, "150")
	start := time.Now()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, first, "tok0")
	assert.Less(t, time.Since(start), 140*time.Millisecond, "the first event came before the pause")
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	assert.Contains(t, string(rest), "[DONE]")
	// 4 content events, the finish chunk and [DONE]: 5 pauses.
	assert.GreaterOrEqual(t, time.Since(start), 5*150*time.Millisecond)
}

func TestStreamStopsWhenTheClientGoesAway(t *testing.T) {
	finished := make(chan time.Time, 1)
	h := New(Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		finished <- time.Now()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set(HeaderEvents, "1000")
	req.Header.Set(HeaderDelay, "100")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event: message_start\n", line)
	gone := time.Now()
	cancel()
	resp.Body.Close()
	select {
	case at := <-finished:
		assert.Less(t, at.Sub(gone), time.Second, "the handler ended soon after the client left")
	case <-time.After(5 * time.Second):
		t.Fatal("the mock kept streaming to a client that went away")
	}
}

func TestMalformedRequestsAreRefusedWithAReason(t *testing.T) {
	var seen atomic.Int32
	srv := httptest.NewServer(New(Options{Observe: func(*http.Request) { seen.Add(1) }}))
	defer srv.Close()
	cases := []struct {
		path, body string
		headers    []string
		status     int
		msg        string
	}{
		{"/v1/chat/completions", `{}`, []string{HeaderUsage, "12"}, 400, "want <input>,<output>"},
		{"/v1/chat/completions", `{}`, []string{HeaderUsage, "1,-2"}, 400, `"-2" is not a token count`},
		{"/v1/chat/completions", `{}`, []string{HeaderUsage, "1,2,3"}, 400, "3 cached tokens out of 1"},
		{"/v1/chat/completions", `{}`, []string{HeaderUsage, "10,2,6,5"}, 400, "6 cached + 5 cache-write tokens out of 10 input tokens"},
		{"/v1/chat/completions", `{}`, []string{HeaderUsage, "10,2,0,0,3"}, 400, "3 reasoning tokens out of 2 output tokens"},
		{"/v1/chat/completions", `{}`, []string{HeaderUsage, "nothing"}, 400, "or none"},
		{"/v1/chat/completions", `{}`, []string{HeaderEvents, "0"}, 400, "from 1 to 10000"},
		{"/v1/chat/completions", `{}`, []string{HeaderDelay, "soon"}, 400, "milliseconds"},
		{"/v1/chat/completions", `{"stream":"yes"}`, nil, 400, "not the JSON this API takes"},
		{"/v1/embeddings", `{}`, nil, 404, "no mock for POST /v1/embeddings"},
		{"/v1beta/models/g:countTokens", `{}`, nil, 404, "no mock"},
	}
	for _, c := range cases {
		resp, body := post(t, srv.URL+c.path, c.body, c.headers...)
		assert.Equal(t, c.status, resp.StatusCode, "%s %v", c.path, c.headers)
		assert.Contains(t, gjson.Get(body, "error.message").String(), c.msg)
	}
	resp, err := http.Get(srv.URL + "/v1/messages")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, int32(len(cases)+1), seen.Load(), "Observe sees every request")
}

func TestParseUsage(t *testing.T) {
	u, err := ParseUsage(" 10, 5 ")
	require.NoError(t, err)
	assert.Equal(t, Usage{Input: 10, Output: 5}, u)
	assert.Equal(t, 15, u.Total())
	u, err = ParseUsage("10,5,4")
	require.NoError(t, err)
	assert.Equal(t, Usage{Input: 10, Output: 5, Cached: 4}, u)
	u, err = ParseUsage("10,5,4,6,5")
	require.NoError(t, err)
	assert.Equal(t, Usage{Input: 10, Output: 5, Cached: 4, CacheWrite: 6, Reasoning: 5}, u, "the whole input cached or written, the whole output reasoning")
	assert.Equal(t, 15, u.Total(), "the parts are in input and output")
	u, err = ParseUsage(" None ")
	require.NoError(t, err)
	assert.Equal(t, Usage{None: true}, u)
	for _, bad := range []string{"", "1", "1,2,3,4,5,6", "a,b", "1,2,3", "10,2,5,6", "10,2,0,0,3", "none,1", "1,2,-1"} {
		_, err := ParseUsage(bad)
		assert.Error(t, err, bad)
	}
}

// shapes are a request of every API shape, streamed or not.
var shapes = []struct{ path, body string }{
	{"/v1/chat/completions", `{}`},
	{"/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true}}`},
	{"/v1/responses", `{}`},
	{"/v1/responses", `{"stream":true}`},
	{"/v1/messages", `{}`},
	{"/v1/messages", `{"stream":true}`},
	{"/v1beta/models/gem:generateContent", `{}`},
	{"/v1beta/models/gem:streamGenerateContent?alt=sse", `{}`},
	{"/v1beta/models/gem:streamGenerateContent", `{}`},
}

// pluginReads is the usage the plugin's own parser finds in a body.
func pluginReads(body string) (tokenusage.Usage, bool) {
	var p tokenusage.Parser
	p.Write([]byte(body))
	p.Finish()
	return p.Usage()
}

// x-mock-usage's cache writes and reasoning, in each shape that has a
// field for them, read by the plugin's own usage parser as the counts
// asked for: input 1000 (300 read from a cache, 200 written to one),
// output 120 (50 reasoning). A cache write is reported apart by Anthropic
// only, reasoning by all but Anthropic; each is in input or output anyway.
func TestEveryShapeReportsCacheWritesAndReasoning(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	usage := []string{HeaderUsage, "1000,120,300,200,50", HeaderEvents, "4"}
	for _, c := range shapes {
		resp, body := post(t, srv.URL+c.path, c.body, usage...)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		got, ok := pluginReads(body)
		require.True(t, ok, "%s %s: %s", c.path, c.body, body)
		want := tokenusage.Usage{Input: 1000, Output: 120, CacheRead: 300, Reasoning: 50}
		if c.path == "/v1/messages" {
			want.CacheCreation, want.Reasoning = 200, 0
		}
		assert.Equal(t, want, got, "%s %s: %s", c.path, c.body, body)
	}

	// The fields, as each provider names them.
	u := gjson.Get(post2(t, srv.URL+"/v1/chat/completions", `{}`, usage...), "usage")
	assert.Equal(t, int64(120), u.Get("completion_tokens").Int())
	assert.Equal(t, int64(50), u.Get("completion_tokens_details.reasoning_tokens").Int())
	assert.Equal(t, int64(1120), u.Get("total_tokens").Int(), "reasoning inside completion_tokens, as OpenAI counts it")
	u = gjson.Get(post2(t, srv.URL+"/v1/responses", `{}`, usage...), "usage")
	assert.Equal(t, int64(50), u.Get("output_tokens_details.reasoning_tokens").Int())
	u = gjson.Get(post2(t, srv.URL+"/v1/messages", `{}`, usage...), "usage")
	assert.Equal(t, int64(500), u.Get("input_tokens").Int(), "1000 less the 300 read and the 200 written")
	assert.Equal(t, int64(300), u.Get("cache_read_input_tokens").Int())
	assert.Equal(t, int64(200), u.Get("cache_creation_input_tokens").Int())
	u = gjson.Get(post2(t, srv.URL+"/v1beta/models/gem:generateContent", `{}`, usage...), "usageMetadata")
	assert.Equal(t, int64(70), u.Get("candidatesTokenCount").Int(), "120 output less the 50 thoughts")
	assert.Equal(t, int64(50), u.Get("thoughtsTokenCount").Int())
	assert.Equal(t, int64(1120), u.Get("totalTokenCount").Int())
	data, _ := sseData(t, post2(t, srv.URL+"/v1beta/models/gem:streamGenerateContent?alt=sse", `{}`, usage...))
	for i, d := range data {
		assert.Equal(t, int64(50), gjson.Get(d, "usageMetadata.thoughtsTokenCount").Int(), "every chunk, the thoughts whole: %d", i)
	}
}

// x-mock-usage: none answers as a provider that reports no usage: no usage
// object in any shape, streamed or not (OpenAI's Responses: "usage": null,
// as it writes it before it knows), so the plugin finds none.
func TestUsageNoneReportsNoUsage(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	for _, c := range shapes {
		resp, body := post(t, srv.URL+c.path, c.body, HeaderUsage, "none", HeaderEvents, "3")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s: %s", c.path, c.body, body)
		assert.Contains(t, body, "tok2", "the text is there: %s %s", c.path, c.body)
		_, ok := pluginReads(body)
		assert.False(t, ok, "%s %s: %s", c.path, c.body, body)
		if !strings.HasPrefix(c.path, "/v1/responses") {
			assert.NotContains(t, strings.ToLower(body), "usage", "%s %s", c.path, c.body)
		}
		assert.NotContains(t, body, `"usage":{`, "%s %s", c.path, c.body)
	}
}

// post2 is post's body alone.
func post2(t *testing.T, url, body string, headers ...string) string {
	t.Helper()
	_, got := post(t, url, body, headers...)
	return got
}
