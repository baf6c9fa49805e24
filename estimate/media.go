package estimate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"strings"
)

// Media sent inline (base64, where each API puts it: place.go) are
// counted as their provider bills them: an image by its size in pixels,
// audio and video by their length, a PDF by its pages, each read from the
// medium's header, never its bytes as text. The walker reads the values
// where an API puts inline data (inlineString) and counts those whose
// place (inline) and header (mediumTokens) say they are media; in a body
// too large to parse, mediaSpans finds them by their first bytes in base64
// (mediaFormats) where a medium may start (after a quote or a data URL's
// comma), and keeps them so.

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

// maxHeaderBase64 bounds the base64 read to find an image's size: a JPEG's
// frame header follows its metadata (EXIF, ICC profiles), usually within
// the first 64 KiB; one further away is counted as an image of unknown size.
const maxHeaderBase64 = 256 << 10

// Images of unknown size (a JPEG whose frame header is past the bytes read,
// a header that cannot be read) are counted as 1024 × 1024 pixels.
const unknownSide = 1024

// maxMedia bounds the media a body counts: the walker's, and the scan's
// of a body too large to parse. Past it, inline data counts as text, the
// more expensive reading (providers take far fewer: OpenAI 500 images a
// request, Anthropic 100, Bedrock 20; Gemini 3,600 files, of at most 20 MB
// in all inline).
const maxMedia = 1000

// The scan of a body too large to parse looks at a bounded number of
// candidates, what reading around each of them costs being fixed: at most
// scanCandidates, and one every scanBytesPerCandidate bytes of the body
// beyond; and reads the place of at most mediaChecks of them (those that
// follow a "data" or "bytes" key or a data URL's head). Past them, the rest
// of the body is text.
const (
	scanCandidates        = 64
	scanBytesPerCandidate = 64
)

// scanWork counts what a scan of media did, for the tests: the candidates
// it looked at, the bytes it could read around them (the bounds inline
// is given) and the bytes of headers it decoded (mediumTokens).
type scanWork struct {
	candidates, around, decoded int64
}

// mediaSpans is what the inline media of a body too large to parse cost,
// in tokens, by the rules of the dialect's provider, and how many bytes of
// base64 they took: the bytes a size estimate of the body counts as text,
// and should not. It reads the body once for candidates (a format's magic
// after a quote or a comma: nextCandidate), and around each candidate its
// place (a few hundred bytes, no further than the candidates before and
// after it) and, where that is a medium's, its header: what it reads adds
// up to a few times the body, and the candidates, the places read and the
// media are bounded (scanCandidates, mediaChecks, maxMedia). It calls
// found (when not nil) with where each medium it counts starts and ends,
// and what it costs; work (when not nil) counts what it did.
func mediaSpans(s string, d Dialect, found func(from, to int, tokens int64), work *scanWork) (tokens, bytes int64) {
	budget, checks := scanCandidates+len(s)/scanBytesPerCandidate, mediaChecks(len(s))
	lo, counted := 0, 0 // how far back a candidate's place is read; the media counted
	for j, m := nextCandidate(s, 0); j >= 0 && budget > 0 && checks > 0 && counted < maxMedia; {
		budget--
		next, nextFormat := nextCandidate(s, j)
		hi := len(s) // the next candidate, which bounds what is read after this one
		if next >= 0 {
			hi = next
		}
		if work != nil {
			work.candidates++
			work.around += int64(hi - lo)
		}
		kind, low, end := kindNone, false, 0
		if mayBeInline(s, j, lo) {
			checks--
			kind, low, end = inline(s, j, lo, hi)
		}
		t, ok := int64(0), false
		if kind != kindNone {
			t, ok = mediumTokens(s[j:end], m, kind, low, d, work)
		}
		if ok {
			if found != nil {
				found(j, end, t)
			}
			counted++
			tokens = min(tokens+t, MaxTokens) // each medium's cost is at most 300 MaxTokens
			bytes += int64(end - j)
			lo = end // < hi: the next candidate is past its string
		} else { // text
			lo = j
		}
		j, m = next, nextFormat
	}
	return tokens, bytes
}

