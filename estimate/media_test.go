package estimate

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encoded is an image of w × h pixels in a format, in base64.
func encoded(t *testing.T, format string, w, h int) string {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	switch format {
	case "png":
		require.NoError(t, png.Encode(&b, img))
	case "jpeg":
		require.NoError(t, jpeg.Encode(&b, img, nil))
	case "gif":
		require.NoError(t, gif.Encode(&b, img, nil))
	case "webp": // the header of an extended WebP (VP8X): sizes less one, 24 bits each
		b.WriteString("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00")
		b.Write([]byte{byte(w - 1), byte((w - 1) >> 8), byte((w - 1) >> 16), byte(h - 1), byte((h - 1) >> 8), byte((h - 1) >> 16)})
		b.Write(make([]byte, 2048)) // its frames (not read)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// Issue 40: an inline image costs what its provider bills for its size in
// pixels, read from its header, by the examples of each provider's
// documentation: OpenAI "a 1024 x 1024 square image in detail: high mode
// costs 765 tokens", "a 2048 x 4096 image … 1105 tokens", 85 in low
// detail; Anthropic width × height / 750 ("1092x1092 px: ~1590 tokens");
// Gemini 258 per 768-pixel tile, 258 for an image of at most 384 × 384.
func TestInlineImagesCostTheirSize(t *testing.T) {
	o := Options{BytesPerToken: 1 << 20, DefaultCompletionTokens: 10, MaxBodyBytes: 1 << 20} // text: a token at most
	openAI := func(b64, detail string) string {
		return `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + b64 + `"` + detail + `}}]}]}`
	}
	prompt := func(path, body string) int64 { return requestAt([]byte(body), path, o).Prompt }
	const chat = 4 + 3 // OpenAI's chat format: a message, and the reply's priming
	for _, format := range []string{"png", "jpeg", "gif", "webp"} {
		assert.Equal(t, int64(chat+765), prompt("/v1/chat/completions", openAI(encoded(t, format, 1024, 1024), "")), format)
	}
	assert.Equal(t, int64(chat+1105), prompt("/v1/chat/completions", openAI(encoded(t, "png", 2048, 4096), "")))
	assert.Equal(t, int64(chat+85), prompt("/v1/chat/completions", openAI(encoded(t, "png", 2048, 4096), `,"detail":"low"`)), "detail low")
	assert.Equal(t, int64(chat+765), prompt("/v1/responses", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/jpeg;base64,`+
		encoded(t, "jpeg", 1024, 1024)+`"}]}]}`))

	anthropic := func(b64 string) string {
		return `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}]}]}`
	}
	assert.Equal(t, int64(1092*1092/750+1+claudeFrame), prompt("/v1/messages", anthropic(encoded(t, "png", 1092, 1092))))
	assert.Equal(t, int64(1568*784/750+1+claudeFrame), prompt("/v1/messages", anthropic(encoded(t, "png", 4000, 2000))), "fitted within 1568 pixels")

	gemini := func(b64 string) string {
		return `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"` + b64 + `"}}]}]}`
	}
	const path = "/v1beta/models/gemini-2.5-flash:generateContent"
	assert.Equal(t, int64(258), prompt(path, gemini(encoded(t, "png", 384, 300))))
	assert.Equal(t, int64(258*2*1), prompt(path, gemini(encoded(t, "png", 1000, 700))))

	// A WAV sent as audio is no image (its header cut short: audio of no
	// length); a JPEG whose header cannot be read is an image of 1024 × 1024.
	wav := base64.StdEncoding.EncodeToString([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
	assert.Equal(t, int64(chat), prompt("/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"`+wav+`"}}]}]}`))
	assert.Equal(t, int64(chat+765), prompt("/v1/chat/completions", openAI("/9j/4AAQ"+strings.Repeat("A", 2048), "")))

	// A body of mostly text is not looked into: an image this small beside
	// it is a small part of its cost (mayHoldMedia).
	prose := strings.Repeat("Lorem ipsum dolor sit amet. ", 300)
	small := `{"messages":[{"role":"user","content":[{"type":"text","text":"` + prose + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		encoded(t, "png", 64, 64) + `"}}]}]}`
	assert.Equal(t, int64(chat+1), prompt("/v1/chat/completions", small))
}

// A body too large to parse is counted by its size, less its inline images,
// which count as images: a 2 MB request with one picture is not 500,000
// tokens of text.
func TestLargeBodiesCountTheirImagesAsImages(t *testing.T) {
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 10, MaxBodyBytes: 1 << 20}
	header := encoded(t, "png", 1024, 1024)
	b64 := header + strings.Repeat("A", 2<<20) // the pixels (not read)
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + b64 + `"}}]}]}`
	e := Request([]byte(body), DialectOpenAIChat, o)
	require.False(t, e.Parsed)
	assert.Equal(t, ceilDiv(int64(len(body)-len(b64)), 4)+765, e.Prompt)
	assert.Less(t, e.Prompt, int64(1000))
}

// Issue 40: an image sent by URL or by file id counts as an image of an
// unknown size (1024 × 1024) by its provider's rule, or 85 with OpenAI's
// "detail": "low"; a file of another type sent by reference is not counted,
// and an inline image is counted once, by its size.
func TestImagesByReference(t *testing.T) {
	o := Options{BytesPerToken: 1 << 20, DefaultCompletionTokens: 1} // no text
	prompt := func(path, body string) int64 { return requestAt([]byte(body), path, o).Prompt }
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},` +
		`{"type":"image_url","image_url":{"url":"https://x/b.png","detail":"low"}}]}]}`
	assert.Equal(t, int64(4+3+765+85), prompt("/v1/chat/completions", chat), "OpenAI chat: 765 and 85 (low)")
	responses := `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"},` +
		`{"type":"input_image","image_url":"https://x/c.png","detail":"low"},{"type":"input_file","file_id":"file-2"}]}]}`
	assert.Equal(t, int64(4+3+765+85), prompt("/v1/responses", responses), "Responses: by file id and by URL; a file that is not an image: nothing")
	anthropic := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/d.png"}},` +
		`{"type":"image","source":{"type":"file","file_id":"file-3"}},{"type":"document","source":{"type":"url","url":"https://x/e.pdf"}}]}]}`
	assert.Equal(t, int64(2*1399+claudeFrame), prompt("/v1/messages", anthropic), "Anthropic: 1024 × 1024 / 750 each; a document: nothing")
	gemini := `{"contents":[{"parts":[{"fileData":{"mimeType":"image/png","fileUri":"gs://b/f.png"}},{"file_data":{"mime_type":"application/pdf","file_uri":"gs://b/g.pdf"}}]}]}`
	assert.Equal(t, int64(1032), prompt("/v1beta/models/gemini-2.5-flash:generateContent", gemini), "Gemini: 4 tiles of 258; a PDF: nothing")
	inline := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		encoded(t, "png", 1024, 1024) + strings.Repeat("A", 8<<10) + `"}}]}]}`
	assert.Equal(t, int64(4+3+765), prompt("/v1/chat/completions", inline), "inline: by its size, once")
}

// Issue 40: audio, video and PDF documents sent inline count by their
// length as their provider bills them (medialength.go): a WAV by its byte
// rate, an MP3 by its first frame's bitrate, an MP4 by its movie header at
// its start or its end, a PDF by its pages; what gives no length by its
// size at a low rate.
func TestAudioVideoAndDocuments(t *testing.T) {
	o := Options{BytesPerToken: 1 << 20, DefaultCompletionTokens: 1} // no text
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	le32 := func(n int) []byte { return []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)} }
	be32 := func(n int) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }
	// 10 s of 16 kHz 16-bit mono: 32,000 bytes a second.
	wav := append([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00"), le32(16000)...)
	wav = append(append(wav, le32(32000)...), []byte("\x02\x00\x10\x00data\x00\x00\x00\x00")...)
	wav = append(wav, make([]byte, 320000)...)
	// 20 s at 128 kbit/s after an ID3 tag of 100 bytes.
	mp3 := append([]byte("ID3\x04\x00\x00\x00\x00\x00\x64"), make([]byte, 100)...)
	mp3 = append(append(mp3, 0xff, 0xfb, 0x90, 0x00), make([]byte, 20*16000-4)...)
	// 90 s of video: ftyp, then a version-0 mvhd with a timescale of 1,000.
	mvhd := append(append(append([]byte("\x00\x00\x00\x6cmvhd\x00\x00\x00\x00"), make([]byte, 8)...), be32(1000)...), be32(90000)...)
	mp4Head := append([]byte("\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41"), mvhd...)
	mp4 := append(append([]byte{}, mp4Head...), make([]byte, 4096)...)
	// The same, its movie header at its end, past what is read from the start.
	mp4End := append(append(mp4Head[:32:32], make([]byte, 400<<10)...), mvhd...)
	pdf := []byte("%PDF-1.7\n1 0 obj << /Type /Pages /Kids [2 0 R 3 0 R 4 0 R] /Count 3 >> endobj\n" +
		"2 0 obj << /Type /Page >> endobj 3 0 obj << /Type/Page >> endobj 4 0 obj << /Type /Page /Parent 1 0 R >> endobj\n" +
		"5 0 obj << /Length 2048 >> stream\n" + strings.Repeat("x", 2048) + "\nendstream endobj\n%%EOF")

	gemini := func(mime string, data []byte) string {
		return `{"contents":[{"parts":[{"inlineData":{"mimeType":"` + mime + `","data":"` + b64(data) + `"}}]}]}`
	}
	openAIAudio := func(format string, data []byte) string {
		return `{"model":"gpt-4o-audio-preview","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"` +
			b64(data) + `","format":"` + format + `"}}]}]}`
	}
	geminiPath := "/v1beta/models/gemini-2.5-flash:generateContent"
	prompt := func(path, body string) int64 { return requestAt([]byte(body), path, o).Prompt }
	assert.Equal(t, int64(10*32), prompt(geminiPath, gemini("audio/wav", wav)), "Gemini: 32 a second")
	assert.Equal(t, int64(4+3+10*10), prompt("/v1/chat/completions", openAIAudio("wav", wav)), "OpenAI: 10 a second, and the chat format")
	assert.Equal(t, int64(20*32), prompt(geminiPath, gemini("audio/mpeg", mp3)), "an MP3 by its bitrate")
	assert.Equal(t, int64(4+3+20*10), prompt("/v1/chat/completions", openAIAudio("mp3", mp3)))
	assert.Equal(t, int64(90*300), prompt(geminiPath, gemini("video/mp4", mp4)), "video: 300 a second")
	assert.Equal(t, int64(90*300), prompt(geminiPath, gemini("video/mp4", mp4End)), "its header at its end")
	assert.Equal(t, int64(3*258), prompt(geminiPath, gemini("application/pdf", pdf)), "Gemini: 258 a page")
	anthropicPDF := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + b64(pdf) + `"}}]}]}`
	assert.Equal(t, int64(3*3000+claudeFrame), prompt("/v1/messages", anthropicPDF), "Anthropic: 3,000 a page")
	ogg := append([]byte("OggS"), make([]byte, 80000-4)...) // 10 s at 64 kbit/s
	assert.Equal(t, int64(10*32), prompt(geminiPath, gemini("audio/ogg", ogg)), "no length in its header: its size at 64 kbit/s")
	// A lying header is bounded.
	huge := append(append(append([]byte("\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41\x00\x00\x00\x78mvhd\x01\x00\x00\x00"), make([]byte, 16)...), be32(1)...), 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	assert.Equal(t, MaxTokens, prompt(geminiPath, gemini("video/mp4", append(huge, make([]byte, 4096)...))))
}

// claudeFrame is a Claude model's frame around a request of one message
// (family.go).
const claudeFrame = claudePerRequest + claudePerMessage
