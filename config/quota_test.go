package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

const tokenHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func TestParseQuotaEndpoints(t *testing.T) {
	c := mustParse(t, withGlobal(`,"quota_path":"/v1/quota","limit_overrides":true,`+
		`"admin":{"path":"/atrl","consumer":"ops","header":"X-Admin-Token","token_sha256":"`+tokenHash+`"}`))
	require.Equal(t, "/v1/quota", c.QuotaPath)
	require.True(t, c.LimitOverrides)
	require.Equal(t, "/atrl", c.Admin.Path)
	require.Equal(t, "ops", c.Admin.Consumer)
	require.Equal(t, "x-admin-token", c.Admin.Header)
	require.Equal(t, byte(0x9f), c.Admin.TokenSHA256[0])

	c = mustParse(t, withGlobal(``))
	require.Equal(t, "", c.QuotaPath)
	require.Nil(t, c.Admin)
	require.False(t, c.LimitOverrides)

	for _, tc := range []struct{ name, extra, want string }{
		{"relative quota path", `,"quota_path":"v1/quota"`, `quota_path: must be a path starting with '/'`},
		{"quota path with query", `,"quota_path":"/q?x=1"`, `quota_path: must be a path starting with '/', without a query`},
		{"quota path trailing slash", `,"quota_path":"/q/"`, `every request would be the plugin's), got "/q/"`},
		{"quota path empty", `,"quota_path":""`, `quota_path: must not be empty`},
		{"admin path root", `,"admin":{"path":"/","consumer":"ops"}`, `admin.path: must be a path starting with '/'`},
		{"admin without path", `,"admin":{"consumer":"ops"}`, `admin.path: required`},
		{"admin nobody", `,"admin":{"path":"/a"}`, `admin: needs consumer, or header with token_sha256`},
		{"admin header alone", `,"admin":{"path":"/a","header":"x-t"}`, `admin.token_sha256: required with header`},
		{"admin token alone", `,"admin":{"path":"/a","token_sha256":"` + tokenHash + `"}`, `admin.header: required with token_sha256`},
		{"admin short hash", `,"admin":{"path":"/a","header":"x-t","token_sha256":"abc"}`, `admin.token_sha256: must be the SHA-256 of the admin token, 64 hex digits`},
		{"admin plain token", `,"admin":{"path":"/a","header":"x-t","token_sha256":"` + tokenHash[:62] + `zz"}`, `64 hex digits`},
		{"admin bad header", `,"admin":{"path":"/a","header":"x t","token_sha256":"` + tokenHash + `"}`, `admin.header: invalid header name "x t"`},
		{"admin pseudo header", `,"admin":{"path":"/a","header":":path","token_sha256":"` + tokenHash + `"}`, `admin.header: invalid header name ":path"`},
		{"admin unknown", `,"admin":{"path":"/a","consumer":"ops","token":"x"}`, `admin.token: unknown field`},
		{"quota inside admin", `,"quota_path":"/a/status","admin":{"path":"/a","consumer":"ops"}`, `quota_path: must be outside admin.path "/a"`},
		{"admin inside quota", `,"quota_path":"/a","admin":{"path":"/a/x","consumer":"ops"}`, `quota_path: must be outside admin.path`},
		{"same paths", `,"quota_path":"/a","admin":{"path":"/a","consumer":"ops"}`, `quota_path: must be outside admin.path`},
		{"overrides not a bool", `,"limit_overrides":"yes"`, `limit_overrides: must be a boolean`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseString(withGlobal(tc.extra))
			require.ErrorContains(t, err, tc.want)
		})
	}
	// A quota path that merely starts like the admin path is its own.
	mustParse(t, withGlobal(`,"quota_path":"/ab","admin":{"path":"/a","consumer":"ops"}`))
}

