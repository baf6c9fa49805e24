package tokenusage

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// lexer follows the JSON of the roots, one byte-level state at a time.
type lexer struct {
	state lexState
	depth int               // open objects and arrays being followed
	open  [maxLevels]level  // them, outermost first
	node  node              // where the value being read is
	esc   escape            // inside a string: what the last bytes started
	skip  int               // nesting depth inside a skipped object or array
	inStr bool              // a skipped object or array is inside a string
	bsOdd bool              // a string's bytes so far end in an odd run of backslashes
	text  bool              // the value being read is output text
	key   [maxKeyBytes]byte // the key being read, when it may be one in the tree
	keyN  int               // its length; maxKeyBytes+1 when it cannot be
	num   [maxNumBytes]byte // an Ollama count being read
	numN  int

	capture bool   // the skipped object is a usage object, copied to obj
	obj     []byte // the usage object so far, at most MaxUsageObjectBytes
	objOver bool   // it outgrew MaxUsageObjectBytes and will be ignored
}

type level struct {
	node      node
	array     bool
	rootArray bool // a top-level array: its elements are roots
}

type lexState uint8

const (
	expectValue      lexState = iota // a value, or (at the top level) the next root
	expectFirstValue                 // after '[': a value or ']'
	expectFirstKey                   // after '{': a key or '}'
	expectKey                        // after ',' in an object
	expectColon                      // after a key
	expectNext                       // after a value in an array or object: ',' or its end
	inKey                            // a key's string
	inString                         // a string value
	inScalar                         // a number, true, false or null
	inSkipped                        // an object or array skipped (or counted, or captured) as a whole
	broken                           // not JSON: nothing more until the root's framing ends it
)

// escape is where a string is in an escape sequence: after a backslash, or
// in the hex digits of a \u escape (1 to 4 still to come).
type escape uint8

const (
	noEscape       escape = 0
	afterBackslash escape = 5
)

const (
	// maxLevels bounds the open objects and arrays followed: more than the
	// deepest path in the tree, whose depth is all that is ever followed.
	maxLevels = 12
	// maxKeyBytes is longer than every key in the tree.
	maxKeyBytes = 32
	// maxNumBytes is longer than any count that fits maxCount.
	maxNumBytes = 32
)

// lexJSON runs the lexer over data, JSON text of the current roots. With
// lines (server-sent events) it stops at a line end outside a string and
// returns its index; otherwise it consumes all of data.
//
// It is the hot path, run over every byte of every event, so the common
// steps (whitespace, keys, strings skipped) are written out here rather
// than in helpers: in WASM every call costs more than the work it saves.
func (p *Parser) lexJSON(data []byte, lines bool) int {
	lx := &p.lex
	i := 0
	for i < len(data) {
		switch lx.state {
		case expectValue, expectFirstValue, expectFirstKey, expectKey, expectColon, expectNext:
			c := data[i]
			if c == ' ' || c == '\t' {
				i++
				continue
			}
			if c == '\n' || c == '\r' {
				if lines {
					return i
				}
				i++
				continue
			}
			i++
			if c == '"' && (lx.state == expectKey || lx.state == expectFirstKey) {
				lx.state, lx.keyN, lx.bsOdd = inKey, 0, false
				continue
			}
			p.token(c)
		case inKey:
			rest := data[i:]
			q := lx.stringEnd(rest)
			if q < 0 {
				lx.appendKey(rest)
				return len(data)
			}
			key := rest[:q]
			if lx.keyN > 0 {
				lx.appendKey(key)
				key = lx.key[:min(lx.keyN, maxKeyBytes)]
			}
			lx.node = nowhere
			if lx.keyN <= maxKeyBytes {
				lx.node = child(lx.open[lx.depth-1].node, key)
			}
			lx.state = expectColon
			i += q + 1
		case inString:
			if lx.text {
				n, closed, text := lx.str(data[i:])
				p.textBytes += int64(text)
				i += n
				if closed {
					p.valueDone()
				}
				continue
			}
			q := lx.stringEnd(data[i:])
			if q < 0 {
				return len(data)
			}
			i += q + 1
			p.valueDone()
		case inScalar:
			j := i
			for j < len(data) && !endsScalar[data[j]] {
				j++
			}
			lx.appendNum(data[i:j])
			i = j
			if j < len(data) {
				p.scalarDone()
			}
		case inSkipped:
			n, closed := lx.skipOver(data[i:], lines)
			if lx.text {
				p.textBytes += int64(n)
			}
			if lx.capture && !lx.objOver {
				if len(lx.obj)+n > MaxUsageObjectBytes {
					lx.objOver = true
				} else {
					lx.obj = appendBounded(lx.obj, data[i:i+n])
				}
			}
			i += n
			if closed {
				if lx.capture && !lx.objOver {
					p.pending.apply(lx.obj)
				}
				p.valueDone()
			} else if i < len(data) {
				return i // a line end
			}
		default: // broken
			if lines {
				return i + lineEnd(data[i:])
			}
			return len(data)
		}
	}
	return i
}

