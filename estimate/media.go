package estimate

import (
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/tidwall/gjson"
)

// Images sent inline (base64, in a data URL or in Anthropic's and Gemini's
// "data" members) are counted as their provider bills them, by their size in
// pixels, read from the image's header: never their bytes as text. The
// walker skips them as it skips every part it does not count; media finds
// them by their first bytes in base64 (PNG, JPEG, GIF, WebP) right after a
// quote or a data URL's comma, wherever they are in the body.

// mediaMagic are the base64 forms of the first bytes of the image formats
// whose size media reads: PNG, JPEG, GIF, WebP (RIFF).
var mediaMagic = [...]string{"iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR"}

// maxHeaderBase64 bounds the base64 read to find an image's size: a JPEG's
// frame header follows its metadata (EXIF, ICC profiles), usually within
// the first 64 KiB; one further away is counted as an image of unknown size.
const maxHeaderBase64 = 256 << 10

// Images of unknown size (a JPEG whose frame header is past the bytes read,
// a header that cannot be read) are counted as 1024 × 1024 pixels.
const unknownSide = 1024

// media is what the inline images of a body cost, in tokens, by the rules of
// the dialect's provider, and how many bytes of base64 they took: the bytes
// a size estimate of the body counts as text, and should not. It reads the
// body once per format (strings.Index, fast in WASM too), and each image's
// header.
func media(s string, d Dialect) (tokens, bytes int64) {
	var next [len(mediaMagic)]int // where each format's next image starts (-1: none left)
	for m := range next {
		next[m] = findMagic(s, 0, mediaMagic[m])
	}
	for {
		m := -1
		for k, j := range next {
			if j >= 0 && (m < 0 || j < next[m]) {
				m = k
			}
		}
		if m < 0 {
			return tokens, bytes
		}
		j := next[m]
		end := strings.IndexByte(s[j:], '"')
		if end < 0 {
			end = len(s) - j
		}
		b64 := s[j : j+end]
		if w, h, image := imageSize(b64, m); image {
			if lowDetail(s, j, j+end) {
				tokens += openAILowDetail
			} else {
				tokens += imageTokens(d, w, h)
			}
			bytes += int64(len(b64))
		}
		for k := range next { // the images inside this one's base64 are none
			if next[k] >= 0 && next[k] < j+end {
				next[k] = findMagic(s, j+end, mediaMagic[k])
			}
		}
	}
}

// findMagic returns where the next image of a format (its base64 first
// bytes) starts at or after s[i], after a quote or a data URL's comma, or -1.
// It looks for the magic from its first upper-case or '/' byte, rare in
// prose: strings.Index finds candidates by their first byte (IndexByte,
// assembly in WASM too), and one that is frequent ('i') makes it slow.
func findMagic(s string, i int, magic string) int {
	skip := 0
	if magic[0] >= 'a' && magic[0] <= 'z' {
		skip = 1 // "iVBORw0KGgo": from 'V'
	}
	anchor := magic[skip:]
	for i+skip < len(s) {
		k := strings.Index(s[i+skip:], anchor)
		if k < 0 {
			return -1
		}
		j := i + k // where the magic would start
		if s[j:j+skip] == magic[:skip] && j > 0 && (s[j-1] == '"' || s[j-1] == ',') {
			return j
		}
		i = j + 1
	}
	return -1
}

// imageSize reads an image's width and height from the start of its base64
// (escaped slashes, "\/", as some JSON encoders write them, read as '/'), or
// unknownSide when they cannot be read; image is false for a RIFF file that
// is not a WebP image (a WAV: audio, not counted here).
func imageSize(b64 string, format int) (w, h int, image bool) {
	n := 64 // PNG, GIF and WebP give their size in their first 30 bytes
	if format == 1 {
		n = maxHeaderBase64 // a JPEG's is after its metadata
	}
	head := decodeHead(b64, n)
	if format == 3 && len(head) >= 12 && string(head[8:12]) != "WEBP" {
		return 0, 0, false
	}
	var ok bool
	switch format {
	case 0:
		w, h, ok = pngSize(head)
	case 1:
		w, h, ok = jpegSize(head)
	case 2:
		w, h, ok = gifSize(head)
	case 3:
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

// lowDetail says whether the image whose base64 is s[from:to] is sent with
// "detail": "low": the member is in its object, before or after it (a few
// bytes: "url" and "detail" are its object's members).
func lowDetail(s string, from, to int) bool {
	const window = 48
	before := s[max(from-len(`"url":"data:image/webp;base64,`)-window, 0):from]
	after := s[to:min(to+window, len(s))]
	return hasLowDetail(before) || hasLowDetail(after)
}

func hasLowDetail(s string) bool {
	i := strings.Index(s, `"detail"`)
	if i < 0 {
		return false
	}
	rest := strings.TrimLeft(s[i+len(`"detail"`):], " \t\r\n:")
	return strings.HasPrefix(rest, `"low"`)
}

// maxSide bounds a side an image's header claims (providers refuse larger
// images): the tiles of a lying header stay countable.
const maxSide = 16384

// decodeHead decodes at most n bytes of base64 from the start of b64, up to
// the first byte that is not base64 (after dropping JSON's backslashes).
func decodeHead(b64 string, n int) []byte {
	var clean []byte
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
	clean = clean[:len(clean)/4*4]
	out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
	k, _ := base64.StdEncoding.Decode(out, clean)
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
//     ("detail": "high" or "auto"; a "low" image costs 85: see lowDetail).
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
}

// read reads the part's member k, whose value is at w.i (v).
func (r *imageRef) read(w *walker, k string, v int) {
	w.skip()
	raw := w.s[v:w.i]
	value := gjson.Parse(raw)
	switch k {
	case "image_url": // a URL (Responses), or an object with one (chat)
		url := value
		if value.IsObject() {
			url = value.Get("url")
			if value.Get("detail").Raw == `"low"` {
				r.low = 1
			}
		}
		r.byURL = r.byURL || url.Type == gjson.String && !strings.HasPrefix(url.Raw, `"data:`)
	case "detail":
		if raw == `"low"` {
			r.low = 1
		}
	case "file_id":
		r.byURL = r.byURL || value.Type == gjson.String
	case "source": // Anthropic's: base64 (inline, media counts it), url or file
		t := value.Get("type").Raw
		r.byURL = r.byURL || t == `"url"` || t == `"file"`
	case "fileData", "file_data":
		mime := value.Get("mimeType")
		if !mime.Exists() {
			mime = value.Get("mime_type")
		}
		r.geminiImage = r.geminiImage || strings.HasPrefix(mime.Raw, `"image/`)
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
