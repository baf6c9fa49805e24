package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const webhookOK = `"webhook":{"service_name":"alerts.static","path":"/hooks/budget"}`

func TestBudgetAlerts(t *testing.T) {
	c := mustParse(t, withGlobal(`,"budget_alerts":{"thresholds":[100,50,80],`+webhookOK+`}`))
	require.NotNil(t, c.Alerts)
	assert.Equal(t, &Alerts{Thresholds: []int64{50, 80, 100},
		Webhook: Webhook{ServiceName: "alerts.static", ServicePort: 80, Path: "/hooks/budget", TimeoutMs: 1000}, MaxAgeSeconds: 3600}, c.Alerts)

	c = mustParse(t, withGlobal(`,"budget_alerts":{"thresholds":[90],"webhook":{"service_name":"hooks.default.svc.cluster.local",
		"service_port":8080,"path":"/a?team=1","timeout":60000}}`))
	assert.Equal(t, Webhook{ServiceName: "hooks.default.svc.cluster.local", ServicePort: 8080, Path: "/a?team=1", TimeoutMs: 60000}, c.Alerts.Webhook)

	assert.Equal(t, int64(86400), mustParse(t, withGlobal(`,"budget_alerts":{"thresholds":[90],"max_age_seconds":86400,`+webhookOK+`}`)).Alerts.MaxAgeSeconds)
	_, err := ParseString(withGlobal(`,"budget_alerts":{"thresholds":[90],"max_age_seconds":0,` + webhookOK + `}`))
	require.ErrorContains(t, err, "budget_alerts.max_age_seconds: must be an integer between 1 and 604800, got number 0")

	assert.Nil(t, mustParse(t, withGlobal("")).Alerts, "off unless configured")
	assert.Nil(t, mustParse(t, withGlobal(`,"budget_alerts":null`)).Alerts)
}

func TestBudgetAlertsErrors(t *testing.T) {
	for extra, want := range map[string]string{
		`"budget_alerts":[50]`:                                                                                    `budget_alerts: must be an object, got array`,
		`"budget_alerts":{` + webhookOK + `}`:                                                                     `budget_alerts.thresholds: required`,
		`"budget_alerts":{"thresholds":[50]}`:                                                                     `budget_alerts.webhook: required`,
		`"budget_alerts":{"thresholds":[],` + webhookOK + `}`:                                                     `budget_alerts.thresholds: must not be empty`,
		`"budget_alerts":{"thresholds":50,` + webhookOK + `}`:                                                     `budget_alerts.thresholds: must be an array, got number 50`,
		`"budget_alerts":{"thresholds":[50,150],` + webhookOK + `}`:                                               `budget_alerts.thresholds[1]: must be an integer between 1 and 100, got number 150`,
		`"budget_alerts":{"thresholds":[0],` + webhookOK + `}`:                                                    `budget_alerts.thresholds[0]: must be an integer between 1 and 100, got number 0`,
		`"budget_alerts":{"thresholds":[50.5],` + webhookOK + `}`:                                                 `budget_alerts.thresholds[0]: must be an integer between 1 and 100, got number 50.5`,
		`"budget_alerts":{"thresholds":["80"],` + webhookOK + `}`:                                                 `budget_alerts.thresholds[0]: must be an integer between 1 and 100, got string "80"`,
		`"budget_alerts":{"thresholds":[80,50,80],` + webhookOK + `}`:                                             `budget_alerts.thresholds[2]: duplicate threshold 80`,
		`"budget_alerts":{"thresholds":[50],"webhok":{}}`:                                                         `budget_alerts.webhok: unknown field (did you mean webhook?)`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"path":"/a"}}`:                                             `budget_alerts.webhook.service_name: required`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":""}}`:                                       `budget_alerts.webhook.service_name: must not be empty`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static"}}`:                               `budget_alerts.webhook.path: required`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static","path":"hooks"}}`:                `budget_alerts.webhook.path: must be a path starting with '/', without spaces, got "hooks"`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static","path":"/a b"}}`:                 `budget_alerts.webhook.path: must be a path starting with '/', without spaces, got "/a b"`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static","path":"/a","timeout":0}}`:       `budget_alerts.webhook.timeout: must be an integer between 1 and 60000, got number 0`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static","path":"/a","timeout":60001}}`:   `budget_alerts.webhook.timeout: must be an integer between 1 and 60000, got number 60001`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static","path":"/a","service_port":0}}`:  `budget_alerts.webhook.service_port: must be an integer between 1 and 65535, got number 0`,
		`"budget_alerts":{"thresholds":[50],"webhook":{"service_name":"a.static","path":"/a","service_prot":80}}`: `budget_alerts.webhook.service_prot: unknown field (did you mean service_port?)`,
	} {
		_, err := ParseString(withGlobal("," + extra))
		assert.EqualError(t, err, want, extra)
	}
}

