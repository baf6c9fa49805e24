package config

import (
	"net/url"
	"strings"
)

// values returns the request's value for a non-IP rule item, "" if
// absent: for a query parameter or a cookie sent more than once, its first
// and its last values; for a header and a model, its value twice. Header
// values are returned as sent: matchValue normalises them.
func (it *RuleItem) values(r Request) (first, last string) {
	switch it.Type {
	case ByHeader, ByPerHeader, ByConsumer, ByPerConsumer:
		v := r.Header(it.Name)
		return v, v
	case ByModel, ByPerModel:
		v := r.Model()
		if v == UnknownModel {
			return "", "" // matched by every key: see appendUnknownModel
		}
		return v, v
	case ByParam, ByPerParam:
		first, last, _ = QueryParam(r.Path(), it.Name)
	case ByCookie, ByPerCookie:
		first, last, _ = CookieValue(r.Header(CookieHeader), it.Name)
	case ByAPIKey, ByPerAPIKey:
		keys, n := APIKeys(r)
		if n > 0 {
			first, last = keys[0], keys[n-1]
		}
	}
	return first, last
}

// CookieValue returns the values of the first and of the last cookie called
// name in a Cookie header (the same when there is one): the header is split
// on ';', each pair at its first '=', and the name and value are trimmed of
// spaces (RFC 6265 §5.2). Pairs without '=' are skipped. A value in double
// quotes (a cookie-value's DQUOTE form, RFC 6265 §4.1.1) is returned
// without them, one pair stripped, as Go's net/http and Python's
// http.cookies read it: `"abc"` is abc, `""` empty, a lone `"` kept. The
// values are not otherwise decoded.
func CookieValue(cookieHeader, name string) (first, last string, ok bool) {
	for rest := cookieHeader; rest != ""; {
		pair := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			pair, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if i := strings.IndexByte(pair, '='); i >= 0 && trimSpace(pair[:i]) == name {
			last = unquoteCookie(trimSpace(pair[i+1:]))
			if !ok {
				first, ok = last, true
			}
		}
	}
	return first, last, ok
}

// unquoteCookie strips one pair of double quotes surrounding a cookie's
// value.
func unquoteCookie(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// QueryParam returns the first and the last values of the query parameter
// name in path (the :path pseudo-header; the same value twice when it
// occurs once), decoded as net/url.ParseQuery does, which is what Higress
// uses: the query is what follows the first '?' up to any '#', pairs are
// separated by '&', names and values are percent-decoded with '+' meaning
// space, and names are compared after decoding. Like ParseQuery, it skips
// pairs containing ';' and pairs with a bad percent escape (in the name or
// the value), so such a pair never counts.
func QueryParam(path, name string) (first, last string, ok bool) {
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	i := strings.IndexByte(path, '?')
	if i < 0 {
		return "", "", false
	}
	for q := path[i+1:]; q != ""; {
		pair := q
		if j := strings.IndexByte(q, '&'); j >= 0 {
			pair, q = q[:j], q[j+1:]
		} else {
			q = ""
		}
		if pair == "" || strings.IndexByte(pair, ';') >= 0 {
			continue
		}
		k, v := pair, ""
		if j := strings.IndexByte(pair, '='); j >= 0 {
			k, v = pair[:j], pair[j+1:]
		}
		if !validEscapes(v) || !queryNameIs(k, name) {
			continue
		}
		last = v
		if !ok {
			first, ok = v, true
		}
	}
	if !ok {
		return "", "", false
	}
	// QueryUnescape does not allocate when there is nothing to decode, and
	// cannot fail on values with valid escapes.
	same := first == last
	first, _ = url.QueryUnescape(first)
	if same {
		return first, first, true
	}
	last, _ = url.QueryUnescape(last)
	return first, last, true
}

// validEscapes reports whether every '%' in s starts an escape: two hex
// digits follow it.
func validEscapes(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; {
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		j := strings.IndexByte(s[i+3:], '%')
		if j < 0 {
			break
		}
		i += 3 + j
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// queryNameIs reports whether the raw query parameter name k decodes to name.
func queryNameIs(k, name string) bool {
	if len(k) < len(name) { // decoding never makes a name longer
		return false
	}
	if strings.IndexByte(k, '%') < 0 && strings.IndexByte(k, '+') < 0 {
		return k == name
	}
	u, err := url.QueryUnescape(k)
	return err == nil && u == name
}