// token handles the first byte after whitespace in one of the expect states.
func (p *Parser) token(c byte) {
	lx := &p.lex
	switch lx.state {
	case expectFirstKey, expectKey:
		switch {
		case c == '}' && lx.state == expectFirstKey:
			p.close()
		default:
			lx.state = broken
		}
	case expectColon:
		if c != ':' {
			lx.state = broken
			return
		}
		lx.state = expectValue
	case expectNext:
		top := lx.open[lx.depth-1]
		switch {
		case c == ',' && top.array:
			lx.state, lx.node = expectValue, lx.elements(top)
		case c == ',':
			lx.state = expectKey
		case c == ']' && top.array, c == '}' && !top.array:
			p.close()
		default:
			lx.state = broken
		}
	default: // expectValue, expectFirstValue
		if c == ']' && lx.state == expectFirstValue {
			p.close()
			return
		}
		p.startValue(c)
	}
}

// startValue begins the value whose first byte is c, at lx.node (the root
// itself at the top level).
func (p *Parser) startValue(c byte) {
	lx := &p.lex
	if lx.depth == 0 {
		lx.node = root
	}
	at := &tree[lx.node]
	switch c {
	case '{':
		switch {
		case at.usage:
			lx.startSkip(false)
			lx.capture, lx.objOver = true, false
			lx.obj = appendBounded(lx.obj[:0], []byte{'{'})
		case hasChildren(lx.node) && lx.depth < maxLevels:
			lx.push(level{node: lx.node})
			lx.state = expectFirstKey
		default:
			p.skipValue(at.text)
		}
	case '[':
		switch {
		case lx.depth == 0:
			lx.push(level{node: root, array: true, rootArray: true})
			lx.state = expectFirstValue
		case arrayChild(lx.node) != nowhere && lx.depth < maxLevels:
			lx.push(level{node: lx.node, array: true})
			lx.state, lx.node = expectFirstValue, arrayChild(lx.node)
		default:
			p.skipValue(at.text)
		}
	case '"':
		lx.state, lx.text, lx.esc, lx.bsOdd = inString, at.text, noEscape, false
	case '}', ']', ',', ':':
		lx.state = broken
	default:
		lx.state, lx.numN = inScalar, 0
		lx.appendNum([]byte{c})
	}
}

// skipValue skips an object or array whose opening bracket was consumed;
// as output text, it counts by its raw bytes.
func (p *Parser) skipValue(text bool) {
	p.lex.startSkip(text)
	if text {
		p.textBytes++ // the opening bracket
	}
}

// close ends the innermost open object or array.
func (p *Parser) close() {
	p.lex.depth--
	p.valueDone()
}

// valueDone moves on after a value. A value at the top level of a root
// completes the root: what it reported takes effect.
func (p *Parser) valueDone() {
	lx := &p.lex
	lx.capture, lx.text = false, false
	if lx.depth == 0 || (lx.depth == 1 && lx.open[0].rootArray) {
		if p.pending.seen != 0 {
			p.usage.merge(&p.pending)
			p.pending = rawUsage{}
		}
	}
	lx.state = expectNext
	if lx.depth == 0 {
		lx.state = expectValue
	}
}

// scalarDone ends a number or literal; at a count's path, it is recorded.
func (p *Parser) scalarDone() {
	lx := &p.lex
	if f := tree[lx.node].count; f != noField && lx.numN <= maxNumBytes {
		if s := stringView(lx.num[:lx.numN]); gjson.Valid(s) {
			p.pending.set(f, gjson.Parse(s))
		}
	}
	p.valueDone()
}

// endRoots abandons whatever root is open: its framing (an SSE event, an
// event-stream message) ended.
func (p *Parser) endRoots() {
	lx := &p.lex
	*lx = lexer{obj: lx.obj[:0]}
	if p.pending.seen != 0 {
		p.pending = rawUsage{}
	}
}

func (lx *lexer) push(l level) {
	lx.open[lx.depth] = l
	lx.depth++
}

// elements returns where the elements of the open array l are.
func (lx *lexer) elements(l level) node {
	if l.rootArray {
		return root
	}
	return arrayChild(l.node)
}

func (lx *lexer) startSkip(text bool) {
	lx.state, lx.skip, lx.inStr, lx.esc, lx.text = inSkipped, 1, false, noEscape, text
}

