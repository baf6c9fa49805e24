package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A small PromQL tokenizer for the dashboard test (dashboard_test.go): what
// metrics and labels an expression of the dashboard or the rule file
// names. It reads PromQL's lexical structure, not its grammar: enough to
// tell a metric's name from a function's, a keyword, a label or a string.

// promqlRefs is what one PromQL expression refers to.
type promqlRefs struct {
	metrics     []string // metric names: bare selectors, and {__name__="…"}
	nameRegexps []string // {__name__=~"…"}, as written (PromQL anchors them)
	labels      []string // label names in matchers and in by, without, on, ignoring, group_left and group_right lists
}

// promqlKeywords are PromQL's words that are not metric names when no "("
// follows them: operators, modifiers, aggregations (which a "by" or
// "without" may follow before their "("), and the number words.
var promqlKeywords = []string{
	"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}

// promqlLabelLists are the words a list of label names in parentheses follows.
var promqlLabelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// parsePromQLRefs tokenizes expr and returns the metrics and labels it
// names. Strings are skipped (a function's arguments such as
// label_replace's), except a __name__ matcher's value; so are numbers,
// durations in [...] and after offset, function names (a word followed by
// "("), keywords, comments and Grafana's variables ($var, ${var},
// [[var]]). It fails on what PromQL cannot hold: an unterminated string,
// {…} or […], a brace or bracket that closes nothing, a character outside
// PromQL's, unbalanced parentheses.
func parsePromQLRefs(expr string) (promqlRefs, error) {
	var refs promqlRefs
	l := &promqlLexer{s: expr}
	depth := 0 // of parentheses
	for {
		l.skipSpace()
		if l.i >= len(l.s) {
			break
		}
		c := l.s[l.i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := l.str(); err != nil {
				return refs, err
			}
		case c == '{':
			if err := l.matchers(&refs); err != nil {
				return refs, err
			}
		case strings.HasPrefix(l.s[l.i:], "[["): // Grafana's old variable syntax
			end := strings.Index(l.s[l.i:], "]]")
			if end < 0 {
				return refs, fmt.Errorf("unterminated [[ at %d", l.i)
			}
			l.i += end + 2
		case c == '[':
			end := strings.IndexByte(l.s[l.i:], ']')
			if end < 0 {
				return refs, fmt.Errorf("unterminated [ at %d", l.i)
			}
			l.i += end + 1
		case c == '$':
			if err := l.variable(); err != nil {
				return refs, err
			}
		case isDigit(c) || c == '.' && l.i+1 < len(l.s) && isDigit(l.s[l.i+1]):
			l.number()
		case isIdentStart(c):
			word := l.ident()
			lower := strings.ToLower(word)
			next := l.peek()
			switch {
			case slices.Contains(promqlLabelLists, lower):
				if next == '(' {
					names, err := l.labelList()
					if err != nil {
						return refs, err
					}
					refs.labels = append(refs.labels, names...)
				} else if lower != "group_left" && lower != "group_right" {
					return refs, fmt.Errorf("%q without its list of labels at %d", word, l.i)
				}
			case next == '(': // a function, or an aggregation
			case slices.Contains(promqlKeywords, lower):
			default:
				refs.metrics = append(refs.metrics, word)
			}
		case c == '(':
			depth++
			l.i++
		case c == ')':
			if depth--; depth < 0 {
				return refs, fmt.Errorf("a ) that closes nothing at %d", l.i)
			}
			l.i++
		case strings.IndexByte("+-*/%^=!<>,@:", c) >= 0:
			l.i++
		case c == '#': // a comment, to the end of the line
			if end := strings.IndexByte(l.s[l.i:], '\n'); end >= 0 {
				l.i += end
			} else {
				l.i = len(l.s)
			}
		default:
			return refs, fmt.Errorf("unexpected %q at %d", c, l.i)
		}
	}
	if depth > 0 {
		return refs, fmt.Errorf("%d ( not closed", depth)
	}
	if len(refs.metrics) == 0 && len(refs.nameRegexps) == 0 {
		return refs, fmt.Errorf("names no metric")
	}
	return refs, nil
}

type promqlLexer struct {
	s string
	i int
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }

func (l *promqlLexer) skipSpace() {
	for l.i < len(l.s) && strings.IndexByte(" \t\r\n", l.s[l.i]) >= 0 {
		l.i++
	}
}

// peek is the next character after spaces, without consuming it; 0 at the end.
func (l *promqlLexer) peek() byte {
	l.skipSpace()
	if l.i < len(l.s) {
		return l.s[l.i]
	}
	return 0
}

func (l *promqlLexer) ident() string {
	start := l.i
	for l.i < len(l.s) && isIdent(l.s[l.i]) {
		l.i++
	}
	return l.s[start:l.i]
}

// number consumes a number or a duration: 3600, 1e9, 1e-9, 0x1f, .5, 5m, 1h30m.
func (l *promqlLexer) number() {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case isIdent(c) && c != ':' || c == '.':
			l.i++
		case (c == '+' || c == '-') && (l.s[l.i-1] == 'e' || l.s[l.i-1] == 'E') && !strings.HasPrefix(strings.ToLower(l.s[:l.i]), "0x"):
			l.i++
		default:
			return
		}
	}
}

