package tokenusage

import (
	"bytes"
	"encoding/binary"
	"math/bits"

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
// It is the hot path, and in WASM what costs is the number of steps rather
// than of bytes: every function call, and every jump (in WASM each goes
// through a dispatch on the block number, storing the function's local
// variables), costs more than the work of a few bytes, while
// bytes.IndexByte crosses a string a word at a time. So the state that
// changes with every token (the state, the node, the depth) lives in local
// variables while the loop runs and goes back into lx when it ends, and
// the common case, the members of a followed object, whole in data, is left
// to members, which reads them without coming back to the switch on the
// state. This switch takes every byte-level state, at any cut of the body:
// what members stops at (the end of data, an escape, a value captured,
// skipped or counted, blank space it does not expect) goes on here. Helpers
// are called only for what is rare or long.
func (p *Parser) lexJSON(data []byte, lines bool) int {
	lx := &p.lex
	state, n, depth := lx.state, lx.node, lx.depth
	i := 0
loop:
	for i < len(data) {
		switch state {
		case expectValue, expectFirstValue, expectFirstKey, expectKey, expectColon, expectNext:
			c := data[i]
			if c <= ' ' && isSpace(c) {
				if lines && (c == '\n' || c == '\r') {
					break loop
				}
				i++
				continue
			}
			switch state {
			case expectFirstKey, expectKey:
				if c == '"' && i+minKeyRoom <= len(data) {
					i, state, n, depth = p.members(data, i, lines, depth, false)
					continue
				}
				if c == '"' { // a key near the end of data
					state, lx.keyN, lx.bsOdd = inKey, 0, false
					i++
					continue
				}
				i++
				if c == '}' && state == expectFirstKey {
					depth--
					state = p.valueDone(depth)
				} else {
					state = broken
				}

			case expectColon:
				i++
				state = expectValue
				if c != ':' {
					state = broken
				}

			case expectNext:
				i++
				top := lx.open[depth-1]
				switch {
				case c == ',' && top.array:
					state, n = expectValue, arrayChild(top.node)
					if top.rootArray {
						n = root
					}
				case c == ',':
					state = expectKey
				case c == ']' && top.array, c == '}' && !top.array:
					depth--
					state = p.valueDone(depth)
				default:
					state = broken
				}

			default: // expectValue, expectFirstValue: c starts a value at n
				i++
				if c == ']' && state == expectFirstValue {
					depth--
					state = p.valueDone(depth)
					continue
				}
				if depth == 0 {
					n = root
				}
				at := &tree[n]
				switch c {
				case '{':
					switch {
					case at.usage:
						p.usageObjects++
						state = inSkipped
						lx.startSkip(false)
						lx.capture, lx.objOver = true, false
						lx.obj = appendBounded(lx.obj[:0], []byte{'{'})
					case at.keys && depth < maxLevels:
						lx.open[depth] = level{node: n}
						depth++
						state = expectFirstKey
					default:
						state = inSkipped
						p.skipValue(at.text)
					}
				case '[':
					switch {
					case depth == 0:
						lx.open[0] = level{node: root, array: true, rootArray: true}
						depth = 1
						state = expectFirstValue
					case at.array != nowhere && depth < maxLevels:
						lx.open[depth] = level{node: n, array: true}
						depth++
						state, n = expectFirstValue, at.array
					default:
						state = inSkipped
						p.skipValue(at.text)
					}
				case '"':
					state, lx.text, lx.esc, lx.bsOdd = inString, at.text, noEscape, false
				case '}', ']', ',', ':':
					state = broken
				default:
					state, lx.numN = inScalar, 0
					if at.count != noField {
						lx.num[0], lx.numN = c, 1
					}
				}
			}
			continue

		case inKey:
			rest := data[i:]
			q := lx.stringEnd(rest)
			if q < 0 {
				lx.appendKey(rest)
				i = len(data)
				break loop
			}
			key := rest[:q]
			if lx.keyN > 0 {
				lx.appendKey(key)
				key = lx.key[:min(lx.keyN, maxKeyBytes)]
			}
			n = nowhere
			if lx.keyN <= maxKeyBytes {
				n = child(lx.open[depth-1].node, key)
			}
			state = expectColon
			i += q + 1
			continue

		case inString:
			if lx.text {
				m, closed, text := lx.str(data[i:])
				p.textBytes += int64(text)
				i += m
				if closed {
					lx.text = false
					state = p.valueDone(depth)
				}
				continue
			}
			q := lx.stringEnd(data[i:])
			if q < 0 {
				i = len(data)
				break loop
			}
			i += q + 1
			state = p.valueDone(depth)
			continue

		case inScalar:
			j := i
			for j < len(data) && !endsScalar[data[j]] {
				j++
			}
			count := tree[n].count
			if count != noField {
				lx.appendNum(data[i:j])
			}
			i = j
			if j < len(data) {
				if count != noField {
					p.recordCount(count)
				}
				state = p.valueDone(depth)
			}
			continue

		case inSkipped:
			m, closed := lx.skipOver(data[i:], lines)
			if lx.text {
				p.textBytes += int64(m)
			}
			if lx.capture && !lx.objOver {
				if len(lx.obj)+m > MaxUsageObjectBytes {
					lx.objOver = true
				} else {
					lx.obj = appendBounded(lx.obj, data[i:i+m])
				}
			}
			i += m
			if closed {
				if lx.capture && !lx.objOver {
					p.pending.apply(lx.obj)
				}
				lx.capture, lx.text = false, false
				state = p.valueDone(depth)
			} else if i < len(data) {
				break loop // a line end
			}
			continue

		default: // broken
			if lines {
				i += lineEnd(data[i:])
			} else {
				i = len(data)
			}
			break loop
		}
	}
	lx.state, lx.node, lx.depth = state, n, depth
	return i
}

// members reads the members of followed objects and the elements of
// followed arrays, from data[i], the quote opening a key of the object at
// the top of depth open levels, while they lie whole in data and are
// simple: a plain key, then a string, a scalar that is not a count, or an
// object or array followed in turn. Each turn of its loop reads one member,
// up to the comma after it, or to the ends of the objects and arrays it
// closes; an element of an array starts at value. It returns where it
// stopped, with the state there (and the node and the depth), for lexJSON
// to go on from: at the end of data or near it (a key starting less than
// minKeyRoom bytes before it), at anything else, or at the end of a root.
// It takes the same steps as lexJSON would, only faster: the result does
// not depend on where it stops.
//
// Its common path, compact JSON, is written to run straight through, as
// jumps cost in WASM: keys, "null" and runs of digits are read a word at a
// time, a key is looked up without a loop or a branch, and blank space is
// looked for only where the expected byte is not found.
//
// With remember (lexLine reading a line from its start), it notes the line
// up to its first text value in p.memo (see lineMemo).
func (p *Parser) members(data []byte, i int, lines bool, depth int, remember bool) (_ int, state lexState, n node, _ int) {
	lx := &p.lex
	top := lx.open[depth-1] // the object or array (never a root array) being read
	var keyAt, keyDepth int // the key whose value is being read (-1: an element's), for remember
	for {
		keyAt, keyDepth = i, depth
		// data[i] is the quote opening a key. Keys are short: the closing
		// quote is looked for in the 8 bytes after it, a word at a time,
		// which also make the key's prefix for keySlots. Longer keys are
		// left to longKey.
		if i+minKeyRoom > len(data) {
			return i, expectKey, n, depth // lexJSON reads it in inKey
		}
		word := binary.LittleEndian.Uint64(data[i+1:])
		k := firstZero(word ^ ones*'"')
		q, column := i+1+k, prefixColumn(word&(1<<(8*k)-1), k)
		if k == 8 {
			q, column = longKey(data, i)
		}
		if q < 0 || data[q-1] == '\\' {
			// The key goes on in the next chunk, or its closing quote
			// may be escaped: it is read in inKey.
			lx.keyN, lx.bsOdd = 0, false
			return i + 1, inKey, n, depth
		}
		n = childOf[top.node][column]

		// The colon, and the value's first byte (q+2 < len(data)).
		i = q + 2
		if data[i-1] != ':' || data[i] <= ' ' {
			var ok bool
			if i, state, ok = colon(data, q+1, lines); !ok {
				return i, state, n, depth
			}
		}

	value:
		// data[i] starts a value at n (not ']': an array's end is never
		// left here).
		at := &tree[n]
		if c := data[i]; c == '"' && !at.text {
			// A string that is not text is crossed, unless its closing
			// quote may be escaped (stringEnd counts the backslashes).
			q := bytes.IndexByte(data[i+1:], '"')
			if q < 0 || data[i+q] == '\\' {
				return i, expectValue, n, depth
			}
			i += q + 2
		} else if c == '"' {
			// Text is counted, a word at a time up to its closing quote;
			// escapes (which inString decodes) and long text (which
			// inString crosses faster) are left to the switch.
			q := -1
			for j := i + 1; j+8 <= len(data) && j < i+1+32; j += 8 {
				x := binary.LittleEndian.Uint64(data[j:])
				if k := min(firstZero(x^ones*'"'), firstZero(x^ones*'\\')); k < 8 {
					q = j + k
					break
				}
			}
			if q < 0 || data[q] == '\\' {
				return i, expectValue, n, depth
			}
			if remember && keyAt >= 0 {
				p.memo.remember(p, data, keyAt, i, q, keyDepth)
				remember = false
			}
			p.textBytes += int64(q - i - 1)
			i = q + 1
		} else if !endsScalar[c] && at.count == noField {
			// A number or literal nothing is read from: null, or 8 digits
			// of a number, are taken at once.
			j := i + 1
			if i+5 <= len(data) && binary.LittleEndian.Uint32(data[i:]) == nullWord {
				j = i + 4
			}
			if j+8 <= len(data) && eightDigits(binary.LittleEndian.Uint64(data[j:])) {
				j += 8
			}
			for j < len(data) && !endsScalar[data[j]] {
				j++
			}
			if j == len(data) {
				return i, expectValue, n, depth // it may go on in the next chunk
			}
			i = j
		} else if c == '{' && at.keys && !at.usage && depth < maxLevels {
			// An object followed in turn: its first member comes next.
			top = level{node: n}
			lx.open[depth] = top
			depth++
			i++
			if i >= len(data) || data[i] != '"' {
				i = skipSpace(data, i, lines)
				if i == len(data) || data[i] != '"' {
					return i, expectFirstKey, n, depth
				}
			}
			continue
		} else if c == '[' && at.array != nowhere && depth < maxLevels {
			// An array followed in turn: its first element comes next.
			top = level{node: n, array: true}
			lx.open[depth] = top
			depth++
			n = at.array
			i++
			if i >= len(data) || data[i] <= ' ' || data[i] == ']' {
				return i, expectFirstValue, n, depth
			}
			keyAt = -1 // an element has no key
			goto value
		} else {
			return i, expectValue, n, depth
		}

		// After the value: a comma and the next member or element, or the
		// end of the object or array, and then maybe of those around it.
		if i+2 <= len(data) && binary.LittleEndian.Uint16(data[i:]) == commaQuote && !top.array {
			i++ // the common case, compact JSON's next member
			continue
		}
		for {
			if i >= len(data) || data[i] <= ' ' {
				i = skipSpace(data, i, lines)
				if i == len(data) {
					return i, expectNext, n, depth
				}
			}
			c := data[i]
			if c == ',' {
				i++
				if top.array {
					n = tree[top.node].array
					if i >= len(data) || data[i] <= ' ' || data[i] == ']' {
						return i, expectValue, n, depth
					}
					keyAt = -1
					goto value
				}
				if i >= len(data) || data[i] != '"' {
					i = skipSpace(data, i, lines)
					if i == len(data) || data[i] != '"' {
						return i, expectKey, n, depth
					}
				}
				break
			}
			if c != '}' && c != ']' || c == ']' != top.array {
				return i, expectNext, n, depth
			}
			i++
			depth--
			if depth == 0 || depth == 1 && lx.open[0].rootArray {
				return i, p.valueDone(depth), n, depth // the end of a root
			}
			top = lx.open[depth-1]
		}
	}
}

// nullWord and commaQuote are "null" and `,"` read as little-endian numbers.
const (
	nullWord   = 'n' | 'u'<<8 | 'l'<<16 | 'l'<<24
	commaQuote = ',' | '"'<<8
)

// minKeyRoom is how many bytes members needs from a key's opening quote:
// the 8 bytes it reads after it, and the colon and a byte of the value
// after a key of up to 7 bytes.
const minKeyRoom = 11

// longKey returns the index of the quote closing the key data[i] opens, a
// key of 8 bytes or more, and its column in childOf; -1 when data ends
// first, or too close after it for members (which reads the two bytes
// after the key).
func longKey(data []byte, i int) (int, uint8) {
	q := bytes.IndexByte(data[i+9:], '"')
	if q < 0 || i+9+q+2 >= len(data) {
		return -1, 0
	}
	q += i + 9
	return q, keyColumn(data[i+1:q], binary.LittleEndian.Uint64(data[i+1:]))
}

// colon returns the index of the value after the colon expected at
// data[i], blank space allowed around it, and true; or where it stopped,
// with the state there, and false.
func colon(data []byte, i int, lines bool) (int, lexState, bool) {
	if i = skipSpace(data, i, lines); i == len(data) || data[i] != ':' {
		return i, expectColon, false
	}
	if i = skipSpace(data, i+1, lines); i == len(data) {
		return i, expectValue, false
	}
	return i, expectValue, true
}

// Word-at-a-time search: ones has 1 in every byte, highs the top bit of
// every byte, and x-ones &^ x & highs marks the zero bytes of x (and maybe
// bytes above one, never below: only the lowest mark is used).
const ones, highs = 0x0101010101010101, 0x8080808080808080

// eightDigits tells whether the 8 bytes of x are all decimal digits: adding
// 0x46 sets the top bit of a byte above '9', subtracting '0' that of a byte
// below '0' (a carry or a borrow only ever comes out of a byte that is not a
// digit, and so does not hide one).
func eightDigits(x uint64) bool {
	return ((x+ones*0x46)|(x-ones*'0'))&highs == 0
}

// firstZero returns the index of the lowest zero byte of x, or 8 when
// there is none. With x a word of data xor'ed with a byte in every byte, it
// finds the first of that byte in the word, the lowest byte coming first.
func firstZero(x uint64) int {
	return bits.TrailingZeros64((x-ones)&^x&highs) >> 3
}

// lexLine is lexJSON for a data line of server-sent events. The usual
// line, an object starting with a key, goes straight to members, and what
// is left of the line after it (if more than the line's end) to lexJSON.
func (p *Parser) lexLine(data []byte) int {
	lx := &p.lex
	if lx.state != expectValue || lx.depth != 0 || len(data) < 2 || data[0] != '{' || data[1] != '"' {
		return p.lexJSON(data, true)
	}
	// An object at the top level, its first key next: as lexJSON would
	// start it, or where the last line's first text value was, when this
	// line starts with the same bytes (see lineMemo).
	m := &p.memo
	lx.open[0] = level{node: root}
	i, depth, remember := 1, 1, true
	if m.key > 0 && m.matches(data) {
		if end := m.sameLine(p, data); end > 0 {
			return end
		}
		i, depth, remember = m.key, m.depth, false
		copy(lx.open[:depth], m.open[:depth])
	} else {
		m.forget(p)
	}
	i, state, n, depth := p.members(data, i, true, depth, remember)
	lx.state, lx.node, lx.depth = state, n, depth
	if i < len(data) && data[i] == '\n' && state == expectValue && depth == 0 {
		if remember && m.key > 0 {
			m.rememberTail(p, data, i)
		}
		return i
	}
	return i + p.lexJSON(data[i:], true)
}

// skipSpace returns the index of the first byte at or after data[i] that is
// not blank space; with lines, a line end is not skipped.
func skipSpace(data []byte, i int, lines bool) int {
	for ; i < len(data); i++ {
		c := data[i]
		if c != ' ' && c != '\t' && (lines || c != '\n' && c != '\r') {
			break
		}
	}
	return i
}

// valueDone returns the state after a value, depth the objects and arrays
// still open around it. A value at the top level of a root completes the
// root: what it reported takes effect.
func (p *Parser) valueDone(depth int) lexState {
	if depth == 0 || depth == 1 && p.lex.open[0].rootArray {
		if p.pending.seen != 0 {
			p.usage.merge(&p.pending)
			p.pending = rawUsage{}
		}
		if depth == 0 {
			return expectValue
		}
	}
	return expectNext
}

// skipValue skips an object or array whose opening bracket was consumed;
// as output text, it counts by its raw bytes.
func (p *Parser) skipValue(text bool) {
	p.lex.startSkip(text)
	if text {
		p.textBytes++ // the opening bracket
	}
}

// recordCount records the scalar just read, at a count's path.
func (p *Parser) recordCount(f field) {
	lx := &p.lex
	if lx.numN <= maxNumBytes {
		if s := stringView(lx.num[:lx.numN]); gjson.Valid(s) {
			p.pending.set(f, gjson.Parse(s))
		}
	}
}

// endRoots abandons whatever root is open: its framing (an SSE event, an
// event-stream message) ended.
func (p *Parser) endRoots() {
	lx := &p.lex
	if lx.state != expectValue || lx.depth != 0 {
		// A root was left open. (After a complete one, the lexer is as
		// new: what else it holds is set afresh before it is read.)
		*lx = lexer{obj: lx.obj[:0]}
	}
	if p.pending.seen != 0 {
		p.pending = rawUsage{}
	}
}

func (lx *lexer) startSkip(text bool) {
	lx.skip, lx.inStr, lx.esc, lx.text = 1, false, noEscape, text
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

// appendNum adds a piece of a scalar at a count's path.
func (lx *lexer) appendNum(piece []byte) {
	if lx.numN > maxNumBytes {
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
