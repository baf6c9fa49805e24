package streamusage

import (
	"fmt"
	"strings"
	"testing"
)

// chatBody returns an openai-python-shaped streaming chat body of about n
// bytes: a system prompt, alternating turns, stream last.
func chatBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"messages": [{"role": "system", "content": "You are a helpful assistant. Answer briefly and cite sources."}`)
	for i := 0; b.Len() < n-120; i++ {
		role := []string{"user", "assistant"}[i%2]
		fmt.Fprintf(&b, `, {"role": %q, "content": "Turn %d: the quick brown fox jumps over the lazy dog, \"quoted\", caf\u00e9 \u65e5\u672c."}`, role, i)
	}
	b.WriteString(`], "model": "gpt-4o-mini", "temperature": 0.7, "stream": true}`)
	return []byte(b.String())
}

func BenchmarkAskForUsage(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		body := chatBody(size)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := AskForUsage(chatPath, body); !ok {
					b.Fatal("not rewritten")
				}
			}
		})
	}
	// A body that is not streamed: what every non-streaming request costs
	// once MayAskForUsage said yes.
	body := []byte(strings.Replace(string(chatBody(4<<10)), `"stream": true`, `"stream": false`, 1))
	b.Run("4KiB-not-streamed", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			AskForUsage(chatPath, body)
		}
	})
	// A body with its stream key repeated: rewritten to one (normalize),
	// which validates the body and reads its top level again.
	duplicate := []byte(strings.Replace(string(chatBody(4<<10)), `"stream": true`, `"stream": false, "stream": true`, 1))
	b.Run("4KiB-duplicate-stream", func(b *testing.B) {
		b.SetBytes(int64(len(duplicate)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := AskForUsage(chatPath, duplicate); !ok {
				b.Fatal("not rewritten")
			}
		}
	})
}

// contentEvent is a typical chat content event, about 300 bytes.
var contentEvent = []byte(`data: {"id":"chatcmpl-BxQ4kZr8mT2vN1pLd9sWcY7hJ3aUe","object":"chat.completion.chunk","created":1753401234,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"content":" today"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"q"}` + "\n\n")

func BenchmarkFilterWrite(b *testing.B) {
	b.Run("content-event", func(b *testing.B) {
		var f Filter
		b.SetBytes(int64(len(contentEvent)))
		b.ReportAllocs()
		for b.Loop() {
			f.Write(contentEvent, false)
		}
	})
	b.Run("content-event-cut-in-two", func(b *testing.B) {
		var f Filter
		x, y := contentEvent[:150], contentEvent[150:]
		b.SetBytes(int64(len(contentEvent)))
		b.ReportAllocs()
		for b.Loop() {
			f.Write(x, false)
			f.Write(y, false)
		}
	})
	in, _ := fixture(b, "\n")
	b.Run("whole-stream-4KiB", func(b *testing.B) {
		var f Filter
		b.SetBytes(int64(len(in)))
		b.ReportAllocs()
		for b.Loop() {
			f.Reset()
			f.Write(in, true)
		}
	})
}
