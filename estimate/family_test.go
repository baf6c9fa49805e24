package estimate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 55: the family of a model, by its name as makers and hosts spell
// it, else by the request's API.
func TestFamilyOf(t *testing.T) {
	for _, c := range []struct {
		model string
		api   Dialect
		want  Family
	}{
		// OpenAI's, and what no family claims.
		{"gpt-4o", DialectOpenAIChat, FamilyOpenAI},
		{"gpt-4.1-mini", DialectOpenAIResponses, FamilyOpenAI},
		{"o3-mini", DialectOpenAIChat, FamilyOpenAI},
		{"gpt-oss-120b", DialectOpenAIChat, FamilyOpenAI},
		{"grok-4", DialectOpenAIChat, FamilyOpenAI},
		{"amazon.nova-pro-v1:0", DialectOther, FamilyOpenAI},
		{"us.amazon.nova-lite-v1:0", DialectOther, FamilyOpenAI},
		{"", DialectOpenAIChat, FamilyOpenAI},
		{"", DialectOther, FamilyOpenAI},
		// Claude, on Anthropic's API, Bedrock, Vertex AI, OpenRouter.
		{"claude-sonnet-4-5-20250929", DialectAnthropic, FamilyAnthropic},
		{"claude-3-5-haiku-latest", DialectOpenAIChat, FamilyAnthropic},
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", DialectOther, FamilyAnthropic},
		{"us.anthropic.claude-sonnet-4-20250514-v1:0", DialectOther, FamilyAnthropic},
		{"eu.anthropic.claude-3-7-sonnet-20250219-v1:0", DialectOther, FamilyAnthropic},
		{"apac.anthropic.claude-3-haiku-20240307-v1:0", DialectOther, FamilyAnthropic},
		{"global.anthropic.claude-opus-4-7-v1", DialectOther, FamilyAnthropic},
		{"claude-opus-4-1@20250805", DialectGemini, FamilyAnthropic},
		{"anthropic/claude-3.5-sonnet", DialectOpenAIChat, FamilyAnthropic},
		{"Claude-3-Opus", DialectOpenAIChat, FamilyAnthropic},
		{"my-proxy-model", DialectAnthropic, FamilyAnthropic}, // Anthropic's API, a model it does not name
		{"gpt-4o", DialectAnthropic, FamilyOpenAI},            // an OpenAI model behind Anthropic's API (a gateway's)
		{"o4-mini", DialectGemini, FamilyOpenAI},
		// Gemini and Gemma.
		{"gemini-2.5-flash", DialectGemini, FamilyGemini},
		{"models/gemini-1.5-pro", DialectOpenAIChat, FamilyGemini},
		{"gemma-3-27b-it", DialectOpenAIChat, FamilyGemini},
		{"", DialectGemini, FamilyGemini},
		{"tunedModels/x", DialectGemini, FamilyGemini},
		// Llama, on every host.
		{"llama-3.3-70b-versatile", DialectOpenAIChat, FamilyLlama},
		{"meta-llama/Llama-4-Scout-17B-16E-Instruct", DialectOpenAIChat, FamilyLlama},
		{"meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", DialectOpenAIChat, FamilyLlama},
		{"accounts/fireworks/models/llama-v3p1-70b-instruct", DialectOpenAIChat, FamilyLlama},
		{"llama3.1-8b", DialectOpenAIChat, FamilyLlama},
		{"meta.llama3-1-70b-instruct-v1:0", DialectOther, FamilyLlama},
		{"us.meta.llama3-2-90b-instruct-v1:0", DialectOther, FamilyLlama},
		// Mistral AI's.
		{"mistral-large-latest", DialectOpenAIChat, FamilyMistral},
		{"open-mistral-nemo", DialectOpenAIChat, FamilyMistral},
		{"codestral-2501", DialectOpenAIChat, FamilyMistral},
		{"pixtral-large-latest", DialectOpenAIChat, FamilyMistral},
		{"ministral-8b-latest", DialectOpenAIChat, FamilyMistral},
		{"magistral-medium-2506", DialectOpenAIChat, FamilyMistral},
		{"devstral-small-2505", DialectOpenAIChat, FamilyMistral},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", DialectOpenAIChat, FamilyMistral},
		{"mistral.mistral-large-2407-v1:0", DialectOther, FamilyMistral},
		// Qwen, DeepSeek, Cohere.
		{"qwen-max", DialectOpenAIChat, FamilyQwen},
		{"Qwen/Qwen3-235B-A22B", DialectOpenAIChat, FamilyQwen},
		{"qwq-32b", DialectOpenAIChat, FamilyQwen},
		{"qwen.qwen3-32b-v1:0", DialectOther, FamilyQwen},
		{"deepseek-chat", DialectOpenAIChat, FamilyDeepSeek},
		{"deepseek-ai/DeepSeek-R1", DialectOpenAIChat, FamilyDeepSeek},
		{"us.deepseek.r1-v1:0", DialectOther, FamilyDeepSeek},
		{"command-r-plus-08-2024", DialectOther, FamilyCohere},
		{"command-a-03-2025", DialectOpenAIChat, FamilyCohere},
		{"c4ai-aya-expanse-32b", DialectOther, FamilyCohere},
		{"cohere.command-r-v1:0", DialectOther, FamilyCohere},
	} {
		assert.Equal(t, c.want, FamilyOf(c.model, c.api), "%q on API %d", c.model, c.api)
	}
	assert.Zero(t, testing.AllocsPerRun(10, func() { FamilyOf("us.anthropic.claude-sonnet-4-20250514-v1:0", DialectOther) }))
	for f := range NumFamilies {
		parsed, ok := ParseFamily(f.String())
		assert.True(t, ok)
		assert.Equal(t, f, parsed)
		// Scales within what scaleUnits (and the bound of FuzzRequest) take.
		for _, r := range []familyRules{rulesOf(f, ""), rulesOf(f, "claude-opus-4-7")} {
			assert.True(t, r.textScale > 0 && r.textScale <= 2*UnitsPerToken && r.toolScale > 0 && r.toolScale <= 2*UnitsPerToken, "%s: %+v", f, r)
			assert.LessOrEqual(t, r.perMessage, int64(5), f.String())
			assert.LessOrEqual(t, r.perRequest+r.toolPrompt, int64(30+530), f.String())
		}
	}
}

