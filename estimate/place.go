package estimate

import "strings"

// Where media are. A base64 value is a medium only where an API puts one,
// and only as the kind of medium its place or its type names (a medium's
// header must then be that kind's: see mediumTokens); any other string is
// text, whatever it starts with. The places:
//
//   - a data URL ("data:<type>[;…];base64,…"), its type naming the kind:
//     the "url" of OpenAI chat's "image_url" object, the "image_url" of a
//     Responses part of type "input_image" (images), the "file_data" of
//     OpenAI chat's "file" object or of a Responses part of type
//     "input_file";
//   - a "data" member: of an Anthropic "source" object whose "type" is
//     "base64" (the kind its "media_type" names), of a Gemini "inlineData"
//     or "inline_data" object (its "mimeType" or "mime_type"), of OpenAI
//     chat's "input_audio" object (audio);
//   - a "bytes" member of a Bedrock Converse "source" object, the value of
//     an "image", "video", "audio" or "document" (a PDF) member.
//
// The scan does not parse the body: it reads a few hundred bytes around a
// candidate (placeWindow) for its key, its object's other members and the
// key of that object (and of its parent, for Bedrock), backward as well as
// forward, and no further back than the candidate before it nor further on
// than the one after it (mediascan.go: what it reads around candidates
// adds up to a few times the body, however close they are). Keys are read
// as written (an escaped key is not recognised); an object not read whole
// within those bounds (a member before the value that is an object or an
// array, which is not read backward), a member given twice with two
// values, a quote that may be escaped: not a medium, the value is counted
// as text (the more expensive reading).

// Kinds of media, as a place or a type names them.
const (
	kindNone = iota
	kindImage
	kindAudio
	kindVideo
	kindPDF
)

// placeWindow bounds how far the scan reads around a candidate for each
// of its key, its object's members before it, those after it, and the key
// of its parent object.
const placeWindow = 512

// maxDataURLHead bounds a data URL's head ("data:", the type and its
// parameters, ";base64,").
const maxDataURLHead = 256

// inline says what kind of medium (kindNone: none) the base64 that starts
// at s[j] is by its place, and whether it is an image sent with OpenAI's
// "detail": "low"; end is where its string ends (its closing quote, or
// len(s)). It reads no further back than s[lo] and no further on than
// s[hi-1] (the scan's neighbouring candidates; 0 and len(s) for the
// walker, which reads one value so per object): a string that does not
// end before hi (or the body's end) is no medium.
func inline(s string, j, lo, hi int) (kind int, low bool, end int) {
	if j <= lo {
		return kindNone, false, 0
	}
	var key, claim string
	var at int // the key's opening quote
	switch s[j-1] {
	case '"': // a "data" or "bytes" member
		if !opensString(s, j-1, lo) {
			return kindNone, false, 0
		}
		key, at = backKey(s, j-1, max(j-1-placeWindow, lo))
		if key != "data" && key != "bytes" {
			return kindNone, false, 0
		}
	case ',': // a data URL
		if !strings.HasSuffix(s[lo:j], ";base64,") {
			return kindNone, false, 0
		}
		from := max(j-maxDataURLHead, lo)
		q := strings.LastIndexByte(s[from:j], '"')
		if q < 0 {
			return kindNone, false, 0
		}
		q += from
		if !strings.HasPrefix(s[q+1:j], "data:") || strings.Index(s[q:j], ";base64,") != j-q-len(";base64,") || !opensString(s, q, lo) {
			return kindNone, false, 0 // not a data URL, or not where its first ";base64," ends
		}
		claim, _, _ = strings.Cut(s[q+1+len("data:"):j], ";")
		key, at = backKey(s, q, max(q-placeWindow, lo))
		if key != "url" && key != "image_url" && key != "file_data" {
			return kindNone, false, 0
		}
	default:
		return kindNone, false, 0
	}
	if at < 0 {
		return kindNone, false, 0
	}
	end = strings.IndexByte(s[j:hi], '"')
	switch {
	case end >= 0:
		end += j
	case hi == len(s):
		end = len(s)
	default: // its end is past the next candidate: no base64 holds one
		return kindNone, false, hi
	}
	if end < len(s) && s[end-1] == '\\' { // an escaped quote: no base64
		return kindNone, false, end
	}
	o := object{start: -1, end: -1, keyAt: -1}
	o.before(s, at, max(at-placeWindow, lo))
	if end < len(s) {
		o.after(s, end+1, min(end+1+placeWindow, hi))
	}
	if o.start < 0 || o.end < 0 || o.twice { // the object not read whole, a member that says two things
		return kindNone, false, end
	}
	switch key {
	case "url", "image_url": // OpenAI chat's image_url object, a Responses input_image
		if key == "url" && o.key == "image_url" || key == "image_url" && o.typ == "input_image" {
			if kind = kindOf(claim); kind == kindImage {
				return kind, o.detail == "low", end
			}
		}
	case "file_data": // OpenAI chat's file object, a Responses input_file
		if o.key == "file" || o.typ == "input_file" {
			return kindOf(claim), false, end
		}
	case "data":
		switch {
		case o.key == "source" && o.typ == "base64": // Anthropic
			return kindOf(o.mediaType), false, end
		case o.key == "inlineData" || o.key == "inline_data": // Gemini
			return kindOf(o.mimeType), false, end
		case o.key == "input_audio": // OpenAI chat
			return kindAudio, false, end
		}
	case "bytes": // Bedrock Converse: {"image": {"format": "png", "source": {"bytes": …}}}
		if o.key == "source" && o.keyAt >= 0 {
			block := object{start: -1, end: -1, keyAt: -1}
			block.before(s, o.keyAt, max(o.keyAt-placeWindow, lo))
			switch block.key {
			case "image":
				return kindImage, false, end
			case "audio":
				return kindAudio, false, end
			case "video":
				return kindVideo, false, end
			case "document":
				return kindPDF, false, end
			}
		}
	}
	return kindNone, false, end
}

