package config

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestCanonicalPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// Canonical already: returned as it is.
		{"/", "/"},
		{"/v1/quota", "/v1/quota"},
		{"/v1/chat/completions?model=gpt-4o", "/v1/chat/completions"},
		{"/a.b/..c/...", "/a.b/..c/..."},
		{"/a%2541", "/a%2541"},
		{"/what%3F", "/what%3F"},
		{"/100%", "/100%"},
		{"/a%zz", "/a%zz"},
		// The query string.
		{"/v1/quota/?model=x/..", "/v1/quota"},
		{"?x", "/"},
		{"", "/"},
		{"v1/quota", "/v1/quota"},
		{"*", "/*"},
		// Escapes: each decoded once.
		{"/v1/%71uota", "/v1/quota"},
		{"/atrl%2Freset", "/atrl/reset"},
		{"/atrl%2freset", "/atrl/reset"},
		{"/v1/chat/%63ompletions", "/v1/chat/completions"},
		{"/%2E%2e/a", "/a"},
		{"/a/%2e/b", "/a/b"},
		{"/a%252F", "/a%252F"},
		{"/a%25", "/a%"},
		{"/a%3fb", "/a%3Fb"},
		{"/a%20b%00", "/a b\x00"},
		{"/%E2%82%AC", "/€"},
		{"/%ff", "/\xff"},
		// Malformed escapes: kept, the rest normalised.
		{"/a%zz//b/", "/a%zz/b"},
		{"/a%/../b", "/b"},
		{"/a%4", "/a%4"},
		{"/a%", "/a%"},
		{"//a%4%31", "/a%2541"},
		{"/a%%41", "/a%A"},
		{"/a%%2541", "/a%%2541"},
		// Slashes and dot segments.
		{"//v1/quota", "/v1/quota"},
		{"/v1//quota///", "/v1/quota"},
		{"/v1/./quota", "/v1/quota"},
		{"/x/../atrl/reset", "/atrl/reset"},
		{"/../../a", "/a"},
		{"/a/b/..", "/a"},
		{"/a/b/.", "/a/b"},
		{"/..", "/"},
		{"///", "/"},
		{"/./", "/"},
		{"/a/..%2F..%2F..%2Fb", "/b"},
	} {
		if got := CanonicalPath(tc.in); got != tc.want {
			t.Errorf("CanonicalPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := CanonicalPath(tc.want); got != tc.want {
			t.Errorf("CanonicalPath(%q) = %q: not canonical", tc.want, got)
		}
	}
}

// A canonical path, the common case, costs no allocation, with or without
// a query string.
func TestCanonicalPathAllocations(t *testing.T) {
	for _, p := range []string{"/v1/chat/completions", "/v1/chat/completions?api-version=2024-10-21", "/", "/a%2541/%3F"} {
		if n := testing.AllocsPerRun(100, func() { CanonicalPath(p) }); n != 0 {
			t.Errorf("CanonicalPath(%q): %v allocations", p, n)
		}
	}
}

// refCanonicalPath is what CanonicalPath means, from the standard library:
// the path before its query, unescaped by net/url, cleaned by path.Clean.
// ok is false for a path with a malformed escape, which net/url refuses.
func refCanonicalPath(p string) (string, bool) {
	p, _, _ = strings.Cut(p, "?")
	u, err := url.PathUnescape(p)
	if err != nil {
		return "", false
	}
	return path.Clean("/" + u), true
}

func FuzzCanonicalPath(f *testing.F) {
	for _, p := range []string{"/v1/quota", "//atrl/reset", "/atrl%2Freset", "/atrl/./status?x=1",
		"/x/../atrl/reset", "/a%4%31", "/a%%2541", "/a%3f%25%zz/", "", "../a/./b//c/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c := CanonicalPath(p)
		if c == "" || c[0] != '/' {
			t.Fatalf("CanonicalPath(%q) = %q: not a path", p, c)
		}
		if again := CanonicalPath(c); again != c {
			t.Fatalf("CanonicalPath(%q) = %q, but CanonicalPath(%q) = %q", p, c, c, again)
		}
		if !isCanonical(c) {
			t.Fatalf("CanonicalPath(%q) = %q, which is not returned without a copy", p, c)
		}
		if beforeQuery, _, _ := strings.Cut(p, "?"); isCanonical(beforeQuery) && c != beforeQuery {
			t.Fatalf("CanonicalPath(%q) = %q, yet %q is canonical", p, c, beforeQuery)
		}
		if want, ok := refCanonicalPath(p); ok && decodePath(c) != want {
			t.Fatalf("CanonicalPath(%q) = %q, which reads %q; net/url and path.Clean give %q", p, c, decodePath(c), want)
		}
	})
}

// The endpoints' paths are written as routers read them: a request's
// canonical path is compared with them as they are.
func TestEndpointPathsMustBeCanonical(t *testing.T) {
	for _, p := range []string{"/v1//quota", "/v1/./quota", "/v1/%71uota", "/a/../quota"} {
		_, err := Parse(gjson.Parse(`{"rule_name":"r","quota_path":"` + p + `","global_threshold":{"token_per_minute":1},` + redisOK + `}`))
		require.ErrorContains(t, err, "quota_path: must be written as routers read it", p)
	}
	mustParse(t, `{"rule_name":"r","quota_path":"/v1/quota","global_threshold":{"token_per_minute":1},`+redisOK+`}`)
}
