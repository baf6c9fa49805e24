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
	// Model returns the request's model, as the plugin resolved it from
	// Config.ModelSources, or "" when it names none. It is called only
	// when a rule needs it (see Config.HasModelLimits).
	Model() string
}

// HasModelLimits reports whether any limit depends on the request's model:
// a limit_by_model or limit_by_per_model rule item, or a per_model under a
// limit key, global_threshold or unmatched_threshold. Only then need the
// plugin resolve a request's model (Request.Model).
func (c *Config) HasModelLimits() bool {
	if c.Global != nil && c.Global.PerModel != nil || c.Unmatched != nil && c.Unmatched.PerModel != nil {
		return true
	}
	for i := range c.Items {
		it := &c.Items[i]
		if it.Type.ModelValued() {
			return true
		}
		for j := range it.Keys {
			if it.Keys[j].PerModel != nil {
				return true
			}
		}
	}
	return false
}

// UnknownModel is the model of a request that may name one but whose model
// cannot be told (a body no parser reads alike, or one that cannot be
// read): Request.Model returns it, and the request is limited as strictly
// as any model could be. Every per_model entry of a matched key applies,
// and every key of each limit_by_model and limit_by_per_model item, each
// in the subject of the model its key names exactly (the request counts
// against that model's budget), or for a pattern key in a subject of its
// own, named by UnknownModel and the pattern. Weighted, it costs the
// largest weight of each kind (see Cost).
const UnknownModel = "?"

// unknownModelOf is the model a request of UnknownModel is counted as by a
// key: the name an exact key gives, else UnknownModel with the pattern.
func unknownModelOf(k *LimitKey) string {
	if k.Kind == KeyExact {
		return k.Key
	}
	return UnknownModel + k.Key
}

// Match is the outcome of Config.Match.
type Match struct {
	// Item is the matching rule item, nil for the global threshold and the
	// unmatched threshold.
	Item *RuleItem
	// Key is the matching limit key (Config.Global for the global threshold,
	// Config.Unmatched for the unmatched threshold).
	Key *LimitKey
	// Value identifies the limited subject: for the limit_by_per_* types the
	// request's value, normalised as upstreams read it (see
	// RuleItem.normalize and CookieValue; for limit_by_per_ip the canonical
	// IP string, or for an IPv6 client its network's, see
	// Config.IPv6PrefixLength; for limit_by_per_model the model), for the
	// other types the configured Key, so that all requests matching the key
	// share one counter, and "" for the global and unmatched thresholds. A
	// per_model match has its parent's.
	Value string
	// Unmatched says the request matched no rule item, and Key is
	// Config.Unmatched (or, with Parent set, one of its per_model entries).
	Unmatched bool
	// Model is the request's model (Request.Model) in the matches that
	// depend on it: those of the model types, and per_model matches. ""
	// otherwise.
	Model string
	// Parent is set in a per_model match: the limit key whose per_model
	// holds Key, matched just before it (the parent match precedes it in
	// MatchAll's output). Its subject is the parent's, narrowed to Model
	// (see cachekey.AppendModel). nil otherwise.
	Parent *LimitKey
	// Shared is set when other matches of the request name the same
	// subject: they are merged into this one, which then has all their
	// limits, each window once (see Shared, and Windows, MaxConcurrent
	// and WindowFrom, which read it). nil otherwise: the limits are Key's.
	Shared *Shared
}

// Match returns the first limit MatchAll returns for r, without the
// limits it may merge into it (see Shared): the global threshold if
// configured, otherwise the first rule item, in order, whose value is
// present in the request and matched by one of its keys (the first that
// matches, in order), otherwise the unmatched threshold if configured. ok
// is false when no limit applies. Match never returns a per_model match.
func (c *Config) Match(r Request) (m Match, ok bool) {
	if c.Global != nil {
		return Match{Key: c.Global}, true
	}
	keys, n := c.apiKeys(r)
	for _, key := range keys[:max(n, 1)] {
		m, ok, repeated := c.matchFirst(r, reading{key: key})
		if !ok && repeated {
			m, ok, _ = c.matchFirst(r, reading{last: true, key: key})
		}
		if ok {
			return m, true
		}
	}
	if c.Unmatched != nil {
		return c.unmatched(), true
	}
	return Match{}, false
}

