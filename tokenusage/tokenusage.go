// Package tokenusage extracts the token usage an LLM API reports in a
// response body, incrementally, while the body streams through a proxy.
//
// It understands OpenAI chat/completions, the OpenAI Responses API,
// Anthropic Messages and Gemini generateContent, both as server-sent event
// streams and as whole JSON bodies, with one code path: it never parses SSE
// events or the surrounding JSON at all.
//
// # Design
//
// A Parser scans the raw bytes for the key tokens "usage" and
// "usageMetadata" (quotes included), jumping with bytes.IndexByte from one
// 'g' to the next, a byte that is rare in JSON and prose. A token counts only
// when its opening quote is not escaped, that is when it is preceded by an
// even run of backslashes; in valid JSON such a token followed by optional
// whitespace, ':', optional whitespace and '{' can only be an object key whose
// value is an object. That object is then copied, with string- and
// escape-aware brace counting, up to its matching '}' into a small reused
// buffer capped at MaxUsageObjectBytes, and its fields are read with gjson.
//
// Content events thus cost an IndexByte scan that pauses briefly at each 'g',
// and nothing else; a "usage":null costs a few byte comparisons after the
// key. Everything that crosses a chunk boundary is kept as a few integers
// (how many bytes of a key token have matched, the parity of a trailing
// backslash run, the brace depth and string state) plus the bounded object
// buffer, so the Parser is a byte-level state machine: its result does not
// depend on where the body is cut into chunks, and chunks are never retained.
// Once the buffer has grown, nothing allocates, usage objects included.
//
// Providers are told apart by the field names in the usage object. Every
// provider reports each number either once or cumulatively, so a later value
// of a raw field overrides the earlier one field by field, and the raw fields
// are only normalised into a Usage when it is asked for. A malformed usage
// object is ignored as a whole.
//
// The scan does not track JSON nesting, so an object-valued "usage" key
// anywhere in the body is a candidate (for instance inside tool-call
// arguments that a provider sends as a JSON object rather than a string);
// candidates without any known usage field are ignored.
package tokenusage

// MaxUsageObjectBytes caps the size of one buffered usage object, braces
// included. A usage object larger than this is dropped (scanning resumes right
// after the part that did fit), so a Parser never holds more than this many
// bytes of the body however large the body is. Real usage objects are a few
// hundred bytes at most.
const MaxUsageObjectBytes = 4096

// Usage is the token usage one response reported, normalised across providers.
type Usage struct {
	Input         int64 // all prompt tokens the model processed, cache reads and cache writes included
	Output        int64 // completion tokens, reasoning/thinking included
	CacheRead     int64 // part of Input served from a prompt cache
	CacheCreation int64 // part of Input written to a prompt cache
}

// Total is the number of tokens the response consumed, Input plus Output.
func (u Usage) Total() int64 { return u.Input + u.Output }

// Parser incrementally extracts the token usage from one response body.
// The zero value is ready to use; call Reset to reuse it for another body.
// A Parser is not safe for concurrent use.
type Parser struct {
	state state

	// While scanning: how many bytes of a key token were matched at the end
	// of the previous chunk, and whether the bytes before the next input end
	// in an odd run of backslashes (which escapes a quote starting the input).
	keyMatched   int
	backslashOdd bool

	// While capturing: the object so far, and the brace/string state needed
	// to find its end.
	obj      []byte
	depth    int
	inString bool
	escaped  bool

	finished bool
	raw      rawUsage
}

// state is where the Parser is in recognising `"usage" : {...}`.
type state uint8

const (
	scanning   state = iota // looking for a key token
	afterKey                // key token seen, expecting ':'
	afterColon              // ':' seen, expecting '{'
	capturing               // inside the usage object
)

// Write feeds the next bytes of the body. It never retains chunk.
// Writes after Finish are ignored until Reset.
func (p *Parser) Write(chunk []byte) {
	if p.finished {
		return
	}
	for len(chunk) > 0 {
		var found bool
		switch p.state {
		case scanning:
			chunk = p.scan(chunk)
		case afterKey:
			if chunk, found = p.expectDelimiter(chunk, ':'); found {
				p.state = afterColon
			}
		case afterColon:
			if chunk, found = p.expectDelimiter(chunk, '{'); found {
				p.startObject()
			}
		case capturing:
			chunk = p.capture(chunk)
		}
	}
}

// Finish marks the end of the body; later Writes are ignored until Reset.
// Usage objects are applied as soon as their closing brace arrives, so no
// complete piece is ever left to examine here, and whatever the body ended in
// the middle of is dropped: a truncated object cannot be trusted
// (`"output_tokens":12` may have been cut from `"output_tokens":125`).
func (p *Parser) Finish() {
	p.finished = true
}

// Usage returns the usage reported so far, and false when the body has not
// reported any.
func (p *Parser) Usage() (Usage, bool) {
	return p.raw.usage()
}

// Reset prepares the Parser for a new body, keeping its buffer for reuse.
func (p *Parser) Reset() {
	*p = Parser{obj: p.obj[:0]}
}

// resumeScan returns to looking for a key token. odd tells whether the bytes
// consumed so far end in an odd run of backslashes.
func (p *Parser) resumeScan(odd bool) {
	p.state = scanning
	p.backslashOdd = odd
}
