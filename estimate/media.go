package estimate

import "strings"

// Media sent inline (base64, where each API puts it: place.go) are
// counted as their provider bills them: an image by its size in pixels
// (image.go), audio and video by their length, a PDF by its pages
// (medialength.go), each read from the medium's header (decoded:
// mediahead.go), never its bytes as text. The walker reads the values
// where an API puts inline data (inlineString) and counts those whose
// place (inline) and header (mediumTokens) say they are media; in a body
// too large to parse, mediaSpans (mediascan.go) finds them by their first
// bytes in base64 (mediaFormats) where a medium may start (after a quote
// or a data URL's comma), and keeps them so.

// mediaFormats are the media whose cost is read, by the base64 form of
// their first bytes, the magic ('?' matches any character). No two start
// with the same character.
var mediaFormats = [...]struct {
	magic string
}{
	formatPNG:  {"iVBORw0KGgo"},
	formatJPEG: {"/9j/"},
	formatGIF:  {"R0lGOD"},
	formatRIFF: {"UklGR"},      // WebP images and WAV audio
	formatID3:  {"SUQz"},       // MP3 audio with an ID3 tag
	formatMP4:  {"AAAA?GZ0eX"}, // MP4 and QuickTime video: a box's size, then "ftyp"
	formatPDF:  {"JVBERi0"},    // "%PDF-"
	formatWebM: {"GkXfo"},      // Matroska and WebM video
	formatOgg:  {"T2dnUw"},     // Ogg audio ("OggS")
}

// magicFirst is, by byte, 1 + the format whose magic starts with it (0:
// none).
var magicFirst = func() (t [256]uint8) {
	for m, f := range mediaFormats {
		t[f.magic[0]] = uint8(m + 1)
	}
	return t
}()

const (
	formatPNG = iota
	formatJPEG
	formatGIF
	formatRIFF
	formatID3
	formatMP4
	formatPDF
	formatWebM
	formatOgg
	numFormats
)

// maxMedia bounds the media a body counts: the walker's, and the scan's
// of a body too large to parse. Past it, inline data counts as text, the
// more expensive reading (providers take far fewer: OpenAI 500 images a
// request, Anthropic 100, Bedrock 20; Gemini 3,600 files, of at most 20 MB
// in all inline).
const maxMedia = 1000

// magicAt returns the format whose magic starts at s[j], or -1.
func magicAt(s string, j int) int {
	f := int(magicFirst[s[j]]) - 1
	if f < 0 {
		return -1
	}
	if magic := mediaFormats[f].magic; j+len(magic) > len(s) || !matches(s[j:j+len(magic)], magic) {
		return -1
	}
	return f
}

// medium is what the base64 that starts at s[j], where the walker read
// inline data, costs as a medium (mediumTokens), and whether it is one:
// its first bytes a format's, in a place that says it is a medium of that
// format's kind (inline).
//
// What it reads around s[j] is the value's object (and its parent's, for
// Bedrock), no more than placeWindow each way: work (when not nil) counts
// a candidate, and the headers decoded.
func medium(s string, j int, d Dialect, work *scanWork) (tokens int64, ok bool) {
	if j >= len(s) {
		return 0, false
	}
	m := magicAt(s, j)
	if m < 0 {
		return 0, false
	}
	if work != nil {
		work.candidates++
	}
	kind, low, end := inline(s, j, 0, len(s))
	if kind == kindNone {
		return 0, false
	}
	return mediumTokens(s[j:end], m, kind, low, d, work)
}

