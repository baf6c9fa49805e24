package main

import (
	"bytes"
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// TestBenchmarkReport measures what BENCHMARKS.md reports and renders it:
// the cost of a request in WASM and Go mode (canned Redis replies), and how
// far concurrent requests overshoot a limit (a real redis-server whose clock
// the test moves). With BENCH_REPORT set to a directory it runs at full scale
// and writes BENCHMARKS.md and docs/bench/*.png there (make bench); without,
// it runs every measurement a few times and only checks that the report
// renders, so the generator keeps working inside make test.
func TestBenchmarkReport(t *testing.T) {
	dir := os.Getenv(benchReportEnv)
	scale := smokeScale
	if dir != "" {
		scale = fullScale
	}
	setBenchTime(t, scale.benchTime)
	log.SetOutput(io.Discard) // the emulator prints every callout and log line
	t.Cleanup(func() { log.SetOutput(os.Stderr) })

	started := time.Now()
	r := benchReport{machine: describeMachine(), date: started.UTC().Format("2006-01-02"), scale: scale}
	r.costs = measureCosts(t, scale)
	t.Logf("costs measured in %s", time.Since(started).Round(time.Second))
	r.accuracy = measureAccuracy(t, scale)
	t.Logf("accuracy measured in %s", time.Since(started).Round(time.Second))
	r.plots = plotAccuracy(t, r.accuracy, scale.plotInFlight)
	r.elapsed = time.Since(started)
	markdown := r.markdown()

	checkReport(t, r, markdown)
	if dir == "" {
		return
	}
	writeReport(t, dir, markdown, r.plots)
	t.Logf("wrote %s and %d plots in %s", filepath.Join(dir, reportFile), len(r.plots), r.elapsed.Round(time.Second))
}

const (
	benchReportEnv = "BENCH_REPORT"
	reportFile     = "BENCHMARKS.md"
	plotDir        = "docs/bench"
)

// reportScale is how much a report measures.
type reportScale struct {
	benchTime    string // one timed run, as go test's -benchtime: "1s", or "3x" iterations
	rounds       int    // timed runs of each plugin per case and mode, baseline and plugin alternating
	vmPerCase    bool   // compile fresh WASM VMs for each case (see measureWASM)
	ruleCounts   []int  // rule items of the rule-count cases
	inFlight     []int  // requests in flight of the accuracy runs
	minutes      int    // simulated length of an accuracy run
	plotInFlight []int  // the accuracy runs drawn
}

var (
	fullScale = reportScale{benchTime: "0.5s", rounds: 7, vmPerCase: true, ruleCounts: []int{1, 10, 100},
		inFlight: []int{1, 8, 32, 128}, minutes: 5, plotInFlight: []int{32, 128}}
	smokeScale = reportScale{benchTime: "2x", rounds: 2, ruleCounts: []int{1, 10, 100},
		inFlight: []int{1, 8}, minutes: 2, plotInFlight: []int{8}}
)

// setBenchTime sets how long testing.Benchmark runs, as -benchtime would,
// for the rest of the test: a report must not depend on go test's flags.
func setBenchTime(t *testing.T, value string) {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		t.Fatal("no -test.benchtime flag: not running under go test")
	}
	previous := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(previous) })
}

// ---------------------------------------------------------------------------
// Cost: one request through the plugin, Redis answered with canned replies.

// costCase is one request shape and configuration whose cost is measured.
type costCase struct {
	group   string      // the table it goes in
	name    string      // its row
	config  string      // the plugin configuration
	body    []byte      // the request body (nil: none)
	headers [][2]string // request headers besides benchRequestHeaders
	windows int         // windows a charge call settles: the length of charge.lua's reply
	calls   int         // Redis calls a request makes (0: none is checked, as for one event)
	play    workload
}

const (
	groupKinds  = "kinds"
	groupRules  = "rules"
	groupStream = "stream"
)

// tokenWindows are the two token windows of benchConfig, high enough that
// nothing is ever rejected.
const tokenWindows = `"token_per_minute": 100000000, "token_per_day": 1000000000`

// keyConfig limits every "sk-" x-api-key like benchConfig, with other limits
// and top-level fields.
func keyConfig(topLevel, limits string) string {
	return `{"rule_name": "chat", ` + topLevel + ` "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", ` + limits + `}]}], "redis": {"service_name": "redis.static"}}`
}

