package plugintest

import (
	"fmt"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"strings"
)

// OpenAIStream is an OpenAI chat completion stream with include_usage: n
// content events carrying "usage":null, then the usage event and [DONE].
func OpenAIStream(n int, prompt, completion int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"word %d "},"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", prompt, completion, prompt+completion)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// SSEEvents splits a stream into one chunk per event, as upstreams flush them.
func SSEEvents(stream string) []string {
	parts := strings.SplitAfter(stream, "\n\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// ChatBodyPrompt is the estimate of ChatBody's prompt: "Hi", a word of 2
// letters, 1.05 tokens by the calibrated count (estimate/count.go), rounded
// up, and OpenAI's chat format, 4 tokens for the message and its role and 3
// for the reply's priming (estimate/dialect.go).
const ChatBodyPrompt = 9

// TextTokens is the calibrated count (estimate/count.go) of strings of a
// body, given as JSON string content, counted together as the estimate
// counts a body's text: their weights summed, rounded up to a token.
func TextTokens(contents ...string) int64 {
	var units int64
	for _, c := range contents {
		for k, n := range estimate.TextFeatures(c) {
			units += n * estimate.TextWeights[k]
		}
	}
	return (units + estimate.UnitsPerToken - 1) / estimate.UnitsPerToken
}

// ChatBody is a chat completion request body naming an output cap.
func ChatBody(maxTokens int) string {
	return fmt.Sprintf(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"messages":[{"role":"user","content":"Hi"}]}`, maxTokens)
}

// AnthropicStream is an Anthropic Messages stream: input and cache tokens in
// message_start, cumulative output tokens in message_delta.
func AnthropicStream(input, cacheCreation, cacheRead, output int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":%d,\"cache_creation_input_tokens\":%d,\"cache_read_input_tokens\":%d,\"output_tokens\":1}}}\n\n", input, cacheCreation, cacheRead)
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"part %d \"}}\n\n", i)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	fmt.Fprintf(&b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", output)
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}

// GeminiStream is a Gemini streamGenerateContent?alt=sse stream whose
// usageMetadata is cumulative: the last one counts.
func GeminiStream(prompt, candidates int) string {
	var b strings.Builder
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"chunk %d\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":%d,\"candidatesTokenCount\":%d,\"totalTokenCount\":%d},\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n", i, prompt, candidates*i/5, prompt+candidates*i/5)
	}
	return b.String()
}

// ResponsesStream is an OpenAI Responses API stream ending in response.completed.
func ResponsesStream(input, output int) string {
	var b strings.Builder
	b.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"tok%d \"}\n\n", i)
	}
	fmt.Fprintf(&b, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"tok0 tok1\"}]}],\"usage\":{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":%d,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":%d}}}\n\n", input, output, input+output)
	return b.String()
}

// CutAt cuts a body into chunks at the given offsets.
func CutAt(body string, offsets ...int) []string {
	var chunks []string
	prev := 0
	for _, o := range offsets {
		chunks = append(chunks, body[prev:o])
		prev = o
	}
	return append(chunks, body[prev:])
}

// Bytewise cuts a body into one-byte chunks.
func Bytewise(body string) []string {
	chunks := make([]string, len(body))
	for i := range body {
		chunks[i] = body[i : i+1]
	}
	return chunks
}
