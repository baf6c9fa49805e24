package quota

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

const rulesJSON = `{"rule_name":"chat","rule_match_mode":"all","limit_overrides":true,"rule_items":[
	{"limit_by_per_header":"x-key","limit_keys":[{"key":"regexp:^sk-","token_per_minute":1000,"query_per_hour":50,"max_concurrent_requests":3,
		"per_model":[{"model":"gpt-4*","token_per_minute":100}]}]},
	{"limit_by_header":"x-tier","limit_keys":[{"key":"gold","token_per_day":9}]}],
	"unmatched_threshold":{"query_per_minute":3},
	"redis":{"service_name":"redis.static"}}`

func rules(t *testing.T) *config.Config {
	c, err := config.ParseString(rulesJSON)
	require.NoError(t, err)
	return c
}

func TestDescribeHasTheDocumentedShape(t *testing.T) {
	c := rules(t)
	p, err := Request{Op: OpStatus, Ref: config.SubjectRef{Item: 0, Value: "sk-1", Model: "gpt-4o"}}.Plan(c)
	require.NoError(t, err)
	u, err := Request{Op: OpStatus, Ref: config.SubjectRef{Threshold: config.UnmatchedThreshold}}.Plan(c)
	require.NoError(t, err)
	d := Describe(c, append(p.Matches, u.Matches...), [][]budget.LimitStatus{
		{{Kind: budget.KindTokens, Seconds: 60, Limit: 1000, Used: 300, Reset: 42}, {Kind: budget.KindRequests, Seconds: 3600, Limit: 50, Used: 60, Reset: 7},
			{Kind: budget.KindConcurrent, Limit: 5, Used: 1, Overridden: true}},
		{{Kind: budget.KindTokens, Seconds: 60, Limit: 100, Used: 30, Reset: 42}},
		{{Kind: budget.KindRequests, Seconds: 60, Limit: 3, Used: 0, Reset: 1}},
	}, false)
	js, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"subjects":[
		{"rule_item":0,"key":"regexp:^sk-","value":"sk-1","limits":[
			{"kind":"tokens","window":"minute","limit":1000,"used":300,"remaining":700,"reset_seconds":42},
			{"kind":"requests","window":"hour","limit":50,"used":60,"remaining":0,"reset_seconds":7},
			{"kind":"concurrent","limit":5,"used":1,"remaining":4,"overridden":true}]},
		{"rule_item":0,"key":"regexp:^sk-","value":"sk-1","model":"gpt-4o","model_key":"gpt-4*","limits":[
			{"kind":"tokens","window":"minute","limit":100,"used":30,"remaining":70,"reset_seconds":42}]},
		{"threshold":"unmatched_threshold","key":"*","value":"","limits":[
			{"kind":"requests","window":"minute","limit":3,"used":0,"remaining":3,"reset_seconds":1}]}]}`, string(js))
}

func TestPlan(t *testing.T) {
	c := rules(t)
	p, err := Request{Op: OpReset, Ref: config.SubjectRef{Item: 0, Value: "sk-1"}, Window: 3600}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, "atrl:{chat|limit_by_per_header|x-key|sk-1}", string(p.Target.Key))
	assert.Equal(t, []config.Window{{Field: "query_per_hour", Unit: config.UnitRequests, Seconds: 3600, Limit: 50}}, p.Target.Windows)
	assert.Len(t, p.Status, 1)

	// With a model: the per_model subject is the target, a key of its own;
	// the status covers both.
	p, err = Request{Op: OpGrant, Ref: config.SubjectRef{Item: 0, Value: "sk-1", Model: "gpt-4o"}, Tokens: 5}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, "atrl:{chat|limit_by_per_header|x-key|sk-1}:m:gpt-4o", string(p.Target.Key))
	assert.Equal(t, 0, p.Target.Suffix)
	require.Len(t, p.Status, 2)
	assert.NotZero(t, p.Status[1].Suffix, "sent after its parent, as a suffix")

	// A grant acts on token windows only; a reset of one kind on that kind.
	p, err = Request{Op: OpGrant, Ref: config.SubjectRef{Item: 0, Value: "sk-1"}, Tokens: 5}.Plan(c)
	require.NoError(t, err)
	assert.Len(t, p.Target.Windows, 1)
	p, err = Request{Op: OpReset, Ref: config.SubjectRef{Item: 0, Value: "sk-1"}, Kind: KindRequests}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, config.UnitRequests, p.Target.Windows[0].Unit)

	p, err = Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 0, Value: "sk-1"},
		Limits: []FieldLimit{{"token_per_minute", 5000}, {"max_concurrent_requests", 9}}}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, []scripts.Override{{Name: "t60", Limit: 5000}, {Name: "c", Limit: 9}}, p.Overrides)
	assert.Equal(t, []FieldLimit{{"token_per_minute", 5000}, {"max_concurrent_requests", 9}, {"t7", 3}}, Fields(append(p.Overrides, scripts.Override{Name: "t7", Limit: 3})))

	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{Op: OpStatus, Ref: config.SubjectRef{Item: 2, Value: "x"}}, "rule item 2 does not exist"},
		{Request{Op: OpReset, Ref: config.SubjectRef{Item: 0, Value: "sk-1"}, Window: 86400}, "the subject has no day window to reset"},
		{Request{Op: OpGrant, Ref: config.SubjectRef{Threshold: config.UnmatchedThreshold}, Tokens: 1}, "the subject has no token window to grant tokens in"},
		{Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 0, Value: "sk-1"}, Limits: []FieldLimit{{"token_per_day", 5}}},
			`limits.token_per_day: the subject's key "regexp:^sk-" has no token_per_day to override`},
		{Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 1, Value: "gold"}, Limits: []FieldLimit{{"max_concurrent_requests", 5}}},
			`has no max_concurrent_requests to override`},
		{Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 1, Value: "gold"}, Limits: []FieldLimit{{"token_per_year", 5}}},
			`limits.token_per_year: unknown limit`},
		{Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 1, Value: "gold"}}, `limits: name at least one limit`},
	} {
		_, err := tc.r.Plan(c)
		require.ErrorContains(t, err, tc.want)
		assert.True(t, IsBadRequest(err))
	}
	_, err = Request{Op: OpStatus, Ref: config.SubjectRef{Item: 0, Value: "pk"}}.Plan(c)
	assert.True(t, errors.Is(err, config.ErrNoSuchSubject) || IsBadRequest(err))

	c.LimitOverrides = false
	_, err = Request{Op: OpSetOverrides, Ref: config.SubjectRef{Item: 1, Value: "gold"}, Limits: []FieldLimit{{"token_per_day", 5}}}.Plan(c)
	require.ErrorContains(t, err, "limit_overrides is off")
}