// str advances over a string's bytes. It returns how many bytes of data it
// consumed, whether the string closed (its closing quote consumed), and how
// many bytes of text they stand for, escapes decoded.
func (lx *lexer) str(data []byte) (n int, closed bool, text int) {
	i := 0
	for i < len(data) {
		switch lx.esc {
		case noEscape:
			rest := data[i:]
			q := bytes.IndexByte(rest, '"')
			if q < 0 {
				q = len(rest)
			}
			if b := bytes.IndexByte(rest[:q], '\\'); b >= 0 {
				text += b
				i += b + 1
				lx.esc = afterBackslash
				continue
			}
			text += q
			if q == len(rest) {
				return len(data), false, text
			}
			return i + q + 1, true, text
		case afterBackslash:
			if data[i] == 'u' {
				lx.esc = 4
				text += 3
			} else {
				lx.esc = noEscape
				text++
			}
		default: // a hex digit of \uXXXX
			lx.esc--
		}
		i++
	}
	return i, false, text
}

// stringEnd returns the index in data of the quote that closes the string
// data is inside of, or -1 when data ends first. A quote is escaped when an
// odd run of backslashes precedes it; lx.bsOdd carries the parity of a run
// that reaches back into the string's earlier bytes.
func (lx *lexer) stringEnd(data []byte) int {
	from := 0
	for {
		q := bytes.IndexByte(data[from:], '"')
		if q < 0 {
			lx.bsOdd = oddBackslashesBefore(data, len(data), lx.bsOdd)
			return -1
		}
		q += from
		if !oddBackslashesBefore(data, q, lx.bsOdd) {
			lx.bsOdd = false
			return q
		}
		from = q + 1
	}
}

// oddBackslashesBefore reports whether data[pos] is preceded by an odd run
// of backslashes, the run carried over (odd) counting when it reaches back
// to data[0].
func oddBackslashesBefore(data []byte, pos int, carried bool) bool {
	i := pos
	for i > 0 && data[i-1] == '\\' {
		i--
	}
	odd := (pos-i)%2 == 1
	if i == 0 {
		odd = odd != carried
	}
	return odd
}

// skipOver advances over a skipped object or array, counting brackets
// outside strings. It returns how many bytes of data belong to it and
// whether it closed there; with lines, it stops at a line end outside a
// string.
func (lx *lexer) skipOver(data []byte, lines bool) (n int, closed bool) {
	i := 0
	for i < len(data) {
		if lx.inStr {
			q := lx.stringEnd(data[i:])
			if q < 0 {
				return len(data), false
			}
			i += q + 1
			lx.inStr = false
		}
		for i < len(data) {
			c := data[i]
			if !skipStops[c] {
				i++
				continue
			}
			if c == '\n' || c == '\r' {
				if lines {
					return i, false
				}
				i++
				continue
			}
			i++
			if c == '"' {
				lx.inStr, lx.bsOdd = true, false
				break
			}
			if c == '{' || c == '[' {
				lx.skip++
			} else if lx.skip--; lx.skip == 0 {
				return i, true
			}
		}
	}
	return i, false
}

// appendKey adds a piece of a key; one longer than any in the tree is
// marked as none of them. (A key with an escape matches none either.)
func (lx *lexer) appendKey(piece []byte) {
	if lx.keyN+len(piece) > maxKeyBytes {
		lx.keyN = maxKeyBytes + 1
		return
	}
	lx.keyN += copy(lx.key[lx.keyN:], piece)
}

// appendNum adds a piece of a scalar, kept only at a count's path.
func (lx *lexer) appendNum(piece []byte) {
	if tree[lx.node].count == noField || lx.numN > maxNumBytes {
		return
	}
	if lx.numN+len(piece) > maxNumBytes {
		lx.numN = maxNumBytes + 1
		return
	}
	lx.numN += copy(lx.num[lx.numN:], piece)
}

// endsScalar marks the bytes that cannot be part of a number or literal;
// skipStops the bytes a skipped object or array is watched for.
var endsScalar, skipStops = byteSet(" \t\n\r,}]\"{[:"), byteSet("\"{}[]\n\r")

func byteSet(s string) (set [256]bool) {
	for i := range len(s) {
		set[s[i]] = true
	}
	return set
}

// appendBounded appends b to buf, growing buf geometrically but never beyond
// MaxUsageObjectBytes; the caller guarantees the result fits.
func appendBounded(buf, b []byte) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		grown := make([]byte, len(buf), min(max(2*cap(buf), need, 256), MaxUsageObjectBytes))
		copy(grown, buf)
		buf = grown
	}
	return append(buf, b...)
}
