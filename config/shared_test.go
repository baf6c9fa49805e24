package config

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// windowsOf describes a match's windows as "token_per_minute=600 (item 1)",
// "soft" marking a soft one, and its concurrency limit, if any.
func windowsOf(c *Config, m Match) []string {
	var out []string
	for j, w := range m.Windows() {
		from := m.WindowFrom(j)
		d := w.Field + "=" + strconv.Itoa(int(w.Limit)) + " (item " + strconv.Itoa(itemIndex(c, from.Item)) + ")"
		if from.Key.Soft {
			d += " soft"
		}
		out = append(out, d)
	}
	if n := m.MaxConcurrent(); n > 0 {
		out = append(out, "max_concurrent_requests="+strconv.Itoa(int(n))+" (item "+strconv.Itoa(itemIndex(c, m.ConcurrencyFrom().Item))+")")
	}
	return out
}

// Higress 2.2.4: global_threshold and rule_items together, every request
// in the first, each also in the items it matches; with
// unmatched_threshold, the requests no item matches in that too.
func TestMatchGlobalWithRuleItems(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","global_threshold":{"token_per_minute":10000},"rule_items":[
		{"limit_by_header":"x-api-key","limit_keys":[{"key":"vip","token_per_minute":100}]},
		{"limit_by_param":"apikey","limit_keys":[{"key":"k2","token_per_minute":50}]}],`+redisOK+`}`)
	require.Equal(t, []string{"global/*=", "limit_by_header#0/vip=vip", "limit_by_param#1/k2=k2"},
		modelMatches(c, req("/v1?apikey=k2", "", "x-api-key", "vip")))
	require.Equal(t, []string{"global/*=", "limit_by_param#1/k2=k2"}, modelMatches(c, req("/v1?apikey=k2", "")))
	require.Equal(t, []string{"global/*="}, modelMatches(c, req("/", "")), "no item: the global threshold alone")
	m, ok := c.Match(req("/", "", "x-api-key", "vip"))
	require.True(t, ok)
	require.Equal(t, Match{Key: c.Global}, m)

	c = mustParse(t, `{"rule_name":"r","rule_match_mode":"first","global_threshold":{"token_per_minute":10000},"rule_items":[
		{"limit_by_header":"x-api-key","limit_keys":[{"key":"vip","token_per_minute":100}]},
		{"limit_by_param":"apikey","limit_keys":[{"key":"k2","token_per_minute":50}]}],
		"unmatched_threshold":{"token_per_minute":7},`+redisOK+`}`)
	require.Equal(t, []string{"global/*=", "limit_by_header#0/vip=vip"}, modelMatches(c, req("/v1?apikey=k2", "", "x-api-key", "vip")))
	require.Equal(t, []string{"global/*=", "unmatched/*="}, modelMatches(c, req("/", "")))
}

// Two items of one type reading one source, whose keys both match a value,
// name one subject: it is matched once, with the tightest limit of each
// window, whichever order the items are in.
func TestMatchMergesOneSubject(t *testing.T) {
	free := `{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"regexp:^sk-free-","token_per_minute":1000,"max_concurrent_requests":4}]}`
	all := `{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"*","token_per_minute":5000,"token_per_day":100000,"max_concurrent_requests":2}]}`
	for _, tt := range []struct {
		items         string
		free, anyKey  string // the item index of each
		windows, from []string
	}{
		{items: free + "," + all, free: "0", anyKey: "1"},
		{items: all + "," + free, free: "1", anyKey: "0"},
	} {
		c := mustParse(t, withItems(tt.items))
		ms := c.MatchAll(req("/", "", "x-api-key", "sk-free-abc"), nil)
		require.Len(t, ms, 1, "one subject")
		require.Len(t, ms[0].Merged(), 2)
		require.Equal(t, []string{
			"token_per_minute=1000 (item " + tt.free + ")",
			"token_per_day=100000 (item " + tt.anyKey + ")",
			"max_concurrent_requests=2 (item " + tt.anyKey + ")",
		}, windowsOf(c, ms[0]))
		ms = c.MatchAll(req("/", "", "x-api-key", "sk-paid"), nil)
		require.Len(t, ms, 1)
		require.Nil(t, ms[0].Shared, "one item matches: its own limits")
		require.Equal(t, []string{"token_per_minute=5000 (item " + tt.anyKey + ")", "token_per_day=100000 (item " + tt.anyKey + ")",
			"max_concurrent_requests=2 (item " + tt.anyKey + ")"}, windowsOf(c, ms[0]))
	}
}

// Layered per-IP caps: everyone 1,000 tokens a minute, 10.0.0.0/8 also
// 600: an internal client has one subject, at 600.
func TestMatchMergesLayeredIPCaps(t *testing.T) {
	c := mustParse(t, withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"0.0.0.0/0"`)+`,`+
		`{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"10.0.0.0/8","token_per_minute":6}]}`))
	ms := c.MatchAll(req("/", "10.1.2.3:5000"), nil)
	require.Len(t, ms, 1)
	require.Equal(t, "10.1.2.3", ms[0].Value)
	require.Equal(t, []string{"token_per_minute=6 (item 1)"}, windowsOf(c, ms[0]))
	ms = c.MatchAll(req("/", "8.8.8.8:5000"), nil)
	require.Len(t, ms, 1)
	require.Equal(t, []string{"token_per_minute=10 (item 0)"}, windowsOf(c, ms[0]))
}