// MatchAll appends to dst every limit that applies to r: the global
// threshold, when configured, which every request counts in; then, under
// rule_match_mode "all" (the default, as Higress since 2.2.4), each rule
// item whose value is present and matched by one of its keys (the first
// that matches), in configuration order, and under "first" the first such
// item only; or, when no rule item matches, the unmatched threshold.
//
// A query parameter or cookie that the request sends more than once with
// different values is read both ways upstreams read it: as its first value
// (Go's net/url and net/http, Flask, Java servlets, Express's cookie
// parser) and as its last (PHP, Starlette, Python's http.cookies), and the
// request is limited by what each reading matches. Whichever value the
// upstream or its auth layer takes, the subject it names is charged: a
// client cannot add a value of its choosing to reach a fresh budget. The
// values in between are not read by any of those, and are ignored, which
// also bounds the subjects of a request, at two per rule item.
//
// An API-key item reads every key the request carries (APIKeys: one per
// header an API key travels in, and the parameter's first and last
// values): an upstream may read any of them. Under "all", every key one of
// the item's keys matches is limited; under "first", each key is a reading
// of its own (with each reading of a repeated parameter or cookie), and the
// first rule item that matches the request read so limits it.
//
// Matches that name the same subject (see Match.SameSubject) are one: the
// first made, with the others merged into it (see Shared), so that the
// request counts once in each of the subject's windows.
//
// Right after each match whose Key has per_model, when the request has a
// model (Request.Model), comes the first per_model entry that matches the
// model, as a match of its own: Key is the entry, Parent the matched key,
// Model the request's model, and Item, Value and Unmatched the parent's.
// The request is limited by both: the parent's limits for all its models
// together, the entry's for this model within the parent's subject. A
// request without a model matches no per_model entry, nor any
// limit_by_model or limit_by_per_model item; the rest limits it as usual.
func (c *Config) MatchAll(r Request, dst []Match) []Match {
	start := len(dst)
	if c.Global != nil {
		dst = appendMatch(dst, start, Match{Key: c.Global}, r)
	}
	items := len(dst)
	if c.MatchMode == MatchFirst {
		keys, n := c.apiKeys(r)
		for _, key := range keys[:max(n, 1)] {
			m, ok, repeated := c.matchFirst(r, reading{key: key})
			if ok {
				dst = appendMatch(dst, start, m, r)
			}
			if repeated {
				if m, ok, _ := c.matchFirst(r, reading{last: true, key: key}); ok {
					dst = appendMatch(dst, start, m, r)
				}
			}
		}
	} else {
		for i := range c.Items {
			it := &c.Items[i]
			if it.Type.ReadsAPIKey() {
				dst = appendAPIKeyMatches(dst, start, it, r)
				continue
			}
			m, ok, repeated := c.matchItem(it, r, reading{})
			if ok {
				dst = appendMatch(dst, start, m, r)
			}
			if repeated {
				if m, ok, _ := c.matchItem(it, r, reading{last: true}); ok {
					dst = appendMatch(dst, start, m, r)
				}
			}
		}
	}
	if r.Model() == UnknownModel {
		dst = c.appendUnknownModel(dst, start)
	}
	if len(dst) == items && c.Unmatched != nil {
		dst = appendMatch(dst, start, c.unmatched(), r)
	}
	return dst
}

// appendAPIKeyMatches appends a match of the item for every API key the
// request carries that one of its keys matches: each is limited.
func appendAPIKeyMatches(dst []Match, start int, it *RuleItem, r Request) []Match {
	keys, n := APIKeys(r)
	for _, v := range keys[:n] {
		if m, ok := it.matchValue(v); ok {
			dst = appendMatch(dst, start, m, r)
		}
	}
	return dst
}

