package tokenusage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a recorded response body under testdata/ and the usage it
// reports; want is nil when it reports none.
type fixture struct {
	file string
	want *Usage
}

var fixtures = []fixture{
	{"openai_chat_stream.sse", &Usage{Input: 1843, Output: 51, CacheRead: 1536}},
	{"openai_chat_stream_no_usage.sse", nil},
	{"openai_chat.json", &Usage{Input: 1117, Output: 46, CacheRead: 1024}},
	{"openai_responses_stream.sse", &Usage{Input: 2315, Output: 312, CacheRead: 2048, Reasoning: 256}},
	{"openai_responses.json", &Usage{Input: 328, Output: 1052, Reasoning: 960}},
	{"anthropic_stream.sse", &Usage{Input: 27 + 1620 + 14235, Output: 503, CacheRead: 14235, CacheCreation: 1620}},
	{"anthropic_stream_cumulative.sse", &Usage{Input: 472 + 3072, Output: 89, CacheRead: 3072}},
	{"anthropic.json", &Usage{Input: 12 + 2051 + 18432, Output: 394, CacheRead: 18432, CacheCreation: 2051}},
	{"gemini_stream.sse", &Usage{Input: 4211 + 35, Output: 3*51 + 618, CacheRead: 4096, Reasoning: 618}},
	{"gemini.json", &Usage{Input: 9020 + 12, Output: 211 + 310, CacheRead: 8192, Reasoning: 310}},
	// Written from the providers' documentation, each with something that
	// looks like usage in the wrong place.
	{"gemini_array.json", &Usage{Input: 9, Output: 21 + 40, Reasoning: 40}},
	{"xai_chat_stream.sse", &Usage{Input: 40, Output: 5 + 300, CacheRead: 32, Reasoning: 300}},
	{"anthropic_iterations.sse", &Usage{Input: 40000 + 500 + 100, Output: 900 + 700, CacheRead: 100}},
	{"openrouter_stream.sse", &Usage{Input: 2100, Output: 9, CacheCreation: 2048}},
	{"ollama_chat.ndjson", &Usage{Input: 26, Output: 282}},
	{"ollama_generate.json", &Usage{Input: 26, Output: 259}},
	{"cohere_stream.sse", &Usage{Input: 3, Output: 12}},
	{"cohere.json", &Usage{Input: 5, Output: 418}},
	{"bedrock_converse.json", &Usage{Input: 12 + 1024, Output: 50, CacheRead: 1024}},
	{bedrockStreamFixture, &Usage{Input: 25 + 200, Output: 5, CacheCreation: 200}},
	// Audio and images, each part within its whole, written from the
	// providers' documentation (after the fixtures above, whose indices
	// the fuzz corpus names).
	{"openai_chat_audio.json", &Usage{Input: 1386, Output: 412, InputAudio: 1280, OutputAudio: 355}},
	{"openai_chat_audio_stream.sse", &Usage{Input: 211, Output: 96, InputAudio: 160, OutputAudio: 84}},
	{"xai_chat_image.json", &Usage{Input: 1041, Output: 64 + 310, CacheRead: 512, Reasoning: 310, InputImage: 256}},
	{"openai_chat_image_stream.sse", &Usage{Input: 1117, Output: 9, InputImage: 1105}},
	{"openrouter_image_stream.sse", &Usage{Input: 14, Output: 1299, OutputImage: 1290}},
	{"openrouter_image.json", &Usage{Input: 1302, Output: 1301, OutputImage: 1290}},
	{"openai_images.json", &Usage{Input: 1389, Output: 1176, InputImage: 1323, OutputImage: 1056}},
	{"openai_images_stream.sse", &Usage{Input: 30, Output: 6240, OutputImage: 6240}}, // every output token an image's
	{"openai_transcription.json", &Usage{Input: 1207, Output: 312, InputAudio: 1207}},
	{"openai_transcription_stream.sse", &Usage{Input: 494, Output: 120, InputAudio: 480}},
	// Gemini: audio and images read from the cache are cache reads; VIDEO
	// and DOCUMENT are text; the tool-use prompt's images are the input's.
	{"gemini_audio.json", &Usage{Input: 13877 + 1500, Output: 380, CacheRead: 9600, InputAudio: 12800 - 9600, InputImage: 258}},
	{"gemini_audio_stream.sse", &Usage{Input: 4820, Output: 9, CacheRead: 3200, InputAudio: 4800 - 3200}},
	{"gemini_image_stream.sse", &Usage{Input: 270, Output: 1299, InputImage: 258, OutputImage: 1290}},
	{"vertex_tts_array.json", &Usage{Input: 11, Output: 775, OutputAudio: 775}},
}