// nextCandidate returns where the next candidate medium starts, at or
// after s[i+1], and its format: a format's magic right after a quote or a
// comma (after a data URL's ";base64,"); -1 when there is none. It reads
// 8 bytes at a time for quotes and commas, and stops at each only to look
// at the byte after it: its cost is the body's length, whatever the body
// holds.
func nextCandidate(s string, i int) (j, format int) {
	for ; i+8 <= len(s); i += 8 {
		x := load8(s, i)
		quote, comma := x^('"'*lowBits), x^(','*lowBits)
		// Every quote and comma is flagged, and some bytes above one.
		for m := ((quote-lowBits)&^quote | (comma-lowBits)&^comma) & highBits; m != 0; m &= m - 1 {
			p := i + bits.TrailingZeros64(m)/8
			if c := s[p]; (c == '"' || c == ',') && p+1 < len(s) && magicFirst[s[p+1]] != 0 {
				if f := magicAt(s, p+1); f >= 0 {
					return p + 1, f
				}
			}
		}
	}
	for p := i; p+1 < len(s); p++ {
		if c := s[p]; (c == '"' || c == ',') && magicFirst[s[p+1]] != 0 {
			if f := magicAt(s, p+1); f >= 0 {
				return p + 1, f
			}
		}
	}
	return -1, -1
}

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

// mayBeInline says, from the few bytes before it, whether the candidate at
// s[j] may be where inline puts media: the value of a "data" or "bytes"
// key, or right after a data URL's ";base64,". Most candidates that are
// none cost no more.
func mayBeInline(s string, j, lo int) bool {
	switch s[j-1] {
	case ',':
		return j-lo >= len(";base64,") && s[j-len(";base64,"):j] == ";base64,"
	case '"':
		i := backSpace(s, j-1, lo)
		if i <= lo || s[i-1] != ':' {
			return false
		}
		i = backSpace(s, i-1, lo)
		return i-lo >= len(`"data"`) && s[i-len(`data"`):i] == `data"` && s[i-len(`"data"`)] == '"' ||
			i-lo >= len(`"bytes"`) && s[i-len(`bytes"`):i] == `bytes"` && s[i-len(`"bytes"`)] == '"'
	}
	return false
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

// imageSize reads an image's width and height from the start of its base64
// (escaped slashes, "\/", as some JSON encoders write them, read as '/'), or
// unknownSide when they cannot be read; image is false for a RIFF file that
// is not a WebP image (a WAV: audio, not counted here).
func imageSize(b64 string, format int) (w, h int, image bool) {
	var small [smallHead / 4 * 3]byte
	var head []byte
	if format == formatJPEG {
		var buf headBuffer
		head = decodeHead(b64, maxHeaderBase64, &buf) // a JPEG's size is after its metadata
	} else {
		head = decodeSmallHead(b64, &small) // PNG, GIF and WebP give theirs in their first 30 bytes
	}
	if format == formatRIFF && len(head) >= 12 && string(head[8:12]) != "WEBP" {
		return 0, 0, false
	}
	var ok bool
	switch format {
	case formatPNG:
		w, h, ok = pngSize(head)
	case formatJPEG:
		w, h, ok = jpegSize(head)
	case formatGIF:
		w, h, ok = gifSize(head)
	case formatRIFF:
		w, h, ok = webpSize(head)
	}
	if !ok || w <= 0 || h <= 0 {
		return unknownSide, unknownSide, true
	}
	return min(w, maxSide), min(h, maxSide), true
}

// openAILowDetail is what OpenAI bills an image sent with "detail": "low",
// whatever its size.
const openAILowDetail = 85

// maxSide bounds a side an image's header claims (providers refuse larger
// images): the tiles of a lying header stay countable.
const maxSide = 16384

// decodeHead decodes at most n bytes of base64 from the start of b64, up to
// the first byte that is not base64 (after dropping JSON's backslashes),
// into buf when they fit: a small medium's header costs no allocation.
func decodeHead(b64 string, n int, buf *headBuffer) []byte {
	if m := min(n, len(b64)); m > len(buf.clean) {
		return headInto(nil, make([]byte, 0, m), b64, n)
	}
	return headInto(buf.out[:0], buf.clean[:0], b64, n)
}

// headBuffer holds the header decodeHead decodes, when it is short (a
// medium of a few hundred bytes; a larger buffer would be cleared for
// nothing on every medium).
type headBuffer struct {
	clean [256]byte
	out   [256 / 4 * 3]byte
}

// headCost is how many bytes of base64 mediumTokens may decode of a medium
// of a kind (besides the smallHead of mediumIs), whose base64 is b64 and
// whose first bytes are a format's.
func headCost(b64 string, format, kind int) int64 {
	n := int64(len(b64))
	switch {
	case format == formatJPEG && kind == kindImage, format == formatID3:
		return min(n, maxHeaderBase64)
	case format == formatMP4:
		return 2 * min(n, maxHeaderBase64)
	case format == formatPDF:
		return 3 * min(n, maxPDFBase64) // decoded, then read for two spellings of a page
	}
	return smallHead
}

// smallHead is how much base64 decodeSmallHead reads: the first 48 bytes
// of a medium, where PNG, GIF, WebP and WAV give their size.
const smallHead = 64

// decodeSmallHead is decodeHead(b64, smallHead), into out: without
// allocating.
func decodeSmallHead(b64 string, out *[smallHead / 4 * 3]byte) []byte {
	var clean [smallHead]byte
	return headInto(out[:0], clean[:0], b64, smallHead)
}

// headInto is decodeHead(b64, n), its base64 collected in clean and
// decoded into out (each reallocated if too small).
func headInto(out, clean []byte, b64 string, n int) []byte {
	for i := 0; i < len(b64) && len(clean) < n; i++ {
		c := b64[i]
		switch {
		case c == '\\':
			continue
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/':
			clean = append(clean, c)
		default:
			i = len(b64)
		}
	}
	// Whole groups of 4, and the 2 or 3 characters of a last group (its
	// padding is where the loop stopped).
	if need := base64.RawStdEncoding.DecodedLen(len(clean)); cap(out) < need {
		out = make([]byte, need)
	} else {
		out = out[:need]
	}
	k, _ := base64.RawStdEncoding.Decode(out, clean[:len(clean)/4*4])
	if rest := clean[len(clean)/4*4:]; len(rest) >= 2 {
		r, _ := base64.RawStdEncoding.Decode(out[k:], rest)
		k += r
	}
	return out[:k]
}

func pngSize(b []byte) (int, int, bool) {
	if len(b) < 24 || string(b[12:16]) != "IHDR" {
		return 0, 0, false
	}
	return int(binary.BigEndian.Uint32(b[16:])), int(binary.BigEndian.Uint32(b[20:])), true
}

func gifSize(b []byte) (int, int, bool) {
	if len(b) < 10 {
		return 0, 0, false
	}
	return int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:])), true
}