// A request names itself as the admin API takes it: parsing what it says
// gives the same request back.
func TestRequestString(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		body string
	}{
		{OpGrant, `{"rule_item":0,"value":"sk-1","model":"gpt-4o","window":"minute","tokens":1000}`},
		{OpReset, `{"threshold":"global_threshold","kind":"requests"}`},
		{OpSetOverrides, `{"rule_item":2,"value":"a\"b","limits":{"max_concurrent_requests":3,"token_per_day":5000}}`},
	} {
		r, err := ParseRequest(tc.op, []byte(tc.body), "")
		require.NoError(t, err)
		assert.Equal(t, tc.body, r.String())
		back, err := ParseRequest(tc.op, []byte(r.String()), "")
		require.NoError(t, err)
		assert.Equal(t, r.Ref, back.Ref)
	}
}

func TestParseRequest(t *testing.T) {
	r, err := ParseRequest(OpGrant, []byte(`{"rule_item":0,"value":"sk-1","model":"gpt-4o","tokens":1e3,"window":"minute"}`), "ignored=1")
	require.NoError(t, err)
	assert.Equal(t, Request{Op: OpGrant, Ref: config.SubjectRef{Item: 0, Value: "sk-1", Model: "gpt-4o"}, Tokens: 1000, Window: 60}, r)

	r, err = ParseRequest(OpStatus, nil, "rule_item=1&value=a%26b")
	require.NoError(t, err)
	assert.Equal(t, config.SubjectRef{Item: 1, Value: "a&b"}, r.Ref)

	r, err = ParseRequest(OpRemoveOverrides, nil, "threshold=global_threshold")
	require.NoError(t, err)
	assert.Equal(t, config.GlobalThreshold, r.Ref.Threshold)

	r, err = ParseRequest(OpSetOverrides, []byte(`{"rule_item":0,"value":"v","limits":{"token_per_day":5000,"query_per_minute":7.0}}`), "")
	require.NoError(t, err)
	assert.Equal(t, []FieldLimit{{"token_per_day", 5000}, {"query_per_minute", 7}}, r.Limits)

	for _, tc := range []struct {
		op          Op
		body, query string
		want        string
	}{
		{OpStatus, `{`, "", "the body is not valid JSON"},
		{OpStatus, `[1]`, "", "the body must be a JSON object"},
		{OpStatus, `{"rule_item":0,"value":"v","rule_item":1}`, "", "rule_item: given twice"},
		{OpStatus, ``, "rule_item=0&value=a&value=b", "value: given twice"},
		{OpStatus, ``, "rule_item=0&value=%zz", "the query string is malformed"},
		{OpStatus, `{"rule_item":0,"value":"v","color":1}`, "", "color: unknown field"},
		{OpStatus, `{"rule_item":0,"value":"v","tokens":1}`, "", "tokens: not taken by this operation"},
		{OpStatus, `{"rule_item":"0","value":"v"}`, "", `rule_item: must be an integer between 0 and 2147483647, got "0"`},
		{OpStatus, ``, "rule_item=x&value=v", `rule_item: must be an integer between 0 and 2147483647, got "x"`},
		{OpStatus, `{"rule_item":-1,"value":"v"}`, "", `rule_item: must be an integer`},
		{OpStatus, `{"rule_item":0.5,"value":"v"}`, "", `rule_item: must be an integer`},
		{OpStatus, `{"rule_item":0,"value":3}`, "", `value: must be a string, got 3`},
		{OpStatus, `{"rule_item":0}`, "", `value: required`},
		{OpStatus, `{"value":"v"}`, "", `rule_item: required`},
		{OpStatus, ``, "", `rule_item: required`},
		{OpStatus, `{"rule_item":0,"threshold":"global_threshold"}`, "", `name the subject by one of them`},
		{OpStatus, `{"threshold":"global"}`, "", `threshold: must be global_threshold or unmatched_threshold, got "global"`},
		{OpStatus, `{"threshold":"global_threshold","value":"v"}`, "", `value: a threshold has no value`},
		{OpReset, `{"rule_item":0,"value":"v","window":"year"}`, "", `window: must be second, minute, hour, day, week or month, got "year"`},
		{OpReset, `{"rule_item":0,"value":"v","kind":"concurrent"}`, "", `kind: must be tokens, requests or usd, got "concurrent"`},
		{OpGrant, `{"rule_item":0,"value":"v"}`, "", `tokens: required`},
		{OpGrant, `{"rule_item":0,"value":"v","tokens":0}`, "", `tokens: must be an integer between 1 and 9007199254740992, got 0`},
		{OpGrant, `{"rule_item":0,"value":"v","tokens":1e300}`, "", `tokens: must be an integer between 1 and`},
		{OpGrant, `{"rule_item":0,"value":"v","tokens":9007199254740993}`, "", `tokens: must be an integer between 1 and`},
		{OpSetOverrides, `{"rule_item":0,"value":"v"}`, "", `limits: required`},
		{OpSetOverrides, `{"rule_item":0,"value":"v","limits":[1]}`, "", `limits: must be an object`},
		{OpSetOverrides, `{"rule_item":0,"value":"v","limits":{"token_per_day":-5}}`, "", `limits.token_per_day: must be an integer between 1 and`},
		{OpSetOverrides, `{"rule_item":0,"value":"v","limits":{"token_per_day":"5"}}`, "", `limits.token_per_day: must be an integer`},
		{OpSetOverrides, `{"rule_item":0,"value":"v","limits":{"token_per_day":5,"token_per_day":6}}`, "", `limits.token_per_day: given twice`},
	} {
		_, err := ParseRequest(tc.op, []byte(tc.body), tc.query)
		require.ErrorContains(t, err, tc.want, "%s %s", tc.body, tc.query)
		assert.True(t, IsBadRequest(err))
	}
}

