package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// TestMain builds the plugin to WASM once for the WASM-mode half of every
// test.RunTest, and fails when it cannot: the framework would otherwise skip
// WASM mode quietly.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ai-token-ratelimit-wasm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	path := filepath.Join(dir, "main.wasm")
	if err := wasmbuild.Build(".", ".", path); err != nil {
		fmt.Fprintf(os.Stderr, "building the plugin for the WASM-mode tests: %v\n", err)
		os.Exit(1)
	}
	os.Setenv("WASM_FILE_PATH", path)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// plugin is one started plugin (in Go or WASM mode, as test.RunTest chose)
// whose Redis calls go to a real redis-server or Redis Cluster.
type plugin struct {
	t     *testing.T
	host  test.TestHost
	redis redistest.Backend
}

// startPlugin starts the plugin with a configuration; it stops at the end of
// the (sub)test.
func startPlugin(t *testing.T, redis redistest.Backend, config string) *plugin {
	t.Helper()
	require.True(t, json.Valid([]byte(config)), "test config is not JSON: %s", config)
	host, status := test.NewTestHost(json.RawMessage(config))
	t.Cleanup(host.Reset)
	require.Equal(t, types.OnPluginStartStatusOK, status, "plugin refused the configuration")
	return &plugin{t: t, host: host, redis: redis}
}

// exchange is one HTTP request going through the plugin.
type exchange struct {
	p      *plugin
	id     uint32
	action types.Action // what the request-headers hook returned
}

// send sends a chat completion request's headers (plus extra ones) through
// the plugin, without answering its Redis call yet.
func (p *plugin) send(extra ...[2]string) *exchange {
	p.t.Helper()
	headers := [][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
		{":path", "/v1/chat/completions"}, {"content-type", "application/json"}}
	x := &exchange{p: p, id: p.host.InitializeHttpContext()}
	x.action = p.host.CallOnRequestHeaders(x.id, append(headers, extra...), false)
	return x
}

// request sends a request and lets Redis answer.
func (p *plugin) request(extra ...[2]string) *exchange {
	p.t.Helper()
	return p.send(extra...).answer()
}

// answer forwards the exchange's pending Redis calls to the real Redis.
func (x *exchange) answer() *exchange {
	x.p.redis.Answer(x.p.host, x.id)
	return x
}

// local is the response the plugin answered in the gateway's place, or nil.
func (x *exchange) local() *proxytest.LocalHttpResponse {
	return x.p.host.GetSentLocalResponse(x.id)
}

// passed reports whether the request went on to the upstream.
func (x *exchange) passed() bool {
	return x.local() == nil && x.p.host.GetCurrentHttpStreamAction(x.id) == types.ActionContinue
}

// requireRejected asserts a local reply with the status and returns it.
func (x *exchange) requireRejected(status uint32) *proxytest.LocalHttpResponse {
	x.p.t.Helper()
	local := x.local()
	require.NotNil(x.p.t, local, "the request was not answered locally")
	require.Equal(x.p.t, status, local.StatusCode, "body: %s", local.Data)
	return local
}

// respond plays the upstream's response: headers, then the body in the given
// chunks, then the end of the stream; Redis answers whatever the plugin asks.
func (x *exchange) respond(contentType string, chunks ...string) *exchange {
	x.p.t.Helper()
	x.responseHeaders(contentType)
	for i, c := range chunks {
		got := x.p.host.CallOnResponseBody(x.id, []byte(c), i == len(chunks)-1)
		require.Equal(x.p.t, types.ActionContinue, got, "a response chunk was held back")
		require.Equal(x.p.t, c, string(x.p.host.GetCurrentResponseBody(x.id)), "a response chunk was changed")
	}
	return x.done()
}

func (x *exchange) responseHeaders(contentType string) [][2]string {
	x.p.t.Helper()
	action := x.p.host.CallOnResponseHeaders(x.id, [][2]string{{":status", "200"}, {"content-type", contentType}}, false)
	require.Equal(x.p.t, types.ActionContinue, action)
	return x.p.host.GetCurrentResponseHeaders(x.id)
}

// done ends the stream (as after the last byte, or a reset) and lets Redis
// answer the calls made at the end.
func (x *exchange) done() *exchange {
	x.answer()
	x.p.host.CompleteHttpContext(x.id)
	x.answer()
	return x
}

// header returns a header's value from a header list ("" when absent).
func header(headers [][2]string, name string) string {
	v, _ := test.GetHeaderValue(headers, name)
	return v
}

// openAIStream is an OpenAI chat completion stream with include_usage: n
// content events carrying "usage":null, then the usage event and [DONE].
func openAIStream(n int, prompt, completion int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"word %d "},"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", prompt, completion, prompt+completion)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// sseEvents splits a stream into one chunk per event, as upstreams flush them.
func sseEvents(stream string) []string {
	parts := strings.SplitAfter(stream, "\n\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// counter reads the day counter of a subject (0 when absent).
func (p *plugin) dayCounter(subject string) int64 {
	p.t.Helper()
	return p.redis.Int("GET", fmt.Sprintf("%s:t86400:%d", subject, p.redis.Now()/86400))
}

// sendBody sends a request with a JSON body through the plugin, without
// answering its Redis calls yet.
func (p *plugin) sendBody(body string, extra ...[2]string) *exchange {
	p.t.Helper()
	x := p.send(extra...)
	x.action = p.host.CallOnRequestBody(x.id, []byte(body), true)
	return x
}

// chatBody is a chat completion request body naming an output cap.
func chatBody(maxTokens int) string {
	return fmt.Sprintf(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"messages":[{"role":"user","content":"Hi"}]}`, maxTokens)
}

// minuteCounter reads the current minute counter of a subject.
func (p *plugin) minuteCounter(subject string) int64 {
	p.t.Helper()
	return p.redis.Int("GET", fmt.Sprintf("%s:t60:%d", subject, p.redis.Now()/60))
}