// mediumTokens is what a medium of a kind, whose base64 is b64 and whose
// first bytes are a format's, costs; ok is false when the format is not
// one of that kind (an image that says it is a PDF, a RIFF file that is
// not a WebP image or not a WAV): that is no medium.
//
// It decodes at most a few times the medium's base64 (and a few dozen
// bytes of a small one), which work (when not nil) counts; it allocates
// only for a header longer than headBuffer.
func mediumTokens(b64 string, format, kind int, low bool, d Dialect, work *scanWork) (tokens int64, ok bool) {
	if work != nil {
		work.decoded += int64(min(len(b64), smallHead))
	}
	if !mediumIs(b64, format, kind) {
		return 0, false
	}
	if work != nil {
		work.decoded += headCost(b64, format, kind)
	}
	size := decodedLen(b64)
	switch kind {
	case kindImage:
		if low {
			return openAILowDetail, true
		}
		w, h, _ := imageSize(b64, format)
		return imageTokens(d, w, h), true
	case kindAudio:
		switch format {
		case formatRIFF:
			seconds, _ := wavSeconds(b64)
			return audioTokens(d, seconds), true
		case formatID3:
			return audioTokens(d, mp3Seconds(b64, size)), true
		case formatOgg, formatWebM:
			return audioTokens(d, ceilDiv(size, unknownAudioBytesPerSecond)), true
		case formatMP4: // M4A, AAC in MP4
			return audioTokens(d, mp4Seconds(b64, size, unknownAudioBytesPerSecond)), true
		}
	case kindVideo:
		switch format {
		case formatMP4:
			return videoPerSecond * mp4Seconds(b64, size, unknownVideoBytesPerSecond), true
		case formatWebM:
			return videoPerSecond * ceilDiv(size, unknownVideoBytesPerSecond), true
		}
	case kindPDF:
		if format == formatPDF {
			if d == DialectGemini {
				return geminiPerPage * pdfPages(b64, size), true
			}
			return perPage * pdfPages(b64, size), true
		}
	}
	return 0, false
}

// mediumIs says whether a medium whose base64 is b64, and whose first
// bytes are a format's, is one of a kind: a format of that kind (a RIFF
// file a WebP image or a WAV, as its header says).
func mediumIs(b64 string, format, kind int) bool {
	switch kind {
	case kindImage:
		if format == formatRIFF {
			var small [smallHead / 4 * 3]byte
			head := decodeSmallHead(b64, &small)
			return len(head) < 12 || string(head[8:12]) == "WEBP"
		}
		return format <= formatRIFF
	case kindAudio:
		if format == formatRIFF {
			_, audio := wavSeconds(b64)
			return audio
		}
		return format == formatID3 || format == formatOgg || format == formatWebM || format == formatMP4
	case kindVideo:
		return format == formatMP4 || format == formatWebM
	case kindPDF:
		return format == formatPDF
	}
	return false
}

// matches says whether s is pattern, in which '?' matches any byte.
func matches(s, pattern string) bool {
	for k := range len(pattern) {
		if pattern[k] != '?' && s[k] != pattern[k] {
			return false
		}
	}
	return true
}

// Images sent by URL or by file id (OpenAI's image_url part with a URL,
// Responses' input_image with a URL or a file_id, Anthropic's image with a
// url or file source, Gemini's fileData of an image type) cannot be sized:
// each counts as an image of unknown size (unknownSide), or 85 tokens with
// OpenAI's "detail": "low". A file of another type (a PDF, audio, video
// sent by reference) cannot be counted at all: its usage charges it.

// imageRef is what a content part says of an image it sends by reference.
type imageRef struct {
	byURL       bool // an image_url or input_image URL (not a data URL), a file_id, an Anthropic url or file source
	geminiImage bool // Gemini's fileData of an image type
	low         int  // 1 with "detail": "low"
	inline      bool // the part's own inline data (a Responses image_url or file_data) was read
}

// read reads the part's member k, whose value is at w.i, with the walker
// (gjson would copy a data URL with escaped slashes to unescape it).
func (r *imageRef) read(w *walker, k string) {
	switch {
	case k == "image_url" && w.peek() == '"': // Responses: a URL
		r.byURL = r.byURL || !w.inlineString(inDataURLOrURL, &r.inline)
	case k == "image_url" && w.peek() == '{': // chat: an object with one
		var inline bool
		w.members(func(k string) {
			switch {
			case k == "url" && w.peek() == '"':
				r.byURL = r.byURL || !w.inlineString(inDataURLOrURL, &inline)
			case k == "detail":
				r.readDetail(w)
			}
		})
	case k == "file_data" && w.peek() == '"': // Responses' input_file: a data URL
		w.inlineString(inDataURL, &r.inline)
	case k == "detail":
		r.readDetail(w)
	case k == "file_id":
		r.byURL = r.byURL || w.peek() == '"'
	case k == "source" && w.peek() == '{': // Anthropic's: base64 (inline: inlineString), text, url or file
		var inline bool
		w.members(func(k string) {
			switch {
			case k == "type" && w.peek() == '"':
				t := w.decodedStr()
				r.byURL = r.byURL || t == "url" || t == "file"
			case k == "data" && w.peek() == '"':
				w.inlineString(inBase64, &inline)
			}
		})
	case (k == "fileData" || k == "file_data") && w.peek() == '{':
		w.members(func(k string) {
			if (k == "mimeType" || k == "mime_type") && w.peek() == '"' {
				r.geminiImage = r.geminiImage || strings.HasPrefix(w.decodedStr(), "image/")
			}
		})
	}
}

