package estimate

import (
	"math/bits"
	"unicode/utf16"
)

// The calibrated count of text
//
// Prompt text is counted in tokens the way a BPE tokenizer splits it, without
// running one: each byte of the text's JSON form weighs by its class, and
// each start of a run of letters or of digits adds the weight of a word or a
// number. The weights are fitted (tools/tokenfit) to OpenAI's o200k_base
// tokenizer on the Universal Declaration of Human Rights in 23 languages,
// English prose, Go code, compact JSON and a JSON schema, and markdown. On
// that corpus the count is within 10 % of o200k's for 56 % of the samples
// and within 25 % for 92 % of them (bytes ÷ 4: 23 % and 53 %); 80 % of the
// samples lie between 0.80 and 1.13 times o200k's count (bytes ÷ 4: 0.73
// and 1.88, 2x over on Cyrillic and Indic scripts, 1.7x under on compact
// JSON). What no byte class tells is how well a language's words are known
// to the tokenizer: Russian is counted 1.3x over, Polish 0.8x. A byte-class
// count is cheap enough to run on every byte of a prompt: 8 bytes at a time,
// in WASM assembly in the plugin (count_wasm.s), where a BPE pass costs a
// hundred times more.
//
// The classes are those a few bit operations tell apart in a word of 8
// bytes: ASCII bytes from 'A' up (letters, and [\]^_`{|}~), spaces (and the
// controls below them, which JSON has only between tokens), other ASCII
// bytes (digits, punctuation), UTF-8 continuation bytes, and the lead
// bytes of 2-byte characters (Latin, Greek, Cyrillic, Hebrew, Arabic…), of
// 3-byte characters below U+3000 (Indic and Southeast Asian scripts,
// symbols), of 3-byte characters from U+3000 (CJK, Hangul) and of 4-byte
// characters (emoji). An escape counts as the character it stands for: a \u
// escape (ASCII-only JSON writes every other character so) as its
// character's UTF-8 bytes, a two-byte escape (\n, \") as one other ASCII
// byte.

// Features of text that the count weighs.
const (
	featLetter   = iota // an ASCII byte from 'A' (0x41) up
	featOther           // another ASCII byte: digits, punctuation
	featCont            // a UTF-8 continuation byte (0x80–0xBF)
	featLead2           // the lead byte of a 2-byte character (0xC0–0xDF)
	featLead3Low        // of a 3-byte character below U+3000 (0xE0–0xE2)
	featLead3           // of a 3-byte character from U+3000 (0xE3–0xEF)
	featLead4           // of a 4-byte character (0xF0–0xFF)
	featWord            // the first letter of a run of letters
	featNumber          // the first digit of a run of digits
	featSpace           // ' ' (and the controls below it, whitespace between JSON tokens)
	NumTextFeatures
)

// Bytes with the high bit set, and with the low bit set, for reading 8
// bytes at a time.
const (
	highBits = 0x8080808080808080
	lowBits  = 0x0101010101010101
)

// UnitsPerToken is the fixed point of TextWeights: a weight of UnitsPerToken
// is one token.
const UnitsPerToken = 1 << 10

// The weights of the features, in 1/UnitsPerToken of a token, as
// tools/tokenfit fits them (constants, for the assembly).
const (
	weightLetter   = 32
	weightOther    = 396
	weightCont     = 114
	weightLead2    = 241
	weightLead3Low = 164
	weightLead3    = 621
	weightLead4    = 1913
	weightWord     = 1016
	weightNumber   = 1039
	weightSpace    = 40
)

// TextWeights are the weights of the features, in 1/UnitsPerToken of a
// token.
var TextWeights = [NumTextFeatures]int64{
	featLetter:   weightLetter,
	featOther:    weightOther,
	featCont:     weightCont,
	featLead2:    weightLead2,
	featLead3Low: weightLead3Low,
	featLead3:    weightLead3,
	featLead4:    weightLead4,
	featWord:     weightWord,
	featNumber:   weightNumber,
	featSpace:    weightSpace,
}

