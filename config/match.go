package config

import (
	"net/netip"
	"net/url"
	"strings"
)

// Request is what the matcher reads from one HTTP request. The plugin
// implements it over proxy-wasm; tests use a fake.
type Request interface {
	// Header returns the value of the header with the given lower-case
	// name, or "" when it is absent.
	Header(name string) string
	// Path returns the :path pseudo-header, query string included.
	Path() string
	// PeerAddress returns the connection's peer as Envoy's source.address
	// property gives it: "ip:port", "[v6]:port" or a bare IP.
	PeerAddress() string
}

// Match is the outcome of Config.Match.
type Match struct {
	// Item is the matching rule item, nil for the global threshold.
	Item *RuleItem
	// Key is the matching limit key (Config.Global for the global threshold).
	Key *LimitKey
	// Value identifies the limited subject: for the limit_by_per_* types the
	// request's value (for limit_by_per_ip the canonical IP string), for the
	// other types the configured Key, so that all requests matching the key
	// share one counter, and "" for the global threshold.
	Value string
}

// Match returns the limit that applies to r: the global threshold if
// configured, otherwise the first rule item, in order, whose value is present
// in the request and matched by one of its keys (the first that matches, in
// order). ok is false when no rule applies.
func (c *Config) Match(r Request) (m Match, ok bool) {
	if c.Global != nil {
		return Match{Key: c.Global}, true
	}
	for i := range c.Items {
		if m, ok = c.matchItem(&c.Items[i], r); ok {
			return m, true
		}
	}
	return Match{}, false
}

// matchItem matches one rule item: its first key that matches the request's value.
func (c *Config) matchItem(it *RuleItem, r Request) (Match, bool) {
	if it.Type == ByPerIP {
		return c.matchIP(it, r)
	}
	v := it.value(r)
	if v == "" {
		return Match{}, false
	}
	for j := range it.Keys {
		k := &it.Keys[j]
		if !k.matchString(v) {
			continue
		}
		if !it.Type.PerValue() {
			v = k.Key
		}
		return Match{Item: it, Key: k, Value: v}, true
	}
	return Match{}, false
}

// MatchAll appends to dst every limit that applies to r under
// rule_match_mode "all": the global threshold, or each rule item whose value
// is present and matched by one of its keys (the first that matches), in
// configuration order. Under "first" it appends at most one, as Match.
func (c *Config) MatchAll(r Request, dst []Match) []Match {
	if c.MatchMode == MatchFirst || c.Global != nil {
		if m, ok := c.Match(r); ok {
			dst = append(dst, m)
		}
		return dst
	}
	for i := range c.Items {
		if m, ok := c.matchItem(&c.Items[i], r); ok {
			dst = append(dst, m)
		}
	}
	return dst
}

func (c *Config) matchIP(it *RuleItem, r Request) (Match, bool) {
	addr, ok := ClientIP(r, it.Name, c.XFFTrustedHops)
	if !ok {
		return Match{}, false
	}
	var s string // addr.String(), computed at most once
	for j := range it.Keys {
		k := &it.Keys[j]
		switch k.Kind {
		case KeyAny:
		case KeyIPNet:
			if !k.Prefix.Contains(addr) {
				continue
			}
		case KeyRegexp:
			if s == "" {
				s = addr.String()
			}
			if !k.Regexp.MatchString(s) {
				continue
			}
		default:
			continue
		}
		if s == "" {
			s = addr.String()
		}
		return Match{Item: it, Key: k, Value: s}, true
	}
	return Match{}, false
}

// value returns the request's value for a non-IP rule item, "" if absent.
func (it *RuleItem) value(r Request) string {
	switch it.Type {
	case ByHeader, ByPerHeader, ByConsumer, ByPerConsumer:
		return r.Header(it.Name)
	case ByParam, ByPerParam:
		v, _ := QueryParam(r.Path(), it.Name)
		return v
	case ByCookie, ByPerCookie:
		v, _ := CookieValue(r.Header(CookieHeader), it.Name)
		return v
	}
	return ""
}

