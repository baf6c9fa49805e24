package estimate

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// reference is Request written the obvious way with gjson (ValidBytes, then
// ForEach over the recognised fields), as an oracle for the walker.
func reference(body []byte, path string, o Options) Estimate {
	bpt := o.BytesPerToken
	if bpt <= 0 {
		bpt = SizeBytesPerToken
	}
	body, _ = bytes.CutPrefix(body, []byte(byteOrderMark))
	e := Estimate{Completion: min(max(o.DefaultCompletionTokens, 0), MaxTokens), Model: ModelFromPath(path)}
	if len(body) == 0 {
		return e
	}
	bySize := int64(len(body)) / bpt
	if int64(len(body))%bpt != 0 {
		bySize++
	}
	bySize = min(bySize, MaxTokens)
	if !o.ModelOnly && o.MaxBodyBytes > 0 && int64(len(body)) > o.MaxBodyBytes {
		e.Prompt = bySize
		if tokens, bytes := mediaSpans(string(body), DialectOf(path), nil, nil); bytes > 0 {
			e.Prompt = min((int64(len(body))-bytes+bpt-1)/bpt+tokens, MaxTokens)
		}
		// The last top-level string "model" of a valid object, as when parsed.
		read := body
		if r, ok := relaxed(string(body)); !gjson.ValidBytes(read) && ok {
			read = r // as lenient parsers read it
		}
		if o.ModelOfLargeBodies && e.Model == "" && gjson.ValidBytes(read) && nestingDepth(read) <= MaxDepth && gjson.ParseBytes(read).IsObject() {
			gjson.ParseBytes(read).ForEach(func(k, v gjson.Result) bool {
				if foldTopKey(k.Str) == "model" && v.Type == gjson.String {
					e.Model = v.Str
				}
				return true
			})
		}
		return e
	}
	read := body
	if !gjson.ValidBytes(read) {
		// As lenient parsers read it, if they do.
		if r, ok := relaxed(string(body)); ok {
			read = r
		}
	}
	if !gjson.ValidBytes(read) || nestingDepth(read) > MaxDepth {
		e.Prompt = bySize
		return e
	}
	root := gjson.ParseBytes(read)
	read_ := read
	if !root.IsObject() {
		e.Prompt = bySize
		return e
	}

	var text, units, messages, tokenIDs, opaque int64
	var imageRefs [2]int64 // by reference, without and with "detail": "low" // units: the calibrated count of the text (TextFeatures, weighed)
	var tools, forcedTool, system bool
	var toolUnits, toolMembers int64 // tool definitions' units apart, the members OpenAI's rendering reads
	var caps [numCaps]int64
	var model string
	str := func(v gjson.Result) {
		if v.Type == gjson.String {
			text += int64(len(v.String()))
			units += textUnitsGo(v.Raw[1 : len(v.Raw)-1])
		}
	}
	raw := func(v gjson.Result) {
		text += int64(len(v.Raw))
		units += textUnitsGo(v.Raw)
	}
	positive := func(slot int, v gjson.Result) {
		if v.Type == gjson.Number && v.Num > 0 { // gjson reads a number too large for a float64 as +Inf
			caps[slot] = max(caps[slot], int64(math.Ceil(min(v.Num, float64(MaxTokens)))))
		}
	}
	toolCall := func(v gjson.Result) { // a string's text, anything else its raw JSON
		if v.Type == gjson.String {
			str(v)
		} else {
			raw(v)
		}
	}
	// Inline data (media.go's inlineString): text unless a medium (medium,
	// by the place and the header, read in the body as parsed), the first
	// inline data of its object, one of the first maxMedia media and of the
	// first mediaChecks values read as media.
	var media, checks int
	var mediaTokens int64
	inlineData := func(v gjson.Result, dataURL bool, read *bool) {
		j := v.Index + 1
		if dataURL {
			if k := strings.Index(v.Raw[1:min(len(v.Raw), maxDataURLHead+1)], ";base64,"); strings.HasPrefix(v.Raw, `"data:`) && k >= 0 {
				j += k + len(";base64,")
			} else {
				j = -1
			}
		}
		if j >= 0 && !*read && media < maxMedia && checks < mediaChecks(len(read_)) {
			*read = true
			checks++
			if t, ok := medium(string(read_), j, DialectOf(path), nil); ok {
				media++
				mediaTokens = min(mediaTokens+t, MaxTokens)
				return
			}
		}
		str(v)
	}
	var content func(v gjson.Result, nested bool)
	content = func(v gjson.Result, nested bool) {
		if v.Type == gjson.String {
			str(v)
			return
		}
		if !v.IsArray() {
			return
		}
		v.ForEach(func(_, part gjson.Result) bool {
			if !part.IsObject() {
				return true
			}
			var inner, innerUnits int64
			var innerImages [2]int64
			toolResult, image, byURL, geminiImage, low := false, false, false, false, 0
			var partInline bool // the part's own inline data was read (a Responses image_url, file_data)
			part.ForEach(func(k, v gjson.Result) bool {
				switch k.Str {
				case "text":
					str(v)
				case "input", "functionCall", "functionResponse":
					toolCall(v)
				case "thinking":
					str(v)
				case "signature", "data", "thoughtSignature", "thought_signature":
					if v.Type == gjson.String {
						opaque += int64(len(v.String()))
					}
				case "type":
					toolResult = toolResult || v.Type == gjson.String && v.Str == "tool_result"
					image = image || v.Type == gjson.String && (v.Str == "image_url" || v.Str == "input_image" || v.Str == "image")
				case "image_url": // a URL, or an object with one (each member counts)
					notData := func(url gjson.Result) bool {
						return url.Type == gjson.String && !strings.HasPrefix(url.Raw, `"data:`)
					}
					byURL = byURL || notData(v)
					if v.Type == gjson.String && !notData(v) {
						inlineData(v, true, &partInline)
					}
					if v.IsObject() {
						var read bool
						v.ForEach(func(k, v gjson.Result) bool {
							byURL = byURL || k.Str == "url" && notData(v)
							if k.Str == "url" && v.Type == gjson.String && !notData(v) {
								inlineData(v, true, &read)
							}
							if k.Str == "detail" && v.Type == gjson.String && v.Str == "low" {
								low = 1
							}
							return true
						})
					}
				case "detail":
					if v.Type == gjson.String && v.Str == "low" {
						low = 1
					}
				case "file_id":
					byURL = byURL || v.Type == gjson.String
				case "source":
					var read bool
					v.ForEach(func(k, v gjson.Result) bool {
						byURL = byURL || k.Str == "type" && v.Type == gjson.String && (v.Str == "url" || v.Str == "file")
						if k.Str == "data" && v.Type == gjson.String {
							inlineData(v, false, &read)
						}
						return true
					})
				case "file", "input_audio", "inlineData", "inline_data", "image", "audio", "video", "document":
					part := k.Str
					var read bool
					v.ForEach(func(k, v gjson.Result) bool {
						switch {
						case v.Type == gjson.String && part == "file" && k.Str == "file_data":
							inlineData(v, true, &read)
						case v.Type == gjson.String && k.Str == "data" && (part == "input_audio" || part == "inlineData" || part == "inline_data"):
							inlineData(v, false, &read)
						case v.IsObject() && k.Str == "source" && (part == "image" || part == "audio" || part == "video" || part == "document"):
							var read bool
							v.ForEach(func(k, v gjson.Result) bool {
								if k.Str == "bytes" && v.Type == gjson.String {
									inlineData(v, false, &read)
								}
								return true
							})
						}
						return true
					})
				case "fileData", "file_data":
					if k.Str == "file_data" && v.Type == gjson.String {
						inlineData(v, true, &partInline) // Responses' input_file
					}
					v.ForEach(func(k, v gjson.Result) bool {
						geminiImage = geminiImage || (k.Str == "mimeType" || k.Str == "mime_type") && v.Type == gjson.String && strings.HasPrefix(v.Str, "image/")
						return true
					})
				case "content":
					if !nested {
						outer, outerUnits, outerImages := text, units, imageRefs
						content(v, true)
						inner, innerUnits = inner+text-outer, innerUnits+units-outerUnits
						innerImages[0], innerImages[1] = innerImages[0]+imageRefs[0]-outerImages[0], innerImages[1]+imageRefs[1]-outerImages[1]
						text, units, imageRefs = outer, outerUnits, outerImages
					}
				}
				return true
			})
			if toolResult {
				text, units = text+inner, units+innerUnits
				imageRefs[0], imageRefs[1] = imageRefs[0]+innerImages[0], imageRefs[1]+innerImages[1]
			}
			if image && byURL || geminiImage {
				imageRefs[low]++
			}
			return true
		})
	}
	turn := func(m gjson.Result) {
		m.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "content", "parts":
				content(v, false)
			case "tool_calls", "function_call", "arguments", "output":
				toolCall(v)
			case "summary":
				content(v, false)
			case "encrypted_content":
				if v.Type == gjson.String {
					opaque += int64(len(v.String()))
				}
			}
			return true
		})
	}
	root.ForEach(func(k, v gjson.Result) bool {
		switch foldTopKey(k.Str) {
		case "model":
			if v.Type == gjson.String {
				model = v.Str
			}
		case "messages", "contents", "input", "instructions", "prompt":
			counted := foldTopKey(k.Str) == "messages" || foldTopKey(k.Str) == "input"
			system = system || foldTopKey(k.Str) == "instructions" && (v.Type == gjson.String || v.IsArray())
			ids := foldTopKey(k.Str) == "prompt" || foldTopKey(k.Str) == "input"
			if v.Type == gjson.String {
				str(v)
				if counted {
					messages++
				}
			}
			if v.IsArray() {
				v.ForEach(func(_, m gjson.Result) bool {
					if counted {
						messages++
					}
					str(m)
					switch {
					case m.IsObject():
						turn(m)
					case ids && m.Type == gjson.Number:
						tokenIDs++
					case ids && m.IsArray():
						m.ForEach(func(_, id gjson.Result) bool {
							if id.Type == gjson.Number {
								tokenIDs++
							}
							return true
						})
					}
					return true
				})
			}
		case "system":
			system = system || v.Type == gjson.String || v.IsArray()
			content(v, false)
		case "systemInstruction", "system_instruction":
			if v.IsObject() {
				system = true
				turn(v)
			}
		case "tools", "functions", "tool_choice", "response_format", "text", "output_format", "outputConfig", "toolConfig":
			before := units
			if d := DialectOf(path); (foldTopKey(k.Str) == "tools" || foldTopKey(k.Str) == "functions") && o.BytesPerToken <= 0 &&
				(d == DialectOpenAIChat || d == DialectOpenAIResponses) {
				text += int64(len(v.Raw))
				u, members := referenceOpenAITools(v)
				units, toolMembers = units+u, toolMembers+members
			} else {
				raw(v)
			}
			switch foldTopKey(k.Str) {
			case "tools", "functions", "toolConfig":
				toolUnits, units = toolUnits+units-before, before
			}
			switch foldTopKey(k.Str) {
			case "tools":
				tools = tools || v.IsArray() && len(v.Array()) > 0
			case "tool_choice":
				forcedTool = v.Get("type").Type == gjson.String && (v.Get("type").Str == "any" || v.Get("type").Str == "tool")
			case "toolConfig": // Bedrock Converse's: its tools and its toolChoice
				v.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "tools":
						tools = tools || v.IsArray() && len(v.Array()) > 0
					case "toolChoice":
						forcedTool = v.Get("any").IsObject() || v.Get("tool").IsObject()
					}
					return true
				})
			}
		case "max_completion_tokens":
			positive(capMaxCompletionTokens, v)
		case "max_tokens":
			positive(capMaxTokens, v)
		case "max_output_tokens":
			positive(capMaxOutputTokens, v)
		case "generationConfig", "generation_config":
			if v.IsObject() {
				v.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "maxOutputTokens", "max_output_tokens":
						positive(capGeminiMaxOutputTokens, v)
					case "responseSchema", "responseJsonSchema", "response_schema", "response_json_schema":
						raw(v)
					}
					return true
				})
			}
		}
		return true
	})

	e.Parsed = true
	for _, c := range caps {
		if c > 0 {
			e.Completion = c
			break
		}
	}
	if e.Model == "" {
		e.Model = model
	}
	if o.ModelOnly { // its model and output cap, its prompt by its size
		e.Prompt, e.Parsed = bySize, false
		return e
	}
	// The parts of the prompt, which its model's family adds up
	// (family.go, tested apart).
	d := DialectOf(path)
	e.parts = promptParts{api: d, units: units, toolUnits: toolUnits, toolMembers: toolMembers,
		rendered: o.BytesPerToken <= 0 && (d == DialectOpenAIChat || d == DialectOpenAIResponses),
		fixed:    tokenIDs + (opaque+opaqueBytesPerToken-1)/opaqueBytesPerToken + imageRefTokens(d, imageRefs[0], imageRefs[1]),
		messages: messages, system: system, tools: tools, forcedTool: forcedTool}
	if mayHoldMedia(int64(len(body)), text, messages) {
		e.parts.fixed += mediaTokens
	}
	if o.BytesPerToken > 0 {
		e.parts.bytesPerToken, e.parts.textBytes, e.parts.units, e.parts.toolUnits = o.BytesPerToken, text, 0, 0
	}
	e.Prompt = e.PromptFor(e.Model)
	return e
}

