package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// The benchmarks run the plugin compiled to WASM, in the host emulator, next
// to internal/noopplugin: the same hooks through the same wrapper doing
// nothing. What the limiter costs is the difference. Redis is answered with
// canned replies of the right shape, so the numbers are the plugin's own CPU
// time, not a network round trip.

const benchConfig = `{"rule_name": "chat", "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000}]}],
	"redis": {"service_name": "redis.static"}}`

var (
	benchRequestHeaders = [][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
		{":path", "/v1/chat/completions"}, {"content-type", "application/json"}, {"x-api-key", "sk-bench-0001"},
		{"user-agent", "bench/1.0"}, {"x-request-id", "9a1b2c3d"}}
	benchResponseHeaders = [][2]string{{":status", "200"}, {"content-type", "text/event-stream"}}
	benchVerdict         = []byte("*7\r\n:1\r\n:100000000\r\n:99990000\r\n:42\r\n:1763726400\r\n:0\r\n:0\r\n")
	benchCharged         = []byte("*2\r\n:1801\r\n:1801\r\n")
	benchContentEvent    = []byte(sseEvents(openAIStream(1, 1, 1))[0])
)

// buildWasm compiles a plugin package to WASM once per benchmark run.
func buildWasm(tb testing.TB, pkg string) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "plugin.wasm")
	if err := wasmbuild.Build(".", pkg, out); err != nil {
		tb.Fatal(err)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return wasm
}

// benchAllLimitsConfig adds a request window and a concurrency limit, in
// sliding windows: the same two calls, a lease taken and released (its
// charge reply has three totals; TestBenchmarkReport measures it).
const benchAllLimitsConfig = `{"rule_name": "chat", "window_type": "sliding", "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000,
	"query_per_minute": 100000, "max_concurrent_requests": 1000}]}],
	"redis": {"service_name": "redis.static"}}`

// benchQueueConfig queues over-limit requests instead of rejecting them.
const benchQueueConfig = `{"rule_name": "chat", "over_limit_action": "queue", "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000}]}],
	"redis": {"service_name": "redis.static"}}`

// benchRejection is a verdict of a used-up window with room 50 ms on.
var benchRejection = []byte("*7\r\n:0\r\n:100000000\r\n:0\r\n:1\r\n:1763726400\r\n:0\r\n:50\r\n")

const benchReservationConfig = `{"rule_name": "chat", "token_reservation": {"enabled": true},
	"rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000000, "token_per_day": 1000000000}]}],
	"redis": {"service_name": "redis.static"}}`

// goPluginVM is the plugin compiled natively: the VM context its init()
// registered. Every emulator installs its VM as the process's VM context, so
// it is kept from before any starts, and put back after each (pkg/test's Go
// mode takes it from there).
var goPluginVM types.VMContext

// This runs after main.go's init(): the go command hands a package's files to
// the compiler, whose init order they set, in name order, test files last.
func init() { goPluginVM = proxywasm.GetVMContext() }

// infoLevel answers get_log_level as a gateway logging at info does.
func infoLevel([]byte) []byte { return binary.LittleEndian.AppendUint32(nil, 2) }

// startEmulator starts a plugin on a VM with a configuration, logging at info
// level as a gateway does in production. stop must be called before the
// next emulator starts (the emulator is process-wide); it leaves the VM
// open, so that one VM can serve many emulators in turn (each a plugin
// reload) without compiling a module, seconds each, every time.
func startEmulator(tb testing.TB, vm types.VMContext, config string) (host proxytest.HostEmulator, stop func()) {
	tb.Helper()
	host, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().
		WithPluginConfiguration([]byte(config)).WithVMContext(vm))
	stop = func() {
		reset()
		proxywasm.SetVMContext(goPluginVM)
	}
	host.RegisterForeignFunction("get_log_level", infoLevel)
	if status := host.StartPlugin(); status != types.OnPluginStartStatusOK {
		logs := host.GetErrorLogs()
		stop()
		tb.Fatalf("plugin start: %v %q; configuration: %s", status, logs, config)
	}
	return host, stop
}

// wasmHost compiles a plugin to a VM of its own and starts it; stop closes
// the VM too.
func wasmHost(b *testing.B, wasm []byte, config string) (host proxytest.HostEmulator, stop func()) {
	b.Helper()
	log.SetOutput(io.Discard) // the emulator prints every callout
	vm, err := proxytest.NewWasmVMContext(wasm)
	if err != nil {
		b.Fatal(err)
	}
	host, stopEmulator := startEmulator(b, vm, config)
	return host, func() {
		stopEmulator()
		vm.Close()
		log.SetOutput(os.Stderr)
	}
}

// fullRequest plays one request: headers, Redis's verdict, response headers,
// a 50-event stream with usage at the end, the charge reply, the end.
// It returns the bytes the plugin sent to Redis.
func fullRequest(b *testing.B, host proxytest.HostEmulator, events [][]byte) int {
	return fullRequestWithBody(b, host, nil, events)
}

