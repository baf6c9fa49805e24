package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The conversion of the database's patterns (MatchLogic), which say which
// model, and which provider, a name is.
//
// Rule 6, patterns: the library lowercases the name and each text of
// equals, starts_with, ends_with and contains (its f function); the
// generator writes those texts lowercased, and pricing lowercases the
// name. A regex is tested as the library does, unanchored against the
// lowercased name, as written.
//
// Rule 7, regexes: JavaScript's regexes have lookaheads, Go's RE2 does
// not. A regex starting with a negative lookahead, ^(?!L)R, becomes "not
// ^(?:L)" and "^(?:R)" (and R's own leading lookahead the same way): both
// match at the start of the name only, as the original does, R with no
// alternation of its own at its top (which the ^ would not cover). Any
// other regex must compile in Go as written; one that does not fails the
// generation, so that a refresh cannot silently drop a model or a
// provider.

// clause is a converted pattern: op names pricing's matchOp (matchEquals,
// ...), text its text, of its parts.
type clause struct {
	op   string
	text string
	of   []clause
}

// noMatch is a provider without a pattern.
var noMatch = clause{op: "matchNone"}

// readMatch converts a MatchLogic; absent, it is noMatch.
func readMatch(raw json.RawMessage) (clause, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return noMatch, nil
	}
	var m map[string]json.RawMessage
	if err := decodeStrict(raw, &m); err != nil || len(m) != 1 {
		return clause{}, fmt.Errorf("pattern %s: not one of and, or, equals, starts_with, ends_with, contains, regex", raw)
	}
	for key, value := range m {
		switch key {
		case "and", "or":
			var parts []json.RawMessage
			if err := decodeStrict(value, &parts); err != nil {
				return clause{}, fmt.Errorf("pattern %s: %w", raw, err)
			}
			c := clause{op: map[string]string{"and": "matchAnd", "or": "matchOr"}[key]}
			for _, part := range parts {
				pc, err := readMatch(part)
				if err != nil {
					return clause{}, err
				}
				c.of = append(c.of, pc)
			}
			return c, nil
		case "equals", "starts_with", "ends_with", "contains", "regex":
			var text string
			if err := decodeStrict(value, &text); err != nil {
				return clause{}, fmt.Errorf("pattern %s: %w", raw, err)
			}
			if key == "regex" {
				return convertRegexp(text)
			}
			op := map[string]string{"equals": "matchEquals", "starts_with": "matchStartsWith", "ends_with": "matchEndsWith", "contains": "matchContains"}[key]
			return clause{op: op, text: strings.ToLower(text)}, nil
		}
	}
	return clause{}, fmt.Errorf("pattern %s: not one of and, or, equals, starts_with, ends_with, contains, regex", raw)
}

// convertRegexp converts a regex of the database to RE2 (rule 7).
func convertRegexp(re string) (clause, error) {
	if !strings.HasPrefix(re, "^(?!") {
		if _, err := regexp.Compile(re); err != nil {
			return clause{}, fmt.Errorf("regex %q: RE2 cannot compile it and no rule of the generator rewrites it: %v", re, err)
		}
		return clause{op: "matchRegexp", text: re}, nil
	}
	end, err := groupEnd(re)
	if err != nil {
		return clause{}, fmt.Errorf("regex %q: %v", re, err)
	}
	look, rest := re[len("^(?!"):end], re[end+1:]
	if alternation(rest) {
		return clause{}, fmt.Errorf("regex %q: an alternation after the lookahead; no rule of the generator rewrites it", re)
	}
	lookahead, err := convertRegexp("^(?:" + look + ")")
	if err != nil {
		return clause{}, fmt.Errorf("regex %q: its lookahead: %w", re, err)
	}
	not := clause{op: "matchNot", of: []clause{lookahead}}
	if rest == "" {
		return not, nil
	}
	after, err := convertRegexp("^" + rest)
	if err != nil {
		return clause{}, err
	}
	return clause{op: "matchAnd", of: []clause{not, after}}, nil
}

// groupEnd is the index of the parenthesis closing the group that opens
// the regex after its ^.
func groupEnd(re string) (int, error) {
	end := -1
	structure(re, func(i int, c byte, depth int) bool {
		if c == ')' && depth == 0 {
			end = i
		}
		return end < 0
	})
	if end < 0 {
		return 0, fmt.Errorf("unbalanced parentheses")
	}
	return end, nil
}

// alternation reports whether a regex has a | outside every group.
func alternation(re string) bool {
	found := false
	structure(re, func(_ int, c byte, depth int) bool {
		found = c == '|' && depth == 0
		return !found
	})
	return found
}

// structure calls visit with each parenthesis and bar of a regex outside
// escapes and character classes, and the depth of the groups around it
// (an opening parenthesis's before it, a closing one's after it), until
// visit returns false.
func structure(re string, visit func(i int, c byte, depth int) bool) {
	depth := 0
	for i := 0; i < len(re); i++ {
		switch c := re[i]; c {
		case '\\':
			i++
		case '[':
			for i++; i < len(re) && re[i] != ']'; i++ {
				if re[i] == '\\' {
					i++
				}
			}
		case '(', ')', '|':
			if c == ')' {
				depth--
			}
			if !visit(i, c, depth) {
				return
			}
			if c == '(' {
				depth++
			}
		}
	}
}
