//go:build gc && !noasm

package estimate

// plainTurns is plain_generic.go's, written in WASM assembly
// (plain_wasm.s).
//
//go:noescape
func plainTurns(s string, i int, first bool, simple *[256]bool, spans *textSpans) (end, n int, text, units int64)
