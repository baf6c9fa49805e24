package plugintest

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
)

// RunTest runs f twice, as test.RunTest does: in Go mode (the VM context
// the test binary registered) and in WASM mode (the module Main built). But
// where test.RunTest compiles the module anew for every test (about 2.5 s
// for this 9 MB plugin, most of a suite's time), WASM mode here runs on one
// VM, compiled once per test binary, on which each plugin started is a
// plugin (re)start of the same worker, as Go mode shares the test process.
// Within f, Start and NewTestHost start the plugin in the mode being run.
func RunTest(t *testing.T, f func(*testing.T)) {
	t.Helper()
	t.Run("go", f)
	t.Run("wasm", func(t *testing.T) {
		wasmVM = sharedVM(t)
		defer func() { wasmVM = nil }()
		f(t)
	})
}

// RunTestOnFreshVM is RunTest with WASM mode on a VM of its own, compiled
// for f: for a test of what a worker keeps for its whole life (its models'
// counters), which in Go mode the test resets itself.
func RunTestOnFreshVM(t *testing.T, f func(*testing.T)) {
	t.Helper()
	t.Run("go", f)
	t.Run("wasm", func(t *testing.T) {
		vm := compile(t)
		defer vm.Close()
		wasmVM = vm
		defer func() { wasmVM = nil }()
		f(t)
	})
}

// FreshVM compiles the plugin's module to a VM of its own, closed at the
// end of the test: another worker, or another replica, started anew, on
// the machine's clocks and randomness as every WASM-mode VM here.
func FreshVM(t *testing.T) types.VMContext {
	t.Helper()
	return FreshVMWith(t, wasmhost.Options{})
}

// FreshVMWith is FreshVM with what its host gives the module besides the
// emulator (wasmhost.Options): a fixed random source, the emulator's clock.
func FreshVMWith(t *testing.T, opts wasmhost.Options) types.VMContext {
	t.Helper()
	vm := compileWith(t, opts)
	t.Cleanup(func() { vm.Close() })
	return vm
}

// wasmVM is the VM of the WASM-mode half of RunTest being run (nil: Go
// mode), and compiled the one VM of the test binary.
var (
	wasmVM   types.VMContext
	compiled proxytest.WasmVMContext
)

// sharedVM compiles the test binary's WASM VM on first use.
func sharedVM(t *testing.T) types.VMContext {
	t.Helper()
	if compiled == nil {
		compiled = compile(t)
	}
	return compiled
}

// compile compiles the module Main built to a VM as a gateway runs it
// (wasmhost.NewVM): the machine's wall and monotonic clocks, crypto
// randomness, each stream's context deleted in the module when it is done.
// Every WASM-mode test runs on the machine's clock, as its Go-mode half
// does; one that needs the emulator's determinism says so (FreshVMWith).
func compile(t *testing.T) proxytest.WasmVMContext {
	t.Helper()
	return compileWith(t, wasmhost.Options{})
}

func compileWith(t *testing.T, opts wasmhost.Options) proxytest.WasmVMContext {
	t.Helper()
	wasm, err := os.ReadFile(os.Getenv("WASM_FILE_PATH"))
	if err != nil {
		t.Fatalf("reading the module Main built: %v", err)
	}
	vm, err := wasmhost.NewVM(wasm, opts)
	if err != nil {
		t.Fatalf("compiling the plugin: %v", err)
	}
	return vm
}

// Host is a started plugin's host emulator; Reset stops it (the emulator
// is process-wide: one at a time).
type Host interface {
	proxytest.HostEmulator
	Reset()
}

// InWASM says whether RunTest's f is running in WASM mode.
func InWASM() bool { return wasmVM != nil }

// NewTestHost starts the plugin with a configuration in the mode RunTest
// runs (outside it: Go mode), as test.NewTestHost does: logging at trace
// level, with the test route, cluster and request id properties.
func NewTestHost(config json.RawMessage) (Host, types.OnPluginStartStatus) {
	if wasmVM == nil {
		return test.NewTestHost(config)
	}
	registered := proxywasm.GetVMContext()
	host, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().WithPluginConfiguration(config).WithVMContext(wasmVM))
	host.RegisterForeignFunction("get_log_level", func([]byte) []byte { return binary.LittleEndian.AppendUint32(nil, 0) })
	status := host.StartPlugin()
	for _, p := range [][2]string{{"route_name", "test-route-default"}, {"cluster_name", "test-cluster-default"}, {"x_request_id", "test-request-id-default"}} {
		_ = host.SetProperty([]string{p[0]}, []byte(p[1]))
	}
	return wasmHost{HostEmulator: host, reset: func() { reset(); proxywasm.SetVMContext(registered) }}, status
}

// wasmHost is a host emulator on the shared WASM VM.
type wasmHost struct {
	proxytest.HostEmulator
	reset func()
}

func (h wasmHost) Reset() { h.reset() }
