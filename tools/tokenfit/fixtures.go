package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"log"
	"os"
	"path/filepath"
	"strings"

	tiktoken "github.com/pkoukk/tiktoken-go"
)

// A fixture is a request of one API and the prompt tokens its provider's
// documentation says it costs: written to estimate/testdata/documented
// (-fixtures), where the estimate's tests hold the estimate to it within
// Tolerance (and within a token, for the rounding of a small prompt).
type fixture struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// Model is the model the request's route addresses, when it is not
	// the body's (a Bedrock path's): the one whose family counts it.
	Model      string  `json:"model,omitempty"`
	Documented int64   `json:"documented"`
	Tolerance  float64 `json:"tolerance"`
	Source     string  `json:"source"`
	body       string
}

// The documented rules the fixtures are counted by.
const (
	sourceChat  = "OpenAI's cookbook, How to count tokens with tiktoken: num_tokens_from_messages (3 tokens a message, its role and content in o200k_base, 3 for the reply)"
	sourceTools = "OpenAI's cookbook, How to count tokens with tiktoken: num_tokens_for_tools (gpt-4o), and num_tokens_from_messages"
)

// readText reads a text of estimate/testdata/text, written for the
// fixtures, from the repository's root.
func readText(root, name string) string {
	b, err := os.ReadFile(filepath.Join(root, "estimate", "testdata", "text", name+".txt"))
	if err != nil {
		log.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// message is a chat message.
type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// chatTokens is num_tokens_from_messages for gpt-4o: 3 per message, the
// tokens of its role and of its content (a string), 3 for the reply.
func chatTokens(enc *tiktoken.Tiktoken, messages []message) int64 {
	n := int64(3)
	for _, m := range messages {
		n += 3 + int64(len(enc.Encode(m.Role, nil, nil)))
		if s, ok := m.Content.(string); ok {
			n += int64(len(enc.Encode(s, nil, nil)))
		}
	}
	return n
}

// function is an OpenAI function tool of flat parameters, the shape
// num_tokens_for_tools counts.
type function struct {
	name, description string
	params            []param
}

type param struct {
	name, typ, description string
	enum                   []string
}

// toolsTokens is num_tokens_for_tools's count of the functions for gpt-4o:
// 7 a function and its name:description, 3 for its parameters and 3 a
// parameter and its name:type:description, an enum -3 and 3 and the tokens
// of each value, 12 in all; descriptions without a final period.
func toolsTokens(enc *tiktoken.Tiktoken, fns []function) int64 {
	count := func(s string) int64 { return int64(len(enc.Encode(s, nil, nil))) }
	n := int64(0)
	for _, f := range fns {
		n += 7 + count(f.name+":"+strings.TrimSuffix(f.description, "."))
		if len(f.params) > 0 {
			n += 3
			for _, p := range f.params {
				n += 3
				if len(p.enum) > 0 {
					n -= 3
					for _, v := range p.enum {
						n += 3 + count(v)
					}
				}
				n += count(p.name + ":" + p.typ + ":" + strings.TrimSuffix(p.description, "."))
			}
		}
	}
	if len(fns) > 0 {
		n += 12
	}
	return n
}

// openAITool is the JSON of a function as chat completions take it.
func openAITool(f function) map[string]any {
	props := map[string]any{}
	for _, p := range f.params {
		prop := map[string]any{"type": p.typ, "description": p.description}
		if len(p.enum) > 0 {
			prop["enum"] = p.enum
		}
		props[p.name] = prop
	}
	return map[string]any{"type": "function", "function": map[string]any{"name": f.name, "description": f.description,
		"parameters": map[string]any{"type": "object", "properties": props, "required": []string{f.params[0].name}}}}
}

// orderTools are the functions of the tools fixture: an assistant for an
// online shop's orders.
var orderTools = []function{{
	name: "search_orders", description: "Search the customer's orders by status and date, newest first.",
	params: []param{
		{name: "status", typ: "string", description: "Only orders in this state.", enum: []string{"pending", "shipped", "delivered", "cancelled", "returned"}},
		{name: "since", typ: "string", description: "The earliest order date, as YYYY-MM-DD."},
		{name: "limit", typ: "integer", description: "How many orders to return, at most 50."},
	},
}, {
	name: "refund_order", description: "Refund an order, in full or in part, to the original payment method.",
	params: []param{
		{name: "order_id", typ: "string", description: "The order's identifier, such as A-10293."},
		{name: "amount", typ: "number", description: "The amount to refund in the order's currency; the whole order when absent."},
		{name: "reason", typ: "string", description: "Why the order is refunded.", enum: []string{"damaged", "late", "wrong_item", "other"}},
	},
}, {
	name: "get_shipping_quote", description: "Quote the price and delivery date of shipping a parcel.",
	params: []param{
		{name: "destination", typ: "string", description: "The destination's postal code and country, e.g. 10115 DE."},
		{name: "weight_kg", typ: "number", description: "The parcel's weight in kilograms."},
		{name: "speed", typ: "string", description: "How fast it should arrive.", enum: []string{"economy", "standard", "express"}},
	},
}}

// pngOf is a PNG of w × h pixels of one gray, in base64: a kilobyte or
// two, its size in its header.
func pngOf(w, h int) string {
	img := image.NewGray(image.Rect(0, 0, w, h))
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		log.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// wavOf is a WAV of seconds of 8 kHz 8-bit mono (8,000 bytes a second), in
// base64.
func wavOf(seconds int) string {
	le32 := func(n int) []byte { return []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)} }
	data := seconds * 8000
	var b bytes.Buffer
	b.WriteString("RIFF")
	b.Write(le32(36 + data))
	b.WriteString("WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00")
	b.Write(le32(8000)) // sample rate
	b.Write(le32(8000)) // byte rate
	b.WriteString("\x01\x00\x08\x00data")
	b.Write(le32(data))
	for i := range data {
		b.WriteByte(byte(128 + 64*((i/20)%2)))
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// mp4Of is the start of an MP4 of seconds (its ftyp and moov boxes, the
// movie header saying how long it is) and 8 KiB of media data, in base64.
func mp4Of(seconds int) string {
	be32 := func(n int) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }
	var b bytes.Buffer
	b.WriteString("\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41")
	b.Write(be32(8 + 108))
	b.WriteString("moov")
	b.Write(be32(108))
	b.WriteString("mvhd\x00\x00\x00\x00")
	b.Write(make([]byte, 8)) // creation and modification times
	b.Write(be32(1000))      // timescale
	b.Write(be32(seconds * 1000))
	b.Write(make([]byte, 108-28))
	b.Write(be32(8 + 8<<10))
	b.WriteString("mdat")
	b.Write(bytes.Repeat([]byte{0x42}, 8<<10))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// pdfOf is a PDF of pages pages of text, in base64.
func pdfOf(pages int) string {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
	fmt.Fprintf(&b, "2 0 obj << /Type /Pages /Count %d /Kids [", pages)
	for p := range pages {
		fmt.Fprintf(&b, "%d 0 R ", 3+2*p)
	}
	b.WriteString("] >> endobj\n")
	for p := range pages {
		text := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (Page %d of the quarterly report. %s) Tj ET", p+1, strings.Repeat("Revenue grew in every region. ", 40))
		fmt.Fprintf(&b, "%d 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >> endobj\n", 3+2*p, 4+2*p)
		fmt.Fprintf(&b, "%d 0 obj << /Length %d >> stream\n%s\nendstream endobj\n", 4+2*p, len(text), text)
	}
	b.WriteString("trailer << /Root 1 0 R >>\n%%EOF\n")
	return base64.StdEncoding.EncodeToString([]byte(b.String()))
}

func mustJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		log.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// fixtures builds the fixtures, their documented counts by o200k (and by
// each family's tokenizer, counts: familyFixtures), from the texts under
// root, the repository's root.
func fixtures(enc *tiktoken.Tiktoken, root string, counts *familyCounts) []fixture {
	readText := func(name string) string { return readText(root, name) }
	count := func(s string) int64 { return int64(len(enc.Encode(s, nil, nil))) }
	var fs []fixture
	chat := func(name string, tolerance float64, messages ...message) {
		fs = append(fs, fixture{Name: name, Path: "/v1/chat/completions", Documented: chatTokens(enc, messages), Tolerance: tolerance,
			Source: sourceChat, body: mustJSON(map[string]any{"model": "gpt-4o", "max_tokens": 500, "messages": messages})})
	}
	// Text, with each dialect's overhead: English prose, code, markdown,
	// short turns, and other languages (the count is fitted to o200k, which
	// knows some languages' words better than others: wider bounds).
	chat("openai-chat-english", 0.10,
		message{"system", "You are a concise assistant for the team that runs our API gateway."},
		message{"user", readText("en")},
		message{"assistant", "Understood: estimates matter because a token budget is only as good as the admission that guards it."},
		message{"user", "Summarize the second paragraph in one sentence."})
	chat("openai-chat-code", 0.10, message{"user", "Review this code and suggest one improvement:\n\n" + readText("code")})
	chat("openai-chat-markdown", 0.10, message{"system", "Answer in markdown."}, message{"user", readText("markdown")})
	chat("openai-chat-short-turns", 0.10,
		message{"user", "Hi"}, message{"assistant", "Hello! How can I help?"}, message{"user", "What's 2+2?"},
		message{"assistant", "4."}, message{"user", "Thanks!"})
	chat("openai-chat-german", 0.10, message{"user", readText("de")})
	chat("openai-chat-numbers", 0.10, message{"user", "Check these figures:\n" + readText("nums")})
	for _, lang := range []string{"zh", "ja", "ko", "es", "fr", "ar", "hi", "emoji"} {
		chat("openai-chat-"+lang, 0.25, message{"user", readText(lang)})
	}
	chat("openai-chat-ru", 0.35, message{"user", readText("ru")}) // counted 1.3x over: see docs/estimates.md

	// Tools, as OpenAI renders them.
	var tools []any
	for _, f := range orderTools {
		tools = append(tools, openAITool(f))
	}
	toolMessages := []message{{"system", "You help customers of an online shop with their orders."},
		{"user", "My parcel from last week arrived broken. Can I get my money back for order A-20931?"}}
	fs = append(fs, fixture{Name: "openai-chat-tools", Path: "/v1/chat/completions", Tolerance: 0.10, Source: sourceTools,
		Documented: chatTokens(enc, toolMessages) + toolsTokens(enc, orderTools),
		body:       mustJSON(map[string]any{"model": "gpt-4o", "tools": tools, "messages": toolMessages})})

	// Images: OpenAI's tiles ("a 1024 x 1024 square image in detail: high
	// mode costs 765 tokens"; low detail 85), Anthropic's width × height /
	// 750, Gemini's 258 an image within 384 pixels.
	question := "What is shown in these pictures?"
	fs = append(fs, fixture{Name: "openai-chat-images", Path: "/v1/chat/completions", Tolerance: 0.25,
		Source:     "OpenAI's vision guide: 85 + 170 a 512-pixel tile (765 for 1024 x 1024 in high detail), 85 in low detail; the text by num_tokens_from_messages",
		Documented: 3 + 3 + count("user") + count(question) + 765 + 85,
		body: mustJSON(map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": question},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + pngOf(1024, 1024)}},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + pngOf(512, 512), "detail": "low"}},
		}}}})})
	fs = append(fs, fixture{Name: "anthropic-image", Path: "/v1/messages", Tolerance: 0.25,
		Source:     "Anthropic's vision guide: tokens = width x height / 750 (1,000 x 1,000: 1,334); the text in o200k_base, for Anthropic's tokenizer, which is not public",
		Documented: 1000*1000/750 + 1 + count(question),
		body: mustJSON(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 500, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": pngOf(1000, 1000)}},
			map[string]any{"type": "text", "text": question},
		}}}})})
	gemini := "/v1beta/models/gemini-2.5-flash:generateContent"
	inline := func(mime, data string) string {
		return mustJSON(map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{
			map[string]any{"inlineData": map[string]any{"mimeType": mime, "data": data}}, map[string]any{"text": question}}}}})
	}
	fs = append(fs, fixture{Name: "gemini-image", Path: gemini, Tolerance: 0.25,
		Source:     "Gemini's token guide: an image within 384 x 384 pixels is 258 tokens; the text in o200k_base, for Gemini's tokenizer",
		Documented: 258 + count(question), body: inline("image/png", pngOf(300, 300))})

	// Audio, video, documents.
	fs = append(fs, fixture{Name: "gemini-audio", Path: gemini, Tolerance: 0.25,
		Source:     "Gemini's token guide: 32 tokens a second of audio; the text in o200k_base",
		Documented: 32*4 + count(question), body: inline("audio/wav", wavOf(4))})
	fs = append(fs, fixture{Name: "gemini-video", Path: gemini, Tolerance: 0.25,
		Source:     "Gemini's video guide: about 300 tokens a second (258 a frame at 1 frame a second, 32 of audio, metadata); the text in o200k_base",
		Documented: 300*90 + count(question), body: inline("video/mp4", mp4Of(90))})
	fs = append(fs, fixture{Name: "gemini-pdf", Path: gemini, Tolerance: 0.25,
		Source:     "Gemini's document guide: 258 tokens a page; the text in o200k_base",
		Documented: 258*3 + count(question), body: inline("application/pdf", pdfOf(3))})
	audioQuestion := "Transcribe this."
	fs = append(fs, fixture{Name: "openai-chat-audio", Path: "/v1/chat/completions", Tolerance: 0.25,
		Source:     "OpenAI's Realtime guide: a token per 100 ms of the user's audio; the text by num_tokens_from_messages",
		Documented: 3 + 3 + count("user") + count(audioQuestion) + 10*4,
		body: mustJSON(map[string]any{"model": "gpt-4o-audio-preview", "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": audioQuestion},
			map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": wavOf(4), "format": "wav"}},
		}}}})})

	// A prompt of token ids: a token each.
	ids := make([]int, 250)
	for i := range ids {
		ids[i] = 1000 + 7*i
	}
	fs = append(fs, fixture{Name: "openai-completions-token-ids", Path: "/v1/completions", Tolerance: 0,
		Source: "OpenAI's completions API: a prompt given as token ids is those tokens", Documented: int64(len(ids)),
		body: mustJSON(map[string]any{"model": "gpt-3.5-turbo-instruct", "prompt": ids, "max_tokens": 16})})
	return append(fs, familyFixtures(enc, root, counts)...)
}

// writeFixtures writes the fixtures' bodies and their manifest into dir.
func writeFixtures(dir string, fs []fixture) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	for _, f := range fs {
		if err := os.WriteFile(filepath.Join(dir, f.Name+".json"), []byte(f.body+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	manifest, err := json.MarshalIndent(fs, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "documented.json"), append(manifest, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}
