package quota

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// moneyRulesJSON limits sk- keys by tokens a minute and dollars a day and
// an hour; gold has tokens only.
const moneyRulesJSON = `{"rule_name":"chat","limit_overrides":true,"pricing":{"*":{"input":1,"output":2}},"rule_items":[
	{"limit_by_per_header":"x-key","limit_keys":[{"key":"regexp:^sk-","token_per_minute":1000,"usd_per_day":20,"usd_per_hour":1}]},
	{"limit_by_header":"x-tier","limit_keys":[{"key":"gold","token_per_day":9}]}],
	"redis":{"service_name":"redis.static"}}`

func moneyRules(t *testing.T) *config.Config {
	c, err := config.ParseString(moneyRulesJSON)
	require.NoError(t, err)
	return c
}

var sk1 = config.SubjectRef{Item: 0, Value: "sk-1"}

// A money limit is in US dollars in the document, exactly; its window is
// named as the others'.
func TestDescribeMoneyLimit(t *testing.T) {
	c := moneyRules(t)
	p, err := Request{Op: OpStatus, Ref: sk1}.Plan(c)
	require.NoError(t, err)
	d := Describe(c, p.Matches, [][]budget.LimitStatus{{
		{Kind: budget.KindTokens, Seconds: 60, Limit: 1000, Used: 300, Reset: 42},
		{Kind: budget.KindUSD, Seconds: 86400, Limit: 20 * config.NanoPerDollar, Used: 9_870_000, Reset: 3600},
		{Kind: budget.KindUSD, Seconds: 3600, Limit: 3_251, Used: 9_000_000_000, Reset: 7, Overridden: true},
	}}, false)
	js, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Equal(t, `{"subjects":[{"rule_item":0,"key":"regexp:^sk-","value":"sk-1","limits":[`+
		`{"kind":"tokens","window":"minute","limit":1000,"used":300,"remaining":700,"reset_seconds":42},`+
		`{"kind":"usd","window":"day","limit":20,"used":0.00987,"remaining":19.99013,"reset_seconds":3600},`+
		`{"kind":"usd","window":"hour","limit":0.000003251,"used":9,"remaining":0,"reset_seconds":7,"overridden":true}]}]}`, string(js))

	// Read back, the dollars are nanodollars again, to the nanodollar.
	var back Document
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, d, back)
}

// Every kind is named: a status of any kind the scripts report has a
// document.
func TestEveryKindIsNamed(t *testing.T) {
	for k := budget.KindTokens; k <= budget.KindUSD; k++ {
		assert.NotEmpty(t, kindNames[k], "kind %d", k)
	}
	assert.Equal(t, KindUSD, kindNames[budget.KindUSD])
}

// The other kinds' limits are written byte for byte as before money: as
// encoding/json writes the struct without its methods.
func TestOtherLimitsAreWrittenAsBefore(t *testing.T) {
	type plain Limit // the same fields and tags, without MarshalJSON
	for _, l := range []Limit{
		{Kind: KindTokens, Window: "minute", Limit: 1000, Used: 300, Remaining: 700, ResetSeconds: 42},
		{Kind: KindRequests, Window: "hour", Limit: config.MaxLimit, Used: 0, Remaining: config.MaxLimit, ResetSeconds: 1, Overridden: true},
		{Kind: KindConcurrent, Limit: 5, Used: 1, Remaining: 4},
		{Kind: KindTokens, Window: "day", Limit: 9, Used: 12, Remaining: 0},
	} {
		got, err := json.Marshal(l)
		require.NoError(t, err)
		want, err := json.Marshal(plain(l))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
		var back Limit
		require.NoError(t, json.Unmarshal(want, &back))
		assert.Equal(t, l, back)
	}
	var l Limit
	assert.Error(t, json.Unmarshal([]byte(`{"kind":"tokens","limit":1.5}`), &l))
	assert.Error(t, json.Unmarshal([]byte(`{"kind":"usd","limit":1e3}`), &l), "not as the document writes dollars")
	assert.Error(t, json.Unmarshal([]byte(`{"kind":"usd","used":0.0000000001}`), &l), "finer than a nanodollar")
	require.NoError(t, json.Unmarshal([]byte(`{"kind":"usd","window":"day"}`), &l))
	assert.Equal(t, Limit{Kind: KindUSD, Window: "day"}, l, "absent amounts are 0, as for an int64")
}

