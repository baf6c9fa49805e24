package tokenusage

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzChunkCuts checks that where a body is cut into chunks never changes
// the usage or the text count reported, and that they are what the
// reference (which decodes each root whole) finds whenever every root is
// JSON. The body is fixture number fixtureIndex (modulo the number of
// fixtures) with the fuzzed bytes spliced in at a position chosen from seed,
// which also chooses the random cut points. Without spliced bytes the
// fixture's own expected usage must come out.
func FuzzChunkCuts(f *testing.F) {
	bodies := make([][]byte, len(fixtures))
	for i, fx := range fixtures {
		bodies[i] = readFixture(f, fx.file)
	}
	for i := range fixtures {
		f.Add(uint8(i), []byte{}, uint64(i))
	}

	f.Fuzz(func(t *testing.T, fixtureIndex uint8, splice []byte, seed uint64) {
		fx := fixtures[int(fixtureIndex)%len(fixtures)]
		fixtureBody := bodies[int(fixtureIndex)%len(fixtures)]
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

		at := rng.IntN(len(fixtureBody) + 1)
		body := slices.Concat(fixtureBody[:at], splice, fixtureBody[at:])

		var whole Parser
		whole.Write(body)
		whole.Finish()
		wantUsage, wantOK := whole.Usage()
		if len(splice) == 0 {
			checkUsage(t, fx.want, wantUsage, wantOK, "uncut")
		}
		if refUsage, refOK, refText, valid := reference(body); valid {
			if refUsage != wantUsage || refOK != wantOK || refText != whole.TextBytes() {
				t.Fatalf("uncut: got %+v (%v), %d text bytes; the reference %+v (%v), %d",
					wantUsage, wantOK, whole.TextBytes(), refUsage, refOK, refText)
			}
		}

		// Each chunk is passed in a scratch buffer that is scribbled over
		// after Write returns, so a Parser retaining a chunk would be caught.
		var p Parser
		scratch := make([]byte, 1<<10)
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(1<<rng.IntN(10)))
			chunk := scratch[:copy(scratch[:n], rest)]
			p.Write(chunk)
			for i := range chunk {
				chunk[i] = '"'
			}
			rest = rest[n:]
		}
		p.Finish()
		got, ok := p.Usage()
		if ok != wantOK || got != wantUsage || p.TextBytes() != whole.TextBytes() {
			t.Fatalf("cut into random chunks: got %+v (%v), %d text bytes; uncut gives %+v (%v), %d",
				got, ok, p.TextBytes(), wantUsage, wantOK, whole.TextBytes())
		}
	})
}

// TestRandomCutsOfTokenSoup complements FuzzChunkCuts with bodies dense in
// what the Parser reacts to (key tokens and their pieces, quotes, backslash
// runs, braces, fields), which random mutation rarely produces.
func TestRandomCutsOfTokenSoup(t *testing.T) {
	pieces := []string{
		`"`, `\`, `\\`, `"usage"`, `"usageMetadata"`, `"usa`, `ge"`, `"usage":`, `"usageMetadata" :`, `"usage":{`,
		`:`, ` `, "\r\n", "\n", `{`, `}`, `[`, `]`, `,`, `null`, `12`, `"x"`, `"message":{`, `"choices":[{`,
		`"prompt_tokens":`, `"completion_tokens":`, `"input_tokens":`, `"promptTokenCount":`, `"content":"a\"b"`,
		`{"prompt_tokens":3}`, `{"input_tokens":5,"note":"}\\"}`, `{"promptTokenCount":7}`, `"eval_count":4`,
		`{"usage":{"prompt_tokens":1}}`, `{"message":{"usage":{"input_tokens":2}}}`, `data: `, `[{"usageMetadata":{"promptTokenCount":3}}]`,
		`{"usageMetadata":{"promptTokenCount":9,"promptTokensDetails":[{"modality":"AUDIO","tokenCount":4}]}}`, `{"modality":"IMAGE","tokenCount":2}`,
		`{"usage":{"prompt_tokens":6,"prompt_tokens_details":{"audio_tokens":5}}}`, `"image_tokens":`, `"candidatesTokensDetails":[`,
	}
	rng := rand.New(rand.NewPCG(3, 4))
	withUsage := 0
	for range 20000 {
		var body []byte
		for range rng.IntN(40) {
			body = append(body, pieces[rng.IntN(len(pieces))]...)
		}
		want, wantOK := parse(body)
		if wantOK {
			withUsage++
		}
		var p Parser
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(6))
			p.Write(rest[:n])
			rest = rest[n:]
		}
		if got, ok := p.Usage(); got != want || ok != wantOK {
			t.Fatalf("%q: cut into chunks gives %+v (%v), uncut %+v (%v)", body, got, ok, want, wantOK)
		}
	}
	if withUsage < 500 {
		t.Fatalf("only %d bodies reported usage; the soup is too thin to test much", withUsage)
	}
}
