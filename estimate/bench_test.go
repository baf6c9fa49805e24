package estimate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
)

// chatBody is a chat of short turns with escapes, for the tests.
func chatBody(size int) string { return requestbody.ShortTurns(size) }

// counts are the two counts of prompt text: bytes over bytes_per_token, and
// the calibrated count (count.go), the default.
var counts = []struct {
	name string
	o    Options
}{{"bytes", Options{BytesPerToken: 4, DefaultCompletionTokens: 4096, MaxBodyBytes: 1 << 20}}, {"calibrated", calibrated}}

// BenchmarkRequest estimates bodies of 1, 16 and 256 KiB of each shape, with
// each count of text. Run it in WASM (make bench) to see what the plugin
// pays per KiB in a gateway.
func BenchmarkRequest(b *testing.B) {
	shapes := []struct {
		name  string
		build func(int) string
	}{{"conversation", requestbody.Conversation}, {"short-turns", requestbody.ShortTurns}, {"dense", requestbody.Dense}, {"agent", requestbody.Agent}}
	for _, shape := range shapes {
		for _, kib := range []int{1, 16, 256} {
			if shape.name == "agent" && kib == 1 {
				continue // its tool definitions alone are 9 KiB
			}
			body := []byte(shape.build(kib << 10))
			for _, count := range counts {
				b.Run(fmt.Sprintf("%s/%dKiB/%s", shape.name, kib, count.name), func(b *testing.B) {
					if e := Request(body, DialectOther, count.o); !e.Parsed || e.Prompt == 0 {
						b.Fatalf("%+v", e)
					}
					b.SetBytes(int64(len(body)))
					b.ReportAllocs()
					for b.Loop() {
						Request(body, DialectOther, count.o)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(body))/1024), "ns/KiB")
				})
			}
		}
	}
}

// BenchmarkScanString reads 256 KiB of string content with a two-byte
// escape every 60 bytes, the loop that most of a large body goes through.
func BenchmarkScanString(b *testing.B) {
	s := strings.Repeat(`The quick brown fox jumps over the lazy dog, then naps.\n`, 256<<10/58) + `"`
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if j, _ := scanString(s, 0, &simpleEscape); j != len(s)-1 {
			b.Fatal(j)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(s))/1024), "ns/KiB")
}

// BenchmarkTextUnits weighs 256 KiB of English prose with a two-byte escape
// every 60 bytes (the calibrated count of count.go).
func BenchmarkTextUnits(b *testing.B) {
	s := strings.Repeat(`The quick brown fox jumps over the lazy dog, then naps.\n`, 256<<10/58)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		unitsOfBench(s, true)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(s))/1024), "ns/KiB")
}

// BenchmarkTextUnitsPlain weighs 256 KiB of English prose without escapes.
func BenchmarkTextUnitsPlain(b *testing.B) {
	s := strings.Repeat(`The quick brown fox jumps over the lazy dog, then naps. `, 256<<10/57)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		unitsOfBench(s, false)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(s))/1024), "ns/KiB")
}

// unitsOfBench weighs s as one span.
func unitsOfBench(s string, escapes bool) int64 {
	spans := textSpans{n: 1, at: [maxTextSpans][2]int64{{0, int64(len(s))}}}
	if escapes {
		spans.escaped = 1
	}
	return spansUnits(s, &spans)
}

// BenchmarkLargeBody estimates bodies of 2 MiB, over MaxBodyBytes: their
// size less their inline media, which the scan (mediascan.go) finds. Shapes:
// one image in a data URL; a conversation (no media); short messages
// that each start with an image's signature, and Anthropic base64 sources
// of a few bytes each (a candidate every few dozen bytes: the scan's cost
// per candidate).
func BenchmarkLargeBody(b *testing.B) {
	const size = 2 << 20
	image := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAABAAAAAQACAAAAAB` + strings.Repeat("A", size) + `"}}]}]}`
	repeat := func(head, item, tail string) string { return repeatedList(size, head, item, tail) }
	signatures := repeat(`{"messages":[`, `{"role":"user","content":"iVBORw0KGgo then prose, /9j/ and more"}`, `]}`)
	sources := repeat(`{"messages":[{"role":"user","content":[`, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo"}}`, `]}]}`)
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 4096, MaxBodyBytes: 1 << 20}
	for _, c := range []struct{ name, body string }{
		{"image", image}, {"conversation", requestbody.Conversation(size)}, {"signatures", signatures}, {"sources", sources},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := []byte(c.body)
			if e := Request(body, DialectOpenAIChat, o); e.Parsed {
				b.Fatalf("%+v", e)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				Request(body, DialectOpenAIChat, o)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(body))/1024), "ns/KiB")
		})
	}
}
