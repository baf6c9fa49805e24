package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// The requests the report and the benchmarks time: the plugin in the host
// emulator, next to tools/noopplugin (the same hooks through the same
// wrapper, doing nothing); what the limiter costs is the difference. Redis is
// answered with canned replies of the right shape, so the numbers are the
// plugin's own CPU time, not a network round trip.

const benchConfig = `{"rule_name": "chat", "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000}]}],
	"redis": {"service_name": "redis.static"}}`

var (
	benchRequestHeaders = [][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
		{":path", "/v1/chat/completions"}, {"content-type", "application/json"}, {"x-api-key", "sk-bench-0001"},
		{"user-agent", "bench/1.0"}, {"x-request-id", "9a1b2c3d"}}
	benchResponseHeaders = [][2]string{{":status", "200"}, {"content-type", "text/event-stream"}}
	benchVerdict         = []byte("*9\r\n:1\r\n:100000000\r\n:99990000\r\n:42\r\n:1763726400\r\n:0\r\n:0\r\n:1\r\n:1\r\n")
	benchCharged         = []byte("*2\r\n:1801\r\n:1801\r\n")
	benchContentEvent    = []byte(plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 1))[0])
)

// buildWasm compiles a plugin's main package (wasmbuild.Plugin, or
// noopplugin.WASM) to WASM, with build tags, for newVM to run.
func buildWasm(tb redistest.TB, pkg string, tags ...string) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "plugin.wasm")
	if err := wasmbuild.Build(pkg, out, tags...); err != nil {
		tb.Fatalf("%v", err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return wasm
}

// newVM runs a module as a gateway would (wasmhost): each HTTP context
// deleted in the module at its end, the machine's clocks and randomness.
func newVM(module []byte) (proxytest.WasmVMContext, error) {
	return wasmhost.NewVM(module, wasmhost.Options{})
}

// endRequest ends a request's stream, and drops what the emulator keeps of
// it as a gateway drops a stream's state (wasmhost.Forget): its headers,
// bodies and log lines, and the access log the plugin set (a property that
// is the stream's own in Envoy: the emulator's next stream would read it).
func endRequest(host proxytest.HostEmulator, id uint32) {
	host.CompleteHttpContext(id)
	if c, ok := host.(*cannedHost); ok {
		host = c.HostEmulator // the emulator itself, which Forget knows
	}
	wasmhost.Forget(host, id, wrapper.AILogKey)
}

// benchAllLimitsConfig adds a request window and a concurrency limit, in
// sliding windows: the same two calls, a lease taken and released (its
// charge reply has three totals; the report measures it).
const benchAllLimitsConfig = `{"rule_name": "chat", "window_type": "sliding", "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000,
	"query_per_minute": 100000, "max_concurrent_requests": 1000}]}],
	"redis": {"service_name": "redis.static"}}`

// benchQueueConfig queues over-limit requests instead of rejecting them.
const benchQueueConfig = `{"rule_name": "chat", "over_limit_action": "queue", "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000}]}],
	"redis": {"service_name": "redis.static"}}`

// benchRejection is a verdict of a used-up window with room 50 ms on.
var benchRejection = []byte("*9\r\n:0\r\n:100000000\r\n:0\r\n:1\r\n:1763726400\r\n:0\r\n:50\r\n:1\r\n:1\r\n")

const benchReservationConfig = `{"rule_name": "chat", "token_reservation": {"enabled": true},
	"rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000}]}],
	"redis": {"service_name": "redis.static"}}`

// fullRequest plays one request: headers, Redis's verdict, response headers,
// a 50-event stream with usage at the end, the charge reply, the end.
// It returns the bytes the plugin sent to Redis.
func fullRequest(b *testing.B, host proxytest.HostEmulator, events [][]byte) int {
	return fullRequestWithBody(b, host, nil, events)
}

// fullRequestWithBody is fullRequest with a request body (nil: none), in
// one piece.
func fullRequestWithBody(b *testing.B, host proxytest.HostEmulator, body []byte, events [][]byte) int {
	if body == nil {
		return fullRequestWithChunks(b, host, nil, events)
	}
	return fullRequestWithChunks(b, host, [][]byte{body}, events)
}

// fullRequestWithChunks is fullRequest with a request body in pieces (none:
// no body). The limiter must make exactly its two calls (admit, charge): a
// benchmark of a request that failed over to failure_mode would measure the
// wrong path.
func fullRequestWithChunks(b redistest.TB, host proxytest.HostEmulator, body [][]byte, events [][]byte) int {
	id, sent := startRequest(b, host, body)
	return sent + finishRequest(b, host, id, events, sent)
}

// startRequest plays a request up to its response headers: its headers, its
// body in pieces, Redis's verdict, which must let it go on. It returns the
// request's id and the bytes its admission sent to Redis.
func startRequest(b redistest.TB, host proxytest.HostEmulator, body [][]byte) (id uint32, sent int) {
	id = host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, benchRequestHeaders, len(body) == 0)
	for i, chunk := range body {
		host.CallOnRequestBody(id, chunk, i == len(body)-1)
	}
	sent = answerCanned(host, id, benchVerdict)
	admitCalls := len(host.GetRedisCalloutAttributesFromContext(id))
	if host.GetCurrentHttpStreamAction(id) != types.ActionContinue || admitCalls != 0 {
		b.Fatalf("request not resumed")
	}
	host.CallOnResponseHeaders(id, benchResponseHeaders, false)
	return id, sent
}

