package estimate

import "strings"

// Dialect is the API a request speaks, as its path says: where its body
// holds tools and media, and, for OpenAI's models, whether its chat format
// wraps the messages (a model of another family adds its own template
// whatever the API: family.go).
type Dialect uint8

const (
	DialectOther           Dialect = iota // a path of none of the APIs below
	DialectOpenAIChat                     // OpenAI chat completions (and compatible): /chat/completions
	DialectOpenAIResponses                // OpenAI Responses: /responses
	DialectOpenAIOther                    // OpenAI's other APIs an LLM gateway limits: /completions, /embeddings…, Azure's /openai/…
	DialectAnthropic                      // Anthropic Messages: /messages, /messages/count_tokens
	DialectGemini                         // Gemini and Vertex AI: /models/<model>:<method>
)

// openAIPaths end the paths of OpenAI's other APIs that an LLM gateway limits.
var openAIPaths = [...]string{"/completions", "/embeddings", "/moderations", "/images/generations", "/audio/speech",
	"/audio/transcriptions"}

// DialectOf is the API of a request by its path (its query ignored), read
// as ModelFromPath reads it for Gemini's.
func DialectOf(path string) Dialect { return RouteDialect(path, ModelFromPath(path) != "") }

// RouteDialect is DialectOf for a path its caller has read for its model
// already (namesModel: ModelFromPath names one, a Gemini or Vertex AI
// path), as the limiter reads a request's route once.
func RouteDialect(path string, namesModel bool) Dialect {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	switch {
	case namesModel:
		return DialectGemini
	case strings.HasSuffix(path, "/chat/completions"):
		return DialectOpenAIChat
	case strings.HasSuffix(path, "/responses"):
		return DialectOpenAIResponses
	case strings.HasSuffix(path, "/messages") || strings.HasSuffix(path, "/messages/count_tokens"):
		return DialectAnthropic
	}
	for _, p := range openAIPaths {
		if strings.HasSuffix(path, p) {
			return DialectOpenAIOther
		}
	}
	if strings.HasPrefix(path, "/openai/") || strings.Contains(path, "/responses/") { // Azure OpenAI; a response's sub-resources
		return DialectOpenAIOther
	}
	return DialectOther
}

// What a prompt costs an OpenAI model beyond its text, in tokens, by
// OpenAI's own documentation (other families: family.go).
const (
	// OpenAI's chat format: each message is wrapped in 3 tokens
	// (<|start|>{role}<|message|> … <|end|>) and its role is one more (every
	// role is a token of o200k), and the reply is primed with 3 more
	// (<|start|>assistant<|message|>): OpenAI's cookbook, "How to count
	// tokens with tiktoken", num_tokens_from_messages, for gpt-4o and later
	// models, which counts the role's value. The Responses API takes the
	// same items.
	openAITokensPerMessage = 4
	openAIReplyPriming     = 3
)

// anthropicToolPrompt is the system prompt Anthropic adds to a request with
// tools for a Claude model, on any API (family.go), in tokens, for
// tool_choice auto or none, and for any or tool: its "Tool use system
// prompt token count" table, by model; newer models (3.5 Sonnet, 3.7,
// 4.x) take the last.
func anthropicToolPrompt(model string, forced bool) int64 {
	pick := func(auto, any int64) int64 {
		if forced {
			return any
		}
		return auto
	}
	switch {
	case strings.HasPrefix(model, "claude-3-opus"):
		return pick(530, 281)
	case strings.HasPrefix(model, "claude-3-sonnet"):
		return pick(159, 235)
	case strings.HasPrefix(model, "claude-3-haiku"), strings.HasPrefix(model, "claude-3-5-haiku"):
		return pick(264, 340)
	}
	return pick(346, 313)
}
