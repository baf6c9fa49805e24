package limiter_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// modelBudgets is the README's "Budgets per model" configuration, with
// small limits: each consumer a day's budget, within it 100 tokens a
// minute on gpt-4o and 50,000 on any other model; each model, across
// consumers, its own minute.
func modelBudgets(extra string, gpt4oAcross int) string {
	return fmt.Sprintf(`{"rule_name": "llm", "rule_match_mode": "all", %s
		"rule_items": [
			{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 1000000, "per_model": [
				{"model": "regexp:^gpt-4o$", "token_per_minute": 100},
				{"model": "claude-opus-4*", "token_per_day": 50000},
				{"model": "*", "token_per_minute": 50000}]}]},
			{"limit_by_per_model": "", "limit_keys": [
				{"key": "regexp:^gpt-4o$", "token_per_minute": %d},
				{"key": "*", "token_per_minute": 1000000}]}],
		%s}`, extra, gpt4oAcross, plugintest.RedisSection)
}

// chatNaming is an OpenAI chat body naming a model (and max_tokens 10).
func chatNaming(model string) string {
	return `{"model": "` + model + `", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}`
}

const (
	consumerSubject = "atrl:{llm|limit_by_per_consumer|x-mse-consumer|%s}"
	modelSubject    = "atrl:{llm|limit_by_per_model||%s}"
)

// Consumer A at its gpt-4o minute limit is rejected on gpt-4o and admitted
// on gpt-4o-mini; consumer B is admitted on gpt-4o; every charge goes to
// the consumer's day, its per-model window and the model's own window.
func TestModelBudgets(t *testing.T) {
	redis := redistest.Start(t)
	alice, bob := [2]string{"x-mse-consumer", "alice"}, [2]string{"x-mse-consumer", "bob"}
	day := func(subject string) int64 {
		return plugintest.Counter(redis, subject, "t86400", redis.Now())
	}
	minute := func(subject string) int64 {
		return plugintest.Counter(redis, subject, "t60", redis.Now())
	}
	use := func(x *plugintest.Exchange, prompt, completion int) {
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, prompt, completion))...)
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, modelBudgets("", 300000))

		use(p.SendBody(chatNaming("gpt-4o"), alice).Answer(), 40, 60)
		x := p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		local := x.RequireRejected(429)
		assert.Equal(t, "rule_item=0; key=*; model=gpt-4o", plugintest.Header(local.Headers, "X-TokenRateLimit-Scope"))
		use(p.SendBody(chatNaming("gpt-4o-mini"), alice).Answer(), 10, 20)
		use(p.SendBody(chatNaming("gpt-4o"), bob).Answer(), 5, 5)

		aliceKey, bobKey := fmt.Sprintf(consumerSubject, "alice"), fmt.Sprintf(consumerSubject, "bob")
		assert.Equal(t, int64(130), day(aliceKey), "alice's day: all her models")
		assert.Equal(t, int64(100), minute(aliceKey+":m:gpt-4o"), "alice on gpt-4o")
		assert.Equal(t, int64(30), minute(aliceKey+":m:gpt-4o-mini"), "alice on gpt-4o-mini")
		assert.Equal(t, int64(10), day(bobKey))
		assert.Equal(t, int64(10), minute(bobKey+":m:gpt-4o"))
		assert.Equal(t, int64(110), minute(fmt.Sprintf(modelSubject, "gpt-4o")), "gpt-4o across consumers")
		assert.Equal(t, int64(30), minute(fmt.Sprintf(modelSubject, "gpt-4o-mini")))
	})
}