func readFixture(tb testing.TB, file string) []byte {
	tb.Helper()
	if file == bedrockStreamFixture {
		return bedrockConverseStream()
	}
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// parse feeds chunks to a fresh Parser and returns what it reports.
func parse(chunks ...[]byte) (Usage, bool) {
	var p Parser
	for _, c := range chunks {
		p.Write(c)
	}
	p.Finish()
	return p.Usage()
}

func parseBytewise(body []byte) (Usage, bool) {
	var p Parser
	for i := range body {
		p.Write(body[i : i+1])
	}
	p.Finish()
	return p.Usage()
}

// checkUsage fails the test, describing the input with format and args, unless
// got and ok match want.
func checkUsage(t *testing.T, want *Usage, got Usage, ok bool, format string, args ...any) {
	t.Helper()
	switch {
	case want == nil && ok:
		t.Fatalf("%s: got usage %+v, want none", fmt.Sprintf(format, args...), got)
	case want != nil && !ok:
		t.Fatalf("%s: got no usage, want %+v", fmt.Sprintf(format, args...), *want)
	case want != nil && got != *want:
		t.Fatalf("%s: got %+v, want %+v", fmt.Sprintf(format, args...), got, *want)
	}
}

func TestFixtures(t *testing.T) {
	for _, fx := range fixtures {
		body := readFixture(t, fx.file)
		t.Run(fx.file, func(t *testing.T) {
			got, ok := parse(body)
			checkUsage(t, fx.want, got, ok, "whole")

			got, ok = parseBytewise(body)
			checkUsage(t, fx.want, got, ok, "one byte at a time")

			for cut := range len(body) + 1 {
				got, ok = parse(body[:cut], body[cut:])
				checkUsage(t, fx.want, got, ok, "cut at %d", cut)
			}
		})
	}
}

func TestCRLFFixture(t *testing.T) {
	if !bytes.Contains(readFixture(t, "gemini_stream.sse"), []byte("}\r\n\r\ndata: ")) {
		t.Fatal("gemini_stream.sse should use \\r\\n line endings")
	}
}

func TestNoUsage(t *testing.T) {
	for _, body := range []string{
		``,
		"data: [DONE]\n\n",
		`data: {"choices":[{"delta":{"content":"hi"}}]}` + "\n\n",
		`data: {"choices":[],"usage":null}` + "\n\n",
		`{"response":{"usage": null }}`,
		`{"usage":{}}`,
		`{"usage":{"foo":1,"bar":{"prompt_tokens":2}}}`,
		`{"a":"usage","b":"usageMetadata"}`,
		`{"usage":"{\"prompt_tokens\":1}"}`,
		`{"usage":[{"prompt_tokens":1}]}`,
		`{"usages":{"prompt_tokens":1}}`,
		`{"Usage":{"prompt_tokens":1}}`,
		`{"usageMeta":{"promptTokenCount":1}}`,
	} {
		got, ok := parse([]byte(body))
		if ok {
			t.Errorf("%q: got usage %+v, want none", body, got)
		}
	}
}

func TestMalformedInputReportsNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 1<<16)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	bodies := [][]byte{
		noise,
		bytes.Repeat([]byte{0, 0xff, '"', '\\', '{', '}'}, 1000),
		[]byte(`{"usage":{"prompt_tokens":}}`),
		[]byte(`{"usage":{"prompt_tokens":"12","completion_tokens":true}}`),
		[]byte(`{"usage":{"prompt_tokens":-5,"completion_tokens":1e400}}`),
		[]byte(`{"usage":{]]]]}`),
		[]byte(`{"usage":{"prompt_tokens" 12 "completion_tokens" 3}`),
		[]byte(`{"usage":{"prompt_tokens":12`),  // truncated
		[]byte(`{"usage":{"prompt_tokens":12}`), // the root never closes
		[]byte(`{"usage":{"prompt_tokens\":12}}`),
		[]byte(`{"usage` + strings.Repeat(`\`, 9) + `":{"prompt_tokens":12}}`),
		[]byte(`{"usage":` + strings.Repeat("{", 10000)),
		[]byte(strings.Repeat(`{"usage":`, 1000)),
	}
	for _, body := range bodies {
		if got, ok := parse(body); ok {
			t.Errorf("%.40q: got usage %+v, want none", body, got)
		}
		if got, ok := parseBytewise(body); ok {
			t.Errorf("%.40q bytewise: got usage %+v, want none", body, got)
		}
	}
}

func TestEscapedKeysIgnored(t *testing.T) {
	for _, body := range []string{
		// A usage object quoted in content, as JSON-escaped text.
		`{"content":"{\"usage\": {\"prompt_tokens\": 999}}"}`,
		`{"content":"{\"usageMetadata\":{\"promptTokenCount\":999}}"}`,
		// Text `\"usage":{` is escaped to three backslashes before the quote.
		`{"content":"\\\"usage\":{\"prompt_tokens\":999}}"}`,
		`{"content":"\\\\\\\"usage\":{\"prompt_tokens\":999}}"}`,
	} {
		for cut := range len(body) + 1 {
			if got, ok := parse([]byte(body[:cut]), []byte(body[cut:])); ok {
				t.Fatalf("%s cut at %d: got usage %+v, want none", body, cut, got)
			}
		}
	}
	// An even run of backslashes ends in an escaped backslash, so the quote
	// after it is real.
	body := `{"content":"\\","usage":{"prompt_tokens":5,"completion_tokens":6}}`
	want := &Usage{Input: 5, Output: 6}
	for cut := range len(body) + 1 {
		got, ok := parse([]byte(body[:cut]), []byte(body[cut:]))
		checkUsage(t, want, got, ok, "%s cut at %d", body, cut)
	}
}

func TestWhitespaceAroundColon(t *testing.T) {
	body := []byte("{\"usage\" \r\n\t: \n {\n  \"prompt_tokens\" : 3 ,\n  \"completion_tokens\": 4\n}\n}")
	want := &Usage{Input: 3, Output: 4}
	got, ok := parse(body)
	checkUsage(t, want, got, ok, "whole")
	got, ok = parseBytewise(body)
	checkUsage(t, want, got, ok, "bytewise")
}

func TestStringsInsideUsageObject(t *testing.T) {
	body := []byte(`{"usage":{"note":"}{\"}\\","prompt_tokens":8,"x":{"y":"{"},"completion_tokens":9}}`)
	got, ok := parseBytewise(body)
	checkUsage(t, &Usage{Input: 8, Output: 9}, got, ok, "bytewise")
}

func TestLaterValuesOverrideFieldByField(t *testing.T) {
	got, ok := parse(
		[]byte(`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":100,"output_tokens":1}}}`),
		[]byte(`{"type":"message_delta","usage":{"output_tokens":7}}`),
		[]byte(`{"type":"message_delta","usage":{"input_tokens":null,"output_tokens":9}}`),
	)
	checkUsage(t, &Usage{Input: 110, Output: 9, CacheRead: 100}, got, ok, "anthropic")

	got, ok = parse(
		[]byte(`{"usageMetadata":{"promptTokenCount":50,"totalTokenCount":50}}`),
		[]byte(`{"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":20,"thoughtsTokenCount":5}}`),
		[]byte(`{"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":30}}`),
	)
	checkUsage(t, &Usage{Input: 50, Output: 35, Reasoning: 5}, got, ok, "gemini")
}

func TestAnotherFamilyStartsOver(t *testing.T) {
	got, ok := parse(
		[]byte(`{"usage":{"prompt_tokens":999,"completion_tokens":999}}`),
		[]byte(`{"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2}}`),
	)
	checkUsage(t, &Usage{Input: 4, Output: 2}, got, ok, "chat then gemini")
}

func TestOversizedUsageObjectIgnored(t *testing.T) {
	// usageObject returns a usage object of exactly size bytes.
	usageObject := func(size int) string {
		head, tail := `{"prompt_tokens":5,"completion_tokens":6,"pad":"`, `"}`
		return head + strings.Repeat(`\\`, (size-len(head)-len(tail))/2) + strings.Repeat("x", (size-len(head)-len(tail))%2) + tail
	}
	fits := `{"usage":` + usageObject(MaxUsageObjectBytes) + `}`
	got, ok := parse([]byte(fits))
	checkUsage(t, &Usage{Input: 5, Output: 6}, got, ok, "object of MaxUsageObjectBytes")

	tooBig := `{"usage":` + usageObject(MaxUsageObjectBytes+1) + `}`
	for _, feed := range []func([]byte) (Usage, bool){
		func(b []byte) (Usage, bool) { return parse(b) },
		parseBytewise,
	} {
		if got, ok := feed([]byte(tooBig)); ok {
			t.Fatalf("object over the cap: got usage %+v, want none", got)
		}
		later := tooBig + "\n" + `{"usage":{"prompt_tokens":1,"completion_tokens":2}}`
		got, ok := feed([]byte(later))
		checkUsage(t, &Usage{Input: 1, Output: 2}, got, ok, "usage after an object over the cap")
	}

	var p Parser
	body := []byte(tooBig)
	p.Write(body)
	if allocs := testing.AllocsPerRun(100, func() { p.Write(body) }); allocs != 0 {
		t.Errorf("objects over the cap: %v allocations per run, want 0", allocs)
	}
	if c := cap(p.lex.obj); c > MaxUsageObjectBytes {
		t.Fatalf("buffer grew to %d bytes, cap is %d", c, MaxUsageObjectBytes)
	}
}

func TestFinishDropsTruncatedObject(t *testing.T) {
	var p Parser
	p.Write([]byte(`data: {"usage":{"prompt_tokens":1,"completion_tokens":2}}` + "\n\n"))
	p.Write([]byte(`data: {"usage":{"prompt_tokens":10,"completion_tokens":12`))
	p.Finish()
	got, ok := p.Usage()
	checkUsage(t, &Usage{Input: 1, Output: 2}, got, ok, "truncated")

	p.Write([]byte(`5}}`))
	got, ok = p.Usage()
	checkUsage(t, &Usage{Input: 1, Output: 2}, got, ok, "write after Finish")
}

func TestResetReuses(t *testing.T) {
	var p Parser
	p.Write(readFixture(t, "anthropic_stream.sse"))
	p.Write([]byte(`{"usage":{"prompt_tok`)) // leave it mid-object
	p.Reset()
	if got, ok := p.Usage(); ok {
		t.Fatalf("after Reset: got usage %+v, want none", got)
	}
	p.Write(readFixture(t, "openai_chat.json"))
	p.Finish()
	got, ok := p.Usage()
	checkUsage(t, &Usage{Input: 1117, Output: 46, CacheRead: 1024}, got, ok, "reused")
}

func TestTotal(t *testing.T) {
	if got := (Usage{Input: 3, Output: 4, CacheRead: 2, CacheCreation: 1}).Total(); got != 7 {
		t.Fatalf("Total() = %d, want 7", got)
	}
}

const openAIContentEvent = `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"

const anthropicContentEvent = "event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the usage of \"quotes\""}}` + "\n\n"

func TestSteadyStateAllocatesNothing(t *testing.T) {
	stream := readFixture(t, "gemini_stream.sse") // a usage object in every event
	media := readFixture(t, "gemini_image_stream.sse")
	audio := readFixture(t, "openai_chat_audio_stream.sse")
	var p Parser
	p.Write(stream) // warm-up: grows the object buffer once
	for name, feed := range map[string]func(){
		"openai content event":    func() { p.Write([]byte(openAIContentEvent)) },
		"anthropic content event": func() { p.Write([]byte(anthropicContentEvent)) },
		"gemini stream with usage": func() {
			p.Reset()
			p.Write(stream)
			p.Finish()
		},
		"gemini stream with images, read as usage is asked for": func() {
			p.Reset()
			p.Write(media)
			p.Finish()
			p.Usage()
		},
		"openai audio stream, read as usage is asked for": func() {
			p.Reset()
			p.Write(audio)
			p.Finish()
			p.Usage()
		},
	} {
		if allocs := testing.AllocsPerRun(100, feed); allocs != 0 {
			t.Errorf("%s: %v allocations per run, want 0", name, allocs)
		}
	}
}

func BenchmarkContentEvent(b *testing.B) {
	event := []byte(openAIContentEvent)
	var p Parser
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		p.Write(event)
	}
}

