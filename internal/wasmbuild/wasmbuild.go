// Package wasmbuild compiles a plugin to a proxy-wasm module for tests and
// benchmarks, with the standard Go toolchain, as make build does.
package wasmbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Plugin is the plugin's main package, which make build compiles.
const Plugin = "github.com/tokenlimit/ai-token-ratelimit"

// Build compiles the main package pkg, named by its import path (e.g.
// "github.com/tokenlimit/ai-token-ratelimit"), to a WASM module at out, with
// the build tags given (e.g. "noasm"). It resolves pkg from the current
// directory's module, so it works from any package of the plugin's module
// or of a module that requires it.
func Build(pkg, out string, tags ...string) error {
	args := []string{"build", "-buildmode=c-shared", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=wasip1 GOARCH=wasm go %s failed: %v\n%s", strings.Join(cmd.Args[1:], " "), err, msg)
	}
	return nil
}

// BuildTemp builds the plugin (Plugin) into a temporary directory for a test
// binary's TestMain; remove deletes it. It never returns a path without a
// module: a suite that would run without the plugin proves nothing.
func BuildTemp() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "ai-token-ratelimit-wasm")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, "main.wasm")
	if err := Build(Plugin, path); err != nil {
		remove()
		return "", nil, err
	}
	return path, remove, nil
}
