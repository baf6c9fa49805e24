// Package wasmhost runs the plugin's WASM module in the proxy-wasm host
// emulator (proxytest) as a gateway runs it, where the emulator's own
// loader does not:
//
//   - the module's clocks are the machine's (wall and monotonic) and its
//     random_get is crypto/rand, as in Envoy; proxytest.NewWasmVMContext
//     gives wazero's defaults, a clock that moves one millisecond per read
//     from 2022-01-01 and the same random bytes in every VM, so that every
//     duration the plugin measures counts clock reads and every VM draws
//     the same ids;
//   - a stream's context is deleted in the module when the stream is done
//     (proxy_on_log, then proxy_on_delete, as Envoy calls them); the
//     emulator calls only proxy_on_log in a module, which then keeps every
//     request it ever saw;
//   - a property the module sets is kept as a copy, as in Envoy; the
//     emulator keeps a view of the module's memory, which the module
//     reuses (property.go);
//   - Forget drops what the emulator itself keeps of a finished stream,
//     and the properties the module set (a stream's own in Envoy);
//   - Metrics lists the metrics the module defined, and Options.Recorded
//     sees each value it records (the emulator keeps only the last).
//
// A test that needs the emulator's determinism asks for it (Options).
package wasmhost

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	_ "unsafe" // go:linkname, below

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The emulator's host functions (the "env" module a proxy-wasm module
// imports) and the context key they read the plugin context's id from are
// unexported in proxytest; they are taken from it as they are, so that the
// module talks to the same emulator as with proxytest.NewWasmVMContext.
// The SDK is pinned in go.mod; TestNewVMRunsThePlugin fails if an upgrade
// renames them.
//
//go:linkname exportHostABI github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest.exportHostABI
func exportHostABI(ctx context.Context, r wazero.Runtime) error

//go:linkname withPluginContextID github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest.withPluginContextID
func withPluginContextID(ctx context.Context, id uint32) context.Context

// Options are what a VM's module sees of its host besides the emulator.
type Options struct {
	// Rand is the module's random_get; nil: crypto/rand, as a gateway's.
	// A fixed source (the same bytes for two VMs) stands for a host whose
	// randomness is not seeded.
	Rand io.Reader
	// EmulatorClock: wazero's default clocks, each read one millisecond
	// after the last from 2022-01-01, the same in every VM; false: the
	// machine's wall and monotonic clocks.
	EmulatorClock bool
	// Recorded, when set, is called with each value the module records
	// into a metric (proxy_record_metric: a histogram's sample, or a
	// gauge's new value), before the emulator stores it. The emulator
	// keeps one value per metric, the last, so a histogram's samples are
	// seen here or nowhere. It runs inside the call into the module that
	// records, on that call's goroutine, and must not call into the module.
	Recorded func(metricID uint32, value uint64)
}

// NewVM compiles a proxy-wasm module and instantiates it for the host
// emulator (proxytest.WithVMContext), with real clocks and randomness
// unless opts say otherwise. Close releases it.
func NewVM(wasm []byte, opts Options) (proxytest.WasmVMContext, error) {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	fail := func(what string, err error) (proxytest.WasmVMContext, error) {
		r.Close(ctx)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		return fail("WASI", err)
	}
	listeners := []experimental.FunctionListenerFactory{propertyCopies{}}
	if opts.Recorded != nil {
		listeners = append(listeners, recordListener(opts.Recorded))
	}
	hostCtx := experimental.WithFunctionListenerFactory(ctx, experimental.MultiFunctionListenerFactory(listeners...))
	if err := exportHostABI(hostCtx, r); err != nil {
		return fail("the emulator's host functions", err)
	}
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return fail("compiling the module", err)
	}
	config := wazero.NewModuleConfig().
		WithStartFunctions("_initialize", "_start", "main").
		WithStdout(os.Stderr).
		WithStderr(os.Stderr).
		WithRandSource(rand.Reader)
	if opts.Rand != nil {
		config = config.WithRandSource(opts.Rand)
	}
	if !opts.EmulatorClock {
		config = config.WithSysWalltime().WithSysNanotime().WithSysNanosleep()
	}
	mod, err := r.InstantiateModule(ctx, compiled, config)
	if err != nil {
		return fail("starting the module", err)
	}
	g := &guest{ctx: ctx, runtime: r, mod: mod}
	for name, f := range map[string]*api.Function{
		"proxy_on_vm_start": &g.onVMStart, "proxy_on_context_create": &g.onContextCreate,
		"proxy_on_configure": &g.onConfigure, "proxy_on_done": &g.onDone,
		"proxy_on_queue_ready": &g.onQueueReady, "proxy_on_tick": &g.onTick,
		"proxy_on_request_headers": &g.onRequestHeaders, "proxy_on_request_body": &g.onRequestBody,
		"proxy_on_request_trailers": &g.onRequestTrailers, "proxy_on_response_headers": &g.onResponseHeaders,
		"proxy_on_response_body": &g.onResponseBody, "proxy_on_response_trailers": &g.onResponseTrailers,
		"proxy_on_log": &g.onLog, "proxy_on_delete": &g.onDelete,
	} {
		if *f = mod.ExportedFunction(name); *f == nil {
			return fail("the module", fmt.Errorf("it exports no %s: not a proxy-wasm module", name))
		}
	}
	return g, nil
}

