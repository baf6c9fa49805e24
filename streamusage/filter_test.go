package streamusage

import (
	"bytes"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixture returns the OpenAI stream with include_usage and the same stream
// without its usage event, with line ends replaced by eol.
func fixture(t testing.TB, eol string) (in, want []byte) {
	in, want = readFile(t, "chat_stream.sse"), readFile(t, "chat_stream_without_usage.sse")
	// The two differ by exactly the usage event.
	usage := `data: {"id":"chatcmpl-BxQ4kZr8mT2vN1pLd9sWcY7hJ3aUe","object":"chat.completion.chunk","created":1753401234,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[],"usage":{`
	i := bytes.Index(in, []byte(usage))
	j := i + bytes.Index(in[i:], []byte("\n\n")) + 2
	if i < 0 || !bytes.Equal(append(bytes.Clone(in[:i]), in[j:]...), want) {
		t.Fatal("fixtures do not differ by exactly the usage event")
	}
	in = bytes.ReplaceAll(in, []byte("\n"), []byte(eol))
	want = bytes.ReplaceAll(want, []byte("\n"), []byte(eol))
	return in, want
}

var lineEnds = map[string]string{"LF": "\n", "CRLF": "\r\n", "CR": "\r"}

// feed writes chunks through a fresh Filter and returns the concatenated
// output.
func feed(f *Filter, chunks [][]byte) []byte {
	var out []byte
	for i, c := range chunks {
		out = append(out, f.Write(c, i == len(chunks)-1)...)
	}
	return out
}

// randomCuts cuts b into up to maxCuts+1 chunks at random places, empty
// chunks included.
func randomCuts(r *rand.Rand, b []byte, maxCuts int) [][]byte {
	cuts := make([]int, r.IntN(maxCuts+1))
	for i := range cuts {
		cuts[i] = r.IntN(len(b) + 1)
	}
	cuts = append(cuts, 0, len(b))
	sortInts(cuts)
	var chunks [][]byte
	for i := 1; i < len(cuts); i++ {
		chunks = append(chunks, b[cuts[i-1]:cuts[i]])
	}
	return chunks
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func bytewise(b []byte) [][]byte {
	chunks := make([][]byte, len(b))
	for i := range b {
		chunks[i] = b[i : i+1]
	}
	return chunks
}

func TestFilterFixture(t *testing.T) {
	for name, eol := range lineEnds {
		t.Run(name, func(t *testing.T) {
			in, want := fixture(t, eol)

			var f Filter
			if got := feed(&f, [][]byte{in}); !bytes.Equal(got, want) {
				t.Fatalf("whole:\n got %q\nwant %q", got, want)
			}
			if f.Dropped() != 1 {
				t.Fatalf("Dropped = %d", f.Dropped())
			}

			f.Reset()
			if got := feed(&f, bytewise(in)); !bytes.Equal(got, want) {
				t.Fatalf("byte by byte:\n got %q\nwant %q", got, want)
			}

			r := newRand(7)
			for i := range 500 {
				f.Reset()
				chunks := randomCuts(r, in, 1+i%40)
				if got := feed(&f, chunks); !bytes.Equal(got, want) {
					t.Fatalf("cuts %d:\n got %q\nwant %q", len(chunks), got, want)
				}
				if f.Dropped() != 1 {
					t.Fatalf("Dropped = %d", f.Dropped())
				}
			}

			// One chunk per event, as a server flushes them.
			f.Reset()
			sep := []byte(eol + eol)
			var events [][]byte
			for rest := in; len(rest) > 0; {
				n := bytes.Index(rest, sep) + len(sep)
				events = append(events, rest[:n])
				rest = rest[n:]
			}
			if got := feed(&f, events); !bytes.Equal(got, want) {
				t.Fatalf("per event:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// Without a usage event every chunk that ends an event comes back as
// itself.
func TestFilterNoUsagePassesUnchanged(t *testing.T) {
	for name, eol := range lineEnds {
		_, in := fixture(t, eol)
		var f Filter
		got := f.Write(in, false)
		if !bytes.Equal(got, in) {
			t.Fatalf("%s: changed", name)
		}
		if eol != "\r" && &got[0] != &in[0] {
			t.Fatalf("%s: copied", name)
		}
		r := newRand(3)
		for range 200 {
			f.Reset()
			if got := feed(&f, randomCuts(r, in, 30)); !bytes.Equal(got, in) {
				t.Fatalf("%s: changed when cut", name)
			}
		}
	}
}

func TestFilterEvents(t *testing.T) {
	const usage = `{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
	tests := []struct {
		name string
		in   string
		drop bool
	}{
		{"usage chunk", "data: " + usage + "\n\n", true},
		{"no space after colon", "data:" + usage + "\n\n", true},
		{"spaces around empty choices", `data: {"choices" : [ ], "usage": {"total_tokens":3}}` + "\n\n", true},
		{"python json.dumps spacing", `data: {"id": "x", "choices": [], "usage": {"prompt_tokens": 1}}` + "\n\n", true},
		{"usage first", `data: {"usage":{},"choices":[]}` + "\n\n", true},
		{"comment and event lines", ": note\nevent: message\nid: 7\ndata: " + usage + "\n\n", true},
		{"data split over lines", "data: {\"id\":\"x\",\ndata: \"choices\":[],\ndata: \"usage\":{\"total_tokens\":3}}\n\n", true},
		{"crlf", "data: " + usage + "\r\n\r\n", true},
		// Read by gjson, not eachMember: an escaped key, nesting deeper
		// than eachMember crosses.
		{"escaped key", `data: {"choices":[],"us\u0061ge":{"total_tokens":3}}` + "\n\n", true},
		{"deep usage", `data: {"choices":[],"usage":{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}` + "\n\n", true},
		{"cr", "data: " + usage + "\r\r", true},

		{"content chunk", `data: {"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n", false},
		{"usage null", `data: {"choices":[],"usage":null}` + "\n\n", false},
		{"no usage", `data: {"choices":[]}` + "\n\n", false},
		{"usage not object", `data: {"choices":[],"usage":3}` + "\n\n", false},
		{"azure prompt filter results", `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}` + "\n\n", false},
		{"choices not empty with usage", `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"total_tokens":3}}` + "\n\n", false},
		{"nested only", `data: {"choices":[{"x":{"choices":[],"usage":{}}}]}` + "\n\n", false},
		{"nested usage object", `data: {"x":{"choices":[],"usage":{}}}` + "\n\n", false},
		{"quoted in content", `data: {"choices":[{"delta":{"content":"{\"choices\":[],\"usage\":{}}"}}],"usage":null}` + "\n\n", false},
		{"quoted in content, usage null", `data: {"choices":[{"delta":{"content":"\"choices\": [] and \"usage\":{\"total_tokens\":1}"}}]}` + "\n\n", false},
		{"duplicate choices", `data: {"choices":[],"usage":{},"choices":[{"delta":{"content":"x"}}]}` + "\n\n", false},
		{"duplicate usage", `data: {"choices":[],"usage":{},"usage":null}` + "\n\n", false},
		{"invalid JSON", `data: {"choices":[],"usage":{}` + "\n\n", false},
		{"invalid JSON, escaped key", `data: {"choices":[],"us\u0061ge":{}` + "\n\n", false},
		{"invalid deep usage", `data: {"choices":[],"usage":{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 69) + `}}` + "\n\n", false},
		{"escaped duplicate usage", `data: {"choices":[],"usage":{},"\u0075sage":{}}` + "\n\n", false},
		{"not data", `: {"choices":[],"usage":{}}` + "\n\n", false},
		{"other field", `error: {"choices":[],"usage":{}}` + "\n\n", false},
		{"datax field", `datax: {"choices":[],"usage":{}}` + "\n\n", false},
		{"done", "data: [DONE]\n\n", false},
		{"keep-alive", ": keep-alive\n\n", false},
		{"array data", `data: [{"choices":[],"usage":{}}]` + "\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte("data: first\n\n" + tt.in + "data: [DONE]\n\n")
			want := in
			if tt.drop {
				want = []byte("data: first\n\n" + "data: [DONE]\n\n")
			}
			var f Filter
			if got := feed(&f, [][]byte{in}); !bytes.Equal(got, want) {
				t.Fatalf("whole:\n got %q\nwant %q", got, want)
			}
			f.Reset()
			if got := feed(&f, bytewise(in)); !bytes.Equal(got, want) {
				t.Fatalf("byte by byte:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// At the end of the body what is held is passed on as it is, even a usage
// chunk whose blank line never came (clients discard such an event).
func TestFilterLastFlushes(t *testing.T) {
	for _, in := range []string{
		"data: a\n\ndata: {\"choices\":[],\"usage\":{}}",
		"data: a\n\ndata: {\"choices\":[],\"usage\":{}}\n",
		"data: a\n\ndata: {\"cho",
		"data: a\n\ndata: {\"choices\":[],\"usage\":{}}\r\n",
	} {
		var f Filter
		if got := feed(&f, [][]byte{[]byte(in)}); string(got) != in {
			t.Errorf("whole %q: got %q", in, got)
		}
		f.Reset()
		if got := feed(&f, bytewise([]byte(in))); string(got) != in {
			t.Errorf("bytewise %q: got %q", in, got)
		}
		// Held back until the end.
		f.Reset()
		if got := f.Write([]byte(in), false); string(got) != "data: a\n\n" {
			t.Errorf("%q before last: got %q", in, got)
		}
		if got := f.Write(nil, true); string(got) != in[len("data: a\n\n"):] {
			t.Errorf("%q at last: got %q", in, got)
		}
	}

	// A "\r" ends a line at once: this usage chunk is whole, and goes.
	var f Filter
	if got := f.Write([]byte("data: a\n\ndata: {\"choices\":[],\"usage\":{}}\r\n\r"), true); string(got) != "data: a\n\n" {
		t.Errorf("usage chunk ending in CR: got %q", got)
	}
}

// An event ending in "\r" at the end of a chunk may be followed by the
// "\n" of its "\r\n": that byte goes (or stays) with the event.
func TestFilterCRLFCutAfterCR(t *testing.T) {
	usage := "data: {\"choices\":[],\"usage\":{}}\r\n\r\n"
	in := "data: a\r\n\r\n" + usage + "data: [DONE]\r\n\r\n"
	want := "data: a\r\n\r\n" + "data: [DONE]\r\n\r\n"
	for cut := range len(in) + 1 {
		for cut2 := cut; cut2 <= len(in); cut2++ {
			var f Filter
			got := feed(&f, [][]byte{[]byte(in[:cut]), []byte(in[cut:cut2]), []byte(in[cut2:])})
			if string(got) != want {
				t.Fatalf("cuts %d,%d: got %q", cut, cut2, got)
			}
		}
	}
}

func TestFilterCap(t *testing.T) {
	big := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", MaxHeldBytes) + "\"}}]}\n\n"
	usage := "data: {\"choices\":[],\"usage\":{}}\n\n"
	in := []byte("data: a\n\n" + usage + big + usage + "data: [DONE]\n\n")
	// When more than MaxHeldBytes of the big event had to be held, the
	// filter gives up and the second usage chunk passes; when the big event
	// came in pieces that never needed that, both go.
	givenUp := []byte("data: a\n\n" + big + usage + "data: [DONE]\n\n")
	filtered := []byte("data: a\n\n" + big + "data: [DONE]\n\n")
	r := newRand(11)
	for i := range 30 {
		chunks := [][]byte{in}
		if i > 0 {
			chunks = randomCuts(r, in, 30)
		}
		var f Filter
		got := feed(&f, chunks)
		want := filtered
		if f.passing {
			want = givenUp
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("cuts %d (passing %v): output of %d bytes differs", len(chunks), f.passing, len(got))
		}
	}

	// Byte by byte the cap is reached for sure.
	var f Filter
	if got := feed(&f, bytewise(in)); !bytes.Equal(got, givenUp) {
		t.Fatal("byte by byte: differs")
	}
	if !f.passing || len(f.held) != 0 || f.Dropped() != 1 {
		t.Fatalf("byte by byte: passing %v, held %d, dropped %d", f.passing, len(f.held), f.Dropped())
	}
	f.Reset()
	if f.passing {
		t.Fatal("Reset left passing")
	}

	// One chunk of more than the cap without an event end gives up at once.
	f.Reset()
	head := in[:len("data: a\n\n")+len(usage)+MaxHeldBytes+10]
	if got := f.Write(head, false); !bytes.Equal(got, []byte("data: a\n\n"+big[:MaxHeldBytes+10])) || !f.passing {
		t.Fatalf("oversized chunk: passing %v, %d bytes out", f.passing, len(got))
	}
}

// A Filter can be reused after last, or after Reset mid-stream.
func TestFilterReuse(t *testing.T) {
	in, want := fixture(t, "\n")
	var f Filter
	f.Write(in[:100], false) // abandoned mid-event
	f.Reset()
	for range 3 {
		if got := feed(&f, randomCuts(newRand(5), in, 10)); !bytes.Equal(got, want) {
			t.Fatal("reuse differs")
		}
	}
	if f.Dropped() != 3 {
		t.Fatalf("Dropped = %d", f.Dropped())
	}
}

// unit is a piece of a generated stream: an event with its blank line, or
// a stray blank line.
type unit struct {
	b     string
	usage bool
}

// genStream builds a random SSE stream of content events, usage chunks,
// comments, event lines, multi-line data, stray blank lines and [DONE],
// with random line ends. A "\r" is never followed by a line end "\n", which
// would make the two one "\r\n".
func genStream(r *rand.Rand) (in, want []byte) {
	eols := []string{"\n", "\r\n", "\r"}
	afterCR := false
	line := func(sb *strings.Builder, s string) {
		eol := eols[r.IntN(3)]
		for s == "" && afterCR && eol == "\n" {
			eol = eols[r.IntN(3)]
		}
		sb.WriteString(s)
		sb.WriteString(eol)
		afterCR = eol == "\r"
	}
	n := 1 + r.IntN(12)
	for i := range n {
		var sb strings.Builder
		u := unit{}
		switch k := r.IntN(10); {
		case k < 5:
			if r.IntN(4) == 0 {
				line(&sb, ": c")
			}
			if r.IntN(4) == 0 {
				line(&sb, "event: message")
			}
			line(&sb, `data: {"choices":[{"index":0,"delta":{"content":"w\"choices\":[] `+strings.Repeat("y", r.IntN(40))+`"}}],"usage":null}`)
			line(&sb, "")
		case k < 7:
			u.usage = true
			if r.IntN(3) == 0 {
				line(&sb, ": before usage")
			}
			if r.IntN(3) == 0 {
				line(&sb, `data: {"id":"c","choices":[],`)
				line(&sb, `data: "usage":{"prompt_tokens":3,"completion_tokens":4}}`)
			} else {
				line(&sb, `data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`)
			}
			line(&sb, "")
		case k < 8:
			line(&sb, ": keep-alive")
			line(&sb, "")
		case k < 9:
			line(&sb, "") // stray blank line
		default:
			if i == n-1 {
				line(&sb, "data: [DONE]")
				line(&sb, "")
			} else {
				line(&sb, `data: {"choices":[],"usage":null}`)
				line(&sb, "")
			}
		}
		u.b = sb.String()
		in = append(in, u.b...)
		if !u.usage {
			want = append(want, u.b...)
		}
	}
	return in, want
}

func TestFilterGeneratedStreams(t *testing.T) {
	r := newRand(42)
	var f Filter
	for i := range 3000 {
		in, want := genStream(r)
		f.Reset()
		var chunks [][]byte
		switch i % 3 {
		case 0:
			chunks = [][]byte{in}
		case 1:
			chunks = bytewise(in)
		default:
			chunks = randomCuts(r, in, 12)
		}
		if got := feed(&f, chunks); !bytes.Equal(got, want) {
			t.Fatalf("stream %d, %d chunks:\n  in %q\n got %q\nwant %q", i, len(chunks), in, got, want)
		}
	}
}

// The output never depends on where the body is cut, whatever the bytes.
func FuzzFilterCuts(f *testing.F) {
	// Small seeds: the fuzzer minimises what it finds, and that is slow on
	// long inputs.
	f.Add([]byte("data: {\"choices\":[{\"delta\":{}}],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{}}\n\ndata: [DONE]\n\n"), uint64(1))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{}}\r\r\ndata: x\r\n\r\n"), uint64(2))
	f.Add([]byte("\r\n\r\n\n\r\r\n"), uint64(3))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		var whole Filter
		want := bytes.Clone(feed(&whole, [][]byte{in}))
		var cut Filter
		if got := feed(&cut, randomCuts(newRand(seed), in, 8)); !bytes.Equal(got, want) {
			t.Fatalf("cut output %q, whole %q", got, want)
		}
		var each Filter
		if got := feed(&each, bytewise(in)); !bytes.Equal(got, want) {
			t.Fatalf("bytewise output %q, whole %q", got, want)
		}
	})
}

func TestFilterCommonChunkAllocs(t *testing.T) {
	event := []byte(`data: {"id":"chatcmpl-BxQ4kZr8mT2vN1pLd9sWcY7hJ3aUe","object":"chat.completion.chunk","created":1753401234,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":" can"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	var f Filter
	var got []byte
	if n := testing.AllocsPerRun(1000, func() { got = f.Write(event, false) }); n != 0 {
		t.Fatalf("%v allocations per common chunk", n)
	}
	if &got[0] != &event[0] || len(got) != len(event) {
		t.Fatal("common chunk not returned as itself")
	}

	// Events cut in two: after the buffers have grown, no allocation
	// either.
	a, b := event[:100], event[100:]
	f.Write(a, false)
	f.Write(b, false)
	if n := testing.AllocsPerRun(1000, func() {
		f.Write(a, false)
		got = f.Write(b, false)
	}); n != 0 {
		t.Fatalf("%v allocations per cut event", n)
	}
	if !bytes.Equal(got, event) {
		t.Fatal("cut event changed")
	}
}

func TestHasEmptyChoices(t *testing.T) {
	for in, want := range map[string]bool{
		`"choices":[]`:                       true,
		`{"id":"x","choices":[],"usage":{}}`: true,
		`"choices" :	[ 	]`:                   true,
		`"choices": []`:                      true,
		`"choices":[1]`:                      false,
		`"choices":[{}]`:                     false,
		`"choices":[`:                        false,
		`[]`:                                 false,
		`:[]`:                                false,
		`choices":[]`:                        false,
		`"xchoices":[]`:                      false,
		`"choices"[]`:                        false,
		`"choices"::[]`:                      false,
		`\"choices\":[]`:                     false,
		`[[]"choices":[x] "choices":[]`:      true,
		``:                                   false,
	} {
		if got := hasEmptyChoices([]byte(in)); got != want {
			t.Errorf("hasEmptyChoices(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestFilterPasses: Passes says yes exactly when the Filter holds nothing
// and the chunk ends an event (or it gave up), and then a chunk without a
// usage chunk goes through Write whole, leaving the Filter as it was: a
// caller may skip Write for it. Checked on every chunk of generated streams
// cut anywhere.
func TestFilterPasses(t *testing.T) {
	var f Filter
	for _, c := range []struct {
		before, chunk string
		passes        bool
	}{
		{"", "data: {}\n\n", true},
		{"", "data: {}\r\n\r\n", true},
		{"", "data: {}\n", false},               // the event goes on
		{"", "data: {}\n\r", false},             // a '\n' may complete the '\r'
		{"data: {", "}\n\n", false},             // the event's start is held
		{"data: {}\n\r", "data: {}\n\n", false}, // after a '\r'
	} {
		f.Reset()
		f.Write([]byte(c.before), false)
		if got := f.Passes([]byte(c.chunk)); got != c.passes {
			t.Errorf("after %q, Passes(%q) = %v, want %v", c.before, c.chunk, got, c.passes)
		}
	}
	f.Reset()
	f.Write(make([]byte, MaxHeldBytes+1), false) // given up
	if !f.Passes([]byte("data: {")) {
		t.Error("a Filter that gave up does not pass a chunk")
	}

	r := newRand(7)
	skippable := 0
	for i := range 2000 {
		in, _ := genStream(r)
		f.Reset()
		chunks := randomCuts(r, in, 12)
		if i%2 == 0 {
			chunks = plugEvents(in)
		}
		for k, chunk := range chunks {
			if !f.Passes(chunk) || hasEmptyChoices(chunk) {
				f.Write(chunk, k == len(chunks)-1)
				continue
			}
			skippable++
			before := f
			before.held, before.out, before.scratch = bytes.Clone(f.held), bytes.Clone(f.out), bytes.Clone(f.scratch)
			out := f.Write(chunk, k == len(chunks)-1)
			if !bytes.Equal(out, chunk) || !reflect.DeepEqual(before, f) {
				t.Fatalf("%q after %q: Write gave %q and changed the Filter from %+v to %+v", chunk, chunks[:k], out, before, f)
			}
		}
	}
	if skippable < 500 {
		t.Fatalf("only %d chunks could be skipped: the streams test little", skippable)
	}
}

// plugEvents cuts a stream after each blank line, one event per chunk, as
// upstreams flush them.
func plugEvents(in []byte) [][]byte {
	var chunks [][]byte
	for len(in) > 0 {
		i := bytes.Index(in, []byte("\n\n"))
		if i < 0 {
			return append(chunks, in)
		}
		chunks = append(chunks, in[:i+2])
		in = in[i+2:]
	}
	return chunks
}
