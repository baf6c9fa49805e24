package estimate

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// plainTurns reads runs of plain messages and leaves every other element to
// the walker, in Go and in WASM assembly alike (make test runs this package
// in both).
func TestPlainTurns(t *testing.T) {
	const (
		msg   = `{"role":"user","content":"Hello"}`
		parts = `{"role":"user","content":[{"type":"text","text":"Hi \"you\"\n"},{"text":"ab"}]}`
	)
	for _, tc := range []struct {
		name, s string
		first   bool
		end, n  int
		text    int64
	}{
		{"one message", msg + `]`, true, len(msg), 1, 5},
		{"a comma first unless first", `,` + msg + `]`, false, len(msg) + 1, 1, 5},
		{"no comma when first", `,` + msg, true, 0, 0, 0},
		{"a run, stopping before the ']'", msg + `,` + parts + ` , ` + msg + ` ]`, true, 2*len(msg) + len(parts) + 4, 3, 5 + 9 + 2 + 5},
		{"whitespace everywhere", " {\n\"content\" :\t\"ab\" , \"parts\" : [ { \"text\" : \"c\" } , { } ] } ", true, 60, 1, 3},
		{"empty objects and parts", `{},{"content":[]},{"parts":[{}]}`, true, 32, 3, 0},
		{"Gemini", `{"role":"user","parts":[{"text":"Hello"}]}`, true, 42, 1, 5},
		{"keys of other lengths and cases", `{"contents":"x","part":"y","Content":"z","text":"w"}`, true, 52, 1, 0},
		{"a part's other members", `{"content":[{"type":"input_text","text":"ab","cache":"c"}]}`, true, 59, 1, 2},
		{"a stop at the first other element", msg + `,{"con\u0074ent":"a"},` + msg, true, len(msg), 1, 5},
		{"a string element", `"text",` + msg, true, 0, 0, 0},
		{"members of every kind, skipped", `{"content":"a","n":-1.5e3,"b":true,"z":null,"o":{"k":[1,{}]},"s":"\ud83d\ude00"}`, true, 80, 1, 1},
		{"a tool call, by its JSON", `{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]}`, true, 127, 1, 78},
		{"a legacy function call, by its JSON", `{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}`, true, 66, 1, 29},
		{"a Responses call's arguments, a string", `{"type":"function_call","name":"f","arguments":"{\"q\":\"\u00e9\"}"}`, true, 68, 1, 10},
		{"a tool use part, its input by its JSON", `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"q":1}}]}`, true, 88, 1, 7},
		{"a Responses call output, a string", `{"type":"function_call_output","call_id":"c","output":"ok"}`, true, 59, 1, 2},
		{"a tool call nested as deep as the walker reads it", `{"tool_calls":` + strings.Repeat("[", MaxDepth-plainMessageDepth) + strings.Repeat("]", MaxDepth-plainMessageDepth) + `}`, true, 137, 1, 122},
		{"a tool call nested deeper: the walker's", `{"tool_calls":` + strings.Repeat("[", MaxDepth-2) + strings.Repeat("]", MaxDepth-2) + `}`, true, 0, 0, 0},
		{"a tool call's string with a surrogate: the walker's", `{"output":"\ud83d\ude00"}`, true, 0, 0, 0},
		{"an invalid tool call", `{"tool_calls":[1,]}`, true, 0, 0, 0},
		{"a Gemini function response, by its JSON", `{"role":"user","parts":[{"functionResponse":{"name":"f","response":{}}}]}`, true, 73, 1, 26},
		{"a Gemini function call, by its JSON", `{"role":"model","parts":[{"functionCall":{"name":"f","args":{"q":"\u00e9"}}}]}`, true, 78, 1, 34},
		{"keys that only look like them", `{"role":"user","tool_callz":1,"outputs":2,"content":[{"inputs":3,"text":"ab"}]}`, true, 79, 1, 2},
		{"keys that differ only inside", `{"tool,calls":1,"function,call":2,"argu,ents":3,"content":[{"function,all":4,"function,esponse":5}]}`, true, 100, 1, 0},
		{"content that is neither a string nor an array", `{"content":{"text":"x"},"parts":7}`, true, 34, 1, 0},
		{"an image part: the walker's (an image by URL counts)", `{"content":[{"type":"image_url","image_url":{"url":"x"}},{"text":"ab"}]}`, true, 0, 0, 0},
		{"inline data: the walker's (text when it is no medium)", `{"content":[{"type":"file","file":{"file_data":"x"}}]}`, true, 0, 0, 0},
		{"OpenAI's input_audio: the walker's", `{"content":[{"input_audio":{"data":"x"}}]}`, true, 0, 0, 0},
		{"Gemini's inlineData: the walker's", `{"parts":[{"inlineData":{"data":"x"}}]}`, true, 0, 0, 0},
		{"Gemini's inline_data: the walker's", `{"parts":[{"inline_data":{"data":"x"}}]}`, true, 0, 0, 0},
		{"Bedrock's image: the walker's", `{"content":[{"image":{"source":{"bytes":"x"}}}]}`, true, 0, 0, 0},
		{"Bedrock's audio: the walker's", `{"content":[{"audio":{"source":{"bytes":"x"}}}]}`, true, 0, 0, 0},
		{"Bedrock's video: the walker's", `{"content":[{"video":{"source":{"bytes":"x"}}}]}`, true, 0, 0, 0},
		{"Bedrock's document: the walker's", `{"content":[{"document":{"source":{"bytes":"x"}}}]}`, true, 0, 0, 0},
		{"keys like those of inline data", `{"content":[{"files":1,"imagex":2,"inlineDat":3,"documents":4,"text":"ab"}]}`, true, 76, 1, 2},
		{"parts that are not objects", `{"content":["x",1,[{"text":"y"}],{"text":"ab"}]}`, true, 48, 1, 2},
		{"a member nested too deep for the assembly", `{"o":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, true, 0, 0, 0},
		{"an invalid member", `{"content":"a","n":01}`, true, 0, 0, 0},
		{"a tool result without content", `{"content":[{"type":"tool_result","text":"x"}]}`, true, 47, 1, 1},
		{"a part's content", `{"content":[{"type":"text","content":"x"}]}`, true, 0, 0, 0},
		{"a text that is not a string", `{"content":[{"text":["x"]}]}`, true, 28, 1, 0},
		{"an escaped key", `{"con\u0074ent":"x"}`, true, 0, 0, 0},
		{"a simple escape in a key", `{"a\nb":"x"}`, true, 0, 0, 0},
		{"\\u escapes of 1, 2 and 3 bytes", `{"content":"caf\u00e9 \u0041\u20AC"}`, true, 36, 1, 10},
		{"a \\u escape of a surrogate", `{"content":"\ud83d\ude00"}`, true, 0, 0, 0},
		{"a \\u escape in a key", `{"\u0061":"x"}`, true, 0, 0, 0},
		{"a \\u escape with a bad digit", `{"content":"\u00g9"}`, true, 0, 0, 0},
		{"a \\u escape cut short", `{"content":"\u00e`, true, 0, 0, 0},
		{"a control character", "{\"content\":\"a\tb\"}", true, 0, 0, 0},
		{"a trailing comma", `{"content":"a",}`, true, 0, 0, 0},
		{"a comma after '{'", `{,"content":"a"}`, true, 0, 0, 0},
		{"a missing colon", `{"content" "a"}`, true, 0, 0, 0},
		{"a missing '}'", `{"content":"a"`, true, 0, 0, 0},
		{"a missing ']'", `{"content":[{"text":"a"}}`, true, 0, 0, 0},
		{"an unterminated string", `{"content":"a`, true, 0, 0, 0},
		{"a backslash at the end", `{"content":"a\`, true, 0, 0, 0},
		{"the end of the array", `]`, true, 0, 0, 0},
		{"nothing", ``, false, 0, 0, 0},
		{"a long text", `{"content":"` + strings.Repeat(`0123456\n`, 100) + `"}`, true, 914, 1, 800},
		{"text of every class, escapes first and last", `{"content":"\u00e9t\u00e9 12 r\u00e9sum\u00e9s, caf\u00e9 \u7f51\u7edc \u20ac5 \"ok\"\n"}`, true, 89, 1, 43},
		{"words across escapes and words", `{"content":"abcdefghijklmnop\nqrs\u0041bc 1234567890123"}`, true, 57, 1, 37},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, n, text, _ := plainTurns(tc.s, 0, tc.first, &simpleEscape, nil)
			assert.Equal(t, []any{tc.end, tc.n, tc.text}, []any{end, n, text})
			// From the middle of a body, too.
			end, n, text, _ = plainTurns("xyz"+tc.s, 3, tc.first, &simpleEscape, nil)
			assert.Equal(t, []any{tc.end + 3, tc.n, tc.text}, []any{end, n, text})
			// Weighed, the same run, and the units the walker weighs it
			// (its strings', and the tool calls' it notes).
			var spans textSpans
			end, n, text, units := plainTurns("xyz"+tc.s, 3, tc.first, &simpleEscape, &spans)
			units += spansUnits("xyz"+tc.s, &spans)
			assert.Equal(t, []any{tc.end + 3, tc.n, tc.text, walkedUnits(t, "xyz"+tc.s, 3, tc.first, n)}, []any{end, n, text, units})
		})
	}
}

// The words plainTurns compares keys with are those of the keys: the bytes
// of each at the offset the assembly reads them.
func TestKeyWords(t *testing.T) {
	word := func(key string, at, size int) uint64 {
		var w uint64
		for k := size - 1; k >= 0; k-- {
			w = w<<8 | uint64(key[at+k])
		}
		return w
	}
	for _, c := range []struct {
		key   string
		first uint64
		at    int
		last  uint64
		size  int
	}{
		{"content", wordCont, 3, wordTent, 4}, {"parts", wordPart, 1, wordArts, 4}, {"text", wordText, 0, wordText, 4},
		{"output", wordOutp, 2, wordTput, 4}, {"input", wordInpu, 1, wordNput, 4},
		{"tool_calls", word8ToolCal, 2, word8OlCalls, 8}, {"function_call", word8Function, 5, word8IonCall, 8},
		{"arguments", word8Argument, 1, word8Rguments, 8}, {"functionCall", word8Function, 4, word8TionCall, 8},
		{"functionResponse", word8Function, 8, word8Response, 8},
	} {
		assert.Equal(t, c.first, word(c.key, 0, c.size), c.key)
		assert.Equal(t, c.last, word(c.key, c.at, c.size), c.key)
		assert.Equal(t, len(c.key), c.at+c.size, c.key) // compared whole
	}
}

// The tool calls of a run are noted in spans, as many as fit: the run
// stops before the message whose tool call does not fit, and the walk
// calls plainTurns again after weighing them.
func TestPlainTurnsNoteToolCalls(t *testing.T) {
	const call = `{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"q\":\"\u00e9\"}"}}]}`
	array := strings.Repeat(call+",", maxTextSpans+5) + call + `]`
	var spans textSpans
	end, n, text, units := plainTurns(array, 0, true, &simpleEscape, &spans)
	assert.Equal(t, []any{maxTextSpans*(len(call)+1) - 1, maxTextSpans, int64(maxTextSpans * 69), int64(0), int64(maxTextSpans)},
		[]any{end, n, text, units, spans.n})
	for k, at := range spans.at {
		assert.Equal(t, [2]int64{int64(k*(len(call)+1) + 33), int64(k*(len(call)+1) + 33 + 69)}, at)
	}
	assert.Equal(t, ^uint64(0), spans.escaped)
	body := []byte(`{"model":"m","messages":[` + array + `}`)
	assert.Equal(t, reference(body, "", calibrated), readings(Request(body, DialectOther, calibrated)))
}

// walkedUnits weighs the n elements of a turns array at s[i:] as the
// walker's Go reads them, one by one: what plainTurns weighs them.
func walkedUnits(t *testing.T, s string, i int, first bool, n int) int64 {
	w := walker{s: s, i: i, weigh: true, depth: 2}
	for k := range n {
		if !w.elem(first && k == 0) {
			t.Fatalf("no element %d at %d", k, w.i)
		}
		w.turn()
	}
	return w.units
}

// Random message arrays, plain and nearly plain, whole or cut or with a
// byte changed, are estimated as the gjson-based reference estimates them:
// in WASM this holds the assembly to the reference (native fuzzing,
// FuzzRequest, holds the Go version).
func TestPlainTurnsAgreeWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	pick := func(options ...string) string { return options[r.IntN(len(options))] }
	space := func() string { return pick("", "", "", " ", "\n  ", "\t", "\r\n") }
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for n := r.IntN(24); n > 0; n-- {
			b.WriteString(pick("a", "b", "é", "text", " ", `\n`, `\"`, `\\`, `\/`, `\u0041`, `\u00e9`, `\u20ac`, `\uFFFF`, "0123456789abcdef"))
		}
		if r.IntN(20) == 0 { // what the walker reads instead
			b.WriteString(pick(`\ud83d\ude00`, `\udc00`, `\u12`, `\x`, "\t"))
		}
		b.WriteByte('"')
		return b.String()
	}
	var value func(depth int) string
	part := func() string {
		var members []string
		for n := r.IntN(4); n > 0; n-- {
			members = append(members, space()+`"`+pick("type", "text", "content", "image_url", "te\\u0078t", "input", "functionCall", "functionResponse", "inputs",
				"source", "inlineData", "input_audio", "image", "document", "file")+`"`+space()+":"+space()+value(2))
		}
		return "{" + strings.Join(members, ",") + space() + "}"
	}
	value = func(depth int) string {
		switch k := r.IntN(16); {
		case k < 10 || depth > 2:
			return str()
		case k < 13:
			var parts []string
			for n := r.IntN(4); n > 0; n-- {
				parts = append(parts, space()+part()+space())
			}
			return "[" + strings.Join(parts, ",") + "]"
		case k == 13:
			return pick("1", "-0.5e3", "true", "null", "01", "tru")
		case k == 14:
			return `{"url":` + str() + `}`
		default: // inline data, which may be a medium's
			return `{"` + pick("data", "bytes", "file_data", "source") + `":` + pick(str(), `"iVBORw0KGgo"`, `"data:image/png;base64,iVBORw0KGgo"`, `{"bytes":"/9j/"}`) +
				pick("", `,"type":"base64"`, `,"mimeType":"image/png"`, `,"media_type":"image/jpeg"`) + `}`
		}
	}
	message := func() string {
		var members []string
		for n := r.IntN(5); n > 0; n-- {
			members = append(members, space()+`"`+pick("role", "content", "parts", "name", "contents", "Content", "conten", "type", "text",
				"tool_calls", "function_call", "arguments", "output", "tool_callz")+`"`+space()+":"+space()+value(1))
		}
		return "{" + strings.Join(members, ",") + space() + "}"
	}
	read, total := 0, 0
	for i := range 5000 {
		var msgs []string
		for n := r.IntN(6); n > 0; n-- {
			if r.IntN(10) == 0 {
				msgs = append(msgs, space()+value(1)+space())
			} else {
				msgs = append(msgs, space()+message()+space())
			}
		}
		body := []byte(`{"model":"m","` + pick("messages", "contents", "input") + `":[` + strings.Join(msgs, ",") + `],"max_tokens":7}`)
		switch r.IntN(8) {
		case 0:
			body = body[:r.IntN(len(body))]
		case 1:
			body[r.IntN(len(body))] = pick(`"`, `,`, `}`, `]`, `\`, "\x01", `{`, `[`, ` `)[0]
		}
		for _, o := range []Options{opts, calibrated} {
			if got, want := readings(Request(body, DialectOther, o)), reference(body, "", o); got != want {
				t.Fatalf("body %d %s, %d bytes per token: Request = %+v, reference = %+v", i, body, o.BytesPerToken, got, want)
			}
		}
		if start := strings.Index(string(body), `":[`) + 3; start > 2 {
			_, n, _, _ := plainTurns(string(body), start, true, &simpleEscape, nil)
			read += n
			total += len(msgs)
		}
	}
	// Enough of the messages are plain, and come first in their array, for
	// the test to hold plainTurns (about a fifth).
	t.Logf("plainTurns read %d of %d messages", read, total)
	if read < total/8 {
		t.Fatalf("plainTurns read %d of %d messages", read, total)
	}
}
