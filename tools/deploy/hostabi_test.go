package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The gateway the deployment files target: the newest Higress release that
// loads plugins built by the standard Go toolchain (GOOS=wasip1), and the
// Envoy it carries.
//
//   - Higress v2.2.4 (alibaba/higress, now higress-group/higress; tag v2.2.4,
//     commit 58666ac985cee19a0a9a353421c63cead6d0cb47; release notes in
//     release-notes/2.2.4/) ships the image gateway:2.2.4.
//   - It pins its Envoy fork higress-group/envoy at
//     9e54c67a6c89adef56a4fb9bf38120e16da9b4f4, Envoy 1.36.4 (higress-group/higress
//     PR #4448 "build: update Envoy v2.2.4 dependencies and images", issue #4626).
//   - That Envoy line builds the host side of proxy-wasm from
//     higress-group/proxy-wasm-cpp-host (bazel/repository_locations.bzl of
//     higress-group/envoy, proxy_wasm_cpp_host: master revision
//     d9c558753df6781388e36e0d51adc98c0b6835a0, 2026-08-11).
//
// The tables below are that host's, read from higress-group/proxy-wasm-cpp-host
// at 71f6a9e19e99e0121d6bd62f2e0e6c8b158f69d7, of its master line with the
// complete WASI surface for Go plugins (d9c55875 itself was not among the
// readable sources; the start allow list is the same at
// 65755f221e1a9f15451363f700583de78bb9adb2, while older revisions, such as
// 08aef9c153fa21ac7ea2e1874823ce95d98520e9, allow none of the fd_fdstat_*
// calls the Go runtime makes while it starts):
//
//   - include/proxy-wasm/exports.h: FOR_ALL_HOST_FUNCTIONS,
//     FOR_ALL_HOST_FUNCTIONS_ABI_SPECIFIC and FOR_ALL_WASI_FUNCTIONS;
//   - src/wasm.cc, WasmBase::registerCallbacks: which of them are registered
//     (under "env" with the prefix proxy_, the WASI ones under both
//     "wasi_unstable" and "wasi_snapshot_preview1"), per ABI version;
//   - src/wasm.cc, WasmBase::startVm: the host functions allowed while the
//     module starts (_initialize, then main if exported; _start for a WASI
//     command). Any other host call then traps with "restricted_callback"
//     (src/v8/v8.cc checks isHostFunctionAllowed before every host call), and
//     the gateway rejects the plugin with "Failed to initialize Wasm code".
const (
	higressRelease      = "2.2.4"
	higressEnvoyVersion = "1.36.4"
	higressGatewayImage = "higress-registry.cn-hangzhou.cr.aliyuncs.com/higress/gateway:" + higressRelease
)

// hostProxyFunctions is FOR_ALL_HOST_FUNCTIONS: registered as env.proxy_<name>
// whatever the module's ABI version.
var hostProxyFunctions = []string{
	"log", "get_status", "set_property", "get_property", "send_local_response",
	"get_shared_data", "set_shared_data", "register_shared_queue", "resolve_shared_queue",
	"dequeue_shared_queue", "enqueue_shared_queue", "get_header_map_value",
	"add_header_map_value", "replace_header_map_value", "remove_header_map_value",
	"get_header_map_pairs", "set_header_map_pairs", "get_header_map_size",
	"get_buffer_status", "get_buffer_bytes", "set_buffer_bytes",
	"http_call", "grpc_call", "grpc_stream", "grpc_close", "grpc_cancel", "grpc_send",
	"set_tick_period_milliseconds", "get_current_time_nanoseconds", "define_metric",
	"increment_metric", "record_metric", "get_metric", "set_effective_context", "done",
	"call_foreign_function", "redis_init", "redis_call",
}

