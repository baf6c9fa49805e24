package estimate

import (
	"strconv"
	"strings"
)

// Model families
//
// The same prompt costs different tokens on different models: each family
// of models has its own tokenizer, which splits the same text into more or
// fewer tokens than OpenAI's o200k (which the calibrated count is fitted
// to), and its own chat template, which wraps each message and the request
// in tokens of its own and writes tool definitions its own way. The family
// a request's model belongs to (FamilyOf: by the model's name, else by the
// request's API) decides what its estimate adds to the body's text: a
// scale on the calibrated count, the template's tokens per message and per
// request, and the tool prompt its provider documents. It changes the
// count only, never what the body is read for nor which model is charged;
// and it costs nothing per byte: the walk counts the body once, whatever
// the family, and the family applies to its totals (PromptFor).

// Family is a family of models whose prompts count alike.
type Family uint8

const (
	FamilyOpenAI    Family = iota // OpenAI's models (o200k), and any model no other family claims
	FamilyAnthropic               // Claude, on Anthropic's API, Bedrock, Vertex AI or any other
	FamilyGemini                  // Gemini and Gemma
	FamilyLlama                   // Meta's Llama (counted as Llama 3.1 to 3.3), on any host (Groq, Together, Bedrock, Cerebras…)
	FamilyMistral                 // Mistral AI's models: Mistral, Mixtral, Codestral, Pixtral, Ministral…
	FamilyQwen                    // Alibaba's Qwen and QwQ
	FamilyDeepSeek                // DeepSeek's V3 and R1
	FamilyCohere                  // Cohere's Command and Aya
	NumFamilies
)

var familyNames = [NumFamilies]string{"openai", "anthropic", "gemini", "llama", "mistral", "qwen", "deepseek", "cohere"}

func (f Family) String() string {
	if f < NumFamilies {
		return familyNames[f]
	}
	return "family(" + strconv.Itoa(int(f)) + ")"
}

// ParseFamily is the family a name (String's) names.
func ParseFamily(name string) (Family, bool) {
	for f, n := range familyNames {
		if n == name {
			return Family(f), true
		}
	}
	return FamilyOpenAI, false
}

// familyPrefixes tell a family by how a model's name starts, once its
// provider's spelling is taken off (modelName): the names its makers and
// its hosts give it.
var familyPrefixes = [...]struct {
	prefix string
	family Family
}{
	{"gpt", FamilyOpenAI}, {"chatgpt", FamilyOpenAI}, {"o1", FamilyOpenAI}, {"o3", FamilyOpenAI}, {"o4", FamilyOpenAI}, {"codex", FamilyOpenAI},
	{"claude", FamilyAnthropic},
	{"gemini", FamilyGemini}, {"gemma", FamilyGemini},
	{"llama", FamilyLlama}, {"meta-llama", FamilyLlama}, {"codellama", FamilyLlama},
	{"mistral", FamilyMistral}, {"mixtral", FamilyMistral}, {"codestral", FamilyMistral}, {"pixtral", FamilyMistral},
	{"ministral", FamilyMistral}, {"magistral", FamilyMistral}, {"devstral", FamilyMistral}, {"voxtral", FamilyMistral},
	{"open-mistral", FamilyMistral}, {"open-mixtral", FamilyMistral}, {"open-codestral", FamilyMistral},
	{"qwen", FamilyQwen}, {"qwq", FamilyQwen},
	{"deepseek", FamilyDeepSeek},
	{"command", FamilyCohere}, {"c4ai-", FamilyCohere}, {"aya", FamilyCohere},
}

// bedrockVendors are the vendors of Amazon Bedrock's model ids
// (<vendor>.<model>, as anthropic.claude-sonnet-4-5-20250929-v1:0), and the
// family of each that has one; amazon (Nova, Titan), ai21 and the others
// have none and count as OpenAI's.
var bedrockVendors = [...]struct {
	vendor string
	family Family
}{
	{"anthropic", FamilyAnthropic}, {"meta", FamilyLlama}, {"mistral", FamilyMistral}, {"cohere", FamilyCohere},
	{"deepseek", FamilyDeepSeek}, {"qwen", FamilyQwen}, {"amazon", FamilyOpenAI}, {"ai21", FamilyOpenAI},
	{"writer", FamilyOpenAI}, {"openai", FamilyOpenAI}, {"google", FamilyGemini}, {"twelvelabs", FamilyOpenAI},
	{"stability", FamilyOpenAI}, {"luma", FamilyOpenAI}, {"moonshot", FamilyOpenAI}, {"minimax", FamilyOpenAI},
}

// bedrockRegions are the prefixes of Bedrock's cross-region inference
// profiles (us.anthropic.claude-…, eu.meta.llama3-…).
var bedrockRegions = [...]string{"us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"}

