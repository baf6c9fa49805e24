package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// pluginWasm is the plugin, built from the module root by TestMain.
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
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", path, ".")
	build.Dir = ".." // the module root: the plugin's main package
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building the plugin (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared .) failed: %v\n%s", err, out)
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
