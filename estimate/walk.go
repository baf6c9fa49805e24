package estimate

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// Output caps, in order of precedence.
const (
	capMaxCompletionTokens = iota
	capMaxTokens
	capMaxOutputTokens
	capGeminiMaxOutputTokens
	numCaps
)

// walker reads a request body in one pass, allocating only to decode a key
// or a part type that has escapes: it adds up the prompt text, notes the
// model and the output caps, and validates the JSON as it goes, with the
// grammar gjson.ValidBytes accepts (RFC 8259; like ValidBytes it does not
// check that strings are valid UTF-8). Strings, most of a body, are scanned
// 8 bytes at a time (scanString), and runs of plain messages, most of the
// rest, in one call (plainTurns); both are WASM assembly in the plugin.
//
// It descends only into the fields that matter, a fixed number of levels, so
// its recursion is bounded; everything else is validated and skipped in one
// call of skipValue, an iterative loop that keeps the kind of each open
// container in a bit set (assembly in WASM). Nesting deeper than MaxDepth
// stops the walk.
type walker struct {
	s     string
	i     int   // read position in s
	depth int   // objects and arrays open at i
	bad   bool  // not valid JSON, or deeper than MaxDepth
	text  int64 // bytes of prompt text
	// With weigh, units is the calibrated count of the prompt text
	// (count.go), in 1/UnitsPerToken of a token; spans are the strings
	// the walker weighs in one call of spansUnits.
	weigh bool
	units int64
	// openAI says the request is in OpenAI's chat or Responses dialect,
	// whose tools are counted as OpenAI renders them (tools.go).
	openAI bool
	spans  textSpans
	caps   [numCaps]int64
	// messages counts the elements of "messages" and "input" arrays: the
	// messages a chat format wraps (family.go). tools says "tools" (or
	// Bedrock Converse's toolConfig's) is a non-empty array, forcedTool
	// that "tool_choice" forces a tool (its "type" is "any" or "tool"; a
	// toolChoice of "any" or "tool"): Anthropic's tool-use system prompt.
	messages   int64
	tools      bool
	forcedTool bool
	// system says the request has a top-level system prompt ("system",
	// "systemInstruction", Responses' "instructions"): a message more to
	// a chat template (family.go). toolUnits are the units of the tool
	// definitions ("tools", "functions", Bedrock Converse's "toolConfig"),
	// apart from units; toolMembers counts the members of the tool objects
	// read to render them as OpenAI does (tools.go), what their JSON adds
	// to that rendering (jsonMemberUnits).
	system      bool
	toolUnits   int64
	toolMembers int64
	// images counts the images sent by URL or by file (media.go), of
	// OpenAI's "detail": "low" ([1]) or not ([0]).
	images [2]int64
	// scratch holds a string decodedStr decodes (allocated for the first:
	// a walk allocates it once, whatever the strings with escapes it reads);
	// with whole, one longer than it is decoded whole, allocating (a key
	// whose text counts: tools.go).
	scratch *[64]byte
	whole   bool
	// steps counts the walk's reads in Go and its calls of assembly, and
	// mediaWork what its media were read for (see work).
	steps     int64
	mediaWork scanWork
	// modelOnly reads the model, the output caps and the ambiguities of
	// the top-level members only (Options.ModelOnly), skipping the rest.
	modelOnly bool
	// dialect is the request's API, by whose rules media count; media
	// counts the inline media read (media.go's inlineString, at most
	// maxMedia), mediaTokens what they cost.
	dialect     Dialect
	media       int
	mediaTokens int64
	checks      int // the values read as media (mediaChecks)
	// opaque counts the bytes of opaque reasoning carried in the history
	// (reasoning.go).
	opaque int64
	// tokenIDs counts the numbers of a prompt given as token ids
	// ("prompt": [1212, 318], or a batch of such lists): a token each.
	tokenIDs int64
	model    string // the last string "model" member, quotes included
	// others are the other string values of "model" members (a duplicate,
	// or a case variant), quotes included, distinct from model and from
	// each other as written: what a parser that keeps another occurrence
	// reads. tooMany says there were more than fit.
	others  [MaxOtherModels]string
	tooMany bool
	// ambiguous names what makes parsers read the body otherwise than the
	// walk does ("": nothing found).
	ambiguous string
}

// walk reads the body. It reports false if the body is not a valid JSON
// object nested at most MaxDepth deep.
func (w *walker) walk() bool {
	w.ws()
	if w.peek() != '{' {
		return false
	}
	w.top()
	w.ws()
	return !w.bad && w.i == len(w.s)
}

