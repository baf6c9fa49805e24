//go:build gc && !noasm

package estimate

// spansUnits is count_generic.go's, written in WASM assembly (count_wasm.s):
// Go compiled to WASM spends about 2 µs a KiB on TextFeatures, which reads
// every byte of a prompt's text.
//
//go:noescape
func spansUnits(s string, spans *textSpans) int64
