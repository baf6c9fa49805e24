package limiter_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	imagepng "image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// ChatBody(n) reserves n+plugintest.ChatBodyPrompt: "Hi" and a message in
// OpenAI's chat format.

func TestReservationKeepsConcurrentRequestsUnderTheLimit(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	// 32 requests opened before any completes, each declaring and using 1,000
	// tokens, against 10,000 per minute: how many tokens get through?
	admittedTokens := func(t *testing.T, p *plugintest.Plugin) (admitted int, tokens int64) {
		var open []*plugintest.Exchange
		for i := 0; i < 32; i++ {
			open = append(open, p.SendBody(plugintest.ChatBody(1000), key))
		}
		for _, x := range open {
			x.Answer()
		}
		for _, x := range open {
			if x.Passed() {
				admitted++
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(3, 1, 999))...)
			} else {
				x.RequireRejected(429)
				x.Done()
			}
		}
		return admitted, p.MinuteCounter(plugintest.APIKeySubject)
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 15)

		t.Run("reservation on: admitted tokens stay within the limit", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 10000`))
			admitted, tokens := admittedTokens(t, p)
			assert.Equal(t, 9, admitted, "9 × 1,001 reserved fits in 10,000; a 10th does not")
			assert.Equal(t, int64(9000), tokens, "reconciled to the 1,000 each really used")
			assert.LessOrEqual(t, tokens, int64(10000))
		})

		t.Run("reservation off: every request in flight gets through, as in Higress", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 10000`))
			admitted, tokens := admittedTokens(t, p)
			assert.Equal(t, 32, admitted)
			assert.Equal(t, int64(32000), tokens, "3.2× the limit")
		})
	})
}

func TestReservationStopsSequentialOvershoot(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	run := func(p *plugintest.Plugin) (admitted int) {
		for i := 0; i < 10; i++ {
			x := p.SendBody(plugintest.ChatBody(300), key).Answer()
			if x.Passed() {
				admitted++
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1, 299))...)
			} else {
				x.Done()
			}
		}
		return admitted
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 15)
		t.Run("reservation on", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 1000`))
			assert.Equal(t, 3, run(p))
			assert.Equal(t, int64(900), p.MinuteCounter(plugintest.APIKeySubject), "no overshoot")
		})
		t.Run("reservation off", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 1000`))
			assert.Equal(t, 4, run(p), "without reservation the 4th starts at 900 < 1,000")
			assert.Equal(t, int64(1200), p.MinuteCounter(plugintest.APIKeySubject))
		})
	})
}

func TestAbortedStreamsPayTheirEstimate(t *testing.T) {
	redis := redistest.Start(t)
	// abort admits a request, sends it one content event ("word 0 ") and
	// ends the stream before its usage event (the client leaves); it
	// reports whether the request was admitted.
	abort := func(p *plugintest.Plugin) bool {
		x := p.SendBody(plugintest.ChatBody(400), plugintest.APIKey).Answer()
		if !x.Passed() {
			x.Done()
			return false
		}
		x.ResponseHeaders("text/event-stream")
		p.Host.CallOnResponseBody(x.ID, []byte(plugintest.SSEEvents(plugintest.OpenAIStream(3, 1, 399))[0]), false)
		x.DoneAndTick()
		return true
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 15)
		t.Run("reservation on", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 1000`))
			admitted := 0
			for i := 0; i < 10; i++ {
				if abort(p) {
					admitted++
				}
			}
			reserved := int64(400 + plugintest.ChatBodyPrompt)
			assert.Equal(t, 2, admitted, "2 × 407 reserved; a third does not fit in 1,000")
			assert.Equal(t, 2*reserved, p.MinuteCounter(plugintest.APIKeySubject), "the counter keeps both estimates")

			// An Anthropic stream reports its input (and one output token) as it
			// starts: cut short after that, it still pays its estimate, not the
			// 101 tokens reported so far. Cut after more than the estimate, it
			// pays what it reported.
			redis.Do("FLUSHALL")
			for _, c := range []struct {
				input int
				want  int64
			}{{100, reserved}, {600, 601}} {
				x := p.SendBody(plugintest.ChatBody(400), plugintest.APIKey).Answer()
				require.True(t, x.Passed())
				x.ResponseHeaders("text/event-stream")
				started := plugintest.SSEEvents(plugintest.AnthropicStream(c.input, 0, 0, 300))[0]
				p.Host.CallOnResponseBody(x.ID, []byte(started), false)
				before := p.MinuteCounter(plugintest.APIKeySubject)
				x.DoneAndTick()
				assert.Equal(t, c.want, p.MinuteCounter(plugintest.APIKeySubject)-before+reserved, "input %d", c.input)
			}
		})

		t.Run("reservation off", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 1000`))
			admitted := 0
			for i := 0; i < 10; i++ {
				if abort(p) {
					admitted++
				}
			}
			assert.Equal(t, 10, admitted, "nothing holds them back")
			// Each pays the estimate of a response without usage: its
			// 133-byte body (34 tokens) and the 7 bytes of text it got (2).
			assert.Equal(t, int64(10*36), p.MinuteCounter(plugintest.APIKeySubject))
		})
	})
}

