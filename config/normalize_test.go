package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 25, point 4: values that every upstream reads as one credential are
// one subject. A cookie's value is read without its surrounding double
// quotes (Go's net/http, Python's http.cookies), and a header's without
// surrounding whitespace; an Authorization header's scheme is
// case-insensitive (RFC 9110 §11.1) and any whitespace may separate it from
// the credentials. Keyed on the bytes as sent, a client doubled its budget
// by quoting its session, and reached a fresh one with every spelling of
// "Bearer".

func TestCookieValueUnquoted(t *testing.T) {
	tests := []struct {
		header, first, last string
		ok                  bool
	}{
		{`session="abc"`, "abc", "abc", true},
		{`session=abc`, "abc", "abc", true},
		{` session = "abc" ;`, "abc", "abc", true},  // trimmed, then unquoted
		{`session=""`, "", "", true},                // an empty quoted value is empty
		{`session="`, `"`, `"`, true},               // a lone quote is no pair
		{`session=""abc""`, `"abc"`, `"abc"`, true}, // exactly one pair
		{`session="abc`, `"abc`, `"abc`, true},
		{`session=abc"`, `abc"`, `abc"`, true},
		{`session=" a b "`, " a b ", " a b ", true}, // what is inside is kept
		{`session=a"b"`, `a"b"`, `a"b"`, true},
		{`session="abc"; session="def"`, "abc", "def", true}, // repeated: the first and the last
		{`session="abc"; session=x; session=abc`, "abc", "abc", true},
		{`session="abc"; session=""`, "abc", "", true},
	}
	for _, tt := range tests {
		first, last, ok := CookieValue(tt.header, "session")
		require.Equal(t, tt.ok, ok, tt.header)
		require.Equal(t, tt.first, first, tt.header)
		require.Equal(t, tt.last, last, tt.header)
	}
}

func TestMatchQuotedCookieIsTheSameSubject(t *testing.T) {
	for _, mode := range []string{"first", "all"} {
		t.Run(mode, func(t *testing.T) {
			c := mustParse(t, `{"rule_name":"r","rule_match_mode":"`+mode+`","rule_items":[
				{"limit_by_cookie":"session","limit_keys":[{"key":"vip","token_per_minute":1}]},
				{"limit_by_per_cookie":"session","limit_keys":[{"key":"*","token_per_minute":2}]}],`+redisOK+`}`)
			perCookie := func(v string) []string { return []string{"limit_by_per_cookie#1/*=" + v} }
			vip := []string{"limit_by_cookie#0/vip=vip"}
			if mode == "all" {
				vip = append(vip, "limit_by_per_cookie#1/*=vip")
			}
			for _, tt := range []struct {
				cookie string
				want   []string
			}{
				{`session=abc`, perCookie("abc")},
				{`session="abc"`, perCookie("abc")},
				{`lang=en; session="abc"`, perCookie("abc")},
				{`session="abc"; session=abc`, perCookie("abc")}, // both readings, one subject
				{`session=""`, nil},                              // empty: matches nothing
				{`session="`, perCookie(`"`)},
				// A quoted value does not escape an exact key's stricter limit.
				{`session=vip`, vip},
				{`session="vip"`, vip},
			} {
				require.Equal(t, tt.want, matchesDesc(c, req("/", "", "cookie", tt.cookie)), tt.cookie)
			}
		})
	}
}

func TestMatchAuthorizationIsTheSameSubject(t *testing.T) {
	for _, header := range []string{"authorization", "proxy-authorization"} {
		t.Run(header, func(t *testing.T) {
			c := mustParse(t, withItems(`{"limit_by_per_header":"`+header+`","limit_keys":[{"key":"*","token_per_minute":1}]}`))
			for _, tt := range []struct{ value, subject string }{
				{"Bearer x", "Bearer x"},
				{"bearer  x", "Bearer x"},
				{" Bearer\tx ", "Bearer x"},
				{"BEARER x", "Bearer x"},
				{"bEaReR \t x", "Bearer x"},
				{"Bearer X", "Bearer X"}, // credentials are case-sensitive
				{"Bearer a  b", "Bearer a  b"},
				{"Basic abc", "Basic abc"},
				{"basic abc", "Basic abc"},
				{"Basic QUJD", "Basic QUJD"},
				{"Digest username=\"A\"", "Digest username=\"A\""},
				{"digest username=\"A\"", "Digest username=\"A\""},
				{"Token abc", "token abc"}, // an unregistered scheme: lower-case
				{"tOKEN\tabc", "token abc"},
				{"token abc", "token abc"},
				{"Bearer", "Bearer"}, // no space: only trimmed
				{" bearer\t", "bearer"},
				{"sk-Abc", "sk-Abc"},
				{"\t", ""}, // blank: absent
			} {
				want := []string(nil)
				if tt.subject != "" {
					want = []string{"limit_by_per_header#0/*=" + tt.subject}
				}
				require.Equal(t, want, matchesDesc(c, req("/", "", header, tt.value)), "%q", tt.value)
			}
		})
	}
}

