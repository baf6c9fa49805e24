package estimate

import (
	"fmt"
	"strings"
	"testing"
)

// chatBody returns an OpenAI chat/completions body of about size bytes: a
// system prompt, tools, and a conversation whose messages have newlines,
// quotes and some non-ASCII text, as real prompts do.
func chatBody(size int) string {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","stream":true,"max_tokens":1024,"tools":[{"type":"function","function":{"name":"search","description":"Search the knowledge base.","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}],"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a helpful assistant.\nAnswer concisely and cite your sources."}`)
	const (
		question = `Could you explain how the \"token bucket\" algorithm works (na\u00efve version), and why it is used for rate limiting?\nPlease give an example.`
		answer   = `A token bucket holds up to N tokens and refills at a steady rate; each request takes tokens, and a request that finds too few waits or is refused.\n\nExample: with N = 10 and 1 token/s, a burst of 10 passes at once, then one per second — café au lait for everyone.`
	)
	for i := 0; b.Len() < size-len(answer)-64; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"text","text":"%s"}]}`, question)
		} else {
			fmt.Fprintf(&b, `,{"role":"assistant","content":"%s"}`, answer)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}

// BenchmarkRequest estimates chat bodies of 1, 16 and 256 KiB.
func BenchmarkRequest(b *testing.B) {
	for _, kib := range []int{1, 16, 256} {
		body := []byte(chatBody(kib << 10))
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			if e := Request(body, "", opts); !e.Parsed || e.Prompt == 0 {
				b.Fatalf("%+v", e)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				Request(body, "", opts)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(body))/1024), "ns/KiB")
		})
	}
}
