package llm

import (
	"encoding/json"
	"net/http"
)

// geminiRequest is what the mock reads of a generateContent request.
type geminiRequest struct {
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// usageMetadata is Gemini's usage object; promptTokenCount includes the
// cached tokens; thoughtsTokenCount (reasoning) is beside
// candidatesTokenCount, both in totalTokenCount. In a stream every chunk
// carries the usage so far, the thoughts whole from the first (a model
// thinks before it answers).
type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	TotalTokenCount         int `json:"totalTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount,omitempty"`
}

type geminiPart struct {
	Text string `json:"text"`
}

type geminiContent struct {
	Parts []geminiPart `json:"parts"`
	Role  string       `json:"role"`
}

type candidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type generateResponse struct {
	Candidates    []candidate    `json:"candidates"`
	UsageMetadata *usageMetadata `json:"usageMetadata,omitempty"` // nil: x-mock-usage none
	ModelVersion  string         `json:"modelVersion"`
}

// geminiGenerate answers generateContent (stream false) or
// streamGenerateContent: server-sent events with ?alt=sse, else one JSON
// array written element by element, as Gemini does.
func geminiGenerate(model string, streamed bool) answerFunc {
	return func(w http.ResponseWriter, r *http.Request, body []byte, p params, _ uint64) error {
		var req geminiRequest
		if err := decode(body, &req); err != nil {
			return err
		}
		u := p.tokens(req.GenerationConfig.MaxOutputTokens)
		text := words(p.events)
		answer := u.Output - u.Reasoning // candidatesTokenCount leaves the thoughts out
		chunk := func(parts []geminiPart, candidates int, last bool) generateResponse {
			c := candidate{Content: geminiContent{Parts: parts, Role: "model"}}
			if last {
				c.FinishReason = "STOP"
			}
			r := generateResponse{Candidates: []candidate{c}, ModelVersion: model}
			if !u.None {
				r.UsageMetadata = &usageMetadata{PromptTokenCount: u.Input, CandidatesTokenCount: candidates,
					TotalTokenCount: u.Input + u.Reasoning + candidates, CachedContentTokenCount: u.Cached,
					ThoughtsTokenCount: u.Reasoning}
			}
			return r
		}
		if !streamed {
			parts := make([]geminiPart, len(text))
			for i, t := range text {
				parts[i] = geminiPart{Text: t}
			}
			writeJSON(w, r, p, chunk(parts, answer, true))
			return nil
		}
		sse := r.URL.Query().Get("alt") == "sse"
		var s *stream
		if sse {
			s = startSSE(w, r, p)
			s.sep = "\r\n\r\n"
		} else {
			s = startStream(w, r, p, "application/json")
		}
		for i, t := range text {
			c := chunk([]geminiPart{{Text: t}}, share(answer, i+1, len(text)), i == len(text)-1)
			if sse {
				if !s.event("", c) {
					return nil
				}
				continue
			}
			raw, err := json.Marshal(c)
			if err != nil {
				panic(err) // the mock's own types always marshal
			}
			prefix := ",\r\n"
			if i == 0 {
				prefix = "["
			}
			if !s.write(prefix + string(raw)) {
				return nil
			}
		}
		if !sse {
			s.write("]")
		}
		return nil
	}
}
