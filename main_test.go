package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

const redisSection = `"redis": {"service_name": "redis.static", "timeout": 1000}`

// apiKeyConfig limits the x-api-key header value sk-1 to a daily budget.
func apiKeyConfig(extra string, limits string) string {
	return `{"rule_name": "chat", ` + extra + `
		"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", ` + limits + `}]}],
		` + redisSection + `}`
}

const apiKeySubject = "atrl:{chat|limit_by_header|x-api-key|sk-1}"

func TestAdmitsChargesAndRejectsOnRealRedis(t *testing.T) {
	redis := redistest.Start(t)
	test.RunTest(t, func(t *testing.T) {
		redis.Do("FLUSHALL")
		redis.AvoidWindowEdge(86400, 10)
		p := startPlugin(t, redis, apiKeyConfig("", `"token_per_day": 1000`))
		key := [2]string{"x-api-key", "sk-1"}

		first := p.send(key)
		assert.Equal(t, types.HeaderStopAllIterationAndWatermark, first.action, "paused until Redis answers")
		assert.False(t, first.passed())
		first.answer()
		require.True(t, first.passed(), "budget left: resumed")
		first.respond("text/event-stream", sseEvents(openAIStream(20, 400, 200))...)
		assert.Equal(t, int64(600), p.dayCounter(apiKeySubject))

		p.request(key).respond("text/event-stream", sseEvents(openAIStream(5, 300, 300))...)
		assert.Equal(t, int64(1200), p.dayCounter(apiKeySubject), "charged past the limit, not stopped at it")

		third := p.request(key)
		local := third.requireRejected(429)
		assert.Equal(t, "Too many requests", string(local.Data))
		reset, err := strconv.Atoi(header(local.Headers, "X-TokenRateLimit-Reset"))
		require.NoError(t, err)
		assert.True(t, reset > 0 && reset <= 86400, "reset %d", reset)
		assert.Equal(t, strconv.Itoa(reset), header(local.Headers, "Retry-After"))
		third.done()
		assert.Equal(t, int64(1200), p.dayCounter(apiKeySubject), "a rejected request costs nothing")

		rejections, err := p.host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer.none.metric.token_ratelimit_count")
		require.NoError(t, err)
		assert.Equal(t, uint64(1), rejections)

		_, err = p.host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer.none.metric.token_ratelimit_charge_failure_count")
		assert.Error(t, err, "no charge failed")

		other := p.request([2]string{"x-api-key", "sk-2"})
		assert.True(t, other.passed(), "another key is not limited")
		assert.Empty(t, p.host.GetRedisCalloutAttributesFromContext(other.id))
	})
}

// anthropicStream is an Anthropic Messages stream: input and cache tokens in
// message_start, cumulative output tokens in message_delta.
func anthropicStream(input, cacheCreation, cacheRead, output int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":%d,\"cache_creation_input_tokens\":%d,\"cache_read_input_tokens\":%d,\"output_tokens\":1}}}\n\n", input, cacheCreation, cacheRead)
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"part %d \"}}\n\n", i)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	fmt.Fprintf(&b, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":%d}}\n\n", output)
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}

// geminiStream is a Gemini streamGenerateContent?alt=sse stream whose
// usageMetadata is cumulative: the last one counts.
func geminiStream(prompt, candidates int) string {
	var b strings.Builder
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"chunk %d\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":%d,\"candidatesTokenCount\":%d,\"totalTokenCount\":%d},\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n", i, prompt, candidates*i/5, prompt+candidates*i/5)
	}
	return b.String()
}

// responsesStream is an OpenAI Responses API stream ending in response.completed.
func responsesStream(input, output int) string {
	var b strings.Builder
	b.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"tok%d \"}\n\n", i)
	}
	fmt.Fprintf(&b, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"tok0 tok1\"}]}],\"usage\":{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":%d,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":%d}}}\n\n", input, output, input+output)
	return b.String()
}

// cutAt cuts a body into chunks at the given offsets.
func cutAt(body string, offsets ...int) []string {
	var chunks []string
	prev := 0
	for _, o := range offsets {
		chunks = append(chunks, body[prev:o])
		prev = o
	}
	return append(chunks, body[prev:])
}

// bytewise cuts a body into one-byte chunks.
func bytewise(body string) []string {
	chunks := make([]string, len(body))
	for i := range body {
		chunks[i] = body[i : i+1]
	}
	return chunks
}