func BenchmarkStream50(b *testing.B) {
	benchmarkStream(b, "openai_chat_stream.sse", "\n\n")
}

// BenchmarkGeminiStream reads a Gemini stream whose every event carries
// usageMetadata with its lists by modality, each read as the event ends.
func BenchmarkGeminiStream(b *testing.B) {
	benchmarkStream(b, "gemini_stream.sse", "\r\n\r\n")
}

// benchmarkStream reads a fixture's stream an event (ending in sep) at a
// time, then its usage.
func benchmarkStream(b *testing.B, file, sep string) {
	stream := readFixture(b, file)
	events := bytes.SplitAfter(stream, []byte(sep))
	var p Parser
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		p.Reset()
		for _, e := range events {
			p.Write(e)
		}
		p.Finish()
		if _, ok := p.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

// TestCompactAndIndentedAgree reads each JSON body compact, and indented
// with tabs and CRLF line ends, against the reference: the Parser's fast
// path for compact JSON and its byte-level path for blank space must agree.
func TestCompactAndIndentedAgree(t *testing.T) {
	checked := 0
	for _, fx := range fixtures {
		if !strings.HasSuffix(fx.file, ".json") {
			continue
		}
		checked++
		body := readFixture(t, fx.file)
		var compact, indented bytes.Buffer
		if err := json.Compact(&compact, body); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&indented, body, "\r\n", "\t"); err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{compact.Bytes(), indented.Bytes()} {
			want, wantOK, wantText, valid := reference(b)
			if !valid {
				t.Fatalf("%s: the reference finds it is not JSON", fx.file)
			}
			for _, feed := range []func([]byte) *Parser{
				func(b []byte) *Parser { var p Parser; p.Write(b); p.Finish(); return &p },
				func(b []byte) *Parser {
					var p Parser
					for i := range b {
						p.Write(b[i : i+1])
					}
					p.Finish()
					return &p
				},
			} {
				p := feed(b)
				got, ok := p.Usage()
				if got != want || ok != wantOK || p.TextBytes() != wantText {
					t.Fatalf("%s %.30q: got %+v (%v), %d text bytes; the reference %+v (%v), %d",
						fx.file, b, got, ok, p.TextBytes(), want, wantOK, wantText)
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d JSON fixtures", checked)
	}
}

// TestWordHelpers checks the word-at-a-time helpers against byte loops, on
// words rich in the bytes they are about and in carries and borrows.
func TestWordHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	edges := []byte{0, 1, '"', '\\', '/', '0', '9', ':', 0x7f, 0x80, 0xb9, 0xba, 0xc0, 0xff}
	for range 500000 {
		var b [8]byte
		for i := range b {
			switch rng.IntN(4) {
			case 0, 1:
				b[i] = '0' + byte(rng.IntN(10))
			case 2:
				b[i] = edges[rng.IntN(len(edges))]
			default:
				b[i] = byte(rng.Uint32())
			}
		}
		x := binary.LittleEndian.Uint64(b[:])
		for _, c := range []byte{0, '"', '\\'} {
			want := bytes.IndexByte(b[:], c)
			if want < 0 {
				want = 8
			}
			if got := firstZero(x ^ ones*uint64(c)); got != want {
				t.Fatalf("% x: first %q at %d, want %d", b, c, got, want)
			}
		}
		digits := true
		for _, c := range b {
			digits = digits && '0' <= c && c <= '9'
		}
		if eightDigits(x) != digits {
			t.Fatalf("% x: eightDigits = %v, want %v", b, !digits, digits)
		}
	}
}

// TestKeyLookup checks the hash table of keys: every key of the tree is
// found from every node, as read by members (its prefix from a word of the
// body), and near misses of them are not.
func TestKeyLookup(t *testing.T) {
	ids := map[string]int{}
	for id, k := range keyNames {
		ids[k] = id
	}
	var candidates []string
	for _, k := range keyNames {
		candidates = append(candidates, k, k+"s", k[:len(k)-1], strings.ToUpper(k[:1])+k[1:], "_"+k, k+`\`)
		for i := range len(k) {
			candidates = append(candidates, k[:i]+"x"+k[i+1:], k[:i]+k[i+1:])
		}
		// Keys whose first 8 bytes differ from k's in a bit or two, and
		// whose length differs by a NUL byte or more.
		for bit := range 8 {
			flipped := string(k[0]^1<<bit) + k[1:]
			candidates = append(candidates, flipped, flipped+"\x00", flipped+"\x00\x00", flipped[:len(flipped)-1])
		}
	}
	candidates = append(candidates, "", "id", "object", "model", "index", "logprobs", "finish_reason", "system_fingerprint")
	for _, k := range candidates {
		body := []byte(k + `":null,"padding":0`)
		word := binary.LittleEndian.Uint64(body)
		for n := range nodes {
			want := nowhere
			if id, ok := ids[k]; ok {
				want = childOf[n][id+1]
			}
			if got := child(node(n), []byte(k)); got != want {
				t.Fatalf("child(%d, %q) = %d, want %d", n, k, got, want)
			}
			if len(k) < 8 {
				got := childOf[n][prefixColumn(word&(1<<(8*len(k))-1), len(k))]
				if got != want {
					t.Fatalf("%q from a word of the body at node %d: %d, want %d", k, n, got, want)
				}
			}
		}
	}

	// "y_groq\x00" is "x_groq" but for a bit of its prefix and a bit of
	// its length, which a careless comparison of the two lets cancel out.
	body := "{\"y_groq\x00\":{\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":6}}}"
	for cut := range len(body) + 1 {
		if got, ok := parse([]byte(body[:cut]), []byte(body[cut:])); ok {
			t.Fatalf("%q cut at %d: got usage %+v, want none", body, cut, got)
		}
	}
}

