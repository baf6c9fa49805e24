// Package llm is a mock LLM server that speaks enough of the OpenAI chat
// completions and Responses APIs, Anthropic Messages and Gemini
// generateContent for the token rate limiter: every answer reports a token
// usage in the provider's own shape, as a stream of server-sent events or as
// one JSON body.
//
// The usage is chosen by the caller, so tests can check what was charged:
//
//	x-mock-usage: <input>,<output>[,<cached>[,<cache_write>[,<reasoning>]]]
//	                     exact counts; cached and cache_write are the parts of
//	                     input read from and written to a prompt cache,
//	                     reasoning the part of output spent reasoning
//	x-mock-usage: none   no usage reported at all
//	x-mock-events: N     content events (default 8, 1..10000)
//	x-mock-delay-ms: D   pause before each event after the first (default 0,
//	                     at most 2000)
//
// Without x-mock-usage, input is the request body's size in bytes (decoded
// from its Content-Encoding) divided by 4 and output is the request's output
// cap (max_tokens, max_output_tokens, generationConfig.maxOutputTokens…) or
// 16. Whatever the shape, a response costs input + output tokens: the parts
// are reported in each provider's way where it has a field for them, and
// are in input or output otherwise. Cached tokens: Anthropic's input_tokens
// excludes them (cache_read_input_tokens), the others include them. A
// cache write: Anthropic's cache_creation_input_tokens, also outside its
// input_tokens; the others report none. Reasoning: OpenAI's
// completion_tokens_details.reasoning_tokens and Responses'
// output_tokens_details.reasoning_tokens, parts of the output; Gemini's
// thoughtsTokenCount, beside candidatesTokenCount; Anthropic reports none.
// With none, a response has no usage object (Responses: "usage": null),
// and a chat stream no usage chunk even when stream_options asks for one.
//
// A request body compressed with Content-Encoding gzip or deflate is read
// decoded, as the providers' APIs read it (encoding.go).
//
// Every event is flushed as soon as it is written, and a stream stops as soon
// as the client goes away.
package llm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Options configure a mock.
type Options struct {
	// Observe, when set, is called with every request before it is
	// answered (its body not read yet). It must not keep the request.
	Observe func(*http.Request)
}

// maxBodyBytes bounds a request body.
const maxBodyBytes = 8 << 20

// New returns the mock's handler.
func New(opts Options) http.Handler {
	return &server{opts: opts}
}

type server struct {
	opts Options
	ids  atomic.Uint64 // numbers the response ids
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Observe != nil {
		s.opts.Observe(r)
	}
	answer, ok := s.route(r)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no mock for %s %s", r.Method, r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", r.URL.Path+" takes POST")
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "reading the request body: "+err.Error())
		return
	}
	body, bad := decodeBody(r.Header.Values("Content-Encoding"), raw)
	if bad != nil {
		if bad.status == http.StatusUnsupportedMediaType {
			w.Header().Set("Accept-Encoding", acceptedEncodings)
		}
		writeError(w, bad.status, "invalid_request_error", bad.msg)
		return
	}
	p, err := readParams(r.Header, len(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if err := answer(w, r, body, p, s.ids.Add(1)); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
	}
}

// answerFunc answers one request of an API shape; an error (a malformed
// request) is returned before anything is written.
type answerFunc func(w http.ResponseWriter, r *http.Request, body []byte, p params, id uint64) error

// route picks the API shape of a request by its path.
func (s *server) route(r *http.Request) (answerFunc, bool) {
	switch path := r.URL.Path; {
	case path == "/v1/chat/completions":
		return chatCompletions, true
	case path == "/v1/responses":
		return responses, true
	case path == "/v1/messages":
		return messages, true
	case strings.HasPrefix(path, "/v1beta/models/") || strings.HasPrefix(path, "/v1/models/"): // Gemini's two API versions
		_, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/models/")
		model, action, ok := strings.Cut(rest, ":")
		if !ok || model == "" {
			return nil, false
		}
		switch action {
		case "generateContent":
			return geminiGenerate(model, false), true
		case "streamGenerateContent":
			return geminiGenerate(model, true), true
		}
	}
	return nil, false
}

// decode reads a JSON request body into v; an empty body is an empty object.
func decode(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the request body is not the JSON this API takes: %v", err)
	}
	return nil
}

// writeError answers an error in the OpenAI error shape, which the other
// providers' clients also render readably.
func writeError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"type": kind, "message": msg}})
}

// writeJSON answers one JSON body, after the time the events would have taken.
func writeJSON(w http.ResponseWriter, r *http.Request, p params, v any) {
	if !p.pause(r, p.events) {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// words is the generated text: one word per content event.
func words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tok%d ", i)
	}
	return out
}

// share is the part of total that the first i of n events have produced,
// for providers whose usage grows along the stream.
func share(total, i, n int) int {
	return total * i / n
}