func TestUsageIsChargedExactlyHoweverTheBodyIsCut(t *testing.T) {
	redis := redistest.Start(t)
	openAI := openAIStream(50, 1234, 567)
	usageAt := strings.Index(openAI, `"prompt_tokens"`)
	anthropic := anthropicStream(100, 2000, 3000, 45)
	gemini := geminiStream(700, 300)
	responses := responsesStream(321, 123)
	whole := `{"id":"chatcmpl-2","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"a \"usage\": {\"prompt_tokens\": 999999} b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":11,"total_tokens":42}}`
	cases := []struct {
		name        string
		contentType string
		chunks      []string
		want        int64
	}{
		{"openai stream, one chunk per event", "text/event-stream", sseEvents(openAI), 1801},
		{"openai stream, cut inside the usage JSON", "text/event-stream", cutAt(openAI, usageAt+5, usageAt+17), 1801},
		{"openai stream, cut inside the data: prefix and the key", "text/event-stream", cutAt(openAI, usageAt-150, usageAt-148, usageAt+3), 1801},
		{"openai stream, one byte per chunk", "text/event-stream", bytewise(openAI), 1801},
		{"anthropic stream with cache tokens, cut everywhere", "text/event-stream", bytewise(anthropic), 100 + 2000 + 3000 + 45},
		{"gemini stream, cumulative usage, CRLF", "text/event-stream", cutAt(gemini, len(gemini)/3, len(gemini)/2), 1000},
		{"openai responses stream", "text/event-stream", cutAt(responses, len(responses)-40), 444},
		{"whole JSON body in three chunks, usage quoted in the content", "application/json", cutAt(whole, 60, len(whole)-20), 42},
	}
	test.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				redis.Do("FLUSHALL")
				p := startPlugin(t, redis, apiKeyConfig("", `"token_per_day": 100000`))
				x := p.request([2]string{"x-api-key", "sk-1"})
				require.True(t, x.passed())
				x.respond(c.contentType, c.chunks...)
				assert.Equal(t, c.want, p.dayCounter(apiKeySubject))
			})
		}
	})
}

func TestAllWindowsOfAKeyAreEnforcedInOneCall(t *testing.T) {
	redis := redistest.Start(t)
	test.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		key := [2]string{"x-api-key", "sk-1"}

		t.Run("the minute runs out first", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, apiKeyConfig("", `"token_per_minute": 1000, "token_per_day": 100000`))
			x := p.request(key)
			require.True(t, x.passed())
			x.respond("text/event-stream", sseEvents(openAIStream(3, 700, 300))...)
			local := p.request(key).requireRejected(429)
			reset, _ := strconv.Atoi(header(local.Headers, "Retry-After"))
			assert.True(t, reset >= 1 && reset <= 60, "the minute decides: retry within a minute, got %d", reset)
		})

		t.Run("the day runs out while the minute is open", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, apiKeyConfig("", `"token_per_minute": 100000, "token_per_day": 1000`))
			x := p.request(key)
			require.True(t, x.passed())
			x.respond("text/event-stream", sseEvents(openAIStream(3, 700, 300))...)
			local := p.request(key).requireRejected(429)
			reset, _ := strconv.Atoi(header(local.Headers, "Retry-After"))
			want := 86400 - redis.Now()%86400
			assert.InDelta(t, want, reset, 2, "the day decides: retry at the end of the day")
		})

		t.Run("one Redis call per phase whatever the number of windows", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, apiKeyConfig("", `"token_per_second": 100000, "token_per_minute": 100000, "token_per_hour": 100000, "token_per_day": 100000`))
			x := p.send(key)
			require.Len(t, p.host.GetRedisCalloutAttributesFromContext(x.id), 1)
			x.answer() // NOSCRIPT, then EVAL: the script is loaded from now on
			x.respond("text/event-stream", sseEvents(openAIStream(1, 5, 5))...)
			y := p.send(key)
			assert.Equal(t, 1, redis.Answer(p.host, y.id), "one admission call")
			y.responseHeaders("text/event-stream")
			p.host.CallOnResponseBody(y.id, []byte(openAIStream(1, 5, 5)), true)
			assert.Equal(t, 1, redis.Answer(p.host, y.id), "one charge call")
			p.host.CompleteHttpContext(y.id)
			assert.Empty(t, p.host.GetRedisCalloutAttributesFromContext(y.id), "charged once")
			assert.Len(t, redis.Keys(apiKeySubject+":t*"), 4, "every window was charged")
		})
	})
}

