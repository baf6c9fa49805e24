package llm

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// chatRequest is what the mock reads of a chat completions request.
type chatRequest struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chatUsage is the chat completions usage object.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *completionTokensDetails `json:"completion_tokens_details,omitempty"`
}

type completionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// newChatUsage is OpenAI's usage object: cached and reasoning tokens are
// parts of prompt_tokens and completion_tokens; a cache write is not
// reported apart. completion_tokens_details is there only with reasoning
// tokens, so that a body without them is as it was before the mock could
// report them (tests match its end).
func newChatUsage(u Usage) *chatUsage {
	c := &chatUsage{PromptTokens: u.Input, CompletionTokens: u.Output, TotalTokens: u.Total()}
	c.PromptTokensDetails.CachedTokens = u.Cached
	if u.Reasoning > 0 {
		c.CompletionTokensDetails = &completionTokensDetails{ReasoningTokens: u.Reasoning}
	}
	return c
}

type chatMessage struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

// chatCompletion is a whole response or one chunk of a stream. Usage is
// written as null in the chunks of a stream that asked for usage, and left
// out of the chunks of one that did not, as OpenAI does.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   any          `json:"usage,omitempty"`
}

// nullUsage marshals as null where omitempty would drop a nil pointer.
type nullUsage struct{}

func (nullUsage) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func orDefault(model, def string) string {
	if model == "" {
		return def
	}
	return model
}

func chatCompletions(w http.ResponseWriter, r *http.Request, body []byte, p params, id uint64) error {
	var req chatRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	u := p.tokens(max(req.MaxCompletionTokens, req.MaxTokens))
	withUsage := req.StreamOptions.IncludeUsage && !u.None // a stream reports usage only when asked
	base := chatCompletion{ID: fmt.Sprintf("chatcmpl-mock-%d", id), Created: time.Now().Unix(), Model: orDefault(req.Model, "mock-gpt")}
	stop := "stop"
	text := words(p.events)
	if !req.Stream {
		base.Object = "chat.completion"
		base.Choices = []chatChoice{{Message: &chatMessage{Role: "assistant", Content: strings.Join(text, "")}, FinishReason: &stop}}
		if !u.None {
			base.Usage = newChatUsage(u)
		}
		writeJSON(w, r, p, base)
		return nil
	}
	base.Object = "chat.completion.chunk"
	s := startSSE(w, r, p)
	chunk := func(delta *chatMessage, finish *string) chatCompletion {
		c := base
		c.Choices = []chatChoice{{Delta: delta, FinishReason: finish}}
		if withUsage {
			c.Usage = nullUsage{}
		}
		return c
	}
	for i, t := range text {
		delta := &chatMessage{Content: t}
		if i == 0 {
			delta.Role = "assistant"
		}
		if !s.event("", chunk(delta, nil)) {
			return nil
		}
	}
	if !s.event("", chunk(&chatMessage{}, &stop)) {
		return nil
	}
	if withUsage {
		last := base
		last.Choices = []chatChoice{}
		last.Usage = newChatUsage(u)
		if !s.event("", last) {
			return nil
		}
	}
	s.eventData("", "[DONE]")
	return nil
}

// responsesRequest is what the mock reads of a Responses API request.
type responsesRequest struct {
	Model           string `json:"model"`
	Stream          bool   `json:"stream"`
	MaxOutputTokens int    `json:"max_output_tokens"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type outputItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type response struct {
	ID        string       `json:"id"`
	Object    string       `json:"object"`
	CreatedAt int64        `json:"created_at"`
	Status    string       `json:"status"`
	Model     string       `json:"model"`
	Output    []outputItem `json:"output"`
	Usage     any          `json:"usage"`
}

func responses(w http.ResponseWriter, r *http.Request, body []byte, p params, id uint64) error {
	var req responsesRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	u := p.tokens(req.MaxOutputTokens)
	var usage *responsesUsage // none: "usage": null, as in a response in progress
	if !u.None {
		usage = &responsesUsage{InputTokens: u.Input, OutputTokens: u.Output, TotalTokens: u.Total()}
		usage.InputTokensDetails.CachedTokens = u.Cached
		usage.OutputTokensDetails.ReasoningTokens = u.Reasoning
	}
	text := words(p.events)
	itemID := fmt.Sprintf("msg_mock_%d", id)
	item := outputItem{ID: itemID, Type: "message", Status: "completed", Role: "assistant",
		Content: []outputText{{Type: "output_text", Text: strings.Join(text, ""), Annotations: []any{}}}}
	done := response{ID: fmt.Sprintf("resp_mock_%d", id), Object: "response", CreatedAt: time.Now().Unix(),
		Status: "completed", Model: orDefault(req.Model, "mock-gpt"), Output: []outputItem{item}, Usage: usage}
	if !req.Stream {
		writeJSON(w, r, p, done)
		return nil
	}
	started := done
	started.Status, started.Output, started.Usage = "in_progress", []outputItem{}, nil
	pending := item
	pending.Status, pending.Content = "in_progress", []outputText{}
	part := outputText{Type: "output_text", Text: "", Annotations: []any{}}

	s := startSSE(w, r, p)
	seq := 0
	send := func(kind string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = kind, seq
		seq++
		return s.event(kind, fields)
	}
	ok := send("response.created", map[string]any{"response": started}) &&
		send("response.in_progress", map[string]any{"response": started}) &&
		send("response.output_item.added", map[string]any{"output_index": 0, "item": pending}) &&
		send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
	for _, t := range text {
		ok = ok && send("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": t})
	}
	_ = ok &&
		send("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": item.Content[0].Text}) &&
		send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": item.Content[0]}) &&
		send("response.output_item.done", map[string]any{"output_index": 0, "item": item}) &&
		send("response.completed", map[string]any{"response": done})
	return nil
}
