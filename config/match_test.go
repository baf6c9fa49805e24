package config

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeRequest implements Request. Its model stands for the one the plugin
// resolves (from a header, the body or the path: the plugin's business).
type fakeRequest struct {
	headers map[string]string
	path    string
	peer    string
	model   string
}

func (r *fakeRequest) Header(name string) string { return r.headers[name] }
func (r *fakeRequest) Path() string              { return r.path }
func (r *fakeRequest) PeerAddress() string       { return r.peer }
func (r *fakeRequest) Model() string             { return r.model }

// withModel sets the request's model.
func (r *fakeRequest) withModel(model string) *fakeRequest {
	r.model = model
	return r
}

func req(path, peer string, kv ...string) *fakeRequest {
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return &fakeRequest{headers: h, path: path, peer: peer}
}

// matchDesc summarises a match for table tests: "item/key=value" or "none".
func matchDesc(c *Config, r Request) string {
	m, ok := c.Match(r)
	if !ok {
		return "none"
	}
	item := "global"
	for i := range c.Items {
		if m.Item == &c.Items[i] {
			item = c.Items[i].Type.String() + "#" + itoa(i)
		}
	}
	return item + "/" + m.Key.Key + "=" + m.Value
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestMatchGlobal(t *testing.T) {
	c := mustParse(t, withGlobal(``))
	m, ok := c.Match(req("/", ""))
	require.True(t, ok)
	require.Nil(t, m.Item)
	require.Same(t, c.Global, m.Key)
	require.Equal(t, "", m.Value)
}

func TestMatchHigressExample(t *testing.T) {
	c := mustParse(t, higressRuleExample)
	const k1, k2 = "9a342114-ba8a-11ec-b1bf-00163e1250b5", "a6a6d7f2-ba8a-11ec-bec2-00163e1250b5"
	tests := []struct {
		name string
		r    *fakeRequest
		want string
	}{
		{"nothing", req("/v1/chat", "9.9.9.9:1"), "none"},
		{"header exact", req("/", "", "x-api-key", k2), "limit_by_header#0/" + k2 + "=" + k2},
		{"header exact wins over param", req("/?apikey="+k1, "", "x-api-key", k1), "limit_by_header#0/" + k1 + "=" + k1},
		// Unknown exact header value: item 0 does not match, but limit_by_per_header (#4) does.
		{"header unknown falls to per_header", req("/", "", "x-api-key", "abc"), "limit_by_per_header#4/regexp:^a.*=abc"},
		{"header unknown, per_header *", req("/", "", "x-api-key", "zzz"), "limit_by_per_header#4/*=zzz"},
		{"param exact", req("/v1?model=x&apikey="+k1, ""), "limit_by_param#1/" + k1 + "=" + k1},
		{"param per regexp", req("/v1?apikey=abc", ""), "limit_by_per_param#5/regexp:^a.*=abc"},
		{"param per *", req("/v1?apikey=q%20q", ""), "limit_by_per_param#5/*=q q"},
		{"param empty", req("/v1?apikey=", "1.1.1.1"), "none"},
		{"consumer exact", req("/", "", "x-mse-consumer", "consumer2"), "limit_by_consumer#2/consumer2=consumer2"},
		{"consumer per", req("/", "", "x-mse-consumer", "alice"), "limit_by_per_consumer#6/regexp:^a.*=alice"},
		{"consumer per *", req("/", "", "x-mse-consumer", "bob"), "limit_by_per_consumer#6/*=bob"},
		{"cookie exact", req("/", "", "cookie", "a=b; key1=value1; c=d"), "limit_by_cookie#3/value1=value1"},
		{"cookie per", req("/", "", "cookie", "key1=another"), "limit_by_per_cookie#7/regexp:^a.*=another"},
		{"cookie per *", req("/", "", "cookie", "key1=x"), "limit_by_per_cookie#7/*=x"},
		{"cookie other name", req("/", "", "cookie", "key2=value1"), "none"},
		{"per ip exact", req("/", "", "x-forwarded-for", "1.1.1.1"), "limit_by_per_ip#8/1.1.1.1=1.1.1.1"},
		{"per ip /24", req("/", "", "x-forwarded-for", "1.1.1.7, 10.0.0.1"), "limit_by_per_ip#8/1.1.1.0/24=1.1.1.7"},
		{"per ip /0", req("/", "", "x-forwarded-for", " 8.8.8.8:1234 "), "limit_by_per_ip#8/0.0.0.0/0=8.8.8.8"},
		{"per ip v6 not in v4 /0", req("/", "", "x-forwarded-for", "2001:db8::1"), "none"},
		{"per ip mapped", req("/", "", "x-forwarded-for", "::ffff:1.1.1.9"), "limit_by_per_ip#8/1.1.1.0/24=1.1.1.9"},
		{"per ip garbage", req("/", "1.1.1.1:80", "x-forwarded-for", "unknown, 1.1.1.1"), "none"},
		{"per ip ignores peer", req("/", "1.1.1.1:80"), "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, matchDesc(c, tt.r))
		})
	}
}

