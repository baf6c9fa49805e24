// Package tokenusage extracts the token usage an LLM API reports in a
// response body, incrementally, while the body streams through a proxy, and
// counts the bytes of output text that went by, for an estimate when no
// usage comes.
//
// It understands OpenAI chat/completions and legacy completions, the OpenAI
// Responses API, the usage of OpenAI's Images API and audio
// transcriptions, Anthropic Messages, Gemini and Vertex AI generateContent,
// Cohere v2 chat, Amazon Bedrock Converse and ConverseStream, and Ollama's
// native chat and generate, with the many providers compatible with them:
// as server-sent event streams, JSON bodies, NDJSON lines, top-level JSON
// arrays and AWS event-stream messages.
//
// # Design
//
// A body is cut into roots by its framing, told from its first byte: a JSON
// body or NDJSON ('{' or '['; the elements of a top-level array are roots
// too), an AWS event stream (a zero byte, the top of a big-endian message
// length), or else server-sent events, whose "data:" lines hold the roots.
// A small JSON lexer follows each root and keeps, for every open object or
// array, where it is in a tree built from the tables in paths.go: the only
// places a usage object is accepted, and the values that hold output text.
// A value anywhere else is skipped with a brace and quote count, strings
// with bytes.IndexByte, without looking at its keys; so a usage object
// inside echoed request data, tool schemas, tool-call arguments or content
// is never read, however it is nested or escaped.
//
// A usage object at an accepted path is copied, up to its matching brace,
// into a small reused buffer capped at MaxUsageObjectBytes, and read with
// gjson when it closes; its fields take effect when its root completes, so
// a root cut short (an interrupted event, a truncated body) reports nothing.
//
// Everything that crosses a chunk boundary is kept as a few integers (the
// framing's position, the lexer's state, a key or number of at most a few
// dozen bytes) plus the bounded object buffer, so the Parser is a byte-level
// state machine: its result does not depend on where the body is cut into
// chunks, and chunks are never retained. Once the buffer has grown, nothing
// allocates, usage objects included.
//
// Providers are told apart by the field names in the usage object. Every
// provider reports each number either once or cumulatively, so a later value
// of a raw field overrides the earlier one field by field, and the raw fields
// are only normalised into a Usage when it is asked for. A malformed usage
// object is ignored as a whole.
package tokenusage

import "github.com/tokenlimit/ai-token-ratelimit/pricing"

// MaxUsageObjectBytes caps the size of one buffered usage object, braces
// included. A larger usage object is skipped, so a Parser never holds more
// than this many bytes of the body however large the body is. Real usage
// objects are a few hundred bytes; Anthropic's with a long list of
// iterations a few KiB.
const MaxUsageObjectBytes = 16 << 10

// Usage is the token usage one response reported, normalised across providers.
//
// Parts of one whole may overlap where the provider does not say how they
// do (OpenAI's cached_tokens and audio_tokens): package pricing takes each
// from what the others left of the whole, and charges it in full.
type Usage struct {
	Input         int64 // all prompt tokens the model processed, cache reads and cache writes included
	Output        int64 // completion tokens, reasoning/thinking included
	CacheRead     int64 // part of Input served from a prompt cache
	CacheCreation int64 // part of Input written to a prompt cache
	Reasoning     int64 // part of Output spent reasoning (thinking), where the provider says how much: OpenAI, xAI, Gemini
	// Parts of Input and Output that were audio or images, each at most
	// its whole, where the provider says how much: OpenAI chat
	// completions (and the APIs that report its prompt_tokens_details and
	// completion_tokens_details: xAI, OpenRouter), OpenAI's Images API
	// and audio transcriptions, Gemini and Vertex AI (by modality; audio
	// and images read from a prompt cache are cache reads, not these).
	// Anthropic, Bedrock, Cohere and Ollama report no such parts.
	InputAudio, InputImage   int64
	OutputAudio, OutputImage int64
}

// Tokens are the usage as package pricing prices it.
func (u Usage) Tokens() pricing.Tokens {
	return pricing.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheCreation,
		Reasoning: u.Reasoning, InputAudio: u.InputAudio, InputImage: u.InputImage,
		OutputAudio: u.OutputAudio, OutputImage: u.OutputImage}
}

// Total is the number of tokens the response consumed, Input plus Output.
func (u Usage) Total() int64 { return u.Input + u.Output }

// Parser incrementally extracts the token usage from one response body.
// The zero value is ready to use; call Reset to reuse it for another body.
// A Parser is not safe for concurrent use.
type Parser struct {
	frames frames
	lex    lexer
	memo   lineMemo // the last data line's start, see lineMemo

	usage        rawUsage // what the completed roots reported
	pending      rawUsage // what the root being read has reported so far
	textBytes    int64
	usageObjects int // usage objects come upon, read or not
	finished     bool
}

// Write feeds the next bytes of the body. It never retains chunk.
// Writes after Finish are ignored until Reset.
func (p *Parser) Write(chunk []byte) {
	switch {
	case p.finished:
	case p.frames.kind == sseEvents:
		p.frameEvents(chunk) // the common case, without going through frame
	default:
		p.frame(chunk)
	}
}

// Finish marks the end of the body; later Writes are ignored until Reset.
// Whatever root the body ended in the middle of is dropped: a truncated
// object cannot be trusted (`"output_tokens":12` may have been cut from
// `"output_tokens":125`).
func (p *Parser) Finish() {
	p.finished = true
}

// Usage returns the usage reported so far, and false when the body has not
// reported any.
func (p *Parser) Usage() (Usage, bool) {
	return p.usage.usage()
}

// TextBytes returns how many bytes of output text went by so far: the
// strings at TextPaths, each escape sequence counted as the bytes it stands
// for (\uXXXX as 3, the width of most non-ASCII characters in UTF-8), and
// tool-call arguments sent as JSON by their raw size.
func (p *Parser) TextBytes() int64 {
	return p.textBytes
}

// UsageObjects returns how many usage objects (at UsagePaths) the Parser
// has come upon so far, counted at their opening brace: whether or not
// they were whole, JSON or within MaxUsageObjectBytes. A chunk after which
// the count has not changed had none, nor the start of one.
func (p *Parser) UsageObjects() int {
	return p.usageObjects
}

// Reset prepares the Parser for a new body, keeping its buffer for reuse.
func (p *Parser) Reset() {
	*p = Parser{lex: lexer{obj: p.lex.obj[:0]}}
}
