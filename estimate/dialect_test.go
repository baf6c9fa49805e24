package estimate

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 40, first part: what a prompt costs beyond its text, by its API's
// documentation, and output schemas counted as tool definitions are.
func TestWhatTheAPIAddsToThePrompt(t *testing.T) {
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 10}
	prompt := func(path, body string) int64 { return requestAt([]byte(body), path, o).Prompt }
	two := `{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is 2+2?"}]}` // 21 bytes of text: 6 tokens

	// OpenAI's chat format: 4 per message (with its role), 3 for the reply's priming.
	assert.Equal(t, int64(6+4*2+3), prompt("/v1/chat/completions", two))
	assert.Equal(t, int64(6), prompt("/v1/other", two), "an API whose format is not known: the text only")
	assert.Equal(t, int64(3+4*1+3), prompt("/v1/responses", `{"model":"gpt-4o","input":"Hello world!"}`), "a Responses input string: one message")
	assert.Equal(t, int64(2+4*2+3), prompt("/v1/responses", `{"model":"gpt-4o","instructions":"Be","input":[{"role":"user","content":"Hello"},{"type":"function_call_output","call_id":"c","output":""}]}`),
		"each input item")
	assert.Equal(t, int64(6+4*2+3), prompt("/openai/deployments/d/chat/completions?api-version=1", two), "Azure's chat completions")
	assert.Equal(t, int64(2+4*2+3), prompt("/v1/chat/completions", `{"messages":[`+plainMessage+`,`+strings.Replace(plainMessage, `"user"`, `"assistant"`, 1)+`]}`),
		"plain messages, read in one call")

	// Anthropic with tools: its tool-use system prompt, by model and
	// tool_choice; and a Claude model's frame (family.go), a message here.
	const frame = claudePerRequest + claudePerMessage
	tools := `"tools":[{"name":"get","description":"","input_schema":{"type":"object"}}]`
	toolText := int64(len(`[{"name":"get","description":"","input_schema":{"type":"object"}}]`))
	anthropic := func(model, extra string) string {
		return `{"model":"` + model + `","max_tokens":9,` + tools + extra + `,"messages":[{"role":"user","content":"Hi!!"}]}`
	}
	assert.Equal(t, ceilDiv(4+toolText, 4)+frame+346, prompt("/v1/messages", anthropic("claude-sonnet-4-5", "")))
	anyChoice := `,"tool_choice":{"type":"any"}`
	assert.Equal(t, ceilDiv(4+toolText+int64(len(`{"type":"any"}`)), 4)+frame+313, prompt("/v1/messages", anthropic("claude-opus-4-1", anyChoice)))
	assert.Equal(t, ceilDiv(4+toolText, 4)+frame+530, prompt("/v1/messages", anthropic("claude-3-opus-20240229", "")))
	assert.Equal(t, ceilDiv(4+toolText, 4)+frame+264, prompt("/v1/messages", anthropic("claude-3-5-haiku-latest", "")))
	assert.Equal(t, int64(2+frame), prompt("/v1/messages", `{"model":"claude-sonnet-4-5","tools":[],"messages":[{"role":"user","content":"Hi!!"}]}`),
		"no tools, no tool-use system prompt")
	assert.Equal(t, ceilDiv(toolText, 4), prompt("/v1/chat/completions", strings.Replace(anthropic("gpt-4o", ""), `"messages":[{"role":"user","content":"Hi!!"}]`, `"x":1`, 1)),
		"another API: no Anthropic prompt")

	// Output schemas count as their raw JSON.
	schema := `{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"n":{"type":"integer"}}}}}`
	for name, c := range map[string]struct{ path, body string }{
		"response_format": {"/x", `{"response_format":` + schema + `}`},
		"Responses' text": {"/x", `{"text":{"format":` + schema + `}}`},
		"output_format":   {"/x", `{"output_format":` + schema + `}`},
		"Gemini":          {"/x", `{"generationConfig":{"responseJsonSchema":` + schema + `}}`},
		"Converse":        {"/x", `{"outputConfig":` + schema + `}`},
	} {
		assert.GreaterOrEqual(t, prompt(c.path, c.body), ceilDiv(int64(len(schema)), 4), name)
	}
}

// plainMessage is a message of the plain shape plainTurns reads: 4 bytes of text.
const plainMessage = `{"role":"user","content":"Hi!!"}`

// DialectOf reads the API from the path.
func TestDialectOf(t *testing.T) {
	for path, want := range map[string]Dialect{
		"/v1/chat/completions":                            DialectOpenAIChat,
		"/v1/responses":                                   DialectOpenAIResponses,
		"/v1/responses/resp_1/input_items":                DialectOpenAIOther,
		"/v1/embeddings":                                  DialectOpenAIOther,
		"/v1/messages?beta=true":                          DialectAnthropic,
		"/v1/messages/count_tokens":                       DialectAnthropic,
		"/v1beta/models/gemini-2.5-flash:generateContent": DialectGemini,
		"/healthz":                                        DialectOther,
	} {
		assert.Equal(t, want, DialectOf(path), path)
	}
}

// A Gemini request names its model in its path, which its upstream reads:
// its body is not read for one, nor is a model it names ambiguous or
// unknown (the caller reads the path's).
func TestGeminiBodyNamesNoModel(t *testing.T) {
	for _, body := range []string{
		`{"model":"gemini-2.0-flash-lite","contents":[{"parts":[{"text":"Hi"}]}]}`,
		`{"model":"a","model":"b","contents":[]}`,
		`{"model":"a",`,
	} {
		gemini := Request([]byte(body), DialectGemini, opts)
		assert.Equal(t, "", gemini.Model, body)
		assert.False(t, gemini.UnknownModel, body)
		assert.Equal(t, [MaxOtherModels]string{}, gemini.OtherModels, body)
		assert.NotEqual(t, Request([]byte(body), DialectOther, opts), gemini, body)
	}
}
