// Package wasmbuild compiles a plugin to a proxy-wasm module for tests and
// benchmarks, with the standard Go toolchain, as make build does.
package wasmbuild

import (
	"fmt"
	"os"
	"os/exec"
)

// Plugin is the plugin's main package, which make build compiles.
const Plugin = "github.com/tokenlimit/ai-token-ratelimit"

// Build compiles the main package pkg, named by its import path (e.g.
// "github.com/tokenlimit/ai-token-ratelimit"), to a WASM module at out. It
// resolves pkg from the current directory's module, so it works from any
// package of the plugin's module or of a module that requires it.
func Build(pkg, out string) error {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared %s failed: %v\n%s", pkg, err, msg)
	}
	return nil
}
