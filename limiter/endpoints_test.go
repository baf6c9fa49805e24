package limiter_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
)

// adminToken is the admin token of quotaConfig, whose SHA-256 it holds.
const adminToken = "secret"

// quotaConfig limits each sk- key by minute, hour (requests) and requests
// in progress, and within it gpt-4* models by minute, with the quota
// endpoint, the admin API and overrides on.
func quotaConfig(extra string) string {
	return `{"rule_name": "chat", "rule_match_mode": "all", "quota_path": "/v1/quota", "limit_overrides": true, ` + extra + `
		"admin": {"path": "/atrl", "consumer": "ops", "header": "x-admin-token",
			"token_sha256": "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"},
		"rule_items": [{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-",
			"token_per_minute": 1000, "query_per_hour": 100, "max_concurrent_requests": 5,
			"per_model": [{"model": "gpt-4*", "token_per_minute": 300}]}]}],
		` + plugintest.RedisSection + `}`
}

const sk1 = "atrl:{chat|limit_by_per_header|x-api-key|sk-1}"

var (
	key1   = plugintest.APIKey
	ops    = [2]string{"x-mse-consumer", "ops"}
	tokenH = [2]string{"x-admin-token", adminToken}
)

// snapshot is every key of Redis with its value and expiry, to see that
// nothing changed.
func snapshot(r redistest.Backend) map[string]string {
	out := map[string]string{}
	for _, k := range r.Keys("*") {
		out[k] = r.Do("DUMP", k).String() + fmt.Sprint(r.Int("PTTL", k) > 0)
	}
	return out
}

// document reads a local answer's status document.
func document(t *testing.T, x *plugintest.Exchange, status uint32) quota.Document {
	t.Helper()
	local := x.RequireRejected(status)
	assert.Equal(t, "application/json", plugintest.Header(local.Headers, "content-type"))
	var d quota.Document
	require.NoError(t, json.Unmarshal(local.Data, &d), "%s", local.Data)
	return d
}

// errorOf reads a local answer's error message.
func errorOf(t *testing.T, x *plugintest.Exchange, status uint32) string {
	t.Helper()
	local := x.RequireRejected(status)
	var e struct{ Error string }
	require.NoError(t, json.Unmarshal(local.Data, &e), "%s", local.Data)
	require.NotEmpty(t, e.Error)
	return e.Error
}

// limitsOf is a subject's limits without their reset times, which move.
func limitsOf(s quota.Subject) []quota.Limit {
	out := append([]quota.Limit(nil), s.Limits...)
	for i := range out {
		out[i].ResetSeconds = 0
	}
	return out
}

