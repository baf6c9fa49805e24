// Package estimate estimates the token cost of an LLM API request from its
// body before the request runs, so that a limiter can reserve it up front and
// reconcile with the usage the response reports.
//
// It understands OpenAI chat/completions (and legacy completions), the OpenAI
// Responses API, Anthropic Messages and Gemini generateContent, with one set
// of rules for what a body holds; what each API adds to it, and how its
// provider bills tools and media, is by the request's API (Dialect), which
// its caller tells from the request's path (DialectOf). The estimate says
// what the body says: a model the path names (Gemini's, ModelFromPath) is
// the caller's to read.
//
// # What counts as prompt text
//
// The prompt estimate is the calibrated count of the prompt text (count.go:
// its JSON form weighed by byte classes and the starts of words and numbers,
// fitted to OpenAI's o200k tokenizer, and scaled to the tokenizer of the
// model's family: family.go), or with Options.BytesPerToken set the number
// of its decoded bytes (what gjson's Result.String returns) divided by it,
// rounded up. Prompt text is these strings:
//
//   - "messages", "contents", "input", "instructions", "prompt" (top level):
//     the field itself when it is a string; when it is an array, each string
//     element, and the "content" and "parts" of each object element (a
//     message, a Responses input item or a Gemini content).
//   - "system" (top level): a string or an array of parts.
//   - "systemInstruction" or "system_instruction" (top level): an object
//     whose "parts" count as a message's do.
//   - A message's "content" or "parts": a string, or an array of parts.
//   - A part (an object in such an array): its "text" string, whatever the
//     part's type ("text", "input_text", "output_text", Gemini's untyped
//     parts); and, for a part whose "type" is "tool_result", its "content",
//     which counts as a message's content does (string or text parts) but
//     whose own tool_result parts are not looked into.
//   - "tools", "functions", "tool_choice" (top level), and the output
//     schemas "response_format", "text" (the Responses API's), "output_format"
//     (Anthropic's), "toolConfig" and "outputConfig" (Bedrock Converse's),
//     and generationConfig's "responseSchema" and "responseJsonSchema" (or
//     their snake_case forms): their raw JSON, whatever it holds, since
//     tool definitions and schemas are sent to the model; with the
//     calibrated count, OpenAI's tools as OpenAI renders them (tools.go).
//
// To the prompt text's tokens the estimate adds what the model's family
// adds by its provider's documentation (family.go: the family of the
// body's model in Prompt, of any model by PromptFor): for OpenAI's models,
// in OpenAI's chat and Responses APIs (see Dialect, by the request's
// path), its chat format's 4 tokens per message (each element of
// "messages", or of a Responses "input", or 1 for an "input" string) and 3
// for the reply's priming; for Claude, its frame and, for a non-empty
// "tools" (or Bedrock Converse's toolConfig), its tool-use system prompt
// (by model and tool_choice); for Llama, Mistral, Qwen and DeepSeek, their
// chat template's tokens and tool prompt.
//
// Media sent inline (images, audio, video, PDF documents in base64) count
// as their provider bills them, by their size in pixels, length or pages
// read from their header (media.go), in a body of which at least half is
// not text (mayHoldMedia); a body too large to parse counts its media so
// too, and the rest of its size as text. At most maxMedia media count, and
// the place and header of at most mediaChecks values are read (a body too
// large to parse: of as many of its candidates); past them, inline data is
// text, the more expensive reading of any medium of a few kilobytes. A medium is one only where an API
// puts media (a data URL in OpenAI's image_url or file_data, the "data" of
// an Anthropic base64 source, of Gemini's inlineData, of OpenAI's
// input_audio, the "bytes" of a Bedrock Converse source: place.go), and
// only when its header is that of the kind its place or its type names;
// any other string is text, and inline data at those places that is no
// medium (a plain text document, a data URL whose base64 is not the image
// it says) counts as text. Images sent by URL or by file id count as an
// image of unknown size.
//
// Tool calls and results in the history count as the model reads them: a
// message's "tool_calls" or "function_call" (OpenAI chat) and a Responses
// item's "arguments" or "output", a part's "input" (Anthropic's tool_use),
// "functionCall" or "functionResponse" (Gemini's): a string by its text,
// anything else by its raw JSON. Opaque reasoning (a thinking block's
// "signature", a redacted block's "data", Gemini's "thoughtSignature",
// Responses' "encrypted_content") counts at opaqueBytesPerToken
// (reasoning.go); a thinking block's "thinking" and a reasoning item's
// "summary" as text.
//
// Nothing else counts: files of other types sent by reference cannot be
// read. A prompt given as token ids (an array of numbers, or a batch of such
// arrays, in "prompt" or "input") counts a token per id. The estimate is
// only a reservation, corrected once the response reports its real usage.
//
// # Output cap
//
// The completion estimate is the first of max_completion_tokens,
// max_tokens, max_output_tokens (top level) and the maxOutputTokens (or
// max_output_tokens) of generationConfig (or generation_config) that holds a
// positive number, however it is written (4096, 4096.0, 4.096e3); a
// fraction is rounded up. Without one, Options.DefaultCompletionTokens.
//
// # Bounds
//
// Prompt and Completion are at most MaxTokens (10^15): a larger cap (an
// "unlimited" 9223372036854775807, 1e300, a number of any length), default
// or declared body size counts as MaxTokens. Clients choose these numbers,
// and the limiter adds them up, prices them and sends them to Redis, whose
// Lua scripts count in doubles, exact up to 2^53 (about 9 × 10^15): bounded
// at MaxTokens, a few of them summed and a counter they are added to stay
// exact, and nothing overflows an int64. No real request comes near it (the
// largest context windows are ~10^7 tokens), and a reservation of MaxTokens
// exceeds any real window's limit: such a request is rejected.
//
// # Odd bodies
//
// A key that occurs more than once in an object counts every time it holds
// prompt text (an upper bound, whichever occurrence the upstream API
// honours); for "model" the last string occurrence is the Model, as with
// most JSON parsers, and the others are OtherModels; of output caps given
// twice the larger counts; a part is a tool_result if any of its "type"
// members says so. Escaped keys ("\u006dessages") are decoded first, and a
// top-level key in another letter case ("MODEL", as Go's encoding/json
// reads it) counts as the key. A body that parsers read differently (these,
// a byte order mark, NaN, comments, trailing commas: see ambiguous.go) is
// read the way that costs most and marked Ambiguous.
//
// A body that is empty, larger than Options.MaxBodyBytes, not valid JSON
// even as lenient parsers read it, valid JSON but not an object, or nested
// deeper than MaxDepth objects and arrays is not parsed: its prompt
// estimate is its size divided by BytesPerToken (else SizeBytesPerToken),
// rounded up; if it starts
// as an object, its model is unknown (UnknownModel), unless the request is
// Gemini's, whose path names it. Valid means what gjson.ValidBytes accepts
// (RFC 8259 JSON, strings not checked for valid UTF-8); the check is made by
// the same single pass that extracts the text, which never recurses more
// than a few levels, so hostile bodies cost time linear in their size and a
// fixed amount of memory: at most a step a byte (a JSON token read in Go,
// or a call of the assembly that crosses the rest), and of media a bounded
// number of bytes read around each candidate and of their headers decoded
// (see work; FuzzWork holds every body to that bound).
//
// Parsing allocates nothing but the copy of the model name (and once a
// small buffer to decode the keys and values with escapes it compares, and
// the decoded form of a model name with escapes). The tests hold it to a
// straightforward gjson implementation (ValidBytes, then ForEach), which is
// about ten times slower and allocates per string.
//
// Compiled to WASM, Go spends about 100 ns on each JSON token, so the loops
// that read most of a body are written in WASM assembly as well as in Go:
// the scan of a string's content (scan_wasm.s), the skipping of a value the
// estimate does not count (skip_wasm.s) and the reading of plain messages
// (plain.go, plain_wasm.s). The assembly builds with the standard toolchain
// (gc) unless the build tag noasm is set; the Go versions are the
// specification, run natively and fuzzed. make test runs the tests of this
// package both natively and compiled to WASM under wazero, and make bench
// times a whole request with and without the assembly (BENCHMARKS.md): it
// stays while it cuts more than 15 % of a request with a 256 KiB body.
package estimate

