package limiter_test

import (
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// goVM is the VM context Register installed, Go mode's, for a test that
// starts the emulator on it itself (an emulator's reset takes it out of
// the SDK's state).
var goVM types.VMContext

// TestMain registers the plugin's hooks for Go mode, as main.go's init does
// in the plugin, and builds the plugin for WASM mode.
func TestMain(m *testing.M) {
	limiter.Register()
	goVM = proxywasm.GetVMContext()
	plugintest.Main(m)
}
