package limiter_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 35, point 6: subjects read from credentials (an Authorization
// bearer, an x-api-key limited by its exact value, a session cookie) reach
// no log line, webhook body, header or error message: each is named by its
// fingerprint there. Only the answer to the client's own quota request
// carries them.
func TestCredentialsReachNoLogWebhookOrHeader(t *testing.T) {
	const (
		bearer = "sk-proj-SECRETbearer0123456789"
		apiKey = "sk-live-SECRETkey0123456789"
		cookie = "sess-SECRETcookie0123456789"
	)
	secrets := []string{bearer, apiKey, cookie, "SECRET"}
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, `{"rule_name": "keys", "quota_path": "/v1/quota",
			"quota_headers": ["tokenratelimit", "openai", "ietf"],
			"admin": {"path": "/atrl", "header": "x-admin-token", "token_sha256": "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"},
			"budget_alerts": {"thresholds": [50], "webhook": {"service_name": "alerts.static", "path": "/hooks/budget", "timeout": 500}},
			"rule_items": [
				{"limit_by_per_header": "authorization", "limit_keys": [{"key": "regexp:^Bearer ", "token_per_minute": 100}]},
				{"limit_by_header": "x-api-key", "limit_keys": [{"key": "`+apiKey+`", "token_per_minute": 100}]},
				{"limit_by_per_cookie": "session", "limit_keys": [{"key": "*", "token_per_minute": 100}]}],
			"redis": {"service_name": "redis.static", "timeout": 1000, "breaker_failures": 0}}`) // failed charges below
		creds := [][2]string{{"authorization", "Bearer " + bearer}, {"x-api-key", apiKey}, {"cookie", "session=" + cookie}}
		var seen []string // what left the plugin: headers, bodies, webhook bodies
		see := func(headers [][2]string, body []byte) {
			for _, h := range headers {
				seen = append(seen, h[0]+": "+h[1])
			}
			seen = append(seen, string(body))
		}

		// A charge that fails twice is logged with its subjects.
		x := p.Request(creds...)
		require.True(t, x.Passed())
		see(x.ResponseHeaders("text/event-stream"), nil)
		p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(1, 5, 0)), true)
		calls := slices.Clone(p.Host.GetRedisCalloutAttributesFromContext(x.ID))
		require.Len(t, calls, 3, "a charge per subject (a slot each)")
		for _, c := range calls {
			p.Host.CallOnRedisCallResponse(c.CalloutID, 1, nil) // timed out
		}
		x.Done()
		p.Host.Tick()
		calls = slices.Clone(p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID))
		require.Len(t, calls, 3, "their retries")
		for _, c := range calls {
			p.Host.CallOnRedisCallResponse(c.CalloutID, 1, nil)
		}
		warnings := strings.Join(p.Host.GetWarnLogs(), "\n")
		assert.Contains(t, warnings, "failed twice")
		assert.Contains(t, warnings, config.Fingerprint(apiKey))

		x = p.Request(creds...)
		require.True(t, x.Passed())
		see(x.ResponseHeaders("text/event-stream"), nil)
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 150, 0))...)
		bodies := tickAlerts(t, p, 200)
		require.Len(t, bodies, 3, "each subject alerts at 50 %")
		removals := slices.Clone(p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID))
		require.Len(t, removals, 3, "each alert taken out of its outbox")
		for _, c := range removals {
			p.Host.CallOnRedisCallResponse(c.CalloutID, 1, nil) // fails: logged with the outbox's key
		}
		assert.Contains(t, strings.Join(p.Host.GetDebugLogs(), "\n"), "not taken out of")
		assert.Contains(t, strings.Join(bodies, "\n"), `"value":"`+config.Fingerprint("Bearer "+bearer)+`"`)
		assert.Contains(t, strings.Join(bodies, "\n"), `"key":"`+config.Fingerprint(apiKey)+`"`)
		see(nil, []byte(strings.Join(bodies, "\n")))

		local := p.Request(creds...).RequireRejected(429)
		see(local.Headers, local.Data)
		assert.NotEmpty(t, plugintest.Header(local.Headers, "X-TokenRateLimit-Scope"))

		// The admin API: its log line and its answer.
		g := p.Call("POST", "/atrl/grant", `{"rule_item": 1, "value": "`+apiKey+`", "tokens": 10}`, tokenH).Answer()
		require.NotNil(t, g.Local())
		require.Equal(t, uint32(200), g.Local().StatusCode, "%s", g.Local().Data)
		see(g.Local().Headers, g.Local().Data)
		assert.Contains(t, strings.Join(p.Host.GetInfoLogs(), "\n"), `admin API: grant of {"rule_item":1,"value":"`+config.Fingerprint(apiKey)+`"`)

		// The client's own quota request: its own values, raw.
		q := p.Call("GET", "/v1/quota", "", creds...).Answer().Local()
		require.NotNil(t, q)
		assert.Contains(t, string(q.Data), apiKey)

		logs := slices.Concat(p.Host.GetTraceLogs(), p.Host.GetDebugLogs(), p.Host.GetInfoLogs(), p.Host.GetWarnLogs(),
			p.Host.GetErrorLogs(), p.Host.GetCriticalLogs())
		require.NotEmpty(t, logs)
		for _, s := range secrets {
			for _, line := range append(logs, seen...) {
				assert.NotContains(t, line, s)
			}
		}
	})
}