import (
	"net/url"
	"strings"
	"unsafe"
)

// MaxDepth is the deepest nesting of objects and arrays, the top-level object
// counting as 1, of a body that is parsed. Deeper bodies are estimated by
// size. It is what skipValue (in WASM, assembly that keeps the kind of each
// open container in a 64-bit register) crosses in one call: a value nested
// deeper would be read by the walker's Go, about 100 ns a byte in WASM, 25
// times a real body (no real request nests its JSON over a dozen deep).
const MaxDepth = 64

// MaxTokens is the largest Prompt or Completion an estimate holds, and the
// largest token amount the limiter charges or reserves (see Bounds).
const MaxTokens int64 = 1_000_000_000_000_000

// Estimate is what a request is expected to cost before it runs.
type Estimate struct {
	Prompt     int64  // estimated input tokens (see What counts as prompt text), at most MaxTokens
	Completion int64  // the output cap the request names, else the default; at most MaxTokens
	Model      string // the model the body names ("" when none; a Gemini request's body is not read for one: see Request)
	Parsed     bool   // false when the body was not parsed (empty, too large, not a JSON object, too deep, or read for its model only: Options.ModelOnly): Prompt is then its size at BytesPerToken (else SizeBytesPerToken), rounded up

	// Ambiguous says what makes JSON parsers read the body otherwise than
	// Request did ("" when they read it alike): see ambiguous.go. The
	// estimate is then the reading that costs most: the larger of two
	// output caps, and every model the body may name.
	Ambiguous string
	// OtherModels are the other models an ambiguous body may name, to
	// parsers that keep another occurrence of "model" (the first ones
	// filled, distinct, none equal to Model).
	OtherModels [MaxOtherModels]string
	// UnknownModel says the body may name a model Request cannot tell: it
	// starts as a JSON object but cannot be read even as lenient parsers
	// read it, or names more than MaxOtherModels others.
	UnknownModel bool

	// parts are what Prompt adds up, for PromptFor (a parsed body's).
	parts promptParts
}

