// Package wasmbuild compiles a plugin to a proxy-wasm module for tests and
// benchmarks, with the standard Go toolchain, as make build does.
package wasmbuild

import (
	"fmt"
	"os"
	"os/exec"
)

// Build compiles the main package pkg (e.g. "." or "./internal/noopplugin"),
// resolved from the directory dir, to a WASM module at out.
func Build(dir, pkg, out string) error {
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared %s failed: %v\n%s", pkg, err, msg)
	}
	return nil
}