// The quota endpoint's numbers are what the counters hold after a mix of
// requests; it is answered by the plugin, makes no upstream call and
// changes nothing in Redis.
func TestQuotaEndpointShowsWhatTheCountersHold(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(""))
		use := func(model, key string, prompt, completion int) {
			x := p.SendBody(chatNaming(model), [2]string{"x-api-key", key}).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, prompt, completion))...)
		}
		use("gpt-4o", "sk-1", 40, 60)
		use("gpt-4o-mini", "sk-1", 10, 20)
		use("gpt-4o", "sk-2", 5, 5)
		inProgress := p.SendBody(chatNaming("o3"), key1).Answer()
		require.True(t, inProgress.Passed())

		before := snapshot(redis)
		x := p.Call("GET", "/v1/quota?model=gpt-4o", "", key1).Answer()
		d := document(t, x, 200)
		assert.Equal(t, before, snapshot(redis), "reading the quota counts, reserves and changes nothing")
		require.Len(t, d.Subjects, 2)
		s := d.Subjects[0]
		require.NotNil(t, s.RuleItem)
		assert.Equal(t, 0, *s.RuleItem)
		assert.Equal(t, "regexp:^sk-", s.Key)
		assert.Equal(t, "sk-1", s.Value)
		assert.Equal(t, []quota.Limit{
			{Kind: "tokens", Window: "minute", Limit: 1000, Used: p.MinuteCounter(sk1), Remaining: 1000 - p.MinuteCounter(sk1)},
			{Kind: "requests", Window: "hour", Limit: 100, Used: 3, Remaining: 97},
			{Kind: "concurrent", Limit: 5, Used: 1, Remaining: 4},
		}, limitsOf(s))
		assert.Equal(t, int64(130), p.MinuteCounter(sk1), "what the three responses of sk-1 used")
		assert.True(t, s.Limits[0].ResetSeconds >= 1 && s.Limits[0].ResetSeconds <= 60)
		m := d.Subjects[1]
		assert.Equal(t, "gpt-4o", m.Model)
		assert.Equal(t, "gpt-4*", m.ModelKey)
		assert.Equal(t, []quota.Limit{{Kind: "tokens", Window: "minute", Limit: 300, Used: 100, Remaining: 200}}, limitsOf(m))

		// Without a model: the key's own limits; another key: its own.
		assert.Len(t, document(t, p.Call("GET", "/v1/quota", "", key1).Answer(), 200).Subjects, 1)
		d = document(t, p.Call("GET", "/v1/quota", "", [2]string{"x-api-key", "sk-2"}).Answer(), 200)
		assert.Equal(t, int64(10), d.Subjects[0].Limits[0].Used)
		// A request no rule matches has no subjects, and still no upstream call.
		d = document(t, p.Call("GET", "/v1/quota", "", [2]string{"x-api-key", "pk-1"}).Answer(), 200)
		assert.Empty(t, d.Subjects)
		assert.Equal(t, "[]", string(mustJSON(t, d.Subjects)))

		local := p.Call("POST", "/v1/quota", `{}`, key1).RequireRejected(405)
		assert.Equal(t, "GET", plugintest.Header(local.Headers, "allow"))
		assert.Equal(t, before, snapshot(redis))
		inProgress.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 1))...)
	})
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// Only the admin consumer or the admin token gets in; anything else gets
// 403, malformed requests 400, and neither changes anything in Redis.
func TestAdminAPIRefusesAndChangesNothing(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(""))
		x := p.SendBody(chatNaming("gpt-4o"), key1).Answer()
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
		before := snapshot(redis)

		grant := `{"rule_item": 0, "value": "sk-1", "tokens": 10}`
		for name, headers := range map[string][][2]string{
			"no credentials":      nil,
			"another consumer":    {{"x-mse-consumer", "alice"}},
			"a wrong token":       {{"x-admin-token", "secrets"}},
			"an empty token":      {{"x-admin-token", ""}},
			"the token's hash":    {{"x-admin-token", "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"}},
			"the token elsewhere": {{"authorization", "Bearer " + adminToken}},
		} {
			assert.Contains(t, errorOf(t, p.Call("POST", "/atrl/grant", grant, headers...), 403), "forbidden", name)
			assert.Contains(t, errorOf(t, p.Call("GET", "/atrl/status?rule_item=0&value=sk-1", "", headers...), 403), "forbidden", name)
		}
		for _, tc := range []struct{ method, path, body, want string }{
			{"POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1", "tokens": 10`, "the body is not valid JSON"},
			{"POST", "/atrl/grant", `{"rule_item": 3, "value": "sk-1", "tokens": 10}`, "rule item 3 does not exist: the rule has 1"},
			{"POST", "/atrl/grant", `{"rule_item": 0, "value": "pk-1", "tokens": 10}`, `no key of rule item 0 (limit_by_per_header) matches the value "pk-1"`},
			{"POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1", "tokens": -10}`, "tokens: must be an integer between 1 and"},
			{"POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1", "tokens": "10"}`, "tokens: must be an integer"},
			{"POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1"}`, "tokens: required"},
			{"POST", "/atrl/reset", `{"rule_item": 0, "value": "sk-1", "window": "day"}`, "the subject has no day window to reset"},
			{"PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"token_per_day": 5}}`, "has no token_per_day to override"},
			{"PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"token_per_minute": 0}}`, "limits.token_per_minute: must be an integer between 1 and"},
			{"PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"token_per_minute": 1e20}}`, "limits.token_per_minute: must be an integer between 1 and"},
			{"PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "model": "o3", "limits": {"token_per_minute": 5}}`, `no per_model entry of the key "regexp:^sk-" matches the model "o3"`},
			{"DELETE", "/atrl/overrides", `{"rule_item": 0}`, "value: required"},
			{"GET", "/atrl/status?rule_item=0&value=sk-1&tokens=3", "", "tokens: not taken by this operation"},
		} {
			assert.Contains(t, errorOf(t, p.Call(tc.method, tc.path, tc.body, ops), 400), tc.want, "%s %s %s", tc.method, tc.path, tc.body)
		}
		assert.Contains(t, errorOf(t, p.Call("POST", "/atrl/refill", `{}`, ops), 404), "no such admin operation")
		assert.Contains(t, errorOf(t, p.Call("GET", "/atrl", "", ops), 404), "they are status, reset, grant and overrides")
		local := p.Call("GET", "/atrl/grant", "", ops).RequireRejected(405)
		assert.Equal(t, "POST", plugintest.Header(local.Headers, "allow"))
		assert.Equal(t, "PUT, DELETE", plugintest.Header(p.Call("POST", "/atrl/overrides", `{}`, ops).RequireRejected(405).Headers, "allow"))
		big := `{"rule_item": 0, "value": "sk-1", "tokens": 10, "pad": "` + strings.Repeat("x", quota.MaxBodyBytes) + `"}`
		assert.Contains(t, errorOf(t, p.Call("POST", "/atrl/grant", big, ops), 413), "too large")
		assert.Equal(t, before, snapshot(redis), "nothing refused changed Redis")
		assert.Equal(t, uint64(10), counted(p, "none", "token_ratelimit_admin_denied_count"),
			"each refusal without the admin consumer is counted")
		assert.Zero(t, counted(p, "none", "token_ratelimit_admin_action_count"))

		// Either credential works.
		assert.Len(t, document(t, p.Call("GET", "/atrl/status?rule_item=0&value=sk-1", "", ops).Answer(), 200).Subjects, 1)
		assert.Len(t, document(t, p.Call("GET", "/atrl/status?rule_item=0&value=sk-1&model=gpt-4o", "", tokenH).Answer(), 200).Subjects, 2)
	})
}

