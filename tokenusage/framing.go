package tokenusage

import (
	"bytes"
	"encoding/binary"
)

// framing is how a body is cut into roots.
type framing uint8

const (
	undecided   framing = iota // only whitespace so far
	jsonValues                 // a JSON body, NDJSON, a top-level array
	sseEvents                  // server-sent events: roots in the "data:" lines
	eventStream                // AWS event stream: a root in each message's payload
	unreadable                 // a message length no event stream has: nothing more is read
)

// frames is the framing's position in the body.
type frames struct {
	kind framing

	// Server-sent events.
	line      lineState
	fieldSeen int  // bytes of "data" matched at the start of the line
	afterCR   bool // the last line ended in '\r'; a '\n' next belongs to it

	// AWS event stream: the prelude being gathered, then how many bytes of
	// the message's headers, payload and CRC are still to come.
	prelude     [12]byte
	preludeSeen int
	headersLeft int
	payloadLeft int
	crcLeft     int
}

type lineState uint8

const (
	lineStart lineState = iota // at the start of a line
	fieldName                  // matching "data" in a field name
	dataSpace                  // after "data:", where one space is skipped
	dataValue                  // in a data line's value: JSON for the lexer
	otherLine                  // in a line the parser does not read
)

// maxMessageBytes bounds an AWS event-stream message (the format's own
// limit is 16 MiB of payload); a longer length means the body is not one.
const maxMessageBytes = 24 << 20

// frame feeds a chunk through the body's framing.
func (p *Parser) frame(data []byte) {
	f := &p.frames
	if f.kind == undecided {
		i := 0
		for i < len(data) && isSpace(data[i]) {
			i++
		}
		if i == len(data) {
			return
		}
		data = data[i:]
		switch data[0] {
		case '{', '[':
			f.kind = jsonValues
		case 0:
			f.kind = eventStream
		default:
			f.kind = sseEvents
		}
	}
	switch f.kind {
	case jsonValues:
		p.lexJSON(data, false)
	case sseEvents:
		p.frameEvents(data)
	case eventStream:
		p.frameMessages(data)
	}
}

// frameEvents follows server-sent events: each "data:" line's value goes to
// the lexer, which finds where the line ends (a line end can only be
// whitespace between JSON tokens, so it saves a second scan); the event's
// data lines are one JSON text. A blank line ends the event, and with it any
// root left open. Other lines (event:, id:, comments) are skipped.
func (p *Parser) frameEvents(data []byte) {
	f := &p.frames
	for len(data) > 0 {
		if f.afterCR {
			f.afterCR = false
			if data[0] == '\n' {
				data = data[1:]
				continue
			}
		}
		switch f.line {
		case lineStart:
			if c := data[0]; c == '\n' || c == '\r' {
				p.endRoots()
				f.afterCR = c == '\r'
				data = data[1:]
				continue
			}
			if len(data) > len("data: ") && string(data[:len("data: ")]) == "data: " {
				// The usual data line, read at once.
				f.line = dataValue
				data = data[len("data: "):]
				continue
			}
			f.line, f.fieldSeen = fieldName, 0
		case fieldName:
			c := data[0]
			switch {
			case f.fieldSeen < len("data") && c == "data"[f.fieldSeen]:
				f.fieldSeen++
				data = data[1:]
			case f.fieldSeen == len("data") && c == ':':
				f.line = dataSpace
				data = data[1:]
			case f.fieldSeen == len("data") && (c == '\n' || c == '\r'):
				f.line = dataValue // "data" alone: an empty value
			default:
				f.line = otherLine
			}
		case dataSpace:
			if data[0] == ' ' {
				data = data[1:]
			}
			f.line = dataValue
		case dataValue:
			end := p.lexLine(data)
			if end == len(data) {
				return
			}
			f.line = lineStart
			f.afterCR = data[end] == '\r'
			data = data[end+1:]
		case otherLine:
			end := lineEnd(data)
			if end == len(data) {
				return
			}
			f.line = lineStart
			f.afterCR = data[end] == '\r'
			data = data[end+1:]
		}
	}
}

// lineEnd returns the index of the first '\n' or '\r' in data, or len(data).
func lineEnd(data []byte) int {
	end := bytes.IndexByte(data, '\n')
	if end < 0 {
		end = len(data)
	}
	if cr := bytes.IndexByte(data[:end], '\r'); cr >= 0 {
		end = cr
	}
	return end
}

// frameMessages follows AWS event-stream messages: a 12-byte prelude (total
// length, headers length, CRC), the headers, the payload, a 4-byte CRC. The
// payload is JSON for the lexer; the rest is skipped. The gateway's upstream
// connection already checked the CRCs.
func (p *Parser) frameMessages(data []byte) {
	f := &p.frames
	for len(data) > 0 {
		switch {
		case f.preludeSeen < len(f.prelude):
			n := copy(f.prelude[f.preludeSeen:], data)
			f.preludeSeen += n
			data = data[n:]
			if f.preludeSeen < len(f.prelude) {
				return
			}
			total := int64(binary.BigEndian.Uint32(f.prelude[0:4]))
			headers := int64(binary.BigEndian.Uint32(f.prelude[4:8]))
			if total < 16 || total > maxMessageBytes || headers > total-16 {
				f.kind = unreadable
				return
			}
			f.headersLeft = int(headers)
			f.payloadLeft = int(total - headers - 16)
			f.crcLeft = 4
		case f.headersLeft > 0:
			n := min(f.headersLeft, len(data))
			f.headersLeft -= n
			data = data[n:]
		case f.payloadLeft > 0:
			n := min(f.payloadLeft, len(data))
			p.lexJSON(data[:n], false)
			f.payloadLeft -= n
			data = data[n:]
		default:
			n := min(f.crcLeft, len(data))
			f.crcLeft -= n
			data = data[n:]
			if f.crcLeft == 0 {
				p.endRoots()
				f.preludeSeen = 0
			}
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}