// fullRequestWithBody is fullRequest with a request body (nil: none). The
// limiter must make exactly its two calls (admit, charge): a benchmark of a
// request that failed over to failure_mode would measure the wrong path.
func fullRequestWithBody(b *testing.B, host proxytest.HostEmulator, body []byte, events [][]byte) int {
	id := host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, benchRequestHeaders, body == nil)
	if body != nil {
		host.CallOnRequestBody(id, body, true)
	}
	sent := answerCanned(host, id, benchVerdict)
	admitCalls := len(host.GetRedisCalloutAttributesFromContext(id))
	if host.GetCurrentHttpStreamAction(id) != types.ActionContinue || admitCalls != 0 {
		b.Fatal("request not resumed")
	}
	host.CallOnResponseHeaders(id, benchResponseHeaders, false)
	for i, e := range events {
		host.CallOnResponseBody(id, e, i == len(events)-1)
	}
	charged := answerCanned(host, id, benchCharged)
	if (sent == 0) != (charged == 0) {
		b.Fatalf("admitted without a charge (%d, %d bytes): the reply was not taken as a verdict", sent, charged)
	}
	host.CompleteHttpContext(id)
	return sent + charged
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

func streamEvents() [][]byte {
	var events [][]byte
	for _, e := range sseEvents(openAIStream(50, 1234, 567)) {
		events = append(events, []byte(e))
	}
	return events
}

// BenchmarkRequestWASM: one full request, limiter vs. baseline.
func BenchmarkRequestWASM(b *testing.B) {
	events := streamEvents()
	for _, p := range []struct{ name, pkg, config string }{
		{"noop", "./internal/noopplugin", benchConfig},
		{"limiter", ".", benchConfig},
	} {
		host, stop := wasmHost(b, buildWasm(b, p.pkg), p.config)
		fullRequest(b, host, events) // warm up
		b.Run(p.name, func(b *testing.B) {
			sent := 0
			for i := 0; i < b.N; i++ {
				sent += fullRequest(b, host, events)
			}
			b.ReportMetric(float64(sent)/float64(b.N), "redis-bytes/req")
		})
		stop()
	}
}

// BenchmarkQueueWASM: one full request with over_limit_action: queue,
// admitted at once, or after waiting once: rejected, retried on the next
// tick (from the plugin's context) and admitted.
func BenchmarkQueueWASM(b *testing.B) {
	events := streamEvents()
	host, stop := wasmHost(b, buildWasm(b, "."), benchQueueConfig)
	defer stop()
	queuedOnce := func(b *testing.B) int {
		id := host.InitializeHttpContext()
		host.CallOnRequestHeaders(id, benchRequestHeaders, true)
		sent := answerCanned(host, id, benchRejection)
		host.Tick()
		sent += answerCanned(host, proxytest.PluginContextID, benchVerdict)
		if host.GetCurrentHttpStreamAction(id) != types.ActionContinue || host.GetSentLocalResponse(id) != nil {
			b.Fatal("queued request not resumed")
		}
		host.CallOnResponseHeaders(id, benchResponseHeaders, false)
		for i, e := range events {
			host.CallOnResponseBody(id, e, i == len(events)-1)
		}
		sent += answerCanned(host, id, benchCharged)
		host.CompleteHttpContext(id)
		return sent
	}
	for _, c := range []struct {
		name string
		run  func(*testing.B) int
	}{
		{"admitted", func(b *testing.B) int { return fullRequest(b, host, events) }},
		{"queued-once", queuedOnce},
	} {
		c.run(b) // warm up
		b.Run(c.name, func(b *testing.B) {
			sent := 0
			for i := 0; i < b.N; i++ {
				sent += c.run(b)
			}
			b.ReportMetric(float64(sent)/float64(b.N), "redis-bytes/req")
		})
	}
}

// BenchmarkContentEventWASM: one SSE content event of an admitted stream.
func BenchmarkContentEventWASM(b *testing.B) {
	for _, p := range []struct{ name, pkg string }{{"noop", "./internal/noopplugin"}, {"limiter", "."}} {
		host, stop := wasmHost(b, buildWasm(b, p.pkg), benchConfig)
		id := host.InitializeHttpContext()
		host.CallOnRequestHeaders(id, benchRequestHeaders, false)
		answerCanned(host, id, benchVerdict)
		host.CallOnResponseHeaders(id, benchResponseHeaders, false)
		b.Run(p.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				host.CallOnResponseBody(id, benchContentEvent, false)
			}
		})
		stop()
	}
}

// BenchmarkReservationWASM: one full request with token_reservation on, so
// the body is read and estimated before admission, for bodies of 1, 16 and
// 64 KiB of a long conversation (internal/requestbody); the baseline reads
// the body too. estimate's own benchmark, run in WASM by make bench, shows
// how the cost per KiB depends on the shape of the body.
func BenchmarkReservationWASM(b *testing.B) {
	events := streamEvents()
	for _, p := range []struct{ name, pkg string }{{"noop", "./internal/noopplugin"}, {"limiter", "."}} {
		host, stop := wasmHost(b, buildWasm(b, p.pkg), benchReservationConfig)
		for _, kib := range []int{1, 16, 64} {
			body := []byte(requestbody.Conversation(kib << 10))
			fullRequestWithBody(b, host, body, events) // warm up
			b.Run(fmt.Sprintf("%s/%dKiB", p.name, kib), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					fullRequestWithBody(b, host, body, events)
				}
			})
		}
		stop()
	}
}