// TextFeatures counts the features of raw JSON string content (what is
// between the quotes, escapes as written), the count that TextWeights
// weighs. tools/tokenfit fits the weights with it; the plugin weighs text
// in one pass (spansUnits), which the tests hold to these counts.
func TextFeatures(s string) (f [NumTextFeatures]int64) {
	var carry uint64
	for i := 0; i < len(s); {
		x, n := loadUpTo8(s, i)
		if b := zeroBytes(x^'\\'*lowBits) & validBytes(n); b != 0 {
			n = bits.TrailingZeros64(b) / 8 // up to the escape
		}
		if n > 0 {
			carry = wordFeatures(x, n, carry, &f)
			i += n
			continue
		}
		i += escapeFeatures(s, i, &f)
		carry = 0
	}
	return f
}

// loadUpTo8 returns the up to 8 bytes at s[i:] as a little-endian word, and
// how many there are.
func loadUpTo8(s string, i int) (x uint64, n int) {
	if i+8 <= len(s) {
		return load8(s, i), 8
	}
	n = len(s) - i
	for k := n - 1; k >= 0; k-- {
		x = x<<8 | uint64(s[i+k])
	}
	return x, n
}

// validBytes flags the high bit of the low n bytes of a word.
func validBytes(n int) uint64 {
	if n >= 8 {
		return highBits
	}
	return highBits & (1<<(8*n) - 1)
}

// zeroBytes flags the high bit of each byte of x that is 0, exactly (no
// flag is set by a borrow from another byte).
func zeroBytes(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((x&low7 + low7) | x | low7)
}

// wordFeatures adds the features of the low n bytes of x, which follow a
// byte whose letter and digit flags are in carry (bit 7 a letter, bit 6 a
// digit), and returns the flags of its last byte.
func wordFeatures(x uint64, n int, carry uint64, f *[NumTextFeatures]int64) uint64 {
	valid := validBytes(n)
	ascii := ^x & valid
	letter := ((x | highBits) - 0x41*lowBits) & ascii
	digit := ((x | highBits) - 0x30*lowBits) &^ ((x | highBits) - 0x3a*lowBits) & ascii
	high := x & valid
	lead := high & (x << 1)
	lead3 := lead & (x << 2)
	lead4 := lead3 & (x << 3)
	lead3Low := lead3 &^ (x << 3) &^ (x << 4) &^ (x << 5) &^ (x << 6 & (x << 7)) // 0xE0–0xE2
	wordStarts := letter &^ (letter<<8 | carry&0x80)
	numberStarts := digit &^ (digit<<8 | carry<<1&0x80)

	f[featLetter] += int64(bits.OnesCount64(letter))
	space := ^((x | highBits) - 0x21*lowBits) & ascii
	f[featOther] += int64(bits.OnesCount64(ascii &^ letter &^ space))
	f[featSpace] += int64(bits.OnesCount64(space))
	f[featCont] += int64(bits.OnesCount64(high &^ lead))
	f[featLead2] += int64(bits.OnesCount64(lead &^ lead3))
	f[featLead3Low] += int64(bits.OnesCount64(lead3Low))
	f[featLead3] += int64(bits.OnesCount64(lead3 &^ lead4 &^ lead3Low))
	f[featLead4] += int64(bits.OnesCount64(lead4))
	f[featWord] += int64(bits.OnesCount64(wordStarts))
	f[featNumber] += int64(bits.OnesCount64(numberStarts))

	last := uint(8*n - 8)
	return letter>>last&0x80 | digit>>last>>1&0x40
}

// escapeFeatures adds the features of the escape at s[i] (a backslash) and
// returns its length: a \u escape counts as its character's UTF-8 bytes
// (a surrogate pair as a 4-byte character, its first half as the lead and
// continuation bytes, its second half as nothing), anything else as one
// other ASCII byte over two bytes (or one, at the end of s).
func escapeFeatures(s string, i int, f *[NumTextFeatures]int64) int {
	if i+1 < len(s) && s[i+1] == 'u' {
		if r, ok := hex4(s, i+2); ok {
			switch {
			case r < 0x80:
				wordFeatures(uint64(r), 1, 0, f)
			case r < 0x800:
				f[featLead2]++
				f[featCont]++
			case r < 0x3000:
				f[featLead3Low]++
				f[featCont] += 2
			case utf16.IsSurrogate(r) && r < 0xdc00: // the first half of a pair
				f[featLead4]++
				f[featCont] += 3
			case utf16.IsSurrogate(r): // the second
			default:
				f[featLead3]++
				f[featCont] += 2
			}
			return 6
		}
	}
	f[featOther]++
	return min(2, len(s)-i)
}
