package streamusage

import (
	"bytes"
	"unsafe"
)

// MaxHeldBytes bounds how much of one event a Filter holds back while
// waiting for its end. An event that outgrows it is no usage chunk (those
// are a few hundred bytes): the Filter then gives up, passes on what it
// holds and everything after it unchanged, and no longer removes anything
// from that stream.
const MaxHeldBytes = 1 << 20

// Filter removes the usage-only events from the SSE response body of a
// request that AskForUsage rewrote, and passes every other byte on
// unchanged and in order: comments (": keep-alive"), event and id lines,
// "data: [DONE]", and the exact line endings.
//
// A usage-only event is one whose data is a JSON object with a top-level
// "choices" that is an empty array and a top-level "usage" that is an
// object, which is what OpenAI sends when include_usage is set. Azure's
// first chunk (empty choices and prompt_filter_results, no usage) and chunks
// with "usage":null are kept. The event is removed with its terminating
// blank line, so the client receives the stream it would have received
// without include_usage.
//
// Events end at a blank line, with lines ended by "\n", "\r\n" or "\r" as
// the SSE specification allows, in any mix. An event cut across chunks is
// held back until its end arrives (a client cannot use half an event
// anyway). When last is set, whatever is held is passed on as it is: a
// stream cut short, or whose final event lacks its blank line (which
// clients discard), reaches the client as the upstream sent it.
//
// Use it only on a response that is text/event-stream without a
// Content-Encoding (a body it cannot split into events is held back until
// the end, or MaxHeldBytes); and as it changes the body's length, the
// response must not be forwarded with its Content-Length. The usage is to
// be read from the chunks as they came, before the Filter.
//
// The zero Filter is ready to use, for one response; Reset makes it ready
// for another. A Filter is not safe for concurrent use.
type Filter struct {
	held    []byte // the start of an event whose end has not arrived
	out     []byte // the output, when it cannot be a part of the chunk
	scratch []byte // the data of an event with several data lines

	inLine   bool // bytes of a line have come since the last line end
	cr       bool // the last byte was '\r': a '\n' next completes its line end
	dropped  bool // the event that ended last was removed
	passing  bool // given up: everything passes through
	nDropped int
}

// Write takes the next chunk of the response body and returns what to send
// to the client now; last marks the body's final chunk. The returned slice
// is chunk itself or a part of it when that is all it takes (always, for a
// chunk of whole events none of which is removed, and then Write does not
// allocate); otherwise it is a buffer of the Filter's, valid until the next
// call to Write or Reset. chunk is never modified. Write does not panic on
// any input.
func (f *Filter) Write(chunk []byte, last bool) []byte {
	if f.passing {
		return chunk
	}
	// The common case: the chunk starts and ends on an event boundary and
	// holds no usage chunk.
	if f.Passes(chunk) && !hasEmptyChoices(chunk) {
		return chunk
	}
	return f.write(chunk, last)
}

// Passes reports whether Write would pass chunk on whole without looking
// into it, unless it holds a usage-only event: the Filter holds nothing of
// an earlier chunk and chunk ends an event (or the Filter gave up, and
// passes everything). A caller that knows chunk holds no usage object can
// then skip Write, which would not change the Filter.
func (f *Filter) Passes(chunk []byte) bool {
	return f.passing || len(f.held) == 0 && !f.cr && endsEvent(chunk)
}

// Dropped returns how many events the Filter has removed since it was
// created or Reset.
func (f *Filter) Dropped() int { return f.nDropped }

// Reset makes f ready for another response, keeping its buffers.
func (f *Filter) Reset() {
	*f = Filter{held: f.held[:0], out: f.out[:0], scratch: f.scratch[:0]}
}