// Reset, grant and overrides change what the next request sees, on this
// plugin and on another instance sharing the Redis (another replica, or
// this one restarted); an override outlives the plugin.
func TestAdminChangesReachEveryReplica(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		a := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(""))
		use := func(p *plugintest.Plugin, tokens int) *plugintest.Exchange {
			x := p.SendBody(chatNaming("o3"), key1).Answer()
			if x.Passed() {
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, tokens, 0))...)
			}
			return x
		}
		use(a, 1000)
		use(a, 1).RequireRejected(429)

		d := document(t, a.Call("POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1", "tokens": 400}`, ops).Answer(), 200)
		assert.Equal(t, int64(600), d.Subjects[0].Limits[0].Used, "the answer is the status after")
		assert.Equal(t, int64(600), a.MinuteCounter(sk1))
		assert.Contains(t, strings.Join(a.Host.GetInfoLogs(), "\n"), `admin API: grant of {"rule_item":0,"value":"s...#0f2c10bf","tokens":400} by consumer ops`)
		require.True(t, use(a, 400).Passed(), "the grant is usable at once")
		use(a, 1).RequireRejected(429)

		d = document(t, a.Call("PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"token_per_minute": 5000, "max_concurrent_requests": 1}}`, tokenH).Answer(), 200)
		assert.Equal(t, quota.Limit{Kind: "tokens", Window: "minute", Limit: 5000, Used: 1000, Remaining: 4000, Overridden: true}, limitsOf(d.Subjects[0])[0])
		assert.Equal(t, quota.Limit{Kind: "concurrent", Limit: 1, Used: 0, Remaining: 1, Overridden: true}, limitsOf(d.Subjects[0])[2])
		assert.Contains(t, strings.Join(a.Host.GetInfoLogs(), "\n"), `admin API: override set of {"rule_item":0,"value":"s...#0f2c10bf","limits":{"max_concurrent_requests":1,"token_per_minute":5000}} by the admin token`)

		// Another instance on the same Redis: the override applies there,
		// with no reload, and outlives the first.
		a.Stop()
		b := plugintest.Start(t, redis, quotaConfig(""))
		held := b.SendBody(chatNaming("o3"), key1).Answer()
		require.True(t, held.Passed(), "5000 a minute now")
		second := b.SendBody(chatNaming("o3"), key1).Answer()
		assert.Contains(t, string(second.RequireRejected(429).Data), "Too many concurrent requests: at most 1 may be in progress at once",
			"the concurrency override")
		second.Done()
		held.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 2000, 0))...)
		assert.Equal(t, int64(3000), b.MinuteCounter(sk1))

		d = document(t, b.Call("POST", "/atrl/reset", `{"rule_item": 0, "value": "sk-1", "window": "minute"}`, ops).Answer(), 200)
		assert.Equal(t, int64(0), d.Subjects[0].Limits[0].Used)
		assert.Equal(t, int64(3), d.Subjects[0].Limits[1].Used, "the hour's three admitted requests are another window")
		assert.Equal(t, int64(0), b.MinuteCounter(sk1))

		document(t, b.Call("DELETE", "/atrl/overrides?rule_item=0&value=sk-1", "", ops).Answer(), 200)
		use(b, 1000)
		use(b, 1).RequireRejected(429)
		assert.Empty(t, redis.Keys(sk1+":o"))

		// Per model: the override and the reset act on the model's subject only.
		document(t, b.Call("PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "model": "gpt-4.1", "limits": {"token_per_minute": 5}}`, ops).Answer(), 200)
		assert.Equal(t, []string{sk1 + ":m:gpt-4.1:o"}, redis.Keys(sk1+"*:o"))
	})
}