// FamilyOf is the family of a model, by its name as the request names it
// (the model the limiter resolved for it: the body's, a header's, or the
// one its route addresses), read whatever its letter case and its
// provider's spelling: a path before it (meta-llama/Llama-3.3-70B,
// accounts/fireworks/models/llama-v3p1-8b), Bedrock's vendor and
// cross-region prefix (us.anthropic.claude-…, meta.llama3-…), Vertex AI's
// version (claude-sonnet-4-5@20250929). A model no family claims (or none:
// "") is of its API's family when that API is a family's own (Anthropic's
// Messages, Gemini's), else OpenAI's, which the calibrated count is fitted
// to. It allocates nothing.
func FamilyOf(model string, api Dialect) Family {
	if f, ok := familyOfName(model); ok {
		return f
	}
	switch api {
	case DialectAnthropic:
		return FamilyAnthropic
	case DialectGemini:
		return FamilyGemini
	}
	return FamilyOpenAI
}

// familyOfName is the family a model's name tells, if it tells one: by its
// prefix, else (a Bedrock id, whose vendor no prefix names) by its vendor.
// A model is read at every request, in WASM too, where each call costs:
// one pass, the prefixes of its first letter alone.
func familyOfName(model string) (Family, bool) {
	name := model
	for i := len(model) - 1; i >= 0; i-- {
		if model[i] == '/' {
			name = model[i+1:]
			break
		}
	}
	if f, ok := familyOfPrefix(name); ok {
		return f, true
	}
	vendor, rest, ok := strings.Cut(name, ".")
	if !ok {
		return FamilyOpenAI, false
	}
	for _, region := range bedrockRegions {
		if len(vendor) == len(region) && hasPrefixFold(vendor, region) {
			vendor, rest, ok = strings.Cut(rest, ".")
			break
		}
	}
	for _, v := range bedrockVendors {
		if ok && len(vendor) == len(v.vendor) && hasPrefixFold(vendor, v.vendor) {
			if f, named := familyOfPrefix(rest); named {
				return f, true // a vendor's model of another family (a reseller's may be)
			}
			return v.family, true
		}
	}
	return FamilyOpenAI, false
}

// prefixesByLetter are familyPrefixes by their first letter.
var prefixesByLetter = func() (by [26][]int) {
	for i, p := range familyPrefixes {
		by[p.prefix[0]-'a'] = append(by[p.prefix[0]-'a'], i)
	}
	return by
}()

// familyOfPrefix is the family whose prefix starts name, if any.
func familyOfPrefix(name string) (Family, bool) {
	if name == "" {
		return FamilyOpenAI, false
	}
	first := name[0] | 0x20
	if first < 'a' || first > 'z' {
		return FamilyOpenAI, false
	}
	for _, i := range prefixesByLetter[first-'a'] {
		if p := familyPrefixes[i]; hasPrefixFold(name, p.prefix) {
			return p.family, true
		}
	}
	return FamilyOpenAI, false
}

// hasPrefixFold says whether s starts with prefix, of lowercase ASCII
// letters, digits, '-' and '.', whatever the letter case of s.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c |= 0x20
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// modelName is a model's name without the path a host writes before it
// (the part after its last '/').
func modelName(model string) string {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		return model[i+1:]
	}
	return model
}

// TextScale is a family's scale on the calibrated count of text, in
// 1/UnitsPerToken: its tokenizer's count of a text over the count, as
// tools/tokenfit -family fits it (see familyRules), for its models (a
// Claude model from Opus 4.7 on has a scale of its own: claudeRules).
func TextScale(f Family) int64 {
	return rulesOf(f, "").textScale
}

// familyRules are what a family's models add to the calibrated count of a
// body's text: a scale on the text (its tokenizer's count over o200k's)
// and on the tool definitions (which its template may write otherwise, as
// indented JSON), in 1/UnitsPerToken; the tokens its chat template writes
// around each message (the top-level system prompt one of them) and once a
// request (a start, a reply's header, a system block it always writes);
// and the tokens of the tool prompt it adds to a request with tools.
type familyRules struct {
	textScale, toolScale   int64
	perMessage, perRequest int64
	toolPrompt             int64
}

