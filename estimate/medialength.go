package estimate

import (
	"bytes"
	"encoding/binary"
	"strings"
)

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