func TestMatchOrderAndValues(t *testing.T) {
	c := mustParse(t, withItems(`
		{"limit_by_header":"x-api-key","limit_keys":[
			{"key":"regexp:^sk-","token_per_minute":1},
			{"key":"regexp:^sk-special","token_per_minute":1},
			{"key":"*","token_per_minute":1}]},
		{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"*","token_per_minute":1}]},
		{"limit_by_per_header":"x-user","limit_keys":[{"key":"regexp:^vip","token_per_minute":1}]},
		{"limit_by_header":"x-user","limit_keys":[{"key":"bob","token_per_minute":1}]}`))

	// Non-per type: Value is the configured key, so all matching requests share a counter.
	m, ok := c.Match(req("/", "", "x-api-key", "sk-special-1"))
	require.True(t, ok)
	require.Same(t, &c.Items[0], m.Item)
	require.Same(t, &c.Items[0].Keys[0], m.Key) // first key wins, not the more specific second
	require.Equal(t, "regexp:^sk-", m.Value)
	m2, _ := c.Match(req("/", "", "x-api-key", "sk-other"))
	require.Equal(t, m.Value, m2.Value)

	// Non-per "*": Value "*", item 1 (per) is never reached for this header.
	require.Equal(t, "limit_by_header#0/*=*", matchDesc(c, req("/", "", "x-api-key", "pk-1")))

	// First item wins; per type: Value is the request's value.
	require.Equal(t, "limit_by_per_header#2/regexp:^vip=vip-7", matchDesc(c, req("/", "", "x-user", "vip-7")))
	require.Equal(t, "limit_by_header#3/bob=bob", matchDesc(c, req("/", "", "x-user", "bob")))
	require.Equal(t, "none", matchDesc(c, req("/", "", "x-user", "Bob"))) // exact is case-sensitive
	require.Equal(t, "none", matchDesc(c, req("/", "", "x-user", "")))    // empty = absent
	require.Equal(t, "limit_by_per_header#2/regexp:^vip=vipx", matchDesc(c, req("/", "", "x-api-key", "", "x-user", "vipx")))
}

func TestMatchRegexpUnanchored(t *testing.T) {
	c := mustParse(t, withItems(item(`"limit_by_per_param":"model"`, `"regexp:gpt-4"`)))
	require.Equal(t, "limit_by_per_param#0/regexp:gpt-4=openai/gpt-4o", matchDesc(c, req("/x?model=openai/gpt-4o", "")))
	require.Equal(t, "none", matchDesc(c, req("/x?model=gpt-3.5", "")))
	require.Equal(t, "none", matchDesc(c, req("/x", "")))
}

