package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
	"github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin"
)

// Per request: the headline requests' time one by one (the tail a user
// sees, which a median of runs hides), and the heap a request keeps while
// it streams.

// tailRow is one headline case's per-request times in WASM, in µs, sorted.
type tailRow struct {
	c                costCase
	baseline, plugin []float64
}

// tailBlock is how many requests a plugin runs before the other takes its
// turn: the machine's drift hits both alike, and each block starts a new
// plugin context, as the cost table's runs do.
const tailBlock = 50

// measureTail times each headline request one by one on fresh WASM VMs,
// the two plugins taking turns in blocks of tailBlock.
func measureTail(t tb, s reportScale) []tailRow {
	noopModule := buildWasm(t, noopplugin.WASM)
	pluginModule := buildWasm(t, wasmbuild.Plugin)
	var rows []tailRow
	var vms []proxytest.WasmVMContext
	for i, c := range costCases(s)[:2] { // the headline rows
		if i == 0 || s.vmPerCase {
			for _, vm := range vms {
				vm.Close()
			}
			vms = compileVMs(t, noopModule, pluginModule)
		}
		warmUp(t, c, vms[0], vms[1])
		row := tailRow{c: c}
		for block := range max(s.tailRequests/tailBlock, 1) {
			for k := range 2 {
				if (block+k)%2 == 0 {
					row.baseline = append(row.baseline, timeEach(t, vms[0], c, tailBlock)...)
				} else {
					row.plugin = append(row.plugin, timeEach(t, vms[1], c, tailBlock)...)
				}
			}
		}
		slices.Sort(row.baseline)
		slices.Sort(row.plugin)
		rows = append(rows, row)
	}
	for _, vm := range vms {
		vm.Close()
	}
	return rows
}

// timeEach plays n requests of a case on a new plugin context and returns
// each one's time, in µs.
func timeEach(t tb, vm types.VMContext, c costCase, n int) []float64 {
	host, stop := startCanned(t, vm, c.config)
	defer stop()
	h := newCannedHost(host, c)
	events := streamEvents()
	body := pieces(c.body, c.chunks)
	times := make([]float64, n)
	for i := range times {
		start := time.Now()
		fullRequestWithChunks(t, h, body, events)
		times[i] = float64(time.Since(start).Nanoseconds()) / 1000
	}
	if complaints := h.complaints(); len(complaints) > 0 {
		t.Fatalf("%s: the plugin complained: %q", c.name, complaints)
	}
	return times
}

// percentile of sorted values (p in [0, 100]).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(float64(len(sorted))*p/100), len(sorted)-1)]
}

// heldRow is the heap the headline request keeps while it streams, in
// bytes per request: the do-nothing plugin's and the plugin's.
type heldRow struct {
	baseline, plugin float64
}

// heldRequests are the requests held open at once to weigh what each keeps.
const heldRequests = 500

// measureHeld opens heldRequests headline requests in Go mode, each admitted
// and streaming (its first event passed), and weighs the live heap before
// and after (runtime.ReadMemStats after a collection), for each plugin, the
// least of three tries. The host emulator's own record of each request is
// in both: the difference is what the plugin keeps.
func measureHeld(t tb, vms goVMs) heldRow {
	c := costCases(reportScale{})[0]
	weigh := func(vm types.VMContext) float64 {
		least := 0.0
		for try := range 3 {
			perRequest := heldPerRequest(t, vm, c)
			if try == 0 || perRequest < least {
				least = perRequest
			}
		}
		return least
	}
	return heldRow{baseline: weigh(vms.noop), plugin: weigh(vms.plugin)}
}

// heldPerRequest is one try of measureHeld on one plugin.
func heldPerRequest(t tb, vm types.VMContext, c costCase) float64 {
	host, stop := startCanned(t, vm, c.config)
	defer stop()
	h := newCannedHost(host, c)
	events := streamEvents()
	fullRequestWithChunks(t, h, pieces(c.body, c.chunks), events) // the plugin's one-time state
	before := liveHeap()
	ids, sent := make([]uint32, heldRequests), make([]int, heldRequests)
	for i := range ids { // each up to its first event
		ids[i], sent[i] = startRequest(t, h, pieces(c.body, c.chunks))
		h.CallOnResponseBody(ids[i], events[0], false)
	}
	after := liveHeap()
	for i, id := range ids {
		finishRequest(t, h, id, events[1:], sent[i])
	}
	return float64(after-before) / heldRequests
}

// liveHeap is the bytes of live objects after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// writePerRequest writes the headline requests' per-request times and heap.
func (r benchReport) writePerRequest(b *strings.Builder) {
	b.WriteString("## Per request: the tail, and the heap a request keeps\n\n")
	fmt.Fprintf(b, "A median of runs hides the slow requests a user meets. Here each headline request is timed one by one in "+
		"WASM, %s requests per plugin on fresh VMs (after the same warm-up), the two plugins taking turns every %d requests, "+
		"each turn on a new plugin context; the percentiles are of those times, the host emulator's part included (it is "+
		"most of the do-nothing plugin's).\n\n", thousands(int64(len(r.tail[0].plugin))), tailBlock)
	b.WriteString("| case | do-nothing: p50 | p90 | p99 | plugin: p50 | p90 | p99 | ratio at p50 | at p99 |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range r.tail {
		fmt.Fprintf(b, "| %s | %s | %s | %s | **%s** | %s | **%s** | **%s** | %s |\n", row.c.name,
			micros(1000*percentile(row.baseline, 50)), micros(1000*percentile(row.baseline, 90)), micros(1000*percentile(row.baseline, 99)),
			micros(1000*percentile(row.plugin, 50)), micros(1000*percentile(row.plugin, 90)), micros(1000*percentile(row.plugin, 99)),
			ratio(percentile(row.plugin, 50)/percentile(row.baseline, 50)), ratio(percentile(row.plugin, 99)/percentile(row.baseline, 99)))
	}
	fmt.Fprintf(b, "\nWhile it streams, the headline request keeps **%s bytes** of heap more than with the do-nothing plugin "+
		"(%s requests held open at once in Go mode, each admitted and past its first event, the live heap weighed before "+
		"and after; the do-nothing plugin's request keeps %s bytes, most of it the host emulator's record of it). That "+
		"includes two buffers the plugin hands the host, which the emulator in Go mode keeps referencing where a gateway "+
		"copies them: the request body rewritten to ask for the usage (1 KiB here) and the admission call (a few hundred "+
		"bytes). In WASM pointers take 4 bytes, not 8: less. A request takes its usage parser (1.1 KiB) at its first "+
		"response chunk and gives it back once settled, so a request waiting for Redis or for its upstream keeps less "+
		"still, and the parsers of finished requests are reused rather than collected.\n\n",
		thousands(int64(r.held.plugin-r.held.baseline+0.5)), thousands(heldRequests), thousands(int64(r.held.baseline+0.5)))
}
