package estimate

import (
	"encoding/base64"
	"strings"
)

// maxHeaderBase64 bounds the base64 read to find an image's size: a JPEG's
// frame header follows its metadata (EXIF, ICC profiles), usually within
// the first 64 KiB; one further away is counted as an image of unknown size.
const maxHeaderBase64 = 256 << 10

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

// decodedLen is how many bytes a base64 text (JSON's backslashes aside)
// decodes to, near enough.
func decodedLen(b64 string) int64 {
	return int64(len(strings.TrimRight(b64, "="))) * 3 / 4
}