func TestMatchPerIPRemoteAndCIDR(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_ip":"from-remote-addr","limit_keys":[
		{"key":"10.0.0.0/8","token_per_minute":1},
		{"key":"2001:db8::/32","token_per_minute":2},
		{"key":"::1","token_per_minute":3},
		{"key":"regexp:^192\\.168\\.","token_per_minute":4}]}`))
	tests := []struct{ peer, want string }{
		{"10.1.2.3:5555", "limit_by_per_ip#0/10.0.0.0/8=10.1.2.3"},
		{"10.1.2.3", "limit_by_per_ip#0/10.0.0.0/8=10.1.2.3"},
		{"[::ffff:10.9.9.9]:80", "limit_by_per_ip#0/10.0.0.0/8=10.9.9.9"},
		{"[2001:db8:0:0::7]:443", "limit_by_per_ip#0/2001:db8::/32=2001:db8::/64"}, // an IPv6 client is its /64
		{"2001:DB8::8", "limit_by_per_ip#0/2001:db8::/32=2001:db8::/64"},
		{"[::1]:1", "limit_by_per_ip#0/::1=::1"},
		{"192.168.1.1:2", "limit_by_per_ip#0/regexp:^192\\.168\\.=192.168.1.1"},
		{"11.0.0.1:1", "none"},
		{"2001:db9::1", "none"},
		{"", "none"},
		{"not-an-ip", "none"},
		{"/var/run/envoy.sock", "none"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, matchDesc(c, req("/", tt.peer, "x-forwarded-for", "10.0.0.1")), tt.peer)
	}
}

func TestMatchXFF(t *testing.T) {
	rules := `{"limit_by_per_ip":"from-header-x-forwarded-for","limit_keys":[{"key":"0.0.0.0/0","token_per_minute":1},{"key":"::/0","token_per_minute":1}]}`
	value := func(c *Config, r Request) string {
		m, ok := c.Match(r)
		if !ok {
			return "none"
		}
		return m.Value
	}

	// Unset: Higress behaviour, the left-most entry.
	c := mustParse(t, withItems(rules))
	require.Equal(t, -1, c.XFFTrustedHops)
	require.Equal(t, "6.6.6.6", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "6.6.6.6, 1.2.3.4, 10.0.0.1")))
	require.Equal(t, "1.2.3.4", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "1.2.3.4")))
	require.Equal(t, "none", value(c, req("/", "10.0.0.9:1")))
	require.Equal(t, "none", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "garbage, 1.2.3.4")))

	// One trusted hop: the second entry from the right, whatever the client wrote on the left.
	c = mustParse(t, `{"rule_name":"r","xff_num_trusted_hops":1,"rule_items":[`+rules+`],`+redisOK+`}`)
	for _, xff := range []string{
		"6.6.6.6, 1.2.3.4, 10.0.0.1",
		"1.2.3.4, 10.0.0.1",
		"garbage,1.2.3.4 ,10.0.0.1",
		"7.7.7.7, 8.8.8.8, 9.9.9.9, 1.2.3.4,10.0.0.1",
		"[2001:db8::1]:443, 1.2.3.4:9999, 10.0.0.1",
	} {
		require.Equal(t, "1.2.3.4", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", xff)), xff)
	}
	require.Equal(t, "2001:db8::/64", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "1.2.3.4, [2001:db8::1]:5, 10.0.0.1")))
	// Too few entries, none at all, or an unparsable entry at that position: the peer address.
	require.Equal(t, "10.0.0.9", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "1.2.3.4")))
	require.Equal(t, "10.0.0.9", value(c, req("/", "10.0.0.9:1")))
	require.Equal(t, "10.0.0.9", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "  ")))
	require.Equal(t, "10.0.0.9", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "1.2.3.4, unknown, 10.0.0.1")))
	require.Equal(t, "10.0.0.9", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "1.2.3.4,,10.0.0.1")))
	require.Equal(t, "none", value(c, req("/", "", "x-forwarded-for", "1.2.3.4")))

	// Zero trusted hops: the right-most entry.
	c = mustParse(t, `{"rule_name":"r","xff_num_trusted_hops":0,"rule_items":[`+rules+`],`+redisOK+`}`)
	require.Equal(t, "10.0.0.1", value(c, req("/", "10.0.0.9:1", "x-forwarded-for", "6.6.6.6, 1.2.3.4, 10.0.0.1")))

	// The option only concerns x-forwarded-for: another header still uses its left-most entry.
	c = mustParse(t, `{"rule_name":"r","xff_num_trusted_hops":1,"rule_items":[`+
		item(`"limit_by_per_ip":"from-header-X-Real-IP"`, `"*"`)+`],`+redisOK+`}`)
	require.Equal(t, "6.6.6.6", value(c, req("/", "10.0.0.9:1", "x-real-ip", "6.6.6.6, 1.2.3.4, 10.0.0.1")))
}

func TestClientIP(t *testing.T) {
	r := req("/", "[2001:db8::9]:1000", "x-forwarded-for", "1.1.1.1, 2.2.2.2, 3.3.3.3", "x-real-ip", "4.4.4.4")
	tests := []struct {
		header string
		hops   int
		want   string
	}{
		{"", -1, "2001:db8::9"},
		{"", 5, "2001:db8::9"},
		{"x-forwarded-for", -1, "1.1.1.1"},
		{"x-forwarded-for", -7, "1.1.1.1"},
		{"x-forwarded-for", 0, "3.3.3.3"},
		{"x-forwarded-for", 1, "2.2.2.2"},
		{"x-forwarded-for", 2, "1.1.1.1"},
		{"x-forwarded-for", 3, "2001:db8::9"},
		{"x-forwarded-for", 1 << 40, "2001:db8::9"},
		{"x-real-ip", 0, "4.4.4.4"},
		{"x-absent", -1, "invalid IP"},
		{"x-absent", 0, "invalid IP"},
	}
	for _, tt := range tests {
		a, ok := ClientIP(r, tt.header, tt.hops)
		require.Equal(t, tt.want != "invalid IP", ok, tt)
		require.Equal(t, tt.want, a.String(), tt)
	}
}

func TestParseIP(t *testing.T) {
	tests := []struct{ in, want string }{
		{"1.2.3.4", "1.2.3.4"},
		{" 1.2.3.4\t", "1.2.3.4"},
		{"1.2.3.4:567", "1.2.3.4"},
		{"1.2.3.4:0", "1.2.3.4"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"::ffff:1.2.3.4", "1.2.3.4"},
		{"[::ffff:1.2.3.4]:80", "1.2.3.4"},
		{"fe80::1%eth0", "fe80::1"},
		{"[fe80::1%eth0]:80", "fe80::1"},
		{"", ""},
		{"   ", ""},
		{"1.2.3.4:", ""},
		{"1.2.3.4:99999", ""},
		{"1.2.3.4:port", ""},
		{"[1.2.3.4]", ""},
		{"[1.2.3.4]:80", ""},
		{"2001:db8::1:443x", ""},
		{"[2001:db8::1", ""},
		{"2001:db8::1]", ""},
		{"[]", ""},
		{"[", ""},
		{"01.2.3.4", ""},
		{"1.2.3", ""},
		{"unknown", ""},
		{"1.2.3.4, 5.6.7.8", ""},
	}
	for _, tt := range tests {
		a, ok := ParseIP(tt.in)
		require.Equal(t, tt.want != "", ok, tt.in)
		if ok {
			require.Equal(t, tt.want, a.String(), tt.in)
			require.Equal(t, netip.MustParseAddr(tt.want), a)
		}
	}
}

func TestCookieValue(t *testing.T) {
	tests := []struct {
		header, name, first, last string
		ok                        bool
	}{
		{"a=1; b=2; c=3", "b", "2", "2", true},
		{"a=1;b=2", "b", "2", "2", true},
		{"  b = 2  ;", "b", "2", "2", true},
		{"b=1; b=2", "b", "1", "2", true},           // repeated: the first and the last
		{"b=1; a=0; b=2; b=3", "b", "1", "3", true}, // only those
		{"b=x=y==", "b", "x=y==", "x=y==", true},    // split at the first '='
		{"ab=1; b=2", "b", "2", "2", true},          // no prefix match
		{"a=1", "b", "", "", false},
		{"b", "b", "", "", false}, // no '=': skipped
		{"b; b=3", "b", "3", "3", true},
		{"b=3; b", "b", "3", "3", true},
		{"b=", "b", "", "", true}, // present but empty
		{"b=; b=4", "b", "", "4", true},
		{"", "b", "", "", false},
		{";;;", "b", "", "", false},
		{"=;=b;b", "b", "", "", false},
		{"a=\"quoted\"; b=\"q\"", "b", "q", "q", true}, // unquoted: see TestCookieValueUnquoted
		{"x=%41", "x", "%41", "%41", true},             // not decoded
	}
	for _, tt := range tests {
		first, last, ok := CookieValue(tt.header, tt.name)
		require.Equal(t, tt.ok, ok, tt.header)
		require.Equal(t, tt.first, first, tt.header)
		require.Equal(t, tt.last, last, tt.header)
	}
}

func TestQueryParam(t *testing.T) {
	tests := []struct {
		path, name, first, last string
		ok                      bool
	}{
		{"/v1/chat?apikey=abc", "apikey", "abc", "abc", true},
		{"/v1/chat?x=1&apikey=abc&apikey=def", "apikey", "abc", "def", true}, // repeated: the first and the last
		{"/v1?apikey=a&apikey=b&apikey=c", "apikey", "a", "c", true},
		{"/v1?apikey=a%20b+c", "apikey", "a b c", "a b c", true},
		{"/v1?apikey=a+b&apikey=a%20b", "apikey", "a b", "a b", true},
		{"/v1?api%6Bey=v", "apikey", "v", "v", true}, // names are decoded
		{"/v1?apikey", "apikey", "", "", true},
		{"/v1?apikey=", "apikey", "", "", true},
		{"/v1?apikey=%zz&apikey=ok", "apikey", "ok", "ok", true}, // bad escape: pair skipped
		{"/v1?apikey=ok&apikey=%4", "apikey", "ok", "ok", true},
		{"/v1?apikey=a;b&apikey=ok", "apikey", "ok", "ok", true}, // ';' : pair skipped
		{"/v1?apikey=ok&apikey=a;b", "apikey", "ok", "ok", true},
		{"/v1?a=1#apikey=x", "apikey", "", "", false}, // fragment
		{"/v1?a=1&apikey=x#frag&apikey=y", "apikey", "x", "x", true},
		{"/v1/apikey=abc", "apikey", "", "", false},
		{"/v1?&&apikey=z", "apikey", "z", "z", true},
		{"/v1?xapikey=1", "apikey", "", "", false},
		{"", "apikey", "", "", false},
		{"?apikey=1?2", "apikey", "1?2", "1?2", true},
	}
	for _, tt := range tests {
		first, last, ok := QueryParam(tt.path, tt.name)
		require.Equal(t, tt.ok, ok, tt.path)
		require.Equal(t, tt.first, first, tt.path)
		require.Equal(t, tt.last, last, tt.path)
	}
}

func TestMatchAllocations(t *testing.T) {
	c := mustParse(t, benchConfig)
	for _, tt := range []struct {
		r      *fakeRequest
		match  bool
		allocs float64
	}{
		{req("/?apikey=k1", "", "x-api-key", "x"), true, 0},
		{req("/?apikey=b", "", "cookie", "a=1; session=adm-9"), true, 0},
		{req("/?apikey=a%20b", "", "cookie", "a=1; session=adm-9"), true, 1}, // decoding the value
		{req("/", "", "x-mse-consumer", "vip-1"), true, 0},
		{req("/", "10.0.0.1:1", "x-forwarded-for", "1.2.3.4, 10.0.0.1"), true, 1},        // the IP string
		{req("/", "10.0.0.1:1", "x-forwarded-for", "2001:db8::1, 10.0.0.1"), true, 1},    // the network's string
		{req("/?apikey=b&apikey=k1", "", "cookie", "session=adm-9"), true, 0},            // a repeated parameter
		{req("/?apikey=b&apikey=k2", "", "cookie", "session=a; session=adm-9"), true, 0}, // a repeated cookie
		{req("/", "", "x-forwarded-for", "nope"), false, 0},
	} {
		_, ok := c.Match(tt.r)
		require.Equal(t, tt.match, ok, tt.r)
		require.Equal(t, tt.allocs, testing.AllocsPerRun(100, func() { c.Match(tt.r) }), tt.r)
	}
}

// benchConfig has six rule items; benchmarks hit the first, the last, and
// a key with per_model.
const benchConfig = `{"rule_name":"bench","rule_items":[
	{"limit_by_header":"x-api-key","limit_keys":[
		{"key":"9a342114-ba8a-11ec-b1bf-00163e1250b5","token_per_minute":10},
		{"key":"a6a6d7f2-ba8a-11ec-bec2-00163e1250b5","token_per_hour":100}]},
	{"limit_by_param":"apikey","limit_keys":[{"key":"k1","token_per_minute":10}]},
	{"limit_by_per_cookie":"session","limit_keys":[{"key":"regexp:^adm-","token_per_minute":10}]},
	{"limit_by_per_consumer":"","limit_keys":[{"key":"regexp:^vip-","token_per_minute":10,"token_per_day":1000,"per_model":[
		{"model":"regexp:^gpt-4o$","token_per_minute":5},
		{"model":"claude-*","token_per_minute":5},
		{"model":"*","token_per_minute":2}]}]},
	{"limit_by_per_ip":"from-header-x-forwarded-for","limit_keys":[
		{"key":"10.0.0.0/8","token_per_minute":100},
		{"key":"2001:db8::/32","token_per_minute":100},
		{"key":"0.0.0.0/0","token_per_minute":10,"token_per_hour":100}]},
	{"limit_by_per_model":"","limit_keys":[{"key":"regexp:mini$","token_per_minute":10}]}],
	"xff_num_trusted_hops":1,
	"redis":{"service_name":"redis.static"}}`

func BenchmarkMatch(b *testing.B) {
	c := mustParse(b, benchConfig)
	cases := []struct {
		name string
		r    *fakeRequest
		want string
	}{
		{"first_item", req("/v1/chat/completions?stream=true", "10.0.0.1:4000",
			"x-api-key", "a6a6d7f2-ba8a-11ec-bec2-00163e1250b5", "cookie", "session=adm-1"), "a6a6d7f2-ba8a-11ec-bec2-00163e1250b5"},
		{"per_consumer", req("/v1/chat/completions?stream=true&model=gpt", "10.0.0.1:4000",
			"x-mse-consumer", "vip-42", "cookie", "lang=en; session=user-1"), "vip-42"},
		{"last_item_ip", req("/v1/chat/completions?stream=true&model=gpt", "10.0.0.1:4000",
			"x-mse-consumer", "bob", "cookie", "lang=en; session=user-1",
			"x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.0.0.1"), "203.0.113.7"},
		{"no_match", req("/v1/chat/completions?stream=true", "",
			"x-forwarded-for", "garbage"), ""},
	}
	for _, bc := range cases {
		m, _ := c.Match(bc.r)
		require.Equal(b, bc.want, m.Value, bc.name)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c.Match(bc.r)
			}
		})
	}

	// A consumer's limit and its model's within it: MatchAll, which alone
	// returns the per_model match, into a slice the caller reuses.
	r := req("/v1/chat/completions?stream=true", "10.0.0.1:4000", "x-mse-consumer", "vip-42").withModel("claude-sonnet-4")
	dst := c.MatchAll(r, make([]Match, 0, 4))
	require.Len(b, dst, 3, "the consumer, its model's limit, and the per-IP item: every matching item applies")
	require.Equal(b, "claude-*", dst[1].Key.Key)
	b.Run("per_model", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			dst = c.MatchAll(r, dst[:0])
		}
	})
}

// matchesDesc summarises MatchAll's matches, as matchDesc does one match.
func matchesDesc(c *Config, r Request) []string {
	var out []string
	for _, m := range c.MatchAll(r, nil) {
		item := "?"
		switch {
		case m.Unmatched:
			item = "unmatched"
		case m.Key == c.Global:
			item = "global"
		}
		for i := range c.Items {
			if m.Item == &c.Items[i] {
				item = c.Items[i].Type.String() + "#" + itoa(i)
			}
		}
		out = append(out, item+"/"+m.Key.Key+"="+m.Value)
	}
	return out
}

// A parameter or cookie sent more than once is read differently by
// different upstreams and auth layers (Go, Flask and Java take the first,
// PHP, Starlette and Python's cookie parser the last): the request is
// limited as each of them would see it, by its first value and by its last
// (issue 14, point 8a: ?key=mine&key=fresh was keyed by the first only, so
// an upstream taking the last was reached with a budget of the client's
// choosing).
func TestMatchRepeatedParameterOrCookieLimitsEachReading(t *testing.T) {
	for _, mode := range []string{"first", "all"} {
		t.Run(mode, func(t *testing.T) {
			c := mustParse(t, `{"rule_name":"r","rule_match_mode":"`+mode+`","rule_items":[
				{"limit_by_param":"apikey","limit_keys":[{"key":"k1","token_per_minute":1},{"key":"regexp:^k","token_per_minute":2}]},
				{"limit_by_per_param":"apikey","limit_keys":[{"key":"*","token_per_minute":3}]},
				{"limit_by_per_cookie":"session","limit_keys":[{"key":"*","token_per_minute":4}]}],`+redisOK+`}`)
			for _, tt := range []struct {
				r     *fakeRequest
				first []string // under rule_match_mode first
				all   []string // under all, when different
			}{
				{r: req("/v1?apikey=a&apikey=b", ""),
					first: []string{"limit_by_per_param#1/*=a", "limit_by_per_param#1/*=b"}},
				{r: req("/v1?apikey=a&apikey=a", ""),
					first: []string{"limit_by_per_param#1/*=a"}},
				// Only the first and the last count: what some upstream takes.
				{r: req("/v1?apikey=a&apikey=b&apikey=c&apikey=d", ""),
					first: []string{"limit_by_per_param#1/*=a", "limit_by_per_param#1/*=d"}},
				// Each reading takes the first item and key that match it.
				{r: req("/v1?apikey=a&apikey=k1", ""),
					first: []string{"limit_by_per_param#1/*=a", "limit_by_param#0/k1=k1"},
					all:   []string{"limit_by_param#0/k1=k1", "limit_by_per_param#1/*=a", "limit_by_per_param#1/*=k1"}},
				{r: req("/v1?apikey=k1&apikey=k2", ""),
					first: []string{"limit_by_param#0/k1=k1", "limit_by_param#0/regexp:^k=regexp:^k"},
					all:   []string{"limit_by_param#0/k1=k1", "limit_by_param#0/regexp:^k=regexp:^k", "limit_by_per_param#1/*=k1", "limit_by_per_param#1/*=k2"}},
				// Two values sharing one subject are one limit.
				{r: req("/v1?apikey=k2&apikey=k3", ""),
					first: []string{"limit_by_param#0/regexp:^k=regexp:^k"},
					all:   []string{"limit_by_param#0/regexp:^k=regexp:^k", "limit_by_per_param#1/*=k2", "limit_by_per_param#1/*=k3"}},
				// An empty value is an absent one, as ever.
				{r: req("/v1?apikey=&apikey=b", ""),
					first: []string{"limit_by_per_param#1/*=b"}},
				{r: req("/v1", "", "cookie", "session=s1; theme=dark; session=s2"),
					first: []string{"limit_by_per_cookie#2/*=s1", "limit_by_per_cookie#2/*=s2"}},
				{r: req("/v1?apikey=a", "", "cookie", "session=s1; session=s2"),
					first: []string{"limit_by_per_param#1/*=a"},
					all:   []string{"limit_by_per_param#1/*=a", "limit_by_per_cookie#2/*=s1", "limit_by_per_cookie#2/*=s2"}},
			} {
				want := tt.first
				if mode == "all" && tt.all != nil {
					want = tt.all
				}
				require.Equal(t, want, matchesDesc(c, tt.r), tt.r.path+" "+tt.r.headers["cookie"])
			}
		})
	}
}

// Per-IP limits key an IPv6 client by its /64 (ipv6_prefix_length), which
// is what one client is given: keyed by the whole address, a client had
// 2^64 budgets (issue 14, point 8b). Keys still match the whole address; a
// key narrower than the prefix keys each of its clients by that key's
// length, so that the clients of one /64 matching different keys never
// share a counter under different limits. IPv4 is unchanged.
func TestMatchIPv6ClientsByPrefix(t *testing.T) {
	items := `"rule_items":[{"limit_by_per_ip":"from-remote-addr","limit_keys":[
		{"key":"2001:db8:1:2::bad","token_per_minute":1},
		{"key":"2001:db8:1:2:8000::/65","token_per_minute":2},
		{"key":"regexp:^2001:db8:1:3::","token_per_minute":3},
		{"key":"::/0","token_per_minute":4},
		{"key":"0.0.0.0/0","token_per_minute":5}]}]`
	for _, tt := range []struct {
		extra string
		peer  string
		want  string
	}{
		{"", "[2001:db8:1:2::5]:443", "limit_by_per_ip#0/::/0=2001:db8:1:2::/64"},
		{"", "[2001:db8:1:2:7fff::9]:443", "limit_by_per_ip#0/::/0=2001:db8:1:2::/64"},
		{"", "2001:db8:1:2::bad", "limit_by_per_ip#0/2001:db8:1:2::bad=2001:db8:1:2::bad"},
		{"", "[2001:db8:1:2:8000::1]:1", "limit_by_per_ip#0/2001:db8:1:2:8000::/65=2001:db8:1:2:8000::/65"},
		{"", "[2001:db8:1:3::1]:1", "limit_by_per_ip#0/regexp:^2001:db8:1:3::=2001:db8:1:3::/64"},
		{"", "[2001:db8:1:3:0:1::]:1", "limit_by_per_ip#0/::/0=2001:db8:1:3::/64"}, // the regexp sees the whole address
		{"", "10.1.2.3:5", "limit_by_per_ip#0/0.0.0.0/0=10.1.2.3"},
		{"", "[::ffff:10.1.2.3]:5", "limit_by_per_ip#0/0.0.0.0/0=10.1.2.3"},
		{`"ipv6_prefix_length":48,`, "[2001:db8:1:2::5]:443", "limit_by_per_ip#0/::/0=2001:db8:1::/48"},
		{`"ipv6_prefix_length":1,`, "[2001:db8:1:2::5]:443", "limit_by_per_ip#0/::/0=::/1"},
		{`"ipv6_prefix_length":128,`, "[2001:db8:1:2::5]:443", "limit_by_per_ip#0/::/0=2001:db8:1:2::5"},
		{`"ipv6_prefix_length":128,`, "10.1.2.3:5", "limit_by_per_ip#0/0.0.0.0/0=10.1.2.3"},
	} {
		c := mustParse(t, `{"rule_name":"r",`+tt.extra+items+`,`+redisOK+`}`)
		require.Equal(t, tt.want, matchDesc(c, req("/", tt.peer)), tt.extra+tt.peer)
	}
}

// A request that matches no rule item is limited by unmatched_threshold,
// all such requests sharing one subject (issue 14, point 8c: they were not
// limited at all).
func TestMatchUnmatchedThreshold(t *testing.T) {
	for _, mode := range []string{"first", "all"} {
		c := mustParse(t, `{"rule_name":"r","rule_match_mode":"`+mode+`","rule_items":[
			{"limit_by_header":"x-api-key","limit_keys":[{"key":"sk-1","token_per_minute":10}]},
			{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"10.0.0.0/8","token_per_minute":20}]}],
			"unmatched_threshold":{"token_per_minute":30,"query_per_minute":5},`+redisOK+`}`)
		require.Equal(t, []string{"limit_by_header#0/sk-1=sk-1"}, matchesDesc(c, req("/", "192.0.2.1:1", "x-api-key", "sk-1")), mode)
		require.Equal(t, []string{"limit_by_per_ip#1/10.0.0.0/8=10.1.1.1"}, matchesDesc(c, req("/", "10.1.1.1:1", "x-api-key", "sk-2")), mode)
		for _, r := range []*fakeRequest{req("/", "192.0.2.1:1", "x-api-key", "sk-2"), req("/", "192.0.2.1:1"), req("/", "")} {
			got := c.MatchAll(r, nil)
			require.Len(t, got, 1, mode)
			require.True(t, got[0].Unmatched)
			require.Same(t, c.Unmatched, got[0].Key)
			require.Nil(t, got[0].Item)
			require.Equal(t, "", got[0].Value)
			require.Equal(t, []Window{win("token_per_minute", 60, 30), {Field: "query_per_minute", Unit: UnitRequests, Seconds: 60, Limit: 5}}, got[0].Key.Windows)
			m, ok := c.Match(r)
			require.True(t, ok)
			require.Same(t, got[0].Key, m.Key)
		}
	}
}
