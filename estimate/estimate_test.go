package estimate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
)

// opts counts one token per byte of prompt text, so that expected Prompt
// values are byte counts.
var opts = Options{BytesPerToken: 1, DefaultCompletionTokens: 4096, MaxBodyBytes: 1 << 20}

// calibrated is opts with the calibrated count of text (count.go).
var calibrated = Options{DefaultCompletionTokens: 4096, MaxBodyBytes: 1 << 20}

// requestAt is Request on a request to path: read as the API its path
// names, with the model of a Gemini or Vertex AI path, the path's (as the
// limiter reads a route: config.Config.Route).
func requestAt(body []byte, path string, o Options) Estimate {
	m := ModelFromPath(path)
	e := Request(body, RouteDialect(path, m != ""), o)
	if m != "" {
		e.Model = m
	}
	return e
}

// sizeAt is Size for a request to path, with its model as requestAt has it.
func sizeAt(bodyBytes int64, path string, o Options) Estimate {
	e := Size(bodyBytes, o)
	e.Model = ModelFromPath(path)
	return e
}

type requestCase struct {
	name string
	body string
	path string
	want Estimate
}

func runCases(t *testing.T, o Options, cases []requestCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := requestAt([]byte(tc.body), tc.path, o)
			assert.Equal(t, tc.want, withoutParts(got))
			// The gjson-based reference implementation agrees, on the
			// parts of the prompt too.
			assert.Equal(t, readings(got), reference([]byte(tc.body), tc.path, o), "reference")
		})
	}
}

// withoutParts is an estimate without the parts of its prompt (which the
// reference checks), for a test that states what it holds.
func withoutParts(e Estimate) Estimate {
	e.parts = promptParts{}
	return e
}

// The tool definitions of the tool cases; they count by their raw JSON size.
const (
	openAITools    = `[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	anthropicTools = `[{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	geminiTools    = `[{"functionDeclarations":[{"name":"get_weather","parameters":{"type":"OBJECT"}}]}]`
)

func TestOpenAIChat(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "string contents",
		body: `{"model":"gpt-4o","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hello!"}],"max_tokens":100}`,
		want: Estimate{Prompt: 16 + 6, Completion: 100, Model: "gpt-4o", Parsed: true},
	}, {
		name: "content parts with an image",
		body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[
			{"type":"text","text":"What is in this image?"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"low"}},
			{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}},
			{"type":"text","text":"Be brief."}]}],
			"max_completion_tokens":50,"max_tokens":10}`,
		want: Estimate{Prompt: 22 + 9, Completion: 50, Model: "gpt-4o-mini", Parsed: true}, // images this small beside the text are not looked for (mayHoldMedia; media_test.go)
	}, {
		name: "tools, tool_choice, tool calls and tool results",
		body: `{"model":"gpt-4.1","messages":[
			{"role":"user","content":"Weather in Paris?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"call_1","content":"Sunny"}],
			"tools":` + openAITools + `,"tool_choice":"auto"}`,
		want: Estimate{Prompt: 17 + 5 + int64(len(openAITools)) + int64(len(`"auto"`)) +
			int64(len(`[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`)), // the tool call, as sent
			Completion: 4096, Model: "gpt-4.1", Parsed: true},
	}, {
		name: "legacy functions",
		body: `{"model":"gpt-3.5-turbo","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`,
		want: Estimate{Prompt: 2 + int64(len(`[{"name":"f"}]`)), Completion: 4096, Model: "gpt-3.5-turbo", Parsed: true},
	}, {
		name: "legacy completions prompt string",
		body: `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7}`,
		want: Estimate{Prompt: 18, Completion: 7, Model: "gpt-3.5-turbo-instruct", Parsed: true},
	}, {
		name: "legacy completions prompt array",
		body: `{"model":"gpt-3.5-turbo-instruct","prompt":["one","three",""],"max_tokens":7}`,
		want: Estimate{Prompt: 8, Completion: 7, Model: "gpt-3.5-turbo-instruct", Parsed: true},
	}, {
		name: "prompt as token ids: a token each",
		body: `{"model":"m","prompt":[1212,318,257]}`,
		want: Estimate{Prompt: 3, Completion: 4096, Model: "m", Parsed: true},
	}, {
		name: "a batch of prompts as token ids",
		body: `{"model":"m","prompt":[[1212,318],[257],"four",[]],"input":[[1,2,3]]}`,
		want: Estimate{Prompt: 3 + 4 + 3, Completion: 4096, Model: "m", Parsed: true},
	}, {
		name: "pretty-printed",
		body: "{\n  \"model\" : \"gpt-4o\" ,\n  \"messages\" : [\n    { \"role\" : \"user\" , \"content\" : \"Hi there\" }\n  ] ,\n  \"max_tokens\" : 5\n}\n",
		want: Estimate{Prompt: 8, Completion: 5, Model: "gpt-4o", Parsed: true},
	}})
}