// A hard limit holds over a soft one of the same window, whatever their
// limits; between two of a kind, the lower.
func TestMatchMergesHardBeforeSoft(t *testing.T) {
	key := func(limit string, soft bool) string {
		s := `{"limit_by_header":"x-team","limit_keys":[{"key":"a","token_per_minute":` + limit
		if soft {
			s += `,"soft":true`
		}
		return s + `}]}`
	}
	for _, tt := range []struct {
		a, b string
		want string
	}{
		{key("100", true), key("500", false), "token_per_minute=500 (item 1)"},
		{key("500", false), key("100", true), "token_per_minute=500 (item 0)"},
		{key("500", true), key("100", true), "token_per_minute=100 (item 1) soft"},
		{key("100", false), key("100", false), "token_per_minute=100 (item 0)"},
	} {
		c := mustParse(t, withItems(tt.a+","+tt.b))
		ms := c.MatchAll(req("/", "", "x-team", "a"), nil)
		require.Len(t, ms, 1)
		require.Equal(t, []string{tt.want}, windowsOf(c, ms[0]), tt.a+","+tt.b)
	}
}

// Per_model entries of merged keys for the same model are one subject
// too; a model only one of them limits has that one's.
func TestMatchMergesPerModelEntries(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_consumer":"","limit_keys":[{"key":"*","token_per_day":1000,
			"per_model":[{"model":"gpt-4o*","token_per_minute":50},{"model":"o3","query_per_minute":5}]}]},
		{"limit_by_per_consumer":"","limit_keys":[{"key":"regexp:^team-","token_per_day":800,
			"per_model":[{"model":"*","token_per_minute":40,"token_per_hour":900}]}]}`))
	require.Equal(t, []string{
		"limit_by_per_consumer#0/*=team-a +regexp:^team-#1",
		"limit_by_per_consumer#0/gpt-4o*=team-a @gpt-4o-mini <* +*#1",
	}, modelMatches(c, req("/", "", ConsumerHeader, "team-a").withModel("gpt-4o-mini")))
	ms := c.MatchAll(req("/", "", ConsumerHeader, "team-a").withModel("gpt-4o-mini"), nil)
	require.Equal(t, []string{"token_per_day=800 (item 1)"}, windowsOf(c, ms[0]))
	require.Equal(t, []string{"token_per_minute=40 (item 1)", "token_per_hour=900 (item 1)"}, windowsOf(c, ms[1]))
	ms = c.MatchAll(req("/", "", ConsumerHeader, "team-a").withModel("o3"), nil)
	require.Equal(t, []string{"token_per_minute=40 (item 1)", "query_per_minute=5 (item 0)", "token_per_hour=900 (item 1)"}, windowsOf(c, ms[1]))
	require.Equal(t, []string{
		"limit_by_per_consumer#0/*=solo", "limit_by_per_consumer#0/gpt-4o*=solo @gpt-4o <*",
	}, modelMatches(c, req("/", "", ConsumerHeader, "solo").withModel("gpt-4o")), "a subject only one item names")
}

// An operator naming a shared subject sees it as requests count in it.
func TestResolveMergesOneSubject(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"regexp:^sk-free-","token_per_minute":1000}]},
		{"limit_by_header":"x-api-key","limit_keys":[{"key":"sk-free-1","query_per_minute":3}]},
		{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"*","token_per_minute":5000,"token_per_day":100000,
			"per_model":[{"model":"*","token_per_hour":70}]}]}`))
	for _, item := range []int{0, 2} {
		ms, err := c.Resolve(SubjectRef{Item: item, Value: "sk-free-1"})
		require.NoError(t, err)
		require.Len(t, ms, 1)
		require.Equal(t, itemIndex(c, ms[0].Item), item, "named as the operator named it")
		require.Len(t, ms[0].Windows(), 2)
		require.Equal(t, int64(1000), ms[0].Windows()[0].Limit)
		ms, err = c.Resolve(SubjectRef{Item: item, Value: "sk-free-1", Model: "m"})
		require.NoError(t, err)
		require.Len(t, ms, 2)
		require.Equal(t, []string{"token_per_hour=70 (item 2)"}, windowsOf(c, ms[1]))
	}
	ms, err := c.Resolve(SubjectRef{Item: 1, Value: "sk-free-1"})
	require.NoError(t, err)
	require.Equal(t, []string{"query_per_minute=3 (item 1)"}, windowsOf(c, ms[0]), "a subject of its own (another type)")
}

// Matching merges without allocating when nothing is to be merged; a
// shared subject costs its Shared.
func TestMatchAllMergingAllocations(t *testing.T) {
	c := mustParse(t, withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"0.0.0.0/0"`)+`,`+
		item(`"limit_by_per_ip":"from-remote-addr"`, `"10.0.0.0/8"`)+`,`+item(`"limit_by_per_header":"x-api-key"`, `"*"`)))
	buf := make([]Match, 0, 8)
	outside := req("/", "8.8.8.8", "x-api-key", "k")
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { buf = c.MatchAll(outside, buf[:0]) }), "the IP's string only")
	inside := req("/", "10.0.0.1", "x-api-key", "k")
	// The IP's string for each item, the Shared, its windows, their
	// origins and its matches.
	require.Equal(t, 6.0, testing.AllocsPerRun(100, func() { buf = c.MatchAll(inside, buf[:0]) }))
}
