package limiter_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
)

// A configuration the plugin refuses is said once, in one line naming the
// field and the reason, and where in the document: not three times over
// under the wrapper's wording.
func TestConfigErrorIsOneLine(t *testing.T) {
	good := `"rule_name": "chat", "global_threshold": {"token_per_minute": 10}, ` + plugintest.RedisSection
	plugintest.RunTest(t, func(t *testing.T) {
		for _, tc := range []struct{ config, line string }{
			{`{"rule_name": "chat", "global_threshold": {"token_per_minute": 0}, ` + plugintest.RedisSection + `}`,
				"configuration refused: global_threshold.token_per_minute: must be a positive integer, got number 0"},
			{`{"rule_name": "chat", "rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "k", "token_per_minuet": 10}]}], ` + plugintest.RedisSection + `}`,
				"configuration refused: rule_items[0].limit_keys[0].token_per_minuet: unknown field (did you mean token_per_minute?)"},
			{`{"_rules_": [{"_match_route_": ["a"], ` + good + `}, {"_match_route_": ["b"], "rule_name": "b", "global_threshold": {"token_per_minute": 10}}]}`,
				"configuration refused: _rules_[1].redis: required"},
			{`{"_plugin_id_": "p-1", "_rules_": [{` + good + `}]}`,
				"configuration refused: _rules_[0]: matches nothing: a rule needs _match_route_, _match_domain_, _match_service_ or _match_route_prefix_, a list of names"},
			{`{}`, "configuration refused: rule_name: required"},
			// The Secret did not reach the VM: said at the start, not as NOAUTH on every request.
			{`{"rule_name": "chat", "global_threshold": {"token_per_minute": 10}, "redis": {"service_name": "redis.static", "password_env": "ATRL_TEST_UNSET_PASSWORD"}}`,
				"configuration refused: redis.password_env: the environment variable ATRL_TEST_UNSET_PASSWORD is not set (or empty) where the plugin runs: pass it to the VM (a WasmPlugin's vmConfig.env)"},
			{`{"_rules_": [{"_match_route_": ["a"], "rule_name": "chat", "global_threshold": {"token_per_minute": 10}, "redis": {"service_name": "redis.static", "password_env": "ATRL_TEST_UNSET_PASSWORD"}}]}`,
				"configuration refused: _rules_[0].redis.password_env: the environment variable ATRL_TEST_UNSET_PASSWORD is not set (or empty) where the plugin runs: pass it to the VM (a WasmPlugin's vmConfig.env)"},
		} {
			host, status := plugintest.NewTestHost([]byte(tc.config))
			logs := slices.Concat(host.GetWarnLogs(), host.GetErrorLogs(), host.GetCriticalLogs())
			host.Reset()
			assert.Equal(t, types.OnPluginStartStatusFailed, status, tc.config)
			require.Len(t, logs, 1, "one line: %q", logs)
			assert.True(t, strings.HasSuffix(logs[0], "] "+tc.line), "%s\nlogged: %s", tc.config, logs[0])
			for _, wrapper := range []string{"parse rule config failed", "no valid rules", "plugin start failed"} {
				assert.NotContains(t, logs[0], wrapper)
			}
		}
	})
}

// What the plugin takes still starts, rules and all, without a warning.
func TestConfigErrorNoneForAGoodDocument(t *testing.T) {
	good := `"rule_name": "chat", "global_threshold": {"token_per_minute": 10}, ` + plugintest.RedisSection
	plugintest.RunTest(t, func(t *testing.T) {
		host, status := plugintest.NewTestHost([]byte(`{"_plugin_id_": "p-1", ` + good + `, "_rules_": [{"_match_route_": ["a"], ` + good + `}]}`))
		logs := slices.Concat(host.GetWarnLogs(), host.GetErrorLogs(), host.GetCriticalLogs())
		host.Reset()
		assert.Equal(t, types.OnPluginStartStatusOK, status)
		assert.Empty(t, logs)
	})
}

// A password_env the VM's environment holds: the plugin starts (Go mode: the
// test host hands a WASM module no environment).
func TestConfigPasswordFromTheEnvironment(t *testing.T) {
	t.Setenv("ATRL_TEST_PASSWORD", "s3cret")
	test.RunGoTest(t, func(t *testing.T) {
		host, status := plugintest.NewTestHost([]byte(`{"rule_name": "chat", "global_threshold": {"token_per_minute": 10},
			"redis": {"service_name": "redis.static", "password_env": "ATRL_TEST_PASSWORD"}}`))
		host.Reset()
		assert.Equal(t, types.OnPluginStartStatusOK, status)
	})
}
