package plugintest

import (
	"encoding/binary"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// InfoLevel answers get_log_level as a gateway logging at info does.
func InfoLevel([]byte) []byte { return binary.LittleEndian.AppendUint32(nil, 2) }

// StartEmulator starts a plugin on a VM (a WASM module's, or a Go-mode VM
// context that a Register function installed) with a configuration, logging
// at info level as a gateway does in production. stop must be called before
// the next emulator starts (the emulator is process-wide); it puts back the
// process's VM context, which every emulator replaces with its own, and
// leaves the VM open, so that one VM can serve many emulators in turn (each a
// plugin reload) without compiling a module, seconds each, every time.
func StartEmulator(tb redistest.TB, vm types.VMContext, config string) (host proxytest.HostEmulator, stop func()) {
	tb.Helper()
	registered := proxywasm.GetVMContext()
	host, reset := proxytest.NewHostEmulator(proxytest.NewEmulatorOption().
		WithPluginConfiguration([]byte(config)).WithVMContext(vm))
	stop = func() {
		reset()
		proxywasm.SetVMContext(registered)
	}
	host.RegisterForeignFunction("get_log_level", InfoLevel)
	if status := host.StartPlugin(); status != types.OnPluginStartStatusOK {
		logs := host.GetErrorLogs()
		stop()
		tb.Fatalf("plugin start: %v %q; configuration: %s", status, logs, config)
	}
	return host, stop
}
