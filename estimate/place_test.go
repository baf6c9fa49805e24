package estimate

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"
)

// Issue 50, point 7: a body too large to parse counted any string that
// started with an image's base64 signature after a quote or a comma as an
// image, to the next quote: ",iVBORw0KGgo" before 200 KB of prose made it
// one image. Media are media only where each API puts them (place.go), and
// only as the kind their place or type names; anything else is text.
func TestMediaOnlyWhereAPIsPutThem(t *testing.T) {
	o := Options{BytesPerToken: 4, DefaultCompletionTokens: 1, MaxBodyBytes: 64} // estimated by size, less media
	png := encoded(t, "png", 1024, 1024)
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	pdf := b64([]byte("%PDF-1.7\n1 0 obj << /Type /Page >> endobj 2 0 obj << /Type /Page >> endobj\n%%EOF"))
	// 10 s of 16 kHz 16-bit mono (32,000 bytes a second).
	wav := b64(append([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00data"), make([]byte, 320000)...))
	// 20 s: a movie header with a timescale of 1,000 and a duration of 20,000.
	mp4 := b64(append([]byte("\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41\x00\x00\x00\x6cmvhd\x00\x00\x00\x00"+strings.Repeat("\x00", 8)+"\x00\x00\x03\xe8\x00\x00\x4e\x20"), make([]byte, 64)...))
	prose := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)
	const chat, responses, anthropic, gemini, bedrock = "/v1/chat/completions", "/v1/responses", "/v1/messages",
		"/v1beta/models/gemini-2.5-flash:generateContent", "/model/m/converse"
	user := func(parts string) string { return `{"messages":[{"role":"user","content":[` + parts + `]}]}` }

	media := []struct {
		name, path, body, b64 string
		tokens                int64
	}{
		{"OpenAI chat's image_url", chat, user(`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `","detail":"high"}}`), png, 765},
		{"its detail low, before", chat, user(`{"type":"image_url","image_url":{"detail":"low","url":"data:image/png;base64,` + png + `"}}`), png, 85},
		{"a Responses input_image, its type after", responses, `{"input":[{"role":"user","content":[{"image_url":"data:image/png;base64,` + png + `","type":"input_image"}]}]}`, png, 765},
		{"OpenAI chat's file", chat, user(`{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf + `"}}`), pdf, 2 * 3000},
		{"a Responses input_file", responses, `{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf + `"}]}]}`, pdf, 2 * 3000},
		{"OpenAI chat's input_audio", chat, user(`{"type":"input_audio","input_audio":{"data":"` + wav + `","format":"wav"}}`), wav, 10 * 10},
		{"an Anthropic base64 source, its members after", anthropic, user(`{"type":"image","source":{"data":"` + png + `","media_type":"image/png","type":"base64"}}`), png, 1024*1024/750 + 1},
		{"an Anthropic PDF", anthropic, user(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}`), pdf, 2 * 3000},
		{"Gemini's inlineData", gemini, `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"` + png + `"}}]}]}`, png, 4 * 258},
		{"Gemini's inline_data", gemini, `{"contents":[{"parts":[{"inline_data":{"data":"` + mp4 + `","mime_type":"video/mp4"}}]}]}`, mp4, 20 * 300},
		{"an M4A sent as audio", gemini, `{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/mp4","data":"` + mp4 + `"}}]}]}`, mp4, 20 * 32},
		{"Bedrock's image", bedrock, user(`{"image":{"format":"png","source":{"bytes":"` + png + `"}}}`), png, 765},
		{"Bedrock's video, its format after", bedrock, user(`{"video":{"source":{"bytes":"` + mp4 + `"},"format":"mp4"}}`), mp4, 20 * 300},
		{"Bedrock's document", bedrock, user(`{"document":{"format":"pdf","name":"a","source":{"bytes":"` + pdf + `"}}}`), pdf, 2 * 3000},
		{"blank space and escaped slashes", anthropic, "{\"messages\": [ {\"role\": \"user\", \"content\": [ {\"type\": \"image\", \"source\": {\n  \"type\" : \"base64\" ,\n  \"media_type\" : \"image\\/png\" ,\n  \"data\" :\t\"" + png + "\"\n } } ] } ] }", png, 1024*1024/750 + 1},
		{"an escaped slash in a data URL", chat, user(`{"type":"image_url","image_url":{"url":"data:image\/jpeg;base64,` + png + `"}}`), png, 765},
	}
	for _, c := range media {
		e := requestAt([]byte(c.body), c.path, o)
		assert.Equal(t, ceilDiv(int64(len(c.body)-len(c.b64)), 4)+c.tokens, e.Prompt, "%s: the rest by its size, the medium by its header", c.name)
	}

	text := []struct{ name, path, body string }{
		{"a comma and a signature in prose", chat, user(`{"type":"text","text":"` + `,iVBORw0KGgo` + prose + `"}`)},
		{"a signature after a quote", chat, `{"messages":[{"role":"user","content":"iVBORw0KGgo` + prose + `"}]}`},
		{"a JPEG's", anthropic, user(`{"type":"text","text":"/9j/` + prose + `"}`)},
		{"a data URL as text", chat, `{"messages":[{"role":"user","content":"data:image/png;base64,` + png + `"}]}`},
		{"an Anthropic source as the text of a string", anthropic, user(`{"type":"text","text":"{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"` + png + `\"}"}`)},
		{"a url outside image_url", chat, user(`{"type":"image_url","image":{"url":"data:image/png;base64,` + png + `"}}`)},
		{"a Responses image_url in a part of another type", responses, `{"input":[{"role":"user","content":[{"type":"input_text","image_url":"data:image/png;base64,` + png + `"}]}]}`},
		{"an image_url that says it is a PDF", chat, user(`{"type":"image_url","image_url":{"url":"data:application/pdf;base64,` + png + `"}}`)},
		{"a data URL that is no image's", chat, user(`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + pdf + `"}}`)},
		{"a data URL not in base64", chat, user(`{"type":"image_url","image_url":{"url":"data:image/png,iVBORw0KGgo` + prose + `"}}`)},
		{"an Anthropic source of type text", anthropic, user(`{"type":"document","source":{"type":"text","media_type":"image/png","data":"` + png + `"}}`)},
		{"an Anthropic source without a type", anthropic, user(`{"type":"image","source":{"media_type":"image/png","data":"` + png + `"}}`)},
		{"an Anthropic source that says it is a PDF", anthropic, user(`{"type":"image","source":{"type":"base64","media_type":"application/pdf","data":"` + png + `"}}`)},
		{"a type given twice", anthropic, user(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `","type":"text"}}`)},
		{"a member before that is an object", anthropic, user(`{"type":"image","source":{"type":"base64","x":{},"media_type":"image/png","data":"` + png + `"}}`)},
		{"Gemini's inlineData without its type", gemini, `{"contents":[{"parts":[{"inlineData":{"data":"` + png + `"}}]}]}`},
		{"Gemini's inlineData that says it is audio", gemini, `{"contents":[{"parts":[{"inlineData":{"mimeType":"audio/wav","data":"` + png + `"}}]}]}`},
		{"a WAV sent as an image", gemini, `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/webp","data":"` + wav + `"}}]}]}`},
		{"a tool's data", anthropic, user(`{"type":"tool_use","id":"t","name":"f","input":{"data":"` + png + `"}}`)},
		{"a source's bytes in no Bedrock block", bedrock, user(`{"thing":{"format":"png","source":{"bytes":"` + png + `"}}}`)},
		{"an escaped key", gemini, `{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","d\u0061ta":"` + png + `"}}]}]}`},
	}
	for _, c := range text {
		e := requestAt([]byte(c.body), c.path, o)
		assert.Equal(t, ceilDiv(int64(len(c.body)), 4), e.Prompt, "%s: text, by its size", c.name)
	}
}

// A body that is parsed counts inline data that is no medium as text: the
// model reads an Anthropic plain text document, a text file; a data URL
// whose base64 is not the medium it names is text to the estimate, the
// more expensive reading. Media are not text (they count as media).
func TestInlineDataThatIsNoMediumIsText(t *testing.T) {
	png := encoded(t, "png", 64, 64)
	txt := base64.StdEncoding.EncodeToString([]byte("A plain text file, which the model reads."))
	user := func(parts string) string { return `{"messages":[{"role":"user","content":[` + parts + `]}]}` }
	for _, c := range []struct {
		name, body string
		text       int
	}{
		{"an Anthropic plain text document", user(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Read me."}}`), len("Read me.")},
		{"a Responses text file", user(`{"type":"input_file","file_data":"data:text/plain;base64,` + txt + `"}`), len("data:text/plain;base64,") + len(txt)},
		{"OpenAI chat's file of text", user(`{"type":"file","file":{"file_data":"data:text/plain;base64,` + txt + `"}}`), len("data:text/plain;base64,") + len(txt)},
		{"Gemini's inlineData of text", `{"contents":[{"parts":[{"inlineData":{"mimeType":"text/plain","data":"` + txt + `"}}]}]}`, len(txt)},
		{"Bedrock's document of text", user(`{"document":{"format":"txt","name":"a","source":{"bytes":"` + txt + `"}}}`), len(txt)},
		{"a data URL that is no image", user(`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + txt + `"}}`), len("data:image/png;base64,") + len(txt)},
		{"an image sent as audio", user(`{"type":"input_audio","input_audio":{"data":"` + png + `","format":"wav"}}`), len(png)},
		{"an image", user(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}`), 0},
		{"an image by URL", user(`{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`), 0},
	} {
		w := walker{s: c.body}
		assert.True(t, w.walk(), c.name)
		assert.Equal(t, int64(c.text), w.text, c.name)
	}
}

// FuzzMediaPlaces holds the scan of media (place.go), which reads a few
// hundred bytes around each candidate without parsing the body, to a full
// parse: in a valid JSON body, each medium it counts is a string value at
// a place where an API puts media, of the kind the place or its type
// names, and costs what its header says.
func FuzzMediaPlaces(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ","detail":"low"}}]}]}`,
		`{"contents":[{"parts":[{"inlineData":{"data":"/9j/4AAQSkZJRgABAQ\/\/2wBDAP","mimeType":"image/jpeg"}},{"inline_data":{"data":"UklGRiQAAABXRUJQVlA4WA=="}}]}]}`,
		`{"messages":[{"content":[{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lGODlhAQABAAAAACw="}}]}]}`,
		`{"content":[{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo"}}},{"document":{"source":{"bytes":"JVBERi0xLjQK"}}}]}`,
		`{"input":[{"content":[{"type":"input_image","image_url":"data:image/webp;base64,UklGRiQAAABXRUJQVlA4WA=="},{"file_data":"data:application/pdf;base64,JVBERi0","type":"input_file"}]}]}`,
		`{"messages":[{"content":"x,iVBORw0KGgo \"iVBORw0KGgo\" \"data\":\"/9j/\""},{"input_audio":{"data":"SUQzBAAAAAAAAA","format":"mp3"}}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var spans [][3]int64
		tokens, bytes := mediaSpans(s, DialectOpenAIChat, func(from, to int, tokens int64) {
			spans = append(spans, [3]int64{int64(from), int64(to), tokens})
		}, nil)
		if tokens < 0 || tokens > MaxTokens || bytes < 0 || bytes > int64(len(s)) {
			t.Fatalf("media = %d tokens, %d bytes of %d", tokens, bytes, len(s))
		}
		if !gjson.Valid(s) || nestingDepth([]byte(s)) > MaxDepth {
			return
		}
		places := referencePlaces(s)
		for _, sp := range spans {
			want, ok := places[int(sp[0])]
			if !ok || int64(want[0]) != sp[1] || want[1] != sp[2] {
				t.Fatalf("medium at %d to %d (%d tokens): a full parse finds %v (%v) in %s", sp[0], sp[1], sp[2], want, ok, s)
			}
		}
	})
}

// referencePlaces finds, with a full parse (gjson), the media of a valid
// JSON body by place.go's rules: by where each starts, where it ends and
// what it costs (OpenAI's rules).
func referencePlaces(s string) map[int][2]int64 {
	places := map[int][2]int64{}
	unquote := func(raw string) string { return raw[1 : len(raw)-1] }
	var walk func(v gjson.Result, key, parentKey string)
	walk = func(v gjson.Result, key, parentKey string) {
		switch {
		case v.IsArray():
			v.ForEach(func(_, e gjson.Result) bool {
				walk(e, "", key)
				return true
			})
		case v.IsObject():
			o := object{start: -1, end: -1, keyAt: -1}
			v.ForEach(func(k, m gjson.Result) bool {
				if m.Type == gjson.String {
					o.note(unquote(k.Raw), unquote(m.Raw))
				}
				return true
			})
			v.ForEach(func(k, m gjson.Result) bool {
				defer walk(m, unquote(k.Raw), key)
				if m.Type != gjson.String || o.twice {
					return true
				}
				content, j := unquote(m.Raw), m.Index+1
				kind, low := kindNone, false
				switch unquote(k.Raw) {
				case "url", "image_url", "file_data":
					head, _, ok := strings.Cut(content, ";base64,")
					if !ok || !strings.HasPrefix(head, "data:") || len(head)+len(";base64,")+1 > maxDataURLHead {
						return true
					}
					j += len(head) + len(";base64,")
					claim, _, _ := strings.Cut(head[len("data:"):], ";")
					switch {
					case unquote(k.Raw) == "url" && key == "image_url", unquote(k.Raw) == "image_url" && o.typ == "input_image":
						if kind = kindOf(claim); kind != kindImage {
							kind = kindNone
						}
						low = o.detail == "low"
					case unquote(k.Raw) == "file_data" && (key == "file" || o.typ == "input_file"):
						kind = kindOf(claim)
					}
				case "data":
					switch {
					case key == "source" && o.typ == "base64":
						kind = kindOf(o.mediaType)
					case key == "inlineData" || key == "inline_data":
						kind = kindOf(o.mimeType)
					case key == "input_audio":
						kind = kindAudio
					}
				case "bytes":
					if key == "source" {
						kind = map[string]int{"image": kindImage, "audio": kindAudio, "video": kindVideo, "document": kindPDF}[parentKey]
					}
				}
				end := strings.IndexByte(s[j:], '"') + j
				if kind == kindNone || s[end-1] == '\\' {
					return true
				}
				for format, f := range mediaFormats {
					if j+len(f.magic) <= end && matches(s[j:j+len(f.magic)], f.magic) {
						if tokens, ok := mediumTokens(s[j:end], format, kind, low, DialectOpenAIChat, nil); ok {
							places[j] = [2]int64{int64(end), tokens}
						}
					}
				}
				return true
			})
		}
	}
	walk(gjson.Parse(s), "", "")
	return places
}