// The model comes from the first source of model_source that has one: a
// header, the body (OpenAI, Anthropic and Responses bodies name it the
// same way), or a Gemini path; a request without one is limited by its
// consumer's budget only.
func TestModelSources(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	// charged is what alice's per-model subject for model holds, in its one
	// window (a minute, or a day for claude-opus-4*).
	charged := func(model string) int64 {
		keys := redis.Keys(aliceKey + ":m:" + model + ":t*")
		require.Len(t, keys, 1, "alice's %s window", model)
		return redis.Int("GET", keys[0])
	}
	usage := `{"usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		for _, c := range []struct {
			name, sources, path, body, header, want string
		}{
			{"OpenAI chat body", "", "/v1/chat/completions", chatNaming("gpt-4o"), "", "gpt-4o"},
			{"Anthropic Messages body", "", "/v1/messages", `{"model": "claude-opus-4-20250514", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}`, "", "claude-opus-4-20250514"},
			{"Responses body", "", "/v1/responses", `{"model": "o3", "input": "Hi"}`, "", "o3"},
			{"the last of two model keys, as upstreams read it", "", "/v1/chat/completions", `{"model": "gpt-4o-mini", "model": "gpt-4o", "messages": []}`, "", "gpt-4o"},
			{"Gemini path", "", "/v1beta/models/gemini-2.5-pro:generateContent", `{"contents": [{"parts": [{"text": "Hi"}]}]}`, "", "gemini-2.5-pro"},
			{"a header first, as a model router sets it", `"model_source": ["header:x-higress-llm-model", "body", "path"],`, "/v1/chat/completions", chatNaming("gpt-4o-mini"), "gpt-4o", "gpt-4o"},
			{"the body when the header is absent", `"model_source": ["header:x-higress-llm-model", "body", "path"],`, "/v1/chat/completions", chatNaming("gpt-4o-mini"), "", "gpt-4o-mini"},
			{"the path before the body", `"model_source": ["path", "body"],`, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", chatNaming("gpt-4o"), "", "gemini-2.5-flash"},
			// Issue 35, point 1: a route that addresses a model decides it;
			// the body's word, which its upstream ignores, does not.
			{"a Gemini path over a cheaper model in the body", "", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", chatNaming("gemini-2.0-flash-lite"), "", "gemini-2.5-pro"},
			{"a Bedrock path over the body", "", "/model/amazon.titan-text-%65xpress-v1/converse", chatNaming("cheap"), "", "amazon.titan-text-express-v1"},
			{"an Azure deployment that deployments maps", `"deployments": {"prod-4o": "gpt-4o"},`, "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", chatNaming("gpt-4o-mini"), "", "gpt-4o"},
			{"a header first still decides", `"model_source": ["header:x-higress-llm-model", "body"],`, "/v1beta/models/gemini-2.5-pro:generateContent", chatNaming("gemini-2.0-flash-lite"), "gemini-2.5-flash", "gemini-2.5-flash"},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, modelBudgets(c.sources, 300000))
				headers := [][2]string{alice}
				if c.header != "" {
					headers = append(headers, [2]string{"x-higress-llm-model", c.header})
				}
				x := p.SendTo(c.path, headers...)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				x.Answer()
				require.True(t, x.Passed())
				x.Respond("application/json", usage)
				assert.Equal(t, int64(7), charged(c.want), "charged to the model %s", c.want)
				assert.Equal(t, int64(7), plugintest.Counter(redis, fmt.Sprintf(modelSubject, c.want), "t60", redis.Now()))
			})
		}

		// A route whose model cannot be told is of an unknown model, limited
		// as strictly as any: every per_model entry, every model key.
		for _, path := range []string{"/v1beta/tunedModels/t-1:generateContent", "/openai/deployments/x/chat/completions"} {
			t.Run("unknown model, whatever the body says: "+path, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, modelBudgets("", 300000))
				x := p.SendTo(path, alice)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(chatNaming("gpt-4o-mini")), true)
				x.Answer()
				require.True(t, x.Passed())
				x.Respond("application/json", usage)
				perModel := redis.Keys(aliceKey + ":m:*")
				require.Len(t, perModel, 3, "every per_model entry of alice's key")
				for _, k := range perModel {
					assert.Equal(t, int64(7), redis.Int("GET", k), k)
				}
				assert.Empty(t, redis.Keys("*gpt-4o-mini*"), "not the body's model")
			})
		}

		t.Run("no model anywhere: the consumer's budget only", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, modelBudgets("", 300000))
			x := p.SendTo("/v1/embeddings", alice)
			x.Action = p.Host.CallOnRequestBody(x.ID, []byte(`{"input": "Hi"}`), true)
			x.Answer()
			require.True(t, x.Passed())
			x.Respond("application/json", usage)
			assert.Equal(t, int64(7), plugintest.Counter(redis, aliceKey, "t86400", redis.Now()))
			assert.Empty(t, redis.Keys("*:m:*"), "no per-model counter")
			assert.Empty(t, redis.Keys("*limit_by_per_model*"), "no model counter")
		})

		t.Run("no rule applies: the request goes on untouched", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "llm", "rule_items": [{"limit_by_model": "", "limit_keys": [{"key": "claude-opus-4*", "token_per_day": 100}]}], `+plugintest.RedisSection+`}`)
			x := p.SendTo("/v1/chat/completions")
			x.Action = p.Host.CallOnRequestBody(x.ID, []byte(streamBody), true)
			assert.True(t, x.Passed(), "no Redis call")
			sent, _ := upstreamSees(x)
			assert.Equal(t, streamBody, sent, "not rewritten")
			assert.Empty(t, redis.Keys("*"))
		})
	})
}

