package config

import "strings"

// The headers whose value is "<scheme> <credentials>" (RFC 9110 §11.6).
const (
	authorizationHeader      = "authorization"
	proxyAuthorizationHeader = "proxy-authorization"
)

// normalize returns a value of the rule item as the upstreams read it, so
// that the spellings they all read as one value are one subject. Keys are
// matched against the normalised value: an exact key names it in that
// spelling (`Bearer sk-1`, not `bearer  sk-1`), and a regexp sees it so.
// A header's value (limit_by_header,
// limit_by_consumer and their per_ types) is trimmed of surrounding
// whitespace, and an Authorization or Proxy-Authorization value's scheme
// respelled (see canonicalCredentials). Other values are returned as they
// are: a cookie's is unquoted by CookieValue, a parameter's decoded by
// QueryParam. normalize is idempotent, and allocates only when it
// respells a scheme or the whitespace after it.
func (it *RuleItem) normalize(v string) string {
	switch it.Type {
	case ByAPIKey, ByPerAPIKey:
		v = apiKeyValue(v)
	case ByHeader, ByPerHeader, ByConsumer, ByPerConsumer:
		v = trimOWS(v)
		if it.Name == authorizationHeader || it.Name == proxyAuthorizationHeader {
			v = canonicalCredentials(v)
		}
	}
	return v
}

// registeredSchemes are the authentication schemes spelled as their RFCs
// spell them in canonicalCredentials: Bearer (RFC 6750), Basic (RFC 7617),
// Digest (RFC 7616), Negotiate (RFC 4559). Clients send them so, and a
// value already canonical costs no allocation.
var registeredSchemes = [...]string{"Bearer", "Basic", "Digest", "Negotiate"}

// canonicalCredentials respells a trimmed "<scheme> <credentials>" value
// as one spelling of what every upstream reads: the scheme is
// case-insensitive (RFC 9110 §11.1) and any spaces and tabs may separate
// it from the credentials. The result is the scheme, written as
// registeredSchemes spells it when it is one of them (ASCII case
// ignored), else lower-cased; one space; the credentials byte for byte
// (they are case-sensitive). A value without a space or tab has no scheme
// and is returned as it is.
func canonicalCredentials(v string) string {
	i := strings.IndexAny(v, " \t")
	if i < 0 {
		return v
	}
	scheme, credentials := v[:i], trimOWS(v[i:])
	spelling, lower := "", true // the registered spelling, or the scheme to lower-case
	for _, s := range registeredSchemes {
		if equalFoldASCII(scheme, s) {
			spelling, lower = s, false
			break
		}
	}
	schemeSpelled := spelling == scheme || lower && !hasUpperASCII(scheme)
	oneSpace := v[i] == ' ' && len(v)-len(credentials) == i+1
	if schemeSpelled && oneSpace {
		return v // canonical already: no allocation
	}
	var b strings.Builder
	b.Grow(len(scheme) + 1 + len(credentials))
	if lower {
		for j := 0; j < len(scheme); j++ {
			b.WriteByte(toLowerASCII(scheme[j]))
		}
	} else {
		b.WriteString(spelling)
	}
	b.WriteByte(' ')
	b.WriteString(credentials)
	return b.String()
}

// equalFoldASCII reports whether a and b are equal, ASCII letters compared
// case-insensitively (and no other folding: strings.EqualFold would take
// the long s, U+017F, for an s).
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if toLowerASCII(a[i]) != toLowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func hasUpperASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// trimOWS trims spaces and tabs, the optional whitespace around an HTTP
// field value (RFC 9110 §5.5).
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// trimSpace trims ASCII white space (space, \t, \n, \v, \f, \r).
func trimSpace(s string) string {
	for s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	for s != "" && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