func TestQuotaHeaders(t *testing.T) {
	redis := redistest.Start(t)
	test.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		key := [2]string{"x-api-key", "sk-1"}

		t.Run("on every admitted response, for the tightest window", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, apiKeyConfig(`"show_limit_quota_header": true,`, `"token_per_minute": 1000, "token_per_day": 1500`))
			p.request(key).respond("text/event-stream", sseEvents(openAIStream(2, 200, 100))...)
			x := p.request(key)
			headers := x.responseHeaders("text/event-stream")
			// minute: 700 left of 1,000; day: 1,200 left of 1,500: the minute is tighter.
			assert.Equal(t, "1000", header(headers, "X-TokenRateLimit-Limit"))
			assert.Equal(t, "700", header(headers, "X-TokenRateLimit-Remaining"))
			reset, _ := strconv.Atoi(header(headers, "X-TokenRateLimit-Reset"))
			assert.True(t, reset >= 1 && reset <= 60, "reset %d", reset)
			x.done()
		})

		t.Run("on rejections", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, apiKeyConfig(`"show_limit_quota_header": true, "rejected_code": 403, "rejected_msg": "{\"error\":\"quota\"}",`, `"token_per_day": 100`))
			p.request(key).respond("text/event-stream", sseEvents(openAIStream(2, 200, 100))...)
			local := p.request(key).requireRejected(403)
			assert.Equal(t, `{"error":"quota"}`, string(local.Data))
			assert.Equal(t, "100", header(local.Headers, "X-TokenRateLimit-Limit"))
			assert.Equal(t, "0", header(local.Headers, "X-TokenRateLimit-Remaining"))
			assert.NotEmpty(t, header(local.Headers, "X-TokenRateLimit-Reset"))
		})

		t.Run("off by default, except Reset and Retry-After on rejections", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, apiKeyConfig("", `"token_per_day": 100`))
			x := p.request(key)
			headers := x.responseHeaders("text/event-stream")
			assert.False(t, test.HasHeader(headers, "X-TokenRateLimit-Limit"))
			assert.False(t, test.HasHeader(headers, "X-TokenRateLimit-Remaining"))
			x.p.host.CallOnResponseBody(x.id, []byte(openAIStream(2, 200, 100)), true)
			x.done()
			local := p.request(key).requireRejected(429)
			assert.False(t, test.HasHeader(local.Headers, "X-TokenRateLimit-Limit"))
			assert.NotEmpty(t, header(local.Headers, "X-TokenRateLimit-Reset"))
			assert.NotEmpty(t, header(local.Headers, "Retry-After"))
		})
	})
}