// A Gemini path's model is read percent-decoded, as the upstream reads it
// (%3A for the colon, an encoded letter or hyphen), and priced by its
// weights. Issue 14, point 6: "(6, model part) … (b) a Gemini path with
// %3A (`/v1beta/models/gemini-2.5-pro%3AgenerateContent`) or other
// percent-encoding — estimate.ModelFromPath must decode the path segment
// the way the upstream does".
func TestHardening6PercentEncodedGeminiPath(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	const body = `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for path, want := range map[string]int64{
			"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse":     750,
			"/v1beta/models/gemini-2.5-pro%3AstreamGenerateContent?alt=sse":   750,
			"/v1beta/models/gemini-2.5-pro%3astreamGenerateContent?alt=sse":   750,
			"/v1beta/%6Dodels/gemini%2D2.5-pro:streamGenerateContent?alt=sse": 750,
			"/v1beta/models/gemini-2.5-flash%3AstreamGenerateContent?alt=sse": 110,
		} {
			t.Run(path, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(
					`"token_count_strategy": "weighted", "token_weights": {"models": {"gemini-2.5-pro": {"input": 5, "output": 25}}},`,
					`"token_per_day": 1000000`))
				x := sendBodyTo(p, path, body, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.GeminiStream(100, 10))...)
				assert.Equal(t, want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}

// A per-model cap across consumers holds with 32 requests from 8 consumers
// in flight: with reservation, the tokens admitted never exceed it.
func TestModelCapAcrossConsumersUnderConcurrency(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "llm", "rule_match_mode": "all", `+plugintest.ReservationOn+`
			"rule_items": [
				{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 1000000,
					"per_model": [{"model": "*", "token_per_minute": 50000}]}]},
				{"limit_by_per_model": "", "limit_keys": [{"key": "regexp:^gpt-4o$", "token_per_minute": 10000}]}],
			`+plugintest.RedisSection+`}`)
		// gpt-4o, 1,000 reserved: the prompt with its chat format (the route
		// reads the model from the body: it is estimated as any other) and
		// the cap.
		body := plugintest.ChatBody(1000 - plugintest.ChatBodyPrompt)
		var xs []*plugintest.Exchange
		for i := 0; i < 32; i++ {
			xs = append(xs, p.SendBody(body, [2]string{"x-mse-consumer", fmt.Sprintf("c%d", i%8)}))
		}
		p.AnswerAll(xs)
		admitted := 0
		for _, x := range xs {
			if x.Passed() {
				admitted++
			}
		}
		assert.Equal(t, 10, admitted, "10 reservations of 1,000 fill the 10,000 cap")
		assert.Equal(t, int64(10*1000), plugintest.Counter(redis, fmt.Sprintf(modelSubject, "gpt-4o"), "t60", redis.Now()))
	})
}
