package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// quota_headers lists the forms of quota headers; show_limit_quota_header
// (Higress's) is the tokenratelimit form.
func TestQuotaHeaders(t *testing.T) {
	c := mustParse(t, withGlobal(`,"quota_headers":["openai","ietf"]`))
	require.Equal(t, QuotaHeadersOpenAI|QuotaHeadersIETF, c.QuotaHeaders)
	c = mustParse(t, withGlobal(`,"show_limit_quota_header":true,"quota_headers":["tokenratelimit","openai"]`))
	require.Equal(t, QuotaHeadersTokenRateLimit|QuotaHeadersOpenAI, c.QuotaHeaders, "both ways of asking for one form")
	c = mustParse(t, withGlobal(`,"quota_headers":[]`))
	require.Zero(t, c.QuotaHeaders)

	for _, bad := range []struct{ extra, msg string }{
		{`,"quota_headers":"openai"`, `quota_headers: must be a list of forms ("tokenratelimit", "openai", "ietf"), got string "openai"`},
		{`,"quota_headers":["openai","OpenAI"]`, `quota_headers[1]: must be "tokenratelimit", "openai" or "ietf", got "OpenAI"`},
		{`,"quota_headers":["ietf","ietf"]`, `quota_headers[1]: "ietf" is listed twice`},
		{`,"quota_headers":[1]`, `quota_headers[0]: must be a string, got number 1`},
	} {
		_, err := ParseString(withGlobal(bad.extra))
		require.EqualError(t, err, bad.msg, bad.extra)
	}
}

// shadow_mode and rejected_msg as set by the configuration.
func TestShadowModeAndRejectedMsg(t *testing.T) {
	c := mustParse(t, withGlobal(`,"shadow_mode":true,"rejected_msg":"Too many requests"`))
	require.True(t, c.Shadow)
	require.True(t, c.RejectedMsgSet, "set, even to the default text: the operator chose that body")
	c = mustParse(t, withGlobal(`,"shadow_mode":true,"ambiguous_body":"reject"`))
	require.Equal(t, AmbiguousStrictest, c.AmbiguousBody, "shadow_mode rejects nothing, not even an ambiguous body")
	_, err := ParseString(withGlobal(`,"shadow_mode":"yes"`))
	require.EqualError(t, err, `shadow_mode: must be a boolean, got string "yes"`)
}

// access_log is on unless set to false.
func TestAccessLogOnByDefault(t *testing.T) {
	require.True(t, mustParse(t, withGlobal(``)).AccessLog)
	require.False(t, mustParse(t, withGlobal(`,"access_log":false`)).AccessLog)
	_, err := ParseString(withGlobal(`,"access_log":"off"`))
	require.EqualError(t, err, `access_log: must be a boolean, got string "off"`)
}

// An unquoted off (on) in YAML 1.1, as Kubernetes and Higress's console read
// it, reaches the plugin as false (true).
func TestStreamUsageFromYAML11(t *testing.T) {
	c := mustParse(t, withGlobal(`,"stream_usage":false`))
	require.Equal(t, StreamUsageOff, c.StreamUsage)
	c = mustParse(t, withGlobal(`,"stream_usage":true`))
	require.Equal(t, StreamUsageInject, c.StreamUsage)
	_, err := ParseString(withGlobal(`,"stream_usage":0`))
	require.EqualError(t, err, `stream_usage: must be a string, got number 0`)
}

// DescribeUnmatched says what each rule item found, never the value.
func TestDescribeUnmatched(t *testing.T) {
	c := mustParse(t, withItems(item(`"limit_by_header":"x-api-key"`, `"sk-1"`)+`,`+item(`"limit_by_cookie":"session"`, `"s1"`)+`,`+
		item(`"limit_by_per_ip":"from-remote-addr"`, `"10.0.0.0/8"`)))
	got := c.DescribeUnmatched(req("/v1/chat/completions", "192.0.2.1:5000", "x-api-key", "sk-secret"))
	require.Equal(t, "limit_by_header x-api-key: present, matches no key; limit_by_cookie session: absent; "+
		"limit_by_per_ip from-remote-addr: the client address matches no key", got)
}

// redis.password_env names the variable holding the password: the
// configuration (a WasmPlugin) never holds it.
func TestRedisPasswordEnv(t *testing.T) {
	c := mustParse(t, withRedis(`{"service_name":"redis.static","password_env":"ATRL_PW"}`))
	require.Equal(t, "ATRL_PW", c.Redis.PasswordEnv)
	env := map[string]string{"ATRL_PW": "s3cret"}
	pw, err := c.Redis.ResolvePassword(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "s3cret", pw)
	_, err = c.Redis.ResolvePassword(func(string) string { return "" })
	require.EqualError(t, err, "redis.password_env: the environment variable ATRL_PW is not set (or empty) where the plugin runs: pass it to the VM (a WasmPlugin's vmConfig.env)")

	c = mustParse(t, withRedis(`{"service_name":"redis.static","password":"inline"}`))
	pw, err = c.Redis.ResolvePassword(func(string) string { t.Fatal("no variable to read"); return "" })
	require.NoError(t, err)
	require.Equal(t, "inline", pw)

	for _, bad := range []struct{ redis, msg string }{
		{`{"service_name":"r","password":"x","password_env":"P"}`, "redis.password_env: and password cannot both be set: password_env names where the password is"},
		{`{"service_name":"r","password_env":"1P"}`, `redis.password_env: must be an environment variable's name (letters, digits and _), got "1P"`},
		{`{"service_name":"r","password_env":""}`, `redis.password_env: must not be empty`},
	} {
		_, err := ParseString(withRedis(bad.redis))
		require.EqualError(t, err, bad.msg)
	}
}
