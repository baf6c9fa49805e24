package tokenusage

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Lines of the streams whose events differ mostly in their text, the case
// lineMemo is for: each is a format string with one %s, the text.
var memoLines = []string{
	// OpenAI, with the random obfuscation that makes every line's end differ.
	`{"id":"chatcmpl-D8Z5","object":"chat.completion.chunk","created":1770933892,"model":"gpt-4.1-nano","service_tier":"default","system_fingerprint":"fp_de60","choices":[{"index":0,"delta":{"content":"%s"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Qup1B"}`,
	// OpenAI-compatible servers without it: lines the same but for their text.
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}],"usage":null}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%s"}}`,
	`{"candidates":[{"content":{"parts":[{"text":"%s"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":3,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash"}`,
	`{"id":"x","choices":[{"delta":{"role":"assistant","content":"%s"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
	// More text after the text.
	`{"choices":[{"delta":{"content":"%s","reasoning_content":"why"}}]}`,
}

// memoTexts are texts a line may carry: plain, empty, long, escaped, with
// what ends a string or a line.
var memoTexts = []string{"word", "", " token", "a longer piece of text than the thirty-two bytes members counts", `say \"hi\"`, `\u00e9t\u00e9`, `back\\slash`, `\n`}

// memoEdits are bytes a line may differ by from the one before, where they
// change how it reads: quotes, backslashes, digits, brackets, blank space.
var memoEdits = []string{`"`, `\`, `0`, `9`, `{`, `}`, `[`, `]`, `,`, `:`, ` `, "\t", "\n", "\r", `n`, `u`, `x`, `"usage":{"prompt_tokens":3}`, `"content":"é"`,
	`{"usage":{"prompt_tokens":3}}`, `{"choices":[{"delta":{"content":"zz"}}]}`}

// memoInterludes are lines a stream may have between two of its own: other
// fields, and usage of other dialects (which starts the usage over).
var memoInterludes = []string{": keep-alive\n", "event: ping\n", "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n",
	"data: {\"usageMetadata\":{\"promptTokenCount\":4,\"candidatesTokenCount\":1}}\n\n", "data: {\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}\n\n"}

// memoStream builds a stream of n lines from line: most the same but for
// their text, some with an edit (a byte replaced, or inserted) anywhere,
// some after an interlude.
func memoStream(rng *rand.Rand, line string, n int) []byte {
	var body []byte
	for range n {
		if rng.IntN(4) == 0 {
			body = append(body, memoInterludes[rng.IntN(len(memoInterludes))]...)
		}
		text := memoTexts[rng.IntN(len(memoTexts))]
		l := []byte(line)
		at := bytes.Index(l, []byte("%s"))
		l = append(append(append([]byte{}, l[:at]...), text...), l[at+2:]...)
		if rng.IntN(3) == 0 {
			edit := memoEdits[rng.IntN(len(memoEdits))]
			k := rng.IntN(len(l) + 1)
			if rng.IntN(4) == 0 {
				k = len(l) // after the root: a second one, or garbage
			}
			end := k
			if rng.IntN(2) == 0 && k < len(l) {
				end = k + 1 // replaced, not inserted
			}
			l = append(append(append([]byte{}, l[:k]...), edit...), l[end:]...)
		}
		body = append(body, "data: "...)
		body = append(body, l...)
		body = append(body, "\n\n"...)
	}
	return body
}

// readMemoFree reads body a byte at a time: lexLine then never sees a line's
// start whole, so nothing is remembered.
func readMemoFree(body []byte) (Usage, bool, int64) {
	var p Parser
	for i := range body {
		p.Write(body[i : i+1])
	}
	u, ok := p.Usage()
	return u, ok, p.TextBytes()
}

// checkMemoStream reads body whole and in random chunks, and requires what
// it reads without the memo (and what the reference reads, when every root
// is JSON).
func checkMemoStream(t *testing.T, rng *rand.Rand, body []byte) {
	t.Helper()
	wantUsage, wantOK, wantText := readMemoFree(body)
	if refUsage, refOK, refText, valid := reference(body); valid && (refUsage != wantUsage || refOK != wantOK || refText != wantText) {
		t.Fatalf("%s\nread a byte at a time: %+v (%v), %d text bytes; the reference %+v (%v), %d", body, wantUsage, wantOK, wantText, refUsage, refOK, refText)
	}
	var whole Parser
	whole.Write(body)
	if u, ok := whole.Usage(); u != wantUsage || ok != wantOK || whole.TextBytes() != wantText {
		t.Fatalf("%s\nread whole: %+v (%v), %d text bytes; a byte at a time %+v (%v), %d", body, u, ok, whole.TextBytes(), wantUsage, wantOK, wantText)
	}
	var cut Parser
	for rest := body; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(400))
		cut.Write(rest[:n])
		rest = rest[n:]
	}
	if u, ok := cut.Usage(); u != wantUsage || ok != wantOK || cut.TextBytes() != wantText {
		t.Fatalf("%s\nread in random chunks: %+v (%v), %d text bytes; a byte at a time %+v (%v), %d", body, u, ok, cut.TextBytes(), wantUsage, wantOK, wantText)
	}
}

// TestLineMemoReadsAsTheLexer: lines that repeat the one before but for
// their text, or for an edit anywhere, read as they do with nothing
// remembered.
func TestLineMemoReadsAsTheLexer(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		checkMemoStream(t, rng, memoStream(rng, memoLines[rng.IntN(len(memoLines))], 1+rng.IntN(8)))
	}
}

// TestLineMemoAfterAnotherDialect: a line remembered whole, with usage
// after its text, is not skipped when it comes again: a line read by the
// switch in between (cut where lexLine does not see its start) may have
// started the usage over in another dialect, which the line's usage then
// starts over again.
func TestLineMemoAfterAnotherDialect(t *testing.T) {
	line := func(text string) []byte {
		return []byte(`data: {"id":"x","choices":[{"delta":{"content":"` + text + `"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}` + "\n\n")
	}
	other := []byte(`data: {"type":"message_delta","usage":{"output_tokens":9}}` + "\n\n")
	var p Parser
	p.Write(line("a"))
	p.Write(other[:7]) // "data: {": the line's start alone
	p.Write(other[7:])
	p.Write(line("b"))
	want, _, wantText := readMemoFree(slices.Concat(line("a"), other, line("b")))
	if got, _ := p.Usage(); got != want || got.Input != 5 || p.TextBytes() != wantText {
		t.Fatalf("got %+v, %d text bytes; want %+v, %d", got, p.TextBytes(), want, wantText)
	}
}

// TestLineMemoIsUsed: the memo takes the lines it is for (were it never
// used, the test above would prove nothing). A stream the same but for its
// text is read whole from the memo; one whose lines end differently (OpenAI's
// obfuscation) from the key of its text on; one whose text comes after a
// usage object (an effect) not at all.
func TestLineMemoIsUsed(t *testing.T) {
	for _, c := range []struct {
		line      string
		key, tail bool
	}{
		{memoLines[1], true, true},
		{memoLines[2], true, true},
		{strings.Replace(memoLines[0], "Qup1B", "%s", 1), true, false},
		{`{"usage":{"prompt_tokens":1},"choices":[{"delta":{"content":"%s"}}]}`, false, false},
	} {
		var p Parser
		for _, text := range []string{"a", "bb", "ccc"} {
			p.Write([]byte("data: " + strings.ReplaceAll(c.line, "%s", text) + "\n\n"))
		}
		if key, tail := p.memo.key > 0, p.memo.tailN > 0; key != c.key || tail != c.tail {
			t.Errorf("%s: remembered the start %v (want %v), the end %v (want %v)", c.line, key, c.key, tail, c.tail)
		}
		if p.TextBytes() != 6 {
			t.Errorf("%s: %d text bytes, want 6", c.line, p.TextBytes())
		}
	}
}

// FuzzLineMemo is TestLineMemoReadsAsTheLexer on any line: the fuzzed line
// (with a %s for its text, added if missing) repeated with texts and edits.
func FuzzLineMemo(f *testing.F) {
	for i, line := range memoLines {
		f.Add(line, uint64(i))
	}
	f.Fuzz(func(t *testing.T, line string, seed uint64) {
		if !bytes.Contains([]byte(line), []byte("%s")) {
			line += "%s"
		}
		if len(line) > 2000 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		checkMemoStream(t, rng, memoStream(rng, line, 1+rng.IntN(8)))
	})
}

// samePrefix agrees with bytes.Equal at every length around its word
// steps, with the first difference anywhere, and reads nothing past the
// slices it is given (they are cut from longer ones that differ after).
func TestSamePrefixIsBytesEqual(t *testing.T) {
	base := make([]byte, 80)
	for i := range base {
		base[i] = byte('a' + i%26)
	}
	for n := 0; n <= 40; n++ {
		a := slices.Clone(base)
		b := slices.Clone(base)
		b[n] ^= 1 // differs only past the compared bytes
		if !samePrefix(a[:n], b[:n]) {
			t.Fatalf("length %d: equal bytes said to differ", n)
		}
		for d := 0; d < n; d++ {
			c := slices.Clone(a[:n])
			c[d] ^= 0x80
			if samePrefix(a[:n], c) || samePrefix(c, a[:n]) {
				t.Fatalf("length %d: a difference at %d not seen", n, d)
			}
		}
		if n > 0 && samePrefix(a[:n], b[:n-1]) {
			t.Fatalf("length %d: slices of different lengths said to be the same", n)
		}
	}
}
