package config

import (
	"regexp/syntax"
	"strings"
)

// A "regexp:" key is most often a plain literal, anchored or not
// ("regexp:^sk-"). Running Go's regexp engine on every request for one
// costs microseconds in WASM (a machine from a pool, a pass over the
// value); comparing bytes costs nanoseconds. So a key's regexp that is an
// ASCII literal, optionally anchored at the start or at both ends, is
// matched by strings.Contains, strings.HasPrefix or ==, which say the same
// as MatchString for every value: ASCII bytes are whole runes in any
// string, valid UTF-8 or not, so the regexp matches where the bytes are.

// literalForm says how a regexp that is a plain literal is matched.
type literalForm uint8

const (
	notLiteral      literalForm = iota // run the regexp
	literalAnywhere                    // "sk-": the value contains the literal
	literalPrefix                      // "^sk-": the value starts with it
	literalWhole                       // "^sk-1$": the value is it
)

// literalOf returns the literal a regexp (in Go's syntax, as
// regexp.Compile reads it) stands for and how it matches, or notLiteral.
func literalOf(expr string) (string, literalForm) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", notLiteral
	}
	re = re.Simplify()
	parts := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		parts = re.Sub
	}
	begin := len(parts) > 0 && parts[0].Op == syntax.OpBeginText
	if begin {
		parts = parts[1:]
	}
	end := len(parts) > 0 && parts[len(parts)-1].Op == syntax.OpEndText
	if end {
		parts = parts[:len(parts)-1]
	}
	if len(parts) != 1 || parts[0].Op != syntax.OpLiteral || parts[0].Flags&syntax.FoldCase != 0 {
		return "", notLiteral
	}
	var b strings.Builder
	for _, r := range parts[0].Rune {
		if r >= 0x80 {
			return "", notLiteral
		}
		b.WriteByte(byte(r))
	}
	switch {
	case begin && end:
		return b.String(), literalWhole
	case begin:
		return b.String(), literalPrefix
	case end:
		return "", notLiteral // a suffix: left to the regexp, as rare
	}
	return b.String(), literalAnywhere
}

// matchLiteral matches v against a literal of the given form.
func matchLiteral(v, literal string, form literalForm) bool {
	switch form {
	case literalPrefix:
		return strings.HasPrefix(v, literal)
	case literalWhole:
		return v == literal
	}
	return strings.Contains(v, literal)
}