func TestRedisTroubleAppliesTheFailureModeAndNeverLeavesARequestPaused(t *testing.T) {
	redis := redistest.Start(t)
	failures := []struct {
		name   string
		status int32
		reply  string
	}{
		{"unreachable or timed out", 1, ""},
		{"error reply", 0, "-ERR Error running script: out of memory\r\n"},
		{"garbage", 0, "this is not RESP at all"},
		{"wrong shape", 0, "*2\r\n:1\r\n:5\r\n"},
		{"empty", 0, ""},
	}
	test.RunTest(t, func(t *testing.T) {
		for _, mode := range []string{"allow", "deny"} {
			for _, f := range failures {
				t.Run(mode+"/"+f.name, func(t *testing.T) {
					p := startPlugin(t, redis, apiKeyConfig(`"failure_mode": "`+mode+`",`, `"token_per_day": 1000`))
					x := p.send([2]string{"x-api-key", "sk-1"})
					calls := p.host.GetRedisCalloutAttributesFromContext(x.id)
					require.Len(t, calls, 1)
					p.host.CallOnRedisCallResponse(calls[0].CalloutID, f.status, []byte(f.reply))
					if mode == "allow" {
						assert.True(t, x.passed(), "allowed through")
						x.respond("text/event-stream", sseEvents(openAIStream(1, 5, 5))...)
					} else {
						local := x.requireRejected(503)
						assert.Contains(t, string(local.Data), "failure_mode is deny")
						x.done()
					}
					assert.Empty(t, p.host.GetRedisCalloutAttributesFromContext(x.id), "no call left behind")
					failures, err := p.host.GetCounterMetric("route.test-route-default.upstream.test-cluster-default.model.none.consumer.none.metric.token_ratelimit_redis_failure_count")
					require.NoError(t, err)
					assert.Equal(t, uint64(1), failures)
				})
			}
		}

		t.Run("scripts flushed: reloaded once, then by digest again", func(t *testing.T) {
			redis.Do("FLUSHALL")
			redis.AvoidWindowEdge(86400, 10)
			p := startPlugin(t, redis, apiKeyConfig("", `"token_per_day": 1000`))
			key := [2]string{"x-api-key", "sk-1"}
			p.request(key).respond("text/event-stream", sseEvents(openAIStream(1, 100, 0))...)
			redis.Do("SCRIPT", "FLUSH")
			x := p.send(key)
			assert.Equal(t, 2, redis.Answer(p.host, x.id), "NOSCRIPT, then EVAL")
			require.True(t, x.passed())
			x.respond("text/event-stream", sseEvents(openAIStream(1, 100, 0))...)
			y := p.send(key)
			assert.Equal(t, 1, redis.Answer(p.host, y.id))
			y.respond("text/event-stream", sseEvents(openAIStream(1, 100, 0))...)
			assert.Equal(t, int64(300), p.dayCounter(apiKeySubject), "nothing lost, nothing charged twice")
		})

		t.Run("scripts flushed: charges sent as the stream ends are not lost", func(t *testing.T) {
			// Envoy ends the stream before Redis answers the charge, and the
			// reply to a call of a finished stream is dropped: a charge answered
			// NOSCRIPT could never be retried. The admission loads the script.
			redis.Do("FLUSHALL")
			redis.Do("SCRIPT", "FLUSH")
			redis.AvoidWindowEdge(86400, 10)
			p := startPlugin(t, redis, apiKeyConfig("", `"token_per_day": 100000`))
			for i := 1; i <= 3; i++ {
				x := p.request([2]string{"x-api-key", "sk-1"})
				require.True(t, x.passed())
				x.responseHeaders("text/event-stream")
				p.host.CallOnResponseBody(x.id, []byte(openAIStream(2, 30, 20)), true) // the charge leaves
				p.host.CompleteHttpContext(x.id)                                       // the stream is over
				x.answer()                                                             // Redis answers now
				assert.Equal(t, int64(50*i), p.dayCounter(apiKeySubject), "request %d", i)
			}
		})

		t.Run("Redis stopped, then back: no plugin restart needed", func(t *testing.T) {
			p := startPlugin(t, redis, apiKeyConfig(`"failure_mode": "deny",`, `"token_per_day": 1000`))
			key := [2]string{"x-api-key", "sk-1"}
			redis.Stop()
			p.request(key).requireRejected(503)
			redis.Restart()
			x := p.request(key)
			require.True(t, x.passed(), "the fresh Redis has no scripts and no counters: reloaded, admitted")
			x.respond("text/event-stream", sseEvents(openAIStream(1, 10, 0))...)
			assert.Equal(t, int64(10), p.dayCounter(apiKeySubject))
		})
	})
}

