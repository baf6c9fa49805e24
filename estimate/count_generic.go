//go:build !wasm || !gc || noasm

package estimate

import "math/bits"

// spansUnits returns the weight of the text of the spans.n spans of s, raw
// JSON string content (see count.go), in 1/UnitsPerToken of a token. A span
// whose bit of spans.escaped is 0 has no backslash (the assembly then looks
// for none). It weighs each word as it reads it, as count_wasm.s does;
// TextFeatures, which counts the features apart, is its specification.
func spansUnits(s string, spans *textSpans) int64 {
	var units int64
	for k, at := range spans.at[:spans.n] {
		units += spanUnits(s[:at[1]], int(at[0]), spans.escaped>>k&1 != 0)
	}
	return units
}

// spanUnits weighs s[i:].
func spanUnits(s string, i int, escapes bool) (units int64) {
	var carry uint64
	for i < len(s) {
		x, n := loadUpTo8(s, i)
		if escapes {
			if b := zeroBytes(x^'\\'*lowBits) & validBytes(n); b != 0 {
				n = bits.TrailingZeros64(b) / 8
			}
		}
		if n > 0 {
			var u int64
			u, carry = wordUnits(x, n, carry)
			units += u
			i += n
			continue
		}
		var f [NumTextFeatures]int64
		i += escapeFeatures(s, i, &f)
		for k, c := range f {
			units += c * TextWeights[k]
		}
		carry = 0
	}
	return units
}

// wordUnits is wordFeatures weighed: each feature's count times its
// weight, less the weight of the class it is counted in first.
func wordUnits(x uint64, n int, carry uint64) (int64, uint64) {
	valid := validBytes(n)
	ascii := ^x & valid
	letter := ((x | highBits) - 0x41*lowBits) & ascii
	digit := ((x | highBits) - 0x30*lowBits) &^ ((x | highBits) - 0x3a*lowBits) & ascii
	space := ^((x | highBits) - 0x21*lowBits) & ascii
	units := int64(n)*weightOther +
		int64(bits.OnesCount64(letter))*(weightLetter-weightOther) +
		int64(bits.OnesCount64(space))*(weightSpace-weightOther) +
		int64(bits.OnesCount64(letter&^(letter<<8|carry&0x80)))*weightWord +
		int64(bits.OnesCount64(digit&^(digit<<8|carry<<1&0x80)))*weightNumber
	if high := x & valid; high != 0 {
		lead := high & (x << 1)
		lead3 := lead & (x << 2)
		units += int64(bits.OnesCount64(high))*(weightCont-weightOther) +
			int64(bits.OnesCount64(lead))*(weightLead2-weightCont) +
			int64(bits.OnesCount64(lead3))*(weightLead3-weightLead2) +
			int64(bits.OnesCount64(lead3&(x<<3)))*(weightLead4-weightLead3) +
			int64(bits.OnesCount64(lead3&^(x<<3)&^(x<<4)&^(x<<5)&^(x<<6&(x<<7))))*(weightLead3Low-weightLead3)
	}
	last := uint(8*n - 8)
	return units, letter>>last&0x80 | digit>>last>>1&0x40
}
