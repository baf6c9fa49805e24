package limiter_test

import (
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// How the endpoints read their requests: a body that ends with trailers,
// the admin token header (which never goes upstream), and paths as the
// upstream's router would read them (config.CanonicalPath).

// An admin request whose body ends with trailers is read and served like
// any other: the body is what the host buffered, not more.
func TestEndpointAdminBodyEndingWithTrailers(t *testing.T) {
	redis := redistest.Start(t)
	trailers := [][2]string{{"x-checksum", "5d41402abc4b2a76"}}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(""))
		x := p.SendBody(chatNaming("o3"), key1).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 0))...)
		require.Equal(t, int64(100), p.MinuteCounter(sk1))

		// post sends an admin request's headers, its body in chunks (none:
		// the trailers follow the headers), then its trailers.
		post := func(path string, chunks ...string) *plugintest.Exchange {
			x := &plugintest.Exchange{P: p, ID: p.Host.InitializeHttpContext()}
			x.Action = p.Host.CallOnRequestHeaders(x.ID, [][2]string{{":authority", "llm.example.com"},
				{":method", "POST"}, {":path", path}, {"content-type", "application/json"}, ops}, false)
			require.Equal(t, types.HeaderStopIteration, x.Action, "the headers wait for the body")
			for _, c := range chunks {
				require.Equal(t, types.ActionPause, p.Host.CallOnRequestBody(x.ID, []byte(c), false), "the body is buffered")
			}
			x.Action = p.Host.CallOnRequestTrailers(x.ID, trailers)
			assert.Equal(t, types.ActionPause, x.Action, "the trailers wait for the answer")
			return x
		}

		grant := `{"rule_item": 0, "value": "sk-1", "tokens": 40}`
		d := document(t, post("/atrl/grant", grant[:10], grant[10:]).Answer(), 200)
		assert.Equal(t, int64(60), d.Subjects[0].Limits[0].Used, "the body in two chunks, then trailers")
		assert.Equal(t, int64(60), p.MinuteCounter(sk1))
		assert.Contains(t, strings.Join(p.Host.GetInfoLogs(), "\n"), `admin API: grant of {"rule_item":0,"value":"s...#0f2c10bf","tokens":40} by consumer ops`)

		d = document(t, post("/atrl/grant?rule_item=0&value=sk-1&tokens=10").Answer(), 200)
		assert.Equal(t, int64(50), d.Subjects[0].Limits[0].Used, "no body: the parameters are read from the query")

		assert.Contains(t, errorOf(t, post("/atrl/grant", `{"rule_item": 0, "value": "sk-1", "tokens": 10`).Answer(), 400),
			"the body is not valid JSON", "the body read is the one buffered, whole")
		big := `{"rule_item": 0, "value": "sk-1", "tokens": 10, "pad": "` + strings.Repeat("x", 70<<10) + `"}`
		x = &plugintest.Exchange{P: p, ID: p.Host.InitializeHttpContext()}
		p.Host.CallOnRequestHeaders(x.ID, [][2]string{{":authority", "llm.example.com"},
			{":method", "POST"}, {":path", "/atrl/grant"}, ops}, false)
		p.Host.CallOnRequestBody(x.ID, []byte(big), false)
		assert.Contains(t, errorOf(t, x, 413), "too large", "a body too large is refused before its trailers")
		assert.Equal(t, int64(50), p.MinuteCounter(sk1))
	})
}

// The admin token header is taken off every request that goes upstream:
// a client that sends it with an LLM request does not hand the operator's
// token to the upstream.
func TestEndpointAdminTokenNeverGoesUpstream(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(""))
		for _, path := range []string{"/v1/chat/completions", "/v1/quota/x", "/atrlx/reset"} {
			for _, token := range []string{adminToken, "a wrong one"} {
				x := sendBodyTo(p, path, chatNaming("o3"), key1, [2]string{"x-admin-token", token}).Answer()
				require.True(t, x.Passed(), "%s: an LLM request", path)
				_, headers := upstreamSees(x)
				assert.Empty(t, plugintest.Header(headers, "x-admin-token"), "%s: the admin token header does not go upstream", path)
				assert.Equal(t, "sk-1", plugintest.Header(headers, "x-api-key"), "every other header does")
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 1))...)
			}
		}
		// The token still opens the admin API.
		assert.Len(t, document(t, p.Call("GET", "/atrl/status?rule_item=0&value=sk-1", "", tokenH).Answer(), 200).Subjects, 1)
		p.Stop()

		// Without admin.header, no header is the admin's: all go upstream.
		p = plugintest.Start(t, redis, plugintest.APIKeyConfig(`"admin": {"path": "/atrl", "consumer": "ops"},`, `"token_per_day": 100000`))
		x := sendBodyTo(p, "/v1/chat/completions", chatNaming("o3"), key1, tokenH).Answer()
		require.True(t, x.Passed())
		_, headers := upstreamSees(x)
		assert.Equal(t, adminToken, plugintest.Header(headers, "x-admin-token"))
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1, 1))...)
	})
}

