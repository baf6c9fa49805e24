package wasmhost

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// probe is the test module (testdata/probe), built once.
var probe []byte

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmhost-probe")
	if err != nil {
		panic(err)
	}
	out := filepath.Join(dir, "probe.wasm")
	if err := wasmbuild.Build("./testdata/probe", out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if probe, err = os.ReadFile(out); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// reading is one request's line of the probe.
type reading struct {
	wall time.Time
	mono time.Duration
	rand string
}

// start runs the probe on a VM made with opts, in a host emulator of its
// own; stop stops it. One at a time: the emulator is process-wide.
func start(t *testing.T, opts Options) (host proxytest.HostEmulator, g *guest, stop func()) {
	t.Helper()
	vm, err := NewVM(probe, opts)
	if err != nil {
		t.Fatal(err)
	}
	host, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().WithVMContext(vm))
	var once sync.Once
	stop = func() { once.Do(func() { reset(); vm.Close() }) }
	t.Cleanup(stop)
	return host, vm.(*guest), stop
}

// request sends one request through the probe and returns its reading.
func request(t *testing.T, host proxytest.HostEmulator) reading {
	t.Helper()
	id := host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, [][2]string{{":path", "/"}}, true)
	host.CompleteHttpContext(id)
	logs := host.GetInfoLogs()
	var r reading
	var wall, mono int64
	if _, err := fmt.Sscanf(logs[len(logs)-1], "probe wall=%d mono=%d rand=%s", &wall, &mono, &r.rand); err != nil {
		t.Fatalf("the probe's line %q: %v", logs[len(logs)-1], err)
	}
	r.wall, r.mono = time.Unix(0, wall), time.Duration(mono)
	return r
}

func TestNewVMGivesTheMachinesClocksAndRandomness(t *testing.T) {
	host, _, stop := start(t, Options{})
	first := request(t, host)
	if d := time.Since(first.wall); d < -time.Second || d > 5*time.Second {
		t.Errorf("the module's wall clock reads %v, %v from the machine's", first.wall, d)
	}
	time.Sleep(200 * time.Millisecond)
	second := request(t, host)
	if d := second.mono - first.mono; d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("200 ms apart, the module's monotonic clock moved %v", d)
	}
	if first.rand == second.rand {
		t.Errorf("random_get gave %s twice", first.rand)
	}
	stop()
	other, _, _ := start(t, Options{})
	if r := request(t, other); r.rand == first.rand {
		t.Errorf("two VMs drew the same random bytes %s", r.rand)
	}
}

func TestOptionsGiveTheEmulatorsDeterminism(t *testing.T) {
	fixed := func() Options { return Options{Rand: bytes.NewReader(make([]byte, 1<<10)), EmulatorClock: true} }
	host, _, stop := start(t, fixed())
	a := request(t, host)
	if a.wall.Year() != 2022 {
		t.Errorf("the emulator's clock reads %v, not 2022's", a.wall)
	}
	time.Sleep(100 * time.Millisecond)
	if b := request(t, host); b.mono-a.mono > 50*time.Millisecond {
		t.Errorf("the emulator's clock moved %v in 100 ms of the machine's: it moves per read", b.mono-a.mono)
	}
	stop()
	other, _, _ := start(t, fixed())
	if b := request(t, other); b.rand != a.rand || a.rand != strings.Repeat("00", 8) {
		t.Errorf("two VMs on one fixed source drew %s and %s", a.rand, b.rand)
	}
}

// Each stream holds 64 KiB in the probe until its context is deleted:
// 3,000 of them kept would need 192 MiB of the module's memory.
func TestStreamsDoneAreDeletedInTheModule(t *testing.T) {
	host, g, _ := start(t, Options{})
	for range 3000 {
		request(t, host)
	}
	if size := g.mod.Memory().Size(); size > 64<<20 {
		t.Errorf("after 3,000 streams the module's memory is %d MiB: their contexts were not deleted", size>>20)
	}
}

