package estimate

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// textUnitsGo is the weight of raw JSON string content by TextFeatures, in
// 1/UnitsPerToken of a token: the specification spansUnits is held to.
func textUnitsGo(s string) int64 {
	var units int64
	for k, n := range TextFeatures(s) {
		units += n * TextWeights[k]
	}
	return units
}

// TextFeatures counts what its documentation says, on raw JSON string
// content.
func TestTextFeatures(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want map[int]int64
	}{
		{"", nil},
		{"Hello, world", map[int]int64{featLetter: 10, featOther: 1, featSpace: 1, featWord: 2}},
		{"gpt-4o 2024", map[int]int64{featLetter: 4, featOther: 6, featSpace: 1, featWord: 2, featNumber: 2}},
		{"a1b2", map[int]int64{featLetter: 2, featOther: 2, featWord: 2, featNumber: 2}},
		{"héllo", map[int]int64{featLetter: 4, featLead2: 1, featCont: 1, featWord: 2}},
		{"网关", map[int]int64{featLead3: 2, featCont: 4}},
		{"नमस्ते", map[int]int64{featLead3Low: 6, featCont: 12}},
		{"→🎉", map[int]int64{featLead3Low: 1, featLead4: 1, featCont: 5}},
		// Escapes count as the character they stand for; a run of letters
		// restarts after one.
		{`a\nb`, map[int]int64{featLetter: 2, featOther: 1, featWord: 2}},
		{`\u7f51\u5173`, map[int]int64{featLead3: 2, featCont: 4}},
		{`\ud83c\udf89`, map[int]int64{featLead4: 1, featCont: 3}},
		{`\u0041b\u0031 `, map[int]int64{featLetter: 2, featWord: 2, featOther: 1, featSpace: 1, featNumber: 1}},
		{`\u00e9\u20ac`, map[int]int64{featLead2: 1, featLead3Low: 1, featCont: 3}},
		{`\x`, map[int]int64{featOther: 1}},
		{`ab\`, map[int]int64{featLetter: 2, featWord: 1, featOther: 1}},
		{`\u12`, map[int]int64{featOther: 3, featNumber: 1}}, // not an escape: a backslash and "u" count as one byte
		// Across words of 8 bytes, a run goes on.
		{"abcdefghijkl 1234567890", map[int]int64{featLetter: 12, featOther: 10, featSpace: 1, featWord: 1, featNumber: 1}},
	} {
		var want [NumTextFeatures]int64
		for k, n := range tc.want {
			want[k] = n
		}
		if got := TextFeatures(tc.s); got != want {
			t.Errorf("TextFeatures(%q) = %v, want %v", tc.s, got, want)
		}
	}
}

// spansUnits (WASM assembly in the plugin) weighs what TextFeatures counts:
// random strings of every class of byte, escape and length.
func TestTextUnitsAgreeWithFeatures(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	pieces := []string{"a", "Z", "_", "{", "0", "42", " ", ",", "\"", "\t", "é", "Ж", "网", "ह", "→", "🎉", "\xff", "\x80",
		`\n`, `\"`, `\\`, `\u0041`, `\u0020`, `\u0009`, `\u0037`, `\u00e9`, `\u20ac`, `\u7f51`, `\ud83c`, `\udf89`, `\uZZZZ`, `\u12`, `\`, "word ", "12,345.67 "}
	for i := range 20000 {
		var b strings.Builder
		for n := r.IntN(30); n > 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		if i%3 == 0 && len(s) > 0 {
			s = s[:r.IntN(len(s))] // cut anywhere, even in an escape
		}
		want := textUnitsGo(s)
		for _, escapes := range []bool{true, false} {
			if !escapes && strings.Contains(s, `\`) {
				continue
			}
			if got := unitsOf(s, escapes); got != want {
				t.Fatalf("units of %q (escapes %v) = %d, want %d (%v)", s, escapes, got, want, TextFeatures(s))
			}
		}
	}
}

// unitsOf weighs s with spansUnits, as a span in the middle of a body, at
// its end, and thrice in a row: -1 or -2 if they disagree.
func unitsOf(s string, escapes bool) int64 {
	var spans textSpans
	spans.n = 1
	if escapes {
		spans.escaped = 1
	}
	body := `{"x":"` + s + `"}` // in the middle: its last word read past its end
	spans.at[0] = [2]int64{6, int64(6 + len(s))}
	units := spansUnits(body, &spans)
	spans.at[0] = [2]int64{0, int64(len(s))} // at the end: read byte by byte
	if spansUnits(s, &spans) != units {
		return -1
	}
	// Three times the span: three times its units (a run of letters does
	// not go on from one span to the next).
	spans.n, spans.escaped = 3, 7*spans.escaped
	spans.at[0] = [2]int64{6, int64(6 + len(s))}
	spans.at[1], spans.at[2] = spans.at[0], spans.at[0]
	if spansUnits(body, &spans) != 3*units {
		return -2
	}
	return units
}

// maxByteUnits is the most a byte weighs: a digit that starts a number, a
// letter that starts a word, or a lead byte with no continuation after it
// (text that is not UTF-8), whichever weighs most.
const maxByteUnits = max(weightOther+weightNumber, weightLetter+weightWord, weightLead4, weightLead3, weightLead2, weightCont, weightSpace)

func FuzzTextUnits(f *testing.F) {
	f.Add(`Hello, \u7f51 world 123 🎉\n`)
	f.Fuzz(func(t *testing.T, s string) {
		units := unitsOf(s, true)
		if want := textUnitsGo(s); units != want || !strings.Contains(s, `\`) && unitsOf(s, false) != want {
			t.Fatalf("spansUnits = %d, want %d", units, want)
		}
		if units < 0 || units > int64(len(s))*maxByteUnits {
			t.Fatalf("%d units for %d bytes", units, len(s))
		}
	})
}
