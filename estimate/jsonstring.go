package estimate

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// decodedStr reads a string and returns it decoded (its first
// len(w.scratch) bytes), allocating once a walk: a string with escapes is
// decoded into w.scratch, and is a word the walker compares keys and
// values to (knownWords, as that constant), or a string valid only until
// the next decodedStr (keys and values the walker does not know are only
// ever compared where they are read).
func (w *walker) decodedStr() string {
	raw, n := w.str()
	if n == int64(len(raw)) || w.bad {
		return raw
	}
	return w.decodeEscaped(raw)
}

// decodeEscaped returns a string's raw content with escapes decoded, as
// decodedStr does.
func (w *walker) decodeEscaped(raw string) string {
	w.steps += 4 // decoding, and the look-up of the word
	if w.whole && len(raw) > len(w.scratch) {
		return gjson.Parse(`"` + raw + `"`).Str // decoded whole (it may not fit the scratch)
	}
	if w.scratch == nil {
		w.scratch = new([64]byte)
	}
	b := unescape(w.scratch[:0], raw)
	if k, ok := knownWords.find(b); ok {
		return k
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// wordTable holds a set of words to find a string among without hashing it
// whole (a map's hash costs in WASM): each word is in the first free slot
// from wordSlot of its length and its first and last bytes, in a table at
// most a third full.
type wordTable [256]string

// newWordTable returns the table of words (none empty, at most 85).
func newWordTable(words ...string) *wordTable {
	var t wordTable
	for _, w := range words {
		h := wordSlot(len(w), w[0], w[len(w)-1])
		for t[h] != "" && t[h] != w {
			h++
		}
		t[h] = w
	}
	return &t
}

func wordSlot(n int, first, last byte) uint8 {
	return uint8(n*37 + int(first)*5 + int(last))
}

// find returns the word of the table that b spells, if there is one.
func (t *wordTable) find(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	for h := wordSlot(len(b), b[0], b[len(b)-1]); t[h] != ""; h++ {
		if t[h] == string(b) {
			return t[h], true
		}
	}
	return "", false
}

// unescape appends the raw content of a valid JSON string to dst, decoded
// as gjson decodes it (see str), up to cap(dst) bytes.
func unescape(dst []byte, raw string) []byte {
	for i := 0; i < len(raw) && len(dst) < cap(dst); {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			dst = append(dst, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst, i = append(dst, '\b'), i+2
		case 'f':
			dst, i = append(dst, '\f'), i+2
		case 'n':
			dst, i = append(dst, '\n'), i+2
		case 'r':
			dst, i = append(dst, '\r'), i+2
		case 't':
			dst, i = append(dst, '\t'), i+2
		case 'u':
			r, _ := hex4(raw, i+2)
			i += 6
			if r < utf8.RuneSelf { // ASCII, as in an escaped key
				dst = append(dst, byte(r))
				continue
			}
			if utf16.IsSurrogate(r) && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
				r2, _ := hex4(raw, i+2)
				r = utf16.DecodeRune(r, r2)
				i += 6
			} else if utf16.IsSurrogate(r) {
				r = utf8.RuneError
			}
			var enc [utf8.UTFMax]byte
			for _, b := range enc[:utf8.EncodeRune(enc[:], r)] {
				if len(dst) < cap(dst) {
					dst = append(dst, b)
				}
			}
		default: // '"', '\\', '/'
			dst, i = append(dst, raw[i+1]), i+2
		}
	}
	return dst
}

// str reads and validates the string at w.i (at its opening quote). It
// returns its raw content and its decoded length, which is the raw length
// less what the escapes save. Decoding is gjson's: a \u escape of a
// surrogate takes the \u escape right after it as its pair, and a lone
// surrogate or an invalid pair decodes to U+FFFD.
func (w *walker) str() (raw string, decoded int64) {
	w.steps++
	start := w.i + 1
	// scanString skips the plain bytes and the two-byte escapes (\n,
	// \"), each of which saves a byte.
	j, escapes := scanString(w.s, start, &simpleEscape)
	return w.strFrom(start, j, int64(escapes))
}

// strFrom is str, for the string whose content starts at s[start] and has
// been scanned up to s[i] (scanString), its escapes saving saved bytes so
// far.
func (w *walker) strFrom(start, i int, saved int64) (raw string, decoded int64) {
	s := w.s
	for {
		if i >= len(s) {
			w.bad = true
			w.i = len(s)
			return "", 0
		}
		switch s[i] {
		case '"':
			w.i = i + 1
			return s[start:i], int64(i-start) - saved
		case '\\':
			n, less := w.escape(i)
			if n == 0 {
				w.i = i
				return "", 0
			}
			i += n
			saved += int64(less)
		default: // a control character
			w.bad = true
			w.i = i
			return "", 0
		}
		j, escapes := scanString(s, i, &simpleEscape)
		i = j
		saved += int64(escapes)
	}
}

// simpleEscape marks the bytes that make a two-byte escape after a backslash.
var simpleEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// escape validates the escape at s[i] (a backslash). It returns its raw
// length n and how much longer that is than its decoded form, or n = 0,
// having marked the walk bad, if it is not valid.
func (w *walker) escape(i int) (n, less int) {
	s := w.s
	if i+1 >= len(s) {
		w.bad = true
		return 0, 0
	}
	switch s[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, 1
	case 'u':
		r, ok := hex4(s, i+2)
		if !ok {
			w.bad = true
			return 0, 0
		}
		n = 6
		if utf16.IsSurrogate(r) && i+7 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
			r2, ok := hex4(s, i+8)
			if !ok {
				w.bad = true
				return 0, 0
			}
			r = utf16.DecodeRune(r, r2)
			n = 12
		}
		if l := utf8.RuneLen(r); l > 0 {
			return n, n - l
		}
		return n, n - len(string(utf8.RuneError))
	default:
		w.bad = true
		return 0, 0
	}
}

// decodeString returns the value of a valid JSON string token (quotes
// included), allocating only when it has escapes. Its result may alias tok.
func decodeString(tok string) string {
	if strings.IndexByte(tok, '\\') < 0 {
		return tok[1 : len(tok)-1]
	}
	return gjson.Parse(tok).Str
}

// hex4 parses the four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
