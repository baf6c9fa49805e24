package gateway

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigYAMLBecomesJSON(t *testing.T) {
	js, err := ConfigJSON([]byte(`
rule_name: demo
rule_items:
  - limit_by_per_consumer: ''
    limit_keys:
      - key: "*"
        token_per_minute: 100
  - limit_by_param: apikey
    limit_keys:
      - key: 12345
        token_per_hour: 10
redis:
  service_name: redis.static
  timeout: 250
show_limit_quota_header: true
`), false)
	require.NoError(t, err)
	assert.JSONEq(t, `{"rule_name":"demo","rule_items":[
		{"limit_by_per_consumer":"","limit_keys":[{"key":"*","token_per_minute":100}]},
		{"limit_by_param":"apikey","limit_keys":[{"key":12345,"token_per_hour":10}]}],
		"redis":{"service_name":"redis.static","timeout":250},"show_limit_quota_header":true}`, string(js))
}

func TestConfigMappingsWithOtherKeysAreStringified(t *testing.T) {
	js, err := ConfigJSON([]byte("rule_name: x\nweights:\n  1: a\n  true: b\n"), false)
	require.NoError(t, err)
	assert.JSONEq(t, `{"rule_name":"x","weights":{"1":"a","true":"b"}}`, string(js))
}

func TestConfigErrorsSayWhatIsWrong(t *testing.T) {
	cases := []struct {
		doc    string
		isJSON bool
		msg    string
	}{
		{"rule_name: [unclosed", false, "not valid YAML"},
		{`{"rule_name": }`, true, "not valid JSON"},
		{"", false, "the configuration is empty"},
		{"# only a comment\n", false, "the configuration is empty"},
		{"- a\n- b\n", false, "must be a mapping of fields"},
		{`"just a string"`, true, "must be a mapping of fields"},
	}
	for _, c := range cases {
		_, err := ConfigJSON([]byte(c.doc), c.isJSON)
		require.Error(t, err, c.doc)
		assert.Contains(t, err.Error(), c.msg, c.doc)
	}
}

func TestLoadConfigPicksTheFormatByExtension(t *testing.T) {
	dir := t.TempDir()
	yamlPath := filepath.Join(dir, "c.yaml")
	jsonPath := filepath.Join(dir, "c.json")
	require.NoError(t, os.WriteFile(yamlPath, []byte("rule_name: y\n"), 0o644))
	require.NoError(t, os.WriteFile(jsonPath, []byte(`{"rule_name": "j"}`), 0o644))

	js, err := LoadConfig(yamlPath)
	require.NoError(t, err)
	assert.JSONEq(t, `{"rule_name":"y"}`, string(js))
	js, err = LoadConfig(jsonPath)
	require.NoError(t, err)
	assert.JSONEq(t, `{"rule_name":"j"}`, string(js))

	require.NoError(t, os.WriteFile(jsonPath, []byte("rule_name: not json\n"), 0o644))
	_, err = LoadConfig(jsonPath)
	assert.ErrorContains(t, err, "c.json: not valid JSON")
	_, err = LoadConfig(filepath.Join(dir, "missing.yaml"))
	assert.ErrorContains(t, err, "reading the plugin configuration")
}

func TestTheExampleConfigurationLoads(t *testing.T) {
	js, err := LoadConfig("../example.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(js), `"limit_by_per_api_key":""`)
}

func TestRedisSettingsFollowThePluginsRedisSection(t *testing.T) {
	s := readRedisSettings([]byte(`{"redis":{"service_name":"r","timeout":250,"username":"u","password":"p","database":3}}`))
	assert.Equal(t, redisSettings{timeout: 250 * time.Millisecond, username: "u", password: "p", database: 3}, s)
	s = readRedisSettings([]byte(`{"redis":{"service_name":"r"}}`))
	assert.Equal(t, redisSettings{timeout: time.Second}, s, "the plugin's defaults")
}