// appendUnknownModel appends, for a request of UnknownModel, a match of
// every key of every limit_by_model and limit_by_per_model item, in the
// subject of the model the key names (see UnknownModel), with its per_model
// entries, whatever rule_match_mode says: which of them the request's
// model would have matched cannot be told.
func (c *Config) appendUnknownModel(dst []Match, start int) []Match {
	for i := range c.Items {
		it := &c.Items[i]
		if !it.Type.ModelValued() {
			continue
		}
		for j := range it.Keys {
			k := &it.Keys[j]
			model := unknownModelOf(k)
			value := k.Key
			if it.Type.PerValue() {
				value = model
			}
			dst = appendMatch(dst, start, Match{Item: it, Key: k, Value: value, Model: model}, unknownModelRequest{})
		}
	}
	return dst
}

// unknownModelRequest is a request of UnknownModel, for appendMatch.
type unknownModelRequest struct{ Request }

func (unknownModelRequest) Model() string { return UnknownModel }

// unmatched is the match of a request no rule item matches.
func (c *Config) unmatched() Match { return Match{Key: c.Unmatched, Unmatched: true} }

// appendMatch adds m to dst[start:] (see addMatch: a match of a subject
// already there is merged into it), then its per_model match, if any: the
// first entry of m.Key.PerModel that matches r's model.
func appendMatch(dst []Match, start int, m Match, r Request) []Match {
	dst = addMatch(dst, start, m)
	if m.Key.PerModel == nil {
		return dst
	}
	model := r.Model()
	if model == "" {
		return dst
	}
	if model == UnknownModel { // every entry: which one the model matches cannot be told
		for i := range m.Key.PerModel {
			e := &m.Key.PerModel[i]
			dst = addMatch(dst, start, Match{Item: m.Item, Key: e, Value: m.Value, Unmatched: m.Unmatched, Model: unknownModelOf(e), Parent: m.Key})
		}
		return dst
	}
	for i := range m.Key.PerModel {
		if e := &m.Key.PerModel[i]; e.matchString(model) {
			return addMatch(dst, start, Match{Item: m.Item, Key: e, Value: m.Value, Unmatched: m.Unmatched, Model: model, Parent: m.Key})
		}
	}
	return dst
}

// reading is one way of reading a request under rule_match_mode first: the
// last value of each repeated parameter or cookie if last is set, else the
// first, and key as the request's API key ("" for none).
type reading struct {
	last bool
	key  string
}

// apiKeys returns the API keys r carries (APIKeys) when a rule item reads
// them, else none.
func (c *Config) apiKeys(r Request) (keys [maxAPIKeys]string, n int) {
	for i := range c.Items {
		if c.Items[i].Type.ReadsAPIKey() {
			return APIKeys(r)
		}
	}
	return keys, 0
}

// matchFirst returns the first rule item, in order, that matches r read
// as rd says. repeated reports whether a rule item it read had a parameter
// or cookie sent more than once, with different first and last values:
// the other reading may match another item.
func (c *Config) matchFirst(r Request, rd reading) (m Match, ok, repeated bool) {
	for i := range c.Items {
		m, ok, rep := c.matchItem(&c.Items[i], r, rd)
		repeated = repeated || rep
		if ok {
			return m, true, repeated
		}
	}
	return Match{}, false, repeated
}

// matchItem matches one rule item: its first key that matches the
// request's value, read as rd says (an API-key item's value is rd.key).
// repeated reports whether the first and last values of a parameter or
// cookie differ.
func (c *Config) matchItem(it *RuleItem, r Request, rd reading) (m Match, ok, repeated bool) {
	switch {
	case it.Type == ByPerIP:
		m, ok = c.matchIP(it, r)
		return m, ok, false
	case it.Type.ReadsAPIKey():
		m, ok = it.matchValue(rd.key)
		return m, ok, false
	}
	first, lastValue := it.values(r)
	v := first
	if rd.last {
		v = lastValue
	}
	repeated = first != lastValue
	m, ok = it.matchValue(v)
	return m, ok, repeated
}