func (k *LimitKey) matchString(v string) bool {
	switch k.Kind {
	case KeyAny:
		return true
	case KeyExact:
		return v == k.Key
	case KeyRegexp:
		return k.Regexp.MatchString(v)
	}
	return false
}

// CookieValue returns the value of the first cookie called name in a Cookie
// header: the header is split on ';', each pair at its first '=', and the
// name and value are trimmed of spaces (RFC 6265 §5.2). Pairs without '='
// are skipped. The value is returned as is (no unquoting or decoding).
func CookieValue(cookieHeader, name string) (string, bool) {
	for rest := cookieHeader; rest != ""; {
		pair := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			pair, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if i := strings.IndexByte(pair, '='); i >= 0 && trimSpace(pair[:i]) == name {
			return trimSpace(pair[i+1:]), true
		}
	}
	return "", false
}

// QueryParam returns the first value of the query parameter name in path
// (the :path pseudo-header), decoded as net/url.ParseQuery does, which is
// what Higress uses: the query is what follows the first '?' up to any '#',
// pairs are separated by '&', names and values are percent-decoded with '+'
// meaning space, and names are compared after decoding. Like ParseQuery, it
// skips pairs containing ';' and pairs with a bad percent escape (in the name
// or the value), so such a pair never matches.
func QueryParam(path, name string) (string, bool) {
	if i := strings.IndexByte(path, '#'); i >= 0 {
		path = path[:i]
	}
	i := strings.IndexByte(path, '?')
	if i < 0 {
		return "", false
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
		if !queryNameIs(k, name) {
			continue
		}
		// QueryUnescape does not allocate when there is nothing to decode.
		v, err := url.QueryUnescape(v)
		if err != nil {
			continue
		}
		return v, true
	}
	return "", false
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

// ClientIP returns the client IP of r for a limit_by_per_ip rule reading
// headerName ("" for the connection's peer address).
//
// The header value is a comma-separated list. With trustedHops < 0 (unset),
// or for a header other than x-forwarded-for, the left-most entry is used, as
// Higress does (for x-forwarded-for it is client-writable, so spoofable); an
// absent or unparsable entry gives ok == false.
//
// For x-forwarded-for with trustedHops = N >= 0, the client is the (N+1)-th
// entry from the right, as Envoy's xff_num_trusted_hops defines it; when the
// list has fewer than N+1 entries or that entry is not an IP, the peer
// address is used.
//
// Entries are trimmed of spaces and may carry a port ("1.2.3.4:567",
// "[2001:db8::1]:443") or brackets; zones are dropped and IPv4-mapped IPv6
// addresses are unmapped.
func ClientIP(r Request, headerName string, trustedHops int) (netip.Addr, bool) {
	if headerName == "" {
		return ParseIP(r.PeerAddress())
	}
	v := r.Header(headerName)
	if trustedHops >= 0 && headerName == XForwardedForHeader {
		if e, ok := nthFromRight(v, trustedHops); ok {
			if a, ok := ParseIP(e); ok {
				return a, true
			}
		}
		return ParseIP(r.PeerAddress())
	}
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return ParseIP(v)
}

// nthFromRight returns the n-th (0-based) entry from the right of a
// comma-separated list; a blank list has no entries.
func nthFromRight(list string, n int) (string, bool) {
	if trimSpace(list) == "" {
		return "", false
	}
	end := len(list)
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == ',' {
			if n == 0 {
				return list[i+1 : end], true
			}
			n--
			end = i
		}
	}
	if n == 0 {
		return list[:end], true
	}
	return "", false
}

// ParseIP parses an address as found in a forwarding header or Envoy's
// source.address: "1.2.3.4", "1.2.3.4:567", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:443", surrounded by optional spaces. Zones are dropped and
// IPv4-mapped IPv6 addresses unmapped.
func ParseIP(s string) (netip.Addr, bool) {
	s = trimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	var err error
	switch colons := strings.Count(s, ":"); {
	case s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
		if err == nil && !a.Is6() {
			return netip.Addr{}, false
		}
	case s[0] == '[' || colons == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
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
