package limiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 55, point 1: audio and image tokens, where the usage reports them,
// are charged at their own prices; a response without them as before.
// Through the plugin (Go and WASM mode) on a real Redis.

// mediaPricing prices an audio model's audio apart, an image model's
// output images (its input images at its input price: input_image unset),
// and an Images API model's images and text apart (US dollars per million
// tokens, as configured here).
const mediaPricing = `"pricing": {
	"gpt-4o-audio-preview": {"input": 2.5, "output": 10, "input_audio": 40, "output_audio": 80},
	"gemini-2.5-flash-image": {"input": 0.3, "output": 2.5, "output_image": 30},
	"gpt-image-1.5": {"input": 5, "output": 10, "input_image": 8, "output_image": 32},
	"*": {"input": 1, "output": 2}},`

// openAIAudioStream is a chat completions stream of gpt-4o-audio-preview
// whose usage reports 1,386 prompt tokens, 1,280 of them audio, and 412
// completion tokens, 355 of them audio (OpenAI's prompt_tokens_details and
// completion_tokens_details).
var openAIAudioStream = []string{
	`data: {"id":"chatcmpl-a1","object":"chat.completion.chunk","model":"gpt-4o-audio-preview","choices":[{"index":0,"delta":{"role":"assistant","audio":{"id":"audio_1","transcript":"Hello"}},"finish_reason":null}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-a1","object":"chat.completion.chunk","model":"gpt-4o-audio-preview","choices":[{"index":0,"delta":{"audio":{"data":"UklGRiQAAABXQVZF"}},"finish_reason":"stop"}],"usage":null}` + "\n\n",
	`data: {"id":"chatcmpl-a1","object":"chat.completion.chunk","model":"gpt-4o-audio-preview","choices":[],"usage":{"prompt_tokens":1386,"completion_tokens":412,"total_tokens":1798,` +
		`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":1280},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":355}}}` + "\n\n",
	"data: [DONE]\n\n",
}

// geminiImageStream is a streamGenerateContent stream of the image model
// whose usage reports 270 prompt tokens, 258 of them an image, and 1,299
// candidate tokens, 1,290 of them the image it drew (Gemini's lists by
// modality, each event's replacing the last's).
var geminiImageStream = []string{
	`data: {"candidates":[{"content":{"parts":[{"text":"Here it is:"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":270,"candidatesTokenCount":9,"totalTokenCount":279,` +
		`"promptTokensDetails":[{"modality":"TEXT","tokenCount":12},{"modality":"IMAGE","tokenCount":258}],"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":9}]},"modelVersion":"gemini-2.5-flash-image"}` + "\r\n\r\n",
	`data: {"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":270,"candidatesTokenCount":1299,"totalTokenCount":1569,` +
		`"promptTokensDetails":[{"modality":"TEXT","tokenCount":12},{"modality":"IMAGE","tokenCount":258}],"candidatesTokensDetails":[{"modality":"TEXT","tokenCount":9},{"modality":"IMAGE","tokenCount":1290}]},"modelVersion":"gemini-2.5-flash-image"}` + "\r\n\r\n",
}

// imagesResponse is an Images API body (a generation) whose usage reports
// 30 input tokens of text and 4,160 output tokens: the image's.
const imagesResponse = `{"created":1752000400,"data":[{"b64_json":"iVBORw0KGgo="}],"output_format":"png","quality":"high","size":"1024x1024",` +
	`"usage":{"total_tokens":4190,"input_tokens":30,"output_tokens":4160,"input_tokens_details":{"text_tokens":30,"image_tokens":0}}}`

const geminiImagePath = "/v1beta/models/gemini-2.5-flash-image:streamGenerateContent?alt=sse"

func TestMoneyMediaPricedAtTheirKinds(t *testing.T) {
	redis := redistest.Start(t)
	teamA := [2]string{"x-mse-consumer", "team-a"}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		forgetModels(t)
		p := plugintest.StartOnEmptyRedis(t, redis, consumerConfig(mediaPricing, teamALimits))
		spent := int64(0)
		charged := func(want int64, what string) {
			t.Helper()
			spent += want
			assert.Equal(t, spent, dollarsToday(p, teamASubject), "%s: %d nanodollars more", what, want)
		}
		counter := func(model, metric string) uint64 {
			t.Helper()
			n, _ := metricValue(p, model, "team-a", metric)
			return n
		}

		// OpenAI audio: 106 text and 1,280 audio input tokens, 57 text and
		// 355 audio output tokens, each at its price ($2.50, $40, $10, $80
		// per million; 7,585,000 nanodollars were all of it text).
		x := p.SendBody(chatNaming("gpt-4o-audio-preview"), teamA).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", openAIAudioStream...)
		charged(106*2_500+1280*40_000+57*10_000+355*80_000, "gpt-4o-audio-preview's audio")
		assert.Equal(t, uint64(1280), counter("gpt-4o-audio-preview", "token_ratelimit_input_audio_tokens"))
		assert.Equal(t, uint64(355), counter("gpt-4o-audio-preview", "token_ratelimit_output_audio_tokens"))
		assert.Equal(t, uint64(1386), counter("gpt-4o-audio-preview", inputTokens), "audio within the input")
		_, defined := metricValue(p, "gpt-4o-audio-preview", "team-a", "token_ratelimit_input_image_tokens")
		assert.False(t, defined, "no image reported: no counter")

		// The same model answering without parts: text, as before.
		x = p.SendBody(chatNaming("gpt-4o-audio-preview"), teamA).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1000, 200))...)
		charged(1000*2_500+200*10_000, "gpt-4o-audio-preview without audio")
		assert.Equal(t, uint64(1280), counter("gpt-4o-audio-preview", "token_ratelimit_input_audio_tokens"), "no audio added")

		// Gemini's image model: 12 text and 258 image input tokens, both at
		// its input price ($0.30: no input_image price), 9 text and 1,290
		// image output tokens ($2.50, $30).
		x = p.Call("POST", geminiImagePath, `{"contents":[{"parts":[{"text":"Draw the room with a sign"}]}]}`, teamA).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", geminiImageStream...)
		charged(270*300+9*2_500+1290*30_000, "gemini-2.5-flash-image's image")
		model := "gemini-2_5-flash-image" // as a metric's name segment
		assert.Equal(t, uint64(258), counter(model, "token_ratelimit_input_image_tokens"))
		assert.Equal(t, uint64(1290), counter(model, "token_ratelimit_output_image_tokens"))
		assert.Equal(t, uint64(1299), counter(model, outputTokens), "the image within the output")

		// And without parts, as before.
		x = p.Call("POST", geminiImagePath, `{"contents":[{"parts":[{"text":"Describe a room"}]}]}`, teamA).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.GeminiStream(1000, 200))...)
		charged(1000*300+200*2_500, "gemini-2.5-flash-image without images")

		// The Images API, a JSON body: 30 text input tokens ($5), 4,160
		// output tokens, all the image's ($32, not text's $10).
		x = p.Call("POST", "/v1/images/generations", `{"model":"gpt-image-1.5","prompt":"A lighthouse at dusk","quality":"high"}`, teamA).Answer()
		require.True(t, x.Passed())
		x.Respond("application/json", imagesResponse)
		charged(30*5_000+4160*32_000, "gpt-image-1.5's image")
		assert.Equal(t, uint64(4160), counter("gpt-image-1_5", "token_ratelimit_output_image_tokens"))
	})
}