// costCases lists what the report times: each kind of limit, rule counts,
// and one event of a stream. Cases that bench_test.go also runs use its
// configurations, so the numbers compare.
func costCases(ruleCounts []int) []costCase {
	kinds := []costCase{
		{name: "two token windows (minute, day)", config: benchConfig, windows: 2},
		{name: "the same + a request window (query_per_minute)", config: keyConfig("", tokenWindows+`, "query_per_minute": 100000`), windows: 3},
		{name: "the same + a concurrency limit (max_concurrent_requests)", config: keyConfig("", tokenWindows+`, "max_concurrent_requests": 1000`), windows: 2},
		{name: "two sliding token windows (window_type: sliding)", config: keyConfig(`"window_type": "sliding",`, tokenWindows), windows: 2},
		{name: "token_reservation, 1 KiB body", config: benchReservationConfig, body: []byte(requestbody.Conversation(1 << 10)), windows: 2},
		{name: "token_reservation, 16 KiB body", config: benchReservationConfig, body: []byte(requestbody.Conversation(16 << 10)), windows: 2},
		{name: "everything at once (2 sliding token windows, a request window, a concurrency limit)", config: benchAllLimitsConfig, windows: 3},
		{name: "over_limit_action: queue, admitted at once", config: benchQueueConfig, windows: 2},
	}
	var cases []costCase
	for _, c := range kinds {
		c.group, c.calls, c.play = groupKinds, 2, wholeRequests
		cases = append(cases, c)
	}
	for _, n := range ruleCounts {
		cases = append(cases, firstMatchCase(n))
	}
	for _, n := range ruleCounts {
		cases = append(cases, allMatchCase(n))
	}
	return append(cases, costCase{group: groupStream, name: "one SSE content event of an admitted stream",
		config: benchConfig, windows: 2, play: contentEvents})
}

// firstMatchCase has n rule items on x-api-key, the first n-1 naming other
// tenants' exact keys and the last every "sk-" key: the request is matched
// against all n before one decides (rule_match_mode first).
func firstMatchCase(n int) costCase {
	items := make([]string, n)
	for i := range n - 1 {
		items[i] = fmt.Sprintf(`{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-tenant-%04d", %s}]}`, i, tokenWindows)
	}
	items[n-1] = `{"limit_by_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-", ` + tokenWindows + `}]}`
	return costCase{group: groupRules, name: fmt.Sprintf("%s, the last matches (first)", ruleItems(n)),
		config: rulesConfig("", items), windows: 2, calls: 2, play: wholeRequests}
}

// allMatchCase has n rule items, each on a header of its own that the
// request carries, all applying (rule_match_mode all): n subjects. The
// plugin sends one call per Redis Cluster slot, so the headers are chosen
// with subjects in n different slots, as n subjects spread over a cluster
// are: n calls at admission and n at the end (a canned reply also has to
// fit the subjects of its call).
func allMatchCase(n int) costCase {
	const value = "tier-1"
	var items []string
	var headers [][2]string
	slots := map[uint16]bool{}
	for i := 0; len(headers) < n; i++ {
		name := fmt.Sprintf("x-layer-%d", i)
		slot := cachekey.Slot(cachekey.AppendSubject(nil, "chat", "limit_by_header", name, value))
		if slots[slot] {
			continue
		}
		slots[slot] = true
		headers = append(headers, [2]string{name, value})
		items = append(items, fmt.Sprintf(`{"limit_by_header": %q, "limit_keys": [{"key": "*", %s}]}`, name, tokenWindows))
	}
	return costCase{group: groupRules, name: fmt.Sprintf("%s, all match (all)", ruleItems(n)),
		config: rulesConfig(`"rule_match_mode": "all",`, items), headers: headers, windows: 2, calls: 2 * n, play: wholeRequests}
}

func ruleItems(n int) string {
	if n == 1 {
		return "1 rule item"
	}
	return fmt.Sprintf("%d rule items", n)
}

func rulesConfig(topLevel string, items []string) string {
	return `{"rule_name": "chat", ` + topLevel + ` "rule_items": [` + strings.Join(items, ",\n") +
		`], "redis": {"service_name": "redis.static"}}`
}

// workload plays a case on a host: it prepares before the clock starts (and
// reports what one request sends to Redis), and returns the operation timed.
type workload func(b *testing.B, h *cannedHost, c costCase) (probe redisTraffic, step func())

// redisTraffic is what one request sends to Redis.
type redisTraffic struct {
	calls int // round trips
	bytes int // query bytes
}

// wholeRequests times bench_test.go's full request: headers (and body),
// admission, a 50-event stream, the charge, the end.
func wholeRequests(b *testing.B, h *cannedHost, c costCase) (redisTraffic, func()) {
	events := streamEvents()
	before := h.calls
	sent := fullRequestWithBody(b, h, c.body, events) // also the warm-up
	probe := redisTraffic{calls: h.calls - before, bytes: sent}
	return probe, func() { fullRequestWithBody(b, h, c.body, events) }
}

