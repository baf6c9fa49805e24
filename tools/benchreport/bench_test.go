package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
	"github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin"
)

// wasmHost compiles a plugin to a VM of its own and starts it; stop closes
// the VM too.
func wasmHost(b *testing.B, wasm []byte, config string) (host proxytest.HostEmulator, stop func()) {
	b.Helper()
	log.SetOutput(io.Discard) // the emulator prints every callout
	vm, err := newVM(wasm)
	if err != nil {
		b.Fatal(err)
	}
	host, stopEmulator := startCanned(b, vm, config)
	return host, func() {
		stopEmulator()
		vm.Close()
		log.SetOutput(os.Stderr)
	}
}

// BenchmarkRequestGo: one full request, limiter vs. baseline, both compiled
// natively (Go mode).
func BenchmarkRequestGo(b *testing.B) {
	events := streamEvents()
	vms := registerGoVMs()
	log.SetOutput(io.Discard)
	defer log.SetOutput(os.Stderr)
	for _, p := range []struct {
		name string
		vm   types.VMContext
	}{{"noop", vms.noop}, {"limiter", vms.plugin}} {
		host, stop := startCanned(b, p.vm, benchConfig)
		fullRequest(b, host, events) // warm up
		b.Run(p.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fullRequest(b, host, events)
			}
		})
		stop()
	}
}

// BenchmarkRequestWASM: one full request, limiter vs. baseline.
func BenchmarkRequestWASM(b *testing.B) {
	events := streamEvents()
	for _, p := range []struct{ name, pkg, config string }{
		{"noop", noopplugin.WASM, benchConfig},
		{"limiter", wasmbuild.Plugin, benchConfig},
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
	host, stop := wasmHost(b, buildWasm(b, wasmbuild.Plugin), benchQueueConfig)
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
		endRequest(host, id)
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
	for _, p := range []struct{ name, pkg string }{{"noop", noopplugin.WASM}, {"limiter", wasmbuild.Plugin}} {
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
// the body too (the report also times 64 and 256 KiB agent bodies, on fresh
// VMs). estimate's own benchmark, run in WASM by make bench, shows
// how the cost per KiB depends on the shape of the body.
func BenchmarkReservationWASM(b *testing.B) {
	events := streamEvents()
	for _, p := range []struct{ name, pkg string }{{"noop", noopplugin.WASM}, {"limiter", wasmbuild.Plugin}} {
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

// BenchmarkDefaultStreamWASM: the headline request, as the official OpenAI
// SDK sends it: a 1 KiB streaming chat body that does not ask for its
// usage (stream_usage: inject rewrites it), two token windows, a 50-event
// stream with its usage at the end. The baseline reads the body too.
func BenchmarkDefaultStreamWASM(b *testing.B) {
	events := streamEvents()
	body := []byte(requestbody.Conversation(1 << 10))
	for _, p := range []struct{ name, pkg string }{{"noop", noopplugin.WASM}, {"limiter", wasmbuild.Plugin}} {
		host, stop := wasmHost(b, buildWasm(b, p.pkg), benchConfig)
		fullRequestWithBody(b, host, body, events) // warm up
		b.Run(p.name, func(b *testing.B) {
			sent := 0
			for i := 0; i < b.N; i++ {
				sent += fullRequestWithBody(b, host, body, events)
			}
			b.ReportMetric(float64(sent)/float64(b.N), "redis-bytes/req")
		})
		stop()
	}
}

// BenchmarkSDKStreamWASM: the request of the outside measurement issue 56
// cites (sdkStreamCase), limiter vs. baseline.
func BenchmarkSDKStreamWASM(b *testing.B) {
	c := sdkStream()
	for _, p := range []struct{ name, pkg string }{{"noop", noopplugin.WASM}, {"limiter", wasmbuild.Plugin}} {
		host, stop := wasmHost(b, buildWasm(b, p.pkg), c.config)
		h := newCannedHost(host, c)
		_, step := wholeRequests(b, h, c) // also the warm-up
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				step()
			}
		})
		stop()
	}
}
