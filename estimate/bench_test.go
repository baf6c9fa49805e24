package estimate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
)

// chatBody is a chat of short turns with escapes, for the tests.
func chatBody(size int) string { return requestbody.ShortTurns(size) }

// BenchmarkRequest estimates bodies of 1, 16 and 256 KiB of each shape. Run
// it in WASM (make bench) to see what the plugin pays per KiB in a gateway.
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
			b.Run(fmt.Sprintf("%s/%dKiB", shape.name, kib), func(b *testing.B) {
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
