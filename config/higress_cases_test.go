package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cases of Higress 2.2.4's own config/config_test.go and
// util/utils_test.go (ai-token-ratelimit) that a configuration or a
// request can show, with what this plugin does; the plugin-level ones are
// in limiter/layered_rules_test.go (TestHigress224).

func TestHigressConfigCases(t *testing.T) {
	// Both_ShouldSucceed: global_threshold and rule_items together.
	c := mustParse(t, `{"rule_name":"test-both","global_threshold":{"token_per_second":100},
		"rule_items":[{"limit_by_header":"x-test","limit_keys":[{"key":"k1","token_per_minute":10}]}],`+redisOK+`}`)
	require.Equal(t, int64(100), c.Global.Windows[0].Limit)
	require.Len(t, c.Items, 1)

	// RuleItemsLimit: Higress refuses an eleventh item; here any number is
	// accepted, and all of them apply.
	var items []string
	for i := range 11 {
		items = append(items, `{"limit_by_header":"h`+strconv.Itoa(i+1)+`","limit_keys":[{"key":"k","token_per_second":1}]}`)
	}
	c = mustParse(t, withItems(strings.Join(items, ",")))
	require.Len(t, c.Items, 11)
	r := req("/", "")
	for i := range 11 {
		r.headers["h"+strconv.Itoa(i+1)] = "k"
	}
	require.Len(t, c.MatchAll(r, nil), 11)

	// DuplicateRules_DiffWindow: Higress warns and keeps two counters; here
	// one subject with both windows.
	c = mustParse(t, withItems(`{"limit_by_header":"x-api-key","limit_keys":[{"key":"k1","token_per_minute":100}]},
		{"limit_by_header":"x-api-key","limit_keys":[{"key":"k1","token_per_hour":1000}]}`))
	ms := c.MatchAll(req("/", "", "x-api-key", "k1"), nil)
	require.Len(t, ms, 1)
	require.Equal(t, []string{"token_per_minute=100 (item 0)", "token_per_hour=1000 (item 1)"}, windowsOf(c, ms[0]))

	// DuplicateRules_SameWindow: Higress counts a request twice in the one
	// counter both items name; here once, in one window.
	c = mustParse(t, withItems(`{"limit_by_header":"x-api-key","limit_keys":[{"key":"k1","token_per_minute":100}]},
		{"limit_by_header":"x-api-key","limit_keys":[{"key":"k1","token_per_minute":100}]}`))
	ms = c.MatchAll(req("/", "", "x-api-key", "k1"), nil)
	require.Len(t, ms, 1)
	require.Equal(t, []string{"token_per_minute=100 (item 0)"}, windowsOf(c, ms[0]))

	// The refusals: each names its field here.
	for _, tt := range []struct{ json, want string }{
		{`{` + redisOK + `}`, "rule_name: required"},
		{`{"rule_name":"r","global_threshold":{"token_per_minute":-100},` + redisOK + `}`, "global_threshold.token_per_minute: must be a positive integer, got number -100"},
		{`{"rule_name":"r","rule_items":[{"limit_by_header":"x-test","limit_keys":[{"key":"key1","token_per_minute":-100}]}],` + redisOK + `}`,
			"rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number -100"},
		{`{"rule_name":"r",` + redisOK + `}`, "one of global_threshold or rule_items is required"},
		{`{"rule_name":"r","rule_items":[{"limit_keys":[{"key":"k","token_per_second":1}]}],` + redisOK + `}`, "rule_items[0]: "},
	} {
		_, err := ParseString(tt.json)
		require.ErrorContains(t, err, tt.want, tt.json)
	}
}

// util/utils_test.go: a cookie's value, and the client IP a header gives.
func TestHigressUtilCases(t *testing.T) {
	for _, tt := range []struct{ cookie, want string }{
		{"user=alice; other=value", "alice"},
		{"user; other=value", ""},
		{"user=alice=admin; other=value", "alice=admin"},
		{"", ""},
	} {
		first, last, _ := CookieValue(tt.cookie, "user")
		require.Equal(t, tt.want, first, tt.cookie)
		require.Equal(t, tt.want, last, tt.cookie)
	}
	_, _, ok := CookieValue("user=alice; other=value", "missing")
	require.False(t, ok)

	for _, tt := range []struct{ source, want string }{
		{"]", ""}, // Higress: "" (no IP: the item does not apply), and so here
		{"]:80", ""},
		{"[::1]", "::1"},
		{"[fe80::14d5:8aff:fed9:2114]:123", "fe80::14d5:8aff:fed9:2114"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1:12", "127.0.0.1"},
		{"fe80::14d5:8aff:fed9:2114", "fe80::14d5:8aff:fed9:2114"},
	} {
		a, ok := ParseIP(tt.source)
		got := ""
		if ok {
			got = a.String()
		}
		require.Equal(t, tt.want, got, tt.source)
	}
}
