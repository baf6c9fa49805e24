//go:build gc && !noasm

package estimate

// skipValue is skip_generic.go's, written in WASM assembly (skip_wasm.s).
//
//go:noescape
func skipValue(s string, i, maxNest int, simple *[256]bool) (end int, ok bool)