// contentEvents opens an admitted stream, as BenchmarkContentEventWASM does,
// and times one content event of it.
func contentEvents(b *testing.B, h *cannedHost, _ costCase) (redisTraffic, func()) {
	id := h.InitializeHttpContext()
	h.CallOnRequestHeaders(id, benchRequestHeaders, false)
	answerCanned(h, id, benchVerdict)
	if h.GetCurrentHttpStreamAction(id) != types.ActionContinue {
		b.Fatal("stream not admitted")
	}
	h.CallOnResponseHeaders(id, benchResponseHeaders, false)
	return redisTraffic{}, func() { h.CallOnResponseBody(id, benchContentEvent, false) }
}

// cannedHost is the emulator as bench_test.go's helpers drive it, fitted to
// a case: requests carry the case's extra headers, a charge gets a canned
// reply with one total per window of the case (the helpers answer every
// charge with benchCharged, which has two), Redis calls are counted, and
// the pending calls of a context are listed in a copy (see
// GetRedisCalloutAttributesFromContext).
type cannedHost struct {
	proxytest.HostEmulator
	requestHeaders [][2]string // sent instead of benchRequestHeaders
	chargeReply    []byte
	calls          int
}

func newCannedHost(host proxytest.HostEmulator, c costCase) *cannedHost {
	reply := fmt.Appendf(nil, "*%d\r\n", c.windows)
	for range c.windows {
		reply = append(reply, ":1801\r\n"...)
	}
	return &cannedHost{HostEmulator: host, chargeReply: reply,
		requestHeaders: append(slices.Clip(benchRequestHeaders), c.headers...)}
}

func (h *cannedHost) CallOnRequestHeaders(id uint32, _ [][2]string, endOfStream bool) types.Action {
	return h.HostEmulator.CallOnRequestHeaders(id, h.requestHeaders, endOfStream)
}

func (h *cannedHost) CallOnRedisCallResponse(id uint32, status int32, reply []byte) {
	h.calls++
	if bytes.Equal(reply, benchCharged) {
		reply = h.chargeReply
	}
	h.HostEmulator.CallOnRedisCallResponse(id, status, reply)
}

// complaints are the plugin's warnings and errors: a canned reply that does
// not fit, a failed charge. A measured request must have none.
func (h *cannedHost) complaints() []string {
	return slices.Concat(h.GetWarnLogs(), h.GetErrorLogs(), h.GetCriticalLogs())
}

// timeRun starts an emulator with the case on a VM and times the case's
// operation with testing.Benchmark; it returns the time per operation and
// what one request sent to Redis.
func timeRun(t *testing.T, vm types.VMContext, c costCase) (nsPerOp float64, traffic redisTraffic) {
	t.Helper()
	host, stop := startEmulator(t, vm, c.config)
	defer stop()
	h := newCannedHost(host, c)
	result := testing.Benchmark(func(b *testing.B) {
		var step func()
		traffic, step = c.play(b, h, c)
		b.ResetTimer()
		for range b.N {
			step()
		}
	})
	if result.N == 0 { // testing.Benchmark discards the failure's message
		t.Fatalf("%s: the request failed inside the benchmark (not resumed, or admitted without a charge); the plugin logged %q",
			c.name, h.complaints())
	}
	if complaints := h.complaints(); len(complaints) > 0 {
		t.Fatalf("%s: the plugin complained (a canned reply that does not fit?): %q", c.name, complaints)
	}
	return float64(result.T.Nanoseconds()) / float64(result.N), traffic
}

// costSamples are the timed runs of one case in one mode, in ns/op.
type costSamples struct {
	baseline []float64 // the do-nothing plugin (none in Go mode)
	plugin   []float64
}

// measureRuns times a case rounds times on the plugin and, when there is
// one, on the baseline, alternating (ABBA: which goes first swaps every
// round) so that the machine's drift hits both alike.
func measureRuns(t *testing.T, rounds int, c costCase, baseline, pluginVM types.VMContext) (costSamples, redisTraffic) {
	t.Helper()
	var s costSamples
	var traffic redisTraffic
	timeBaseline := func() {
		if baseline != nil {
			ns, _ := timeRun(t, baseline, c)
			s.baseline = append(s.baseline, ns)
		}
	}
	for round := range rounds {
		pluginFirst := round%2 == 1
		if !pluginFirst {
			timeBaseline()
		}
		ns, probe := timeRun(t, pluginVM, c)
		s.plugin, traffic = append(s.plugin, ns), probe
		if pluginFirst {
			timeBaseline()
		}
	}
	if c.calls > 0 && traffic.calls != c.calls {
		t.Fatalf("%s: %d Redis calls per request, want %d", c.name, traffic.calls, c.calls)
	}
	return s, traffic
}

