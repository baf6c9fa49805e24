package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

const redisOK = `"redis":{"service_name":"redis.static"}`

// withItems returns a valid configuration around the given rule_items entries.
func withItems(items string, extra ...string) string {
	return `{"rule_name":"r","rule_items":[` + items + `],` + strings.Join(extra, "") + redisOK + `}`
}

// anyPrice prices every model (a top-level member and its comma), for the
// usd_per_* windows.
const anyPrice = `"pricing":{"*":{"input":1,"output":2}},`

// withGlobal returns a valid global configuration with extra top-level members
// (extra, if not empty, starts with a comma).
func withGlobal(extra string) string {
	return `{"rule_name":"r","global_threshold":{"token_per_minute":10},` + redisOK + extra + `}`
}

// withRedis returns a valid global configuration with the given redis object.
func withRedis(redis string) string {
	return `{"rule_name":"r","global_threshold":{"token_per_minute":10},"redis":` + redis + `}`
}

// item returns a rule item with one limit key.
func item(limitBy, key string) string {
	return `{` + limitBy + `,"limit_keys":[{"key":` + key + `,"token_per_minute":10}]}`
}

const allWindowsMsg = "at least one of token_per_second, token_per_minute, token_per_hour, token_per_day, token_per_week, token_per_month, query_per_second, query_per_minute, query_per_hour, query_per_day, query_per_week, query_per_month, usd_per_hour, usd_per_day, usd_per_week, usd_per_month or max_concurrent_requests is required"

