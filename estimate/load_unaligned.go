//go:build wasm || amd64 || arm64 || 386

package estimate

import "unsafe"

// load8 returns the 8 bytes at s[i:i+8] (i+8 ≤ len(s)) as a little-endian
// word. On these targets an unaligned load is allowed and is one
// instruction. (The standard Go toolchain's WASM build scans strings in
// assembly instead, scan_wasm.s; other WASM compilers use this.)
func load8(s string, i int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))
}
