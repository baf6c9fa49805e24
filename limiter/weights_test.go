package limiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// What a request costs under token_count_strategy and token_weights: its
// tokens weighted by kind (input, output, cache reads and writes) and by
// the model it names. Through the plugin (Go and WASM mode) on a real
// Redis.

func TestWeightedCost(t *testing.T) {
	redis := redistest.Start(t)
	weighted := `"token_count_strategy": "weighted", "token_weights": {"input": 1, "output": 5, "cache_read": 0.1, "cache_creation": 1.25,
		"models": {"claude-opus-4": {"input": 3, "output": 15, "cache_read": 0.3, "cache_creation": 3.75}}},`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			name, extra, body string
			want              int64
		}{
			// 100 uncached ×1 + 2,000 written ×1.25 + 3,000 read ×0.1 + 45 out ×5 = 100 + 2,500 + 300 + 225
			{"default weights", weighted, `{"model":"claude-sonnet-4","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, 3125},
			{"the request's model's weights", weighted, `{"model":"claude-opus-4","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, 300 + 7500 + 900 + 675},
			{"weighted with reservation", plugintest.ReservationOn + weighted, `{"model":"claude-sonnet-4","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, 3125},
			{"input tokens only", `"token_count_strategy": "input_tokens",`, `{}`, 5100},
			{"output tokens only", `"token_count_strategy": "output_tokens",`, `{}`, 45},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(c.extra, `"token_per_day": 1000000`))
				x := p.SendBody(c.body, plugintest.APIKey).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(100, 2000, 3000, 45))...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}

// token_weights.models keys are exact names, prefixes (`claude-opus-4*`,
// the longest winning) and regexps, so a dated alias of a listed model
// gets its weights. Issue 14, point 6: "(6, model part) … (c) a dated
// alias of a listed model (`claude-opus-4-20250514` when `claude-opus-4` is
// listed) gets the default weights — `token_weights.models` keys accept
// `regexp:<re>` (RE2, as rule keys do) and prefixes (`claude-opus-4*`),
// besides exact names."
func TestHardening6DatedModelAlias(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	weights := `"token_count_strategy": "weighted", "token_weights": {"models": {
		"claude-opus-4*": {"input": 5, "output": 25},
		"claude-opus-4-1*": {"input": 6, "output": 30},
		"regexp:^gpt-4o-\\d{4}-\\d{2}-\\d{2}$": {"input": 2, "output": 8}}},`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			model string
			want  int64
		}{
			{"claude-opus-4", 750},
			{"claude-opus-4-20250514", 750},
			{"claude-opus-4-1-20250805", 900}, // the longest prefix
			{"gpt-4o-2024-08-06", 280},
			{"gpt-4o", 110},
		} {
			t.Run(c.model, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(weights, `"token_per_day": 1000000`))
				x := p.SendBody(`{"model":"`+c.model+`","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(100, 0, 0, 10))...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}