// PromptFor is the prompt as model counts it (the model the request is
// resolved to, or one it may be served as): as its family does
// (FamilyOf(model, the request's API): family.go). Request's Prompt is
// PromptFor the body's model (Model). A body not parsed counts by its size
// whatever the model. It allocates nothing.
func (e *Estimate) PromptFor(model string) int64 {
	if !e.Parsed {
		return e.Prompt
	}
	return e.parts.prompt(FamilyOf(model, e.parts.api), model)
}

// Options tune Request.
type Options struct {
	// BytesPerToken > 0 counts prompt text as its bytes over it; 0 (or
	// less) counts it with the calibrated count (count.go), and a body or
	// text counted by its size at SizeBytesPerToken.
	BytesPerToken           int64
	DefaultCompletionTokens int64 // used when the request names no output cap; a value < 0 is taken as 0
	MaxBodyBytes            int64 // bodies larger than this are estimated by size without parsing; ≤ 0: no limit
	// ModelOfLargeBodies: find the model of a body larger than MaxBodyBytes
	// all the same (its last top-level "model", as when the body is parsed;
	// one scan that skips the values), for a cost that depends on the model.
	ModelOfLargeBodies bool
	// ModelOnly reads a body of any size for its model alone (and its
	// output cap, and what makes parsers read those differently: see Odd
	// bodies), as the walk reads them, skipping every other value: its
	// prompt is its size (Size), its text and media not read, and it is
	// not Parsed. For a caller that reserves no estimate, and needs the
	// prompt's only for a response that reports no usage, where its size
	// is enough.
	ModelOnly bool
}

