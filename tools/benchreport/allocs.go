package main

import (
	"flag"
	"runtime"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
)

// Allocations per request are counted in Go mode, where the profiler sees
// every allocation with its stack, and only those the plugin's own code
// makes: its packages, the wrapper's, the SDK's and the libraries they
// call; not the host emulator's bookkeeping nor the benchmark's. The same
// source compiled to WASM allocates at the same places (the host's copies
// of headers and bodies into the module are the SDK's in Go mode), and the
// emulator gives no way into a WASM module's runtime to count there.

// allocsRequests is how many requests (or events) an allocation count
// takes, after one to warm up.
const allocsRequests = 200

// guestAllocs returns the allocations per step of c's workload that the
// plugin running in vm makes.
func guestAllocs(t tb, vm types.VMContext, c costCase) float64 {
	t.Helper()
	if err := flag.Set("test.benchtime", "1x"); err != nil {
		t.Fatalf("bench time: %v", err)
	}
	host, stop := startCanned(t, vm, c.config)
	defer stop()
	h := newCannedHost(host, c)
	var perStep float64
	result := testing.Benchmark(func(b *testing.B) {
		_, step := c.play(b, h, c)
		step()
		rate := runtime.MemProfileRate
		runtime.MemProfileRate = 1
		before := guestAllocations()
		for range allocsRequests {
			step()
		}
		after := guestAllocations()
		runtime.MemProfileRate = rate
		perStep = float64(after-before) / allocsRequests
	})
	if result.N == 0 {
		t.Fatalf("%s: the request failed while its allocations were counted; the plugin logged %q", c.name, h.complaints())
	}
	return perStep
}

// guestAllocations returns how many objects the plugin's code has
// allocated since the process started, as far as the profiler has
// recorded them (every one, with MemProfileRate 1).
func guestAllocations() int64 {
	for range 3 { // the profile shows what the last completed cycles published
		runtime.GC()
	}
	var records []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		records = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(records, true); ok {
			records = records[:n]
			break
		}
	}
	var total int64
	for _, r := range records {
		if madeByGuest(r.Stack()) {
			total += r.AllocObjects
		}
	}
	return total
}

// madeByGuest says whether an allocation's stack, innermost first, was the
// plugin's: the first frame outside the standard library decides.
func madeByGuest(stack []uintptr) bool {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		name := f.Function
		switch {
		case strings.Contains(name, "/proxywasm/proxytest."), strings.Contains(name, "/tools/benchreport."),
			strings.Contains(name, "/internal/plugintest."), strings.HasPrefix(name, "testing."):
			return false
		case !standard(name):
			return true
		}
		if !more {
			return false
		}
	}
}

// standard says whether a function is the standard library's: its import
// path has no '/', or no domain before the first one.
func standard(function string) bool {
	first, _, found := strings.Cut(function, "/")
	return !found || !strings.Contains(first, ".")
}
