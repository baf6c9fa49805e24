package estimate

import "encoding/binary"

// Images of unknown size (a JPEG whose frame header is past the bytes read,
// a header that cannot be read) are counted as 1024 × 1024 pixels.
const unknownSide = 1024

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

// imageRefTokens is what images sent by reference cost: n of them, and low
// of them with "detail": "low".
func imageRefTokens(d Dialect, n, low int64) int64 {
	unknown := imageTokens(d, unknownSide, unknownSide)
	if d == DialectAnthropic || d == DialectGemini { // no "detail"
		return (n + low) * unknown
	}
	return n*unknown + low*openAILowDetail
}
