package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The conversion rules on a hand-written dump (testdata/providers.json).

var fixtureDay = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

func readFixture(t *testing.T) *source {
	t.Helper()
	data, err := os.ReadFile("testdata/providers.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := readSource(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixtureModel is a model of the fixture, converted.
func fixtureModel(t *testing.T, s *source, id string, day time.Time) (price, bool, bool) {
	t.Helper()
	for _, p := range s.Providers {
		for _, m := range p.Models {
			if m.ID == id {
				mp, err := readPrices(m.Prices, day, map[string]int{})
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				return convert(mp)
			}
		}
	}
	t.Fatalf("no model %s in the fixture", id)
	return price{}, false, false
}

// kindsOf is a price's kinds as a map, Unset left out.
func kindsOf(p price) map[string]int64 {
	m := map[string]int64{}
	for k, v := range p.kinds {
		if v != unset {
			m[kinds[k].field] = v
		}
	}
	return m
}

func TestConversion(t *testing.T) {
	s := readFixture(t)
	type tier struct {
		above int64
		long  map[string]int64
	}
	for _, tc := range []struct {
		model    string
		day      time.Time
		want     map[string]int64 // the kinds given; the others Unset
		long     *tier
		several  bool
		unpriced bool
	}{
		// Rule 1: from the decimal text, exactly; past six decimals, up.
		{model: "decimals", want: map[string]int64{"Input": 2_500_000, "Output": 123_457, "CacheRead": 1, "CacheWrite": 1}},
		// Rule 3: one threshold, exactly; an untiered kind keeps its price.
		{model: "one-tier", want: map[string]int64{"Input": 3_000_000, "Output": 15_000_000, "CacheRead": 300_000},
			long: &tier{200_000, map[string]int64{"Input": 6_000_000, "Output": 22_500_000, "CacheRead": 300_000}}},
		// Several thresholds: from the lowest, each kind's dearest.
		{model: "two-tiers", want: map[string]int64{"Input": 1_000_000, "Output": 5_000_000},
			long: &tier{128_000, map[string]int64{"Input": 4_000_000, "Output": 5_000_000}}, several: true},
		{model: "uneven-tiers", want: map[string]int64{"Input": 1_000_000, "Output": 4_000_000},
			long: &tier{100_000, map[string]int64{"Input": 2_000_000, "Output": 8_000_000}}, several: true},
		// Rule 4: the start_date set in force on the day (the older shape of
		// a constraint, without its type, read too).
		{model: "dated", day: fixtureDay, want: map[string]int64{"Input": 2_000_000, "Output": 8_000_000}},
		{model: "dated", day: time.Date(2025, 6, 9, 0, 0, 0, 0, time.UTC), want: map[string]int64{"Input": 10_000_000, "Output": 40_000_000}},
		{model: "dated", day: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), want: map[string]int64{"Input": 1_000_000, "Output": 4_000_000}},
		// A time_of_date alternative: the dearest of it and the set it
		// would replace.
		{model: "off-peak", want: map[string]int64{"Input": 270_000, "Output": 1_100_000}},
		{model: "peak", day: fixtureDay, want: map[string]int64{"Input": 300_000, "Output": 900_000}},
		{model: "peak", day: time.Date(2026, 8, 16, 0, 0, 0, 0, time.UTC), want: map[string]int64{"Input": 500_000, "Output": 1_000_000}},
		// Rule 2: reasoning and audio kept; per-search and one-hour-cache
		// prices ignored.
		{model: "extras", want: map[string]int64{"Input": 1_000_000, "Output": 2_000_000, "Reasoning": 3_000_000, "InputAudio": 4_000_000}},
		{model: "per-hour", unpriced: true},
		{model: "free", unpriced: true},
		{model: "embedding", want: map[string]int64{"Input": 20_000, "Output": 0}},
		// Rule 5.
		{model: "old", want: map[string]int64{"Input": 30_000_000, "Output": 60_000_000}},
	} {
		day := tc.day
		if day.IsZero() {
			day = fixtureDay
		}
		p, ok, several := fixtureModel(t, s, tc.model, day)
		if ok == tc.unpriced || several != tc.several {
			t.Errorf("%s on %s: priced %v, several thresholds %v; want %v, %v", tc.model, day.Format(time.DateOnly), ok, several, !tc.unpriced, tc.several)
			continue
		}
		if tc.unpriced {
			continue
		}
		if got := kindsOf(p); !equalKinds(got, tc.want) {
			t.Errorf("%s on %s: %v, want %v", tc.model, day.Format(time.DateOnly), got, tc.want)
		}
		switch {
		case tc.long == nil && p.long != nil:
			t.Errorf("%s: a long-context tier above %d, want none", tc.model, p.longAbove)
		case tc.long != nil && p.long == nil:
			t.Errorf("%s: no long-context tier, want one above %d", tc.model, tc.long.above)
		case tc.long != nil && (p.longAbove != tc.long.above || !equalKinds(kindsOf(*p.long), tc.long.long)):
			t.Errorf("%s: long-context tier above %d %v, want above %d %v", tc.model, p.longAbove, kindsOf(*p.long), tc.long.above, tc.long.long)
		}
	}
}

func equalKinds(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// evalClause is how pricing evaluates a converted pattern (its matches).
func evalClause(c clause, name string) bool {
	switch c.op {
	case "matchEquals":
		return name == c.text
	case "matchStartsWith":
		return strings.HasPrefix(name, c.text)
	case "matchEndsWith":
		return strings.HasSuffix(name, c.text)
	case "matchContains":
		return strings.Contains(name, c.text)
	case "matchRegexp":
		return regexp.MustCompile(c.text).MatchString(name)
	case "matchAnd":
		for _, o := range c.of {
			if !evalClause(o, name) {
				return false
			}
		}
		return true
	case "matchOr":
		for _, o := range c.of {
			if evalClause(o, name) {
				return true
			}
		}
		return false
	case "matchNot":
		return !evalClause(c.of[0], name)
	}
	return false
}

// Rule 7: a leading negative lookahead becomes "not" and "and", matching
// what JavaScript matches.
func TestRegexpRewrite(t *testing.T) {
	for _, tc := range []struct {
		regex string
		names map[string]bool // what JavaScript's RegExp.test says
	}{
		{`^(?![^/]+/)(?:labs-)?(?:(?:mi|code|dev|magi|mini)stral|mixtral|pixtral|voxtral|open-(?:mistral|mixtral))`, map[string]bool{
			"mistral-large-latest": true, "labs-devstral-small-2512": true, "codestral-2501": true, "open-mixtral-8x22b": true,
			"mistralai/mistral-large": false, "openrouter/mistral-large": false, "gpt-4o": false, "my-mistral": false,
		}},
		{`^(?!.*-[tT][tT][sS](?:$|-))`, map[string]bool{
			"gemini-2.5-pro": true, "gemini-2.5-pro-preview-06-05": true, "gemini-2.5-pro-tts": false,
			"gemini-2.5-pro-preview-tts": false, "gemini-2.5-pro-TTS-x": false, "gemini-2.5-pro-ttsx": true,
		}},
		{`^(?!a)(?!b)c`, map[string]bool{"cat": true, "acat": false, "bc": false}},
		{`^gpt-5\.6-luna-\d{4}-\d{2}-\d{2}$`, map[string]bool{"gpt-5.6-luna-2026-07-30": true, "gpt-5.6-luna-20260730": false}},
	} {
		c, err := convertRegexp(tc.regex)
		if err != nil {
			t.Errorf("%s: %v", tc.regex, err)
			continue
		}
		for name, want := range tc.names {
			if got := evalClause(c, name); got != want {
				t.Errorf("%s on %q: %v, want %v (JavaScript's)", tc.regex, name, got, want)
			}
		}
	}
}

// What the generator cannot convert faithfully fails the generation, with
// what and where.
func TestGenerationFailsLoudly(t *testing.T) {
	for _, tc := range []struct {
		what, model, want string
		provider          map[string]any // fields replacing the first provider's
	}{
		{what: "a lookbehind", model: `{"id": "m", "match": {"regex": "(?<=x)y"}, "prices": {"input_mtok": 1, "output_mtok": 1}}`,
			want: `alpha/m: regex "(?<=x)y": RE2 cannot compile it`},
		{what: "an alternation after a lookahead", model: `{"id": "m", "match": {"regex": "^(?!a)b|c"}, "prices": {"input_mtok": 1, "output_mtok": 1}}`,
			want: "an alternation after the lookahead"},
		{what: "a price key of no known unit", model: `{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": 1, "output_mtok": 1, "output_thoughts_mtok": 2}}`,
			want: `alpha/m: price key "output_thoughts_mtok" is neither`},
		{what: "a negative price", model: `{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": -1, "output_mtok": 1}}`,
			want: "not in [0, 1000000]"},
		{what: "a price past the bound", model: `{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": 1000001, "output_mtok": 1}}`,
			want: "not in [0, 1000000]"},
		{what: "a fractional tier start", model: `{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": {"base": 1, "tiers": [{"start": 1.5, "price": 2}]}, "output_mtok": 1}}`,
			want: "tier start 1.5"},
		{what: "alternatives that price different kinds", model: `{"id": "m", "match": {"equals": "m"}, "prices": [{"prices": {"input_mtok": 1, "output_mtok": 1}}, {"constraint": {"type": "time_of_date", "start_time": "01:00:00Z", "end_time": "02:00:00Z"}, "prices": {"input_mtok": 1, "output_mtok": 1, "cache_read_mtok": 0.1}}]}`,
			want: "do not all price cache_read_mtok"},
		{what: "an unknown constraint", model: `{"id": "m", "match": {"equals": "m"}, "prices": [{"prices": {"input_mtok": 1, "output_mtok": 1}}, {"constraint": {"type": "weekday", "start_date": "2025-01-01"}, "prices": {"input_mtok": 1, "output_mtok": 1}}]}`,
			want: "neither a start_date nor a time_of_date"},
		{what: "an unknown pattern", model: `{"id": "m", "match": {"glob": "m*"}, "prices": {"input_mtok": 1, "output_mtok": 1}}`,
			want: "not one of and, or"},
		{what: "a fallback outside the catalog", model: `{"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": 1, "output_mtok": 1}}`,
			provider: map[string]any{"fallback_model_providers": []string{"gamma"}}, want: "fallback provider gamma is not in the catalog"},
	} {
		s := readFixture(t)
		var m sourceModel
		if err := json.Unmarshal([]byte(tc.model), &m); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		s.Providers[0].Models = []sourceModel{m}
		if fb, ok := tc.provider["fallback_model_providers"]; ok {
			s.Providers[0].Fallbacks = fb.([]string)
		}
		_, _, err := generate(s, fixtureDay)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.what, err, tc.want)
		}
	}
	// A Bedrock id without a vendor.
	s := readFixture(t)
	s.Providers[2].Models[0].ID = "nova-pro"
	if _, _, err := generate(s, fixtureDay); err == nil || !strings.Contains(err.Error(), "aws/nova-pro: no vendor") {
		t.Errorf("an aws id without a vendor: error %v", err)
	}
}