// The rules of each family (see rulesOf for OpenAI's and Anthropic's):
// the text scales are tools/tokenfit -family's fits on its corpus, the
// template tokens those of the chat templates the models' cards publish,
// counted with their tokenizers (tools/tokenfit/tokenizers.mjs).
var familyRulesOf = [NumFamilies]familyRules{
	// Llama 3.1 to 3.3's template (its model card, "Llama 3.1 prompt
	// format", and tokenizer_config.json): <|begin_of_text|>, a system
	// block it always writes (<|start_header_id|>system<|end_header_id|>
	// "\n\n", "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul
	// 2024\n\n", 20 tokens, <|eot_id|>), and the reply's header, 30 in
	// all; each message <|start_header_id|>, its role, <|end_header_id|>,
	// "\n\n" and <|eot_id|>, 5. With tools, "Environment: ipython\n" in
	// the system block (5) and in the first user message the JSON-tool
	// instructions (51) before each tool as indented JSON
	// (tojson(indent=4)), which Llama 3's tokenizer counts 1.55 times
	// compact JSON (on the Compose schema: tokenfit -family llama).
	FamilyLlama: {textScale: 1064, toolScale: 1654, perMessage: 5, perRequest: 30, toolPrompt: 56},
	// Tekken's template (Mistral's v7 and later instruct models, as
	// mistral-common writes it): <s> once; [INST] and [/INST] around a
	// user message, [SYSTEM_PROMPT] and [/SYSTEM_PROMPT] around the
	// system prompt, </s> after an assistant's, 2 a message at most;
	// [AVAILABLE_TOOLS] and [/AVAILABLE_TOOLS] around the tools' JSON, as
	// Python's json.dumps writes it (", ", ": "): 1.13 times compact JSON
	// by Tekken (tokenfit -family mistral).
	FamilyMistral: {textScale: 1069, toolScale: 1211, perMessage: 2, perRequest: 1, toolPrompt: 2},
	// Qwen's ChatML (Qwen2.5's and Qwen3's tokenizer_config.json):
	// <|im_start|>, the role, "\n", <|im_end|>, "\n", 5 a message, and
	// <|im_start|>assistant"\n", 3, for the reply. With tools, its system
	// block (5, when the request has no system prompt for it to join) holds
	// the tool instructions (35 tokens before the tools' JSON, a line
	// each, 43 after); the JSON as json.dumps writes it, 1.22 times
	// compact JSON by Qwen's tokenizer (tokenfit -family qwen).
	FamilyQwen: {textScale: 1028, toolScale: 1255, perMessage: 5, perRequest: 3, toolPrompt: 83},
	// DeepSeek V3's template (tokenizer_config.json): <｜begin▁of▁sentence｜>
	// and the reply's <｜Assistant｜>, 2; <｜User｜> before a user message
	// and <｜Assistant｜> and <｜end▁of▁sentence｜> around an assistant's, 2
	// a message at most. DeepSeek's API does not publish the tool prompt
	// it writes: tools count by their JSON.
	FamilyDeepSeek: {textScale: 1049, toolScale: 1049, perMessage: 2, perRequest: 2},
	// Gemini's API counts the contents alone (its countTokens, which its
	// usage matches): no template. Gemma 3's tokenizer is Gemini 2.0's.
	FamilyGemini: {textScale: 1008, toolScale: 1008},
	// Cohere bills the input tokens of the request (billed_units), not the
	// template and preamble its models read (tokens): no template. Its
	// tokenizer is not public, nor any statement of how it counts against
	// another's: o200k's count.
	FamilyCohere: {textScale: UnitsPerToken, toolScale: UnitsPerToken},
}

// Anthropic's models (no public tokenizer from Claude 3 on).
const (
	// Anthropic: "[tiktoken] undercounts Claude tokens by ~15–20% on
	// typical text, and by much more on code or non-English input" (the
	// token counting reference of Anthropic's Claude Code): 1.2, the top of
	// that range. Claude 2's tokenizer, Anthropic's last public one, counts
	// 1.17 times o200k on tokenfit's corpus (tokenfit -family claude-2).
	claudeTextScale = 1229
	// Opus 4.7's tokenizer counts "1.0–1.35x" the tokens of the one before
	// it, by the kind of content (Anthropic's Opus 4.7 announcement): the
	// middle of that range, 1.175, times the scale above. Its later models
	// keep its vocabulary.
	claude47TextScale = 1444
	// A request's frame: a message of one character counts 7 tokens
	// (count_tokens, as measured by those who reverse its tokenizer), 3
	// for the request and 3 a message.
	claudePerMessage = 3
	claudePerRequest = 3
)

// rulesOf are the rules of a family, for a model of it: OpenAI's add
// nothing to the count (its chat format is its API's, see overhead);
// Anthropic's scale is by its model's tokenizer and its tool prompt by
// model (anthropicToolPrompt).
func rulesOf(f Family, model string) familyRules {
	switch f {
	case FamilyOpenAI:
		return familyRules{textScale: UnitsPerToken, toolScale: UnitsPerToken}
	case FamilyAnthropic:
		scale := int64(claudeTextScale)
		if claudeFrom47(model) {
			scale = claude47TextScale
		}
		return familyRules{textScale: scale, toolScale: scale, perMessage: claudePerMessage, perRequest: claudePerRequest}
	}
	return familyRulesOf[f]
}