func TestReservationDetails(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)

		t.Run("remaining counts this request's reservation", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+`"show_limit_quota_header": true,`, `"token_per_minute": 10000`))
			x := p.SendBody(plugintest.ChatBody(1000), key).Answer()
			headers := x.ResponseHeaders("text/event-stream")
			assert.Equal(t, strconv.Itoa(10000-1000-plugintest.ChatBodyPrompt), plugintest.Header(headers, "X-TokenRateLimit-Remaining"))
			x.Done()
		})

		t.Run("a bodyless request reserves default_completion_tokens", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"token_reservation": {"enabled": true, "default_completion_tokens": 250},`, `"token_per_minute": 10000`))
			id := p.Host.InitializeHttpContext()
			action := p.Host.CallOnRequestHeaders(id, [][2]string{{":method", "GET"}, {":path", "/v1/models"}, {":authority", "x"}, key}, true)
			assert.Equal(t, types.HeaderStopAllIterationAndWatermark, action)
			redis.Answer(p.Host, id)
			assert.Equal(t, int64(250), p.MinuteCounter(plugintest.APIKeySubject))
			p.Host.CompleteHttpContext(id)
			redis.Answer(p.Host, id)
			assert.Equal(t, int64(250), p.MinuteCounter(plugintest.APIKeySubject), "no usage: the reservation stays")
		})

		t.Run("a body in a coding it does not read is reserved as the largest body read, not let through", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"token_reservation": {"enabled": true, "default_completion_tokens": 100, "max_body_bytes": 4000},`, `"token_per_minute": 10000`))
			x := p.Send(key, [2]string{"content-encoding", "br"}, [2]string{"content-length", "400"})
			assert.Equal(t, types.HeaderStopAllIterationAndWatermark, x.Action, "decided at the headers: the body will not be shown")
			x.Answer()
			require.True(t, x.Passed())
			assert.Equal(t, int64(1000+100), p.MinuteCounter(plugintest.APIKeySubject))
			x.Done()
		})

		t.Run("an upstream error without usage gives the reservation back", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 10000`))
			x := p.SendBody(plugintest.ChatBody(1000), key).Answer()
			require.True(t, x.Passed())
			assert.Equal(t, int64(1000+plugintest.ChatBodyPrompt), p.MinuteCounter(plugintest.APIKeySubject))
			p.Host.CallOnResponseHeaders(x.ID, [][2]string{{":status", "503"}, {"content-type", "application/json"}}, false)
			p.Host.CallOnResponseBody(x.ID, []byte(`{"error":{"message":"overloaded"}}`), true)
			x.Done()
			assert.Equal(t, int64(0), p.MinuteCounter(plugintest.APIKeySubject))
		})

		t.Run("a request whose estimate exceeds the whole limit is rejected", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 500`))
			p.SendBody(plugintest.ChatBody(4000), key).Answer().RequireRejected(429)
			assert.Empty(t, redis.Keys("*"), "nothing reserved")
		})
	})
}

// An output cap written as an integer-valued float (4096.0, 4.096e3) is
// read and reserved, not ignored for the default. Issue 14, point 2:
// "`max_tokens: 4096.0` (a float) is ignored and the default 1,024
// reserved instead. […] numeric caps given as integer-valued floats
// (4096.0, 4.096e3) are read".
func TestHardening2FloatOutputCap(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		for _, cap := range []string{"4096.0", "4.096e3", "4096E0", "409.55e1"} {
			t.Run(cap, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn+`"show_limit_quota_header": true,`, `"token_per_minute": 100000`))
				x := p.SendBody(`{"model":"gpt-4o","max_tokens":`+cap+`,"messages":[{"role":"user","content":"Hi"}]}`, key).Answer()
				require.True(t, x.Passed())
				headers := x.ResponseHeaders("text/event-stream")
				assert.Equal(t, strconv.Itoa(100000-4096-plugintest.ChatBodyPrompt), plugintest.Header(headers, "X-TokenRateLimit-Remaining"),
					"4,096 output tokens reserved, and the prompt with OpenAI's chat format")
				x.Done()
			})
		}
	})
}

