//go:build !wasm || !gc || noasm

package estimate

import "math/bits"

// scanString returns the index j of the first quote, backslash or control
// character at or after s[i] (len(s) if there is none), skipping the
// two-byte escapes marked in simple (a backslash and a byte b with
// simple[b]), whose number it returns. The content of strings, most of a
// body, is read 8 bytes at a time.
func scanString(s string, i int, simple *[256]bool) (j, escapes int) {
	for {
		// Skip 8 bytes at a time while none of them is a quote, a
		// backslash or a control character. In each of the three masks
		// the lowest flagged byte is exact (a false positive only ever
		// sits above a true one), so the lowest of them all is too.
		for i+8 <= len(s) {
			x := load8(s, i)
			quote, backslash := x^('"'*lowBits), x^('\\'*lowBits)
			m := (x-' '*lowBits)&^x | (quote-lowBits)&^quote | (backslash-lowBits)&^backslash
			if m &= highBits; m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		for ; i < len(s); i++ {
			if c := s[i]; c == '"' || c == '\\' || c < ' ' {
				break
			}
		}
		if i+1 >= len(s) || s[i] != '\\' || !simple[s[i+1]] {
			return i, escapes
		}
		i += 2
		escapes++
	}
}
