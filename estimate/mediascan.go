package estimate

import "math/bits"

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
