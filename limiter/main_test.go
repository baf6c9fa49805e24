package limiter_test

import (
	"testing"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// TestMain registers the plugin's hooks for Go mode, as main.go's init does
// in the plugin, and builds the plugin for WASM mode.
func TestMain(m *testing.M) {
	limiter.Register()
	plugintest.Main(m)
}
