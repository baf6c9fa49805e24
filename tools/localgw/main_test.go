package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequiredFlagsAreNamed(t *testing.T) {
	assert.ErrorContains(t, options{upstream: "http://llm.invalid:8081"}.check(), "-config is required")
	assert.ErrorContains(t, options{config: "c.yaml"}.check(), "-upstream is required")
	assert.NoError(t, options{config: "c.yaml", upstream: "http://llm.invalid:8081"}.check())
}

func TestStartErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	base := options{upstream: "http://127.0.0.1:9", redis: "127.0.0.1:9", listen: "127.0.0.1:0", logLevel: "info",
		config: "example.yaml", wasm: filepath.Join(dir, "main.wasm")}

	err := run(base)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist: build it with `make build`")

	notWasm := filepath.Join(dir, "not.wasm")
	require.NoError(t, os.WriteFile(notWasm, []byte("not a module"), 0o644))
	o := base
	o.wasm, o.config = notWasm, filepath.Join(dir, "missing.yaml")
	assert.ErrorContains(t, run(o), "reading the plugin configuration")

	o.config = "example.yaml"
	assert.ErrorContains(t, run(o), "loading the plugin")
}
