package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// pluginWasm is the plugin, built by TestMain.
var pluginWasm []byte

// TestMain builds the plugin to WASM once for every test, and fails loudly
// when it cannot: an end-to-end suite that skips the plugin proves nothing.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ai-token-ratelimit-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	path := filepath.Join(dir, "main.wasm")
	if err := wasmbuild.Build(wasmbuild.Plugin, path); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building the plugin: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	pluginWasm, err = os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
