package limiter_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 53, point 5: each limited request's usage, cost, limit decision and
// subject in the property ai_log, which an Envoy access log reads as
// %FILTER_STATE(wasm.ai_log:PLAIN)% (Higress's default format has it): a
// JSON object written string-escaped, as Higress's plugins write it.

// keyFingerprint is how logs show the credential sk-1 (config.Fingerprint):
// the limit key of plugintest.APIKeyConfig.
const keyFingerprint = "s...#0f2c10bf"

// accessLog reads the ai_log property as Higress's plugins read it
// (wrapper.UnmarshalStr, then the JSON object), numbers as json.Number.
func accessLog(t *testing.T, p *plugintest.Plugin) map[string]any {
	t.Helper()
	raw, err := p.Host.GetProperty([]string{"ai_log"})
	require.NoError(t, err, "no ai_log property")
	object := wrapper.UnmarshalStr(`"` + string(raw) + `"`)
	require.NotEmpty(t, object, "ai_log is not a string-escaped value: %s", raw)
	var got map[string]any
	d := json.NewDecoder(strings.NewReader(object))
	d.UseNumber()
	require.NoError(t, d.Decode(&got), "ai_log is not a JSON object: %s", object)
	return got
}

// A streamed answer reporting its usage (cache reads and reasoning tokens
// among it), of a priced model: its usage, what it cost in tokens and in
// nanodollars, the tightest window and the subject, its credential as its
// fingerprint.
func TestAccessLogOfAStreamedPricedAnswer(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(pricing, `"token_per_minute": 100000, "token_per_day": 1000000, "usd_per_day": 100`))
		x := p.SendBody(chatNaming("gpt-4o"), key).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}`+"\n\n"+
			`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,`+
			`"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":50}}}`+"\n\n"+
			"data: [DONE]\n\n")...)
		assert.Equal(t, map[string]any{
			"ratelimit.decision":                   "allowed",
			"ratelimit.rule":                       "chat",
			"ratelimit.rule_item":                  json.Number("0"),
			"ratelimit.key":                        keyFingerprint,
			"ratelimit.limit_kind":                 "tokens",
			"ratelimit.window":                     "token_per_minute", // the tightest: 98,800 left of it
			"gen_ai.request.model":                 "gpt-4o",
			"gen_ai.usage.input_tokens":            json.Number("1000"),
			"gen_ai.usage.output_tokens":           json.Number("200"),
			"gen_ai.usage.cache_read.input_tokens": json.Number("400"),
			"gen_ai.usage.reasoning.output_tokens": json.Number("50"),
			"ratelimit.cost_tokens":                json.Number("1200"),
			// 600 uncached × $2.50 + 400 cached × $1.25 + 200 × $10 per million.
			"ratelimit.cost_nanodollars": json.Number("4000000"),
		}, accessLog(t, p))
		day := ":" + strconv.Itoa(clientsClock/86400)
		assert.Equal(t, int64(4_000_000), redis.Int("GET", plugintest.APIKeySubject+":u86400"+day), "what the log says it cost is what was charged")
		assert.Equal(t, int64(1200), redis.Int("GET", plugintest.APIKeySubject+":t86400"+day))
	})
}

// A rejection is logged at once: which limit, of which subject; nothing
// was used or charged.
func TestAccessLogOfARejection(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig("", `"token_per_minute": 100000, "query_per_minute": 1`))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		x := p.Request(key)
		x.RequireRejected(429)
		assert.Equal(t, map[string]any{
			"ratelimit.decision":   "rejected",
			"ratelimit.rule":       "chat",
			"ratelimit.rule_item":  json.Number("0"),
			"ratelimit.key":        keyFingerprint,
			"ratelimit.limit_kind": "requests",
			"ratelimit.window":     "query_per_minute",
		}, accessLog(t, p), "the first request's usage and cost are not the rejection's")
		x.Done()
	})
}

// shadow_mode: the request a limit would have rejected passes; its log
// says so, names that limit, and has its usage and cost.
func TestAccessLogOfAShadowRejection(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"shadow_mode": true,`, `"token_per_minute": 100000, "query_per_minute": 1`))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		first := accessLog(t, p)
		assert.Equal(t, "allowed", first["ratelimit.decision"])
		assert.Equal(t, "tokens", first["ratelimit.limit_kind"], "the tightest window: tokens before requests")

		x := p.Request(key)
		require.True(t, x.Passed(), "shadow_mode rejects nothing")
		x.Respond("application/json", `{"usage":{"prompt_tokens":30,"completion_tokens":10}}`)
		assert.Equal(t, map[string]any{
			"ratelimit.decision":         "shadow_rejected",
			"ratelimit.rule":             "chat",
			"ratelimit.rule_item":        json.Number("0"),
			"ratelimit.key":              keyFingerprint,
			"ratelimit.limit_kind":       "requests",
			"ratelimit.window":           "query_per_minute",
			"gen_ai.usage.input_tokens":  json.Number("30"),
			"gen_ai.usage.output_tokens": json.Number("10"),
			"ratelimit.cost_tokens":      json.Number("40"),
		}, accessLog(t, p))
	})
}