func BenchmarkAnthropicEvent(b *testing.B) {
	event := []byte(anthropicContentEvent)
	var p Parser
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		p.Write(event)
	}
}

// BenchmarkMembers reads a line of ten members of one kind, for the cost of
// a member by kind of key and value.
func BenchmarkMembers(b *testing.B) {
	for _, m := range []struct{ name, member string }{
		{"null", `"model":null`},
		{"number", `"created":1741569952`},
		{"string", `"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"`},
		{"longKey", `"system_fingerprint":"fp_eb9dce56a8"`},
		{"spaced", `"model": "gpt-4o"`},
		{"text", `"choices":[{"delta":{"content":" token"}}]`},
	} {
		line := []byte("data: {" + strings.Repeat(m.member+",", 9) + m.member + "}\n\n")
		b.Run(m.name, func(b *testing.B) {
			var p Parser
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				p.Write(line)
			}
		})
	}
}

// TestUsageObjects: the count of usage objects changes in the chunk that
// opens one, whole or not, read or not, and in no other.
func TestUsageObjects(t *testing.T) {
	var p Parser
	steps := []struct {
		chunk string
		want  int
	}{
		{`data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}` + "\n\n", 0},
		{`data: {"choices":[],"us`, 0},
		{`age":{"prompt_tokens":`, 1}, // the brace opens it
		{`3}}` + "\n\n", 1},
		{`data: {"x":{"usage":{"prompt_tokens":1}}}` + "\n\n", 1}, // not at a usage path
		{`data: {"message":{"usage":{"input_tokens":2}}}` + "\n\n", 2},
		{`data: {"\u0075sage":{"prompt_tokens":4}}` + "\n\n", 2}, // an escaped key is not read
		{`data: {"usage":{"prompt_tokens":` + strings.Repeat("1", MaxUsageObjectBytes) + `}}` + "\n\n", 3},
	}
	for _, s := range steps {
		p.Write([]byte(s.chunk))
		if got := p.UsageObjects(); got != s.want {
			t.Fatalf("after %.60q: %d usage objects, want %d", s.chunk, got, s.want)
		}
	}
}

