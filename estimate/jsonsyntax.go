package estimate

import "strings"

// enter consumes the '{' or '[' at w.i.
func (w *walker) enter() bool {
	w.steps++
	w.depth++
	if w.depth > MaxDepth {
		w.bad = true
		return false
	}
	w.i++
	return true
}

// key moves to the next member of the object being read and reads its key,
// decoded, and the colon after it, leaving w.i at the value. It returns
// false, having consumed the '}', at the end of the object, and on an error.
// first tells whether this is the object's first member.
func (w *walker) key(first bool) (string, bool) {
	// A key right after the '{' or the ',' (blank space aside), as nearly
	// all are, is read from the scan of its content: one call of
	// scanString for a key without escapes right before its colon (a call
	// costs in WASM), and the scan goes on from there for any other.
	s, at := w.s, skipSpace(w.s, w.i)
	i := at
	comma := first || i < len(s) && s[i] == ','
	if !first && comma {
		i = skipSpace(s, i+1)
	}
	if !comma || w.bad || i >= len(s) || s[i] != '"' {
		if !w.bad && at < len(s) && s[at] == '}' { // the end of the object, as next reads it
			w.steps++
			w.i, w.depth = at+1, w.depth-1
			return "", false
		}
		// Not JSON: next and the check of the key's quote say how.
		if !w.next(first, '}') {
			return "", false
		}
		if w.peek() != '"' {
			w.bad = true
			return "", false
		}
		i = w.i
	} else {
		w.steps++ // next's
	}
	j, escapes := scanString(s, i+1, &simpleEscape)
	if escapes == 0 && j+1 < len(s) && s[j] == '"' && s[j+1] == ':' {
		w.steps++ // str's
		w.i = skipSpace(s, j+2)
		return s[i+1 : j], true
	}
	w.i = i
	k := w.memberKey(j, escapes)
	return k, !w.bad
}

// memberKey reads the key at w.i (its opening quote), whose content
// scanString has scanned up to s[j] with escapes two-byte escapes, and the
// colon after it, leaving w.i at the value. It returns the key decoded (as
// decodedStr does).
func (w *walker) memberKey(j, escapes int) string {
	w.steps++ // str's
	raw, n := w.strFrom(w.i+1, j, int64(escapes))
	k := raw
	if n != int64(len(raw)) && !w.bad {
		k = w.decodeEscaped(raw)
	}
	w.ws()
	if w.peek() != ':' {
		w.bad = true
		return ""
	}
	w.i++
	w.ws()
	return k
}

// elem moves to the next element of the array being read. It returns false,
// having consumed the ']', at the end of the array, and on an error.
func (w *walker) elem(first bool) bool {
	return w.next(first, ']')
}

// next moves past the ',' before the next member or element, or past the
// closing byte that ends the object or array.
func (w *walker) next(first bool, closing byte) bool {
	if w.bad {
		return false
	}
	w.steps++
	w.ws()
	switch w.peek() {
	case closing:
		w.i++
		w.depth--
		return false
	case ',':
		if first {
			w.bad = true
			return false
		}
		w.i++
		w.ws()
	default:
		if !first {
			w.bad = true
			return false
		}
	}
	return true
}

// done skips the value that started at v unless it has been read.
func (w *walker) done(v int) {
	if w.i == v && !w.bad {
		w.skip()
	}
}

// skip skips the value at w.i.
func (w *walker) skip() {
	switch w.peek() {
	case '"':
		w.str()
	case '{', '[':
		// Valid values in one call. Its verdict on the others is the
		// walker's (the same grammar, the same depth: MaxDepth is at most
		// what it crosses), which would read the value again in Go to come
		// to it.
		end, ok := skipValue(w.s, w.i, MaxDepth-w.depth, &simpleEscape)
		w.steps++
		if ok {
			w.i = end
		} else {
			w.bad = true
		}
	default:
		w.scalar()
	}
}

// scalar reads a number, true, false or null.
func (w *walker) scalar() {
	w.steps++
	switch w.peek() {
	case 't':
		w.literal("true")
	case 'f':
		w.literal("false")
	case 'n':
		w.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if i := skipNumber(w.s, w.i); i >= 0 {
			w.i = i
		} else {
			w.bad = true
		}
	default:
		w.bad = true
	}
}

// skipNumber skips the number at s[i], returning -1 if there is none.
func skipNumber(s string, i int) int {
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else if i = digits(s, i); i < 0 {
		return -1
	}
	if i < len(s) && s[i] == '.' {
		if i = digits(s, i+1); i < 0 {
			return -1
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		return digits(s, i)
	}
	return i
}

// digits returns the end of the run of digits at s[i:], or -1 if there is
// none.
func digits(s string, i int) int {
	j := i
	for j < len(s) && '0' <= s[j] && s[j] <= '9' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

func (w *walker) literal(lit string) {
	if !strings.HasPrefix(w.s[w.i:], lit) {
		w.bad = true
		return
	}
	w.i += len(lit)
}

// ws skips whitespace.
func (w *walker) ws() {
	w.i = skipSpace(w.s, w.i)
}

// peek returns the byte at w.i, 0 at the end.
func (w *walker) peek() byte {
	if w.i < len(w.s) {
		return w.s[w.i]
	}
	return 0
}

// skipSpace returns the index of the first byte at or after s[i] that is
// not JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