func TestMatchHeaderValuesAreTrimmed(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_match_mode":"all","rule_items":[
		{"limit_by_header":"x-api-key","limit_keys":[{"key":"sk-gold","token_per_minute":1}]},
		{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"*","token_per_minute":2}]},
		{"limit_by_consumer":"","limit_keys":[{"key":"alice","token_per_minute":3}]},
		{"limit_by_per_consumer":"","limit_keys":[{"key":"regexp:^al","token_per_minute":4}]},
		{"limit_by_header":"authorization","limit_keys":[{"key":"Bearer sk-gold","token_per_minute":5},{"key":"regexp:^Basic ","token_per_minute":6}]}],`+redisOK+`}`)
	for _, tt := range []struct {
		r    *fakeRequest
		want []string
	}{
		{req("/", "", "x-api-key", " sk-gold\t"), []string{"limit_by_header#0/sk-gold=sk-gold", "limit_by_per_header#1/*=sk-gold"}},
		// Only the authorization headers have a scheme.
		{req("/", "", "x-api-key", "Bearer  x"), []string{"limit_by_per_header#1/*=Bearer  x"}},
		{req("/", "", "x-mse-consumer", "\talice "), []string{"limit_by_consumer#2/alice=alice", "limit_by_per_consumer#3/regexp:^al=alice"}},
		// Keys match the normalised value.
		{req("/", "", "authorization", "bearer   sk-gold"), []string{"limit_by_header#4/Bearer sk-gold=Bearer sk-gold"}},
		{req("/", "", "authorization", "BASIC abc"), []string{"limit_by_header#4/regexp:^Basic =regexp:^Basic "}},
		{req("/", "", "authorization", "Bearer sk-Gold"), nil},
	} {
		require.Equal(t, tt.want, matchesDesc(c, tt.r), "%v", tt.r.headers)
	}
}

// An operator names a subject by the value a request would carry: any
// spelling of it that requests share names their subject.
func TestResolveNormalisesHeaderValues(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_header":"authorization","limit_keys":[{"key":"*","token_per_minute":1}]},
		{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"*","token_per_minute":1}]},
		{"limit_by_per_cookie":"session","limit_keys":[{"key":"*","token_per_minute":1}]}`))
	want, ok := c.Match(req("/", "", "authorization", "Bearer x"))
	require.True(t, ok)
	for _, v := range []string{"Bearer x", "Bearer  x", "bearer x", " BEARER\tx "} {
		m, err := c.Resolve(SubjectRef{Item: 0, Value: v})
		require.NoError(t, err, v)
		require.Equal(t, []Match{want}, m, "%q", v)
	}
	m, err := c.Resolve(SubjectRef{Item: 1, Value: " sk-1 "})
	require.NoError(t, err)
	require.Equal(t, "sk-1", m[0].Value)
	// A cookie's value is named as the status shows it: unquoted.
	m, err = c.Resolve(SubjectRef{Item: 2, Value: "abc"})
	require.NoError(t, err)
	want, _ = c.Match(req("/", "", "cookie", `session="abc"`))
	require.Equal(t, []Match{want}, m)
}