// quota_path and admin.path are matched on the path as the upstream's
// router reads it (config.CanonicalPath): a near miss is the endpoint,
// answered by the plugin, never an LLM request that goes upstream.
func TestEndpointPathsMatchAfterNormalisation(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, quotaConfig(""))
		for _, path := range []string{"/v1/quota/", "//v1/quota", "/v1/%71uota", "/v1/./quota", "/v2/../v1/quota",
			"/v1%2Fquota", "/../v1/quota", "/v1/quota//?model=gpt-4o"} {
			d := document(t, p.Call("GET", path, "", key1).Answer(), 200)
			assert.Len(t, d.Subjects, 1+strings.Count(path, "model="), "%s: the quota endpoint", path)
		}
		d := document(t, p.Call("GET", "/v1/quota/?model=gpt-4o", "", key1).Answer(), 200)
		require.Len(t, d.Subjects, 2, "the query string is read as it came")
		assert.Equal(t, "gpt-4o", d.Subjects[1].Model)
		local := p.Call("POST", "/v1/quota/", `{}`, key1).RequireRejected(405)
		assert.Equal(t, "GET", plugintest.Header(local.Headers, "allow"))

		reset := `{"rule_item": 0, "value": "sk-1", "window": "minute"}`
		for _, tc := range []struct{ method, path, body string }{
			{"POST", "//atrl/reset", reset},
			{"POST", "/atrl%2Freset", reset},
			{"POST", "/atrl%2freset/", reset},
			{"POST", "/x/../atrl/reset", reset},
			{"POST", "/atrl/%72eset", reset},
			{"GET", "/atrl/./status?rule_item=0&value=sk-1", ""},
			{"GET", "/atrl//status/?rule_item=0&value=sk-1", ""},
		} {
			assert.Contains(t, errorOf(t, p.Call(tc.method, tc.path, tc.body).Answer(), 403), "forbidden", "%s %s", tc.method, tc.path)
			assert.Contains(t, errorOf(t, p.Call(tc.method, tc.path, tc.body, [2]string{"x-admin-token", "wrong"}).Answer(), 403), "forbidden", "%s %s", tc.method, tc.path)
			d := document(t, p.Call(tc.method, tc.path, tc.body, tokenH).Answer(), 200)
			assert.Len(t, d.Subjects, 1, "%s %s", tc.method, tc.path)
		}
		assert.Contains(t, errorOf(t, p.Call("POST", "/atrl/%2E%2E/atrl/refill", `{}`, ops).Answer(), 404), "no such admin operation: /atrl/refill")
		// A double escape is decoded once, as the upstream decodes it:
		// %2572 is "%72", no admin operation, and /v1/%2571uota is no quota path.
		assert.Contains(t, errorOf(t, p.Call("POST", "/atrl/%2572eset", reset, ops).Answer(), 404), "no such admin operation")
		x := p.Call("GET", "/v1/%2571uota", "", key1).Answer()
		assert.Nil(t, x.Local(), "not the quota endpoint")
	})
}

// A stream is asked for its usage on any path the upstream's router reads
// as a completions path.
func TestStreamUsageOnNormalisedPaths(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, path := range []string{"/v1/chat/%63ompletions", "/v1//chat/completions", "/v1/chat%2Fcompletions?x=1", "/v1/chat/completions/"} {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
			x := sendBodyTo(p, path, streamBody, plugintest.APIKey).Answer()
			require.True(t, x.Passed(), path)
			body, headers := upstreamSees(x)
			assert.JSONEq(t, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Say hello."}],"stream_options":{"include_usage":true}}`, body, path)
			assert.Empty(t, plugintest.Header(headers, "content-length"), path)
			assert.Equal(t, path, plugintest.Header(headers, ":path"), "the path goes upstream as it came")
			withUsage, withoutUsage := readStream(t)
			got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(withUsage))
			assert.Equal(t, withoutUsage, got, "%s: the client gets the stream it asked for", path)
			assert.Equal(t, int64(29), p.DayCounter(plugintest.APIKeySubject), path)
			p.Stop()
		}
	})
}