func TestOpenAIResponses(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "string input",
		body: `{"model":"o4-mini","instructions":"Talk like a pirate.","input":"Are semicolons optional?","max_output_tokens":300}`,
		want: Estimate{Prompt: 19 + 24, Completion: 300, Model: "o4-mini", Parsed: true},
	}, {
		name: "input items with an image and history",
		body: `{"model":"gpt-4.1","input":[
			{"role":"user","content":[{"type":"input_text","text":"Describe this."},{"type":"input_image","image_url":"https://example.com/cat.png"},{"type":"input_file","file_id":"file-123"}]},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A cat."}]},
			{"role":"user","content":"Thanks"},
			{"type":"function_call_output","call_id":"c1","output":"counted"}],
			"tools":[{"type":"web_search"}]}`,
		// 7: the output of the function call; 765: the image by URL, of an
		// unknown size, as 1024 × 1024 (the file by id is not an image).
		want: Estimate{Prompt: 14 + 6 + 6 + 7 + int64(len(`[{"type":"web_search"}]`)) + 765, Completion: 4096, Model: "gpt-4.1", Parsed: true},
	}})
}

func TestAnthropic(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "string system and contents",
		body: `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be terse.","messages":[{"role":"user","content":"Hello, Claude"},{"role":"assistant","content":"Hi"}]}`,
		// And Claude's frame: the request's, and each message's, the
		// system prompt one of them (family.go).
		want: Estimate{Prompt: 9 + 13 + 2 + claudePerRequest + 3*claudePerMessage, Completion: 1024, Model: "claude-sonnet-4-5", Parsed: true},
	}, {
		name: "system blocks, images, tool use and tool results",
		body: `{"model":"claude-opus-4-1","max_tokens":2048,
			"system":[{"type":"text","text":"You are a bot.","cache_control":{"type":"ephemeral"}}],
			"tools":` + anthropicTools + `,
			"messages":[
			{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"Weather?"}]},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":"Sunny, 25C"},
				{"content":[{"type":"text","text":"more"},{"type":"image","source":{"type":"url","url":"https://x"}}],"tool_use_id":"t2","type":"tool_result"},
				{"type":"tool_result","tool_use_id":"t3","content":[{"type":"tool_result","content":"nested, ignored"}]},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"counted"}}]}]}`,
		// And the tool_use's input, the thinking's text (3), and its
		// signature, opaque: a byte, a token at 5 bytes a token rounded up;
		// the image by URL in the second tool result, of an unknown size
		// (765: the path names no API, OpenAI's rule applies); the plain
		// text document's data, text (7). A Claude model's frame, and its
		// tool-use system prompt, whatever the API (family.go).
		want: Estimate{Prompt: 14 + int64(len(anthropicTools)) + 8 + 10 + 4 + int64(len(`{"city":"Paris"}`)) + 3 + 1 + 765 + 7 +
			claudePerRequest + 4*claudePerMessage + 346, Completion: 2048, Model: "claude-opus-4-1", Parsed: true},
	}})
}

func TestGemini(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "camelCase",
		path: "/v1beta/models/gemini-2.5-flash:generateContent",
		body: `{"systemInstruction":{"parts":[{"text":"You are a cat."}]},
			"contents":[{"role":"user","parts":[{"text":"Hello"},{"inlineData":{"mimeType":"image/jpeg","data":"/9j/4AAQ"}}]},
			{"role":"model","parts":[{"text":"Meow"}]}],
			"tools":` + geminiTools + `,
			"generationConfig":{"temperature":0.5,"maxOutputTokens":256}}`,
		want: Estimate{Prompt: 14 + 5 + 4 + int64(len(geminiTools)), Completion: 256, Model: "gemini-2.5-flash", Parsed: true},
	}, {
		name: "snake_case, streaming path",
		path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
		body: `{"system_instruction":{"parts":{"text":"ignored: parts is not an array"}},"contents":[{"parts":[{"text":"Hi"}]}],"generation_config":{"max_output_tokens":64}}`,
		want: Estimate{Prompt: 2, Completion: 64, Model: "gemini-2.5-pro", Parsed: true},
	}, {
		name: "no output cap",
		path: "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent",
		body: `{"contents":[{"parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":"64"}}`,
		want: Estimate{Prompt: 2, Completion: 4096, Model: "gemini-2.0-flash", Parsed: true},
	}, {
		name: "model in the path wins",
		path: "/v1beta/models/gemini-2.5-flash:generateContent",
		body: `{"model":"other","contents":[]}`,
		want: Estimate{Completion: 4096, Model: "gemini-2.5-flash", Parsed: true},
	}})
}

