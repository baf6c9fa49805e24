package llm

import (
	"fmt"
	"net/http"
	"strings"
)

// messagesRequest is what the mock reads of an Anthropic Messages request.
type messagesRequest struct {
	Model     string `json:"model"`
	Stream    bool   `json:"stream"`
	MaxTokens int    `json:"max_tokens"`
}

// anthropicUsage is the Messages usage object. Anthropic's input_tokens
// excludes the tokens read from or written to the prompt cache; it reports
// no reasoning apart (thinking is part of output_tokens).
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type message struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []textBlock     `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *anthropicUsage `json:"usage,omitempty"`
}

func messages(w http.ResponseWriter, r *http.Request, body []byte, p params, id uint64) error {
	var req messagesRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	u := p.tokens(req.MaxTokens)
	var usage *anthropicUsage // none: no usage object, at the start or the end
	if !u.None {
		usage = &anthropicUsage{InputTokens: u.Input - u.Cached - u.CacheWrite, CacheCreationInputTokens: u.CacheWrite,
			CacheReadInputTokens: u.Cached, OutputTokens: u.Output}
	}
	text := words(p.events)
	endTurn := "end_turn"
	msg := message{ID: fmt.Sprintf("msg_mock_%d", id), Type: "message", Role: "assistant",
		Model: orDefault(req.Model, "mock-claude"), Content: []textBlock{{Type: "text", Text: strings.Join(text, "")}},
		StopReason: &endTurn, Usage: usage}
	if !req.Stream {
		writeJSON(w, r, p, msg)
		return nil
	}
	// The stream's first usage carries the input and one output token; the
	// message_delta at the end carries the output so far (cumulative).
	start := msg
	start.Content, start.StopReason = []textBlock{}, nil
	if usage != nil {
		first := *usage
		first.OutputTokens = 1
		start.Usage = &first
	}

	s := startSSE(w, r, p)
	send := func(kind string, fields map[string]any) bool {
		fields["type"] = kind
		return s.event(kind, fields)
	}
	ok := send("message_start", map[string]any{"message": start}) &&
		send("content_block_start", map[string]any{"index": 0, "content_block": textBlock{Type: "text", Text: ""}}) &&
		send("ping", map[string]any{})
	for _, t := range text {
		ok = ok && send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": t}})
	}
	delta := map[string]any{"delta": map[string]any{"stop_reason": endTurn, "stop_sequence": nil}}
	if usage != nil {
		delta["usage"] = map[string]any{"output_tokens": u.Output}
	}
	_ = ok &&
		send("content_block_stop", map[string]any{"index": 0}) &&
		send("message_delta", delta) &&
		send("message_stop", map[string]any{})
	return nil
}