// kindOf is the kind of medium a media type names (image/…, audio/…,
// video/…, application/pdf; case aside, its slash escaped or not).
func kindOf(mediaType string) int {
	i := 0
	for i < len(mediaType) && mediaType[i] != '/' && mediaType[i] != '\\' {
		i++
	}
	if i == len(mediaType) {
		return kindNone
	}
	top, sub := mediaType[:i], strings.TrimPrefix(strings.TrimPrefix(mediaType[i:], `\`), "/")
	switch {
	case strings.EqualFold(top, "image"):
		return kindImage
	case strings.EqualFold(top, "audio"):
		return kindAudio
	case strings.EqualFold(top, "video"):
		return kindVideo
	case strings.EqualFold(top, "application") && strings.EqualFold(sub, "pdf"):
		return kindPDF
	}
	return kindNone
}

// object is what the scan reads of the JSON object around a candidate: the
// members that say what it is, and the key whose value the object is.
type object struct {
	start, end int    // where its '{' is, and where its '}' ends (-1: not read)
	key        string // the key whose value it is ("" when not read: an array's element, or too far)
	keyAt      int    // that key's opening quote (-1: not read)

	typ, mediaType, mimeType, format, detail string
	seen                                     [5]bool
	twice                                    bool // one of them given twice with two values
}

// note keeps a member's key and its string value (as written).
func (o *object) note(k, v string) {
	var f int
	var field *string
	switch k {
	case "type":
		f, field = 0, &o.typ
	case "media_type":
		f, field = 1, &o.mediaType
	case "mimeType", "mime_type":
		f, field = 2, &o.mimeType
	case "format":
		f, field = 3, &o.format
	case "detail":
		f, field = 4, &o.detail
	default:
		return
	}
	if o.seen[f] && *field != v {
		o.twice = true
	}
	o.seen[f], *field = true, v
}

// before reads backward the members of the object before the member whose
// key's opening quote is s[at], to the object's '{' and the key before it,
// no further back than s[lo].
func (o *object) before(s string, at, lo int) {
	i := at
	for {
		i = backSpace(s, i, lo)
		if i <= lo {
			return
		}
		if s[i-1] == '{' {
			o.start = i - 1
			break
		}
		if s[i-1] != ',' {
			return
		}
		// The member before the comma: a string value, or a scalar.
		i = backSpace(s, i-1, lo)
		if i <= lo {
			return
		}
		var v string
		if s[i-1] == '"' {
			q := backString(s, i, lo)
			if q < 0 {
				return
			}
			v, i = s[q+1:i-1], q
		} else {
			k := i
			for k > lo && scalarByte(s[k-1]) {
				k--
			}
			if k == i { // an object or an array: not read backward
				return
			}
			i = k
		}
		k, kq := backKey(s, i, lo)
		if kq < 0 {
			return
		}
		o.note(k, v)
		i = kq
	}
	o.key, o.keyAt = backKey(s, o.start, lo)
}

// after reads the members of the object after a member whose value ends
// before s[i], to the object's '}', no further than s[hi]: each value in
// one call of skipValue (a walker would be a kilobyte to clear for each
// candidate).
func (o *object) after(s string, i, hi int) {
	s = s[:hi]
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return
		}
		switch s[i] {
		case '}':
			o.end = i + 1
			return
		case ',':
			i++
		default:
			return
		}
		i = skipSpace(s, i)
		if i >= len(s) || s[i] != '"' {
			return
		}
		e, ok := skipValue(s, i, 1, &simpleEscape)
		if !ok {
			return
		}
		k := s[i+1 : e-1]
		if i = skipSpace(s, e); i >= len(s) || s[i] != ':' {
			return
		}
		i = skipSpace(s, i+1)
		v := i
		if i, ok = skipValue(s, i, 63, &simpleEscape); !ok {
			return
		}
		if s[v] == '"' {
			o.note(k, s[v+1:i-1])
		}
	}
}

// backKey reads backward the key of the value that starts at s[i] (its
// '"' and ':', blank space aside): the key as written, and its opening
// quote, or -1 when there is none after s[lo].
func backKey(s string, i, lo int) (string, int) {
	i = backSpace(s, i, lo)
	if i <= lo || s[i-1] != ':' {
		return "", -1
	}
	i = backSpace(s, i-1, lo)
	if i <= lo || s[i-1] != '"' {
		return "", -1
	}
	q := backString(s, i, lo)
	if q < 0 {
		return "", -1
	}
	return s[q+1 : i-1], q
}

// backString returns the opening quote of the string whose closing quote
// is s[i-1]: the first quote before it that no backslash escapes; -1 when
// none is after s[lo], or one cannot be told.
func backString(s string, i, lo int) int {
	for k := i - 2; k >= lo; k-- {
		k = strings.LastIndexByte(s[lo:k+1], '"')
		if k < 0 {
			return -1
		}
		k += lo
		n := 0 // the backslashes before it
		for k-n-1 >= lo && s[k-n-1] == '\\' {
			n++
		}
		if k-n-1 < lo && n > 0 {
			return -1 // more of them may be before s[lo]
		}
		if n%2 == 0 {
			return k
		}
	}
	return -1
}

// opensString says whether the quote at s[q] is one no backslash escapes
// (read within placeWindow, no further back than s[lo]): in JSON, one
// followed by a string's content opens it. When that cannot be told, it is
// not.
func opensString(s string, q, lo int) bool {
	n := 0
	for q-n-1 >= lo && s[q-n-1] == '\\' {
		if n++; n > placeWindow {
			return false
		}
	}
	if q-n-1 < lo && lo > 0 {
		return false // what is before s[lo] is not read
	}
	return n%2 == 0
}

// backSpace returns i moved back over the JSON blank space before it, no
// further back than lo.
func backSpace(s string, i, lo int) int {
	for i > lo && (s[i-1] == ' ' || s[i-1] == '\t' || s[i-1] == '\n' || s[i-1] == '\r') {
		i--
	}
	return i
}

// scalarByte says whether c may be part of a number, true, false or null.
func scalarByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}