// hostProxyFunctionsByABI are the env.proxy_<name> functions registered only
// for a module exporting that ABI version (proxy_abi_version_<version>).
var hostProxyFunctionsByABI = map[string][]string{
	"0_1_0":   {"get_configuration", "continue_request", "continue_response", "clear_route_cache"},
	"0_2_0":   {"continue_stream", "close_stream"},
	"0_2_1":   {"continue_stream", "close_stream", "get_log_level", "redis_init", "redis_call"},
	"0_2_100": {"continue_stream", "close_stream", "get_log_level", "redis_init", "redis_call"},
}

// hostEnvFunctions are registered under env without the proxy_ prefix, for
// Emscripten-built modules.
var hostEnvFunctions = []string{"pthread_equal", "emscripten_notify_memory_growth"}

// hostWASIFunctions is FOR_ALL_WASI_FUNCTIONS, registered under both WASI
// module names.
var hostWASIFunctions = []string{
	"fd_write", "fd_read", "fd_seek", "fd_close", "fd_fdstat_get", "fd_fdstat_set_flags",
	"fd_fdstat_set_rights", "environ_get", "environ_sizes_get", "args_get", "args_sizes_get",
	"clock_time_get", "clock_res_get", "fd_advise", "fd_allocate", "fd_datasync",
	"fd_filestat_set_size", "fd_filestat_set_times", "fd_pread", "fd_pwrite",
	"fd_readdir", "fd_renumber", "fd_sync", "fd_tell", "path_create_directory",
	"path_filestat_set_times", "path_link", "path_readlink", "path_remove_directory",
	"path_rename", "path_symlink", "path_unlink_file", "sock_accept",
	"sock_recv", "sock_send", "sock_shutdown", "random_get", "sched_yield",
	"poll_oneoff", "proc_exit", "path_open", "fd_prestat_get",
	"fd_prestat_dir_name", "path_filestat_get", "fd_filestat_get",
}

var wasiModules = []string{"wasi_unstable", "wasi_snapshot_preview1"}

// allowedProxyAtStart and allowedWASIAtStart are WasmBase::startVm's list,
// without the module name: each WASI entry is listed there for both
// wasi_unstable and wasi_snapshot_preview1. Left out, and so refused while
// the module starts: every proxy_* call but proxy_log, and the WASI calls
// fd_read, fd_seek, fd_close, path_open, sched_yield and proc_exit.
var (
	allowedProxyAtStart = []string{"proxy_log"}
	allowedWASIAtStart  = []string{
		"fd_write", "args_sizes_get", "args_get", "environ_sizes_get", "environ_get",
		"fd_prestat_get", "fd_prestat_dir_name", "clock_time_get", "clock_res_get",
		"random_get",
		// "Go runtime initialization"
		"fd_fdstat_get", "fd_fdstat_set_flags", "fd_fdstat_set_rights", "path_filestat_get",
		"fd_filestat_get", "fd_filestat_set_size", "fd_filestat_set_times", "fd_advise",
		"fd_allocate", "fd_datasync", "fd_pread", "fd_pwrite", "fd_readdir", "fd_renumber",
		"fd_sync", "fd_tell", "path_create_directory", "path_filestat_set_times", "path_link",
		"path_readlink", "path_remove_directory", "path_rename", "path_symlink",
		"path_unlink_file", "poll_oneoff", "sock_accept", "sock_recv", "sock_send",
		"sock_shutdown",
	}
)

// hostProvides are the "module.name" host functions the gateway links a
// module of that ABI version against.
func hostProvides(abi string) map[string]bool {
	out := map[string]bool{}
	for _, f := range append(slices.Clone(hostProxyFunctions), hostProxyFunctionsByABI[abi]...) {
		out["env.proxy_"+f] = true
	}
	for _, f := range hostEnvFunctions {
		out["env."+f] = true
	}
	for _, m := range wasiModules {
		for _, f := range hostWASIFunctions {
			out[m+"."+f] = true
		}
	}
	return out
}

// allowedWhileStarting reports whether startVm lets the module call
// module.name from _initialize or main.
func allowedWhileStarting(module, name string) bool {
	switch {
	case module == "env":
		return slices.Contains(allowedProxyAtStart, name)
	case slices.Contains(wasiModules, module):
		return slices.Contains(allowedWASIAtStart, name)
	}
	return false
}

