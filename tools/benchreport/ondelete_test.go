package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
	"github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin"
)

// The rewritten proxy_on_log deletes the context: a proxy_on_delete after
// it finds none (the SDK's proxyOnDelete panics on an unknown context: the
// module traps inside it), where the module as
// built still has it. Both plugins, each started as a host starts it, with
// a host that answers every call with zeros.
func TestDeleteAfterLogDeletesTheContext(t *testing.T) {
	for _, pkg := range []string{wasmbuild.Plugin, noopplugin.WASM} {
		built := builtWasm(t, pkg)
		patched, err := deleteAfterLog(built)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		if err := logThenDelete(t, built); err != nil {
			t.Errorf("%s as built: proxy_on_delete after proxy_on_log failed: %v", pkg, err)
		}
		err = logThenDelete(t, patched)
		if err == nil || !strings.Contains(err.Error(), "internal.proxyOnDelete") {
			t.Errorf("%s rewritten: proxy_on_delete after proxy_on_log says %v, want the context gone", pkg, err)
		}
	}
}

func TestDeleteAfterLogRefusesWhatItCannotRewrite(t *testing.T) {
	for _, module := range [][]byte{nil, []byte("\x00asm\x01\x00\x00\x00"), []byte("not wasm at all")} {
		if _, err := deleteAfterLog(module); err == nil {
			t.Errorf("%q: rewritten", module)
		}
	}
}

// logThenDelete starts module with a stub host, creates a plugin context
// and an HTTP context, ends the HTTP context as the emulator does
// (proxy_on_log) and then deletes it as a gateway does: the error of that
// last call.
func logThenDelete(t *testing.T, module []byte) error {
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, module)
	if err != nil {
		t.Fatalf("compiling: %v", err)
	}
	wasi := wasi_snapshot_preview1.NewBuilder(r)
	if _, err := wasi.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	env := r.NewHostModuleBuilder("env")
	var names []string
	for _, d := range compiled.ImportedFunctions() {
		if module, name, _ := d.Import(); module == "env" && !slices.Contains(names, name) {
			names = append(names, name)
			env.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
				clear(stack) // 0: WasmResult::Ok, and no value
			}), d.ParamTypes(), d.ResultTypes()).Export(name)
		}
	}
	if _, err := env.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := r.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatalf("instantiating: %v", err)
	}
	call := func(name string, args ...uint64) error {
		_, err := mod.ExportedFunction(name).Call(ctx, args...)
		return err
	}
	const root, http = 1, 2
	for _, step := range []struct {
		name string
		args []uint64
	}{
		{"proxy_on_context_create", []uint64{root, 0}},
		{"proxy_on_context_create", []uint64{http, root}},
		{"proxy_on_log", []uint64{http}},
	} {
		if err := call(step.name, step.args...); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	return call("proxy_on_delete", http)
}
