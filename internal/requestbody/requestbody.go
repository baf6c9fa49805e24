// Package requestbody builds OpenAI chat/completions request bodies of a
// given size and shape, for the benchmarks of the reservation path. How much
// of a body is long text and how much is JSON structure decides what reading
// it costs, so the benchmarks measure each shape apart.
package requestbody

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

const header = `{"model":"gpt-4o","stream":true,"max_tokens":1024,"tools":[{"type":"function","function":{"name":"search","description":"Search the knowledge base.","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}],"messages":[`

// Conversation is a long chat, the kind that makes bodies of tens of KiB: a
// system prompt of about 1.5 KiB (a quarter of smaller bodies), then questions of a few hundred bytes and
// answers of one to three KiB, written as prose in paragraphs (escaped
// newlines), with some quoted words and non-ASCII letters.
func Conversation(size int) string {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, `{"role":"system","content":"%s"}`, prose(r, min(1500, size/4)))
	for i := 0; b.Len() < size-64; i++ {
		n := 200 + r.IntN(400)
		role := "user"
		if i%2 == 1 {
			n, role = 1000+r.IntN(2000), "assistant"
		}
		fmt.Fprintf(&b, `,{"role":"%s","content":"%s"}`, role, prose(r, min(n, max(size-b.Len()-64, 16))))
	}
	b.WriteString(`]}`)
	return b.String()
}

// ShortTurns is a chat of short turns (about 150 and 250 bytes), the user's
// as a content-part array, every one with escapes: three times the JSON
// structure of a Conversation per KiB.
func ShortTurns(size int) string {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString(`{"role":"system","content":"You are a helpful assistant.\nAnswer concisely and cite your sources."}`)
	const (
		question = `Could you explain how the \"token bucket\" algorithm works (na\u00efve version), and why it is used for rate limiting?\nPlease give an example.`
		answer   = `A token bucket holds up to N tokens and refills at a steady rate; each request takes tokens, and a request that finds too few waits or is refused.\n\nExample: with N = 10 and 1 token/s, a burst of 10 passes at once, then one per second — café au lait for everyone.`
	)
	for i := 0; b.Len() < size-150; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"text","text":"%s"}]}`, question)
		} else {
			fmt.Fprintf(&b, `,{"role":"assistant","content":"%s"}`, answer)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}

// Dense is the worst case for a reader: messages of a few words, so that
// nearly every byte is JSON structure, keys or short values.
func Dense(size int) string {
	var b strings.Builder
	b.WriteString(header)
	for i := 0; b.Len() < size-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"message %d: ok"}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// Agent is an agent's request: twenty tool definitions with JSON schemas
// (about 9 KiB), then turns of a question, a tool call (an assistant
// message with tool_calls, which is not a plain message), the tool's
// result (about 1 KiB of text) and an answer. Its tool definitions and tool
// calls count by their raw JSON, read by the walker (not the fast path).
func Agent(size int) string {
	r := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","stream":true,"max_tokens":4096,"tool_choice":"auto","tools":[`)
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"tool_%d","description":"%s","parameters":{"type":"object",`+
			`"properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer","minimum":1,"maximum":100,"default":10},`+
			`"filters":{"type":"array","items":{"type":"object","properties":{"field":{"type":"string","enum":["date","author","kind"]},"value":{"type":"string"}},"required":["field","value"]}},`+
			`"exact":{"type":"boolean","default":false}},"required":["query"],"additionalProperties":false}}}`, i, prose(r, 80))
	}
	b.WriteString(`],"messages":[{"role":"system","content":"You are an agent. Use the tools."}`)
	for i := 0; b.Len() < size-64; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `,{"role":"user","content":"%s"}`, prose(r, 100+r.IntN(200)))
		case 1:
			fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"tool_%d","arguments":"{\"query\":\"rate limits\",\"limit\":5,\"filters\":[{\"field\":\"kind\",\"value\":\"doc\"}]}"}}]}`, i, i%20)
		case 2:
			fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"call_%d","content":"%s"}`, i-1, prose(r, min(500+r.IntN(1000), max(size-b.Len()-64, 16))))
		default:
			fmt.Fprintf(&b, `,{"role":"assistant","content":"%s"}`, prose(r, min(200+r.IntN(400), max(size-b.Len()-64, 16))))
		}
	}
	b.WriteString(`]}`)
	return b.String()
}

var words = strings.Fields(`the a token limit request response budget window minute gateway model
	stream usage counter replica cluster reservation estimate prompt answer because however which
	would could should every each across within before after while during naïve café résumé
	function value error client server latency throughput capacity provider`)

// prose returns about n bytes of sentences and paragraphs, JSON-escaped.
func prose(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		switch k := r.IntN(40); {
		case k == 0 && b.Len() > 0:
			b.WriteString(`.\n\n`)
		case k == 1:
			b.WriteString(`\"` + words[r.IntN(len(words))] + `\" `)
		case k < 4 && b.Len() > 0:
			b.WriteString(`, `)
		default:
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
	}
	return b.String()
}