// The emulator keeps each stream's bodies and every log line; with
// Forget, 3,000 streams with 32 KiB bodies leave the heap where 300 did.
func TestForgetKeepsTheEmulatorFlat(t *testing.T) {
	host, _, _ := start(t, Options{})
	body := bytes.Repeat([]byte("x"), 32<<10)
	heap := func(n int) uint64 {
		for range n {
			id := host.InitializeHttpContext()
			host.CallOnRequestHeaders(id, [][2]string{{":path", "/"}}, false)
			host.CallOnRequestBody(id, body, true)
			host.CallOnResponseHeaders(id, [][2]string{{":status", "200"}}, false)
			host.CallOnResponseBody(id, body, true)
			host.CompleteHttpContext(id)
			Forget(host, id)
		}
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap(300)
	after := heap(3000)
	if after > before+16<<20 {
		t.Errorf("the heap grew from %s to %s over 3,000 streams", mib(before), mib(after))
	}
	if logs := host.GetInfoLogs(); len(logs) != 0 {
		t.Errorf("the emulator kept %d log lines", len(logs))
	}
}

func mib(n uint64) string { return strconv.FormatUint(n>>20, 10) + " MiB" }

// Metrics lists what the module defined, with the emulator's values, and
// Recorded sees every sample of a histogram: the probe records 3 then 5
// in one call, of which the emulator keeps only the 5.
func TestMetricsListWhatTheModuleDefined(t *testing.T) {
	type sample struct {
		id    uint32
		value uint64
	}
	var recorded []sample
	host, _, _ := start(t, Options{Recorded: func(id uint32, v uint64) { recorded = append(recorded, sample{id, v}) }})
	if got := Metrics(host); len(got) != 0 {
		t.Errorf("before any request: %v", got)
	}
	request(t, host)
	request(t, host)
	got := Metrics(host)
	want := []Metric{{0, "probe.requests", Counter, 2}, {1, "probe.level", Gauge, 4}, {2, "probe.samples", Histogram, 5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Metrics: %v, want %v", got, want)
	}
	if want := []sample{{2, 3}, {2, 5}, {2, 3}, {2, 5}}; fmt.Sprint(recorded) != fmt.Sprint(want) {
		t.Errorf("Recorded saw %v, want %v", recorded, want)
	}
	if s := fmt.Sprint(Counter, Gauge, Histogram, MetricType(7)); s != "counter gauge histogram metric type 7" {
		t.Errorf("the types' names: %s", s)
	}
}

// A property the module set reads back as it was set, however the module
// reuses the memory it was set from afterwards (the emulator alone keeps
// a view of that memory: see property.go).
func TestPropertiesTheModuleSetAreCopied(t *testing.T) {
	for name, opts := range map[string]Options{
		"alone": {},
		// make run's gateway watches histograms too: the copies stay.
		"with Recorded": {Recorded: func(uint32, uint64) {}},
	} {
		t.Run(name, func(t *testing.T) {
			host, _, _ := start(t, opts)
			request(t, host)
			got, err := host.GetProperty([]string{"probe"})
			if err != nil || string(got) != "property" {
				t.Errorf("the property the probe set reads %q (%v), not %q", got, err, "property")
			}
		})
	}
}

// A property a module set from a stream is that stream's, as in Envoy:
// once the stream is forgotten, the next one does not find it.
func TestForgetDropsThePropertiesTheModuleSet(t *testing.T) {
	host, _, _ := start(t, Options{})
	id := host.InitializeHttpContext()
	host.CallOnRequestHeaders(id, [][2]string{{":path", "/"}}, true)
	host.CompleteHttpContext(id)
	if _, err := host.GetProperty([]string{"probe"}); err != nil {
		t.Fatalf("the property the probe set: %v", err)
	}
	Forget(host, id)
	if got, err := host.GetProperty([]string{"probe"}); err == nil {
		t.Errorf("after Forget the property the probe set reads %q", got)
	}
}