// write is Write for a chunk that needs looking at event by event.
func (f *Filter) write(chunk []byte, last bool) []byte {
	o := output{chunk: chunk, buf: f.out[:0]}
	start := 0 // where the event being read starts in chunk (its beginning may be held)
	if len(f.held) == 0 && f.cr && len(chunk) > 0 && chunk[0] == '\n' {
		// The '\n' of a "\r\n" whose '\r' ended the last chunk and an
		// event: it belongs to that event.
		f.cr = false
		if !f.dropped {
			o.keep(0, 1)
		}
		start = 1
	}
	for {
		end := f.scan(chunk, start)
		if end < 0 {
			break
		}
		event := chunk[start:end]
		whole := len(f.held) == 0
		if !whole {
			f.held = append(f.held, event...)
			event = f.held
		}
		f.dropped = f.isUsageOnly(event)
		switch {
		case f.dropped:
			f.nDropped++
		case whole:
			o.keep(start, end)
		default:
			o.add(event)
		}
		f.held = f.held[:0]
		start = end
	}

	if rest := chunk[start:]; len(rest) > 0 {
		if len(f.held)+len(rest) > MaxHeldBytes {
			// Give up: pass on what is held and everything from here on.
			o.add(f.held)
			o.keep(start, len(chunk))
			f.passing = true
			f.held = nil
			f.out = nil
			return o.bytes()
		}
		f.held = append(f.held, rest...)
	}
	if last {
		o.add(f.held)
		f.held = f.held[:0]
		f.inLine, f.cr, f.dropped = false, false, false
	}
	f.out = o.buf
	return o.bytes()
}

// scan advances the line state over chunk from i and returns the index just
// past the blank line that ends the current event, or -1 when the chunk
// ends first. The '\n' of a blank line's "\r\n" is part of the event when
// it is in the same chunk; when the chunk ends on the '\r', write takes a
// '\n' starting the next chunk.
func (f *Filter) scan(chunk []byte, i int) int {
	// The next '\n' and '\r' at or after i, found with a (vectorised) byte
	// search and remembered, so that each is searched for once per line of
	// its own kind, not once per line.
	nextLF, nextCR := -1, -1
	for i < len(chunk) {
		switch c := chunk[i]; {
		case c == '\n' && f.cr:
			// The second byte of a "\r\n": the line ended at the '\r'.
			f.cr = false
		case c == '\n' || c == '\r':
			f.cr = c == '\r'
			if !f.inLine {
				// A blank line: the event ends here.
				if f.cr && i+1 < len(chunk) && chunk[i+1] == '\n' {
					f.cr = false
					return i + 2
				}
				return i + 1
			}
			f.inLine = false
		default:
			f.cr = false
			f.inLine = true
			// Skip to the line's end.
			if nextLF < i {
				nextLF = indexFrom(chunk, i, '\n')
			}
			if nextCR < i {
				nextCR = indexFrom(chunk, i, '\r')
			}
			i = min(nextLF, nextCR)
			continue
		}
		i++
	}
	return -1
}

// indexFrom returns the index of the first c in p at or after i, or len(p).
func indexFrom(p []byte, i int, c byte) int {
	if n := bytes.IndexByte(p[i:], c); n >= 0 {
		return i + n
	}
	return len(p)
}

// endsEvent reports whether a chunk that starts an event ends on a blank
// line: "\n\n" (also the end of "\r\n\n") or "\n\r\n" (also the end of
// "\r\n\r\n"). A chunk ending in '\r' might continue with the '\n' of a
// "\r\n" and takes the long way.
func endsEvent(chunk []byte) bool {
	n := len(chunk)
	return n >= 2 && chunk[n-1] == '\n' &&
		(chunk[n-2] == '\n' || n >= 3 && chunk[n-2] == '\r' && chunk[n-3] == '\n')
}

var choicesKey = []byte(`"choices"`)

// hasEmptyChoices reports whether p holds `"choices":[]`, with optional
// spaces or tabs around ':', '[' and ']'. Inside a JSON string a quote is
// escaped, so an unescaped `"choices"` followed by ':' is a key: a byte
// search is a safe pre-filter for the usage chunk, which isUsageOnly then
// confirms with a JSON parser. The search is anchored on '[', which is rare
// in chat chunks (once, for choices), where '"' is everywhere. (Whitespace
// that is a line end, between data lines of one event, is not looked
// through: no server is known to split its JSON there.)
func hasEmptyChoices(p []byte) bool {
	for i := 0; ; {
		n := bytes.IndexByte(p[i:], '[')
		if n < 0 {
			return false
		}
		open := i + n
		i = open + 1
		if _, ok := skipPast(p[open+1:], ']'); !ok {
			continue
		}
		before := trimSpaceEnd(p[:open])
		if len(before) == 0 || before[len(before)-1] != ':' {
			continue
		}
		if bytes.HasSuffix(trimSpaceEnd(before[:len(before)-1]), choicesKey) {
			return true
		}
	}
}

// trimSpaceEnd returns p without its trailing spaces and tabs.
func trimSpaceEnd(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == ' ' || p[len(p)-1] == '\t') {
		p = p[:len(p)-1]
	}
	return p
}