func TestPerIPLimits(t *testing.T) {
	redis := redistest.Start(t)
	perIP := func(extra, source string) string {
		return `{"rule_name": "ip", ` + extra + `"rule_items": [{"limit_by_per_ip": "` + source + `",
			"limit_keys": [{"key": "0.0.0.0/0", "token_per_day": 100}, {"key": "::/0", "token_per_day": 100}]}], ` + redisSection + `}`
	}
	spend := func(p *plugin, xff string) *exchange {
		x := p.request([2]string{"x-forwarded-for", xff})
		if x.passed() {
			x.respond("text/event-stream", sseEvents(openAIStream(1, 100, 0))...)
		}
		return x
	}
	test.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("spoofed left-most entries do not escape with xff_num_trusted_hops", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, perIP(`"xff_num_trusted_hops": 1,`, "from-header-x-forwarded-for"))
			// client 203.0.113.7 → trusted load balancer 10.0.0.1 → gateway
			require.True(t, spend(p, "198.51.100.1, 203.0.113.7, 10.0.0.1").passed())
			for _, spoof := range []string{"198.51.100.2", "1.1.1.1, 2.2.2.2", "::1"} {
				x := spend(p, spoof+", 203.0.113.7, 10.0.0.1")
				x.requireRejected(429)
			}
			assert.Equal(t, int64(100), p.dayCounter("atrl:{ip|limit_by_per_ip|x-forwarded-for|203.0.113.7}"))
			assert.True(t, spend(p, "198.51.100.1, 203.0.113.8, 10.0.0.1").passed(), "another client has its own budget")
		})

		t.Run("without it the left-most entry counts, as in Higress", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, perIP("", "from-header-x-forwarded-for"))
			require.True(t, spend(p, "198.51.100.1, 203.0.113.7").passed())
			spend(p, "198.51.100.1, 203.0.113.7").requireRejected(429)
			assert.True(t, spend(p, "198.51.100.2, 203.0.113.7").passed(), "a spoofed entry gets a fresh budget: why the option matters")
		})

		t.Run("from the connection's address, v4 and v6", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := startPlugin(t, redis, perIP("", "from-remote-addr"))
			for _, peer := range []string{"192.0.2.10:51000", "[2001:db8::5]:443"} {
				require.NoError(t, p.host.SetProperty([]string{"source", "address"}, []byte(peer)))
				require.True(t, spend(p, "6.6.6.6").passed(), peer)
				spend(p, "7.7.7.7").requireRejected(429)
			}
			assert.Equal(t, int64(100), p.dayCounter("atrl:{ip|limit_by_per_ip||2001:db8::5}"))
		})
	})
}

func TestRequestsNoRuleMatchesAreNotTouched(t *testing.T) {
	redis := redistest.Start(t)
	test.RunTest(t, func(t *testing.T) {
		p := startPlugin(t, redis, apiKeyConfig("", `"token_per_day": 1`))
		x := p.send([2]string{"x-api-key", "sk-other"}, [2]string{"accept-encoding", "gzip"})
		assert.Equal(t, types.ActionContinue, x.action)
		assert.Empty(t, p.host.GetRedisCalloutAttributesFromContext(x.id))
		assert.Equal(t, "gzip", header(p.host.GetCurrentRequestHeaders(x.id), "accept-encoding"), "left as it was")
		x.respond("application/json", `{"usage":{"prompt_tokens":5,"completion_tokens":5}}`)
		assert.Empty(t, redis.Keys("*"))

		limited := p.send([2]string{"x-api-key", "sk-1"}, [2]string{"accept-encoding", "gzip"})
		assert.False(t, test.HasHeader(p.host.GetCurrentRequestHeaders(limited.id), "accept-encoding"),
			"a limited request asks for an uncompressed answer, whose usage can be read")
		limited.answer().done()
	})
}

func TestGlobalThreshold(t *testing.T) {
	redis := redistest.Start(t)
	test.RunTest(t, func(t *testing.T) {
		redis.Do("FLUSHALL")
		redis.AvoidWindowEdge(86400, 10)
		p := startPlugin(t, redis, `{"rule_name": "all", "global_threshold": {"token_per_day": 50}, `+redisSection+`}`)
		require.True(t, p.request().passed())
		p.request([2]string{"x-api-key", "anything"}).respond("application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":20}}`)
		p.request().requireRejected(429)
		assert.Equal(t, int64(60), p.dayCounter("atrl:{all|global_threshold||}"))
		assert.Contains(t, strings.Join(p.host.GetDebugLogs(), "\n"), `rule all: global_threshold matched limit key "*" (1 windows)`,
			"at debug level the plugin says what matched")
	})
}

func TestInvalidConfigurationsRefuseToStart(t *testing.T) {
	test.RunTest(t, func(t *testing.T) {
		for _, config := range []string{
			`{"rule_name": "x", ` + redisSection + `}`,
			`{"rule_name": "x", "global_threshold": {"token_per_minute": 0}, ` + redisSection + `}`,
			`{"rule_name": "x", "global_threshold": {"token_per_minute": 10}}`,
			`{"rule_name": "x", "global_threshold": {"token_per_minute": 10}, "failure_mode": "maybe", ` + redisSection + `}`,
		} {
			host, status := test.NewTestHost([]byte(config))
			assert.Equal(t, types.OnPluginStartStatusFailed, status, config)
			host.Reset()
		}
	})
}
