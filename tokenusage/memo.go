package tokenusage

import (
	"bytes"
	"unsafe"
)

// lineMemo lets a data line of server-sent events skip what it shares with
// the line before. The events of a stream mostly differ only in their text:
// OpenAI's chunks repeat their id, object, created, model and fingerprint,
// and open choices[0].delta, before each piece of content; Anthropic's
// deltas and Gemini's candidates likewise. Reading those members again
// costs most of an event in WASM, where every step is dear.
//
// The lexer reads a line from a fresh root (the top level, nothing
// pending) as a function of its bytes: the state after any prefix of the
// line depends on that prefix alone (members takes the same steps as the
// byte-level switch, wherever it stops). So lexLine remembers, of a line
// whose first text value is a short string without escapes, the bytes up
// to that value's opening quote, with the objects and arrays open at its
// key; a later line that starts with the same bytes up to the key's
// opening quote starts members there, with those levels, as reading the
// bytes again would have left them. When, in the remembered line, nothing
// after the text had an effect either (no more text, no usage) and the
// root ended at the line's end, the rest of the line is remembered too: a
// later line that is the same but for its text (without a quote or a
// backslash: its length is the text it stands for) is counted and done.
// Nothing before the text has an effect (text, usage) that would be
// skipped with the bytes: members reads only values without one.
type lineMemo struct {
	key   int              // the key's opening quote (0: nothing remembered)
	text  int              // the text value's opening quote
	depth int              // objects and arrays open at the key
	open  [maxLevels]level // them, outermost first
	tailN int              // bytes of the line's end; 0: none, -1: the line after did not match it
	// The line up to the text (its opening quote included), then its end
	// from the text's closing quote: the text is what lines differ by.
	buf [maxMemoBytes]byte

	// At the start of the line being read and remembered: the Parser's
	// text bytes, to tell whether there was more text after the text; and
	// where the text closes.
	textBytes int64
	textEnd   int
}

// maxMemoBytes bounds what is remembered of a line before and after its
// text: more than every provider's events need (OpenAI's, the longest,
// ~215 bytes before their content and ~55 after).
const maxMemoBytes = 320

// forget starts a line that did not match: it may be remembered instead.
func (m *lineMemo) forget(p *Parser) {
	m.key, m.tailN = 0, 0
	m.textBytes = p.textBytes
}

// remember notes the line in data, whose first text value opens at
// data[text] and closes at data[textEnd], the value of the key opening at
// data[key] where depth objects and arrays are open (p.lex.open). members
// calls it only from a run that started at the line's start: what it read
// before had no effect (it leaves every value with one to the switch).
func (m *lineMemo) remember(p *Parser, data []byte, key, text, textEnd, depth int) {
	if text >= maxMemoBytes {
		return
	}
	copy(m.buf[:], data[:text+1])
	m.key, m.text, m.textEnd, m.depth = key, text, textEnd, depth
	copy(m.open[:depth], p.lex.open[:depth])
}

// rememberTail notes the rest of the remembered line in data, from its
// text's closing quote to its end at data[end], when members read the line
// to its end (where the root ended) and found no more text after the text:
// then nothing after it had an effect (members leaves usage to the switch).
func (m *lineMemo) rememberTail(p *Parser, data []byte, end int) {
	textLen := int64(m.textEnd - m.text - 1)
	if m.text+1+end-m.textEnd > maxMemoBytes || p.textBytes != m.textBytes+textLen {
		return
	}
	m.tailN = copy(m.buf[m.text+1:], data[m.textEnd:end])
}

// matches says whether data, a data line starting at a fresh root, starts
// with the remembered bytes up to the key's opening quote.
func (m *lineMemo) matches(data []byte) bool {
	return len(data) > m.key && samePrefix(data[:m.key+1], m.buf[:m.key+1])
}

// sameLine reads data, a data line that matches, when it is the remembered
// line but for its text: it counts the text and returns where the line ends
// (0: it is not).
func (m *lineMemo) sameLine(p *Parser, data []byte) int {
	if m.tailN <= 0 || len(data) <= m.text || !samePrefix(data[m.key+1:m.text+1], m.buf[m.key+1:m.text+1]) {
		return 0
	}
	text := data[m.text+1:]
	q := bytes.IndexByte(text, '"')
	if q < 0 || bytes.IndexByte(text[:q], '\\') >= 0 {
		return 0
	}
	end := m.text + 1 + q // the text's closing quote
	tail := m.buf[m.text+1 : m.text+1+m.tailN]
	if len(data) <= end+m.tailN || data[end+m.tailN] != '\n' || !samePrefix(data[end:end+m.tailN], tail) {
		m.tailN = -1 // lines differ after their text: not worth comparing again
		return 0
	}
	p.textBytes += int64(q)
	return end + m.tailN
}

// samePrefix says whether a and b, of one length, hold the same bytes: two
// words at a time, read without a bounds check each (their lengths are
// checked once), where the runtime's comparison goes a byte at a time in
// WASM and a slice's every step is checked. (Unaligned 8-byte loads are
// allowed in WASM, amd64 and arm64, where the plugin and its tests run.)
func samePrefix(a, b []byte) bool {
	n := len(a)
	if len(b) != n {
		return false
	}
	pa, pb := unsafe.Pointer(unsafe.SliceData(a)), unsafe.Pointer(unsafe.SliceData(b))
	i := 0
	for ; i+16 <= n; i += 16 {
		if *(*uint64)(unsafe.Add(pa, i)) != *(*uint64)(unsafe.Add(pb, i)) ||
			*(*uint64)(unsafe.Add(pa, i+8)) != *(*uint64)(unsafe.Add(pb, i+8)) {
			return false
		}
	}
	for ; i < n; i++ {
		if *(*byte)(unsafe.Add(pa, i)) != *(*byte)(unsafe.Add(pb, i)) {
			return false
		}
	}
	return true
}