func TestParseUSD(t *testing.T) {
	for s, want := range map[string]int64{
		"0": 0, "20": 20_000_000_000, "0.5": 500_000_000, "0.000000001": 1, "19.99013": 19_990_130_000,
		"9007199.254740992": config.MaxLimit, "-0.25": -250_000_000,
	} {
		n, err := parseUSD(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, n, s)
		assert.Equal(t, s, config.FormatUSD(n), "what FormatUSD writes")
	}
	for _, s := range []string{"", "-", ".5", "5.", "1e3", "0.0000000001", "1.2.3", "--1", "+1", "x", "99999999999"} {
		_, err := parseUSD(s)
		assert.Error(t, err, s)
	}
}

// Overrides of money windows take US dollars and are kept in nanodollars
// under the window's name in the scripts ("u86400").
func TestMoneyOverrides(t *testing.T) {
	c := moneyRules(t)
	body := `{"rule_item":0,"value":"sk-1","limits":{"usd_per_day":50,"usd_per_hour":0.25,"token_per_minute":5000}}`
	r, err := ParseRequest(OpSetOverrides, []byte(body), "")
	require.NoError(t, err)
	assert.Equal(t, []FieldLimit{{"usd_per_day", 50 * config.NanoPerDollar}, {"usd_per_hour", 250_000_000}, {"token_per_minute", 5000}}, r.Limits)
	p, err := r.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, []scripts.Override{{Name: "u86400", Limit: 50_000_000_000}, {Name: "u3600", Limit: 250_000_000}, {Name: "t60", Limit: 5000}}, p.Overrides)

	// Logged as taken, in dollars; read from Redis, written in dollars.
	assert.Equal(t, `{"rule_item":0,"value":"sk-1","limits":{"token_per_minute":5000,"usd_per_day":50,"usd_per_hour":0.25}}`, r.String())
	back, err := ParseRequest(OpSetOverrides, []byte(r.String()), "")
	require.NoError(t, err)
	assert.ElementsMatch(t, r.Limits, back.Limits)
	fields := Fields([]scripts.Override{{Name: "u86400", Limit: 50_000_000_000}, {Name: "u3600", Limit: 3_251}, {Name: "u7", Limit: 9}})
	assert.Equal(t, []FieldLimit{{"usd_per_day", 50_000_000_000}, {"usd_per_hour", 3_251}, {"u7", 9}}, fields)
	assert.Equal(t, []json.Number{"50", "0.000003251", "9"}, []json.Number{fields[0].Value(), fields[1].Value(), fields[2].Value()})

	// Rounded to the nanodollar, at least one, as the configuration's.
	for dollars, want := range map[string]int64{"9000000": 9_000_000 * config.NanoPerDollar, "0.0000000014": 1, "0.0000000001": 1, "1e-3": 1_000_000, "0.1": 100_000_000} {
		r, err := ParseRequest(OpSetOverrides, []byte(`{"rule_item":0,"value":"sk-1","limits":{"usd_per_day":`+dollars+`}}`), "")
		require.NoError(t, err, dollars)
		assert.Equal(t, want, r.Limits[0].Limit, dollars)
	}

	for _, tc := range []struct{ limits, want string }{
		{`{"usd_per_day":0}`, "limits.usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got 0"},
		{`{"usd_per_day":-5}`, "limits.usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got -5"},
		{`{"usd_per_day":9000000.01}`, "limits.usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got 9000000.01"},
		{`{"usd_per_day":1e300}`, "limits.usd_per_day: must be a number of US dollars"},
		{`{"usd_per_day":"5"}`, `limits.usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got "5"`},
		{`{"usd_per_day":null}`, "limits.usd_per_day: must be a number of US dollars"},
		{`{"usd_per_day":true}`, "limits.usd_per_day: must be a number of US dollars"},
		{`{"usd_per_day":5,"usd_per_day":6}`, "limits.usd_per_day: given twice"},
		{`{"token_per_minute":0.5}`, "limits.token_per_minute: must be an integer between 1 and 9007199254740992, got 0.5"},
	} {
		_, err := ParseRequest(OpSetOverrides, []byte(`{"rule_item":0,"value":"sk-1","limits":`+tc.limits+`}`), "")
		require.ErrorContains(t, err, tc.want, tc.limits)
		assert.True(t, IsBadRequest(err))
	}
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 1, Value: "gold"}, Limits: []FieldLimit{{"usd_per_day", 5}}},
			`limits.usd_per_day: the subject's key "gold" has no usd_per_day to override`},
		{Request{Op: OpSetOverrides, Ref: sk1, Limits: []FieldLimit{{"usd_per_day", 9_000_000*config.NanoPerDollar + 1}}},
			"limits.usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got 9000000.000000001"},
		{Request{Op: OpSetOverrides, Ref: sk1, Limits: []FieldLimit{{"usd_per_week", 5}}}, "has no usd_per_week to override"},
	} {
		_, err := tc.r.Plan(c)
		require.ErrorContains(t, err, tc.want)
		assert.True(t, IsBadRequest(err))
	}
}