// readInline reads the object of a part's member k for its inline data
// (inlineString): OpenAI chat's file (its file_data) and input_audio (its
// data), Gemini's inlineData or inline_data (its data), Bedrock Converse's
// image, audio, video and document (their source's bytes). Responses'
// file_data, chat's image_url and Anthropic's source are imageRef.read's.
func (w *walker) readInline(k string) {
	if w.peek() != '{' {
		return
	}
	var inline bool
	w.members(func(m string) {
		switch {
		case w.peek() == '"' && (k == "file" && m == "file_data"):
			w.inlineString(inDataURL, &inline)
		case w.peek() == '"' && m == "data" && (k == "input_audio" || k == "inlineData" || k == "inline_data"):
			w.inlineString(inBase64, &inline)
		case w.peek() == '{' && m == "source" && (k == "image" || k == "audio" || k == "video" || k == "document"):
			var inline bool
			w.members(func(m string) {
				if m == "bytes" && w.peek() == '"' {
					w.inlineString(inBase64, &inline)
				}
			})
		}
	})
}

// checkSteps is what a medium's place and header cost the walker in steps
// (see work): in WASM, about 3 µs, the reading of 30 JSON tokens.
const checkSteps = 30

// mediaChecks is how many values where media may be (the walker's, the
// scan's candidates after a "data" or "bytes" key or a data URL's head) an
// estimate of a body of size bytes reads as media, their places and their
// headers (the rest are text): scanCandidates, and one every
// scanBytesPerCheck bytes beyond. A check costs checkSteps, and inline
// objects can be a few dozen bytes each.
func mediaChecks(size int) int {
	return scanCandidates + size/scanBytesPerCheck
}

// scanBytesPerCheck: see mediaChecks. Real media are larger: a 1 × 1 GIF
// is 130 bytes in its part, an icon of 32 × 32 pixels a kilobyte or two.
const scanBytesPerCheck = 256

// Where inlineString reads inline data: base64, a data URL, or a data URL
// or else a URL (an image sent by reference: imageRef).
const (
	inBase64 = iota
	inDataURL
	inDataURLOrURL
)

// inlineString reads the string at w.i, a value where an API puts inline
// data, and reports whether it is a data URL. A value that is no medium
// (medium: its header not that of the kind its place or type names, a
// data URL not in base64) is counted as text: what it is to the model, if
// it is anything. So is the inline data of an object that has had some
// (*read, which it sets: a member given twice, whose place would be read
// again for each), and any past the body's maxMedia media or its
// mediaChecks values read as media.
func (w *walker) inlineString(in int, read *bool) (isDataURL bool) {
	v := w.i
	raw, n := w.str()
	if w.bad {
		return false
	}
	j := v + 1 // where the base64 starts
	if in != inBase64 {
		isDataURL = strings.HasPrefix(raw, "data:")
		if in == inDataURLOrURL && !isDataURL {
			return false // a URL
		}
		if k := strings.Index(raw[:min(len(raw), maxDataURLHead)], ";base64,"); isDataURL && k >= 0 {
			j += k + len(";base64,")
		} else {
			j = -1
		}
	}
	if j >= 0 && !*read && w.media < maxMedia && w.checks < mediaChecks(len(w.s)) {
		*read = true
		w.checks++
		w.steps += checkSteps
		if t, ok := medium(w.s, j, w.dialect, &w.mediaWork); ok {
			w.media++
			w.mediaTokens = min(w.mediaTokens+t, MaxTokens)
			return isDataURL
		}
	}
	w.text += n
	if w.weigh {
		w.weighText(v+1, v+1+len(raw), n != int64(len(raw)))
	}
	return isDataURL
}

// readDetail reads a "detail" value: "low" or anything else.
func (r *imageRef) readDetail(w *walker) {
	if w.peek() == '"' && w.decodedStr() == "low" {
		r.low = 1
	}
}