// Another plugin's ai_log (Higress's ai-statistics writes it the same
// way, with wrapper.MarshalStr) keeps its members; ours are added, and a
// stale one of ours is replaced, not doubled. A value that is not a JSON
// object is left as it is.
func TestAccessLogKeepsOtherPluginsKeys(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig("", `"token_per_minute": 100000`))
		theirs := `{"model":"qwen-max","input_token":21,"question":"say \"hi\"\n","ratelimit.decision":"stale"}`
		require.NoError(t, p.Host.SetProperty([]string{"ai_log"}, []byte(wrapper.MarshalStr(theirs))))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		assert.Equal(t, map[string]any{
			"model":                      "qwen-max",
			"input_token":                json.Number("21"),
			"question":                   "say \"hi\"\n",
			"ratelimit.decision":         "allowed",
			"ratelimit.rule":             "chat",
			"ratelimit.rule_item":        json.Number("0"),
			"ratelimit.key":              keyFingerprint,
			"ratelimit.limit_kind":       "tokens",
			"ratelimit.window":           "token_per_minute",
			"gen_ai.usage.input_tokens":  json.Number("15"),
			"gen_ai.usage.output_tokens": json.Number("5"),
			"ratelimit.cost_tokens":      json.Number("20"),
		}, accessLog(t, p))
		raw, err := p.Host.GetProperty([]string{"ai_log"})
		require.NoError(t, err)
		assert.Equal(t, 1, strings.Count(string(raw), `ratelimit.decision`), "one decision: %s", raw)

		// Escapes another encoder may write: \u ones, a surrogate pair.
		require.NoError(t, p.Host.SetProperty([]string{"ai_log"}, []byte(`{\"a\":\"\u00e9\ud83d\ude00\u003cb\u003e\\\"\"}`)))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		assert.Equal(t, "é😀<b>\"", accessLog(t, p)["a"])

		require.NoError(t, p.Host.SetProperty([]string{"ai_log"}, []byte("not json")))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		raw, err = p.Host.GetProperty([]string{"ai_log"})
		require.NoError(t, err)
		assert.Equal(t, "not json", string(raw), "another plugin's value is not overwritten")
	})
}

// access_log: false writes nothing.
func TestAccessLogOff(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"access_log": false,`, `"query_per_minute": 1`))
		p.Request(key).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		p.Request(key).RequireRejected(429)
		_, err := p.Host.GetProperty([]string{"ai_log"})
		assert.Error(t, err, "no ai_log property")
	})
}

// Redis could not decide: failure_mode's answer is logged at once, with
// the request's subject and no limit.
func TestAccessLogOfRedisFailures(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	want := func(decision string) map[string]any {
		return map[string]any{
			"ratelimit.decision":  decision,
			"ratelimit.rule":      "chat",
			"ratelimit.rule_item": json.Number("0"),
			"ratelimit.key":       keyFingerprint,
		}
	}
	plugintest.RunTest(t, func(t *testing.T) {
		deny := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, plugintest.APIKeyConfig(`"failure_mode": "deny",`, `"token_per_minute": 100000`))
		redis.Stop()
		defer redis.Restart()
		deny.Request(key).RequireRejected(503)
		assert.Equal(t, want("failure_denied"), accessLog(t, deny))
		deny.Stop()

		allow := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"failure_mode": "allow",`, `"token_per_minute": 100000`))
		x := allow.Request(key)
		require.True(t, x.Passed())
		assert.Equal(t, want("failure_allowed"), accessLog(t, allow), "logged as it passes: it is not charged")
		x.Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
	})
}

// A credential that names the subject of a limit_by_per_* item shows as
// its fingerprint, never as itself.
func TestAccessLogShowsACredentialsFingerprint(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, `{"rule_name": "keys", "rule_items": [{"limit_by_per_header": "x-api-key",
			"limit_keys": [{"key": "*", "token_per_minute": 100000}]}], `+plugintest.RedisSection+`}`)
		p.Request([2]string{"x-api-key", "sk-live-0123456789"}).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		got := accessLog(t, p)
		assert.Equal(t, "sk-l...#"+hex.EncodeToString(sha256Of("sk-live-0123456789")[:4]), got["ratelimit.subject"])
		assert.Equal(t, "*", got["ratelimit.key"])
		raw, err := p.Host.GetProperty([]string{"ai_log"})
		require.NoError(t, err)
		assert.NotContains(t, string(raw), "0123456789")
	})
}

// A value the client sends that names its subject (limit_by_per_header)
// is escaped (quotes, backslashes, control bytes) and cut at 256 bytes.
func TestAccessLogOfAClientsValue(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, clientsClock, `{"rule_name": "users", "rule_items": [{"limit_by_per_header": "x-user",
			"limit_keys": [{"key": "*", "token_per_minute": 100000}]}], `+plugintest.RedisSection+`}`)
		user := "bob \"the\" \\ builder\x01 " + strings.Repeat("é", 200) // 21 bytes, then 2 each
		p.Request([2]string{"x-user", user}).Respond("application/json", `{"usage":{"prompt_tokens":15,"completion_tokens":5}}`)
		got := accessLog(t, p)
		assert.Equal(t, user[:255], got["ratelimit.subject"], "at most 256 bytes, whole characters")
		assert.Equal(t, "*", got["ratelimit.key"])
		assert.Equal(t, "users", got["ratelimit.rule"])
	})
}

func sha256Of(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}
