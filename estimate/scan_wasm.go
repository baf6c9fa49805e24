//go:build gc && !noasm

package estimate

// scanString is written in WASM assembly (scan_wasm.s): Go compiled to WASM
// spends about 1 ns a byte on the loop of scan_generic.go, the assembly a
// third of that, and most of a large body is string content.
//
//go:noescape
func scanString(s string, i int, simple *[256]bool) (j, escapes int)