// A stream that ends in a later window than it was admitted in: its
// reservation stays in the admission's window, and what it used beyond it
// goes to the window current at its end, where the next admission reads it
// (by Redis's own clock here; see TestHardening3… for minutes and sliding
// windows on a test clock).
func TestReconcileChargesTheExcessToTheWindowCurrentAtTheEnd(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_second": 1000000`))
		redis.AvoidWindowEdge(1, 1) // start just after a second begins
		admittedAt := redis.Now()
		x := p.SendBody(plugintest.ChatBody(1000), plugintest.APIKey).Answer()
		require.True(t, x.Passed())
		admission := fmt.Sprintf("%s:t1:%d", plugintest.APIKeySubject, admittedAt)
		// The second's counter lives about 2 s: on a loaded machine it
		// could expire before it is read. Kept, it still shows where the
		// charge lands.
		require.Equal(t, int64(1), redis.Int("PERSIST", admission))
		time.Sleep(1200 * time.Millisecond) // the stream ends in a later second
		require.Greater(t, redis.Now(), admittedAt)
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1, 1499))...)
		reserved := int64(1000 + plugintest.ChatBodyPrompt)
		assert.Equal(t, reserved, redis.Int("GET", admission), "the admission's second keeps the reservation")
		keys := redis.Keys(plugintest.APIKeySubject + ":t1:*")
		require.Len(t, keys, 2)
		later := keys[0]
		if later == admission {
			later = keys[1]
		}
		assert.Greater(t, later, admission, "a later second")
		assert.Equal(t, 1500-reserved, redis.Int("GET", later), "the second current at the end holds what was used beyond it")
	})
}

// Streams that outlive their minute, fixed or sliding, on a test clock:
// refunds go back to the admission's bucket; the usage beyond a
// reservation goes to the window current when it is charged, where the next
// admission reads it. Issue 14, point 3: "Usage past the reservation
// vanishes when a stream outlives its window. Today the reconcile charge
// goes to the admission's bucket […], so five streams that reserved 1,025
// each and used 30,100 each two minutes later put 150,500 into a bucket no
// one reads, and the current minute admits the next request."
func TestHardening3ExcessUsageLandsInTheCurrentWindow(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		for _, windowType := range []string{"fixed", "sliding"} {
			t.Run(windowType, func(t *testing.T) {
				minute := plugintest.AnHourAhead(redis, 60)
				p := plugintest.StartOnEmptyRedisAt(t, redis, minute+1, plugintest.APIKeyConfig(plugintest.ReservationOn+`"window_type": "`+windowType+`",`, `"token_per_minute": 100000`))

				// Six streams admitted in minute M, each reserving 1,031.
				var streams []*plugintest.Exchange
				for i := 0; i < 6; i++ {
					x := p.SendBody(plugintest.ChatBody(1024), key).Answer()
					require.True(t, x.Passed())
					streams = append(streams, x)
				}
				reserved := int64(1024 + plugintest.ChatBodyPrompt)
				require.Equal(t, 6*reserved, plugintest.Counter(redis, plugintest.APIKeySubject, "t60", int64(minute)))

				// They end in minute M+2: five used 30,100 each, one only 25.
				redis.SetClock(minute + 121)
				for _, x := range streams[:5] {
					x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 100, 30000))...)
				}
				streams[5].Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1, 24))...)

				assert.Equal(t, 5*(30100-reserved), plugintest.Counter(redis, plugintest.APIKeySubject, "t60", int64(minute+120)), "the current minute holds what went past the reservations")
				assert.Equal(t, 6*reserved-(reserved-25), plugintest.Counter(redis, plugintest.APIKeySubject, "t60", int64(minute)), "the admission's minute keeps the reservations, less the refund")
				assert.Zero(t, plugintest.Counter(redis, plugintest.APIKeySubject, "t60", int64(minute+60)))

				next := p.SendBody(plugintest.ChatBody(1024), key).Answer()
				next.RequireRejected(429)
				next.Done()
			})
		}
	})
}