// referenceOpenAITools is the calibrated count of tools as OpenAI renders
// them (tools.go), restated: each function 7 tokens, name:description,
// parameters 3, each property 3 and name:type:description, an enum -3 and
// 3 and its text per value, 12 for all of them; what is not rendered by
// its JSON; a member given twice counts twice.
func referenceOpenAITools(tools gjson.Result) (units, members int64) {
	const token = UnitsPerToken
	str := func(v gjson.Result) int64 {
		if v.Type == gjson.String {
			return textUnitsGo(v.Raw[1 : len(v.Raw)-1])
		}
		return textUnitsGo(v.Raw)
	}
	property := func(p gjson.Result) int64 {
		if !p.IsObject() {
			return textUnitsGo(p.Raw)
		}
		var units int64
		p.ForEach(func(k, v gjson.Result) bool {
			members++
			switch {
			case k.Str == "type" || k.Str == "description":
				units += str(v) + weightOther
			case k.Str == "enum" && v.IsArray():
				units -= 3 * token
				for _, item := range v.Array() {
					units += 3*token + str(item)
				}
			default:
				units += textUnitsGo(v.Raw)
			}
			return true
		})
		return units
	}
	parameters := func(p gjson.Result) int64 {
		if !p.IsObject() {
			return textUnitsGo(p.Raw)
		}
		var units int64
		p.ForEach(func(k, v gjson.Result) bool {
			members++
			switch {
			case k.Str == "type" || k.Str == "required" || k.Str == "additionalProperties":
			case k.Str == "properties" && v.IsObject():
				first := true
				v.ForEach(func(name, p gjson.Result) bool {
					members++
					if first {
						units += 3 * token
						first = false
					}
					units += 3*token + weightOther + textUnitsGo(name.Str) + property(p) // the key decoded
					return true
				})
			default:
				units += textUnitsGo(v.Raw)
			}
			return true
		})
		return units
	}
	member := func(k, v gjson.Result) (units int64, name bool) {
		members++
		switch k.Str {
		case "type", "strict":
			return 0, false
		case "name", "description":
			return str(v) + weightOther, k.Str == "name" && v.Type == gjson.String
		case "parameters":
			return parameters(v), false
		}
		return textUnitsGo(v.Raw), false
	}
	functions := 0
	for _, tool := range tools.Array() {
		if !tool.IsObject() {
			units += textUnitsGo(tool.Raw)
			continue
		}
		var flat, wrapped int64
		named, wrappedNamed := false, false
		tool.ForEach(func(k, v gjson.Result) bool {
			if k.Str == "function" && v.IsObject() {
				members++
				v.ForEach(func(k, v gjson.Result) bool {
					u, name := member(k, v)
					wrapped, wrappedNamed = wrapped+u, wrappedNamed || name
					return true
				})
				return true
			}
			u, name := member(k, v)
			flat, named = flat+u, named || name
			return true
		})
		switch {
		case wrappedNamed:
			units += 7*token + wrapped
		case named:
			units += 7*token + flat
		default:
			units += textUnitsGo(tool.Raw)
			continue
		}
		functions++
	}
	if functions > 0 {
		units += 12 * token
	}
	return units, members
}

