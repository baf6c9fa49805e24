package limiter_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// fallbackBudgets gives each consumer a day's budget and, within it, a
// minute on each model; a spent gpt-4o (or gemini-2.5-pro) minute is served
// by the cheaper model of the same provider.
func fallbackBudgets(extra string) string {
	return `{"rule_name": "llm", ` + extra + `
		"model_fallbacks": {"gpt-4o": ["gpt-4o-mini"], "gemini-2.5-pro": ["gemini-2.5-flash"]},
		"rule_items": [{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 1000, "per_model": [
			{"model": "gpt-4o", "token_per_minute": 100},
			{"model": "gpt-4o-mini", "token_per_minute": 60},
			{"model": "gemini-2.5-pro", "token_per_minute": 100},
			{"model": "gemini-2.5-flash", "token_per_minute": 60}]}]}],
		` + plugintest.RedisSection + `}`
}

// spendMinute uses up a consumer's minute on a model (100 tokens, its
// per_model limit in fallbackBudgets).
func spendMinute(redis *redistest.Server, consumerKey, model string) {
	redis.Do("SET", plugintest.Bucket(consumerKey+":m:"+model, "t60", redis.Now()), "100")
}

// respondWith plays an OpenAI stream that reports the usage, and returns
// the headers the client got.
func respondWith(t *testing.T, x *plugintest.Exchange, prompt, completion int) [][2]string {
	t.Helper()
	require.True(t, x.Passed(), "the request was not forwarded")
	headers := x.ResponseHeaders("text/event-stream")
	x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, prompt, completion))...)
	return headers
}

// A consumer's gpt-4o minute used up: its next gpt-4o request goes upstream
// naming gpt-4o-mini and is charged to it, until that minute is used up
// too; another consumer is still served gpt-4o.
func TestFallbackServesTheNextModelWithRoom(t *testing.T) {
	redis := redistest.Start(t)
	alice, bob := [2]string{"x-mse-consumer", "alice"}, [2]string{"x-mse-consumer", "bob"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, fallbackBudgets(""))

		x := p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		headers := respondWith(t, x, 40, 60)
		assert.Empty(t, plugintest.Header(headers, "X-TokenRateLimit-Fallback"), "served as asked")

		x = p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		require.True(t, x.Passed())
		body, _ := upstreamSees(x)
		assert.Equal(t, chatNaming("gpt-4o-mini"), body, "the body names the model served, every other byte as sent")
		headers = respondWith(t, x, 20, 30)
		assert.Equal(t, "gpt-4o-mini", plugintest.Header(headers, "X-TokenRateLimit-Fallback"))
		assert.Equal(t, int64(100), p.MinuteCounter(aliceKey+":m:gpt-4o"), "gpt-4o's minute untouched")
		assert.Equal(t, int64(50), p.MinuteCounter(aliceKey+":m:gpt-4o-mini"), "charged to the model served")
		assert.Equal(t, int64(150), p.DayCounter(aliceKey), "and to the consumer's day, once")

		respondWith(t, p.SendBody(chatNaming("gpt-4o"), alice).Answer(), 5, 5)
		assert.Equal(t, int64(60), p.MinuteCounter(aliceKey+":m:gpt-4o-mini"))
		local := p.SendBody(chatNaming("gpt-4o"), alice).Answer().RequireRejected(429)
		assert.NotEmpty(t, plugintest.Header(local.Headers, "Retry-After"), "both used up: rejected")
		p.SendBody(chatNaming("gpt-4o-mini"), alice).Answer().RequireRejected(429)

		fellBack, err := p.Host.GetCounterMetric(consumerMetric("gpt-4o", "token_ratelimit_fallback_count"))
		require.NoError(t, err)
		assert.Equal(t, uint64(2), fellBack, "counted under the model asked for")

		x = p.SendBody(chatNaming("gpt-4o"), bob).Answer()
		body, _ = upstreamSees(x)
		assert.Equal(t, chatNaming("gpt-4o"), body, "another consumer still has gpt-4o")
		headers = respondWith(t, x, 1, 1)
		assert.Empty(t, plugintest.Header(headers, "X-TokenRateLimit-Fallback"))
	})
}