// Opus 4.7 and later count with a tokenizer of their own.
func TestClaudeFrom47(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-opus-4-7": true, "claude-opus-4-7-20260415": true, "anthropic/claude-opus-4.7": true,
		"global.anthropic.claude-opus-4-7-v1": true, "claude-sonnet-5": true, "claude-opus-4-10": true,
		"claude-opus-4-6": false, "claude-sonnet-4-5-20250929": false, "claude-opus-4-20250514": false,
		"claude-3-7-sonnet-20250219": false, "claude-3-opus": false, "claude": false, "gpt-4o": false,
	} {
		assert.Equal(t, want, claudeFrom47(model), model)
	}
	assert.Greater(t, rulesOf(FamilyAnthropic, "claude-opus-4-7").textScale, rulesOf(FamilyAnthropic, "claude-opus-4-6").textScale)
}

// The same body counts as each family's models read it: its text scaled
// to their tokenizer, their template around its messages, their tools.
func TestPromptForEachFamily(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` +
		`The quick brown fox jumps over the lazy dog, and the dog does not mind at all."}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather of a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city."}},"required":["city"]}}}]}`)
	e := Request(body, DialectOpenAIChat, calibrated)
	p := e.parts
	text := func(f Family, model string) int64 { // the text, tools apart, as f's tokenizer counts it
		return scaleUnits(p.units, rulesOf(f, model).textScale)
	}
	asJSON := p.toolUnits + p.toolMembers*jsonMemberUnits

	openAI := ceilDiv(p.units+p.toolUnits, UnitsPerToken) + openAITokensPerMessage*2 + openAIReplyPriming
	assert.Equal(t, openAI, e.Prompt, "the body's model, OpenAI's: its rendering of the tools, its chat format")
	assert.Equal(t, openAI, e.PromptFor("gpt-4o-mini"))
	assert.Equal(t, openAI, e.PromptFor(""), "no model: the API's (OpenAI's) rules")

	r := rulesOf(FamilyLlama, "")
	assert.Equal(t, ceilDiv(text(FamilyLlama, "")+scaleUnits(asJSON, r.toolScale), UnitsPerToken)+r.perRequest+2*r.perMessage+r.toolPrompt,
		e.PromptFor("llama-3.3-70b-versatile"), "Llama: the tools' JSON, its template and tool instructions")
	claude := ceilDiv(text(FamilyAnthropic, "")+scaleUnits(asJSON, claudeTextScale), UnitsPerToken) + claudePerRequest + 2*claudePerMessage + 346
	assert.Equal(t, claude, e.PromptFor("claude-sonnet-4-5"), "Claude: its scale, its frame, its tool-use system prompt")
	assert.Greater(t, e.PromptFor("claude-opus-4-7"), claude, "Opus 4.7's tokenizer counts more")
	assert.Equal(t, ceilDiv(text(FamilyGemini, "")+scaleUnits(asJSON, familyRulesOf[FamilyGemini].toolScale), UnitsPerToken), e.PromptFor("gemini-2.5-pro"),
		"Gemini: the contents alone")
	for _, model := range []string{"mistral-large-latest", "qwen-max", "deepseek-chat", "command-a-03-2025"} {
		assert.Greater(t, e.PromptFor(model), ceilDiv(p.units, UnitsPerToken), model)
	}

	// A body counted by its size counts so for every model.
	large := Request(body, DialectOpenAIChat, Options{MaxBodyBytes: 10})
	assert.Equal(t, large.Prompt, large.PromptFor("claude-sonnet-4-5"))
	// So does the configuration's bytes per token, its text unscaled.
	bytes := Request(body, DialectOpenAIChat, Options{BytesPerToken: 4})
	assert.Equal(t, bytes.Prompt-openAITokensPerMessage*2-openAIReplyPriming+rulesOf(FamilyQwen, "").perRequest+2*rulesOf(FamilyQwen, "").perMessage+
		rulesOf(FamilyQwen, "").toolPrompt, bytes.PromptFor("qwen-max"))
	assert.Zero(t, testing.AllocsPerRun(10, func() { e.PromptFor("us.anthropic.claude-opus-4-7-v1") }))
}

// Converse's toolConfig is tools, for a Claude model on Bedrock: its
// tool-use system prompt, auto or forced as its toolChoice says.
func TestConverseToolConfig(t *testing.T) {
	converse := func(choice string) []byte {
		return []byte(`{"system":[{"text":"Be brief."}],"messages":[{"role":"user","content":[{"text":"Weather in Paris?"}]}],` +
			`"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}}]` + choice + `}}`)
	}
	auto := Request(converse(`,"toolChoice":{"auto":{}}`), DialectOther, calibrated)
	assert.True(t, auto.parts.tools)
	assert.False(t, auto.parts.forcedTool)
	assert.True(t, auto.parts.system)
	forced := Request(converse(`,"toolChoice":{"any":{}}`), DialectOther, calibrated)
	assert.True(t, forced.parts.forcedTool)
	model := "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	frame := int64(claudePerRequest + 2*claudePerMessage)
	textOf := func(e Estimate) int64 {
		return ceilDiv(scaleUnits(e.parts.units, claudeTextScale)+scaleUnits(e.parts.toolUnits, claudeTextScale), UnitsPerToken)
	}
	assert.Equal(t, textOf(auto)+frame+346, auto.PromptFor(model))
	assert.Equal(t, textOf(forced)+frame+313, forced.PromptFor(model))
	none := Request([]byte(`{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"toolConfig":{"tools":[]}}`), DialectOther, calibrated)
	assert.False(t, none.parts.tools, "no tools: no tool prompt")
	assert.Equal(t, none, reference([]byte(`{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"toolConfig":{"tools":[]}}`), "", calibrated))
}