// SizeBytesPerToken is the bytes per token of a body, or a text, counted by
// its size when Options.BytesPerToken is not set: English prose in UTF-8
// (Latin scripts have a little more bytes per token, CJK a little less).
const SizeBytesPerToken = 4

// SizeBytesPerToken is the bytes per token of what is counted by its size
// (a body unparsed, the text of a response that reports no usage):
// BytesPerToken, else the constant SizeBytesPerToken. It is the one place
// that default is applied.
func (o Options) SizeBytesPerToken() int64 {
	if o.BytesPerToken > 0 {
		return o.BytesPerToken
	}
	return SizeBytesPerToken
}

// Request estimates a request from its body (nil or empty for a bodyless
// request: Prompt 0, Completion the default), read as its API reads it
// (DialectOf its path, or RouteDialect).
//
// The model is the body's last string "model" member. A Gemini request
// (DialectGemini) names its model in its path, which its upstream reads
// and not the body: its body is not read for one (Model "", no model
// ambiguous or unknown), and the caller reads the path's (ModelFromPath).
// Request does not retain body, which must not change while Request runs.
func Request(body []byte, api Dialect, o Options) Estimate {
	return requestWork(body, api, o, nil)
}

// requestWork is Request, counting what it does in work (when not nil).
func requestWork(body []byte, api Dialect, o Options, work *work) Estimate {
	bom := len(body) >= len(byteOrderMark) && string(body[:len(byteOrderMark)]) == byteOrderMark
	if bom {
		body = body[len(byteOrderMark):] // read as the parsers that accept it read it (see ambiguous.go)
	}
	e := request(body, api, o, work)
	if bom && e.Ambiguous == "" {
		e.Ambiguous = AmbiguousBOM
	}
	return e
}

// work is what an estimate did, for the tests, which hold it to a bound per
// byte of the body (FuzzWork): the walker's steps, each a JSON token read in
// Go or a call of assembly (about 100 ns in WASM, whatever the token), and
// what the media were read for (scanWork).
type work struct {
	steps int64
	media scanWork
}

// add counts a walk's work (nothing when work is nil).
func (work *work) add(w *walker) {
	if work != nil {
		work.steps += w.steps
		work.media.candidates += w.mediaWork.candidates
		work.media.around += w.mediaWork.around
		work.media.decoded += w.mediaWork.decoded
	}
}

