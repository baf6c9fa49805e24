package config

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; the f.Add calls below add
// a few more so that a plain `go test` exercises the properties too.

const asciiSpace = " \t\n\v\f\r"

// refCookieValue is a straightforward reference for CookieValue.
func refCookieValue(header, name string) (first, last string, ok bool) {
	var values []string
	for _, pair := range strings.Split(header, ";") {
		k, v, found := strings.Cut(pair, "=")
		if found && strings.Trim(k, asciiSpace) == name {
			v = strings.Trim(v, asciiSpace)
			if len(v) >= 2 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) {
				v = v[1 : len(v)-1]
			}
			values = append(values, v)
		}
	}
	if len(values) == 0 {
		return "", "", false
	}
	return values[0], values[len(values)-1], true
}

func FuzzCookieValue(f *testing.F) {
	f.Add("a=1; b=2", "b")
	f.Add("b=x=y; b=2", "b")
	f.Add(" = ; ;=", "")
	f.Add("b=1; c=; b=; b=3 ", "b")
	f.Add(`b="1"; b=""; b="; b=""x""; b=" y "`, "b")
	f.Fuzz(func(t *testing.T, header, name string) {
		first, last, ok := CookieValue(header, name)
		rf, rl, rok := refCookieValue(header, name)
		if first != rf || last != rl || ok != rok {
			t.Fatalf("CookieValue(%q, %q) = %q, %q, %v; reference gives %q, %q, %v", header, name, first, last, ok, rf, rl, rok)
		}
		if !ok && (first != "" || last != "") {
			t.Fatalf("not found but values %q, %q", first, last)
		}
		for _, v := range []string{first, last} {
			// Unquoted, a value may start or end with a space (`" a "`).
			if strings.Contains(v, ";") || trimSpace(v) != v && !strings.Contains(header, `"`+v+`"`) {
				t.Fatalf("value %q contains ';' or surrounding space outside quotes", v)
			}
		}
	})
}

// refParseIP tries the netip parsers in turn.
func refParseIP(s string) (netip.Addr, bool) {
	s = strings.Trim(s, asciiSpace)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		a, err = ap.Addr(), err2
	}
	if err != nil && len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		a, err = netip.ParseAddr(s[1 : len(s)-1])
		if err == nil && !a.Is6() {
			return netip.Addr{}, false
		}
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// refClientIP is a straightforward reference for ClientIP.
func refClientIP(r Request, name string, hops int) (netip.Addr, bool) {
	if name == "" {
		return refParseIP(r.PeerAddress())
	}
	v := r.Header(name)
	if hops >= 0 && name == XForwardedForHeader {
		if strings.Trim(v, asciiSpace) != "" {
			parts := strings.Split(v, ",")
			if hops < len(parts) {
				if a, ok := refParseIP(parts[len(parts)-1-hops]); ok {
					return a, true
				}
			}
		}
		return refParseIP(r.PeerAddress())
	}
	return refParseIP(strings.Split(v, ",")[0])
}

func FuzzClientIP(f *testing.F) {
	f.Add("6.6.6.6, 1.2.3.4, 10.0.0.1", "10.0.0.9:1", 1, uint8(1))
	f.Add("[2001:db8::1]:443", "[::1]:80", -1, uint8(1))
	f.Add("::ffff:1.2.3.4", "fe80::1%eth0", 0, uint8(2))
	f.Fuzz(func(t *testing.T, header, peer string, hops int, which uint8) {
		name := [...]string{"", XForwardedForHeader, "x-real-ip"}[which%3]
		r := &fakeRequest{headers: map[string]string{XForwardedForHeader: header, "x-real-ip": header}, peer: peer}
		a, ok := ClientIP(r, name, hops)
		ra, rok := refClientIP(r, name, hops)
		if a != ra || ok != rok {
			t.Fatalf("ClientIP(%q, peer %q, %q, %d) = %v, %v; reference gives %v, %v", header, peer, name, hops, a, ok, ra, rok)
		}
		if ok != a.IsValid() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("ClientIP returned %v, %v", a, ok)
		}
		if ok {
			// The canonical string parses back to the same address.
			if b, ok2 := ParseIP(a.String()); !ok2 || b != a {
				t.Fatalf("%v does not round-trip: %v %v", a, b, ok2)
			}
		}
		// With trusted hops, what the client prepends cannot change the result
		// once the list has enough entries.
		if name == XForwardedForHeader && hops >= 0 && hops < 1<<20 &&
			strings.Trim(header, asciiSpace) != "" && strings.Count(header, ",") >= hops {
			r2 := &fakeRequest{headers: map[string]string{XForwardedForHeader: peer + "," + header}, peer: peer}
			a2, ok2 := ClientIP(r2, name, hops)
			if a2 != a || ok2 != ok {
				t.Fatalf("prepending %q changed the client from %v to %v", peer, a, a2)
			}
		}
	})
}

