package limiter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

func TestUsageIsChargedExactlyHoweverTheBodyIsCut(t *testing.T) {
	redis := redistest.Start(t)
	openAI := plugintest.OpenAIStream(50, 1234, 567)
	usageAt := strings.Index(openAI, `"prompt_tokens"`)
	anthropic := plugintest.AnthropicStream(100, 2000, 3000, 45)
	gemini := plugintest.GeminiStream(700, 300)
	responses := plugintest.ResponsesStream(321, 123)
	whole := `{"id":"chatcmpl-2","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"a \"usage\": {\"prompt_tokens\": 999999} b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":11,"total_tokens":42}}`
	cases := []struct {
		name        string
		contentType string
		chunks      []string
		want        int64
	}{
		{"openai stream, one chunk per event", "text/event-stream", plugintest.SSEEvents(openAI), 1801},
		{"openai stream, cut inside the usage JSON", "text/event-stream", plugintest.CutAt(openAI, usageAt+5, usageAt+17), 1801},
		{"openai stream, cut inside the data: prefix and the key", "text/event-stream", plugintest.CutAt(openAI, usageAt-150, usageAt-148, usageAt+3), 1801},
		{"openai stream, one byte per chunk", "text/event-stream", plugintest.Bytewise(openAI), 1801},
		{"anthropic stream with cache tokens, cut everywhere", "text/event-stream", plugintest.Bytewise(anthropic), 100 + 2000 + 3000 + 45},
		{"gemini stream, cumulative usage, CRLF", "text/event-stream", plugintest.CutAt(gemini, len(gemini)/3, len(gemini)/2), 1000},
		{"openai responses stream", "text/event-stream", plugintest.CutAt(responses, len(responses)-40), 444},
		{"whole JSON body in three chunks, usage quoted in the content", "application/json", plugintest.CutAt(whole, 60, len(whole)-20), 42},
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
				x := p.Request(plugintest.APIKey)
				require.True(t, x.Passed())
				x.Respond(c.contentType, c.chunks...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}
