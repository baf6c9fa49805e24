package limiter_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 25, "One request, one reading": bodies that the limiter read
// otherwise than upstreams do dodged per-model limits and weights, and a
// prompt of unknown size was free. Through the plugin (Go and WASM mode)
// on a real Redis.

// gpt4oMinute gives each consumer a day, and within it 100 tokens a minute
// on gpt-4o and 50,000 on any other model.
func gpt4oMinute(extra string) string {
	return `{"rule_name": "llm", ` + extra + `
		"rule_items": [{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 1000000, "per_model": [
			{"model": "gpt-4o", "token_per_minute": 100},
			{"model": "*", "token_per_minute": 50000}]}]}],
		` + plugintest.RedisSection + `}`
}

func gzipped(t *testing.T, s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.String()
}

// opusWeighted prices claude-opus-4 at 5 per input and 25 per output token,
// every other model at 1: 100 input and 10 output tokens cost 750 or 110.
const opusWeighted = `"token_count_strategy": "weighted", "token_weights": {"models": {"claude-opus-4": {"input": 5, "output": 25}}},`

// "(2) Per-model limits and weights dodged by bodies upstreams accept. A
// UTF-8 BOM before the JSON, a bare NaN member or a gzip body … yield no
// model … A gpt-4o minute already used up admitted all three", and "(3)
// Case variants of a key": every body that may name gpt-4o to some
// upstream counts on gpt-4o's minute.
func TestOneReadingPerModelLimits(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	const msgs = `"max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]`
	dodges := []struct {
		name, body string
		headers    [][2]string
	}{
		{"a byte order mark", "\xef\xbb\xbf" + chatNaming("gpt-4o"), nil},
		{"a NaN member", `{"model": "gpt-4o", "temperature": NaN, ` + msgs + `}`, nil},
		{"a comment and a trailing comma", `{"model": "gpt-4o", /* hi */ ` + msgs + `,}`, nil},
		{"an upper-case MODEL, as Go reads it", `{"model": "gpt-4o-mini", "MODEL": "gpt-4o", ` + msgs + `}`, nil},
		{"the first of two models", `{"model": "gpt-4o", "model": "gpt-4o-mini", ` + msgs + `}`, nil},
		{"a gzip body", "", [][2]string{{"content-encoding", "gzip"}}},
		{"a body in a coding the limiter does not read", "\x1b\x2f\x00\x00", [][2]string{{"content-encoding", "br"}}},
		{"an object no parser reads", `{"model": "gpt-4o", ` + msgs + `,,}`, nil},
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, gpt4oMinute(""))
		x := p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 60, 40))...)

		for _, d := range dodges {
			body := d.body
			if body == "" {
				body = gzipped(t, chatNaming("gpt-4o"))
			}
			x := p.SendBody(body, append([][2]string{alice}, d.headers...)...).Answer()
			x.RequireRejected(429)
			x.Done()
		}
		// gpt-4o-mini has budget left, read plainly or gzipped.
		for _, body := range []string{chatNaming("gpt-4o-mini"), gzipped(t, chatNaming("gpt-4o-mini"))} {
			headers := [][2]string{alice}
			if body[0] != '{' {
				headers = append(headers, [2]string{"content-encoding", "gzip"})
			}
			x := p.SendBody(body, headers...).Answer()
			require.True(t, x.Passed(), "gpt-4o-mini")
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
		}
	})
}

// "(3) … {"model":"gpt-4o-mini","MODEL":"gpt-4o"} was priced as gpt-4o-mini
// (50) and served as gpt-4o (320 by its weights)": an ambiguous body costs
// its most expensive reading.
func TestOneReadingWeights(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	weights := `"token_count_strategy": "weighted", "token_weights": {"models": {"gpt-4o": {"input": 2, "output": 8}, "gpt-4o-mini": {"input": 0.25, "output": 1}}},`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			name, body string
			want       int64
		}{
			{"plain gpt-4o-mini", `{"model":"gpt-4o-mini","messages":[]}`, 35},
			{"an upper-case MODEL", `{"model":"gpt-4o-mini","MODEL":"gpt-4o","messages":[]}`, 280},
			{"the first of two", `{"model":"gpt-4o","model":"gpt-4o-mini","messages":[]}`, 280},
			{"Infinity", `{"model":"gpt-4o","top_p":Infinity}`, 280},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(weights, `"token_per_day": 1000000`))
				x := p.SendBody(c.body, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 100, 10))...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}