func webpSize(b []byte) (int, int, bool) {
	if len(b) < 30 || string(b[8:12]) != "WEBP" {
		return 0, 0, false
	}
	switch string(b[12:16]) {
	case "VP8 ": // lossy: the frame's 14-bit dimensions
		return int(binary.LittleEndian.Uint16(b[26:]) & 0x3fff), int(binary.LittleEndian.Uint16(b[28:]) & 0x3fff), true
	case "VP8L": // lossless: 14 bits each, less one, after the signature byte
		v := binary.LittleEndian.Uint32(b[21:])
		return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1, true
	case "VP8X": // extended: 24 bits each, less one
		return int(uint32(b[24])|uint32(b[25])<<8|uint32(b[26])<<16) + 1, int(uint32(b[27])|uint32(b[28])<<8|uint32(b[29])<<16) + 1, true
	}
	return 0, 0, false
}

// jpegSize walks a JPEG's segments to its start-of-frame header.
func jpegSize(b []byte) (int, int, bool) {
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return 0, 0, false
	}
	for i := 2; i+9 < len(b); {
		if b[i] != 0xff {
			return 0, 0, false
		}
		marker := b[i+1]
		if marker == 0xff { // fill byte
			i++
			continue
		}
		length := int(binary.BigEndian.Uint16(b[i+2:]))
		if marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc {
			return int(binary.BigEndian.Uint16(b[i+7:])), int(binary.BigEndian.Uint16(b[i+5:])), true
		}
		if length < 2 {
			return 0, 0, false
		}
		i += 2 + length
	}
	return 0, 0, false
}

