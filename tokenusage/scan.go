package tokenusage

import "bytes"

// keyToken is the longer key token. The other one, `"usage"`, is its first
// len(keyStem) bytes followed by a closing quote, so one matcher serves both.
const keyToken = `"usageMetadata"`

const keyStem = `"usage`

// The scan jumps with bytes.IndexByte to the 'g' of a key token: in JSON and
// in English text it is far rarer than '"', so few candidates are false.
// (bytes.Index(`"usage`) stops at every quote and then degrades to a
// byte-by-byte search, which is about ten times slower on typical events.)
const (
	anchor       = 'g'
	anchorOffset = 4 // keyStem[anchorOffset] == anchor
)

// keyMatch is the outcome of matching a key token against some input.
type keyMatch uint8

const (
	keyMismatch keyMatch = iota
	keyPartial           // the input ended inside the token
	keyComplete
)

// matchKey continues a key token of which m bytes already matched with data.
// It returns how many bytes of data it consumed (on a mismatch: up to, not
// including, the offending byte) and how many bytes of the token have matched.
func matchKey(m int, data []byte) (consumed, matched int, res keyMatch) {
	for i, c := range data {
		if m == len(keyStem) && c == '"' {
			return i + 1, m + 1, keyComplete // "usage"
		}
		if c != keyToken[m] {
			return i, m, keyMismatch
		}
		m++
		if m == len(keyToken) {
			return i + 1, m, keyComplete // "usageMetadata"
		}
	}
	return len(data), m, keyPartial
}

// scan looks for the next unescaped key token in data. It returns the input
// after the token, or nil once data is used up.
func (p *Parser) scan(data []byte) []byte {
	if p.keyMatched > 0 {
		return p.continueKey(data)
	}
	for from := 0; ; {
		i := bytes.IndexByte(data[from:], anchor)
		if i < 0 {
			break
		}
		start := from + i - anchorOffset
		from += i + 1
		// Only tokens starting inside data are candidates: one cut by a chunk
		// boundary is being followed through keyMatched, and scanning
		// otherwise resumes only after a key, a usage object or the part of
		// an oversized object that fit, where no token can be lost that
		// matters.
		if start < 0 || string(data[start:start+anchorOffset]) != keyStem[:anchorOffset] {
			continue
		}
		if p.oddBackslashesBefore(data, start) {
			continue // an escaped quote inside a string, e.g. {\"usage\": ...}
		}
		n, m, res := matchKey(0, data[start:])
		switch res {
		case keyComplete:
			p.state = afterKey
			return data[start+n:]
		case keyPartial:
			p.keyMatched = m
			return nil
		}
	}
	p.notePartialKeyAtEnd(data)
	p.backslashOdd = p.oddBackslashesBefore(data, len(data))
	return nil
}

// continueKey goes on matching a key token that the previous chunk ended in.
func (p *Parser) continueKey(data []byte) []byte {
	n, m, res := matchKey(p.keyMatched, data)
	switch res {
	case keyComplete:
		p.keyMatched = 0
		p.state = afterKey
	case keyPartial:
		p.keyMatched = m
	case keyMismatch:
		// The offending byte may itself open a key token. It follows a byte
		// of the abandoned token, so it is not preceded by a backslash.
		p.keyMatched = 0
		p.backslashOdd = false
	}
	return data[n:]
}

// notePartialKeyAtEnd remembers a key token that data ends in the middle of
// before its anchor byte (`"` up to `"usa`), which the anchored scan cannot
// see. Only the last quote can start one: a token has no other quote before
// its end.
func (p *Parser) notePartialKeyAtEnd(data []byte) {
	tail := max(0, len(data)-anchorOffset)
	q := bytes.LastIndexByte(data[tail:], '"')
	if q < 0 {
		return
	}
	q += tail
	if p.oddBackslashesBefore(data, q) {
		return
	}
	if _, m, res := matchKey(0, data[q:]); res == keyPartial {
		p.keyMatched = m
	}
}

// oddBackslashesBefore reports whether data[pos] is preceded by an odd run of
// backslashes, counting the run carried over from earlier input when it
// reaches back to data[0].
func (p *Parser) oddBackslashesBefore(data []byte, pos int) bool {
	i := pos
	for i > 0 && data[i-1] == '\\' {
		i--
	}
	odd := (pos-i)%2 == 1
	if i == 0 {
		odd = odd != p.backslashOdd
	}
	return odd
}

// expectDelimiter skips JSON whitespace and reports whether the next byte is
// want, returning the input after it. Any other byte abandons the key (as
// with "usage":null) and scanning resumes at that byte.
func (p *Parser) expectDelimiter(data []byte, want byte) (rest []byte, found bool) {
	i := 0
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	switch {
	case i == len(data):
		return nil, false
	case data[i] == want:
		return data[i+1:], true
	default:
		p.resumeScan(false)
		return data[i:], false
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}