// A reservation given back whole deletes its buckets rather than leaving
// them at 0 until they expire. Issue 14, point 8 (one part): "Buckets
// refunded to 0 stay until their TTL: when a charge brings a bucket to 0
// (or below, clamped), delete the key".
func TestHardening8BucketsRefundedToZeroAreDeleted(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 100000, "token_per_day": 1000000`))
		x := p.SendBody(plugintest.ChatBody(1024), key).Answer()
		require.True(t, x.Passed())
		require.Len(t, redis.Keys(plugintest.APIKeySubject+":t*"), 2, "a reservation in the minute and the day")

		// The upstream fails without usage: the reservation is given back.
		action := p.Host.CallOnResponseHeaders(x.ID, [][2]string{{":status", "500"}, {"content-type", "application/json"}}, false)
		require.Equal(t, types.ActionContinue, action)
		if p.Host.CallOnResponseBody(x.ID, []byte(`{"error":{"message":"boom"}}`), true) == types.ActionPause {
			x.Answer()
		}
		x.Done()
		assert.Empty(t, redis.Keys(plugintest.APIKeySubject+":t*"), "emptied buckets are deleted, not left at 0 until they expire")
	})
}

// Issue 40: a reservation counts what the request's API adds to its prompt:
// an Anthropic request with tools reserves Anthropic's tool-use system
// prompt (346 tokens for tool_choice auto on Claude 4), an OpenAI chat
// request its chat format (4 tokens a message, 3 for the reply). (Issue
// 55: and a Claude model's scale and frame, estimate/family.go.)
func TestReservationCountsWhatTheAPIAdds(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 100000`))
		tools := `[{"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
		body := `{"model":"claude-sonnet-4-5","max_tokens":100,"tools":` + tools + `,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
		x := p.SendTo("/v1/messages", key)
		x.Action = p.Host.CallOnRequestBody(x.ID, []byte(body), true)
		x.Answer()
		require.True(t, x.Passed())
		e := estimate.Request([]byte(body), estimate.DialectAnthropic, estimate.Options{})
		assert.Equal(t, e.PromptFor("claude-sonnet-4-5")+100, p.MinuteCounter(plugintest.APIKeySubject), "the text, the tool-use system prompt, the cap")
		assert.GreaterOrEqual(t, e.PromptFor("claude-sonnet-4-5"), plugintest.TextTokens(tools, "Weather in Paris?")+346, "at least o200k's count of the text, and the prompt")
		x.Done()
	})
}