func TestParseInvalid(t *testing.T) {
	hdr := `"limit_by_header":"x-api-key"`
	tests := []struct {
		name, json, want string
	}{
		// Document.
		{"empty", ``, `invalid JSON at line 1, column 1: the document is empty`},
		{"truncated", `{"rule_name":"r",`, `invalid JSON at line 1, column 18: the document ends before its last value does`},
		{"trailing garbage", withGlobal(``) + `x`, `invalid JSON at line 1, column 101: invalid character 'x' after top-level value`},
		{"array", `[]`, `configuration must be a JSON object, got array`},
		{"string", `"x"`, `configuration must be a JSON object, got string "x"`},
		{"null", `null`, `configuration must be a JSON object, got null`},

		// Top level.
		{"rule_name missing", `{"global_threshold":{"token_per_minute":1},` + redisOK + `}`, `rule_name: required`},
		{"rule_name null", `{"rule_name":null,"global_threshold":{"token_per_minute":1},` + redisOK + `}`, `rule_name: required`},
		{"rule_name empty", `{"rule_name":"","global_threshold":{"token_per_minute":1},` + redisOK + `}`, `rule_name: must not be empty`},
		{"rule_name number", `{"rule_name":1,"global_threshold":{"token_per_minute":1},` + redisOK + `}`, `rule_name: must be a string, got number 1`},
		{"neither global nor items", `{"rule_name":"r",` + redisOK + `}`, `one of global_threshold or rule_items is required`},
		{"unknown top-level", withGlobal(`,"rule_itms":[]`), `rule_itms: unknown field (did you mean rule_items?)`},
		{"unknown top-level far", withGlobal(`,"max_concurrent_requests":3`), `max_concurrent_requests: unknown field`},
		{"odd top-level key", withGlobal(`,"a b":1`), `"a b": unknown field`},
		{"duplicate top-level", withGlobal(`,"rule_name":"s"`), `rule_name: duplicate field`},
		{"rejected_code string", withGlobal(`,"rejected_code":"429"`), `rejected_code: must be an integer between 100 and 599, got string "429"`},
		{"rejected_code too big", withGlobal(`,"rejected_code":600`), `rejected_code: must be an integer between 100 and 599, got number 600`},
		{"rejected_code too small", withGlobal(`,"rejected_code":99`), `rejected_code: must be an integer between 100 and 599, got number 99`},
		{"rejected_code fraction", withGlobal(`,"rejected_code":429.5`), `rejected_code: must be an integer between 100 and 599, got number 429.5`},
		{"rejected_msg number", withGlobal(`,"rejected_msg":1`), `rejected_msg: must be a string, got number 1`},
		{"show_limit_quota_header string", withGlobal(`,"show_limit_quota_header":"yes"`), `show_limit_quota_header: must be a boolean, got string "yes"`},
		{"show_limit_quota_header number", withGlobal(`,"show_limit_quota_header":1`), `show_limit_quota_header: must be a boolean, got number 1`},
		{"failure_mode bad", withGlobal(`,"failure_mode":"open"`), `failure_mode: must be "allow", "deny" or "local", got "open"`},
		{"failure_mode case", withGlobal(`,"failure_mode":"Deny"`), `failure_mode: must be "allow", "deny" or "local", got "Deny"`},
		{"local_share without local", withGlobal(`,"local_share":4`), `local_share: applies only with failure_mode: local`},
		{"local_max_subjects without local", withGlobal(`,"failure_mode":"deny","local_max_subjects":4`), `local_max_subjects: applies only with failure_mode: local`},
		{"local_share zero", withGlobal(`,"failure_mode":"local","local_share":0`), `local_share: must be an integer between 1 and 1048576, got number 0`},
		{"local_max_subjects too many", withGlobal(`,"failure_mode":"local","local_max_subjects":100000000`), `local_max_subjects: must be an integer between 1 and 16777216, got number 100000000`},
		{"failure_mode bool", withGlobal(`,"failure_mode":true`), `failure_mode: must be a string, got true`},
		{"hops negative", withGlobal(`,"xff_num_trusted_hops":-1`), `xff_num_trusted_hops: must be an integer between 0 and 2147483647, got number -1`},
		{"hops string", withGlobal(`,"xff_num_trusted_hops":"1"`), `xff_num_trusted_hops: must be an integer between 0 and 2147483647, got string "1"`},
		{"hops fraction", withGlobal(`,"xff_num_trusted_hops":1.5`), `xff_num_trusted_hops: must be an integer between 0 and 2147483647, got number 1.5`},
		{"hops huge", withGlobal(`,"xff_num_trusted_hops":4294967296`), `xff_num_trusted_hops: must be an integer between 0 and 2147483647, got number 4294967296`},

		// Global threshold.
		{"global array", `{"rule_name":"r","global_threshold":[],` + redisOK + `}`, `global_threshold: must be an object, got array`},
		{"global no window", `{"rule_name":"r","global_threshold":{},` + redisOK + `}`, `global_threshold: ` + allWindowsMsg},
		{"global only null window", `{"rule_name":"r","global_threshold":{"token_per_hour":null},` + redisOK + `}`, `global_threshold: ` + allWindowsMsg},
		{"global zero", `{"rule_name":"r","global_threshold":{"token_per_hour":0},` + redisOK + `}`, `global_threshold.token_per_hour: must be a positive integer, got number 0`},
		{"global zero query window", `{"rule_name":"r","global_threshold":{"query_per_minute":0},` + redisOK + `}`, `global_threshold.query_per_minute: must be a positive integer, got number 0`},
		{"global zero concurrency", `{"rule_name":"r","global_threshold":{"max_concurrent_requests":0},` + redisOK + `}`, `global_threshold.max_concurrent_requests: must be a positive integer, got number 0`},
		{"key concurrency string", withItems(item(`"limit_by_header":"h"`, `"k","max_concurrent_requests":"5"`)), `rule_items[0].limit_keys[0].max_concurrent_requests: must be a positive integer, got string "5"`},
		{"key concurrency typo", withItems(item(`"limit_by_header":"h"`, `"k","max_concurrent_request":5`)), `rule_items[0].limit_keys[0].max_concurrent_request: unknown field (did you mean max_concurrent_requests?)`},
		{"window type", `{"rule_name":"r","window_type":"rolling","global_threshold":{"query_per_minute":1},` + redisOK + `}`, `window_type: must be "fixed" or "sliding", got "rolling"`},
		{"window type number", `{"rule_name":"r","window_type":1,"global_threshold":{"query_per_minute":1},` + redisOK + `}`, `window_type: must be a string, got number 1`},
		{"stream usage", `{"rule_name":"r","stream_usage":"on","global_threshold":{"query_per_minute":1},` + redisOK + `}`, `stream_usage: must be "inject" or "off", got "on"`},
		{"over limit action", `{"rule_name":"r","over_limit_action":"delay","global_threshold":{"query_per_minute":1},` + redisOK + `}`, `over_limit_action: must be "reject" or "queue", got "delay"`},
		{"queue wait without queue", `{"rule_name":"r","max_queue_wait_ms":100,"global_threshold":{"query_per_minute":1},` + redisOK + `}`, `max_queue_wait_ms: applies only with over_limit_action: queue`},
		{"queue wait zero", `{"rule_name":"r","over_limit_action":"queue","max_queue_wait_ms":0,"global_threshold":{"query_per_minute":1},` + redisOK + `}`, `max_queue_wait_ms: must be an integer between 1 and 600000, got number 0`},
		{"lease zero", `{"rule_name":"r","concurrency_lease_seconds":0,"global_threshold":{"max_concurrent_requests":1},` + redisOK + `}`, `concurrency_lease_seconds: must be an integer between 1 and 604800, got number 0`},
		{"lease too long", `{"rule_name":"r","concurrency_lease_seconds":604801,"global_threshold":{"max_concurrent_requests":1},` + redisOK + `}`, `concurrency_lease_seconds: must be an integer between 1 and 604800, got number 604801`},
		{"global typo", `{"rule_name":"r","global_threshold":{"token_per_days":1},` + redisOK + `}`, `global_threshold.token_per_days: unknown field (did you mean token_per_day?)`},

		// rule_items.
		{"rule_items object", `{"rule_name":"r","rule_items":{},` + redisOK + `}`, `rule_items: must be an array, got object`},
		{"rule_items empty", `{"rule_name":"r","rule_items":[],` + redisOK + `}`, `rule_items: must not be empty`},
		{"rule item string", withItems(`"x"`), `rule_items[0]: must be an object, got string "x"`},
		{"no limit_by", withItems(`{"limit_keys":[{"key":"a","token_per_minute":1}]}`),
			`rule_items[0]: one of limit_by_header, limit_by_param, limit_by_consumer, limit_by_cookie, limit_by_per_header, limit_by_per_param, limit_by_per_consumer, limit_by_per_cookie, limit_by_per_ip, limit_by_model, limit_by_per_model, limit_by_api_key, limit_by_per_api_key is required`},
		{"two limit_by", withItems(item(`"limit_by_param":"p",`+hdr, `"k"`)),
			`rule_items[0]: only one limit_by_* field may be set, got limit_by_header, limit_by_param`},
		{"three limit_by", withItems(item(`"limit_by_per_ip":"from-remote-addr","limit_by_consumer":"",`+hdr, `"k"`)),
			`rule_items[0]: only one limit_by_* field may be set, got limit_by_header, limit_by_consumer, limit_by_per_ip`},
		{"unknown item field", withItems(`{"limit_by_header":"h","limit_key":[]}`), `rule_items[0].limit_key: unknown field (did you mean limit_keys?)`},
		{"limit_by_headers typo", withItems(`{"limit_by_headers":"h","limit_keys":[]}`), `rule_items[0].limit_by_headers: unknown field (did you mean limit_by_header?)`},
		{"header empty", withItems(item(`"limit_by_header":""`, `"k"`)), `rule_items[0].limit_by_header: must not be empty`},
		{"header number", withItems(item(`"limit_by_header":5`, `"k"`)), `rule_items[0].limit_by_header: must be a string, got number 5`},
		{"header invalid", withItems(item(`"limit_by_header":"x api key"`, `"k"`)), `rule_items[0].limit_by_header: invalid header name "x api key"`},
		{"per header invalid", withItems(item(`"limit_by_per_header":"a:b"`, `"*"`)), `rule_items[0].limit_by_per_header: invalid header name "a:b"`},
		{"param null", withItems(item(`"limit_by_param":null`, `"k"`)), `rule_items[0].limit_by_param: must be a string, got null`},
		{"cookie with =", withItems(item(`"limit_by_cookie":"a=b"`, `"k"`)), `rule_items[0].limit_by_cookie: invalid cookie name "a=b"`},
		{"cookie with space", withItems(item(`"limit_by_per_cookie":" sid"`, `"*"`)), `rule_items[0].limit_by_per_cookie: invalid cookie name " sid"`},
		{"consumer number", withItems(item(`"limit_by_consumer":1`, `"k"`)), `rule_items[0].limit_by_consumer: must be a string (its value is ignored), got number 1`},
		{"per_ip bad source", withItems(item(`"limit_by_per_ip":"remote"`, `"*"`)), `rule_items[0].limit_by_per_ip: must be "from-remote-addr" or "from-header-<name>", got "remote"`},
		{"per_ip empty header", withItems(item(`"limit_by_per_ip":"from-header-"`, `"*"`)), `rule_items[0].limit_by_per_ip: invalid header name "" in "from-header-"`},
		{"per_ip bad header", withItems(item(`"limit_by_per_ip":"from-header-x forwarded"`, `"*"`)), `rule_items[0].limit_by_per_ip: invalid header name "x forwarded" in "from-header-x forwarded"`},

		// limit_keys.
		{"limit_keys missing", withItems(`{` + hdr + `}`), `rule_items[0].limit_keys: required`},
		{"limit_keys object", withItems(`{` + hdr + `,"limit_keys":{}}`), `rule_items[0].limit_keys: must be an array, got object`},
		{"limit_keys empty", withItems(`{` + hdr + `,"limit_keys":[]}`), `rule_items[0].limit_keys: must not be empty`},
		{"limit key number", withItems(`{` + hdr + `,"limit_keys":[1]}`), `rule_items[0].limit_keys[0]: must be an object, got number 1`},
		{"key missing", withItems(`{` + hdr + `,"limit_keys":[{"token_per_minute":1}]}`), `rule_items[0].limit_keys[0].key: required`},
		{"key empty", withItems(item(hdr, `""`)), `rule_items[0].limit_keys[0].key: must not be empty`},
		{"key bool", withItems(item(hdr, `true`)), `rule_items[0].limit_keys[0].key: must be a string, got true`},
		{"no window", withItems(`{` + hdr + `,"limit_keys":[{"key":"a"}]}`), `rule_items[0].limit_keys[0]: ` + allWindowsMsg},
		{"window zero", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_minute":0}]}`), `rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number 0`},
		{"window negative", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_second":-5}]}`), `rule_items[0].limit_keys[0].token_per_second: must be a positive integer, got number -5`},
		{"window fraction", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_hour":1.5}]}`), `rule_items[0].limit_keys[0].token_per_hour: must be a positive integer, got number 1.5`},
		{"window string", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_day":"100"}]}`), `rule_items[0].limit_keys[0].token_per_day: must be a positive integer, got string "100"`},
		{"window bool", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_day":true}]}`), `rule_items[0].limit_keys[0].token_per_day: must be a positive integer, got true`},
		{"window overflow", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_day":9223372036854775808}]}`), `rule_items[0].limit_keys[0].token_per_day: must be a positive integer, got number 9223372036854775808`},
		{"window 1e300", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_day":1e300}]}`), `rule_items[0].limit_keys[0].token_per_day: must be a positive integer, got number 1e300`},
		{"window second bad after good", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_minute":5,"token_per_hour":0}]}`), `rule_items[0].limit_keys[0].token_per_hour: must be a positive integer, got number 0`},
		{"window typo", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_minuet":1}]}`), `rule_items[0].limit_keys[0].token_per_minuet: unknown field (did you mean token_per_minute?)`},
		{"window duplicate", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_minute":1,"token_per_minute":2}]}`), `rule_items[0].limit_keys[0].token_per_minute: duplicate field`},
		{"bad regexp", withItems(item(hdr, `"regexp:a("`)), "rule_items[0].limit_keys[0].key: invalid regexp \"a(\": error parsing regexp: missing closing ): `a(`"},
		{"bad regexp per_ip", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"regexp:[1-"`)), "rule_items[0].limit_keys[0].key: invalid regexp \"[1-\": error parsing regexp: missing closing ]: `[1-`"},
		{"per_header exact", withItems(item(`"limit_by_per_header":"x-api-key"`, `"abc"`)), `rule_items[0].limit_keys[0].key: limit_by_per_header needs a "regexp:<re>" or "*" key, got "abc"`},
		{"per_param exact", withItems(item(`"limit_by_per_param":"apikey"`, `"abc"`)), `rule_items[0].limit_keys[0].key: limit_by_per_param needs a "regexp:<re>" or "*" key, got "abc"`},
		{"per_consumer exact", withItems(item(`"limit_by_per_consumer":""`, `"bob"`)), `rule_items[0].limit_keys[0].key: limit_by_per_consumer needs a "regexp:<re>" or "*" key, got "bob"`},
		{"per_cookie exact", withItems(item(`"limit_by_per_cookie":"sid"`, `"x"`)), `rule_items[0].limit_keys[0].key: limit_by_per_cookie needs a "regexp:<re>" or "*" key, got "x"`},
		{"per_ip /33", withItems(item(hdr, `"k"`) + `,` + item(`"limit_by_per_ip":"from-remote-addr"`, `"10.0.0.0/33"`)), `rule_items[1].limit_keys[0].key: invalid IP or CIDR "10.0.0.0/33"`},
		{"per_ip not an IP", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"localhost"`)), `rule_items[0].limit_keys[0].key: invalid IP or CIDR "localhost"`},
		{"per_ip short v4", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"1.2.3"`)), `rule_items[0].limit_keys[0].key: invalid IP or CIDR "1.2.3"`},
		{"per_ip v6 /129", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"::1/129"`)), `rule_items[0].limit_keys[0].key: invalid IP or CIDR "::1/129"`},
		{"per_ip zone", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"fe80::1%eth0"`)), `rule_items[0].limit_keys[0].key: invalid IP or CIDR "fe80::1%eth0"`},
		{"per_ip space", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"1.2.3.4 "`)), `rule_items[0].limit_keys[0].key: invalid IP or CIDR "1.2.3.4 "`},
		{"per_ip port", withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"1.2.3.4:80"`)), `rule_items[0].limit_keys[0].key: invalid IP or CIDR "1.2.3.4:80"`},
		{"error in later key", withItems(`{` + hdr + `,"limit_keys":[{"key":"a","token_per_minute":1},{"key":"b","token_per_minute":1,"x":1}]}`), `rule_items[0].limit_keys[1].x: unknown field`},

		// Redis.
		{"redis missing", `{"rule_name":"r","global_threshold":{"token_per_minute":10}}`, `redis: required`},
		{"redis null", withRedis(`null`), `redis: required`},
		{"redis string", withRedis(`"redis.static"`), `redis: must be an object, got string "redis.static"`},
		{"service_name missing", withRedis(`{}`), `redis.service_name: required`},
		{"service_name empty", withRedis(`{"service_name":""}`), `redis.service_name: must not be empty`},
		{"service_name number", withRedis(`{"service_name":1234}`), `redis.service_name: must be a string, got number 1234`},
		{"service_port zero", withRedis(`{"service_name":"r","service_port":0}`), `redis.service_port: must be an integer between 1 and 65535, got number 0`},
		{"service_port too big", withRedis(`{"service_name":"r","service_port":65536}`), `redis.service_port: must be an integer between 1 and 65535, got number 65536`},
		{"service_port string", withRedis(`{"service_name":"r","service_port":"6380"}`), `redis.service_port: must be an integer between 1 and 65535, got string "6380"`},
		{"username number", withRedis(`{"service_name":"r","username":1}`), `redis.username: must be a string, got number 1`},
		{"password bool", withRedis(`{"service_name":"r","password":true}`), `redis.password: must be a string, got true`},
		{"timeout zero", withRedis(`{"service_name":"r","timeout":0}`), `redis.timeout: must be an integer between 1 and 4294967295, got number 0`},
		{"timeout string", withRedis(`{"service_name":"r","timeout":"1s"}`), `redis.timeout: must be an integer between 1 and 4294967295, got string "1s"`},
		{"timeout too big", withRedis(`{"service_name":"r","timeout":4294967296}`), `redis.timeout: must be an integer between 1 and 4294967295, got number 4294967296`},
		{"database negative", withRedis(`{"service_name":"r","database":-1}`), `redis.database: must be an integer between 0 and 2147483647, got number -1`},
		{"breaker failures negative", withRedis(`{"service_name":"r","breaker_failures":-1}`), `redis.breaker_failures: must be an integer between 0 and 1000, got number -1`},
		{"breaker probe too fast", withRedis(`{"service_name":"r","breaker_probe_ms":1}`), `redis.breaker_probe_ms: must be an integer between 10 and 30000, got number 1`},
		{"breaker probe too slow", withRedis(`{"service_name":"r","breaker_probe_ms":60000}`), `redis.breaker_probe_ms: must be an integer between 10 and 30000, got number 60000`},
		{"redis unknown", withRedis(`{"service_name":"r","host":"x"}`), `redis.host: unknown field`},
		{"redis typo", withRedis(`{"service_name":"r","servce_port":1}`), `redis.servce_port: unknown field (did you mean service_port?)`},
	}
	names := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.False(t, names[tt.name], "duplicate test name")
			names[tt.name] = true
			c, err := ParseString(tt.json)
			require.Nil(t, c)
			require.Error(t, err)
			require.Equal(t, tt.want, err.Error())
			var fe *FieldError
			require.True(t, errors.As(err, &fe))
		})
	}
	require.GreaterOrEqual(t, len(tests), 35)
}

// Parse must also refuse gjson.Results that ParseString cannot produce.
func TestParseOddResults(t *testing.T) {
	for _, r := range []gjson.Result{
		{},
		{Type: gjson.JSON},
		{Type: gjson.JSON, Raw: "{"},
		{Type: gjson.JSON, Raw: `{"a":}`},
		{Type: gjson.String, Raw: `"x"`, Str: "x"},
		gjson.Parse(`{"rule_name":"r"`),
	} {
		c, err := Parse(r)
		require.Nil(t, c)
		require.Error(t, err)
		require.NotEmpty(t, err.Error())
	}
	// A sub-document is fine.
	doc := gjson.Parse(`{"cfg":` + withGlobal(``) + `}`)
	c, err := Parse(doc.Get("cfg"))
	require.NoError(t, err)
	require.Equal(t, "r", c.RuleName)
}

func mustParse(t testing.TB, json string) *Config {
	t.Helper()
	c, err := ParseString(json)
	require.NoError(t, err)
	require.NotNil(t, c)
	return c
}

func win(field string, seconds, limit int64) Window {
	return Window{Field: field, Unit: UnitTokens, Seconds: seconds, Limit: limit}
}

// The global-threshold example of the Higress docs.
func TestParseHigressGlobalExample(t *testing.T) {
	c := mustParse(t, `{
		"rule_name": "routeA_global_limit_rule",
		"global_threshold": {"token_per_minute": 1000},
		"redis": {"service_name": "redis.static"},
		"show_limit_quota_header": true
	}`)
	require.Equal(t, "routeA_global_limit_rule", c.RuleName)
	require.Empty(t, c.Items)
	require.Equal(t, &LimitKey{Key: "*", Kind: KeyAny, Windows: []Window{win("token_per_minute", 60, 1000)}}, c.Global)
	require.Equal(t, QuotaHeadersTokenRateLimit, c.QuotaHeaders)
	require.Equal(t, Redis{ServiceName: "redis.static", ServicePort: 80, TimeoutMs: 1000, BreakerFailures: 5, BreakerProbeMs: 1000, Cluster: true}, c.Redis)
}

// higressRuleExample is the rule_items example of the Higress docs (YAML
// turned into JSON, as the gateway hands it), every limit type included.
const higressRuleExample = `{
  "rule_name": "default_rule",
  "rule_items": [
    {"limit_by_header": "x-api-key", "limit_keys": [
      {"key": "9a342114-ba8a-11ec-b1bf-00163e1250b5", "token_per_minute": 10},
      {"key": "a6a6d7f2-ba8a-11ec-bec2-00163e1250b5", "token_per_hour": 100}]},
    {"limit_by_param": "apikey", "limit_keys": [
      {"key": "9a342114-ba8a-11ec-b1bf-00163e1250b5", "token_per_minute": 10},
      {"key": "a6a6d7f2-ba8a-11ec-bec2-00163e1250b5", "token_per_hour": 100}]},
    {"limit_by_consumer": "", "limit_keys": [
      {"key": "consumer1", "token_per_second": 10},
      {"key": "consumer2", "token_per_hour": 100}]},
    {"limit_by_cookie": "key1", "limit_keys": [
      {"key": "value1", "token_per_minute": 10},
      {"key": "value2", "token_per_hour": 100}]},
    {"limit_by_per_header": "x-api-key", "limit_keys": [
      {"key": "regexp:^a.*", "token_per_second": 10},
      {"key": "*", "token_per_hour": 100}]},
    {"limit_by_per_param": "apikey", "limit_keys": [
      {"key": "regexp:^a.*", "token_per_second": 10},
      {"key": "*", "token_per_hour": 100}]},
    {"limit_by_per_consumer": "", "limit_keys": [
      {"key": "regexp:^a.*", "token_per_second": 10},
      {"key": "*", "token_per_hour": 100}]},
    {"limit_by_per_cookie": "key1", "limit_keys": [
      {"key": "regexp:^a.*", "token_per_second": 10},
      {"key": "*", "token_per_hour": 100}]},
    {"limit_by_per_ip": "from-header-x-forwarded-for", "limit_keys": [
      {"key": "1.1.1.1", "token_per_day": 10},
      {"key": "1.1.1.0/24", "token_per_day": 100},
      {"key": "0.0.0.0/0", "token_per_day": 1000}]}
  ],
  "rejected_code": 200,
  "rejected_msg": "{\"error_code\":10001,\"error_msg\":\"Too many requests\"}",
  "redis": {"service_name": "redis.static", "service_port": 6379}
}`

func TestParseHigressRuleExample(t *testing.T) {
	c := mustParse(t, higressRuleExample)
	require.Equal(t, "default_rule", c.RuleName)
	require.Nil(t, c.Global)
	require.Len(t, c.Items, 9)
	wantTypes := []LimitType{ByHeader, ByParam, ByConsumer, ByCookie, ByPerHeader, ByPerParam, ByPerConsumer, ByPerCookie, ByPerIP}
	wantNames := []string{"x-api-key", "apikey", "x-mse-consumer", "key1", "x-api-key", "apikey", "x-mse-consumer", "key1", "x-forwarded-for"}
	for i, it := range c.Items {
		require.Equal(t, wantTypes[i], it.Type, i)
		require.Equal(t, wantNames[i], it.Name, i)
		require.Equal(t, i >= 4, it.Type.PerValue(), i)
	}
	require.Equal(t, "from-header-x-forwarded-for", c.Items[8].Raw)
	require.Equal(t, "x-mse-consumer", c.Items[2].Raw)

	hk := c.Items[0].Keys
	require.Len(t, hk, 2)
	require.Equal(t, LimitKey{Key: "9a342114-ba8a-11ec-b1bf-00163e1250b5", Kind: KeyExact, Windows: []Window{win("token_per_minute", 60, 10)}}, hk[0])
	require.Equal(t, []Window{win("token_per_hour", 3600, 100)}, hk[1].Windows)
	require.Equal(t, []Window{win("token_per_second", 1, 10)}, c.Items[2].Keys[0].Windows)

	pk := c.Items[4].Keys
	require.Equal(t, KeyRegexp, pk[0].Kind)
	require.Equal(t, "^a.*", pk[0].Regexp.String())
	require.Equal(t, KeyAny, pk[1].Kind)

	ipk := c.Items[8].Keys
	require.Equal(t, KeyIPNet, ipk[0].Kind)
	require.Equal(t, netip.MustParsePrefix("1.1.1.1/32"), ipk[0].Prefix)
	require.Equal(t, []Window{win("token_per_day", 86400, 10)}, ipk[0].Windows)
	require.Equal(t, netip.MustParsePrefix("1.1.1.0/24"), ipk[1].Prefix)
	require.Equal(t, netip.MustParsePrefix("0.0.0.0/0"), ipk[2].Prefix)
	require.Equal(t, []Window{win("token_per_day", 86400, 1000)}, ipk[2].Windows)

	require.Equal(t, uint32(200), c.RejectedCode)
	require.Equal(t, `{"error_code":10001,"error_msg":"Too many requests"}`, c.RejectedMsg)
	require.Equal(t, Redis{ServiceName: "redis.static", ServicePort: 6379, TimeoutMs: 1000, BreakerFailures: 5, BreakerProbeMs: 1000, Cluster: true}, c.Redis)
}

func TestParseDefaults(t *testing.T) {
	c := mustParse(t, withGlobal(``))
	require.Equal(t, uint32(429), c.RejectedCode)
	require.Equal(t, "Too many requests", c.RejectedMsg)
	require.Zero(t, c.QuotaHeaders)
	require.False(t, c.RejectedMsgSet)
	require.False(t, c.Shadow)
	require.Equal(t, StreamUsageInject, c.StreamUsage)
	require.Equal(t, FailAllow, c.FailureMode)
	require.Equal(t, -1, c.XFFTrustedHops)
	require.Equal(t, 64, c.IPv6PrefixLength)
	require.Nil(t, c.Unmatched)
	require.Equal(t, Redis{ServiceName: "redis.static", ServicePort: 80, TimeoutMs: 1000, Database: 0, BreakerFailures: 5, BreakerProbeMs: 1000, Cluster: true}, c.Redis)

	c = mustParse(t, withRedis(`{"service_name":"redis.default.svc.cluster.local"}`))
	require.Equal(t, 6379, c.Redis.ServicePort)
	c = mustParse(t, withRedis(`{"service_name":"redis.dns"}`))
	require.Equal(t, 6379, c.Redis.ServicePort)
}

func TestParseAllOptions(t *testing.T) {
	c := mustParse(t, `{
		"_rules_": [{"whatever": 1}], "_match_route_": ["a"],
		"rule_name": "r",
		"global_threshold": {"token_per_day": 1000000, "token_per_second": 100, "token_per_hour": 1e5},
		"rejected_code": 503, "rejected_msg": "",
		"show_limit_quota_header": false,
		"failure_mode": "deny",
		"xff_num_trusted_hops": 0,
		"redis": {"service_name": "redis.static", "service_port": 6380, "username": "u",
		          "password": "p", "timeout": 50, "database": 3, "breaker_failures": 0, "breaker_probe_ms": 250,
		          "cluster": false}
	}`)
	require.Equal(t, []Window{
		win("token_per_second", 1, 100),
		win("token_per_hour", 3600, 100000),
		win("token_per_day", 86400, 1000000),
	}, c.Global.Windows)
	require.Equal(t, uint32(503), c.RejectedCode)
	require.Equal(t, "", c.RejectedMsg)
	require.Equal(t, FailDeny, c.FailureMode)
	require.Equal(t, 0, c.XFFTrustedHops)
	require.Equal(t, Redis{ServiceName: "redis.static", ServicePort: 6380, Username: "u", Password: "p", TimeoutMs: 50, Database: 3, BreakerFailures: 0, BreakerProbeMs: 250}, c.Redis)

	c = mustParse(t, withGlobal(`,"xff_num_trusted_hops":2,"failure_mode":"allow"`))
	require.Equal(t, 2, c.XFFTrustedHops)
	require.Equal(t, FailAllow, c.FailureMode)
}

func TestParseNullMeansUnset(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_items":null,"global_threshold":{"token_per_minute":1,"token_per_hour":null},
		"rejected_code":null,"rejected_msg":null,"show_limit_quota_header":null,"failure_mode":null,
		"xff_num_trusted_hops":null,"redis":{"service_name":"x","service_port":null,"username":null,"password":null,"timeout":null,"database":null}}`)
	require.Equal(t, []Window{win("token_per_minute", 60, 1)}, c.Global.Windows)
	require.Equal(t, uint32(429), c.RejectedCode)
	require.Equal(t, "Too many requests", c.RejectedMsg)
	require.Equal(t, -1, c.XFFTrustedHops)
	require.Equal(t, Redis{ServiceName: "x", ServicePort: 6379, TimeoutMs: 1000, BreakerFailures: 5, BreakerProbeMs: 1000, Cluster: true}, c.Redis)

	// limit_by_consumer: null (an empty YAML value) still selects the type, as in Higress.
	c = mustParse(t, withItems(item(`"limit_by_consumer":null`, `"bob"`)))
	require.Equal(t, ByConsumer, c.Items[0].Type)
	require.Equal(t, "x-mse-consumer", c.Items[0].Name)
}

func TestParseMultiWindow(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_header":"X-API-Key","limit_keys":[
		{"key":"k1","token_per_day":100000,"token_per_minute":1000,"token_per_second":50,"token_per_hour":20000},
		{"token_per_hour":5,"key":"k2","token_per_minute":1.0}]}`))
	it := c.Items[0]
	require.Equal(t, "x-api-key", it.Name)
	require.Equal(t, "X-API-Key", it.Raw)
	require.Equal(t, []Window{
		win("token_per_second", 1, 50),
		win("token_per_minute", 60, 1000),
		win("token_per_hour", 3600, 20000),
		win("token_per_day", 86400, 100000),
	}, it.Keys[0].Windows)
	require.Equal(t, []Window{win("token_per_minute", 60, 1), win("token_per_hour", 3600, 5)}, it.Keys[1].Windows)
}

func TestParseIPKeys(t *testing.T) {
	tests := []struct{ key, want string }{
		{"1.2.3.4", "1.2.3.4/32"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.1.2.3/8", "10.0.0.0/8"}, // masked
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"::1", "::1/128"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"2001:db8:ffff::1/32", "2001:db8::/32"},
		{"::/0", "::/0"},
		{"::ffff:1.2.3.4", "1.2.3.4/32"},          // IPv4-mapped: unmapped
		{"::ffff:10.1.0.0/104", "10.0.0.0/8"},     // mapped prefix, masked then unmapped
		{"::ffff:0:0/96", "0.0.0.0/0"},            // all mapped addresses = all of IPv4
		{"::ffff:0:0/80", "::/80"},                // shorter than /96: stays IPv6 (masked)
		{"2001:DB8::A", "2001:db8::a/128"},        // case-insensitive
		{"fe80::1:2:3:4/64", "fe80::/64"},         // link-local
		{"192.168.0.1/32", "192.168.0.1/32"},      // explicit host
		{"255.255.255.255", "255.255.255.255/32"}, // edge
	}
	for _, tt := range tests {
		c := mustParse(t, withItems(item(`"limit_by_per_ip":"from-remote-addr"`, `"`+tt.key+`"`)))
		k := c.Items[0].Keys[0]
		require.Equal(t, KeyIPNet, k.Kind, tt.key)
		require.Equal(t, tt.key, k.Key)
		require.Equal(t, tt.want, k.Prefix.String(), tt.key)
	}
	// "*" and regexp: are allowed for per-IP too.
	c := mustParse(t, withItems(item(`"limit_by_per_ip":"from-header-X-Real-IP"`, `"*"`)+","+item(`"limit_by_per_ip":"from-remote-addr"`, `"regexp:^10\\."`)))
	require.Equal(t, "x-real-ip", c.Items[0].Name)
	require.Equal(t, KeyAny, c.Items[0].Keys[0].Kind)
	require.Equal(t, "", c.Items[1].Name)
	require.Equal(t, KeyRegexp, c.Items[1].Keys[0].Kind)
}

func TestParseKeyKinds(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_param":"apikey","limit_keys":[
		{"key":"exact","token_per_minute":1},{"key":"*","token_per_minute":1},
		{"key":"regexp:^sk-","token_per_minute":1},{"key":"regexp:","token_per_minute":1}]}`))
	ks := c.Items[0].Keys
	require.Equal(t, []KeyKind{KeyExact, KeyAny, KeyRegexp, KeyRegexp}, []KeyKind{ks[0].Kind, ks[1].Kind, ks[2].Kind, ks[3].Kind})
	require.Equal(t, "regexp:^sk-", ks[2].Key)

	// Pseudo-headers may be used, as with GetHttpRequestHeader.
	c = mustParse(t, withItems(item(`"limit_by_header":":authority"`, `"api.example.com"`)))
	require.Equal(t, ":authority", c.Items[0].Name)

	// An unquoted number (YAML `key: 12345`) is taken by its text, as Higress does.
	c = mustParse(t, withItems(item(`"limit_by_param":"apikey"`, `12345`)))
	require.Equal(t, "12345", c.Items[0].Keys[0].Key)
	require.Equal(t, KeyExact, c.Items[0].Keys[0].Kind)

	// Any string value is accepted (and ignored) for the consumer types.
	c = mustParse(t, withItems(item(`"limit_by_per_consumer":"ignored"`, `"*"`)))
	require.Equal(t, "x-mse-consumer", c.Items[0].Name)
}

func TestKnownFieldsAreAccepted(t *testing.T) {
	// Every field listed for suggestions must be known to its parser.
	for _, f := range limitFields() {
		mustParse(t, `{"rule_name":"r","global_threshold":{"`+f+`":1},`+anyPrice+redisOK+`}`)
		mustParse(t, withItems(`{"limit_by_header":"h","limit_keys":[{"key":"k","`+f+`":1}]}`, anyPrice))
	}
	for _, f := range ruleItemFields() {
		if f == "limit_keys" {
			continue
		}
		key := `"*"`
		if f == "limit_by_per_ip" {
			mustParse(t, withItems(item(`"`+f+`":"from-remote-addr"`, key)))
			continue
		}
		mustParse(t, withItems(item(`"`+f+`":"name"`, key)))
	}
	require.Len(t, ruleItemFields(), 14)
	require.Len(t, redisFields, 10)
	require.Len(t, topFields, 41)
}

func TestStrings(t *testing.T) {
	require.Equal(t, "limit_by_header", ByHeader.String())
	require.Equal(t, "limit_by_per_ip", ByPerIP.String())
	require.Equal(t, "LimitType(0)", LimitType(0).String())
	require.Equal(t, "LimitType(42)", LimitType(42).String())
	require.False(t, LimitType(0).PerValue())
	require.False(t, LimitType(200).PerValue())
	require.Equal(t, "allow", FailAllow.String())
	require.Equal(t, "deny", FailDeny.String())
	require.Equal(t, "FailureMode(7)", FailureMode(7).String())
	require.Equal(t, "regexp", KeyRegexp.String())
	require.Equal(t, "ipnet", KeyIPNet.String())
	require.Equal(t, "prefix", KeyPrefix.String())
	require.Equal(t, "KeyKind(9)", KeyKind(9).String())
	require.Equal(t, "limit_by_model", ByModel.String())
	require.Equal(t, "limit_by_per_model", ByPerModel.String())
	require.Equal(t, "header", ModelFromHeader.String())
	require.Equal(t, "body", ModelFromBody.String())
	require.Equal(t, "path", ModelFromPath.String())
	require.Equal(t, "ModelSourceKind(0)", ModelSourceKind(0).String())
	require.Equal(t, "header:x-model", ModelSource{Kind: ModelFromHeader, Header: "x-model"}.String())
	require.Equal(t, "body", ModelSource{Kind: ModelFromBody}.String())
	require.Equal(t, "tokens", UnitTokens.String())
	require.Equal(t, "Unit(3)", Unit(3).String())
	for _, tt := range []struct {
		t   LimitType
		per bool
	}{{ByHeader, false}, {ByParam, false}, {ByConsumer, false}, {ByCookie, false},
		{ByPerHeader, true}, {ByPerParam, true}, {ByPerConsumer, true}, {ByPerCookie, true}, {ByPerIP, true},
		{ByModel, false}, {ByPerModel, true}} {
		require.Equal(t, tt.per, tt.t.PerValue(), tt.t.String())
		require.Equal(t, tt.t == ByModel || tt.t == ByPerModel, tt.t.ModelValued(), tt.t.String())
		lt, ok := limitTypeByField(tt.t.String())
		require.True(t, ok)
		require.Equal(t, tt.t, lt)
	}
}

func TestErrorMessagesTruncateLongValues(t *testing.T) {
	long := strings.Repeat("é", 200)
	_, err := ParseString(withGlobal(`,"failure_mode":"` + long + `"`))
	require.Error(t, err)
	require.Less(t, len(err.Error()), 200)
	require.True(t, strings.HasPrefix(err.Error(), `failure_mode: must be "allow", "deny" or "local", got "éé`), err.Error())
	require.True(t, strings.HasSuffix(err.Error(), `é"...`), err.Error())

	_, err = ParseString(withGlobal(`,"` + strings.Repeat("k", 300) + `":1`))
	require.Error(t, err)
	require.Contains(t, err.Error(), "unknown field")
	require.Less(t, len(err.Error()), 200)
}

func TestRequestWindowsAndConcurrency(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_header":"x-api-key","limit_keys":[{"key":"k",
		"query_per_day":5000,"token_per_minute":100,"query_per_minute":5,"max_concurrent_requests":3}]}`))
	k := c.Items[0].Keys[0]
	require.Equal(t, []Window{
		{Field: "token_per_minute", Unit: UnitTokens, Seconds: 60, Limit: 100},
		{Field: "query_per_minute", Unit: UnitRequests, Seconds: 60, Limit: 5},
		{Field: "query_per_day", Unit: UnitRequests, Seconds: 86400, Limit: 5000},
	}, k.Windows, "sorted by length, tokens first")
	require.Equal(t, int64(3), k.MaxConcurrent)
	require.Equal(t, Fixed, c.WindowType, "Higress's windows by default")
	require.Equal(t, int64(DefaultLeaseSeconds), c.LeaseSeconds)
	require.Equal(t, Reject, c.OverLimit, "Higress rejects at once by default")

	// A concurrency limit alone is a limit; so is a request window alone.
	c = mustParse(t, `{"rule_name":"r","window_type":"sliding","concurrency_lease_seconds":30,
		"global_threshold":{"max_concurrent_requests":5},`+redisOK+`}`)
	require.Empty(t, c.Global.Windows)
	require.Equal(t, int64(5), c.Global.MaxConcurrent)
	require.Equal(t, Sliding, c.WindowType)
	require.Equal(t, int64(30), c.LeaseSeconds)
	c = mustParse(t, withItems(`{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"0.0.0.0/0","query_per_second":10}]}`))
	require.Equal(t, UnitRequests, c.Items[0].Keys[0].Windows[0].Unit)

	// Streams are asked for their usage unless told otherwise.
	require.Equal(t, StreamUsageInject, c.StreamUsage)
	c = mustParse(t, `{"rule_name":"r","stream_usage":"off","global_threshold":{"query_per_second":10},`+redisOK+`}`)
	require.Equal(t, StreamUsageOff, c.StreamUsage)

	// Queueing waits 5 s unless told otherwise.
	c = mustParse(t, `{"rule_name":"r","over_limit_action":"queue","global_threshold":{"query_per_second":10},`+redisOK+`}`)
	require.Equal(t, Queue, c.OverLimit)
	require.Equal(t, int64(DefaultMaxQueueWaitMs), c.MaxQueueWaitMs)
	c = mustParse(t, `{"rule_name":"r","over_limit_action":"queue","max_queue_wait_ms":200,"global_threshold":{"query_per_second":10},`+redisOK+`}`)
	require.Equal(t, int64(200), c.MaxQueueWaitMs)
}

// Redis's Lua scripts count in doubles, exact only up to 2^53: a limit above
// it (an operator's "unlimited", 2^63 − 1) made every admission of its key
// fail. Such limits are refused, naming the field; 2^53 itself is accepted.
func TestLimitsAboveTwoToThe53AreRefused(t *testing.T) {
	const most = "must be at most 9007199254740992 (2^53, the largest count Redis's Lua scripts hold exactly), got number "
	for _, c := range []struct{ name, json, want string }{
		{"key tokens", withItems(`{"limit_by_header":"h","limit_keys":[{"key":"a","token_per_day":9223372036854775295}]}`),
			`rule_items[0].limit_keys[0].token_per_day: ` + most + `9223372036854775295`},
		{"2^53 + 1", withItems(`{"limit_by_header":"h","limit_keys":[{"key":"a","token_per_second":9007199254740993}]}`),
			`rule_items[0].limit_keys[0].token_per_second: ` + most + `9007199254740993`},
		{"global requests", `{"rule_name":"r","global_threshold":{"query_per_minute":9223372036854775807},` + redisOK + `}`,
			`global_threshold.query_per_minute: ` + most + `9223372036854775807`},
		{"concurrency as a float", `{"rule_name":"r","global_threshold":{"max_concurrent_requests":1e16},` + redisOK + `}`,
			`global_threshold.max_concurrent_requests: ` + most + `1e16`},
	} {
		_, err := ParseString(c.json)
		require.EqualError(t, err, c.want, c.name)
	}

	cfg := mustParse(t, withItems(`{"limit_by_header":"h","limit_keys":[{"key":"a","token_per_day":9007199254740992,
		"query_per_day":9007199254740992,"max_concurrent_requests":9007199254740992}]}`))
	k := cfg.Items[0].Keys[0]
	require.Equal(t, []int64{1 << 53, 1 << 53, 1 << 53}, []int64{k.Windows[0].Limit, k.Windows[1].Limit, k.MaxConcurrent})
}

func TestParseIPv6PrefixLengthAndUnmatchedThreshold(t *testing.T) {
	items := `"rule_items":[` + item(`"limit_by_header":"h"`, `"k"`) + `]`
	for _, tt := range []struct{ json, want string }{
		{`{"rule_name":"r","ipv6_prefix_length":0,` + items + `,` + redisOK + `}`, `ipv6_prefix_length: must be an integer between 1 and 128, got number 0`},
		{`{"rule_name":"r","ipv6_prefix_length":129,` + items + `,` + redisOK + `}`, `ipv6_prefix_length: must be an integer between 1 and 128, got number 129`},
		{`{"rule_name":"r","ipv6_prefix_length":"64",` + items + `,` + redisOK + `}`, `ipv6_prefix_length: must be an integer between 1 and 128, got string "64"`},
		{`{"rule_name":"r","ipv6_prefix_length":56.5,` + items + `,` + redisOK + `}`, `ipv6_prefix_length: must be an integer between 1 and 128, got number 56.5`},
		{`{"rule_name":"r","unmatched_threshold":{},` + items + `,` + redisOK + `}`, `unmatched_threshold: ` + allWindowsMsg},
		{`{"rule_name":"r","unmatched_threshold":[],` + items + `,` + redisOK + `}`, `unmatched_threshold: must be an object, got array`},
		{`{"rule_name":"r","unmatched_threshold":{"token_per_minut":1},` + items + `,` + redisOK + `}`, `unmatched_threshold.token_per_minut: unknown field (did you mean token_per_minute?)`},
		{`{"rule_name":"r","unmatched_threshold":{"key":"*","token_per_minute":1},` + items + `,` + redisOK + `}`, `unmatched_threshold.key: unknown field`},
		{`{"rule_name":"r","unmatched_threshold":{"token_per_minute":1},"global_threshold":{"token_per_minute":1},` + redisOK + `}`,
			`unmatched_threshold: applies only with rule_items, to the requests no rule item matches: global_threshold already limits every request`},
		{`{"rule_name":"r","unmatched_threshold":{"token_per_minute":1},` + redisOK + `}`, `one of global_threshold or rule_items is required`},
	} {
		_, err := ParseString(tt.json)
		require.EqualError(t, err, tt.want, tt.json)
	}
}

func TestFailureModeLocal(t *testing.T) {
	c := mustParse(t, withGlobal(`,"failure_mode":"local","local_share":8,"local_max_subjects":500`))
	require.Equal(t, FailLocal, c.FailureMode)
	require.Equal(t, int64(8), c.LocalShare)
	require.Equal(t, int64(500), c.LocalMaxSubjects)
	c = mustParse(t, withGlobal(`,"failure_mode":"local"`))
	require.Equal(t, int64(1), c.LocalShare)
	require.Equal(t, int64(DefaultLocalMaxSubjects), c.LocalMaxSubjects)
}