// foldTopKey is the top-level key the walk reads that k equals without
// regard to case, as Go's encoding/json matches keys, else k.
func foldTopKey(k string) string {
	for _, known := range topKeys {
		if strings.EqualFold(k, known) {
			return known
		}
	}
	return k
}

// readings is an estimate without what says it is ambiguous, which the
// reference does not tell.
func readings(e Estimate) Estimate {
	e.Ambiguous, e.OtherModels, e.UnknownModel = "", [MaxOtherModels]string{}, false
	return e
}

// nestingDepth returns how deeply the objects and arrays of a valid JSON
// text nest.
func nestingDepth(body []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case escaped:
			escaped = false
		case inString:
			escaped = c == '\\'
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// everyMedium is what every medium of s costs, wherever it starts (each
// once): more than the walker or the scan counts.
func everyMedium(s string, d Dialect) (tokens int64) {
	for j := range len(s) {
		if t, ok := medium(s, j, d, nil); ok {
			tokens = min(tokens+t, MaxTokens)
		}
	}
	return tokens
}

// FuzzRequest checks that Request never panics, stays within its bounds, and
// agrees with the gjson-based reference implementation. The seeds are the
// files in testdata/fuzz/FuzzRequest and the bodies of the table tests.
func FuzzRequest(f *testing.F) {
	for _, b := range []string{
		chatBody(2 << 10),
		`{"model":"claude","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"r\u00e9"}]}]}],"max_tokens":9}`,
		`{"contents":[{"parts":[{"text":"\ud83d\ude00"}]}],"generationConfig":{"maxOutputTokens":5}}`,
		`{"instructions":"i","input":[{"role":"user","content":[{"type":"input_text","text":"t"}]}],"max_output_tokens":3}`,
		`{"\u006dessages":[{"content":"x\\\"y"}],"max_tokens":"100","tools":[{}]}`,
		`{"messages":{}}`,
		`[[[[[]]]]]`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ","detail":"low"}}]}]}`,
		`{"contents":[{"parts":[{"inlineData":{"data":"/9j/4AAQSkZJRgABAQ\/\/2wBDAP","mimeType":"image/jpeg"}},{"inline_data":{"data":"UklGRiQAAABXRUJQVlA4WA=="}}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Read me."}},` +
			`{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQK"}},{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo"}}},` +
			`{"type":"input_file","file_data":"data:text/plain;base64,SGk="},{"input_audio":{"data":"iVBORw0KGgo","format":"wav"}},{"text":",iVBORw0KGgo x"}]}]}`,
	} {
		f.Add([]byte(b), "", int64(4), int64(100), int64(1<<20))
		f.Add([]byte(b), "", int64(0), int64(100), int64(1<<20)) // the calibrated count
	}
	f.Add([]byte(`{"contents":[]}`), "/v1beta/models/gemini-2.5-flash:generateContent", int64(1), int64(0), int64(0))
	f.Add([]byte(`{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"get","description":"Get it.","parameters":{"type":"object",`+
		`"properties":{"unit":{"type":"string","enum":["c","f"],"description":"u"},"n":{"type":"integer","minimum":1}},"required":["unit"]}}},`+
		`{"type":"web_search"}],"messages":[{"role":"user","content":"Hi"}]}`), "/v1/chat/completions", int64(0), int64(0), int64(1<<20))
	f.Add([]byte(`{"model":"gpt-4o","tools":[{"type":"function","name":"get","parameters":{"properties":{}}}],"input":"Hi"}`), "/v1/responses", int64(0), int64(0), int64(1<<20))
	f.Add([]byte(`{"model":"a","messages":[],"\u006dodel":"b","x":{"model":"c"}}`), "/v1beta/models%2Fg%3Ax", int64(1), int64(0), int64(3))
	f.Fuzz(func(t *testing.T, body []byte, path string, bytesPerToken, defaultCompletion, maxBody int64) {
		// An odd maxBody also looks for the model of a body over it; its
		// bit 2 reads the body for its model only.
		o := Options{BytesPerToken: bytesPerToken, DefaultCompletionTokens: defaultCompletion, MaxBodyBytes: maxBody,
			ModelOfLargeBodies: maxBody&1 == 1, ModelOnly: maxBody&4 == 4}
		got := requestAt(body, path, o)
		// At most the body's size, at the most a byte weighs (count.go)
		// times a family's largest scale (at most 2: family.go), and what a
		// family adds: at most 5 tokens per message (a message takes at
		// least 2 bytes) and 30 a request, and a tool prompt of at most
		// 530 (Anthropic's for Claude 3 Opus).
		text := 2 * ceilDiv(int64(len(body))*maxByteUnits, UnitsPerToken)
		if bytesPerToken > 0 {
			text = ceilDiv(int64(len(body)), bytesPerToken)
		}
		images := everyMedium(string(body), DialectOf(path))
		if relaxedBody, ok := relaxed(string(body)); ok {
			images = max(images, everyMedium(string(relaxedBody), DialectOf(path)))
		}
		if most := text + 3*int64(len(body)) + 30 + 530 + images; got.Prompt < 0 || got.Prompt > most {
			t.Fatalf("Prompt %d out of [0, %d]", got.Prompt, most)
		}
		if got.Completion < 0 || defaultCompletion > 0 && got.Completion <= 0 {
			t.Fatalf("Completion %d with default %d", got.Completion, defaultCompletion)
		}
		if m := ModelFromPath(path); m != "" && got.Model != m {
			t.Fatalf("Model %q, path names %q", got.Model, m)
		}
		if want := reference(body, path, o); readings(got) != want {
			t.Fatalf("Request = %+v, reference = %+v", got, want)
		}
		// A body served by another model names that model to every reading.
		if out, ok := ReplaceModel(body, "fallback-model"); ok {
			e := Request(out, DialectOther, Options{})
			if !e.Parsed || e.Model != "fallback-model" || e.OtherModels[0] != "" || e.UnknownModel {
				t.Fatalf("ReplaceModel: %q estimates as %+v", out, e)
			}
		}
	})
}
