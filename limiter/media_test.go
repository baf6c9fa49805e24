package limiter_test

import (
	"bytes"
	"encoding/base64"
	"image"
	imagepng "image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 50, point 7: "A long prompt is estimated as one image." A body over
// max_body_bytes is estimated by its size less its inline media; any string
// that started with an image's base64 signature after a quote or a comma
// was taken for an image: twelve bytes (",iVBORw0KGgo") in front of 200 KB
// of prose cut the estimate from about 50,000 tokens to 1,826, and the
// request was admitted under a 20,000-token minute. Media are media only
// where each API puts them and when their header is the medium their type
// names; anything else counts as text.
func TestLargeBodiesCountMediaOnlyWhereMediaAre(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	const config = `"token_reservation": {"enabled": true, "default_completion_tokens": 100, "max_body_bytes": 65536},`
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog, then naps in the sun. ", 200<<10/67)

	// A 1024 × 1024 PNG, and 128 KiB more of its pixels: over max_body_bytes.
	var png bytes.Buffer
	require.NoError(t, imagepng.Encode(&png, image.NewGray(image.Rect(0, 0, 1024, 1024))))
	b64 := base64.StdEncoding.EncodeToString(png.Bytes()) + strings.Repeat("A", 128<<10)
	notPNG := strings.Repeat("QUFB", 40<<10) // base64, but of "AAA…": no image's header

	const chat, messages, gemini = "/v1/chat/completions", "/v1/messages", "/v1beta/models/gemini-2.5-flash:generateContent"
	chatText := func(content string) string {
		return `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"` + content + `"}]}`
	}
	chatImage := func(url string) string {
		return `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},` +
			`{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
	}
	anthropic := func(sourceType, mediaType, data string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[{"type":"image","source":` +
			`{"type":"` + sourceType + `","media_type":"` + mediaType + `","data":"` + data + `"}},{"type":"text","text":"What is it?"}]}]}`
	}
	geminiBody := func(mimeType, data string) string {
		return `{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"` + mimeType + `","data":"` + data + `"}},{"text":"What is it?"}]}],` +
			`"generationConfig":{"maxOutputTokens":100}}`
	}

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)

		// Prose is prose, whatever it starts with and wherever it is: about
		// 50,000 tokens, over the 20,000 of the minute.
		for _, c := range []struct{ name, path, body string }{
			{"a comma and a PNG's signature before prose", chat, chatText(",iVBORw0KGgo" + prose)},
			{"a PNG's signature after a quote", chat, chatText("iVBORw0KGgo" + prose)},
			{"a JPEG's signature after a quote", chat, chatText("/9j/" + prose)},
			{"a data URL as a message's text", chat, chatText("data:image/png;base64,iVBORw0KGgo" + prose)},
			{"an Anthropic text block", messages, `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"iVBORw0KGgo` + prose + `"}]}]}`},
			{"a Gemini text part", gemini, `{"contents":[{"parts":[{"text":"/9j/` + prose + `"}]}]}`},
			{"a data URL whose base64 is no image", chat, chatImage("data:image/png;base64," + notPNG + prose)},
			{"a data URL of an image that says it is a PDF", chat, chatImage("data:application/pdf;base64," + b64 + prose)},
			{"an image's base64 in a data URL that is no image_url", chat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"x","url":"data:image/png;base64,` + b64 + `"}]}]}`},
			{"an Anthropic source that is not base64", messages, anthropic("text", "image/png", "iVBORw0KGgo"+prose)},
			{"a Gemini inlineData that says it is audio", gemini, geminiBody("audio/wav", b64)},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(config, `"token_per_minute": 20000`))
				x := p.SendTo(c.path, key)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				x.Answer().RequireRejected(429)
				assert.Zero(t, p.MinuteCounter(plugintest.APIKeySubject), "nothing reserved")
			})
		}

		// A body that is parsed (under max_body_bytes) counts inline data
		// that is no medium as text: a plain text document the model reads,
		// a data URL whose base64 is no image.
		for _, c := range []struct{ name, path, body string }{
			{"an Anthropic plain text document", messages, `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[` +
				`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"` + prose + `"}},{"type":"text","text":"Summarise it."}]}]}`},
			{"Gemini's inlineData of text", gemini, geminiBody("text/plain", base64.StdEncoding.EncodeToString([]byte(prose)))},
			{"a data URL whose base64 is no image", chat, chatImage("data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte(prose)))},
		} {
			t.Run("parsed: "+c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"token_reservation": {"enabled": true, "default_completion_tokens": 100},`, `"token_per_minute": 20000`))
				x := p.SendTo(c.path, key)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				x.Answer().RequireRejected(429)
				assert.Zero(t, p.MinuteCounter(plugintest.APIKeySubject), "nothing reserved")
			})
		}

		// A real inline image over max_body_bytes is an image: the rest of
		// the body's size as text, the image as its provider bills it.
		sizeOf := func(body string) int64 { return int64(len(body)-len(b64)+3) / 4 }
		for _, c := range []struct {
			name, path, body string
			image            int64
		}{
			{"an OpenAI data URL", chat, chatImage("data:image/png;base64," + b64), 765},
			{"an Anthropic base64 source", messages, anthropic("base64", "image/png", b64), 1024*1024/750 + 1},
			{"a Gemini inlineData", gemini, geminiBody("image/png", b64), 4 * 258},
		} {
			t.Run(c.name, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(config, `"token_per_minute": 20000`))
				x := p.SendTo(c.path, key)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				x.Answer()
				require.True(t, x.Passed())
				assert.Equal(t, sizeOf(c.body)+c.image+100, p.MinuteCounter(plugintest.APIKeySubject), "the rest by its size, the image, the cap")
				x.Done()
			})
		}
	})
}