func TestEscapes(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "newline, quote, backslash, slash, tab",
		body: `{"messages":[{"content":"a\nb\"c\\d\/e\tf"}]}`,
		want: Estimate{Prompt: 11, Completion: 4096, Parsed: true},
	}, {
		name: "two-byte and three-byte code points",
		body: `{"messages":[{"content":"caf\u00e9 \u20ac"}]}`,
		want: Estimate{Prompt: 3 + 2 + 1 + 3, Completion: 4096, Parsed: true},
	}, {
		name: "raw UTF-8 counts by bytes",
		body: `{"messages":[{"content":"café €"}]}`,
		want: Estimate{Prompt: 3 + 2 + 1 + 3, Completion: 4096, Parsed: true},
	}, {
		name: "surrogate pair",
		body: `{"messages":[{"content":"\ud83d\ude00!"}]}`,
		want: Estimate{Prompt: 4 + 1, Completion: 4096, Parsed: true},
	}, {
		name: "lone surrogates decode to U+FFFD",
		body: `{"messages":[{"content":"\ud800x\udc00"}]}`,
		want: Estimate{Prompt: 3 + 1 + 3, Completion: 4096, Parsed: true},
	}, {
		name: "a surrogate takes the next escape as its pair",
		body: `{"messages":[{"content":"\ud800\u0041"}]}`,
		want: Estimate{Prompt: 3, Completion: 4096, Parsed: true},
	}, {
		name: "escaped quote at the end and backslash runs",
		body: `{"messages":[{"content":"\\\"\\"},{"content":"\\\\"}]}`,
		want: Estimate{Prompt: 3 + 2, Completion: 4096, Parsed: true},
	}, {
		name: "escaped keys, type and model",
		body: `{"\u006dodel":"gpt\u002d4o","messages":[{"\u0063ontent":[{"type":"tool\u005fresult","content":"abc"}]}],"max\u005ftokens":9}`,
		want: Estimate{Prompt: 3, Completion: 9, Model: "gpt-4o", Parsed: true},
	}})
}

func TestOutputCap(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "default",
		body: `{"model":"m","messages":[]}`,
		want: Estimate{Completion: 4096, Model: "m", Parsed: true},
	}, {
		name: "precedence",
		body: `{"generationConfig":{"maxOutputTokens":4},"max_output_tokens":3,"max_tokens":2,"max_completion_tokens":1}`,
		want: Estimate{Completion: 1, Parsed: true},
	}, {
		name: "an unusable cap falls through to the next",
		body: `{"max_completion_tokens":0,"max_tokens":"100","max_output_tokens":-5,"generationConfig":{"maxOutputTokens":7}}`,
		want: Estimate{Completion: 7, Parsed: true},
	}, {
		name: "integer-valued floats",
		body: `{"max_tokens":2048.0,"max_completion_tokens":2.048e3,"max_output_tokens":100.0}`,
		want: Estimate{Completion: 2048, Parsed: true},
	}, {
		name: "an integer-valued float alone",
		body: `{"max_output_tokens":100.0}`,
		want: Estimate{Completion: 100, Parsed: true},
	}, {
		name: "a float with an exponent",
		body: `{"max_output_tokens":1E3}`,
		want: Estimate{Completion: 1000, Parsed: true},
	}, {
		name: "a fraction is rounded up",
		body: `{"max_tokens":1.5}`,
		want: Estimate{Completion: 2, Parsed: true},
	}, {
		name: "a positive fraction below one counts as one",
		body: `{"max_tokens":0.25}`,
		want: Estimate{Completion: 1, Parsed: true},
	}, {
		name: "zero written as a float",
		body: `{"max_tokens":0.0,"max_output_tokens":0e5}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "a float too small to be a number of tokens",
		body: `{"max_tokens":1e-400}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "other types",
		body: `{"max_tokens":true,"max_completion_tokens":null,"max_output_tokens":[1],"generationConfig":{"maxOutputTokens":{}}}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "largest int64: MaxTokens",
		body: `{"max_tokens":9223372036854775807}`,
		want: Estimate{Completion: MaxTokens, Parsed: true},
	}, {
		name: "past int64: MaxTokens, not ignored",
		body: `{"max_tokens":92233720368547758080000000000000000000000}`,
		want: Estimate{Completion: MaxTokens, Parsed: true},
	}, {
		name: "MaxTokens exactly, and one more",
		body: `{"max_tokens":1000000000000000,"max_completion_tokens":1000000000000001}`,
		want: Estimate{Completion: MaxTokens, Parsed: true},
	}, {
		name: "one less than MaxTokens",
		body: `{"max_tokens":999999999999999}`,
		want: Estimate{Completion: MaxTokens - 1, Parsed: true},
	}, {
		name: "huge floats: MaxTokens",
		body: `{"max_tokens":1e300,"max_output_tokens":1e400,"generationConfig":{"maxOutputTokens":9.3e18}}`,
		want: Estimate{Completion: MaxTokens, Parsed: true},
	}, {
		name: "a float past MaxTokens, by a fraction",
		body: `{"max_tokens":1000000000000000.5}`,
		want: Estimate{Completion: MaxTokens, Parsed: true},
	}, {
		name: "of duplicates, the largest usable one counts",
		body: `{"max_tokens":6,"max_tokens":5,"max_tokens":"7"}`,
		want: Estimate{Completion: 6, Parsed: true, Ambiguous: AmbiguousCap},
	}})
}

func TestWrongTypes(t *testing.T) {
	runCases(t, opts, []requestCase{{
		name: "messages an object",
		body: `{"model":"m","messages":{}}`,
		want: Estimate{Completion: 4096, Model: "m", Parsed: true},
	}, {
		name: "messages an object with content",
		body: `{"messages":{"content":"x"}}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "content and text of other types",
		body: `{"messages":[{"content":5},{"content":{"text":"x"}},{"content":[{"text":7},"loose string",["x"]]},null,3,[{"content":"x"}]]}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "model not a string",
		body: `{"model":{"name":"x"},"messages":null}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "last string model wins",
		body: `{"model":"a","model":"b","model":7}`,
		want: Estimate{Completion: 4096, Model: "b", Parsed: true, OtherModels: [MaxOtherModels]string{"a"}, Ambiguous: AmbiguousModel},
	}, {
		name: "system an object, systemInstruction a string",
		body: `{"system":{"text":"x"},"systemInstruction":"x","generationConfig":[{"maxOutputTokens":5}]}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "duplicate prompt fields all count",
		body: `{"messages":[{"content":"ab"}],"messages":[{"content":"cde","content":"f"}]}`,
		want: Estimate{Prompt: 6, Completion: 4096, Parsed: true},
	}, {
		name: "text outside the recognised fields does not count",
		body: `{"metadata":{"messages":[{"content":"x"}]},"user":"someone","stop":["\n"]}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}, {
		name: "empty object",
		body: `{}`,
		want: Estimate{Completion: 4096, Parsed: true},
	}})
}