// A model of another family reads OpenAI tools as their JSON: OpenAI's
// rendering and jsonMemberUnits a member come within 10 % of the JSON's
// calibrated count, on tools of few and of many parameters.
func TestToolsAsJSON(t *testing.T) {
	for name, tools := range map[string]string{
		"one function, one parameter": `[{"type":"function","function":{"name":"get_weather","description":"Get the current weather of a city.",` +
			`"parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city, e.g. Paris."}},"required":["city"]}}}]`,
		"enums and many parameters": `[{"type":"function","function":{"name":"search_orders","description":"Search the customer's orders.",` +
			`"parameters":{"type":"object","properties":{"status":{"type":"string","enum":["open","shipped","delivered","returned"],"description":"Its status."},` +
			`"since":{"type":"string","description":"The earliest order date, as YYYY-MM-DD."},"limit":{"type":"integer","description":"At most this many."},` +
			`"sort":{"type":"string","enum":["newest","oldest"]}},"required":["status"],"additionalProperties":false},"strict":true}},` +
			`{"type":"function","function":{"name":"cancel_order","description":"Cancel an order that has not shipped.",` +
			`"parameters":{"type":"object","properties":{"order_id":{"type":"string","description":"The order's id."}},"required":["order_id"]}}}]`,
		"Responses' flat functions": `[{"type":"function","name":"lookup","description":"Look a word up in the dictionary.","parameters":{"type":"object",` +
			`"properties":{"word":{"type":"string"},"language":{"type":"string","description":"An ISO 639-1 code."}},"required":["word"]}}]`,
	} {
		e := Request([]byte(`{"tools":`+tools+`}`), DialectOpenAIChat, calibrated)
		asJSON := float64(e.parts.toolUnits + e.parts.toolMembers*jsonMemberUnits)
		t.Logf("%s: members %d, rendering %d, JSON %d: %.0f a member", name, e.parts.toolMembers, e.parts.toolUnits, textUnitsGo(tools), float64(textUnitsGo(tools)-e.parts.toolUnits)/float64(e.parts.toolMembers))
		json := float64(textUnitsGo(tools))
		assert.InDelta(t, 1, asJSON/json, 0.10, "%s: %.0f units as JSON, %.0f by its JSON", name, asJSON, json)
		assert.Less(t, float64(e.parts.toolUnits), json, name)
	}
}