// When Redis does not answer, the endpoints say so (503), never forward
// the request, and leave nothing paused.
func TestEndpointsWhenRedisIsDown(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.Start(t, redis, quotaConfig(""))
		redis.Stop()
		defer redis.Restart()
		for _, x := range []*plugintest.Exchange{
			p.Call("GET", "/v1/quota", "", key1).Answer(),
			p.Call("POST", "/atrl/grant", `{"rule_item": 0, "value": "sk-1", "tokens": 10}`, ops).Answer(),
			p.Call("GET", "/atrl/status?rule_item=0&value=sk-1", "", ops).Answer(),
		} {
			assert.Contains(t, errorOf(t, x, 503), "Redis")
		}
	})
}

// Issue 35, point 7: after an override, RateLimit-Policy shows the limit in
// force, as RateLimit and the OpenAI headers do, for a window and for the
// concurrency limit; a window left alone shows its configured limit.
func TestQuotaHeadersShowOverrides(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(`"quota_headers": ["ietf", "openai"],`))
		document(t, p.Call("PUT", "/atrl/overrides", `{"rule_item": 0, "value": "sk-1", "limits": {"token_per_minute": 5000, "max_concurrent_requests": 2}}`, ops).Answer(), 200)
		x := p.SendBody(chatNaming("o3"), key1).Answer() // a model no per_model entry limits
		require.True(t, x.Passed())
		headers := x.ResponseHeaders("text/event-stream")
		assert.Equal(t, `"item0.token_per_minute";q=5000;w=60;qu="tokens", "item0.query_per_hour";q=100;w=3600, "item0.max_concurrent_requests";q=2;qu="concurrency"`,
			plugintest.Header(headers, "RateLimit-Policy"))
		assert.Contains(t, plugintest.Header(headers, "RateLimit"), `"item0.token_per_minute";r=5000;`)
		assert.Equal(t, "5000", plugintest.Header(headers, "x-ratelimit-limit-tokens"))
		x.Done()
	})
}