// claudeFrom47 says whether a Claude model is Opus 4.7 or later, of the new
// tokenizer: its name (claude-opus-4-7, claude-sonnet-5, any provider's
// spelling) has a version of 4.7 or more after its tier.
func claudeFrom47(model string) bool {
	name := modelName(model)
	const claude = "claude-"
	i := 0
	for i+len(claude) <= len(name) && !hasPrefixFold(name[i:], claude) {
		i++
	}
	if i+len(claude) > len(name) {
		return false
	}
	rest := name[i+len(claude):]
	for _, tier := range [...]string{"opus-", "sonnet-", "haiku-"} {
		if hasPrefixFold(rest, tier) {
			major, minor := version(rest[len(tier):])
			return major > 4 || major == 4 && minor >= 7
		}
	}
	return false // claude-3-5-sonnet…: the version before the tier, before 4.7
}

// version reads "<major>-<minor>" (or "<major>.<minor>", or "<major>")
// at the start of s; a minor of 8 digits is a date (claude-opus-4-20250514),
// no minor.
func version(s string) (major, minor int) {
	digits := func() (n, count int) {
		for count < len(s) && count < 9 && '0' <= s[count] && s[count] <= '9' {
			n = n*10 + int(s[count]-'0')
			count++
		}
		s = s[count:]
		return n, count
	}
	major, _ = digits()
	if len(s) > 0 && (s[0] == '-' || s[0] == '.') {
		s = s[1:]
		if m, count := digits(); count < 8 {
			minor = m
		}
	}
	return major, minor
}

// jsonMemberUnits is what a member of a tool object adds to OpenAI's
// rendering of it in its JSON, in units: its key, its quotes, its colon
// and its comma, less the framing tokens the rendering writes instead
// (tools.go), 1.5 to 2.2 tokens on tools of one to many parameters. A
// model of another family reads the JSON (TestToolsAsJSON holds this
// reading within 10 % of the JSON's count).
const jsonMemberUnits = 7 * UnitsPerToken / 4

// promptParts are what a parsed body's prompt adds up, apart, for
// PromptFor to add up as a model's family counts it.
type promptParts struct {
	api Dialect
	// units is the calibrated count of the text, tool definitions apart:
	// toolUnits, as the walk counted them (rendered as OpenAI renders
	// them when rendered, with toolMembers members).
	units, toolUnits, toolMembers int64
	rendered                      bool
	// bytesPerToken > 0 counts the text, tools and all, as its bytes
	// (textBytes) over it: the configuration's choice, which no family
	// scales.
	bytesPerToken, textBytes int64
	// fixed is what no family changes: token ids, opaque reasoning, media.
	fixed int64
	// messages counts the messages a chat template wraps; system says
	// there is a top-level system prompt, one more; tools that there are
	// tool definitions, forcedTool that tool_choice forces a tool use.
	messages                  int64
	system, tools, forcedTool bool
}

// prompt is the prompt as a model of family f (model) counts it.
func (p *promptParts) prompt(f Family, model string) int64 {
	r := rulesOf(f, model)
	var text int64
	if p.bytesPerToken > 0 {
		text = ceilDiv(p.textBytes, p.bytesPerToken)
	} else {
		tools := p.toolUnits
		if p.rendered && f != FamilyOpenAI {
			tools += p.toolMembers * jsonMemberUnits // its JSON, not OpenAI's rendering
		}
		text = ceilDiv(scaleUnits(p.units, r.textScale)+scaleUnits(tools, r.toolScale), UnitsPerToken)
	}
	return min(text+p.fixed+p.overhead(f, r, model), MaxTokens)
}

// overhead is what the prompt costs beyond its text as a model of family f
// (rules r, model) reads it: OpenAI's chat format, in OpenAI's chat and
// Responses APIs, wraps each message (of messages, or of a Responses input)
// and primes the reply (see the constants in dialect.go); another family's
// template wraps each message and the request, and adds its tool prompt to
// a request with tools (Anthropic's, by model and tool_choice).
func (p *promptParts) overhead(f Family, r familyRules, model string) int64 {
	if f == FamilyOpenAI {
		if (p.api == DialectOpenAIChat || p.api == DialectOpenAIResponses) && p.messages > 0 {
			return openAITokensPerMessage*p.messages + openAIReplyPriming
		}
		return 0
	}
	var n int64
	messages := p.messages
	if p.system {
		messages++
	}
	if messages > 0 {
		n = r.perRequest + r.perMessage*messages
	}
	if p.tools {
		if f == FamilyAnthropic {
			n += anthropicToolPrompt(model, p.forcedTool)
		} else {
			n += r.toolPrompt
		}
	}
	return n
}

// scaleUnits is units × scale / UnitsPerToken, for units ≥ 0 and
// 0 ≤ scale ≤ 2·UnitsPerToken, without overflow.
func scaleUnits(units, scale int64) int64 {
	return units/UnitsPerToken*scale + units%UnitsPerToken*scale/UnitsPerToken
}
