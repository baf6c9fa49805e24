package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The request fixtures of estimate/testdata/documented are what the
// documented rules give with o200k_base (fixtures.go): a count in the
// manifest cannot drift from its rule, nor a body from its definition.
// Regenerate them with go run ./tokenfit -fixtures ../estimate/testdata/documented.
func TestDocumentedFixturesAreCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "estimate", "testdata", "documented")
	manifest, err := os.ReadFile(filepath.Join(dir, "documented.json"))
	if err != nil {
		t.Fatal(err)
	}
	var committed []fixture
	if err := json.Unmarshal(manifest, &committed); err != nil {
		t.Fatal(err)
	}
	want := fixtures(o200k(), filepath.Join("..", ".."), readFamilyCounts(filepath.Join("..", "..")))
	if len(committed) != len(want) {
		t.Fatalf("%d fixtures committed, %d defined", len(committed), len(want))
	}
	for i, w := range want {
		c := committed[i]
		if c.Name != w.Name || c.Path != w.Path || c.Model != w.Model || c.Documented != w.Documented || c.Tolerance != w.Tolerance || c.Source != w.Source {
			t.Errorf("fixture %d: committed %+v, defined %+v", i, c, w)
		}
		body, err := os.ReadFile(filepath.Join(dir, w.Name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != w.body+"\n" {
			t.Errorf("%s: the committed body is not the defined one", w.Name)
		}
	}
}

// The rules the documented counts follow, on the examples OpenAI's cookbook
// gives: a message's tokens (3 with its role and content, 3 for the reply)
// and a function's (7, name:description, 12 in all).
func TestDocumentedRules(t *testing.T) {
	enc := o200k()
	if n := chatTokens(enc, []message{{"user", "Hi"}}); n != 3+1+1+3 {
		t.Errorf("a message of Hi: %d tokens", n)
	}
	if n := toolsTokens(enc, []function{{name: "f", description: "Do it."}}); n != 7+int64(len(enc.Encode("f:Do it", nil, nil)))+12 {
		t.Errorf("a function without parameters: %d tokens", n)
	}
	enum := toolsTokens(enc, []function{{name: "f", description: "d", params: []param{{name: "u", typ: "string", description: "x", enum: []string{"a", "b"}}}}})
	if base := 7 + int64(len(enc.Encode("f:d", nil, nil))) + 12; enum != base+3+3-3+2*(3+1)+int64(len(enc.Encode("u:string:x", nil, nil))) {
		t.Errorf("a function with an enum: %d tokens", enum)
	}
}

// The family fixtures' counts (testdata/family-counts.json) are their
// tokenizers' counts of the texts, where the tokenizers are installed
// (npm ci --prefix tools/tokenfit): the committed file cannot drift from
// the packages package-lock.json pins.
func TestFamilyCountsAreTheTokenizers(t *testing.T) {
	if _, err := os.Stat(filepath.Join(dir(), "node_modules")); err != nil {
		t.Skip("the family tokenizers are not installed (npm ci --prefix tools/tokenfit): TestDocumentedFixturesAreCurrent reads their counts from testdata/family-counts.json")
	}
	root := filepath.Join("..", "..")
	committed := readFamilyCounts(root)
	counts := &familyCounts{counts: map[string]map[string]int{}, collect: true}
	fixtures(o200k(), root, counts)
	pending := counts.pending
	counts.countPending(nodeCount)
	for family, texts := range pending {
		for _, text := range texts {
			if got, want := committed.counts[family][textKey(text)], counts.counts[family][textKey(text)]; got != want {
				t.Errorf("%s: %q counts %d, the file says %d", family, text[:min(len(text), 40)], want, got)
			}
		}
	}
	if len(committed.counts) != len(counts.counts) {
		t.Errorf("the file counts for %d families, the fixtures need %d", len(committed.counts), len(counts.counts))
	}
}
