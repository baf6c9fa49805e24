package estimate

import (
	"strings"
	"testing"
)

// Bodies that JSON parsers read differently are read the way that costs
// most, and said to be ambiguous (issue 25, points 2 and 3).
func TestAmbiguousBodies(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hello"}]`
	others := func(m ...string) (o [MaxOtherModels]string) { copy(o[:], m); return o }
	runCases(t, opts, []requestCase{{
		name: "a byte order mark: read without it",
		body: byteOrderMark + `{"model":"gpt-4o",` + msgs + `}`,
		want: Estimate{Prompt: 5, Completion: 4096, Model: "gpt-4o", Parsed: true, Ambiguous: AmbiguousBOM},
	}, {
		name: "NaN, as Python reads it",
		body: `{"model":"gpt-4o","temperature":NaN,` + msgs + `}`,
		want: Estimate{Prompt: 5, Completion: 4096, Model: "gpt-4o", Parsed: true, Ambiguous: AmbiguousLenient},
	}, {
		name: "Infinity and -Infinity",
		body: `{"top_p":Infinity,"x":[-Infinity],"model":"gpt-4o"}`,
		want: Estimate{Completion: 4096, Model: "gpt-4o", Parsed: true, Ambiguous: AmbiguousLenient},
	}, {
		name: "comments and trailing commas",
		body: "{/* c */\"model\":\"gpt-4o\", // line\n" + msgs + `,}`,
		want: Estimate{Prompt: 5, Completion: 4096, Model: "gpt-4o", Parsed: true, Ambiguous: AmbiguousLenient},
	}, {
		name: "a comment marker inside a string is text",
		body: `{"model":"gpt-4o","messages":[{"content":"a // b /* c"}]}`,
		want: Estimate{Prompt: 11, Completion: 4096, Model: "gpt-4o", Parsed: true},
	}, {
		name: "an upper-case MODEL, as Go reads it",
		body: `{"model":"gpt-4o-mini","MODEL":"gpt-4o",` + msgs + `}`,
		want: Estimate{Prompt: 5, Completion: 4096, Model: "gpt-4o", OtherModels: others("gpt-4o-mini"), Parsed: true, Ambiguous: AmbiguousModel},
	}, {
		name: "the first of two models is named too",
		body: `{"model":"gpt-4o","model":"gpt-4o-mini"}`,
		want: Estimate{Completion: 4096, Model: "gpt-4o-mini", OtherModels: others("gpt-4o"), Parsed: true, Ambiguous: AmbiguousModel},
	}, {
		name: "the same model twice is no ambiguity",
		body: `{"model":"gpt-4o","model":"gpt-4o"}`,
		want: Estimate{Completion: 4096, Model: "gpt-4o", Parsed: true},
	}, {
		name: "a case variant of the messages counts its text",
		body: `{"Messages":[{"content":"hello"}]}`,
		want: Estimate{Prompt: 5, Completion: 4096, Parsed: true, Ambiguous: `the body gives the key "messages" in another letter case`},
	}, {
		name: "a Kelvin sign in max_tokens, which Go folds to k",
		body: `{"max_tokens":10,"max_to` + "\u212a" + `ens":5000}`,
		want: Estimate{Completion: 5000, Parsed: true, Ambiguous: AmbiguousCap},
	}, {
		name: "a model name that is not UTF-8: Go reads U+FFFD",
		body: "{\"model\":\"gpt-4o\xff\"}",
		want: Estimate{Completion: 4096, Model: "gpt-4o\xff", OtherModels: others("gpt-4o\uFFFD"), Parsed: true, Ambiguous: AmbiguousUTF8},
	}, {
		name: "more models than can be told",
		body: `{"model":"a","model":"b","model":"c","model":"d","model":"e"}`,
		want: Estimate{Completion: 4096, Model: "e", OtherModels: others("a", "b", "c"), Parsed: true, Ambiguous: AmbiguousModel, UnknownModel: true},
	}, {
		name: "an object no parser reads: its model is unknown",
		body: `{"model":"gpt-4o",,}`,
		want: unread(Estimate{Prompt: 20, Completion: 4096}),
	}, {
		name: "not an object at all: no model, not ambiguous",
		body: `hello`,
		want: Estimate{Prompt: 5, Completion: 4096},
	}})
}

// relaxed never reads past a body or panics, and leaves strict JSON alone.
func TestRelaxedBounds(t *testing.T) {
	for _, s := range []string{``, `/`, `/*`, `"`, `"\`, `{"a":"\"}`, `,`, `,]`, `NaN`, `-Inf`, strings.Repeat("/*", 1000)} {
		relaxed(s)
	}
	if _, ok := relaxed(`{"a":[1,2],"b":"NaN // x"}`); ok {
		t.Fatal("strict JSON was relaxed")
	}
}