func (w *walker) top() {
	if !w.enter() {
		return
	}
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return
		}
		v := w.i
		if k = w.topKey(k); w.modelOnly && !modelOnlyKey(k) {
			w.done(v)
			continue
		}
		switch k {
		case "model":
			if w.peek() == '"' {
				w.str()
				w.noteModel(w.s[v:w.i])
			}
		case "messages":
			w.turns(true, false)
		case "input":
			w.turns(true, true)
		case "prompt":
			w.turns(false, true)
		case "contents":
			w.turns(false, false)
		case "instructions":
			w.system = w.system || w.peek() == '"' || w.peek() == '['
			w.turns(false, false)
		case "system":
			w.system = w.system || w.peek() == '"' || w.peek() == '['
			w.content(false)
		case "systemInstruction", "system_instruction":
			if w.peek() == '{' {
				w.system = true
				w.turn()
			}
		case "tools", "functions", "tool_choice", "response_format", "text", "output_format", "outputConfig", "toolConfig":
			// Tool definitions and output schemas, sent to the model: their
			// size, whatever they hold.
			units := w.units
			switch {
			case (k == "tools" || k == "functions") && w.weigh && w.openAI:
				// As OpenAI renders them, much shorter than their JSON.
				w.openAITools()
				w.text += int64(w.i - v)
			case k == "toolConfig" && w.peek() == '{':
				w.converseToolConfig() // its tools and its toolChoice, for the tool prompt of its model's family
				w.addRaw(v)
			default:
				w.skip()
				w.addRaw(v)
			}
			raw := w.s[v:w.i]
			switch k {
			case "tools", "functions", "toolConfig":
				w.toolUnits += w.units - units // tool definitions, apart (family.go)
				w.units = units
				w.tools = w.tools || k == "tools" && nonEmptyArray(raw)
			case "tool_choice":
				w.forcedTool = forcesTool(raw)
			}
		case "max_completion_tokens":
			w.cap(capMaxCompletionTokens)
		case "max_tokens":
			w.cap(capMaxTokens)
		case "max_output_tokens":
			w.cap(capMaxOutputTokens)
		case "generationConfig", "generation_config":
			if w.peek() == '{' {
				w.generationConfig()
			}
		}
		w.done(v)
	}
}

// knownWords are the keys and values the walker compares decoded strings
// to: a string with escapes that decodes to one is that constant (see
// decodedStr). TestKnownWords holds it to the walker's source.
var knownWords = newWordTable(
	// Top-level keys (topKeys), and those of generationConfig.
	"model", "messages", "contents", "input", "instructions", "prompt", "system",
	"systemInstruction", "system_instruction", "tools", "functions", "tool_choice",
	"max_completion_tokens", "max_tokens", "max_output_tokens", "generationConfig", "generation_config",
	"response_format", "text", "output_format", "outputConfig", "toolConfig",
	"maxOutputTokens", "responseSchema", "responseJsonSchema", "response_schema", "response_json_schema",
	// A message's and a part's keys, and the values of "type".
	"content", "parts", "tool_calls", "function_call", "arguments", "output", "summary", "encrypted_content",
	"type", "tool_result", "image_url", "input_image", "image", "detail", "low", "file_id", "source",
	"fileData", "file_data", "file", "input_audio", "inlineData", "inline_data", "audio", "video", "document",
	"functionCall", "functionResponse", "thinking", "signature", "data", "thoughtSignature", "thought_signature",
	"url", "bytes", "mimeType", "mime_type",
	// Tools (tools.go).
	"function", "name", "description", "parameters", "strict", "properties", "required", "additionalProperties",
	"enum", "any", "tool",
	// Bedrock Converse's toolConfig (converseToolConfig).
	"toolChoice",
)

// modelOnlyKey says whether a top-level key is read with Options.ModelOnly:
// the model's, an output cap's.
func modelOnlyKey(k string) bool {
	switch k {
	case "model", "max_completion_tokens", "max_tokens", "max_output_tokens", "generationConfig", "generation_config":
		return true
	}
	return false
}

// turns reads a string, or an array of strings and messages; with counted,
// the array's elements are counted in w.messages; with ids, its numbers
// and arrays of numbers are token ids ("prompt" and "input": completions'
// and embeddings' prompts).
func (w *walker) turns(counted, ids bool) {
	switch w.peek() {
	case '"':
		w.addText()
		if counted {
			w.messages++ // a Responses input given as a string: one user message
		}
	case '[':
		if !w.enter() {
			return
		}
		for first := true; ; first = false {
			// Runs of token ids and of strings, and of plain messages, are
			// read in one call each.
			if n := w.scalarRun(first, ids); n > 0 {
				first = false
				if counted {
					w.messages += int64(n)
				}
			}
			var spans *textSpans
			if w.weigh {
				spans = &w.spans
				spans.n, spans.escaped = 0, 0
			}
			end, n, text, units := plainTurns(w.s, w.i, first, &simpleEscape, spans)
			w.steps += 1 + int64(n)
			if n > 0 {
				w.i, w.text, w.units, first = end, w.text+text, w.units+units, false
				if counted {
					w.messages += int64(n)
				}
				if spans != nil && spans.n > 0 {
					// The tool calls' JSON; the run may have stopped
					// because no more fitted in spans: it goes on.
					w.units += spansUnits(w.s, spans)
					w.steps++
					continue
				}
			}
			if !w.elem(first) {
				break
			}
			if counted {
				w.messages++
			}
			v := w.i
			switch c := w.peek(); {
			case c == '"':
				w.addText()
			case c == '{':
				w.turn()
			case ids && (c == '-' || c >= '0' && c <= '9'):
				w.tokenIDs++ // a prompt given as token ids: one token each
			case ids && c == '[':
				w.tokenIDList()
			}
			w.done(v)
		}
	}
}

