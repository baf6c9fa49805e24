package config

import (
	"regexp"
	"testing"

	"github.com/tidwall/gjson"
)

// A key's regexp matched by its literal says what the regexp says, for
// every value: ASCII, other UTF-8, invalid UTF-8, empty.
var literalValues = []string{
	"", "sk-", "sk-1", "xsk-1", "SK-1", "sk", "s", "k-sk-", "sk-\xff", "\xffsk-", "\xe2\x82sk-", "é-sk-1",
	"sk-1\n", "org.sk-", "sk-1$", "^sk-", "a+b", "ab", "aab",
}

func TestRegexpKeysThatAreLiteralsMatchAsTheRegexp(t *testing.T) {
	cases := []struct {
		expr string
		form literalForm
	}{
		{"^sk-", literalPrefix},
		{"sk-", literalAnywhere},
		{"^sk-1$", literalWhole},
		{`^sk\-1$`, literalWhole},
		{`\Ask-`, literalPrefix},
		{`^org\.sk-`, literalPrefix},
		{"sk-$", notLiteral},     // a suffix: the regexp runs
		{"(?i)^sk-", notLiteral}, // case folded
		{"^sk-.*", notLiteral},   // not a literal (simplified to no literal)
		{"(?m)^sk-", notLiteral}, // ^ at any line
		{"^é", notLiteral},       // not ASCII
		{"^", notLiteral},
		{"", notLiteral},
		{"^(sk-)", notLiteral}, // a capture
		{"a+b", notLiteral},
		{`a\+b`, literalAnywhere},
		{"^sk-|^pk-", notLiteral},
	}
	for _, c := range cases {
		re := regexp.MustCompile(c.expr)
		lit, form := literalOf(re.String())
		if form != c.form {
			t.Errorf("%q: form %d, want %d", c.expr, form, c.form)
		}
		k := LimitKey{Kind: KeyRegexp, Regexp: re, literal: lit, form: form}
		for _, v := range literalValues {
			if got, want := k.matchString(v), re.MatchString(v); got != want {
				t.Errorf("%q on %q: matched %v, the regexp says %v", c.expr, v, got, want)
			}
		}
	}
}

// A key parsed from a configuration is matched by its literal.
func TestParsedRegexpKeyIsMatchedByItsLiteral(t *testing.T) {
	c, err := Parse(gjson.Parse(`{"rule_name": "r", "rule_items": [{"limit_by_header": "x-api-key",
		"limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 10}]}], "redis": {"service_name": "redis.static"}}`))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Items[0].Keys[0]
	if k.form != literalPrefix || k.literal != "sk-" {
		t.Fatalf("regexp:^sk- parsed to literal %q form %d, want \"sk-\" as a prefix", k.literal, k.form)
	}
}

func FuzzRegexpLiteral(f *testing.F) {
	f.Add("^sk-", "sk-1")
	f.Add("sk-$", "xsk-")
	f.Add(`^a\.b$`, "a.b")
	f.Fuzz(func(t *testing.T, expr, v string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		lit, form := literalOf(re.String())
		k := LimitKey{Kind: KeyRegexp, Regexp: re, literal: lit, form: form}
		if got, want := k.matchString(v), re.MatchString(v); got != want {
			t.Fatalf("%q (literal %q, form %d) on %q: matched %v, the regexp says %v", expr, lit, form, v, got, want)
		}
	})
}