// request is Request on a body without a byte order mark; work (when not
// nil) counts what it did.
func request(body []byte, d Dialect, o Options, work *work) Estimate {
	// Unparsed (empty, too large, not JSON), a body is estimated by its size.
	e := Size(int64(len(body)), o)
	if len(body) == 0 {
		return e
	}
	bodyModel := d != DialectGemini // the body names the model (see Request)
	s := unsafe.String(unsafe.SliceData(body), len(body))
	if !o.ModelOnly && o.MaxBodyBytes > 0 && int64(len(body)) > o.MaxBodyBytes {
		// Too large to parse: its size, less its inline media's base64
		// (found where APIs put media: place.go), which count as media.
		var scan *scanWork
		if work != nil {
			scan = &work.media
		}
		if tokens, bytes := mediaSpans(s, d, nil, scan); bytes > 0 {
			e.Prompt = min(ceilDiv(int64(len(body))-bytes, o.SizeBytesPerToken())+tokens, MaxTokens)
		}
		if o.ModelOfLargeBodies && bodyModel {
			w := walker{s: s}
			ok := w.lastModel()
			work.add(&w)
			if ok {
				w.models(&e)
			} else if looksLikeObject(s) {
				// Not strict JSON: read as lenient parsers read it, if they do.
				relaxedBody, ok := relaxedSteps(s, work)
				if w = (walker{s: string(relaxedBody)}); ok && w.lastModel() {
					w.ambiguous = AmbiguousLenient
					w.models(&e)
				} else {
					e.UnknownModel, e.Ambiguous = true, AmbiguousUnread
				}
				work.add(&w)
			}
		}
		return e
	}
	weigh := o.BytesPerToken <= 0 && !o.ModelOnly
	openAI := d == DialectOpenAIChat || d == DialectOpenAIResponses
	w := walker{s: s, weigh: weigh, openAI: openAI, dialect: d, modelOnly: o.ModelOnly}
	ok := w.walk()
	work.add(&w)
	if !ok {
		// Not strict JSON: read as lenient parsers read it, if they do.
		relaxedBody, ok := relaxedSteps(s, work)
		if !ok {
			if looksLikeObject(s) && bodyModel {
				e.UnknownModel, e.Ambiguous = true, AmbiguousUnread
			}
			return e
		}
		w = walker{s: string(relaxedBody), weigh: weigh, openAI: openAI, dialect: d, modelOnly: o.ModelOnly}
		ok = w.walk()
		work.add(&w)
		if !ok {
			if looksLikeObject(s) && bodyModel {
				e.UnknownModel, e.Ambiguous = true, AmbiguousUnread
			}
			return e
		}
		w.ambiguous = AmbiguousLenient
	}
	for _, c := range w.caps {
		if c > 0 {
			e.Completion = c
			break
		}
	}
	w.models(&e)
	if o.ModelOnly {
		return e // the prompt by its size
	}
	e.Parsed = true
	var images int64
	if mayHoldMedia(int64(len(body)), w.text, w.messages) {
		images = w.mediaTokens // the inline media the walk read (as lenient parsers do)
	}
	images += imageRefTokens(d, w.images[0], w.images[1])
	e.parts = promptParts{api: d, units: w.units, toolUnits: w.toolUnits, toolMembers: w.toolMembers, rendered: w.openAI && weigh,
		fixed: w.tokenIDs + ceilDiv(w.opaque, opaqueBytesPerToken) + images, messages: w.messages, system: w.system, tools: w.tools, forcedTool: w.forcedTool}
	if !weigh {
		e.parts.bytesPerToken, e.parts.textBytes = o.BytesPerToken, w.text
	}
	e.Prompt = e.PromptFor(e.Model)
	return e
}

// mayHoldMedia says whether the inline media the walk read (inlineString)
// count in a parsed body of size bytes, text of them prompt text, in
// messages (of "messages" or "input"): when at least half of it is not
// text, and that is at least 512 bytes a message. An image is base64,
// uncounted and long; an image small beside its text is a small part of
// its cost.
func mayHoldMedia(size, text, messages int64) bool {
	nonText := size - text
	return 2*nonText >= size && nonText >= 512*max(messages, 1)
}

// Size estimates a request whose body cannot be read (compressed, binary) by
// its declared size in bytes, as Request does an unparsed body: a body
// unread names no model. The size comes from the client (Content-Length):
// any int64 gives at most MaxTokens. So does any DefaultCompletionTokens:
// the plugin's configuration bounds it where it is parsed
// (token_reservation.default_completion_tokens, at most 2^40), but
// Options are anyone's, and an Estimate holds to its bounds whatever they
// say (the one default clamp of the reservation's path).
func Size(bodyBytes int64, o Options) Estimate {
	return Estimate{
		Prompt:     PromptOfSize(bodyBytes, o),
		Completion: min(max(o.DefaultCompletionTokens, 0), MaxTokens),
	}
}

// PromptOfSize is Size's prompt estimate alone: for a caller that keeps
// only the prompt.
func PromptOfSize(bodyBytes int64, o Options) int64 {
	return min(ceilDiv(max(bodyBytes, 0), o.SizeBytesPerToken()), MaxTokens)
}