// str consumes a string literal and returns its value (escapes kept as
// written but for \" and \\, which PromQL's regexes and names rarely need).
func (l *promqlLexer) str() (string, error) {
	quote, start := l.s[l.i], l.i
	var b strings.Builder
	for l.i++; l.i < len(l.s); l.i++ {
		c := l.s[l.i]
		switch {
		case c == quote:
			l.i++
			return b.String(), nil
		case c == '\\' && quote != '`' && l.i+1 < len(l.s):
			l.i++
			if e := l.s[l.i]; e == quote || e == '\\' {
				b.WriteByte(e)
			} else {
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '\n' && quote != '`':
			return "", fmt.Errorf("a newline in the string at %d", start)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated string at %d", start)
}

// variable consumes a Grafana variable: $name, ${name}, ${name:format}.
func (l *promqlLexer) variable() error {
	start := l.i
	l.i++
	if l.i < len(l.s) && l.s[l.i] == '{' {
		end := strings.IndexByte(l.s[l.i:], '}')
		if end < 0 {
			return fmt.Errorf("unterminated ${ at %d", start)
		}
		l.i += end + 1
		return nil
	}
	if l.ident() == "" {
		return fmt.Errorf("a $ without a variable's name at %d", start)
	}
	return nil
}

// matchers consumes {…}: label matchers (name, operator, string), or a
// quoted metric name alone (Prometheus 3's {"name", …}).
func (l *promqlLexer) matchers(refs *promqlRefs) error {
	start := l.i
	l.i++
	for {
		switch l.peek() {
		case 0:
			return fmt.Errorf("unterminated { at %d", start)
		case '}':
			l.i++
			return nil
		case ',':
			l.i++
			continue
		}
		var name string
		quoted := false
		switch c := l.s[l.i]; {
		case c == '"' || c == '\'' || c == '`':
			n, err := l.str()
			if err != nil {
				return err
			}
			name, quoted = n, true
		case isIdentStart(c):
			name = l.ident()
		default:
			return fmt.Errorf("unexpected %q in the matchers at %d", c, l.i)
		}
		if c := l.peek(); quoted && (c == ',' || c == '}') {
			refs.metrics = append(refs.metrics, name)
			continue
		}
		var op string
		for _, o := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(l.s[l.i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return fmt.Errorf("no matcher's operator after %q at %d", name, l.i)
		}
		l.i += len(op)
		if c := l.peek(); c != '"' && c != '\'' && c != '`' {
			return fmt.Errorf("no string after %s%s at %d", name, op, l.i)
		}
		value, err := l.str()
		if err != nil {
			return err
		}
		switch {
		case name == "__name__" && op == "=":
			refs.metrics = append(refs.metrics, value)
		case name == "__name__" && op == "=~":
			refs.nameRegexps = append(refs.nameRegexps, value)
		case name != "__name__":
			refs.labels = append(refs.labels, name)
		}
	}
}

// labelList consumes (a, b, …) and returns the names.
func (l *promqlLexer) labelList() ([]string, error) {
	start := l.i
	l.i++ // (
	var names []string
	for {
		switch c := l.peek(); {
		case c == 0:
			return nil, fmt.Errorf("unterminated label list at %d", start)
		case c == ')':
			l.i++
			return names, nil
		case c == ',':
			l.i++
		case c == '"' || c == '\'' || c == '`':
			n, err := l.str()
			if err != nil {
				return nil, err
			}
			names = append(names, n)
		case isIdentStart(c):
			names = append(names, l.ident())
		default:
			return nil, fmt.Errorf("unexpected %q in a label list at %d", c, l.i)
		}
	}
}

func TestParsePromQLRefs(t *testing.T) {
	cases := []struct {
		expr                 string
		metrics, res, labels []string
	}{
		{
			expr:    `sum by (ai_model) (rate(route_upstream_model_consumer_metric_token_ratelimit_cost_nanodollars[5m])) * 3600 / 1e9`,
			metrics: []string{"route_upstream_model_consumer_metric_token_ratelimit_cost_nanodollars"},
			labels:  []string{"ai_model"},
		},
		{
			expr:   `histogram_quantile(0.99, sum by (le) (rate({__name__=~"redis_.+_metric_x_bucket"}[$__rate_interval])))`,
			res:    []string{"redis_.+_metric_x_bucket"},
			labels: []string{"le"},
		},
		{
			expr:    "topk(15, max by (rule, subject, window) (atrl_budget_used_tokens{subject!=\"other\"}\n / atrl_budget_limit_tokens{subject!~'other|unknown'})) >= 0.8",
			metrics: []string{"atrl_budget_used_tokens", "atrl_budget_limit_tokens"},
			labels:  []string{"rule", "subject", "window", "subject", "subject"},
		},
		{
			// Keywords, modifiers, a comment, a number with an exponent,
			// vector matching, a name with colons.
			expr:    "a offset -5m unless on(instance) group_left(pod) job:b:rate5m{job=\"x\", le=~\"1|2\"} > bool 1e-9 # sum c\n or sum without (x) (d @ start()) + Inf",
			metrics: []string{"a", "job:b:rate5m", "d"},
			labels:  []string{"instance", "pod", "job", "le", "x"},
		},
		{
			// Strings are arguments, not names; {__name__="…"} and
			// Prometheus 3's quoted name are names; a group_left without a list.
			expr:    `label_replace(count_values("sum", foo), "kind", "tokens", "", "") or {__name__="bar"} * on() group_left {"baz.q", a="1"}`,
			metrics: []string{"foo", "bar", "baz.q"},
			labels:  []string{"a"},
		},
		{
			// Grafana's variables.
			expr:    `rate(foo{a=~"$x"}[$__rate_interval]) * ${scale} + [[old]] + $__range_s`,
			metrics: []string{"foo"},
			labels:  []string{"a"},
		},
		{
			expr:    `{__name__=~"a_.+", __name__!="a_b"}[5m:1m]`,
			res:     []string{"a_.+"},
			metrics: nil,
		},
	}
	for _, c := range cases {
		refs, err := parsePromQLRefs(c.expr)
		require.NoError(t, err, c.expr)
		assert.Equal(t, c.metrics, refs.metrics, c.expr)
		assert.Equal(t, c.res, refs.nameRegexps, c.expr)
		assert.Equal(t, c.labels, refs.labels, c.expr)
	}

	for _, bad := range []string{
		``,
		`sum(rate(x[5m]))`[:14],
		`sum(rate(x[5m])))`,
		`foo{a="b"`,
		`foo{a="b}`,
		`foo{a}`,
		`foo{a=b}`,
		`rate(foo[5m)`,
		`sum(foo) }`,
		`foo; bar`,
		`sum by ai_model (foo)`,
		`vector(1) + 2`,
		`sum by (le (foo)`,
	} {
		_, err := parsePromQLRefs(bad)
		assert.Error(t, err, bad)
	}
}
