//go:build !wasm || !gc || noasm

package estimate

// spansUnits returns the weight of the text of the spans.n spans of s, raw
// JSON string content (see count.go), in 1/UnitsPerToken of a token. A span
// whose bit of spans.escaped is 0 has no backslash (the assembly then looks
// for none).
func spansUnits(s string, spans *textSpans) int64 {
	var units int64
	for _, at := range spans.at[:spans.n] {
		units += textUnitsGo(s[at[0]:at[1]])
	}
	return units
}
