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
		{"/v1/messages", [2]string{"x-api-key", "sk-1"}},
		{"/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21", [2]string{"api-key", "sk-1"}},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", [2]string{"x-goog-api-key", "sk-1"}},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=sk-1", [2]string{"x-other", "1"}},
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.StartOver(t, alertsClock)
		p := plugintest.Start(t, redis, `{"rule_name": "chat",
			"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]}],
			`+plugintest.RedisSection+`}`)
		for i, f := range forms {
			x := p.SendTo(f.path, f.header).Answer()
			require.True(t, x.Passed(), "form %d", i)
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 10, 10))...)
			assert.Equal(t, int64(20*(i+1)), tokensAt(redis, subject, 60), "form %d counted under the one key", i)
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
