package config

import "strings"

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
