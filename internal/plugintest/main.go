package plugintest

import (
	"fmt"
	"os"
	"testing"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// Main is a TestMain for the plugin's suites: it builds the plugin to WASM
// once for the WASM-mode half of every test.RunTest, and fails when it
// cannot (the framework would otherwise skip WASM mode quietly), then runs
// the tests. Go mode runs whatever VM context the test binary registered
// (main.go's init, or limiter.Register in the caller's TestMain).
func Main(m *testing.M) {
	path, remove, err := wasmbuild.BuildTemp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the plugin for the WASM-mode tests: %v\n", err)
		os.Exit(1)
	}
	os.Setenv("WASM_FILE_PATH", path)
	code := m.Run()
	remove()
	os.Exit(code)
}