// A subject two rule items name (their keys both match its value) is one:
// its plan acts on all its windows, an override may name a window either
// item set, and its status names the other item's key under merged.
func TestPlanOfASharedSubject(t *testing.T) {
	c, err := config.ParseString(`{"rule_name":"chat","limit_overrides":true,"rule_items":[
		{"limit_by_per_header":"x-key","limit_keys":[{"key":"regexp:^sk-free-","token_per_minute":1000}]},
		{"limit_by_per_header":"x-key","limit_keys":[{"key":"*","token_per_minute":5000,"token_per_day":90000,"max_concurrent_requests":2}]}],
		"redis":{"service_name":"redis.static"}}`)
	require.NoError(t, err)
	for _, item := range []int{0, 1} {
		ref := config.SubjectRef{Item: item, Value: "sk-free-1"}
		p, err := Request{Op: OpReset, Ref: ref}.Plan(c)
		require.NoError(t, err)
		require.Len(t, p.Target.Windows, 2, "the minute (item 0's 1,000) and the day (item 1's)")
		assert.Equal(t, int64(1000), p.Target.Windows[0].Limit)
		assert.Equal(t, int64(2), p.Target.Concurrent)
		p, err = Request{Op: OpSetOverrides, Ref: ref, Limits: []FieldLimit{{"token_per_day", 5}, {config.MaxConcurrentField, 1}}}.Plan(c)
		require.NoError(t, err)
		assert.Len(t, p.Overrides, 2)
		d := Describe(c, p.Matches, [][]budget.LimitStatus{nil}, false)
		require.Len(t, d.Subjects, 1)
		require.Len(t, d.Subjects[0].Merged, 1)
		assert.Equal(t, item, *d.Subjects[0].RuleItem)
		assert.Equal(t, 1-item, *d.Subjects[0].Merged[0].RuleItem)
	}
	p, err := Request{Op: OpReset, Ref: config.SubjectRef{Item: 1, Value: "sk-paid"}}.Plan(c)
	require.NoError(t, err)
	assert.Equal(t, int64(5000), p.Target.Windows[0].Limit, "a value only one item matches: its limits alone")
	d := Describe(c, p.Matches, [][]budget.LimitStatus{nil}, false)
	js, err := json.Marshal(d)
	require.NoError(t, err)
	assert.NotContains(t, string(js), "merged")
}