// unread is an estimate of a body that starts as a JSON object but cannot
// be read: its model cannot be told.
func unread(e Estimate) Estimate {
	e.Ambiguous, e.UnknownModel = AmbiguousUnread, true
	return e
}

func TestUnparsed(t *testing.T) {
	deep := func(n int) string {
		return `{"messages":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	bySize := func(body string) int64 { return (int64(len(body)) + 3) / 4 }
	message := func(n int) string {
		return `{"model":"m","messages":[{"content":"` + strings.Repeat("x", n) + `"}]}`
	}
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 100, MaxBodyBytes: 64}
	assert.Len(t, message(23), 64)
	runCases(t, o, []requestCase{{
		name: "empty",
		want: Estimate{Completion: 100},
	}, {
		name: "empty, Gemini path",
		path: "/v1beta/models/gemini-2.5-flash:generateContent",
		want: Estimate{Completion: 100, Model: "gemini-2.5-flash"},
	}, {
		name: "not JSON",
		body: `hello world`,
		want: Estimate{Prompt: 3, Completion: 100},
	}, {
		name: "truncated",
		body: `{"model":"m","messages":[{"content":"abc"}`,
		want: unread(Estimate{Prompt: 11, Completion: 100}),
	}, {
		name: "invalid literal the walk does not notice",
		body: `{"model":"m","max_tokens":tru}`,
		want: unread(Estimate{Prompt: 8, Completion: 100}),
	}, {
		name: "trailing garbage",
		body: `{"model":"m"} x`,
		want: unread(Estimate{Prompt: 4, Completion: 100}),
	}, {
		name: "missing comma",
		body: `{"model":"m" "max_tokens":5}`,
		want: unread(Estimate{Prompt: 7, Completion: 100}),
	}, {
		name: "whitespace only",
		body: " \n",
		want: Estimate{Prompt: 1, Completion: 100},
	}, {
		name: "array",
		body: `[{"model":"m"}]`,
		want: Estimate{Prompt: 4, Completion: 100},
	}, {
		name: "string",
		body: `"hello"`,
		want: Estimate{Prompt: 2, Completion: 100},
	}, {
		name: "not JSON, Gemini path",
		path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		body: `contents`,
		want: Estimate{Prompt: 2, Completion: 100, Model: "gemini-2.5-flash"},
	}, {
		name: "over the size limit",
		body: message(24),
		want: Estimate{Prompt: 17, Completion: 100},
	}, {
		name: "at the size limit",
		body: message(23),
		want: Estimate{Prompt: 6, Completion: 100, Model: "m", Parsed: true},
	}})

	// With a cost that depends on the model, a body over the limit still
	// names its model.
	withModel := o
	withModel.ModelOfLargeBodies = true
	named := `{"messages":[{"content":"` + strings.Repeat("x", 64) + `"}],"model":"claude-opus-4"}`
	unnamed := `{"messages":[{"content":"` + strings.Repeat("x", 64) + `"}]}`
	runCases(t, withModel, []requestCase{{
		name: "over the size limit, model wanted",
		body: named,
		want: Estimate{Prompt: bySize(named), Completion: 100, Model: "claude-opus-4"},
	}, {
		name: "over the size limit, no model",
		body: unnamed,
		want: Estimate{Prompt: bySize(unnamed), Completion: 100},
	}})

	o.MaxBodyBytes = 0
	tooDeep := []struct{ name, body string }{
		{"over the depth limit", deep(MaxDepth + 1)},
		{"over the depth limit in a skipped field", `{"x":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`},
		// The part's content array is at depth 6.
		{"over the depth limit in a tool result", `{"messages":[{"content":[{"type":"tool_result","content":[{"x":` +
			strings.Repeat("[", MaxDepth-6) + strings.Repeat("]", MaxDepth-6) + `}]}]}]}`},
		// In plain messages (plain.go), read by the assembly: the message
		// is at depth 3, its parts at 4 and 5.
		{"over the depth limit in a plain message",
			`{"messages":[{"content":"a","x":` + strings.Repeat("[", MaxDepth-2) + strings.Repeat("]", MaxDepth-2) + `}]}`},
		{"over the depth limit in a plain message's parts",
			`{"messages":[{"content":[` + strings.Repeat("[", MaxDepth-3) + strings.Repeat("]", MaxDepth-3) + `]}]}`},
		{"over the depth limit in a plain message's part",
			`{"messages":[{"content":[{"text":"a","x":` + strings.Repeat("[", MaxDepth-4) + strings.Repeat("]", MaxDepth-4) + `}]}]}`},
	}
	cases := []requestCase{{
		name: "at the depth limit",
		body: deep(MaxDepth),
		want: Estimate{Completion: 100, Parsed: true},
	}, {
		name: "at the depth limit in a plain message's part",
		body: `{"messages":[{"content":[{"text":"ab","x":` + strings.Repeat("[", MaxDepth-5) + strings.Repeat("]", MaxDepth-5) + `}]}]}`,
		want: Estimate{Prompt: 1, Completion: 100, Parsed: true},
	}}
	for _, c := range tooDeep {
		cases = append(cases, requestCase{name: c.name, body: c.body, want: unread(Estimate{Prompt: bySize(c.body), Completion: 100})})
	}
	runCases(t, o, cases)
}

// A megabyte of '[' is rejected in one linear pass, without gjson's
// recursive validator ever seeing it.
func TestHostileNesting(t *testing.T) {
	for _, body := range []string{
		`{"messages":` + strings.Repeat("[", 1<<20),
		`{"messages":` + strings.Repeat(`[{"content":`, 1<<16),
		strings.Repeat("[", 1<<20),
		`{"tools":` + strings.Repeat(`{"a":`, 1<<18),
	} {
		e := Request([]byte(body), DialectOther, Options{BytesPerToken: 1, DefaultCompletionTokens: 1})
		assert.False(t, e.Parsed)
		assert.Equal(t, int64(len(body)), e.Prompt)
	}
}

// A body over MaxBodyBytes names the model its upstream reads: the last
// top-level "model", whatever comes before it or is nested inside other
// members (issue 14, point 6a: the first of two "model" keys bought the
// default weights).
func TestLargeBodyModelIsTheLastTopLevelOne(t *testing.T) {
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 100, MaxBodyBytes: 64, ModelOfLargeBodies: true}
	pad := `"messages":[{"role":"user","content":"` + strings.Repeat("x", 80) + `"}]`
	bySize := func(body string) int64 { return (int64(len(body)) + 3) / 4 }
	var cases []requestCase
	for _, c := range []struct{ name, body, model string }{
		{"escaped value", `{` + pad + `,"model":"claude-opus-\u0034"}`, "claude-opus-4"},
		{"nested models do not count", `{"model":"claude-opus-4",` + pad + `,"metadata":{"model":"cheap"},"x":[{"model":"cheap"}]}`, "claude-opus-4"},
		{"a key that only ends in model", `{"model":"claude-opus-4",` + pad + `,"xmodel":"cheap","model_":"cheap"}`, "claude-opus-4"},
		{"the last string one", `{"model":"claude-opus-4",` + pad + `,"model":null}`, "claude-opus-4"},
		{"none", `{` + pad + `,"metadata":{"model":"cheap"}}`, ""},
		{"not an object", `["model","claude-opus-4",` + pad[len(`"messages":`):] + `]`, ""},
	} {
		cases = append(cases, requestCase{name: c.name, body: c.body,
			want: Estimate{Prompt: bySize(c.body), Completion: 100, Model: c.model}})
	}
	// Of two models, the last is the one most parsers read, and the
	// other is named too: the body is ambiguous.
	for _, c := range []struct{ name, body string }{
		{"two models, padding between", `{"model":"cheap",` + pad + `,"model":"claude-opus-4"}`},
		{"two models, padding after", `{"model":"cheap","model":"claude-opus-4",` + pad + `}`},
		{"escaped key", `{"model":"cheap",` + pad + `,"\u006dodel":"claude-opus-4"}`},
	} {
		cases = append(cases, requestCase{name: c.name, body: c.body,
			want: Estimate{Prompt: bySize(c.body), Completion: 100, Model: "claude-opus-4",
				OtherModels: [MaxOtherModels]string{"cheap"}, Ambiguous: AmbiguousModel}})
	}
	lenient := `{"model":"claude-opus-4",` + pad + `,}`
	cases = append(cases, requestCase{name: "a trailing comma", body: lenient,
		want: Estimate{Prompt: bySize(lenient), Completion: 100, Model: "claude-opus-4", Ambiguous: AmbiguousLenient}})
	broken := `{"model":"claude-opus-4",` + pad + `,,}`
	cases = append(cases, requestCase{name: "not JSON even to lenient parsers", body: broken,
		want: unread(Estimate{Prompt: bySize(broken), Completion: 100})})
	runCases(t, o, cases)

	// One scan, allocating only the copy of the model.
	body := []byte(`{` + pad + `,"model":"claude-opus-4"}`)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { Request(body, DialectOther, o) }))
}

func TestOptions(t *testing.T) {
	body := []byte(`{"messages":[{"content":"12345"}]}`)
	// Rounding up.
	assert.Equal(t, int64(2), Request(body, DialectOther, Options{BytesPerToken: 4}).Prompt)
	assert.Equal(t, int64(1), Request(body, DialectOther, Options{BytesPerToken: 5}).Prompt)
	assert.Equal(t, int64(1), Request(body, DialectOther, Options{BytesPerToken: 1 << 62}).Prompt)
	assert.Equal(t, int64(1), Request([]byte("x"), DialectOther, Options{BytesPerToken: 1<<63 - 1}).Prompt)
	// No prompt text: no tokens.
	assert.Equal(t, int64(0), Request([]byte(`{"messages":[{"content":""}]}`), DialectOther, Options{BytesPerToken: 4}).Prompt)
	// Out-of-range options; no bytes per token: the calibrated count (a
	// number of 5 digits), rounded up.
	calibrated := ceilDiv(weightNumber+5*weightOther, UnitsPerToken)
	assert.Equal(t, Estimate{Prompt: calibrated, Completion: 0, Parsed: true},
		withoutParts(Request(body, DialectOther, Options{BytesPerToken: 0, DefaultCompletionTokens: -3, MaxBodyBytes: 0})))
	assert.Equal(t, Estimate{Prompt: calibrated, Completion: 0, Parsed: true},
		withoutParts(Request(body, DialectOther, Options{BytesPerToken: -4, MaxBodyBytes: -1})))
}

func TestModelFromPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v1beta/models/gemini-2.5-flash:generateContent":                                              "gemini-2.5-flash",
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse":                                "gemini-2.5-flash",
		"/v1/models/gemini-pro:countTokens":                                                            "gemini-pro",
		"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent": "gemini-2.5-pro",
		"/gateway/models/x/v1beta/models/gemini-2.0-flash:generateContent":                             "gemini-2.0-flash",
		"/v1beta/models/gemini-2.5-flash:generateContent#frag":                                         "gemini-2.5-flash",
		"":                                   "",
		"/v1/chat/completions":               "",
		"/v1/models/gpt-4o":                  "",
		"/v1/models":                         "",
		"/v1beta/models/:generateContent":    "",
		"/v1beta/models/a/b:generateContent": "",
		"/v1/chat?next=/models/x:y":          "",
		"/v1beta/models/gemini:x:y":          "gemini",
	} {
		assert.Equal(t, want, ModelFromPath(path), path)
	}
}

// The model of a path is the one its upstream reads, which decodes the path
// (issue 14, point 6b: /models/gemini-2.5-pro%3AgenerateContent named no
// model, so paid the default weights).
func TestModelFromPathDecodes(t *testing.T) {
	for path, want := range map[string]string{
		"/v1beta/models/gemini-2.5-pro%3AgenerateContent":                                              "gemini-2.5-pro",
		"/v1beta/models/gemini-2.5-pro%3agenerateContent?alt=sse":                                      "gemini-2.5-pro",
		"/v1beta/models/gemini%2D2.5%2Dpro:generateContent":                                            "gemini-2.5-pro",
		"/v1beta/%6Dodels/gemini-2.5-pro:generateContent":                                              "gemini-2.5-pro",
		"/v1/projects/p/locations/l/publishers/google/models/gemini%2D2.5-pro%3AstreamGenerateContent": "gemini-2.5-pro",
		"/v1beta/models/gemini+pro:generateContent":                                                    "gemini+pro", // '+' is not a space in a path
		"/v1beta/models/gemini%20pro:generateContent":                                                  "gemini pro",
		// %2F is decoded inside its segment, as Google's API front end decodes
		// a path variable; a path that names a model only once %2F splits
		// segments, as a server that decodes the path before routing it sees
		// it, names that one.
		"/v1beta/models/google%2Fgemini-2.5-pro:generateContent": "google/gemini-2.5-pro",
		"/v1beta/models%2Fgemini-2.5-pro:generateContent":        "gemini-2.5-pro",
		"/v1beta%2Fmodels%2Fgemini-2.5-pro%3AgenerateContent":    "gemini-2.5-pro",
		// A malformed escape: the upstream refuses the path, which names no model.
		"/v1beta/models/gemini-2.5-pro%3:generateContent":   "",
		"/v1beta/models/gemini%zz:generateContent":          "",
		"/v1beta/models/gemini-2.5-pro:generateContent%":    "",
		"/v1beta%/models/gemini-2.5-pro:generateContent":    "",
		"/v1beta/models/%3AgenerateContent":                 "",
		"/v1/models/gpt%2D4o":                               "",
		"/v1/chat?next=/models/x%3Ay":                       "",
		"/v1beta/models/gemini-2.5-pro:generateContent?x=%": "gemini-2.5-pro", // the query is not the path
	} {
		assert.Equal(t, want, ModelFromPath(path), path)
	}
	// Nothing to decode, nothing allocated.
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { ModelFromPath("/v1beta/models/gemini-2.5-pro:generateContent") }))
}

func TestModelIsACopy(t *testing.T) {
	body := []byte(`{"model":"gpt-4o"}`)
	e := Request(body, DialectOther, opts)
	copy(body, strings.Repeat("x", len(body)))
	assert.Equal(t, "gpt-4o", e.Model)
}

func TestAllocations(t *testing.T) {
	body := []byte(chatBody(16 << 10))
	path := "/v1beta/models/gemini-2.5-flash:generateContent"
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { requestAt(body, path, opts) }),
		"with the model from the path")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { Request(body, DialectOther, opts) }),
		"with the model from the body")
	// An agent's request, its tools as OpenAI renders them, its tool calls
	// and results, with the calibrated count: their strings with escapes
	// are read in place (gjson allocated one each).
	agent := []byte(requestbody.Agent(64 << 10))
	assert.Equal(t, 1.0, testing.AllocsPerRun(20, func() { Request(agent, DialectOpenAIChat, calibrated) }),
		"an agent's request: the model only")
	// An image whose data URL has escaped slashes, as some JSON encoders
	// write them: read in place, not copied to be unescaped.
	image := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image\/png;base64,` +
		strings.Repeat(`iVBO\/w0K`, 8<<10) + `","detail":"low"}}]}]}`)
	assert.Equal(t, 1.0, testing.AllocsPerRun(20, func() { Request(image, DialectOpenAIChat, calibrated) }),
		"an image by data URL: the model only")
}

// Validation agrees with gjson.ValidBytes on values in every position the
// walk reads differently: skipped, counted as text, read as a cap, inside
// parts and tool results, and as keys.
func TestValidity(t *testing.T) {
	alternating := func(depth int, swap int) string {
		// [{"k":[{"k": ... }]}] with the closer at depth swap of the wrong kind.
		var open, closing strings.Builder
		for d := 1; d <= depth; d++ {
			if d%2 == 1 {
				open.WriteString(`[`)
			} else {
				open.WriteString(`{"k":`)
			}
		}
		for d := depth; d >= 1; d-- {
			if (d%2 == 1) != (d == swap) {
				closing.WriteString(`]`)
			} else {
				closing.WriteString(`}`)
			}
		}
		return open.String() + `0` + closing.String()
	}
	values := []string{
		// Valid.
		`0`, `-0`, `7`, `-12.34`, `1.5e+10`, `1E-2`, `2e5`, `0.0`, `1e400`, `1e-400`, `99999999999999999999`, `true`, `false`, `null`,
		`""`, `"x"`, `"\u00e9\ud83d\ude00\uD83D\uDE00"`, `"\b\f\n\r\t\/\\\""`, `"\u0000"`, "\"\x7f\xff\xc3\xa9\"",
		`{}`, `[]`, `{ }`, `[ ]`, `{"a":[1,{"b":null}],"c":"d"}`, `[ 1 , "2" , [ ] , { } ]`,
		`[{"type":"text","text":"t"}]`, `[{"type":"tool_result","content":[{"text":"x"}]}]`,
		alternating(MaxDepth-8, 0),
		alternating(200, 0), // valid, too deep
		// Invalid.
		``, `01`, `-`, `-a`, `1.`, `.5`, `1.e5`, `1e`, `1e+`, `+1`, `0x1`, `tru`, `truex`, `nul`, `nulll`, `NaN`, `True`,
		`"\x"`, `"\u12"`, `"\u12g4"`, `"\ud800\u12"`, `"\ud800\uzzzz"`, "\"a\x01b\"", "\"tab\there\"", "\"\x1f\"", `"unterminated`, `'x'`,
		`[1,]`, `[,1]`, `[1 2]`, `[1,,2]`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a"}`,
		`[}`, `{]`, `{"a":[}]}`, `[{]}`, `[[]`, `[]]`, `{{}}`, `{"a":{"b":1]}`,
		`[{"type":"text","text":01}]`, `[{"text":"x",}]`, `[{"type":"tool_result","content":[{"text":"x"]}]`,
		alternating(200, 1), alternating(200, 64), alternating(200, 65), alternating(200, 128), alternating(200, 200),
		alternating(MaxDepth-8, 1), alternating(MaxDepth-8, MaxDepth-8),
	}
	templates := []string{
		`{"x":%s}`, `{"x":[%s]}`, `{"x":[0,%s,0]}`, `{"tools":%s}`, `{"max_tokens":%s}`, `{"model":%s}`,
		`{"messages":%s}`, `{"messages":[%s]}`, `{"messages":[{"content":%s}]}`, `{"system":[{"text":%s}]}`,
		`{"messages":[{"content":[{"type":"tool_result","content":%s}]}]}`,
		`{"generationConfig":{"maxOutputTokens":%s}}`, `{%s:1}`, `{"a":1,%s:1}`, ` {"a":1} %s`,
	}
	for _, tmpl := range templates {
		for _, v := range values {
			body := []byte(strings.Replace(tmpl, "%s", v, 1))
			got := Request(body, DialectOther, opts)
			valid := gjson.ValidBytes(body)
			if r, ok := relaxed(string(body)); !valid && ok {
				valid = gjson.ValidBytes(r) // as lenient parsers read it
			}
			valid = valid && nestingDepth(body) <= MaxDepth
			assert.Equal(t, valid, got.Parsed, "%s", body)
			assert.Equal(t, reference(body, "", opts), readings(got), "%s", body)
		}
	}
}

func TestSizeEstimatesAnUnreadableBody(t *testing.T) {
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 512, MaxBodyBytes: 1 << 20}
	assert.Equal(t, Estimate{Prompt: 250, Completion: 512, Model: "gemini-2.5-flash"},
		sizeAt(1000, "/v1beta/models/gemini-2.5-flash:generateContent", o))
	assert.Equal(t, Estimate{Prompt: 1, Completion: 512}, Size(3, o))
	assert.Equal(t, Size(5000, o).Prompt, Request(make([]byte, 5000), DialectOther, o).Prompt, "same as an unparsed body")
}

// No estimate exceeds MaxTokens: not a declared size a client can set to
// anything (Content-Length: 9223372036854775807), nor a default, however
// they were configured; a request for more tokens than MaxTokens reserves
// MaxTokens, which no window below it admits.
func TestEstimatesStayWithinMaxTokens(t *testing.T) {
	o := Options{BytesPerToken: 1, DefaultCompletionTokens: math.MaxInt64}
	assert.Equal(t, Estimate{Prompt: MaxTokens, Completion: MaxTokens}, Size(math.MaxInt64, o))
	assert.Equal(t, Estimate{Prompt: MaxTokens, Completion: MaxTokens}, Size(MaxTokens+1, o))
	assert.Equal(t, Estimate{Prompt: MaxTokens - 1, Completion: MaxTokens}, Size(MaxTokens-1, o))
	assert.Equal(t, Estimate{Completion: MaxTokens}, Request(nil, DialectOther, o), "a bodyless request")
	assert.Equal(t, Estimate{Prompt: 2, Completion: MaxTokens, Parsed: true}, withoutParts(Request([]byte(`{"input":"Hi"}`), DialectOther, o)))
	assert.Equal(t, Estimate{Prompt: 2, Completion: 7, Parsed: true}, withoutParts(Request([]byte(`{"input":"Hi","max_tokens":7}`), DialectOther, o)))
	assert.Equal(t, reference([]byte(`{"input":"Hi"}`), "", o), Request([]byte(`{"input":"Hi"}`), DialectOther, o), "reference")
}

// TestPromptOfSizeIsSizesPrompt: the prompt alone is Size's, at every
// bytes per token, for sizes from negative to past MaxTokens' worth.
func TestPromptOfSizeIsSizesPrompt(t *testing.T) {
	for _, bpt := range []int64{0, 1, 3, 4, -2} {
		o := Options{BytesPerToken: bpt}
		for _, n := range []int64{-1, 0, 1, 3, 4, 5, 1023, 1 << 20, math.MaxInt64} {
			if got, want := PromptOfSize(n, o), Size(n, o).Prompt; got != want {
				t.Errorf("PromptOfSize(%d, %v bytes per token) = %d, Size's prompt %d", n, bpt, got, want)
			}
		}
	}
}

// Every word of knownWords is found, and only its words: the table is at
// most a third full, so that a look-up probes few slots.
func TestWordTable(t *testing.T) {
	words := 0
	for _, w := range knownWords {
		if w != "" {
			words++
			found, ok := knownWords.find([]byte(w))
			assert.True(t, ok && found == w, w)
		}
	}
	assert.LessOrEqual(t, words, len(knownWords)/3)
	for _, s := range []string{"", "t", "tex", "texts", "Text", "modelx", "tool_choicE"} {
		_, ok := knownWords.find([]byte(s))
		assert.False(t, ok, s)
	}
}

// TestKnownWords holds knownWords to the walker's source: every word a
// case or a comparison of walk.go, media.go and tools.go names is one, so
// that a key or a value with escapes that decodes to it is that constant,
// not a string decodedStr's next read overwrites.
func TestKnownWords(t *testing.T) {
	notCompared := map[string]bool{"IHDR": true, "WAVE": true, "WEBP": true, "VP8": true, "VP8L": true, "VP8X": true, "NaN": true, "Infinity": true}
	word := regexp.MustCompile(`^[A-Za-z_]+$`)
	fset := token.NewFileSet()
	for _, name := range []string{"walk.go", "media.go", "tools.go"} {
		file, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		check := func(e ast.Expr) {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				if word.MatchString(s) && !notCompared[s] {
					found, ok := knownWords.find([]byte(s))
					assert.True(t, ok && found == s, "%s: %s", fset.Position(lit.Pos()), s)
				}
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CaseClause:
				for _, e := range n.List {
					check(e)
				}
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					check(n.X)
					check(n.Y)
				}
			}
			return true
		})
	}
}

// unescape decodes a JSON string's content as gjson does, to the bytes it
// has room for.
func TestUnescapeAgreesWithGjson(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	pieces := []string{"a", "é", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u20ac`,
		`\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83d\u0041`, `\uD83D\uDE00`, "😀"}
	for i := range 20000 {
		var b strings.Builder
		for n := r.IntN(40); n > 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		raw := b.String()
		want := gjson.Parse(`"` + raw + `"`).Str
		var buf [64]byte
		got := string(unescape(buf[:0], raw))
		assert.Equal(t, want[:min(len(want), len(buf))], got, "%d: %s", i, raw)
	}
}

// A tool's property name counts by its decoded text, whole, however long
// it is and whatever its escapes (the walker decodes other keys only as far
// as it compares them).
func TestLongEscapedPropertyNames(t *testing.T) {
	name := strings.Repeat("a_long_property_name_", 8)
	escaped := strings.ReplaceAll(name, "_", `\u005f`)
	tools := func(n string) []byte {
		return []byte(`{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"` +
			n + `":{"type":"string"}}}}}],"messages":[{"role":"user","content":"hi"}]}`)
	}
	plain, withEscapes := Request(tools(name), DialectOpenAIChat, calibrated), Request(tools(escaped), DialectOpenAIChat, calibrated)
	assert.Equal(t, plain.Prompt, withEscapes.Prompt)
	assert.Equal(t, reference(tools(escaped), "/v1/chat/completions", calibrated), readings(withEscapes))
}