// pluginWasm is the main.wasm that `make build` leaves at the repository's
// root, the file compose mounts and the OCI image carries.
func pluginWasm(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "main.wasm"))
	require.NoError(t, err, "build the plugin first: make build (or: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o main.wasm .)")
	return b
}

// newRuntime is a wazero runtime with the interpreter: compiling the plugin
// (several MiB) for it takes a fraction of the compiler's time, and these
// tests run only the module's start.
func newRuntime(ctx context.Context) wazero.Runtime {
	return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
}

// abiVersion is the proxy-wasm ABI version a module exports
// (proxy_abi_version_0_2_100 -> "0_2_100"), as BytecodeUtil::getAbiVersion
// reads it; "" if none.
func abiVersion(m wazero.CompiledModule) string {
	for name := range m.ExportedFunctions() {
		if v, ok := strings.CutPrefix(name, "proxy_abi_version_"); ok {
			return v
		}
	}
	return ""
}

func importName(d api.FunctionDefinition) string {
	module, name, _ := d.Import()
	return module + "." + name
}

// The compose gateway is the release whose host the tables above describe:
// moving one without the other would make the load checks below test another
// gateway than the one users run.
func TestComposeGatewayIsTheCheckedRelease(t *testing.T) {
	gw := service(t, loadCompose(t), "gateway")
	require.Equal(t, higressGatewayImage, gw.Image,
		"docker-compose.yml runs another Higress than the one hostabi_test.go checks the plugin against: update both together")
}