// imageTokens is what an image of w × h pixels costs, by its provider's
// documentation:
//   - OpenAI (and an API not known): fitted within 2048 × 2048, then its
//     shorter side to at most 768; 85 tokens and 170 per 512-pixel tile
//     ("detail": "high" or "auto"; a "low" image costs 85: see inline).
//   - Anthropic: fitted within a long side of 1568 pixels, width × height
//     / 750.
//   - Gemini: 258 tokens when both sides are at most 384 pixels, else 258
//     per 768-pixel tile.
func imageTokens(d Dialect, w, h int) int64 {
	fw, fh := float64(w), float64(h)
	switch d {
	case DialectAnthropic:
		if long := max(fw, fh); long > 1568 {
			fw, fh = fw*1568/long, fh*1568/long
		}
		return int64(fw*fh/750) + 1
	case DialectGemini:
		if w <= 384 && h <= 384 {
			return 258
		}
		return 258 * int64((w+767)/768) * int64((h+767)/768)
	}
	if long := max(fw, fh); long > 2048 {
		fw, fh = fw*2048/long, fh*2048/long
	}
	if short := min(fw, fh); short > 768 {
		fw, fh = fw*768/short, fh*768/short
	}
	tiles := int64((int(fw)+511)/512) * int64((int(fh)+511)/512)
	return 85 + 170*tiles
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

// imageRefTokens is what images sent by reference cost: n of them, and low
// of them with "detail": "low".
func imageRefTokens(d Dialect, n, low int64) int64 {
	unknown := imageTokens(d, unknownSide, unknownSide)
	if d == DialectAnthropic || d == DialectGemini { // no "detail"
		return (n + low) * unknown
	}
	return n*unknown + low*openAILowDetail
}

// Audio, video and PDF documents sent inline count by their length, read
// from their headers where they give it, as their provider bills them:
//   - audio: Gemini 32 tokens a second ("Gemini represents each second of
//     audio as 32 tokens"); OpenAI's audio models, and any other API, 10 (a
//     token per 100 ms of the user's audio, its Realtime documentation);
//   - video: 300 tokens a second (Gemini: 258 a frame at 1 frame a second,
//     32 of audio, and metadata, "about 300 tokens per second"); only
//     Gemini takes video, the others refuse it;
//   - PDF: Gemini 258 tokens a page; Anthropic, OpenAI and others 3,000 (a
//     page is its text and its image: "1,500 to 3,000 tokens per page",
//     Anthropic's PDF support).
//
// A WAV's length is exact (its byte rate); an MP3's from its first frame's
// bitrate; an MP4's from its movie header (mvhd), at its start or its end;
// a PDF's pages by its page objects. Where the header cannot tell (an Ogg,
// a WebM, an MP4 whose header is not where it is looked for, a PDF whose
// pages are in compressed object streams), the length is its size at a low
// rate: audio at 64 kbit/s, video at 1 Mbit/s, a page every 20 KB.
const (
	geminiAudioPerSecond = 32
	audioPerSecond       = 10
	videoPerSecond       = 300
	geminiPerPage        = 258
	perPage              = 3000

	unknownAudioBytesPerSecond = 64000 / 8
	unknownVideoBytesPerSecond = 1000000 / 8
	unknownBytesPerPage        = 20000
)

// audioTokens is what seconds of audio cost.
func audioTokens(d Dialect, seconds int64) int64 {
	if d == DialectGemini {
		return seconds * geminiAudioPerSecond
	}
	return seconds * audioPerSecond
}

// decodedLen is how many bytes a base64 text (JSON's backslashes aside)
// decodes to, near enough.
func decodedLen(b64 string) int64 {
	return int64(len(strings.TrimRight(b64, "="))) * 3 / 4
}

// wavSeconds reads a WAV's length from its header: its data over its byte
// rate (64 kbit/s when the header is cut short), rounded up; audio is false
// for a RIFF file that is not a WAV.
func wavSeconds(b64 string) (seconds int64, audio bool) {
	var small [smallHead / 4 * 3]byte
	head := decodeSmallHead(b64, &small)
	if len(head) >= 12 && string(head[8:12]) != "WAVE" {
		return 0, false
	}
	rate := int64(unknownAudioBytesPerSecond)
	if len(head) >= 32 && string(head[12:16]) == "fmt " && binary.LittleEndian.Uint32(head[28:]) > 0 {
		rate = int64(binary.LittleEndian.Uint32(head[28:]))
	}
	return min(ceilDiv(max(decodedLen(b64)-44, 0), rate), MaxTokens), true
}

// mp3BitRates are MPEG-1 and MPEG-2 (and 2.5) Layer III bitrates, in kbit/s,
// by the index of a frame header.
var mp3BitRates = [2][16]int64{
	{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0},
	{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},
}

// mp3Seconds reads an MP3's length from the bitrate of its first frame,
// after its ID3 tag (whose size says where the frame is).
func mp3Seconds(b64 string, size int64) int64 {
	var buf headBuffer
	head := decodeHead(b64, maxHeaderBase64, &buf)
	rate := int64(unknownAudioBytesPerSecond)
	if len(head) >= 10 {
		tag := int64(head[6]&0x7f)<<21 | int64(head[7]&0x7f)<<14 | int64(head[8]&0x7f)<<7 | int64(head[9]&0x7f) + 10
		if f := head[min(tag, int64(len(head))):]; len(f) >= 3 && f[0] == 0xff && f[1]&0xe0 == 0xe0 && f[1]>>1&3 == 1 { // Layer III
			version := 1 // MPEG-2 or 2.5
			if f[1]>>3&3 == 3 {
				version = 0 // MPEG-1
			}
			if kbps := mp3BitRates[version][f[2]>>4]; kbps > 0 {
				rate = kbps * 1000 / 8
			}
		}
		size -= min(tag, size)
	}
	return ceilDiv(size, rate)
}

// mp4Seconds reads an MP4's length from its movie header, at its start (a
// file written for streaming) or its end; else its size at bytesPerSecond
// (a low bitrate).
func mp4Seconds(b64 string, size, bytesPerSecond int64) int64 {
	var buf headBuffer
	if seconds, ok := mvhdSeconds(decodeHead(b64, maxHeaderBase64, &buf)); ok {
		return seconds
	}
	// The tail is read where its base64 is aligned: in a text without
	// escaped slashes.
	if tail := len(b64) - maxHeaderBase64; tail > 0 && !strings.Contains(b64, `\`) {
		if seconds, ok := mvhdSeconds(decodeHead(b64[tail/4*4:], maxHeaderBase64, &buf)); ok {
			return seconds
		}
	}
	return ceilDiv(size, bytesPerSecond)
}

// mvhdSeconds reads the duration of a movie header box in b: its version,
// flags, times, timescale and duration (32 or 64 bits).
func mvhdSeconds(b []byte) (int64, bool) {
	i := bytes.Index(b, []byte("mvhd"))
	if i < 0 || i+24 > len(b) {
		return 0, false
	}
	var scale, duration uint64
	switch {
	case b[i+4] == 0:
		scale, duration = uint64(binary.BigEndian.Uint32(b[i+16:])), uint64(binary.BigEndian.Uint32(b[i+20:]))
	case b[i+4] == 1 && i+36 <= len(b):
		scale, duration = uint64(binary.BigEndian.Uint32(b[i+24:])), binary.BigEndian.Uint64(b[i+28:])
	}
	if scale == 0 {
		return 0, false
	}
	return int64(min((duration+scale-1)/scale, uint64(MaxTokens))), true
}

// maxPDFBase64 bounds the base64 of a PDF read for its pages; the pages of
// a larger one are extrapolated.
const maxPDFBase64 = 4 << 20

// pdfPages counts a PDF's page objects ("/Type /Page", not "/Pages"), in
// its first maxPDFBase64 bytes of base64 and extrapolated to the rest; a PDF
// whose pages cannot be seen (compressed object streams) counts a page every
// unknownBytesPerPage.
func pdfPages(b64 string, size int64) int64 {
	var buf headBuffer
	read := decodeHead(b64, maxPDFBase64, &buf)
	var pages int64
	for _, object := range [...]string{"/Type/Page", "/Type /Page"} {
		for rest := read; ; {
			i := bytes.Index(rest, []byte(object))
			if i < 0 {
				break
			}
			rest = rest[i+len(object):]
			if len(rest) == 0 || rest[0] != 's' {
				pages++
			}
		}
	}
	if pages == 0 {
		return max(ceilDiv(size, unknownBytesPerPage), 1)
	}
	if int64(len(read)) < size {
		pages = ceilDiv(pages*size, int64(len(read)))
	}
	return pages
}
