// Command benchreport measures what BENCHMARKS.md reports and renders it
// (make bench): the cost of a request through the plugin in WASM mode and Go
// mode, each against the do-nothing plugin (tools/noopplugin) in the same
// run, with Redis answered by canned replies; and how far concurrent
// requests overshoot a limit, against a real redis-server whose clock the
// program moves.
//
//	go run ./benchreport -out ..          # BENCHMARKS.md and docs/bench/*.png under ..
//	go run ./benchreport -scale smoke     # every measurement a few times; checks the report renders
//
// The benchmarks of bench_test.go (go test -bench . ./benchreport/) drive
// the same requests one case at a time.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
	"github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin"
)

const (
	reportFile = "BENCHMARKS.md"
	plotDir    = "docs/bench"
)

// reportScale is how much a report measures.
type reportScale struct {
	benchTime      string // one timed run, as go test's -benchtime: "1s", or "3x" iterations
	largeBenchTime string // the same for cases with large bodies, each run on fresh VMs (see measureWASM)
	rounds         int    // timed runs of each plugin per case and mode, baseline and plugin alternating
	headlineRounds int    // the same for the two headline rows in WASM mode, whose ratios have targets
	vmPerCase      bool   // compile fresh WASM VMs for each case (see measureWASM)
	ruleCounts     []int  // rule items of the rule-count cases
	inFlight       []int  // requests in flight of the accuracy runs
	minutes        int    // simulated length of an accuracy run
	plotInFlight   []int  // the accuracy runs drawn
	// overrideRequests are the requests of one timed run of the price of
	// limit overrides (see measureOverrides).
	overrideRequests int
	// tailRequests are the requests per plugin timed one by one for the
	// headline's percentiles (see measureTail).
	tailRequests int
	// estimateBenchTime and estimateRuns: the estimate's benchmark in WASM
	// (see measureEstimate), as go test's -benchtime, and how many times.
	estimateBenchTime string
	estimateRuns      int
}

var scales = map[string]reportScale{
	"full": {benchTime: "0.5s", largeBenchTime: "60x", rounds: 7, headlineRounds: 15, vmPerCase: true, ruleCounts: []int{1, 10, 100},
		inFlight: []int{1, 8, 32, 128}, minutes: 5, plotInFlight: []int{32, 128}, overrideRequests: 3000,
		estimateBenchTime: "300x", estimateRuns: 5, tailRequests: 3000},
	"smoke": {benchTime: "2x", largeBenchTime: "2x", rounds: 2, headlineRounds: 2, ruleCounts: []int{1, 10, 100},
		inFlight: []int{1, 8}, minutes: 2, plotInFlight: []int{8}, overrideRequests: 10,
		estimateBenchTime: "2x", estimateRuns: 1, tailRequests: 50},
}

// goVMs are the two plugins compiled natively: the VM contexts their
// Register functions install, taken one after the other.
type goVMs struct{ noop, plugin types.VMContext }

func registerGoVMs() goVMs {
	noopplugin.Register()
	noop := proxywasm.GetVMContext()
	limiter.Register()
	return goVMs{noop: noop, plugin: proxywasm.GetVMContext()}
}

func main() {
	testing.Init() // registers -test.benchtime, which timeRun sets for testing.Benchmark
	out := flag.String("out", "", "write "+reportFile+" and "+plotDir+"/*.png under this `directory` (the repository's root); without it, only check that the report renders")
	scaleName := flag.String("scale", "full", "how much to measure: full, or smoke (a few runs of everything)")
	flag.Parse()
	scale, ok := scales[*scaleName]
	if !ok || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	log.SetOutput(io.Discard) // the emulator prints every callout and log line

	t := &reporter{}
	defer t.cleanup()
	r, markdown := measure(t, scale)
	if t.failed {
		t.FailNow()
	}
	if *out == "" {
		t.Logf("the report renders (%d bytes, %d plots); -out writes it", len(markdown), len(r.plots))
		return
	}
	writeReport(t, *out, markdown, r.plots)
	t.Logf("wrote %s and %d plots in %s", filepath.Join(*out, reportFile), len(r.plots), r.elapsed.Round(time.Second))
}

// measure takes every measurement of a report at a scale, renders it, and
// checks that it says what it must.
func measure(t tb, scale reportScale) (benchReport, string) {
	started := time.Now()
	r := benchReport{machine: describeMachine(), date: started.UTC().Format("2006-01-02"), scale: scale}
	vms := registerGoVMs()
	r.costs = measureCosts(t, scale, vms)
	t.Logf("costs measured in %s", time.Since(started).Round(time.Second))
	r.tail = measureTail(t, scale)
	r.held = measureHeld(t, vms)
	t.Logf("per-request times and heap measured in %s", time.Since(started).Round(time.Second))
	r.accuracy = measureAccuracy(t, scale, vms.plugin)
	t.Logf("accuracy measured in %s", time.Since(started).Round(time.Second))
	r.overrides = measureOverrides(t, scale, vms.plugin)
	t.Logf("the price of overrides measured in %s", time.Since(started).Round(time.Second))
	r.redisWork = measureRedisWork(t, scale, vms.plugin)
	t.Logf("Redis's work measured in %s", time.Since(started).Round(time.Second))
	r.estimate = measureEstimate(t, scale, scale.estimateRuns)
	t.Logf("the estimate measured in %s", time.Since(started).Round(time.Second))
	r.plots = plotAccuracy(t, r.accuracy, scale.plotInFlight)
	r.elapsed = time.Since(started)
	markdown := r.markdown()
	checkReport(t, r, markdown)
	return r, markdown
}

// tb is what the measurements need of their caller: the program's reporter,
// or a test's *testing.T.
type tb interface {
	redistest.TB
	Logf(format string, args ...any)
}

// reporter stands where a *testing.T stands in a test: the fixtures the
// report shares with the tests (internal/redistest, internal/plugintest)
// report through it. Errorf notes a failure and goes on; Fatalf and
// FailNow clean up and end the program.
type reporter struct {
	cleanups []func()
	failed   bool
}

func (*reporter) Helper() {}

func (*reporter) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *reporter) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL: "+format+"\n", args...)
	r.failed = true
}

func (r *reporter) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.FailNow()
}

func (r *reporter) FailNow() {
	r.cleanup()
	os.Exit(1)
}

func (r *reporter) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// cleanup runs the cleanups, the last registered first, as a test does.
func (r *reporter) cleanup() {
	for len(r.cleanups) > 0 {
		f := r.cleanups[len(r.cleanups)-1]
		r.cleanups = r.cleanups[:len(r.cleanups)-1]
		f()
	}
}

func (r *reporter) TempDir() string {
	dir, err := os.MkdirTemp("", "benchreport")
	if err != nil {
		r.Fatalf("%v", err)
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