// Reasoning is the part of the output a provider says was spent reasoning,
// never more than the output.
func TestReasoningIsPartOfOutput(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       Usage
	}{
		{"OpenAI chat", `{"usage":{"prompt_tokens":5,"completion_tokens":10,"total_tokens":15,"completion_tokens_details":{"reasoning_tokens":7}}}`,
			Usage{Input: 5, Output: 10, Reasoning: 7}},
		{"xAI: beside the completion, and in the total", `{"usage":{"prompt_tokens":5,"completion_tokens":10,"total_tokens":22,"completion_tokens_details":{"reasoning_tokens":7}}}`,
			Usage{Input: 5, Output: 17, Reasoning: 7}},
		{"more reasoning than output: cut to the output", `{"usage":{"prompt_tokens":5,"completion_tokens":10,"total_tokens":15,"completion_tokens_details":{"reasoning_tokens":70}}}`,
			Usage{Input: 5, Output: 10, Reasoning: 10}},
		{"Responses", `{"usage":{"input_tokens":5,"output_tokens":10,"output_tokens_details":{"reasoning_tokens":8}}}`,
			Usage{Input: 5, Output: 10, Reasoning: 8}},
		{"Anthropic: not reported", `{"usage":{"input_tokens":5,"output_tokens":10}}`,
			Usage{Input: 5, Output: 10}},
		{"Gemini", `{"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":10,"thoughtsTokenCount":4}}`,
			Usage{Input: 5, Output: 14, Reasoning: 4}},
	} {
		got, ok := parse([]byte(c.body))
		checkUsage(t, &c.want, got, ok, "%s", c.name)
	}
}