// ModelFromPath returns the Gemini model in a path like
// /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse, or in a
// Vertex AI path like
// /v1/projects/p/locations/l/publishers/google/models/gemini-2.5-pro:generateContent:
// the path segment after the last "models" segment, up to a ':' that
// introduces the method. It returns "" when there is none, or when the model
// is not followed by a method (as in OpenAI's GET /v1/models/gpt-4o).
//
// The path is read as its upstream reads it, percent-decoded: each segment
// (between two '/') is decoded as net/url.PathUnescape does, so that
// /models/gemini-2.5-pro%3AgenerateContent or /%6Dodels/… name their model.
// An escaped slash (%2F) is decoded within its segment, as Google's API front
// end decodes a path variable (/models/a%2Fb:x names "a/b"); a path that
// names no model that way but does once %2F is taken for a '/' (what a server
// that decodes the whole path before routing it sees, as uvicorn does) names
// that one. A path with a malformed escape ('%' not followed by two hex
// digits) names no model: the upstream refuses it. Only a path with escapes
// costs an allocation.
func ModelFromPath(path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if !validEscapes(path) {
		return ""
	}
	if m := modelOfSegments(path, true); m != "" || !hasEscapedSlash(path) {
		return m
	}
	decoded, _ := url.PathUnescape(path) // valid: checked above
	return modelOfSegments(decoded, false)
}

// modelOfSegments returns the model that follows the last "models" segment
// of path (not the first, which no '/' starts), up to the ':' of its method;
// with decode, each segment is percent-decoded first.
func modelOfSegments(path string, decode bool) string {
	unescape := func(seg string) string {
		if decode {
			seg, _ = url.PathUnescape(seg) // escapes are valid; no allocation without one
		}
		return seg
	}
	const models = "models"
	var next string // what follows the last "models" segment
	found := false
	for rest := path; ; {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			break // the last segment, which no model follows
		}
		// Only a segment short enough to decode to "models" is decoded.
		if seg := rest[:j]; seg == models || len(seg) <= 3*len(models) && unescape(seg) == models {
			next, found = rest[j+1:], true
		}
	}
	if !found {
		return ""
	}
	if j := strings.IndexByte(next, '/'); j >= 0 {
		next = next[:j]
	}
	m, _, ok := strings.Cut(unescape(next), ":")
	if !ok || m == "" {
		return ""
	}
	return m
}

// validEscapes reports whether every '%' in s starts an escape: two hex
// digits follow it.
func validEscapes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return false
		}
	}
	return true
}

// hasEscapedSlash reports whether s holds %2F or %2f.
func hasEscapedSlash(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '%' && s[i+1] == '2' && s[i+2]|0x20 == 'f' {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// lastModel reads the top-level members of the body, skipping their values,
// and notes its "model" members that hold a string as the walk does
// (noteModel; keys decoded, case variants included): the model of a body
// too large to be walked. It reports false when the body is not a JSON
// object (valid and nested at most MaxDepth deep), as the walk does. It
// allocates only the walker's scratch, for a key written with escapes.
func (w *walker) lastModel() bool {
	w.ws()
	if w.peek() != '{' || !w.enter() {
		return false
	}
	for first := true; w.next(first, '}'); first = false {
		if w.peek() != '"' {
			w.bad = true
			break
		}
		raw, n := w.str()
		isModel := raw == "model"
		if !isModel && n <= 3*int64(len("model")) && !w.bad {
			key := raw
			if n != int64(len(raw)) {
				key = w.decodeEscaped(raw)
			}
			isModel = w.topKey(key) == "model"
		}
		w.ws()
		if w.peek() != ':' {
			w.bad = true
			break
		}
		w.i++
		w.ws()
		v := w.i
		if isModel && w.peek() == '"' {
			w.str()
			w.noteModel(w.s[v:w.i])
		} else {
			w.skip()
		}
	}
	w.ws()
	return !w.bad && w.i == len(w.s)
}

// ceilDiv returns n/d rounded up, for n ≥ 0 and d > 0, without overflow.
func ceilDiv(n, d int64) int64 {
	q := n / d
	if n%d != 0 {
		q++
	}
	return q
}

// SkipValue returns the index just after the JSON value that starts at
// s[i] (blank space before it skipped), and true, when it is valid JSON (the
// grammar gjson.ValidBytes accepts) nested at most 63 deep; otherwise
// false. In WASM it is assembly that crosses a value in one call
// (skip_wasm.s), where gjson steps a byte at a time.
func SkipValue(s string, i int) (end int, ok bool) {
	return skipValue(s, i, 63, &simpleEscape)
}