// Every function main.wasm imports is one the gateway provides: otherwise
// Envoy refuses the module with "Failed to load Wasm module due to a missing
// import" and the WasmPlugin never runs.
func TestPluginImportsAreProvidedByHigress(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(ctx)
	defer r.Close(ctx)
	m, err := r.CompileModule(ctx, pluginWasm(t))
	require.NoError(t, err, "main.wasm is not a valid WASM module")

	abi := abiVersion(m)
	require.Contains(t, []string{"0_2_1", "0_2_100"}, abi,
		"main.wasm exports proxy_abi_version_%s: Higress registers proxy_redis_init/proxy_redis_call only for ABI 0_2_1 and 0_2_100", abi)
	provided := hostProvides(abi)

	var imported, missing []string
	for _, d := range m.ImportedFunctions() {
		name := importName(d)
		if slices.Contains(imported, name) {
			continue
		}
		imported = append(imported, name)
		if !provided[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(imported)
	t.Logf("main.wasm (ABI %s) imports %d host functions: %s", abi, len(imported), strings.Join(imported, " "))
	for _, name := range missing {
		t.Errorf("main.wasm imports %s, which Higress %s (Envoy %s) does not provide: the gateway would reject the plugin "+
			"with \"Failed to load Wasm module due to a missing import: %s\". Stop calling what imports it, or, if a newer "+
			"Higress provides it, move docker-compose.yml and the host tables of hostabi_test.go to that release.",
			name, higressRelease, higressEnvoyVersion, name)
	}
	for _, mem := range m.ImportedMemories() {
		module, name, _ := mem.Import()
		t.Errorf("main.wasm imports the memory %s.%s; the gateway provides none, the module must define its own", module, name)
	}
}

// main.wasm starts as the gateway starts it, calling while it starts only
// what the gateway allows then: otherwise the gateway rejects the plugin with
// "restricted_callback" before it sees a request.
func TestPluginStartsUnderHigressRestrictions(t *testing.T) {
	// The VM's environment is what the WasmPlugin example gives it: the
	// variables of vmConfig.env, those of the gateway (HOST) with a stand-in.
	env := map[string]string{}
	for _, e := range loadWasmPlugin(t).Spec.VMConfig.Env {
		env[e.Name] = e.Value
		if e.ValueFrom == "HOST" {
			env[e.Name] = "value-of-the-gateway-" + e.Name
		}
	}
	start := startLikeHigress(t, pluginWasm(t), env)
	require.NoError(t, start.err, "main.wasm failed to start as Higress %s starts it\n%s", higressRelease, start)
	require.True(t, start.initialized, "main.wasm exports no _initialize: it is not the WASI reactor that -buildmode=c-shared builds")
	// The Go runtime's initialization reaches the host: if nothing was called,
	// the harness did not run the module's start at all.
	require.NotEmpty(t, start.calls, "no host call while starting main.wasm")
	t.Logf("host calls while starting main.wasm: %s", strings.Join(start.calls, " "))
}

// The start check refuses what the gateway refuses. The module of
// testdata/startprobe does, while it initializes, what its environment
// variable START_PROBE asks: nothing unusual (reading its environment and
// writing to stderr, which Higress allows), a proxy-wasm call, os.Exit, a
// read of stdin, or opening a file.
func TestStartCheckRefusesWhatHigressRefuses(t *testing.T) {
	probe := buildStartProbe(t)
	for _, tc := range []struct {
		do     string
		denied string // "" when the start must succeed
	}{
		{do: "nothing-unusual", denied: ""},
		{do: "proxy-call", denied: "env.proxy_set_tick_period_milliseconds"},
		{do: "exit", denied: "wasi_snapshot_preview1.proc_exit"},
		{do: "read-stdin", denied: "wasi_snapshot_preview1.fd_read"},
		{do: "open-file", denied: "wasi_snapshot_preview1.path_open"},
	} {
		t.Run(tc.do, func(t *testing.T) {
			start := startLikeHigress(t, probe, map[string]string{"START_PROBE": tc.do})
			if tc.denied == "" {
				require.NoError(t, start.err, "%s", start)
				require.Contains(t, start.stderr, "startprobe: initialized", "the probe's own output, written with fd_write while it starts")
				return
			}
			var rc *restrictedCallError
			require.ErrorAs(t, start.err, &rc, "%s", start)
			require.Equal(t, tc.denied, rc.name, "the failure names the refused host function")
		})
	}
}

// restrictedCallError is a host call the gateway refuses while the module
// starts; like V8's trap, it ends the call into the module.
type restrictedCallError struct{ name string }

func (e *restrictedCallError) Error() string {
	return "restricted_callback: " + e.name + " called while the module starts, which Higress " + higressRelease +
		" refuses: it allows then only proxy_log and the WASI calls of WasmBase::startVm (allowedWASIAtStart " +
		"in tools/deploy/hostabi_test.go). If the stack trace below shows the plugin's init or a package-level " +
		"variable making the call, move it into the plugin's configure or request callbacks; if it shows only " +
		"the Go runtime's own start, this Go version needs a gateway that allows that call."
}

// startReport is what happened while a module started.
type startReport struct {
	initialized bool     // _initialize was exported and called
	calls       []string // host functions called, in order, without repeats
	stderr      string   // what the module wrote to stdout and stderr
	logs        []string // proxy_log messages
	err         error    // the first refused call, a trap, or nil
}

func (s startReport) String() string {
	return fmt.Sprintf("host calls: %s\nstdout/stderr:\n%s\nproxy_log: %q", strings.Join(s.calls, " "), s.stderr, s.logs)
}

// startLikeHigress instantiates module against a host with every function
// it imports, as the gateway links it, and runs its start as
// WasmBase::startVm does: _initialize then main(0, 0) when main is exported,
// _start otherwise (WasmBase::getFunctions looks up "main" only, not
// __main_argc_argv; a Go c-shared module exports neither). The WASI calls
// allowed then are wazero's implementation of WASI, with what Envoy gives a
// module: no arguments, no preopened directories, the variables of env
// (vm_config.environment_variables), the real clocks and randomness, stdout
// and stderr captured; proxy_log collects the messages. Any other host call
// fails with a *restrictedCallError.
func startLikeHigress(t *testing.T, module []byte, env map[string]string) startReport {
	t.Helper()
	ctx := context.Background()
	r := newRuntime(ctx)
	defer r.Close(ctx)

	compiled, err := r.CompileModule(ctx, module)
	require.NoError(t, err)

	// The module runs on this goroutine only (wasip1 has no threads), and so
	// do the host functions it calls.
	var (
		report startReport
		out    bytes.Buffer
	)
	record := func(name string) {
		if !slices.Contains(report.calls, name) {
			report.calls = append(report.calls, name)
		}
	}

	// The imports, grouped by module, one definition per name.
	byModule := map[string]map[string]api.FunctionDefinition{}
	for _, d := range compiled.ImportedFunctions() {
		module, name, _ := d.Import()
		if byModule[module] == nil {
			byModule[module] = map[string]api.FunctionDefinition{}
		}
		byModule[module][name] = d
	}

	// Every call into the host is recorded as it is made: a listener on the
	// host modules only, not on the plugin's own functions.
	listened := experimentalListen(ctx, record)
	for _, module := range slices.Sorted(maps.Keys(byModule)) {
		b := r.NewHostModuleBuilder(module)
		if slices.Contains(wasiModules, module) {
			wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
		}
		for _, name := range slices.Sorted(maps.Keys(byModule[module])) {
			def := byModule[module][name]
			full := module + "." + name
			switch {
			case module == "env" && name == "proxy_log":
				b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, stack []uint64) {
					msg, _ := m.Memory().Read(api.DecodeU32(stack[1]), api.DecodeU32(stack[2]))
					report.logs = append(report.logs, string(msg))
					stack[0] = 0 // WasmResult::Ok
				}), def.ParamTypes(), def.ResultTypes()).Export(name)
			case allowedWhileStarting(module, name) && slices.Contains(wasiModules, module):
				// wazero's own implementation, exported above.
			default:
				b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
					panic(&restrictedCallError{name: full})
				}), def.ParamTypes(), def.ResultTypes()).Export(name)
			}
		}
		_, err := b.Instantiate(listened)
		require.NoError(t, err, "host module %s", module)
	}

	cfg := wazero.NewModuleConfig().
		WithName("plugin").
		WithStartFunctions(). // the calls below are startVm's
		WithStdout(&out).WithStderr(&out).
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().
		WithRandSource(rand.Reader)
	for k, v := range env {
		cfg = cfg.WithEnv(k, v)
	}
	mod, err := r.InstantiateModule(ctx, compiled, cfg)
	require.NoError(t, err, "instantiating the module")

	call := func(name string) error {
		f := mod.ExportedFunction(name)
		// main(argc, argv) is called with zeros, as startVm does.
		_, err := f.Call(ctx, make([]uint64, len(f.Definition().ParamTypes()))...)
		return err
	}
	if mod.ExportedFunction("_initialize") != nil {
		report.initialized = true
		report.err = call("_initialize")
		if report.err == nil && mod.ExportedFunction("main") != nil {
			report.err = call("main")
		}
	} else if mod.ExportedFunction("_start") != nil {
		report.err = call("_start")
	}
	report.stderr = out.String()
	return report
}

// experimentalListen is ctx with a listener that passes the name of every
// function called ("module.name") to record. Given only to the host
// modules' instantiation, it sees the calls into the host, not the plugin's
// own calls.
func experimentalListen(ctx context.Context, record func(string)) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, hostCallRecorder(record))
}

type hostCallRecorder func(string)

func (r hostCallRecorder) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	name := def.ModuleName() + "." + strings.Join(def.ExportNames(), ",")
	return experimental.FunctionListenerFunc(func(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
		r(name)
	})
}

// buildStartProbe compiles testdata/startprobe as a WASI reactor, the way the
// plugin is built.
func buildStartProbe(t *testing.T) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the probe module")
	out := filepath.Join(t.TempDir(), "startprobe.wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = filepath.Join("testdata", "startprobe")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "building testdata/startprobe:\n%s", b)
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	return wasm
}
