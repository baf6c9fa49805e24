package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/pricing"
)

// The tests against the pinned package itself: they run node, and install
// the package (npm ci) when node_modules is missing, as make sdks does.

func installPackage(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: make sdks installs it (and the pinned package)")
	}
	if _, err := os.Stat("node_modules/@pydantic/genai-prices"); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

// The committed catalog is what the generator makes from the pinned
// package on the date it says: a refresh, or a change of the rules, is
// committed with its regenerated catalog (make prices).
func TestCommittedCatalogIsGenerated(t *testing.T) {
	installPackage(t)
	committed, err := os.ReadFile("../../pricing/catalog_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	date := regexp.MustCompile(`(?m)^const Source = ".*, generated (\d{4}-\d{2}-\d{2})"$`).FindSubmatch(committed)
	if date == nil {
		t.Fatal("pricing/catalog_gen.go has no Source with its date")
	}
	day, err := time.Parse(time.DateOnly, string(date[1]))
	if err != nil {
		t.Fatal(err)
	}
	src, _, err := generateFromPackage(".", day)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, committed) {
		got, want := strings.Split(string(src), "\n"), strings.Split(string(committed), "\n")
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("pricing/catalog_gen.go is not what make prices makes from the pinned package on %s; line %d:\ngenerated: %s\ncommitted: %s", date[1], i+1, got[i], want[i])
			}
		}
		t.Fatalf("pricing/catalog_gen.go is not what make prices makes (%d lines, generated %d)", len(want), len(got))
	}
}

// pricing.Lookup searches a route's provider as the package's own library
// does (its calcPrice with a providerId): for every name a model's
// patterns spell (each equals, starts_with, ends_with and contains text,
// the model's id), with a date appended and in capitals, both find the same
// model, or the library a model the catalog does not list because it has
// no token price.
func TestLookupAgreesWithTheLibrary(t *testing.T) {
	installPackage(t)
	data, err := exec.Command("node", append([]string{"dump.mjs"}, providerOrder...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	s, err := readSource(data)
	if err != nil {
		t.Fatal(err)
	}
	type query struct {
		Name     string `json:"name"`
		Provider string `json:"provider"`
	}
	var queries []query
	seen := map[query]bool{}
	add := func(name, provider string) {
		for _, n := range []string{name, name + "-20250514", strings.ToUpper(name)} {
			if q := (query{n, provider}); !seen[q] {
				seen[q] = true
				queries = append(queries, q)
			}
		}
	}
	var texts func(raw json.RawMessage) []string
	texts = func(raw json.RawMessage) []string {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		var out []string
		for key, v := range m {
			switch key {
			case "and", "or":
				var parts []json.RawMessage
				json.Unmarshal(v, &parts)
				for _, p := range parts {
					out = append(out, texts(p)...)
				}
			case "equals", "starts_with", "ends_with", "contains":
				var text string
				json.Unmarshal(v, &text)
				out = append(out, text)
			}
		}
		return out
	}
	for _, p := range s.Providers {
		for _, m := range p.Models {
			add(m.ID, p.ID)
			for _, text := range texts(m.Match) {
				add(text, p.ID)
			}
		}
	}
	// The library's answer: the provider whose models hold the model it
	// found (a fallback provider's, when it found it there), and its id.
	script := `
import { calcPrice, findProvider } from '@pydantic/genai-prices';
import { readFileSync } from 'node:fs';
const queries = JSON.parse(readFileSync(0, 'utf8'));
const ids = process.argv.slice(1);
const providers = ids.map((id) => findProvider({ providerId: id }));
const answers = queries.map(({ name, provider }) => {
  const r = calcPrice({}, name, { providerId: provider });
  if (!r) return null;
  const owner = providers.find((p) => p.models.includes(r.model));
  return { provider: owner ? owner.id : '?', model: r.model.id };
});
process.stdout.write(JSON.stringify(answers));
`
	in, _ := json.Marshal(queries)
	cmd := exec.Command("node", append([]string{"--input-type=module", "-e", script}, providerOrder...)...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var answers []*struct{ Provider, Model string }
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != len(queries) {
		t.Fatalf("the library's answers: %v (%d for %d names)", err, len(answers), len(queries))
	}
	day, err := time.Parse(time.DateOnly, pricing.Source[strings.LastIndexByte(pricing.Source, ' ')+1:])
	if err != nil {
		t.Fatalf("the date of %q: %v", pricing.Source, err)
	}
	unpriced := map[string]bool{}
	for _, p := range s.Providers {
		for _, m := range p.Models {
			mp, err := readPrices(m.Prices, day, map[string]int{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := convert(mp); !ok {
				unpriced[p.ID+"/"+m.ID] = true
			}
		}
	}
	compared, failures := 0, 0
	for i, q := range queries {
		a := answers[i]
		if a == nil {
			continue // the library stops there; Lookup searches on
		}
		compared++
		l, ok := pricing.Lookup(q.Name, q.Provider)
		switch {
		case unpriced[a.Provider+"/"+a.Model] && !ok:
		case ok && l.Provider == a.Provider && l.Model == a.Model:
		default:
			if failures++; failures <= 20 {
				t.Errorf("Lookup(%q, %q) = %s/%s (found %v), the library finds %s/%s", q.Name, q.Provider, l.Provider, l.Model, ok, a.Provider, a.Model)
			}
		}
	}
	if compared < 1000 {
		t.Errorf("%d names compared, want the catalog's thousands", compared)
	}
	t.Logf("%d names, %d found by the library and compared", len(queries), compared)
}