// A reset of kind usd clears the money windows alone; a grant gives tokens
// only, and refuses dollars saying what to do instead.
func TestResetAndGrantOfMoney(t *testing.T) {
	c := moneyRules(t)
	r, err := ParseRequest(OpReset, []byte(`{"rule_item":0,"value":"sk-1","kind":"usd"}`), "")
	require.NoError(t, err)
	assert.Equal(t, KindUSD, r.Kind)
	assert.Equal(t, `{"rule_item":0,"value":"sk-1","kind":"usd"}`, r.String())
	p, err := r.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, []config.Window{
		{Field: "usd_per_hour", Unit: config.UnitUSD, Seconds: 3600, Limit: config.NanoPerDollar},
		{Field: "usd_per_day", Unit: config.UnitUSD, Seconds: 86400, Limit: 20 * config.NanoPerDollar},
	}, p.Target.Windows)
	p, err = Request{Op: OpReset, Ref: sk1, Kind: KindUSD, Window: 86400}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"usd_per_day"}, fieldsOf(p.Target.Windows))
	p, err = Request{Op: OpReset, Ref: sk1}.Plan(c)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"token_per_minute", "usd_per_hour", "usd_per_day"}, fieldsOf(p.Target.Windows), "no kind: every window")
	p, err = Request{Op: OpGrant, Ref: sk1, Tokens: 5}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"token_per_minute"}, fieldsOf(p.Target.Windows), "a grant gives tokens, not money")

	_, err = Request{Op: OpReset, Ref: config.SubjectRef{Item: 1, Value: "gold"}, Kind: KindUSD}.Plan(c)
	require.EqualError(t, err, "the subject has no money window to reset")
	_, err = Request{Op: OpReset, Ref: sk1, Kind: KindUSD, Window: 60}.Plan(c)
	require.EqualError(t, err, "the subject has no minute money window to reset")

	const refused = `usd: a grant gives back tokens only; to give a subject money back, reset its money windows ("kind":"usd") or raise its usd_per_* limit with an override`
	for _, tc := range []struct{ body, query string }{
		{`{"rule_item":0,"value":"sk-1","usd":0.5}`, ""},
		{`{"rule_item":0,"value":"sk-1","usd":0.5,"tokens":10}`, ""},
		{"", "rule_item=0&value=sk-1&usd=0.5"},
	} {
		_, err := ParseRequest(OpGrant, []byte(tc.body), tc.query)
		require.EqualError(t, err, refused, tc.body+tc.query)
		assert.True(t, IsBadRequest(err))
	}
	_, err = ParseRequest(OpReset, []byte(`{"rule_item":0,"value":"sk-1","usd":0.5}`), "")
	require.EqualError(t, err, "usd: not taken by this operation")
}

func fieldsOf(ws []config.Window) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Field)
	}
	return out
}
