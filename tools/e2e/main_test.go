package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// pluginWasm is the plugin, built by TestMain.
var pluginWasm []byte

// TestMain builds the plugin to WASM once for every test, and fails loudly
// when it cannot: an end-to-end suite that skips the plugin proves nothing.
func TestMain(m *testing.M) {
	path, remove, err := wasmbuild.BuildTemp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building the plugin: %v\n", err)
		os.Exit(1)
	}
	pluginWasm, err = os.ReadFile(path)
	remove()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