// skipPast skips spaces and tabs at the start of p and then c, and returns
// what follows, or false when the next other byte is not c.
func skipPast(p []byte, c byte) ([]byte, bool) {
	for i, b := range p {
		switch b {
		case ' ', '\t':
			continue
		case c:
			return p[i+1:], true
		}
		return nil, false
	}
	return nil, false
}

// isUsageOnly reports whether event (its lines and its blank line) is a
// usage-only chunk: its data is a JSON object with exactly one top-level
// "choices", an empty array, and exactly one top-level "usage", an object.
// The chunk is read once, by eachMember, which also validates it; one it
// does not take whole (an escaped key, say) is validated and read by gjson,
// which reads the same members.
func (f *Filter) isUsageOnly(event []byte) bool {
	if !hasEmptyChoices(event) {
		return false
	}
	data := f.eventData(event)
	var choices, usage int
	emptyChoices, usageObject := false, false
	note := func(key, raw string) {
		switch key {
		case "choices":
			choices++
			emptyChoices = raw[0] == '[' && isEmptyArray(raw)
		case "usage":
			usage++
			usageObject = raw[0] == '{'
		}
	}
	// Both read data through a string view, not a copy: nothing they
	// return outlives this function.
	text := unsafe.String(unsafe.SliceData(data), len(data))
	if !eachMember(text, note) {
		if !validJSON(data) || !isObject(data) {
			return false
		}
		choices, usage, emptyChoices, usageObject = 0, 0, false, false // what eachMember read before it gave up
		gjsonMembers(text, note)
	}
	return choices == 1 && usage == 1 && emptyChoices && usageObject
}

// isEmptyArray reports whether raw, a valid JSON array, has no elements.
func isEmptyArray(raw string) bool {
	for i := 1; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return raw[i] == ']'
	}
	return false
}

// eventData returns the data of an event as the SSE specification builds
// it: the values of its "data" fields joined by '\n'. One data line, the
// usual case, is returned as a part of event.
func (f *Filter) eventData(event []byte) []byte {
	var data []byte
	lines := 0
	for len(event) > 0 {
		// Cut the next line at '\n', '\r' or "\r\n".
		n := bytes.IndexAny(event, "\r\n")
		if n < 0 {
			n = len(event)
		}
		line := event[:n]
		event = event[n:]
		if len(event) > 0 {
			if event[0] == '\r' && len(event) > 1 && event[1] == '\n' {
				event = event[2:]
			} else {
				event = event[1:]
			}
		}

		value, isData := dataValue(line)
		if !isData {
			continue
		}
		lines++
		switch lines {
		case 1:
			data = value
		case 2:
			f.scratch = append(append(append(f.scratch[:0], data...), '\n'), value...)
			data = f.scratch
		default:
			f.scratch = append(append(f.scratch, '\n'), value...)
			data = f.scratch
		}
	}
	return data
}

// dataValue returns the value of a "data" field line: after "data:" and one
// optional space, or empty for a line that is just "data".
func dataValue(line []byte) ([]byte, bool) {
	const name = "data"
	if !bytes.HasPrefix(line, []byte(name)) {
		return nil, false
	}
	rest := line[len(name):]
	if len(rest) == 0 {
		return rest, true
	}
	if rest[0] != ':' {
		return nil, false
	}
	rest = rest[1:]
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	return rest, true
}

// output builds what Write returns: a part of the chunk for as long as what
// is kept is one run of it, else a copy in buf.
type output struct {
	chunk    []byte
	from, to int // the run of chunk kept, while !copied
	copied   bool
	buf      []byte
}

// keep adds chunk[a:b].
func (o *output) keep(a, b int) {
	if a == b {
		return
	}
	if !o.copied {
		if o.from == o.to {
			o.from, o.to = a, b
			return
		}
		if o.to == a {
			o.to = b
			return
		}
		o.startCopy()
	}
	o.buf = append(o.buf, o.chunk[a:b]...)
}

// add adds bytes from outside the chunk.
func (o *output) add(p []byte) {
	if len(p) == 0 {
		return
	}
	if !o.copied {
		o.startCopy()
	}
	o.buf = append(o.buf, p...)
}

func (o *output) startCopy() {
	o.copied = true
	o.buf = append(o.buf, o.chunk[o.from:o.to]...)
}

func (o *output) bytes() []byte {
	if o.copied {
		return o.buf
	}
	return o.chunk[o.from:o.to]
}