// costRow is one case's results.
type costRow struct {
	c       costCase
	wasm    costSamples
	native  costSamples
	traffic redisTraffic
}

// measureCosts times every case in WASM mode, then in Go mode.
func measureCosts(t *testing.T, s reportScale) []costRow {
	if _, ok := goPluginVM.(*wrapper.CommonVmCtx[limiter.PluginConfig]); !ok {
		t.Fatalf("the VM context registered at init is a %T, not the plugin's: Go mode would time something else", goPluginVM)
	}
	cases := costCases(s.ruleCounts)
	rows := make([]costRow, len(cases))
	for i, c := range cases {
		rows[i].c = c
	}
	measureWASM(t, s, rows)
	for i := range rows {
		var traffic redisTraffic
		rows[i].native, traffic = measureRuns(t, s.rounds, rows[i].c, nil, goPluginVM)
		// The bytes may differ by a character or so a call: concurrency lease
		// ids end in a counter of the requests a VM has made.
		if wasm := rows[i].traffic; traffic.calls != wasm.calls || abs(traffic.bytes-wasm.bytes) > 2*wasm.calls {
			t.Errorf("%s: Go mode sends %+v to Redis, WASM mode %+v", rows[i].c.name, traffic, wasm)
		}
	}
	return rows
}

// measureWASM times every case with the plugin and the do-nothing plugin
// compiled to WASM. A WASM VM never frees an HTTP context (the emulator never
// deletes them), so at full scale each case gets fresh VMs, not one that has
// piled up the contexts of every case before it.
func measureWASM(t *testing.T, s reportScale, rows []costRow) {
	noopModule := buildWasm(t, "./internal/noopplugin")
	pluginModule := pluginModule(t)
	var vms []proxytest.WasmVMContext
	closeVMs := func() {
		for _, vm := range vms {
			vm.Close()
		}
	}
	defer closeVMs()
	for i := range rows {
		if vms == nil || s.vmPerCase {
			closeVMs()
			vms = compileVMs(t, noopModule, pluginModule)
		}
		rows[i].wasm, rows[i].traffic = measureRuns(t, s.rounds, rows[i].c, vms[0], vms[1])
		t.Logf("WASM, %s: %s, do-nothing %s", rows[i].c.name, micros(median(rows[i].wasm.plugin)), micros(median(rows[i].wasm.baseline)))
	}
}

// pluginModule is the plugin compiled to WASM: the one TestMain built for
// the WASM-mode tests.
func pluginModule(t *testing.T) []byte {
	path := os.Getenv("WASM_FILE_PATH")
	if path == "" {
		return buildWasm(t, ".")
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// compileVMs compiles modules side by side: each takes seconds on one core.
func compileVMs(t *testing.T, modules ...[]byte) []proxytest.WasmVMContext {
	vms := make([]proxytest.WasmVMContext, len(modules))
	errs := make([]error, len(modules))
	var wg sync.WaitGroup
	for i, m := range modules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vms[i], errs[i] = proxytest.NewWasmVMContext(m)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("compiling a WASM module: %v", err)
		}
	}
	return vms
}

// ---------------------------------------------------------------------------
// Accuracy: how many tokens concurrent requests get through a limit.

const (
	accuracyLimit = 10000 // tokens per minute, on one key
	requestTokens = 1000  // each request declares max_tokens 1,000 and uses 1,000
	streamSeconds = 0.5   // how long a response streams, in simulated time
)

// accuracyMode is a way of limiting whose accuracy is measured, and how
// its line is drawn.
type accuracyMode struct {
	name      string
	topLevel  string // configuration fields besides the limit
	color     color.RGBA
	lineWidth float64 // points
}

var accuracyModes = []accuracyMode{
	{"fixed window", "", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, 4},
	{"sliding window", `"window_type": "sliding",`, color.RGBA{R: 0xff, G: 0x9f, B: 0x1c, A: 0xff}, 2},
	{"reservation (fixed window)", reservationOn, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, 2},
}

// accuracyRun is the admissions of one simulated run.
type accuracyRun struct {
	mode       accuracyMode
	inFlight   int
	seconds    int       // simulated length
	admittedAt []float64 // simulated seconds from the start, one per admitted request, in order
}

// measureAccuracy runs every mode at every number of requests in flight
// through the plugin in Go mode (the code WASM mode runs, several times
// faster) on a real redis-server whose scripts run on a test clock.
func measureAccuracy(t *testing.T, s reportScale) []accuracyRun {
	redis := redistest.Start(t)
	var runs []accuracyRun
	test.RunGoTest(t, func(t *testing.T) {
		for _, mode := range accuracyModes {
			for _, k := range s.inFlight {
				t.Run(fmt.Sprintf("%s/%d in flight", mode.name, k), func(t *testing.T) {
					runs = append(runs, simulate(t, redis, mode, k, s.minutes))
				})
			}
		}
	})
	if len(runs) != len(accuracyModes)*len(s.inFlight) {
		t.FailNow() // a run failed: its subtest says why
	}
	return runs
}