// guest is a module instance, called as the emulator calls a VM context;
// its plugin and HTTP contexts are pluginContext and httpContext.
type guest struct {
	ctx     context.Context
	runtime wazero.Runtime
	mod     api.Module

	onVMStart, onContextCreate, onConfigure, onDone, onQueueReady, onTick  api.Function
	onRequestHeaders, onRequestBody, onRequestTrailers                     api.Function
	onResponseHeaders, onResponseBody, onResponseTrailers, onLog, onDelete api.Function
}

// call calls one of the module's exports; a trap is a panic, as in the
// emulator's own loader (the caller recovers and stops using the VM).
func (g *guest) call(ctx context.Context, f api.Function, args ...uint64) uint64 {
	res, err := f.Call(ctx, args...)
	if err != nil {
		panic(err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

func (g *guest) OnVMStart(vmConfigurationSize int) types.OnVMStartStatus {
	return g.call(g.ctx, g.onVMStart, 0, uint64(vmConfigurationSize)) == 1
}

func (g *guest) NewPluginContext(contextID uint32) types.PluginContext {
	g.call(g.ctx, g.onContextCreate, uint64(contextID), 0)
	return &pluginContext{g: g, id: uint64(contextID), ctx: withPluginContextID(g.ctx, contextID)}
}

func (g *guest) Close() error { return g.runtime.Close(g.ctx) }

type pluginContext struct {
	g   *guest
	id  uint64
	ctx context.Context
}

func (p *pluginContext) OnPluginStart(size int) types.OnPluginStartStatus {
	return p.g.call(p.ctx, p.g.onConfigure, p.id, uint64(size)) == 1
}

func (p *pluginContext) OnPluginDone() bool { return p.g.call(p.ctx, p.g.onDone, p.id) == 1 }

func (p *pluginContext) OnQueueReady(queueID uint32) {
	p.g.call(p.ctx, p.g.onQueueReady, p.id, uint64(queueID))
}

func (p *pluginContext) OnTick() { p.g.call(p.ctx, p.g.onTick, p.id) }

func (p *pluginContext) NewTcpContext(uint32) types.TcpContext { return nil }

func (p *pluginContext) NewHttpContext(contextID uint32) types.HttpContext {
	p.g.call(p.ctx, p.g.onContextCreate, uint64(contextID), p.id)
	return &httpContext{p: p, id: uint64(contextID)}
}

type httpContext struct {
	p  *pluginContext
	id uint64
}

func (h *httpContext) call(f api.Function, args ...uint64) types.Action {
	return types.Action(h.p.g.call(h.p.ctx, f, append([]uint64{h.id}, args...)...))
}

func (h *httpContext) OnHttpRequestHeaders(n int, end bool) types.Action {
	return h.call(h.p.g.onRequestHeaders, uint64(n), wasmBool(end))
}

func (h *httpContext) OnHttpRequestBody(size int, end bool) types.Action {
	return h.call(h.p.g.onRequestBody, uint64(size), wasmBool(end))
}

func (h *httpContext) OnHttpRequestTrailers(n int) types.Action {
	return h.call(h.p.g.onRequestTrailers, uint64(n))
}

func (h *httpContext) OnHttpResponseHeaders(n int, end bool) types.Action {
	return h.call(h.p.g.onResponseHeaders, uint64(n), wasmBool(end))
}

func (h *httpContext) OnHttpResponseBody(size int, end bool) types.Action {
	return h.call(h.p.g.onResponseBody, uint64(size), wasmBool(end))
}

func (h *httpContext) OnHttpResponseTrailers(n int) types.Action {
	return h.call(h.p.g.onResponseTrailers, uint64(n))
}

// OnHttpStreamDone is the end of the stream as Envoy has it: the module's
// proxy_on_log, then proxy_on_delete, after which the SDK in the module
// holds nothing of the context (the plugin's own state of the request is
// the plugin's to drop).
func (h *httpContext) OnHttpStreamDone() {
	h.call(h.p.g.onLog)
	h.call(h.p.g.onDelete)
}

func wasmBool(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