func TestResolve(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_match_mode":"all","rule_items":[
		{"limit_by_per_header":"x-key","limit_keys":[{"key":"regexp:^sk-","token_per_minute":100,
			"per_model":[{"model":"gpt-4*","token_per_minute":10}]}]},
		{"limit_by_header":"x-tier","limit_keys":[{"key":"gold","token_per_hour":1000},{"key":"regexp:^s","query_per_minute":5}]},
		{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"10.0.0.0/8","token_per_minute":7},{"key":"::/0","token_per_minute":8}]},
		{"limit_by_per_model":"","limit_keys":[{"key":"claude*","token_per_day":9}]},
		{"limit_by_model":"","limit_keys":[{"key":"regexp:^claude","token_per_day":9}]}],
		"unmatched_threshold":{"query_per_minute":3},`+redisOK+`}`)

	m, err := c.Resolve(SubjectRef{Item: 0, Value: "sk-1"})
	require.NoError(t, err)
	require.Len(t, m, 1)
	require.Equal(t, "sk-1", m[0].Value)
	require.Same(t, &c.Items[0], m[0].Item)

	m, err = c.Resolve(SubjectRef{Item: 0, Value: "sk-1", Model: "gpt-4o"})
	require.NoError(t, err)
	require.Len(t, m, 2)
	require.Equal(t, "gpt-4o", m[1].Model)
	require.Same(t, m[0].Key, m[1].Parent)
	require.Equal(t, "sk-1", m[1].Value)

	// Shared keys: the subject is the key, whatever value named it.
	m, err = c.Resolve(SubjectRef{Item: 1, Value: "silver"})
	require.NoError(t, err)
	require.Equal(t, "regexp:^s", m[0].Value)
	for _, key := range []string{"regexp:^s", "gold"} {
		m2, err := c.Resolve(SubjectRef{Item: 1, Value: key})
		require.NoError(t, err)
		require.Equal(t, key, m2[0].Value, "the value the status shows names its subject back")
		require.Equal(t, key, m2[0].Key.Key)
	}
	m, err = c.Resolve(SubjectRef{Item: 4, Value: "regexp:^claude"})
	require.NoError(t, err)
	require.Equal(t, "regexp:^claude", m[0].Value)
	require.Equal(t, "", m[0].Model, "a shared model key is no one model")

	m, err = c.Resolve(SubjectRef{Item: 2, Value: "10.1.2.3"})
	require.NoError(t, err)
	require.Equal(t, "10.1.2.3", m[0].Value)
	m, err = c.Resolve(SubjectRef{Item: 2, Value: "2001:db8::1"})
	require.NoError(t, err)
	require.Equal(t, "2001:db8::/64", m[0].Value)
	m2, err := c.Resolve(SubjectRef{Item: 2, Value: "2001:db8::/64"})
	require.NoError(t, err)
	require.Equal(t, m[0], m2[0], "the network as the status shows it names the same subject")

	m, err = c.Resolve(SubjectRef{Item: 3, Value: "claude-3"})
	require.NoError(t, err)
	require.Equal(t, "claude-3", m[0].Model)
	_, err = c.Resolve(SubjectRef{Item: 3, Value: "claude-3", Model: "claude-3"})
	require.NoError(t, err)

	m, err = c.Resolve(SubjectRef{Threshold: UnmatchedThreshold})
	require.NoError(t, err)
	require.True(t, m[0].Unmatched)

	for _, tc := range []struct {
		ref  SubjectRef
		want string
	}{
		{SubjectRef{Item: 5, Value: "x"}, `rule item 5 does not exist: the rule has 5`},
		{SubjectRef{Item: -1, Value: "x"}, `rule item -1 does not exist`},
		{SubjectRef{Item: 0, Value: "pk-1"}, `no key of rule item 0 (limit_by_per_header) matches the value "pk-1"`},
		{SubjectRef{Item: 0, Value: ""}, `matches the value ""`},
		{SubjectRef{Item: 0, Value: "sk-1", Model: "o3"}, `no per_model entry of the key "regexp:^sk-" matches the model "o3"`},
		{SubjectRef{Item: 1, Value: "gold", Model: "o3"}, `the subject's key "gold" has no per_model limits`},
		{SubjectRef{Item: 2, Value: "not-an-ip"}, `matches the value "not-an-ip"`},
		{SubjectRef{Item: 2, Value: "10.0.0.0/8"}, `matches the value "10.0.0.0/8"`},
		{SubjectRef{Item: 3, Value: "gpt-4", Model: "claude-3"}, `matches the value "gpt-4"`},
		{SubjectRef{Item: 3, Value: "claude-3", Model: "claude-4"}, `its value is the model, "claude-3", not "claude-4"`},
		{SubjectRef{Threshold: GlobalThreshold}, `global_threshold is not configured`},
	} {
		_, err := c.Resolve(tc.ref)
		require.ErrorContains(t, err, tc.want, "%+v", tc.ref)
		require.True(t, errors.Is(err, ErrNoSuchSubject))
	}
}

func TestWindowNames(t *testing.T) {
	for _, tc := range []struct {
		seconds int64
		name    string
	}{{1, "second"}, {60, "minute"}, {3600, "hour"}, {86400, "day"}, {WeekSeconds, "week"}, {MonthSeconds, "month"}} {
		require.Equal(t, tc.name, WindowName(tc.seconds))
		require.Equal(t, tc.seconds, WindowSeconds(tc.name))
	}
	require.Equal(t, int64(0), WindowSeconds("year"))
	require.Equal(t, "token_per_hour", LimitField(UnitTokens, 3600))
	require.Equal(t, "query_per_second", LimitField(UnitRequests, 1))
	require.Equal(t, "", LimitField(UnitRequests, 7))
	u, s, ok := WindowOf("query_per_day")
	require.True(t, ok)
	require.Equal(t, UnitRequests, u)
	require.Equal(t, int64(86400), s)
	_, _, ok = WindowOf(MaxConcurrentField)
	require.False(t, ok)
}