// simulate keeps k requests in flight for some simulated minutes against
// 10,000 tokens a minute: every second it opens k requests, lets Redis decide
// on all of them before any completes, then completes the admitted ones (half
// a second later) with their usage; demand is k × 1,000 tokens a second, far
// above the limit. It records when each admitted request was admitted.
func simulate(t *testing.T, redis *redistest.Server, mode accuracyMode, k, minutes int) accuracyRun {
	redis.Do("FLUSHALL")
	start := float64((redis.Now()/60 + 60) * 60) // a minute's start: the run begins with a window
	defer redis.SetClock(0)
	p := startPlugin(t, redis, apiKeyConfig(mode.topLevel, fmt.Sprintf(`"token_per_minute": %d`, accuracyLimit)))
	p.host.RegisterForeignFunction("get_log_level", infoLevel)
	key := [2]string{"x-api-key", "sk-1"}
	body := chatBody(requestTokens)
	usage := sseEvents(openAIStream(3, 1, requestTokens-1))

	run := accuracyRun{mode: mode, inFlight: k, seconds: minutes * 60}
	for at := range run.seconds { // a batch a second
		redis.SetClock(start + float64(at))
		batch := make([]*exchange, k)
		for i := range batch {
			batch[i] = p.sendBody(body, key)
		}
		for _, x := range batch {
			x.answer()
		}
		redis.SetClock(start + float64(at) + streamSeconds)
		for _, x := range batch {
			if !x.passed() {
				x.requireRejected(429)
				x.done()
				continue
			}
			run.admittedAt = append(run.admittedAt, float64(at))
			x.respond("text/event-stream", usage...)
		}
	}
	return run
}

// peakClockMinute is the most tokens admitted in one clock-aligned minute,
// as a multiple of the limit.
func (r accuracyRun) peakClockMinute() float64 {
	perMinute := map[int]int{}
	peak := 0
	for _, at := range r.admittedAt {
		m := int(at) / 60
		perMinute[m]++
		peak = max(peak, perMinute[m])
	}
	return float64(peak*requestTokens) / accuracyLimit
}

// peakAnyMinute is the most tokens admitted in any 60 seconds [t, t+60), as
// a multiple of the limit.
func (r accuracyRun) peakAnyMinute() float64 {
	peak, first := 0, 0
	for last, at := range r.admittedAt {
		for r.admittedAt[first] <= at-60 {
			first++
		}
		peak = max(peak, last-first+1)
	}
	return float64(peak*requestTokens) / accuracyLimit
}

// trailingMinute is the tokens admitted in the 60 seconds up to each second
// of the run, (t-60, t].
func (r accuracyRun) trailingMinute() plotter.XYs {
	points := make(plotter.XYs, r.seconds)
	first, next := 0, 0
	for t := range points {
		for next < len(r.admittedAt) && r.admittedAt[next] <= float64(t) {
			next++
		}
		for first < next && r.admittedAt[first] <= float64(t)-60 {
			first++
		}
		points[t] = plotter.XY{X: float64(t), Y: float64((next - first) * requestTokens)}
	}
	return points
}

// ---------------------------------------------------------------------------
// Plots.

// plotFile is one rendered plot.
type plotFile struct {
	name     string // file name under plotDir
	inFlight int
	png      []byte
}

// plotAccuracy draws, for each number of requests in flight asked for, the
// tokens admitted in the trailing 60 s by every mode, against the limit.
func plotAccuracy(t *testing.T, runs []accuracyRun, inFlight []int) []plotFile {
	var plots []plotFile
	for _, k := range inFlight {
		png, err := plotTrailingMinute(runs, k)
		if err != nil {
			t.Fatalf("plotting %d in flight: %v", k, err)
		}
		plots = append(plots, plotFile{name: fmt.Sprintf("admitted-tokens-%d-in-flight.png", k), inFlight: k, png: png})
	}
	return plots
}

// thousandsTicks are gonum's default ticks, labelled with thousands
// separators.
type thousandsTicks struct{}

func (thousandsTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i, tick := range ticks {
		if tick.Label != "" {
			ticks[i].Label = thousands(int64(tick.Value))
		}
	}
	return ticks
}

// minuteTicks mark every minute, labelled m:00, and every 10 seconds.
type minuteTicks struct{}

