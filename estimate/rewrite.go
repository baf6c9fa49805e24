package estimate

import (
	"strings"
	"unsafe"
)

// ReplaceModel returns body with the value of its top-level "model" member
// replaced by the JSON string of model, every other byte as it was: the
// body of a request served by another model than the one it names. It
// refuses (ok false) the bodies ModelValue refuses.
func ReplaceModel(body []byte, model string) (out []byte, ok bool) {
	at, end, ok := ModelValue(body)
	if !ok {
		return nil, false
	}
	return SpliceModel(body, at, end, model), true
}

// SpliceModel returns body with body[at:end] (its "model" string, as
// ModelValue finds it) replaced by the JSON string of model.
func SpliceModel(body []byte, at, end int, model string) []byte {
	out := make([]byte, 0, len(body)-(end-at)+len(model)+2)
	out = append(out, body[:at]...)
	out = appendJSONString(out, model)
	return append(out, body[end:]...)
}

// ModelValue finds the value of body's top-level "model" member, a JSON
// string, at body[at:end] (quotes included). It refuses (ok false) a body
// an upstream could read another model from: one that is not a JSON object
// (strictly: no byte order mark, nothing after it), whose "model" is not a
// string, or that has no member parsers may take for "model" or more than
// one (a duplicate, a key in another letter case, an escaped key: see
// ambiguous.go).
func ModelValue(body []byte) (at, end int, ok bool) {
	s := unsafe.String(unsafe.SliceData(body), len(body))
	w := walker{s: s}
	w.ws()
	if w.peek() != '{' || !w.enter() {
		return 0, 0, false
	}
	at, end, models := 0, 0, 0
	for first := true; w.next(first, '}'); first = false {
		if w.peek() != '"' {
			return 0, 0, false
		}
		k := w.i
		raw, n := w.str()
		key := raw
		if n != int64(len(raw)) {
			key = decodeString(w.s[k:w.i])
		}
		isModel := w.topKey(key) == "model"
		w.ws()
		if w.peek() != ':' {
			return 0, 0, false
		}
		w.i++
		w.ws()
		v := w.i
		switch {
		case !isModel:
			w.skip()
		case w.peek() != '"':
			return 0, 0, false
		default:
			w.str()
			at, end, models = v, w.i, models+1
		}
		if w.bad {
			return 0, 0, false
		}
	}
	w.ws()
	if w.bad || w.i != len(s) || models != 1 {
		return 0, 0, false
	}
	return at, end, true
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// ReplacePathModel returns path with the model it names (a Gemini or
// Vertex AI path: …/models/<model>:<method>, see ModelFromPath) replaced by
// model, every other byte as it was. It refuses (ok false) a path that names
// no model, a path with percent escapes (which readers may decode
// otherwise), and a model that is empty or has a byte a path segment would
// read otherwise ('/', ':', '?', '#', '%').
func ReplacePathModel(path, model string) (out string, ok bool) {
	if model == "" || strings.ContainsAny(model, "/:?#%") || strings.IndexByte(path, '%') >= 0 {
		return "", false
	}
	p := path
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	at := -1 // where the segment after the last "models" segment starts
	for i := 0; ; {
		k := strings.Index(p[i:], "/models/")
		if k < 0 {
			break
		}
		at = i + k + len("/models/")
		i = at - 1 // "/models/models/…": the next "models" may start at this '/'
	}
	if at < 0 {
		return "", false
	}
	seg := p[at:]
	if j := strings.IndexByte(seg, '/'); j >= 0 {
		seg = seg[:j]
	}
	colon := strings.IndexByte(seg, ':')
	if colon <= 0 || ModelFromPath(path) != seg[:colon] {
		return "", false
	}
	return path[:at] + model + path[at+colon:], true
}