// refQueryParam uses net/url, as Higress does: the first and the last value.
func refQueryParam(path, name string) (first, last string, ok bool) {
	path, _, _ = strings.Cut(path, "#")
	_, q, ok := strings.Cut(path, "?")
	if !ok {
		return "", "", false
	}
	vals, _ := url.ParseQuery(q)
	if vs, ok := vals[name]; ok {
		return vs[0], vs[len(vs)-1], true
	}
	return "", "", false
}

func FuzzQueryParam(f *testing.F) {
	f.Add("/v1?apikey=a%20b+c&apikey=2", "apikey")
	f.Add("/v1?a;b=1&%zz=2&k=%41#k=3", "k")
	f.Add("/v1?k=1&k=%zz&k=a;b&k=2&k=3%4", "k")
	f.Fuzz(func(t *testing.T, path, name string) {
		first, last, ok := QueryParam(path, name)
		if strings.Count(path, "&") >= 1000 {
			return // net/url caps the number of parameters
		}
		rf, rl, rok := refQueryParam(path, name)
		if first != rf || last != rl || ok != rok {
			t.Fatalf("QueryParam(%q, %q) = %q, %q, %v; net/url gives %q, %q, %v", path, name, first, last, ok, rf, rl, rok)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(higressRuleExample)
	f.Add(benchConfig)
	f.Add(withGlobal(`,"xff_num_trusted_hops":1,"failure_mode":"deny"`))
	f.Add(withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"::ffff:10.0.0.0/104"`)))
	f.Add(`{"rule_name":"r","rule_items":[{"limit_by_header":"h","limit_keys":[{"key":"regexp:(","token_per_minute":1}]}]}`)
	f.Add(`{"rule_name":"r","rule_match_mode":"all","ipv6_prefix_length":48,"unmatched_threshold":{"query_per_minute":1},
		"rule_items":[{"limit_by_per_param":"apikey","limit_keys":[{"key":"*","token_per_minute":1}]},
		{"limit_by_per_ip":"from-header-x-forwarded-for","limit_keys":[{"key":"2001:db8::1/127","token_per_minute":1}]}],
		"token_count_strategy":"weighted","token_weights":{"models":{"a*":{},"regexp:b":{},"c":{}}},"redis":{"service_name":"x"}}`)
	f.Add(fromYAML(f, budgetsYAML))
	f.Add(`{"rule_name":"r","model_source":["header:x-m","body"],"rule_items":[
		{"limit_by_model":"","limit_keys":[{"key":"a*","token_per_minute":1},{"key":"abc","query_per_minute":1}]},
		{"limit_by_per_param":"apikey","limit_keys":[{"key":"*","token_per_minute":1,"per_model":[{"model":"ab*","token_per_minute":1},{"model":"*","max_concurrent_requests":1}]}]}],
		"unmatched_threshold":{"query_per_minute":1,"per_model":[{"model":"regexp:^g","token_per_minute":1}]},"redis":{"service_name":"x"}}`)
	f.Fuzz(func(t *testing.T, json string) {
		c, err := Parse(gjson.Parse(json))
		c2, err2 := ParseString(json)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("Parse and ParseString disagree: %v / %v", err, err2)
		}
		if err != nil {
			if c != nil || err.Error() == "" || strings.HasSuffix(err.Error(), ": ") {
				t.Fatalf("bad refusal: config %v, error %q", c, err)
			}
			return
		}
		_ = c2
		checkConfig(t, c)
		for _, r := range fuzzRequests {
			checkMatches(t, c, r)
		}
	})
}

// checkMatches asserts the invariants of a configuration's matches of r.
func checkMatches(t *testing.T, c *Config, r *fakeRequest) {
	t.Helper()
	m, ok := c.Match(r)
	if c.Global != nil && (!ok || m.Key != c.Global || m.Item != nil) {
		t.Fatalf("global config did not match: %+v %v", m, ok)
	}
	if c.Unmatched != nil && !ok {
		t.Fatalf("no match despite an unmatched threshold")
	}
	if ok && (m.Unmatched != (m.Item == nil && m.Key == c.Unmatched) || m.Parent != nil) {
		t.Fatalf("bad match: %+v", m)
	}
	all := c.MatchAll(r, nil)
	if ok != (len(all) > 0) || ok && all[0].withoutShared() != m && c.MatchMode == MatchFirst {
		t.Fatalf("Match %+v %v, MatchAll %+v", m, ok, all)
	}
	// Each rule item reads at most two values, and each match may be
	// followed by a per_model match; the thresholds add one each, with
	// theirs.
	if len(all) > 4*len(c.Items)+4 {
		t.Fatalf("%d matches for %d rule items", len(all), len(c.Items))
	}
	itemMatched := slices.ContainsFunc(all, func(m Match) bool { return m.Item != nil })
	for i, m := range all {
		if m.Item != nil && m.Item.Type.PerValue() && m.Value == "" {
			t.Fatalf("per-value match with empty value: %+v", m)
		}
		if m.Unmatched && itemMatched {
			t.Fatalf("unmatched beside rule items' matches: %+v", all)
		}
		if (m.Item == nil && !m.Unmatched) != (c.Global != nil && (m.Key == c.Global || m.Parent == c.Global)) {
			t.Fatalf("a global match that is not the global threshold's: %+v", all)
		}
		for _, mm := range m.Merged() {
			checkMatchModel(t, r, mm)
			if !mm.SameSubject(&m) {
				t.Fatalf("match %d merges another subject's: %+v", i, all)
			}
		}
		if m.Parent != nil {
			// Its parent came before it, and it is the first entry of
			// each of its merged parents that matches the model.
			if !slices.ContainsFunc(all[:i], func(p Match) bool {
				return p.Parent == nil && p.Item == m.Item && p.Value == m.Value && p.Unmatched == m.Unmatched &&
					slices.ContainsFunc(p.Merged(), func(pm Match) bool { return pm.Key == m.Parent })
			}) {
				t.Fatalf("per_model match %d without its parent before it: %+v", i, all)
			}
			for _, mm := range m.Merged() {
				if mm.Key != firstEntry(mm.Parent.PerModel, mm.Model) {
					t.Fatalf("per_model match %d is not its parent's first matching entry: %+v", i, all)
				}
			}
		} else if r.model != "" {
			for _, mm := range m.Merged() {
				if want := firstEntry(mm.Key.PerModel, r.model); want != nil && !slices.ContainsFunc(all[i+1:], func(e Match) bool {
					return e.Parent != nil && slices.ContainsFunc(e.Merged(), func(em Match) bool { return em.Parent == mm.Key && em.Key == want })
				}) {
					t.Fatalf("match %d is not followed by its per_model match: %+v", i, all)
				}
			}
		}
		for _, o := range all[:i] {
			if o.SameSubject(&m) {
				t.Fatalf("a subject twice: %+v", all)
			}
		}
	}
}

// checkMatchModel checks that a match has a model where it depends on
// the request's, and that model.
func checkMatchModel(t *testing.T, r *fakeRequest, m Match) {
	t.Helper()
	byModel := m.Item != nil && m.Item.Type.ModelValued()
	if (m.Model != "") != (byModel || m.Parent != nil) || m.Model != "" && m.Model != r.model || byModel && m.Parent != nil {
		t.Fatalf("match with model %q for a request with %q: %+v", m.Model, r.model, m)
	}
}

// firstEntry returns the first per_model entry that matches model, if any.
func firstEntry(entries []LimitKey, model string) *LimitKey {
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Kind == KeyAny,
			e.Kind == KeyExact && model == e.Key,
			e.Kind == KeyPrefix && strings.HasPrefix(model, strings.TrimSuffix(e.Key, "*")),
			e.Kind == KeyRegexp && e.Regexp.MatchString(model):
			return e
		}
	}
	return nil
}

var fuzzRequests = []*fakeRequest{
	req("/v1?apikey=abc&x=%41", "10.0.0.1:80", "x-api-key", "abc", "cookie", "a=1; key1=abc", "x-mse-consumer", "abc",
		"x-forwarded-for", "1.1.1.1, 2001:db8::1, 10.0.0.1", "h", "1"),
	req("/v1?apikey=abc&apikey=k&apikey=abd", "[2001:db8::1]:1", "cookie", "key1=abc; key1=; key1=x", "x-forwarded-for", "2001:db8::2"),
	req("/", "[2001:db8::2]:443"),
	req("?", "garbage", "x-forwarded-for", "garbage"),
	req("/v1?apikey=abc&apikey=abd", "10.0.0.1:80", "x-api-key", "abc", "x-mse-consumer", "abc").withModel("abc"),
	req("/v1", "[2001:db8::1]:1", "x-mse-consumer", "b").withModel("gpt-4o-mini"),
	req("/", "").withModel("*"),
}

// checkConfig asserts the invariants of an accepted configuration.
func checkConfig(t *testing.T, c *Config) {
	t.Helper()
	if c.RuleName == "" || c.Global == nil && len(c.Items) == 0 || c.Unmatched != nil && len(c.Items) == 0 ||
		c.IPv6PrefixLength < 1 || c.IPv6PrefixLength > 128 {
		t.Fatalf("bad config: %+v", c)
	}
	for _, r := range c.Cost.ModelWeights {
		if r.Key == "" || r.Kind == ModelRegexp && r.Regexp == nil || r.Kind == ModelPrefix && r.Name == "" {
			t.Fatalf("bad model rule: %+v", r)
		}
	}
	if c.RejectedCode < 100 || c.RejectedCode > 599 || c.XFFTrustedHops < -1 ||
		c.Redis.ServiceName == "" || c.Redis.ServicePort < 1 || c.Redis.ServicePort > 65535 ||
		c.Redis.TimeoutMs <= 0 || c.Redis.Database < 0 || c.FailureMode > FailDeny {
		t.Fatalf("bad config: %+v", c)
	}
	var keys []*LimitKey
	for _, k := range []*LimitKey{c.Global, c.Unmatched} {
		if k != nil {
			keys = append(keys, k)
		}
	}
	for i := range c.Items {
		it := &c.Items[i]
		if it.Type.String() == "" || strings.HasPrefix(it.Type.String(), "LimitType(") || len(it.Keys) == 0 {
			t.Fatalf("bad item: %+v", it)
		}
		if it.Type.ModelValued() && (it.Name != "" || it.Raw != "") || it.Type != ByPerIP && !it.Type.ModelValued() && it.Name == "" {
			t.Fatalf("bad item name: %+v", it)
		}
		for j := range it.Keys {
			k := &it.Keys[j]
			keys = append(keys, k)
			switch {
			case k.Kind == KeyIPNet && (it.Type != ByPerIP || !k.Prefix.IsValid() || k.Prefix != k.Prefix.Masked()):
				t.Fatalf("bad IP key: %+v", k)
			case k.Kind == KeyExact && it.Type.PerValue():
				t.Fatalf("exact key on per type: %+v", k)
			case k.Kind == KeyPrefix && !it.Type.ModelValued():
				t.Fatalf("prefix key on a type other than the model ones: %+v", k)
			case k.PerModel != nil && it.Type.ModelValued():
				t.Fatalf("per_model under a model type: %+v", k)
			}
		}
	}
	if len(c.ModelSources) == 0 {
		t.Fatalf("no model source: %+v", c)
	}
	for i, s := range c.ModelSources {
		if s.Kind < ModelFromHeader || s.Kind > ModelFromPath || (s.Kind == ModelFromHeader) != (s.Header != "") ||
			s.Header != strings.ToLower(s.Header) || slices.Contains(c.ModelSources[:i], s) {
			t.Fatalf("bad model sources: %+v", c.ModelSources)
		}
	}
	hasModel := false
	for _, k := range keys {
		if k.PerModel != nil {
			hasModel = true
		}
		for i := range k.PerModel {
			e := &k.PerModel[i]
			if e.PerModel != nil || e.Kind == KeyIPNet {
				t.Fatalf("bad per_model entry: %+v", e)
			}
			keys = append(keys, e)
		}
	}
	for i := range c.Items {
		hasModel = hasModel || c.Items[i].Type.ModelValued()
	}
	if hasModel != c.HasModelLimits() {
		t.Fatalf("HasModelLimits says %v", !hasModel)
	}
	for _, k := range keys {
		if k.Key == "" || len(k.Windows) == 0 && k.MaxConcurrent == 0 {
			t.Fatalf("bad key: %+v", k)
		}
		switch {
		case k.Kind == KeyRegexp && k.Regexp == nil:
			t.Fatalf("regexp key without regexp: %+v", k)
		case k.Kind == KeyPrefix && (len(k.Key) < 2 || strings.IndexByte(k.Key, '*') != len(k.Key)-1):
			t.Fatalf("bad prefix key: %+v", k)
		case k.Kind == KeyAny && k.Key != AnyKey:
			t.Fatalf("bad any key: %+v", k)
		}
		for i, w := range k.Windows {
			if w.Limit <= 0 || w.Limit > MaxLimit || w.Seconds <= 0 || w.Field == "" || (i > 0 && k.Windows[i-1].Seconds >= w.Seconds) {
				t.Fatalf("bad windows: %+v", k.Windows)
			}
		}
		if k.MaxConcurrent < 0 || k.MaxConcurrent > MaxLimit {
			t.Fatalf("bad concurrency limit: %+v", k)
		}
	}
}