// Audio and images are parts of the input and output, where the provider
// says how much: each at most its whole, a Gemini list replacing the last
// as a whole, whatever cuts the body.
func TestMediaParts(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       Usage
	}{
		{"chat: more audio than prompt, cut to the prompt",
			`{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"audio_tokens":90,"image_tokens":4},"completion_tokens_details":{"audio_tokens":50,"image_tokens":3}}}`,
			Usage{Input: 10, Output: 5, InputAudio: 10, InputImage: 4, OutputAudio: 5, OutputImage: 3}},
		{"chat: xAI's reasoning beside the completion makes room for its audio",
			`{"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":45,"completion_tokens_details":{"reasoning_tokens":30,"audio_tokens":20}}}`,
			Usage{Input: 10, Output: 35, Reasoning: 30, OutputAudio: 20}},
		{"chat: null and malformed parts leave none",
			`{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"audio_tokens":null,"image_tokens":"4"},"completion_tokens_details":{"audio_tokens":-1}}}`,
			Usage{Input: 10, Output: 5}},
		{"Responses: no image part, whatever its output",
			`{"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":8}}}`,
			Usage{Input: 10, Output: 20, CacheRead: 4, Reasoning: 8}},
		{"Images API: output_tokens_details says how much is images, cut to the output",
			`{"usage":{"input_tokens":10,"input_tokens_details":{"text_tokens":10,"image_tokens":0},"output_tokens":20,"output_tokens_details":{"image_tokens":70,"text_tokens":0}}}`,
			Usage{Input: 10, Output: 20, OutputImage: 20}},
		{"Images API: more image input than input, cut",
			`{"usage":{"input_tokens":10,"input_tokens_details":{"text_tokens":0,"image_tokens":11},"output_tokens":20}}`,
			Usage{Input: 10, Output: 20, InputImage: 10, OutputImage: 20}},
		{"transcription: audio in input_token_details",
			`{"text":"hi","usage":{"type":"tokens","input_tokens":10,"input_token_details":{"text_tokens":2,"audio_tokens":8},"output_tokens":3,"total_tokens":13}}`,
			Usage{Input: 10, Output: 3, InputAudio: 8}},
		{"transcription billed by duration: no usage",
			`{"text":"hi","usage":{"type":"duration","seconds":9}}`, Usage{}},
		{"Anthropic: no media parts",
			`{"usage":{"input_tokens":10,"output_tokens":3,"cache_read_input_tokens":2}}`,
			Usage{Input: 12, Output: 3, CacheRead: 2}},
		{"Gemini: VIDEO and DOCUMENT are text, a missing tokenCount is 0, modalities summed",
			`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":10,"promptTokensDetails":[{"modality":"VIDEO","tokenCount":50},{"modality":"DOCUMENT","tokenCount":20},{"modality":"AUDIO"},{"modality":"IMAGE","tokenCount":7},{"modality":"IMAGE","tokenCount":3}]}}`,
			Usage{Input: 100, Output: 10, InputImage: 10}},
		{"Gemini: a later list replaces the earlier as a whole",
			`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":10,"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":10}]}}` + "\n" +
				`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":30,"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":30}]}}`,
			Usage{Input: 100, Output: 30}},
		{"Gemini: a malformed list is ignored, the earlier kept",
			`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":10,"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":10}]}}` + "\n" +
				`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":30,"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":"30"}]}}` + "\n" +
				`{"usageMetadata":{"candidatesTokensDetails":{"modality":"AUDIO","tokenCount":30}}}` + "\n" +
				`{"usageMetadata":{"candidatesTokensDetails":[{"modality":"AUDIO","tokenCount":30},7]}}`,
			Usage{Input: 100, Output: 30, OutputAudio: 10}},
		{"Gemini: an escaped modality is none of them",
			`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":10,"promptTokensDetails":[{"modality":"AUD\u0049O","tokenCount":60}]}}`,
			Usage{Input: 100, Output: 10}},
		{"Gemini: more cached than the prompt's audio is none, more audio than input is the input",
			`{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":100,"candidatesTokenCount":10,` +
				`"promptTokensDetails":[{"modality":"AUDIO","tokenCount":20},{"modality":"IMAGE","tokenCount":500}],"cacheTokensDetails":[{"modality":"AUDIO","tokenCount":90}],` +
				`"candidatesTokensDetails":[{"modality":"IMAGE","tokenCount":11},{"modality":"AUDIO","tokenCount":4}],"thoughtsTokenCount":5}}`,
			Usage{Input: 100, Output: 15, CacheRead: 100, Reasoning: 5, InputImage: 100, OutputImage: 11, OutputAudio: 4}},
		{"Gemini: the tool-use prompt's media are the input's",
			`data: {"usageMetadata":{"promptTokenCount":100,"toolUsePromptTokenCount":40,"candidatesTokenCount":10,` +
				`"promptTokensDetails":[{"modality":"AUDIO","tokenCount":30}],"toolUsePromptTokensDetails":[{"modality":"AUDIO","tokenCount":5},{"modality":"IMAGE","tokenCount":35}]}}` + "\r\n\r\n",
			Usage{Input: 140, Output: 10, InputAudio: 35, InputImage: 35}},
		{"Gemini: counts at the bound, summed within it",
			`{"usageMetadata":{"promptTokenCount":9007199254740992,"toolUsePromptTokenCount":9007199254740992,"candidatesTokenCount":1,` +
				`"promptTokensDetails":[{"modality":"IMAGE","tokenCount":9007199254740992},{"modality":"IMAGE","tokenCount":9007199254740992}],` +
				`"toolUsePromptTokensDetails":[{"modality":"IMAGE","tokenCount":9007199254740992}]}}`,
			Usage{Input: 2 << 53, Output: 1, InputImage: 2 << 53}},
	} {
		want := &c.want
		if c.want == (Usage{}) {
			want = nil
		}
		for cut := range len(c.body) + 1 {
			got, ok := parse([]byte(c.body[:cut]), []byte(c.body[cut:]))
			checkUsage(t, want, got, ok, "%s, cut at %d", c.name, cut)
		}
		if want != nil && (want.InputAudio > want.Input || want.InputImage > want.Input || want.OutputAudio > want.Output || want.OutputImage > want.Output) {
			t.Fatalf("%s: the case wants a part larger than its whole", c.name)
		}
	}
}