// finishRequest plays the rest of a started request: its events (the last
// ends the stream), the charge's reply, the end. admitted is what its
// admission sent to Redis: a request admitted by a call is charged by one.
// It returns the bytes the charge sent.
func finishRequest(b redistest.TB, host proxytest.HostEmulator, id uint32, events [][]byte, admitted int) int {
	for i, e := range events {
		host.CallOnResponseBody(id, e, i == len(events)-1)
	}
	charged := answerCanned(host, id, benchCharged)
	if (admitted == 0) != (charged == 0) {
		b.Fatalf("admitted without a charge (%d, %d bytes): the reply was not taken as a verdict", admitted, charged)
	}
	endRequest(host, id)
	return charged
}

// pieces cuts a body into n pieces of about the same size (n ≤ 1: whole).
func pieces(body []byte, n int) [][]byte {
	if body == nil {
		return nil
	}
	n = max(1, min(n, len(body)))
	var out [][]byte
	for i := range n {
		out = append(out, body[i*len(body)/n:(i+1)*len(body)/n])
	}
	return out
}

// startCanned starts a plugin in the emulator for canned replies, its VM
// numbered, as a running gateway's is before the requests timed: its first
// tick asks Redis for the VM's number, answered here (a VM without one
// makes its first admissions wait for it: limiter/ids.go).
func startCanned(t redistest.TB, vm types.VMContext, config string) (proxytest.HostEmulator, func()) {
	host, stop := plugintest.StartEmulator(t, vm, config)
	host.Tick()
	for _, call := range slices.Clone(host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)) {
		if bytes.Contains(call.Query, []byte(scripts.VMCounterKey)) {
			host.CallOnRedisCallResponse(call.CalloutID, 0, []byte(":1\r\n"))
		}
	}
	return host, stop
}

func answerCanned(host proxytest.HostEmulator, id uint32, reply []byte) int {
	sent := 0
	// A copy: answering a call removes it from the emulator's list in place.
	for _, call := range slices.Clone(host.GetRedisCalloutAttributesFromContext(id)) {
		sent += len(call.Query)
		host.CallOnRedisCallResponse(call.CalloutID, 0, reply)
	}
	return sent
}

// sdkStreamBody is the OpenAI SDK's streamed chat of the outside
// measurement: a one-line prompt that does not ask for its usage.
const sdkStreamBody = `{"model":"gpt-4o","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

// sdkStreamEvents is its answer: 50 chunks of one short delta each, the
// usage (10 prompt tokens, 90 completion tokens), [DONE], each its own
// body chunk.
func sdkStreamEvents() [][]byte {
	const head = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[`
	var events [][]byte
	for i := range 50 {
		events = append(events, fmt.Appendf(nil, head+`{"index":0,"delta":{"content":"token %d "},"finish_reason":null}]}`+"\n\n", i))
	}
	return append(events, []byte(head+`],"usage":{"prompt_tokens":10,"completion_tokens":90,"total_tokens":100}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
}

func streamEvents() [][]byte {
	var events [][]byte
	for _, e := range plugintest.SSEEvents(plugintest.OpenAIStream(50, 1234, 567)) {
		events = append(events, []byte(e))
	}
	return events
}