func (minuteTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for s := 10 * math.Ceil(min/10); s <= max; s += 10 {
		tick := plot.Tick{Value: s}
		if int(s)%60 == 0 {
			tick.Label = fmt.Sprintf("%d:00", int(s)/60)
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

func plotTrailingMinute(runs []accuracyRun, k int) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d requests in flight, limit %s tokens a minute", k, thousands(accuracyLimit))
	p.X.Label.Text = "simulated time (minutes:seconds)"
	p.X.Tick.Marker = minuteTicks{}
	p.Y.Label.Text = "tokens admitted in the last 60 s"
	p.Y.Tick.Marker = thousandsTicks{}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	highest := float64(accuracyLimit)
	for _, r := range runs {
		if r.inFlight != k {
			continue
		}
		points := r.trailingMinute()
		line, err := plotter.NewLine(points)
		if err != nil {
			return nil, err
		}
		line.StepStyle = plotter.PostStep
		line.Color = r.mode.color
		line.Width = vg.Points(r.mode.lineWidth) // where modes coincide, the wider line drawn first shows around the next
		p.Add(line)
		p.Legend.Add(r.mode.name, line)
		for _, pt := range points {
			highest = max(highest, pt.Y)
		}
	}
	p.Y.Min, p.Y.Max = 0, 1.3*highest // room for the legend above the lines
	p.X.Min, p.X.Max = 0, float64(runs[0].seconds)
	limit := plotter.NewFunction(func(float64) float64 { return accuracyLimit })
	limit.Color = color.Black
	limit.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(limit)
	p.Legend.Add("limit", limit)

	w, err := p.WriterTo(9*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ---------------------------------------------------------------------------
// The report.

type benchReport struct {
	machine  []string // "what: value" lines
	date     string
	scale    reportScale
	elapsed  time.Duration
	costs    []costRow
	accuracy []accuracyRun
	plots    []plotFile
}

// describeMachine names the machine the numbers come from.
func describeMachine() []string {
	lines := []string{
		"OS/architecture: " + runtime.GOOS + "/" + runtime.GOARCH,
		fmt.Sprintf("CPUs: %d", runtime.NumCPU()),
	}
	if model := cpuModel(); model != "" {
		lines = append(lines, "CPU: "+model)
	}
	lines = append(lines, "Go: "+runtime.Version())
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		lines = append(lines, "load average (1, 5, 15 min) when the run started: "+strings.Join(strings.Fields(string(load))[:3], ", "))
	}
	return lines
}

func cpuModel() string {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(info), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// markdown renders BENCHMARKS.md.
func (r benchReport) markdown() string {
	var b strings.Builder
	r.writeHeader(&b)
	r.writeMethod(&b)
	r.writeCostTable(&b, groupKinds, "Cost of a request, by kind of limit",
		"One whole request (request headers, admission, response headers, a 50-event SSE stream with usage at the end, "+
			"the charge, the end of the stream). *Ratio* is the plugin's time over the do-nothing plugin's in WASM: "+
			"what a gateway worker spends on a request with the limiter, relative to one without. "+
			"The request window and the concurrency limit are measured beside the two token windows, so the difference "+
			"from the first row is what they add (a request window alone makes no call at the end).")
	r.writeCostTable(&b, groupRules, "Cost of a request, by number of rule items",
		"*first*: the request is matched against every item and the last one applies (one subject, two calls). "+
			"*all* (`rule_match_mode: all`): every item applies, each to a subject in a Redis Cluster slot of its own, "+
			"so the plugin sends one admission and one charge call per item; the request carries one header per item, "+
			"which the do-nothing plugin reads too.")
	r.writeCostTable(&b, groupStream, "Cost of one streamed event",
		"One SSE content event of an admitted stream (`usage: null`), as the response passes through: the price of "+
			"reading usage from streams, paid per event.")
	r.writeAccuracy(&b)
	r.writePlots(&b)
	return b.String()
}

func (r benchReport) writeHeader(b *strings.Builder) {
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Generated by `make bench` (`TestBenchmarkReport` in `report_test.go`); do not edit by hand.\n\n")
	fmt.Fprintf(b, "Measured on %s, in %s, on:\n\n", r.date, minutesAndSeconds(r.elapsed))
	for _, line := range r.machine {
		fmt.Fprintf(b, "- %s\n", line)
	}
	b.WriteString("\n")
}

func (r benchReport) writeMethod(b *strings.Builder) {
	b.WriteString("## Method\n\n")
	fmt.Fprintf(b, "- **Cost** is time per request with Redis answered by canned replies of the right shape, so it is the "+
		"plugin's own CPU time (plus the host emulator's bookkeeping), not a network round trip. Each case is timed "+
		"with `testing.Benchmark` (%s per run) %d times for each plugin, the do-nothing plugin (`internal/noopplugin`: "+
		"the same hooks through the same wrapper, doing nothing) and this plugin **alternating** (ABBA), and the tables "+
		"give the **median** of each, so that the drift of a shared machine hits both alike. *Spread* is the plugin's "+
		"(slowest − fastest run) / median: how far to trust a figure.\n", r.scale.benchTime, r.scale.rounds)
	b.WriteString("- **WASM mode** is the plugin as a gateway runs it: `GOOS=wasip1 GOARCH=wasm`, in the proxy-wasm host " +
		"emulator (wazero). Both plugins keep their VM through a case's runs; each run starts a new plugin context on it, " +
		"as a configuration reload does.\n")
	b.WriteString("- **Go mode** is the same plugin compiled natively, driven through the same emulator. It has no ratio: " +
		"the do-nothing plugin cannot be loaded beside the plugin natively, because both are `package main` programs " +
		"that register their VM context from `init()` (`wrapper.SetCtx`), and a Go program links exactly one main " +
		"package (a main package cannot be imported). Its figures are the plugin's work plus the emulator's, with no " +
		"baseline to subtract.\n")
	b.WriteString("- **Redis calls** and **bytes to Redis** are per request, counted in WASM mode (the same in Go mode): " +
		"the round trips the request waits for or triggers, and the bytes of the queries (`EVALSHA` with keys and arguments; " +
		"where a concurrency limit is involved, they vary by a byte or two with the length of the lease id's counter).\n")
	fmt.Fprintf(b, "- **Accuracy** runs the plugin in Go mode (the same code, faster to run than WASM) against a real "+
		"`redis-server`, with the scripts on a test clock, so %d simulated minutes take seconds: see "+
		"[Accuracy under concurrency](#accuracy-under-concurrency).\n\n", r.scale.minutes)
}

// writeCostTable writes the cost rows of one group.
func (r benchReport) writeCostTable(b *strings.Builder, group, title, explanation string) {
	fmt.Fprintf(b, "## %s\n\n%s\n\n", title, explanation)
	b.WriteString("| case | Redis calls | bytes to Redis | WASM: do-nothing | WASM: plugin | added | ratio | spread | Go: plugin | spread |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range r.costs {
		if row.c.group != group {
			continue
		}
		calls, sent := "–", "–"
		if row.c.calls > 0 {
			calls, sent = strconv.Itoa(row.traffic.calls), thousands(int64(row.traffic.bytes))
		}
		wasmBaseline, wasmPlugin := median(row.wasm.baseline), median(row.wasm.plugin)
		fmt.Fprintf(b, "| %s | %s | %s | %s | **%s** | %s | **%s** | %s | %s | %s |\n", row.c.name, calls, sent,
			micros(wasmBaseline), micros(wasmPlugin), signedMicros(wasmPlugin-wasmBaseline),
			ratio(wasmPlugin/wasmBaseline), spread(row.wasm.plugin),
			micros(median(row.native.plugin)), spread(row.native.plugin))
	}
	b.WriteString("\n")
}

func (r benchReport) writeAccuracy(b *strings.Builder) {
	b.WriteString("## Accuracy under concurrency\n\n")
	fmt.Fprintf(b, "One key limited to %s tokens a minute. Every simulated second, *k* requests are opened, each "+
		"declaring `max_tokens: %s`, and Redis decides on all of them before any completes; the admitted ones then "+
		"stream for %.1f s and report %s tokens of usage, which is charged. Demand is *k* × %s tokens a second, "+
		"far above the limit, for %d simulated minutes. Each cell is the most tokens admitted in a window, as a "+
		"multiple of the limit: in a minute of the clock (*minute*), and in any 60 seconds (*any 60 s*).\n\n",
		thousands(accuracyLimit), thousands(requestTokens), streamSeconds, thousands(requestTokens),
		thousands(requestTokens), r.scale.minutes)
	b.WriteString("| in flight |")
	for _, m := range accuracyModes {
		fmt.Fprintf(b, " %s: minute | any 60 s |", m.name)
	}
	b.WriteString("\n|--:|" + strings.Repeat("--:|--:|", len(accuracyModes)) + "\n")
	for _, k := range r.scale.inFlight {
		fmt.Fprintf(b, "| %d |", k)
		for _, m := range accuracyModes {
			run := r.accuracyRun(m, k)
			fmt.Fprintf(b, " %s | %s |", ratio(run.peakClockMinute()), ratio(run.peakAnyMinute()))
		}
		b.WriteString("\n")
	}
	fits := accuracyLimit / (requestTokens + 1)
	fmt.Fprintf(b, "\nWithout reservation, admission compares the limit with what has been *charged*, and requests in "+
		"flight have not been charged yet: all *k* get through while the window still has room, so a window takes "+
		"about the tokens in flight beyond its limit. A sliding window does not change that; it only stops the burst "+
		"at a minute's edge that a fixed window allows (demand arriving at the end of one minute and the start of the "+
		"next). With `token_reservation`, admission reserves each request's estimate (%s tokens: the prompt and "+
		"`max_tokens`) atomically, so admitted tokens never exceed the limit: %d estimates fit in %s, and as the "+
		"estimate is an upper bound, %s tokens are used (%s).\n\n",
		thousands(requestTokens+1), fits, thousands(accuracyLimit), thousands(int64(fits*requestTokens)),
		ratio(float64(fits*requestTokens)/accuracyLimit))
}

func (r benchReport) accuracyRun(m accuracyMode, k int) accuracyRun {
	for _, run := range r.accuracy {
		if run.mode.name == m.name && run.inFlight == k {
			return run
		}
	}
	panic(fmt.Sprintf("no accuracy run for %s at %d in flight", m.name, k))
}

func (r benchReport) writePlots(b *strings.Builder) {
	b.WriteString("## Admitted tokens over time\n\n")
	b.WriteString("The same runs: tokens admitted in the 60 seconds up to each simulated second, against the limit " +
		"(dashed). With a fixed window, every request in flight gets through at the start of each minute, so at any " +
		"moment the last 60 seconds hold one such burst. A sliding window lets the same bursts through, the second " +
		"one later, once the first minute's weight has slid below the limit. With reservation, the line stays under " +
		"the limit.\n\n")
	for _, p := range r.plots {
		fmt.Fprintf(b, "![tokens admitted in the last 60 s, %d requests in flight](%s/%s)\n\n", p.inFlight, plotDir, p.name)
	}
}

// checkReport checks that the report says what it must, and that the
// limiter behaves as documented: reservation never admits more than the
// limit in a minute, and without it requests in flight overshoot it.
func checkReport(t *testing.T, r benchReport, markdown string) {
	for _, want := range []string{"make bench", "## Method", "## Accuracy under concurrency", "## Admitted tokens over time"} {
		if !strings.Contains(markdown, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, row := range r.costs {
		if !strings.Contains(markdown, "| "+row.c.name+" |") {
			t.Errorf("the report lacks the row %q", row.c.name)
		}
	}
	for _, p := range r.plots {
		if !bytes.HasPrefix(p.png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("plot %s is not a PNG", p.name)
		}
		if !strings.Contains(markdown, p.name) {
			t.Errorf("the report does not link plot %s", p.name)
		}
	}
	most := slices.Max(r.scale.inFlight)
	for _, run := range r.accuracy {
		reserving := run.mode.topLevel == reservationOn
		if reserving && run.peakClockMinute() > 1 {
			t.Errorf("%s, %d in flight: %.2f× the limit admitted in a minute", run.mode.name, run.inFlight, run.peakClockMinute())
		}
		if !reserving && run.inFlight == most && run.peakClockMinute() <= 1 {
			t.Errorf("%s, %d in flight: no overshoot (%.2f×): the simulation does not keep requests in flight", run.mode.name, run.inFlight, run.peakClockMinute())
		}
	}
}

func writeReport(t *testing.T, dir, markdown string, plots []plotFile) {
	if err := os.MkdirAll(filepath.Join(dir, plotDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, reportFile), []byte(markdown), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range plots {
		if err := os.WriteFile(filepath.Join(dir, plotDir, p.name), p.png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ---------------------------------------------------------------------------
// Numbers.

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// spread is (slowest - fastest) / median, as a percentage.
func spread(xs []float64) string {
	if len(xs) < 2 {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", 100*(slices.Max(xs)-slices.Min(xs))/median(xs))
}

// micros formats nanoseconds as microseconds: whole ones with thousands
// separators from 100 µs, one or two decimals below.
func micros(ns float64) string {
	switch us := ns / 1000; {
	case us >= 100:
		return thousands(int64(us+0.5)) + " µs"
	case us >= 10:
		return fmt.Sprintf("%.1f µs", us)
	default:
		return fmt.Sprintf("%.2f µs", us)
	}
}

// minutesAndSeconds formats a duration as "6 min 05 s", or "42 s".
func minutesAndSeconds(d time.Duration) string {
	secs := int(d.Round(time.Second) / time.Second)
	if secs < 60 {
		return fmt.Sprintf("%d s", secs)
	}
	return fmt.Sprintf("%d min %02d s", secs/60, secs%60)
}

// signedMicros is micros with a sign: a difference.
func signedMicros(ns float64) string {
	if ns < 0 {
		return "−" + micros(-ns)
	}
	return "+" + micros(ns)
}

func ratio(x float64) string {
	return fmt.Sprintf("%.2f×", x)
}

func abs(n int) int {
	return max(n, -n)
}

// thousands formats n with commas between groups of three digits.
func thousands(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
