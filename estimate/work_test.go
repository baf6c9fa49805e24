package estimate

import (
	"strings"
	"testing"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
)

// Issue 51, point 3: a request could make its estimate cost a hundred
// times a real body's per KiB. The media scan paid a fixed cost (its place
// read around it, its header decoded, an allocation) for each candidate
// after a quote or a comma, however short: a body of 4-byte image
// signatures cost 350-450 µs a KiB in WASM, one of tiny base64 members in
// one object 1.5 ms, where a real agent's body costs 3-8. The estimate's
// work is now bounded for every body, in steps a byte (see work, and
// checkWork for the bound), which FuzzWork holds every input to, and in
// time: TestCostPerKiBIsBounded times the shapes that cost most, natively
// and in WASM.

// hostile are bodies of about size bytes of the shapes that cost the
// estimate most per KiB, each read through the walk or the scan: tiny
// media candidates of each kind, in places media are and are not, that
// pass place.go's reading and not; tiny parts, strings, numbers, keys with
// escapes, deep nesting, lenient JSON, tools.
func hostile(size int) []struct{ name, body string } {
	repeat := func(head, item, tail string) string { return repeatedList(size, head, item, tail) }
	parts := func(item string) string {
		return repeat(`{"model":"gpt-4o","messages":[{"role":"user","content":[`, item, `]}]}`)
	}
	text := func(item string) string {
		return `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat(item, size/len(item)) + `"}]}`
	}
	return []struct{ name, body string }{
		// Signatures where no medium is.
		{"PNG signatures", repeat(`{"model":"m","metadata":[`, `"iVBORw0KGgo"`, `]}`)},
		{"JPEG signatures", repeat(`{"model":"m","metadata":[`, `"/9j/"`, `]}`)},
		{"MP4 signatures", repeat(`{"model":"m","metadata":[`, `"AAAAIGZ0eX"`, `]}`)},
		{"signatures after commas", text(`,iVBORw0KGgo,/9j/`)},
		{"data URL heads", text(`\"data:image/png;base64,iVBORw0KGgo`)},
		{"the first bytes of signatures", text(`SVRUJGTi/A`)},
		{"signatures without a quote", text(`SUQz T2dnUw GkXfo JVBERi0 UklGR R0lGOD VBORw0KGgo GZ0eX /9j/ `)},
		{"quotes", repeat(`{"messages":[{"role":"user","content":"a"}],"x":[`, `""`, `]}`)},
		{"commas", text(`,`)},
		{"data members", parts(`{"data":"iVBORw0KGgo"}`)},
		{"data members in one object", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"` +
			strings.Repeat(`,"data":"iVBORw0KGgo"`, size/21) + `}}]}]}`},
		{"base64 members in metadata", `{"metadata":{"source":{"type":"base64","media_type":"image/png"` + strings.Repeat(`,"x":"iVBORw0KGgo"`, size/19) + `}}}`},
		// Tiny media where media are, which place.go's reading takes.
		{"Anthropic PNGs", parts(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo"}}`)},
		{"Anthropic JPEGs", parts(`{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}}`)},
		{"Anthropic PDFs", parts(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0"}}`)},
		{"MP3s", parts(`{"type":"input_audio","input_audio":{"data":"SUQzBAAAAAAAAA","format":"mp3"}}`)},
		{"WAVs", parts(`{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZFZm10","format":"wav"}}`)},
		{"Gemini MP4s", repeat(`{"contents":[{"parts":[`, `{"inlineData":{"mimeType":"video/mp4","data":"AAAAIGZ0eXA"}}`, `]}]}`)},
		{"Bedrock PNGs", parts(`{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo"}}}`)},
		{"data URLs", parts(`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo"}}`)},
		// JSON the walker reads in Go.
		{"tiny text parts", parts(`{"type":"text","text":"a"}`)},
		{"keys with escapes", parts(`{"t\u0065xt":"a"}`)},
		{"tiny messages", repeat(`{"messages":[`, `{"role":"user","content":"a"}`, `]}`)},
		{"string messages", repeat(`{"messages":[`, `"a"`, `]}`)},
		{"number messages", repeat(`{"messages":[`, `0`, `]}`)},
		{"array messages", repeat(`{"messages":[`, `[]`, `]}`)},
		{"token ids", repeat(`{"prompt":[`, `0`, `]}`)},
		{"tool calls", repeat(`{"messages":[`, `{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}`, `]}`)},
		{"tools", repeat(`{"tools":[`, `{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}`, `]}`)},
		{"models", repeat(`{"messages":[{"role":"user","content":"a"}]`, `"model":"a"`, `}`)},
		{"escapes", text(`\u00e9\"`)},
		{"nesting", `{"metadata":` + repeat("[", strings.Repeat("[", 60)+strings.Repeat("]", 60), "]") + `}`},
		{"nesting too deep", `{"metadata":` + repeat("[", strings.Repeat("[", 990)+strings.Repeat("]", 990), "]") + `}`},
		{"trailing commas", repeat(`{"messages":[`, `{"role":"user","content":"a",}`, `]}`)},
	}
}

// The bound on an estimate's work (see work), for a body of n bytes: a
// step a byte (a step is a JSON token the walker reads in Go, or a call of
// assembly: 100 ns or so in WASM, where the assembly crosses a byte in
// about 1), and at the scan's candidates and checks of media, at most two
// bytes read around them a byte of the body, four of headers decoded, and
// a candidate every scanBytesPerCandidate bytes; allocations: a few, two
// for a medium long enough for its header to need them, one for a tool's
// property name with escapes longer than the walker's scratch.
func checkWork(t testing.TB, name string, body []byte, path string, o Options) {
	t.Helper()
	var w work
	requestWork(body, DialectOf(path), o, &w)
	n := int64(len(body))
	const base = 4096
	if w.steps > n+base {
		t.Fatalf("%s: %d steps for %d bytes", name, w.steps, n)
	}
	m := w.media
	if m.candidates > 3*(scanCandidates+n/scanBytesPerCandidate) || m.around > 2*n+base || m.decoded > 4*n+smallHead*m.candidates+base {
		t.Fatalf("%s: %+v for %d bytes", name, m, n)
	}
	if allocs := testing.AllocsPerRun(1, func() { requestAt(body, path, o) }); allocs > 8+float64(n)/64 {
		t.Fatalf("%s: %v allocations for %d bytes", name, allocs, n)
	}
}

// Every shape that costs most, parsed and too large to be, is within the
// bound on work.
func TestWorkIsBounded(t *testing.T) {
	for _, c := range hostile(64 << 10) {
		for _, o := range []Options{calibrated, {BytesPerToken: 4, MaxBodyBytes: 1 << 20}, {MaxBodyBytes: 16 << 10}} {
			checkWork(t, c.name, []byte(c.body), "/v1/chat/completions", o)
			checkWork(t, c.name, []byte(c.body), "/v1/messages", o)
		}
	}
	checkWork(t, "an agent", []byte(requestbody.Agent(64<<10)), "/v1/chat/completions", calibrated)
}

// FuzzWork holds every body to the bound on an estimate's work (checkWork):
// counted, not timed, so that it cannot fail by chance.
func FuzzWork(f *testing.F) {
	for _, c := range hostile(2 << 10) {
		f.Add([]byte(c.body), "/v1/chat/completions", int64(0), int64(1<<20))
		f.Add([]byte(c.body), "/v1/messages", int64(4), int64(1<<10))
	}
	f.Add([]byte(requestbody.Agent(16<<10)), "/v1/chat/completions", int64(0), int64(1<<20))
	f.Fuzz(func(t *testing.T, body []byte, path string, bytesPerToken, maxBody int64) {
		o := Options{BytesPerToken: bytesPerToken, DefaultCompletionTokens: 100, MaxBodyBytes: maxBody,
			ModelOfLargeBodies: maxBody&1 == 1, ModelOnly: maxBody&4 == 4}
		checkWork(t, "the body", body, path, o)
	})
}

// maxCostRatio is how many times a real agent's body's cost per KiB the
// estimate of any body costs at most (the worst shapes found: see
// TestCostPerKiBIsBounded). Before issue 51, up to 200.
const maxCostRatio = 16

// The shapes that cost most cost at most maxCostRatio times an agent's
// body per KiB, timed one after the other (the fastest of 7 runs each), the
// estimate parsed and not: natively, and in WASM (make test runs this
// package compiled to WASM too), where the assembly of the hot loops runs.
func TestCostPerKiBIsBounded(t *testing.T) {
	agent := []byte(requestbody.Agent(64 << 10))
	perKiB := func(body []byte, o Options) float64 {
		start := time.Now()
		Request(body, DialectOpenAIChat, o)
		return float64(time.Since(start).Nanoseconds()) / (float64(len(body)) / 1024)
	}
	for _, c := range hostile(64 << 10) {
		body := []byte(c.body)
		for _, o := range []Options{calibrated, {MaxBodyBytes: 16 << 10}} {
			// Up to three rounds of 7: a regression is over the bound in
			// each, a burst of load on a shared machine in one.
			real, cost := 1e18, 1e18
			for round := 0; round < 3 && (round == 0 || cost > maxCostRatio*real); round++ {
				for range 7 {
					real = min(real, perKiB(agent, calibrated))
					cost = min(cost, perKiB(body, o))
				}
			}
			t.Logf("%-30s max_body_bytes %7d: %6.0f ns/KiB, %4.1f times an agent's %5.0f", c.name, o.MaxBodyBytes, cost, cost/real, real)
			if cost > maxCostRatio*real {
				t.Errorf("%s (max_body_bytes %d): %.0f ns/KiB, %.1f times an agent's body (%.0f)", c.name, o.MaxBodyBytes, cost, cost/real, real)
			}
		}
	}
}

// repeatedList is head, then item repeated with commas between until the
// whole is at least size bytes, then tail: a JSON list of that size.
func repeatedList(size int, head, item, tail string) string {
	var s strings.Builder
	s.WriteString(head)
	for i := 0; s.Len() < size; i++ {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(item)
	}
	s.WriteString(tail)
	return s.String()
}