// turn reads a message object.
func (w *walker) turn() {
	if !w.enter() {
		return
	}
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return
		}
		v := w.i
		switch k {
		case "content", "parts":
			w.content(false)
		case "tool_calls", "function_call", "arguments", "output":
			w.toolCall() // a tool call in the history, or a Responses call's arguments or output
		case "summary": // a Responses reasoning item's summary: text parts
			w.content(false)
		case "encrypted_content": // its encrypted reasoning
			w.addOpaque()
		}
		w.done(v)
	}
}

// addOpaque counts a string of opaque reasoning (reasoning.go).
func (w *walker) addOpaque() {
	if w.peek() == '"' {
		_, n := w.str()
		w.opaque += n
	}
}

// toolCall counts a tool call or result in the history, which the model
// reads: a string's decoded text, anything else by its raw JSON (names,
// arguments, ids and all: an upper bound).
func (w *walker) toolCall() {
	if w.peek() == '"' {
		w.addText()
		return
	}
	v := w.i
	w.skip()
	w.addRaw(v)
}

// content reads a string or an array of parts. In a tool result's content
// (nested), tool_result parts are not looked into.
func (w *walker) content(nested bool) {
	switch w.peek() {
	case '"':
		w.addText()
	case '[':
		if !w.enter() {
			return
		}
		for first := true; w.elem(first); first = false {
			v := w.i
			if w.peek() == '{' {
				w.part(nested)
			}
			w.done(v)
		}
	}
}

// part reads a content part object. Its "content" is counted aside and kept
// only if the part turns out to be a tool_result, since "type" may come last.
func (w *walker) part(nested bool) {
	if !w.enter() {
		return
	}
	var inner, innerUnits int64
	var innerImages [2]int64
	toolResult, image := false, false
	var ref imageRef
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			break
		}
		v := w.i
		switch k {
		case "text":
			if w.peek() == '"' {
				w.addText()
			}
		case "type":
			if w.peek() == '"' {
				switch w.decodedStr() {
				case "tool_result":
					toolResult = true
				case "image_url", "input_image", "image":
					image = true
				}
			}
		case "image_url", "detail", "file_id", "source", "fileData", "file_data":
			ref.read(w, k) // an image sent by URL or by file, inline data
		case "file", "input_audio", "inlineData", "inline_data", "image", "audio", "video", "document":
			w.readInline(k) // inline data
		case "input", "functionCall", "functionResponse":
			w.toolCall() // Anthropic's tool_use, Gemini's function calls and responses
		case "thinking": // Anthropic's thinking block: its text
			if w.peek() == '"' {
				w.addText()
			}
		case "signature", "data", "thoughtSignature", "thought_signature":
			w.addOpaque() // Anthropic's thinking signature and redacted thinking, Gemini's thought signature
		case "content":
			if !nested {
				outer, outerUnits, outerImages := w.text, w.units, w.images
				w.content(true)
				inner, innerUnits = inner+w.text-outer, innerUnits+w.units-outerUnits
				innerImages[0], innerImages[1] = innerImages[0]+w.images[0]-outerImages[0], innerImages[1]+w.images[1]-outerImages[1]
				w.text, w.units, w.images = outer, outerUnits, outerImages
			}
		}
		w.done(v)
	}
	if toolResult {
		w.text, w.units = w.text+inner, w.units+innerUnits
		w.images[0], w.images[1] = w.images[0]+innerImages[0], w.images[1]+innerImages[1]
	}
	if image && ref.byURL || ref.geminiImage {
		w.images[ref.low]++
	}
}

func (w *walker) generationConfig() {
	if !w.enter() {
		return
	}
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return
		}
		v := w.i
		switch k {
		case "maxOutputTokens", "max_output_tokens":
			w.cap(capGeminiMaxOutputTokens)
		case "responseSchema", "responseJsonSchema", "response_schema", "response_json_schema":
			w.skip() // an output schema, sent to the model: its size
			w.addRaw(v)
		}
		w.done(v)
	}
}