// Issue 55: a reservation counts the prompt as the family of the model the
// request resolves to counts it, from the body's model or the route's: the
// same body reserves more for Claude with tools (its tool-use system
// prompt, its frame, its tokenizer's count) and for Llama with tools (its
// template, its tool instructions, the tools' indented JSON) than for an
// OpenAI model, which reads OpenAI's short rendering of the tools; and a
// Bedrock route's Claude counts a Converse toolConfig as Claude's tools.
func TestReservationCountsAsTheModelsFamily(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 1000000`))
		reserve := func(path string, key [2]string, body string) int64 {
			t.Helper()
			before := p.MinuteCounter(plugintest.APIKeySubject)
			x := p.SendTo(path, key)
			x.Action = p.Host.CallOnRequestBody(x.ID, []byte(body), true)
			x.Answer()
			require.True(t, x.Passed())
			reserved := p.MinuteCounter(plugintest.APIKeySubject) - before
			x.Done()              // no response: the reservation stays, not corrected
			return reserved - 100 // the cap each body names
		}
		key := plugintest.APIKey
		anthropicTools := `[{"name":"get_weather","description":"Get the current weather of a city.","input_schema":{"type":"object",` +
			`"properties":{"city":{"type":"string","description":"The city, e.g. Paris."}},"required":["city"]}}]`
		anthropic := func(model string) string {
			return `{"model":"` + model + `","max_tokens":100,"system":"Be brief.","tools":` + anthropicTools + `,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
		}
		claude := reserve("/v1/messages", key, anthropic("claude-sonnet-4-5"))
		e := estimate.Request([]byte(anthropic("claude-sonnet-4-5")), estimate.DialectAnthropic, estimate.Options{})
		assert.Equal(t, e.PromptFor("claude-sonnet-4-5"), claude)
		asOpenAI := e.PromptFor("gpt-4o")
		assert.GreaterOrEqual(t, claude-asOpenAI, int64(346+3+2*3), "Claude: its tool-use system prompt and its frame, beyond OpenAI's count")
		assert.Less(t, claude-asOpenAI, int64(346+3+2*3)+asOpenAI/2, "and its text at most 1.5 times")

		openAITools := `[{"type":"function","function":{"name":"get_weather","description":"Get the current weather of a city.","parameters":{"type":"object",` +
			`"properties":{"city":{"type":"string","description":"The city, e.g. Paris."}},"required":["city"]}}}]`
		chat := func(model string) string {
			return `{"model":"` + model + `","max_tokens":100,"tools":` + openAITools + `,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"}]}`
		}
		gpt := reserve("/openai/v1/chat/completions", key, chat("gpt-4o"))
		llama := reserve("/openai/v1/chat/completions", key, chat("llama-3.3-70b-versatile"))
		e = estimate.Request([]byte(chat("gpt-4o")), estimate.DialectOpenAIChat, estimate.Options{})
		assert.Equal(t, e.Prompt, gpt, "OpenAI's count: its chat format, its rendering of the tools")
		assert.Equal(t, e.PromptFor("llama-3.3-70b-versatile"), llama)
		assert.GreaterOrEqual(t, llama-gpt, int64(30+2*5+56-(2*4+3)), "Llama: its template's tokens and its tool instructions, beyond OpenAI's chat format")

		// Bedrock: the route names the model, the body none.
		converse := `{"system":[{"text":"Be brief."}],"messages":[{"role":"user","content":[{"text":"Weather in Paris?"}]}],"inferenceConfig":{"maxTokens":100},` +
			`"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"Get the current weather of a city.","inputSchema":{"json":{"type":"object"}}}}]}}`
		model := "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
		bedrock := reserve("/model/"+model+"/converse", key, converse) + 100 - config.DefaultCompletionTokens // Converse's cap is not read
		e = estimate.Request([]byte(converse), estimate.DialectOther, estimate.Options{})
		assert.Equal(t, e.PromptFor(model), bedrock)
		assert.GreaterOrEqual(t, bedrock-e.PromptFor(""), int64(346+3+2*3), "the route's Claude: its tool-use system prompt for the toolConfig, its frame")
	})
}

// Issue 40: an inline image is reserved as OpenAI bills it (a 1024 × 1024
// PNG: 765 tokens), not as the text of its base64 nor as nothing.
func TestReservationCountsAnInlineImage(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 100000`))
		var png bytes.Buffer
		require.NoError(t, imagepng.Encode(&png, image.NewGray(image.Rect(0, 0, 1024, 1024))))
		b64 := base64.StdEncoding.EncodeToString(png.Bytes()) + strings.Repeat("A", 8<<10) // and more pixels
		body := `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + b64 + `"}}]}]}`
		x := p.SendBody(body, key).Answer()
		require.True(t, x.Passed())
		assert.Equal(t, plugintest.TextTokens("What is it?")+4+3+765+100, p.MinuteCounter(plugintest.APIKeySubject), "the text, the chat format, the image, the cap")
		x.Done()
	})
}

// Issue 40: a reservation is the estimate of what the provider bills,
// within the tolerance of the estimate's documented fixtures: OpenAI's
// tools as OpenAI renders them, a Gemini video by its length.
func TestReservationIsWhatTheProviderBills(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	fixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "estimate", "testdata", "documented", name+".json"))
		require.NoError(t, err)
		return string(b)
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		for _, c := range []struct {
			name, path string
			documented int64 // testdata/documented/documented.json
			cap        int64
		}{
			{"openai-chat-tools", "/v1/chat/completions", 310, 1024}, // no max_tokens: default_completion_tokens
			{"gemini-video", "/v1beta/models/gemini-2.5-flash:generateContent", 27007, 1024},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 1000000`))
				x := p.SendTo(c.path, key)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(fixture(c.name)), true)
				x.Answer()
				require.True(t, x.Passed())
				reserved := p.MinuteCounter(plugintest.APIKeySubject) - c.cap
				assert.InEpsilon(t, c.documented, reserved, 0.10, "reserved %d for a prompt of %d documented tokens", reserved, c.documented)
				x.Done()
			})
		}
	})
}