// The model in a Gemini path, or in a header model_source reads, is
// rewritten too: the upstream is told the model served wherever it reads it.
func TestFallbackRewritesThePathAndTheModelHeader(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	gemini := `{"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, fallbackBudgets(`"model_source": ["header:x-higress-llm-model", "body", "path"], "stream_usage": "off",`))
		spendMinute(redis, aliceKey, "gemini-2.5-pro")
		spendMinute(redis, aliceKey, "gpt-4o")

		x := p.Call("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", gemini, alice).Answer()
		require.True(t, x.Passed())
		body, forwarded := upstreamSees(x)
		assert.Equal(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", plugintest.Header(forwarded, ":path"))
		assert.Equal(t, gemini, body, "a Gemini body names no model: unchanged")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.GeminiStream(10, 20))...)
		assert.Equal(t, int64(30), p.MinuteCounter(aliceKey+":m:gemini-2.5-flash"))

		sent := [2]string{"content-length", fmt.Sprint(len(chatNaming("gpt-4o")))}
		x = p.SendBody(chatNaming("gpt-4o"), alice, [2]string{"x-higress-llm-model", "gpt-4o"}, sent).Answer()
		require.True(t, x.Passed())
		body, forwarded = upstreamSees(x)
		assert.Equal(t, "gpt-4o-mini", plugintest.Header(forwarded, "x-higress-llm-model"), "the header ai-proxy routes by")
		assert.Equal(t, chatNaming("gpt-4o-mini"), body)
		assert.Equal(t, fmt.Sprint(len(body)), plugintest.Header(forwarded, "content-length"), "the body's new length")
		respondWith(t, x, 3, 4)
		assert.Equal(t, int64(7), p.MinuteCounter(aliceKey+":m:gpt-4o-mini"))
	})
}

// Under a reservation, a money budget admits the cheaper candidate when the
// asked model's estimate no longer fits: each is priced as itself.
func TestFallbackFitsACheaperModelsReservation(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	config := `{"rule_name": "llm",
		"token_reservation": {"enabled": true, "default_completion_tokens": 1000},
		"pricing": {"gpt-4o": {"input": 2.5, "output": 10}, "gpt-4o-mini": {"input": 0.15, "output": 0.6}, "*": {"input": 5, "output": 20}},
		"model_fallbacks": {"gpt-4o": ["gpt-4o-mini"]},
		"rule_items": [{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "usd_per_day": 0.0105}]}],
		` + plugintest.RedisSection + `}`
	body := `{"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}`
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, config)
		usd := func() int64 {
			return plugintest.Counter(redis, aliceKey, "u86400", redis.Now())
		}
		x := p.SendBody(body, alice).Answer()
		require.True(t, x.Passed())
		got, _ := upstreamSees(x)
		assert.Contains(t, got, `"model": "gpt-4o"`, "1,000 output tokens at $10/M: $0.010 reserved fits $0.0105")
		respondWith(t, x, 10, 100) // $0.000025 + $0.001
		spent := usd()
		assert.Equal(t, int64(1_025_000), spent)

		x = p.SendBody(body, alice).Answer()
		require.True(t, x.Passed(), "gpt-4o's reservation does not fit what is left; gpt-4o-mini's does")
		got, _ = upstreamSees(x)
		assert.Contains(t, got, `"model": "gpt-4o-mini"`)
		headers := respondWith(t, x, 10, 100)
		assert.Equal(t, "gpt-4o-mini", plugintest.Header(headers, "X-TokenRateLimit-Fallback"))
		assert.Equal(t, spent+1_500+60_000, usd(), "charged at gpt-4o-mini's price")
	})
}