// The generated source: gofmt'ed, the same from run to run, with its
// header, its data and what it left out.
func TestGenerate(t *testing.T) {
	src, sum, err := generate(readFixture(t), fixtureDay)
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := generate(readFixture(t), fixtureDay)
	if err != nil || !bytes.Equal(src, again) {
		t.Fatalf("two generations differ (%v)", err)
	}
	text := string(src)
	for _, want := range []string{
		"// Code generated by tools/pricecatalog (make prices); DO NOT EDIT.\n",
		"@example/prices 1.2.3 (npm, MIT license,\n// https://example.com/prices)",
		"converted on 2026-12-07",
		`const Source = "@example/prices 1.2.3 (npm, MIT), generated 2026-12-07"`,
		`var bedrockVendors = [...]string{"amazon", "anthropic", "openai"}`,
		// Lowercased texts (rule 6); the rewritten lookahead (rule 7).
		`named:     match{op: matchAnd, of: []match{{op: matchNot, of: []match{{op: matchRegexp, text: "^(?:[^/]+/)"}}}, {op: matchRegexp, text: "^(?:labs-)?(?:alpha|omega)"}}},`,
		`alias:     match{op: matchEquals, text: "alpha-ai"},`,
		`match: match{op: matchOr, of: []match{{op: matchEquals, text: "extras"}, {op: matchContains, text: "extras-"}}},`,
		`fallbacks: []string{"beta"},`,
		"price: Price{Input: 2_500_000, Output: 123_457, CacheRead: 1, CacheWrite: 1, Reasoning: Unset,",
		"Long: &Price{Input: 6_000_000, Output: 22_500_000, CacheRead: 300_000, CacheWrite: Unset,",
		"LongAbove: 200_000}",
		"unpriced: true,",
		"{ // deprecated\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the generated source has no %q", want)
		}
	}
	if sum.listed != 14 || strings.Join(sum.unpriced, " ") != "alpha/per-hour alpha/free" ||
		strings.Join(sum.several, " ") != "alpha/two-tiers alpha/uneven-tiers" ||
		strings.Join(sum.conditional, " ") != "alpha/dated alpha/off-peak alpha/peak" ||
		sum.ignored["web_searches_kcount"] != 1 || sum.ignored["cache_write_1h_mtok"] != 1 || sum.ignored["audio_hours"] != 1 {
		t.Errorf("summary %+v", *sum)
	}
}
