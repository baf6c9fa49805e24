package estimate

import (
	"strings"
	"testing"
)

// Issue 40: opaque reasoning carried in the history counts at
// opaqueBytesPerToken (0.2 tokens a byte), its readable parts as text, in
// each provider's shape; a message or part of the plain shape that carries
// it is read by the walker, not skipped by the fast path.
func TestOpaqueReasoningIsCounted(t *testing.T) {
	sig := strings.Repeat("EqQBCkgIARAB", 100) // 1,200 bytes of base64: 240 tokens
	runCases(t, opts, []requestCase{{
		name: "Anthropic: a thinking block's text and signature, a redacted block's data",
		body: `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"Hi"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"Let me see.","signature":"` + sig + `"},` +
			`{"type":"redacted_thinking","data":"` + sig + `"},{"type":"text","text":"Done."}]}]}`,
		want: Estimate{Prompt: 2 + 11 + 5 + 2*240 + claudePerRequest + 2*claudePerMessage, Completion: 10, Model: "claude-sonnet-4-5", Parsed: true},
	}, {
		name: "Gemini: a part's thought signature",
		body: `{"contents":[{"role":"user","parts":[{"text":"Hi"}]},{"role":"model","parts":[{"text":"Done.","thoughtSignature":"` + sig + `"}]}]}`,
		want: Estimate{Prompt: 2 + 5 + 240, Completion: 4096, Parsed: true},
	}, {
		name: "Gemini's snake case",
		body: `{"contents":[{"parts":[{"thought_signature":"` + sig + `","text":"Done."}]}]}`,
		want: Estimate{Prompt: 5 + 240, Completion: 4096, Parsed: true},
	}, {
		name: "OpenAI Responses: a reasoning item's summary and encrypted content",
		body: `{"model":"o4-mini","input":[{"role":"user","content":"Hi"},{"type":"reasoning","id":"rs_1",` +
			`"summary":[{"type":"summary_text","text":"Thought."}],"encrypted_content":"` + sig + `"}]}`,
		want: Estimate{Prompt: 2 + 8 + 240, Completion: 4096, Model: "o4-mini", Parsed: true},
	}})
}