func TestMatchNormalisedAllocations(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_match_mode":"all","rule_items":[
		{"limit_by_per_header":"authorization","limit_keys":[{"key":"*","token_per_minute":1}]},
		{"limit_by_per_cookie":"session","limit_keys":[{"key":"*","token_per_minute":2}]}],`+redisOK+`}`)
	dst := make([]Match, 0, 4)
	for _, tt := range []struct {
		r      *fakeRequest
		allocs float64
	}{
		{req("/", "", "authorization", "Bearer sk-abcdef", "cookie", "session=abc"), 0},
		{req("/", "", "authorization", "  Bearer sk-abcdef ", "cookie", `session="abc"`), 0}, // trimming and unquoting cut
		{req("/", "", "authorization", "Basic QUJD"), 0},
		{req("/", "", "authorization", "bearer sk-abcdef"), 1}, // respelled
		{req("/", "", "authorization", "Bearer  sk-abcdef"), 1},
		{req("/", "", "authorization", "token abc"), 0},
	} {
		require.Equal(t, tt.allocs, testing.AllocsPerRun(100, func() { dst = c.MatchAll(tt.r, dst[:0]) }), "%v", tt.r.headers)
	}
}

// refCanonicalCredentials is a straightforward reference for
// canonicalCredentials, up to the spelling of the scheme: its scheme
// lower-cased.
func refCanonicalCredentials(v string) string {
	v = strings.Trim(v, " \t")
	i := strings.IndexAny(v, " \t")
	if i < 0 {
		return v
	}
	var scheme []byte
	for _, c := range []byte(v[:i]) {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		scheme = append(scheme, c)
	}
	return string(scheme) + " " + strings.TrimLeft(v[i:], " \t")
}

// lowerScheme lower-cases the ASCII letters before the first space.
func lowerScheme(v string) string {
	scheme, credentials, found := strings.Cut(v, " ")
	if !found {
		return v
	}
	return refCanonicalCredentials(scheme + " x")[:len(scheme)] + " " + credentials
}

func FuzzAuthorizationNormalized(f *testing.F) {
	f.Add("Bearer sk-1", " \t", uint8(0))
	f.Add(" bearer\t\tsk-1 ", "  ", uint8(1))
	f.Add("Basic QUJD", "\t", uint8(2))
	f.Add("Token a b ", " ", uint8(3))
	f.Add("Bearer", "", uint8(0))
	f.Add("\u017fcheme x", " ", uint8(0))
	items := []RuleItem{{Type: ByPerHeader, Name: authorizationHeader}, {Type: ByHeader, Name: proxyAuthorizationHeader}, {Type: ByPerHeader, Name: "x-api-key"}, {Type: ByPerConsumer, Name: ConsumerHeader}}
	f.Fuzz(func(t *testing.T, v, space string, which uint8) {
		it := &items[int(which)%len(items)]
		n := it.normalize(v)
		if it.normalize(n) != n {
			t.Fatalf("normalize(%q) = %q, not idempotent: %q", v, n, it.normalize(n))
		}
		if strings.Trim(n, " \t") != n {
			t.Fatalf("normalize(%q) = %q: not trimmed", v, n)
		}
		if it.Name != authorizationHeader && it.Name != proxyAuthorizationHeader {
			if n != strings.Trim(v, " \t") {
				t.Fatalf("normalize(%q) = %q, want it trimmed only", v, n)
			}
			return
		}
		if want := refCanonicalCredentials(v); lowerScheme(n) != want {
			t.Fatalf("normalize(%q) = %q, want %q up to the scheme's case", v, n, want)
		}
		// Respelled, with other whitespace around and after its scheme, the
		// value names the same subject.
		space = strings.Map(func(r rune) rune {
			if r == '\t' {
				return r
			}
			return ' '
		}, space)
		if space == "" {
			space = " "
		}
		if scheme, credentials, found := strings.Cut(n, " "); found {
			// ASCII letters only, byte by byte: Unicode's case mapping
			// would make "ſ" an "S", and strings.Map invalid UTF-8 U+FFFD.
			swapped := []byte(scheme)
			for i, c := range swapped {
				switch {
				case 'a' <= c && c <= 'z':
					swapped[i] = c - 'a' + 'A'
				case 'A' <= c && c <= 'Z':
					swapped[i] = c - 'A' + 'a'
				}
			}
			respelled := space + string(swapped) + space + credentials + space
			if got := it.normalize(respelled); got != n {
				t.Fatalf("normalize(%q) = %q, but normalize(%q) = %q", v, n, respelled, got)
			}
		}
	})
}

// An exact key is normalised as the values it matches are: written
// "bearer  sk-1", it is the key of "Bearer sk-1".
func TestExactKeysAreNormalised(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_items":[{"limit_by_header":"authorization","limit_keys":[{"key":"bearer  sk-1","token_per_minute":10}]},
		{"limit_by_header":"x-team","limit_keys":[{"key":" blue ","token_per_minute":10}]}],`+redisOK+`}`)
	require.Equal(t, "Bearer sk-1", c.Items[0].Keys[0].Key)
	require.Equal(t, "blue", c.Items[1].Keys[0].Key)
	m, ok := c.Match(req("/", "", "authorization", "Bearer sk-1"))
	require.True(t, ok)
	require.Equal(t, "Bearer sk-1", m.Value)
}