// A fallback's own closed limit rejects, and shadow_mode serves the model
// asked for, logging the fallback it would have made.
func TestFallbackShadowModeServesTheModelAsked(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, fallbackBudgets(`"shadow_mode": true,`))
		spendMinute(redis, aliceKey, "gpt-4o")
		x := p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		body, _ := upstreamSees(x)
		assert.Equal(t, chatNaming("gpt-4o"), body, "shadow_mode rewrites nothing")
		headers := respondWith(t, x, 5, 5)
		assert.Empty(t, plugintest.Header(headers, "X-TokenRateLimit-Fallback"))
		assert.Equal(t, int64(110), p.MinuteCounter(aliceKey+":m:gpt-4o"), "charged as asked")
		assert.Equal(t, int64(0), p.MinuteCounter(aliceKey+":m:gpt-4o-mini"))
		wouldHave, err := p.Host.GetCounterMetric(consumerMetric("gpt-4o", "token_ratelimit_shadow_fallback_count"))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), wouldHave)
		_, err = p.Host.GetCounterMetric(consumerMetric("gpt-4o", "token_ratelimit_shadow_reject_count"))
		assert.Error(t, err, "a fallback would have served it: not a would-be rejection")
	})
}

// consumerMetric is a counter of a request from a consumer the
// configuration does not name.
func consumerMetric(model, metric string) string {
	return "route.test-route-default.upstream.test-cluster-default.model." + model + ".consumer.other.metric." + metric
}

// A stream that ends before Redis answers the admission that served it as
// the fallback: the fallback's reservation is given back from the tick.
func TestFallbackCancelledWithItsStreamGivesBackTheFallbacks(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedisWithScript(t, redis, fallbackBudgets(plugintest.ReservationOn))
		spendMinute(redis, aliceKey, "gpt-4o")
		x := p.SendBody(chatNaming("gpt-4o"), alice)
		p.Host.CompleteHttpContext(x.ID) // the client resets
		x.Answer()                       // Redis serves the fallback; the answer is dropped
		reserved := p.MinuteCounter(aliceKey + ":m:gpt-4o-mini")
		require.Positive(t, reserved, "reserved as the fallback")
		require.Equal(t, reserved, p.DayCounter(aliceKey))
		p.SendPostponed()
		assert.Equal(t, []int64{0, 0, 100}, []int64{p.MinuteCounter(aliceKey + ":m:gpt-4o-mini"), p.DayCounter(aliceKey),
			p.MinuteCounter(aliceKey + ":m:gpt-4o")}, "the fallback's reservation given back, nothing else touched")
	})
}

// With failure_mode local, a request decided without Redis is limited as
// it asked: no fallback, nothing rewritten.
func TestFallbackDecidedLocallyServesTheModelAsked(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, fallbackBudgets(`"failure_mode": "local", "local_share": 1,`))
		redis.Stop()
		t.Cleanup(redis.Restart)
		x := p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		require.True(t, x.Passed())
		body, _ := upstreamSees(x)
		assert.Equal(t, chatNaming("gpt-4o"), body)
		headers := respondWith(t, x, 60, 50)
		assert.Empty(t, plugintest.Header(headers, "X-TokenRateLimit-Fallback"))
		p.SendBody(chatNaming("gpt-4o"), alice).Answer().RequireRejected(429) // gpt-4o's 100 local tokens spent
	})
}

// A stream served as the fallback is still asked for its usage (stream_usage:
// inject), and charged from it.
func TestFallbackStreamIsStillAskedForItsUsage(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	aliceKey := fmt.Sprintf(consumerSubject, "alice")
	streaming := `{"model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "Hi"}]}`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, fallbackBudgets(""))
		spendMinute(redis, aliceKey, "gpt-4o")
		x := p.SendBody(streaming, alice).Answer()
		require.True(t, x.Passed())
		body, _ := upstreamSees(x)
		assert.Contains(t, body, `"model": "gpt-4o-mini"`)
		assert.Contains(t, body, `"include_usage":true`, "asked for its usage")
		x.ResponseHeaders("text/event-stream")
		events := plugintest.SSEEvents(plugintest.OpenAIStream(2, 7, 8))
		for i, e := range events {
			p.Host.CallOnResponseBody(x.ID, []byte(e), i == len(events)-1)
			x.Answer()
		}
		x.Done()
		assert.Equal(t, int64(15), p.MinuteCounter(aliceKey+":m:gpt-4o-mini"), "charged from the usage it was asked for")
	})
}