// matchValue matches a non-IP rule item's value, as a request carries it
// or an operator names it (Config.Resolve): its first key that matches v
// normalised (see normalize), which is then the subject's value; an empty
// value matches none.
func (it *RuleItem) matchValue(v string) (Match, bool) {
	v = it.normalize(v)
	k := it.keyFor(v)
	if k == nil {
		return Match{}, false
	}
	m := Match{Item: it, Key: k, Value: v}
	if it.Type.ModelValued() {
		m.Model = v
	}
	if !it.Type.PerValue() {
		m.Value = k.Key
	}
	return m, true
}

// keyFor is the first key of a non-IP rule item that matches v, a value
// normalised (see normalize): nil when none does, and for "".
func (it *RuleItem) keyFor(v string) *LimitKey {
	if v == "" {
		return nil
	}
	for j := range it.Keys {
		if k := &it.Keys[j]; k.matchString(v) {
			return k
		}
	}
	return nil
}

// matchIP matches a limit_by_per_ip item: its first key that matches the
// client's address. The subject is the address; for an IPv6 client, its
// network of IPv6PrefixLength bits, or of the key's length when the key is
// a narrower network (so that the clients of one network matching
// different keys never share a counter under different limits). Keys match
// the whole address.
func (c *Config) matchIP(it *RuleItem, r Request) (Match, bool) {
	addr, ok := ClientIP(r, it.Name, c.XFFTrustedHops)
	if !ok {
		return Match{}, false
	}
	return c.matchAddr(it, addr)
}

// matchAddr matches a limit_by_per_ip item against a client's address, as
// matchIP.
func (c *Config) matchAddr(it *RuleItem, addr netip.Addr) (Match, bool) {
	var s string // addr.String(), computed at most once
	k := it.addrKey(addr, &s)
	if k == nil {
		return Match{}, false
	}
	if bits := c.ipv6Bits(addr, k); bits < addr.BitLen() {
		var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte // one allocation, not Prefix.String's two
		return Match{Item: it, Key: k, Value: string(netip.PrefixFrom(addr, bits).Masked().AppendTo(buf[:0]))}, true
	}
	if s == "" {
		s = addr.String()
	}
	return Match{Item: it, Key: k, Value: s}, true
}

// addrKey is the first key of a limit_by_per_ip item that matches a
// client's address (nil: none). s is addr.String() once a regexp key has
// needed it, else "": it is computed at most once.
func (it *RuleItem) addrKey(addr netip.Addr, s *string) *LimitKey {
	for j := range it.Keys {
		k := &it.Keys[j]
		switch k.Kind {
		case KeyAny:
		case KeyIPNet:
			if !k.Prefix.Contains(addr) {
				continue
			}
		case KeyRegexp:
			if *s == "" {
				*s = addr.String()
			}
			if !k.matchRegexp(*s) {
				continue
			}
		default:
			continue
		}
		return k
	}
	return nil
}

// ipv6Bits is the length of the network that is the subject of addr,
// matched by k: IPv6PrefixLength for an IPv6 address, or k's length when k
// is a narrower network; the whole address for IPv4.
func (c *Config) ipv6Bits(addr netip.Addr, k *LimitKey) int {
	if !addr.Is6() {
		return addr.BitLen()
	}
	bits := c.IPv6PrefixLength
	if k.Kind == KeyIPNet && k.Prefix.Bits() > bits {
		bits = k.Prefix.Bits()
	}
	return bits
}

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

// matchRegexp matches v against a KeyRegexp key's regexp: by its literal
// when it is a plain one.
func (k *LimitKey) matchRegexp(v string) bool {
	if k.form != notLiteral {
		return matchLiteral(v, k.literal, k.form)
	}
	return k.Regexp.MatchString(v)
}

func (k *LimitKey) matchString(v string) bool {
	switch k.Kind {
	case KeyAny:
		return true
	case KeyExact:
		return v == k.Key
	case KeyRegexp:
		return k.matchRegexp(v)
	case KeyPrefix:
		return strings.HasPrefix(v, k.Key[:len(k.Key)-1])
	}
	return false
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