// A body too large to parse whole (over token_reservation.max_body_bytes)
// is priced as the last top-level "model" it names, the one upstreams
// read, however it is spelt, and not as one nested deeper. Issue 14, point
// 6: "(6, model part) Per-model weights (token_count_strategy: weighted,
// token_weights.models) can be dodged: (a) a large body (over
// token_reservation.max_body_bytes) with the "model" key twice:
// estimate.Request reads the first with gjson.GetBytes, upstreams read the
// last — make it the last top-level "model"".
func TestHardening6LastModelOfALargeBody(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	padding := `"messages":[{"role":"user","content":"` + strings.Repeat("pad ", 64) + `"}]`
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, c := range []struct {
			name, body string
			want       int64
		}{
			{"the last of two models", `{"model":"claude-sonnet-4",` + padding + `,"model":"claude-opus-4"}`, 750},
			{"the last, written with an escape", `{"model":"claude-sonnet-4",` + padding + `,"\u006dodel":"claude-opus-4"}`, 750},
			{"not one nested deeper", `{"model":"claude-opus-4",` + padding + `,"metadata":{"model":"claude-sonnet-4"}}`, 750},
			{"one model, priced as such", `{"model":"claude-sonnet-4",` + padding + `}`, 110},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"token_reservation": {"max_body_bytes": 64}, `+opusWeighted, `"token_per_day": 1000000`))
				x := p.SendBody(c.body, key).Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.AnthropicStream(100, 0, 0, 10))...)
				assert.Equal(t, c.want, p.DayCounter(plugintest.APIKeySubject))
			})
		}
	})
}

// ambiguous_body: reject answers 400, naming what is ambiguous, and lets
// strict JSON through.
func TestOneReadingReject(t *testing.T) {
	redis := redistest.Start(t)
	alice := [2]string{"x-mse-consumer", "alice"}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, gpt4oMinute(`"ambiguous_body": "reject",`))
		for body, why := range map[string]string{
			"\xef\xbb\xbf" + chatNaming("gpt-4o"):              "byte order mark",
			`{"model":"gpt-4o-mini","Model":"gpt-4o"}`:         "names its",
			`{"model":"gpt-4o","n":NaN}`:                       "NaN",
			`{"model":"gpt-4o","max_tokens":5,"max_tokens":9}`: "output cap",
		} {
			local := p.SendBody(body, alice).RequireRejected(400)
			assert.Contains(t, string(local.Data), why)
			assert.Contains(t, string(local.Data), `"code":"ambiguous_body"`)
			assert.Equal(t, "application/json", plugintest.Header(local.Headers, "content-type"))
		}
		x := p.Call("POST", "/v1/chat/completions", "\x1b\x00", alice, [2]string{"content-encoding", "br"})
		assert.Contains(t, string(x.RequireRejected(400).Data), "content coding")

		x = p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
	})
}

// "(1) A prompt is free when its size is unknown": a body without a
// Content-Length, which the limiter does not read, is counted by the bytes
// that pass on when the response reports no usage.
func TestOneReadingPromptOfUnknownSize(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	prompt := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 8000) + `"}]}`
	noUsage := []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n",
		"data: [DONE]\n\n",
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
			t.Run(path, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"stream_usage": "off",`, `"token_per_day": 1000000`))
				x := p.SendTo(path, key).Answer()
				require.True(t, x.Passed())
				half := len(prompt) / 2
				p.Host.CallOnRequestBody(x.ID, []byte(prompt[:half]), false)
				p.Host.CallOnRequestBody(x.ID, []byte(prompt[half:]), true)
				x.Respond("text/event-stream", noUsage...)
				want := int64((len(prompt)+3)/4 + 1) // the body's bytes and "ok", at 4 bytes a token
				assert.Equal(t, want, p.DayCounter(plugintest.APIKeySubject), fmt.Sprintf("a %d-byte prompt", len(prompt)))
			})
		}
	})
}