// soft marks a limit key's windows (in limit_keys, the thresholds and
// per_model entries) as never rejecting; it is a flag, not a limit.
func TestSoftLimits(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_header":"x-key","limit_keys":[{"key":"a","token_per_minute":10,"soft":true,
		"per_model":[{"model":"gpt-4*","token_per_minute":5,"soft":true},{"model":"*","token_per_minute":6}]},
		{"key":"b","token_per_minute":10}]}`, `"unmatched_threshold":{"query_per_day":3,"soft":true},`))
	k := c.Items[0].Keys
	assert.True(t, k[0].Soft)
	assert.True(t, k[0].PerModel[0].Soft)
	assert.False(t, k[0].PerModel[1].Soft, "a per_model entry has its own")
	assert.False(t, k[1].Soft)
	assert.True(t, c.Unmatched.Soft)
	assert.True(t, mustParse(t, `{"rule_name":"r","global_threshold":{"token_per_day":10,"soft":true},`+redisOK+`}`).Global.Soft)

	for json, want := range map[string]string{
		`{"rule_name":"r","global_threshold":{"soft":true},` + redisOK + `}`: `global_threshold: at least one of token_per_second, token_per_minute, ` +
			`token_per_hour, token_per_day, token_per_week, token_per_month, query_per_second, query_per_minute, query_per_hour, query_per_day, ` +
			`query_per_week, query_per_month, usd_per_hour, usd_per_day, usd_per_week, usd_per_month or max_concurrent_requests is required`,
		`{"rule_name":"r","global_threshold":{"token_per_day":10,"soft":"yes"},` + redisOK + `}`:              `global_threshold.soft: must be a boolean, got string "yes"`,
		withItems(`{"limit_by_header":"x-key","limit_keys":[{"key":"a","token_per_minute":10,"sotf":true}]}`): `rule_items[0].limit_keys[0].sotf: unknown field (did you mean soft?)`,
	} {
		_, err := ParseString(json)
		assert.EqualError(t, err, want, json)
	}
}

// Issue 51, point 2: an alert's owner is where it goes and how its body
// names a credential: the webhook's service, port and path, secret_headers
// and secret_params. Thresholds, max_age_seconds, the timeout, the limits
// and the order of the secret lists do not change it.
func TestAlertOwner(t *testing.T) {
	owner := func(alerts, extra string) string {
		return mustParse(t, withGlobal(`,`+extra+`"budget_alerts":{"thresholds":[50],`+alerts+`}`)).AlertOwner()
	}
	base := owner(webhookOK, "")
	assert.Regexp(t, `^[0-9a-f]{8}$`, base)
	assert.Equal(t, base, owner(`"max_age_seconds":60,"webhook":{"service_name":"alerts.static","path":"/hooks/budget","service_port":80,"timeout":5000}`, ""))
	assert.Equal(t, owner(webhookOK, `"secret_headers":["x-a","x-b"],`), owner(webhookOK, `"secret_headers":["x-b","x-a"],`))
	for _, other := range []string{
		owner(`"webhook":{"service_name":"alerts-b.static","path":"/hooks/budget"}`, ""),
		owner(`"webhook":{"service_name":"alerts.static","path":"/hooks/b"}`, ""),
		owner(`"webhook":{"service_name":"alerts.static","path":"/hooks/budget","service_port":8080}`, ""),
		owner(webhookOK, `"secret_headers":["x-team"],`),
		owner(webhookOK, `"secret_params":["x-team"],`),
	} {
		assert.NotEqual(t, base, other)
	}
	assert.Empty(t, mustParse(t, withGlobal("")).AlertOwner())

	// Whether a key's source is a credential is the configuration's
	// reading, whatever its rule items.
	c := mustParse(t, withGlobal(`,"secret_headers":["x-team"]`))
	assert.True(t, c.ReadsSecret("limit_by_per_header", "x-team"))
	assert.True(t, c.ReadsSecret("limit_by_header", "authorization"))
	assert.True(t, c.ReadsSecret("limit_by_per_cookie", "sid"))
	assert.False(t, c.ReadsSecret("limit_by_per_header", "x-app"))
	assert.False(t, c.ReadsSecret("global_threshold", ""))
}
