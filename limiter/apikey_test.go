package limiter_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 36: one limit_by_per_api_key rule limits a key wherever the client
// sends it: the OpenAI SDKs' Authorization: Bearer, Anthropic's x-api-key,
// Azure's api-key, the Gemini SDKs' x-goog-api-key, Gemini REST's ?key=.
// Five requests of 20 tokens, one in each form, use up the key's 100 a
// minute; then each form is refused, under the key's fingerprint.
func TestAPIKeyRuleReadsEveryForm(t *testing.T) {
	redis := redistest.Start(t)
	const subject = "atrl:{chat|limit_by_per_api_key||sk-1}"
	forms := []struct {
		path   string
		header [2]string
	}{
		{"/v1/chat/completions", [2]string{"authorization", "Bearer sk-1"}},
		{"/v1/messages", plugintest.APIKey},
		{"/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21", [2]string{"api-key", "sk-1"}},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", [2]string{"x-goog-api-key", "sk-1"}},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=sk-1", [2]string{"x-other", "1"}},
	}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, `{"rule_name": "chat",
			"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]}],
			`+plugintest.RedisSection+`}`)
		for i, f := range forms {
			x := p.SendTo(f.path, f.header).Answer()
			require.True(t, x.Passed(), "form %d", i)
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
			assert.Equal(t, int64(20*(i+1)), plugintest.CounterAtClock(redis, subject, "t60"), "form %d counted under the one key", i)
		}
		for i, f := range forms {
			local := p.SendTo(f.path, f.header).Answer().RequireRejected(429)
			assert.Equal(t, "rule_item=0; key=*", plugintest.Header(local.Headers, "X-TokenRateLimit-Scope"), "form %d", i)
			assert.NotContains(t, string(local.Data), "sk-1", "form %d", i)
		}
		x := p.SendTo(forms[0].path, [2]string{"authorization", "Bearer sk-2"}).Answer()
		assert.True(t, x.Passed(), "another key")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
		logs := strings.Join(slices.Concat(p.Host.GetDebugLogs(), p.Host.GetInfoLogs(), p.Host.GetWarnLogs()), "\n")
		assert.Contains(t, logs, `rule chat: limit_by_per_api_key matched limit key "*"`)
		assert.NotContains(t, logs, "sk-1")
	})
}

// Issue 50, point 6: under rule_match_mode first, an API-key item read only
// the first and the last of the keys a request carries. An Azure client's
// real key in api-key, between made-up keys in x-api-key and
// x-goog-api-key, was never charged nor limited. Every key counts: the
// middle one is charged, and once its budget is used up, the request with
// fresh made-up keys around it is rejected.
func TestAPIKeyFirstModeCountsEveryKey(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(key string) string { return "atrl:{chat|limit_by_per_api_key||" + key + "}" }
	const azure = "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
	keys := func(before, after string) [][2]string {
		return [][2]string{{"x-api-key", before}, {"api-key", "sk-real"}, {"x-goog-api-key", after}}
	}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, `{"rule_name": "chat", "rule_match_mode": "first",
			"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]}],
			`+plugintest.RedisSection+`}`)
		x := p.SendTo(azure, keys("made-up-1", "made-up-2")...).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 60, 40))...)
		assert.Equal(t, int64(100), plugintest.CounterAtClock(redis, subject("sk-real"), "t60"), "the key in the middle is charged")
		assert.Equal(t, int64(100), plugintest.CounterAtClock(redis, subject("made-up-1"), "t60"))
		assert.Equal(t, int64(100), plugintest.CounterAtClock(redis, subject("made-up-2"), "t60"))

		local := p.SendTo(azure, keys("made-up-3", "made-up-4")...).Answer().RequireRejected(429)
		assert.Contains(t, string(local.Data), "100 tokens per minute", "sk-real's budget is used up")
		assert.Equal(t, int64(0), plugintest.CounterAtClock(redis, subject("made-up-3"), "t60"), "rejected: charged nothing")
	})
}