// cap reads an output cap, keeping it if it is a positive number. A cap
// given twice (a duplicate or a case variant of its key) keeps the larger:
// parsers differ on which occurrence counts.
func (w *walker) cap(slot int) {
	v := w.i
	if c := w.peek(); c < '0' || c > '9' {
		return
	}
	w.skip()
	if n := capValue(w.s[v:w.i]); n > 0 {
		if old := w.caps[slot]; old > 0 && old != n {
			w.ambiguous = AmbiguousCap
		}
		w.caps[slot] = max(w.caps[slot], n)
	}
}

// nonEmptyArray says whether a JSON value is an array with an element (a
// value cut short, in a body that is not JSON, has none).
func nonEmptyArray(raw string) bool {
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	j := skipSpace(raw, 1)
	return j < len(raw) && raw[j] != ']'
}

// forcesTool says whether a valid tool_choice value forces a tool use:
// Anthropic's {"type": "any"} or {"type": "tool", "name": …}.
func forcesTool(raw string) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false // "auto", "none", "required": no object, no type
	}
	t := gjson.Get(raw, "type")
	return t.Type == gjson.String && (t.Str == "any" || t.Str == "tool")
}

// converseToolConfig reads Bedrock Converse's toolConfig object at w.i,
// skipping its values (one call each): a non-empty "tools" array is tools
// as Anthropic's "tools" are, and a "toolChoice" of "any" or "tool" forces
// a tool use as Anthropic's tool_choice does (Bedrock renders a Claude
// model's toolConfig as Anthropic's tools, system prompt and all).
func (w *walker) converseToolConfig() {
	w.members(func(k string) {
		v := w.i
		w.skip()
		switch k {
		case "tools":
			w.tools = w.tools || nonEmptyArray(w.s[v:w.i])
		case "toolChoice":
			w.forcedTool = converseForcesTool(w.s[v:w.i])
		}
	})
}

// converseForcesTool says whether a valid Converse toolChoice value forces
// a tool use: {"any": {}} or {"tool": {"name": …}} (not {"auto": {}}).
func converseForcesTool(raw string) bool {
	return gjson.Get(raw, "any").IsObject() || gjson.Get(raw, "tool").IsObject()
}

// addText reads a string and counts its text: its decoded length, and with
// weigh its calibrated count.
func (w *walker) addText() {
	start := w.i + 1
	raw, n := w.str()
	w.text += n
	if w.weigh {
		w.weighText(start, start+len(raw), n != int64(len(raw)))
	}
}

// addRaw counts the JSON from s[v] to the read position as text: its
// length, and with weigh its calibrated count.
func (w *walker) addRaw(v int) {
	w.text += int64(w.i - v)
	if w.weigh {
		w.weighText(v, w.i, true)
	}
}

// weighText adds the calibrated count of s[i:j] (count.go), which has no
// backslash unless escapes says it may.
func (w *walker) weighText(i, j int, escapes bool) {
	w.steps++
	w.spans.n, w.spans.at[0], w.spans.escaped = 1, [2]int64{int64(i), int64(j)}, 0
	if escapes {
		w.spans.escaped = 1
	}
	w.units += spansUnits(w.s, &w.spans)
}

// weighString adds the calibrated count of s (text of the body, or of a
// JSON value in it), which has no backslash unless escapes says it may.
func (w *walker) weighString(s string, escapes bool) {
	w.steps++
	w.spans.n, w.spans.at[0], w.spans.escaped = 1, [2]int64{0, int64(len(s))}, 0
	if escapes {
		w.spans.escaped = 1
	}
	w.units += spansUnits(s, &w.spans)
}

// members reads the object at w.i, calling read for each member with its
// key (decoded) and w.i at its value; a value read leaves w.i after it, one
// not read is skipped.
func (w *walker) members(read func(k string)) {
	if !w.enter() {
		return
	}
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return
		}
		v := w.i
		read(k)
		w.done(v)
	}
}

// capValue is the number of tokens a non-negative JSON number names as an
// output cap: its value rounded up, at most MaxTokens, however many digits
// it has (0 for zero, and for a number too small for a float64).
func capValue(num string) int64 {
	var n int64
	for i := 0; i < len(num); i++ {
		c := num[i]
		if c < '0' || c > '9' {
			// A fraction or an exponent (4096.0, 4.096e3): rare, read as a
			// float64, which holds every integer up to MaxTokens exactly.
			// Too large for one, it is +Inf (and an error): MaxTokens.
			f, _ := strconv.ParseFloat(num, 64)
			return int64(math.Ceil(min(f, float64(MaxTokens))))
		}
		n = min(n*10+int64(c-'0'), MaxTokens) // no overflow: 10·MaxTokens + 9 < 2^63
	}
	return n
}
