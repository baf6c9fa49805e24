//go:build !wasm || !gc || noasm

package estimate

// skipValue skips the value at s[i] (an object or an array, for the walker;
// any value, for plainTurns) if it is valid JSON, the grammar
// gjson.ValidBytes accepts, nested at most maxNest deep, the value itself
// counting as 1 (and at most 63). It returns the
// index right after the value, or ok = false when it is not such a value:
// the walker's verdict too (MaxDepth is at most what it crosses).
//
// It is the walker's reading of a value it skips in one tight loop, without
// the walker's state (skip_test.go holds it to that reading, a token at a
// time); in WASM (skip_wasm.s) it costs a few ns a token instead of 100.
func skipValue(s string, i, maxNest int, simple *[256]bool) (end int, ok bool) {
	var objects uint64 // bit d set: the container at depth d is an object
	depth := 0
	for {
		// At a value.
		i = skipSpace(s, i)
		if i >= len(s) {
			return 0, false
		}
		switch c := s[i]; c {
		case '{', '[':
			depth++
			if depth > maxNest || depth > 63 {
				return 0, false
			}
			objects = objects&^(1<<depth) | uint64(c>>5&1)<<depth // '{' is 0x7b, '[' 0x5b
			i = skipSpace(s, i+1)
			if i < len(s) && s[i] == c+2 { // '}' or ']'
				i++
				depth--
				break
			}
			if c == '{' {
				if i, ok = skipKey(s, i, simple); !ok {
					return 0, false
				}
			}
			continue
		case '"':
			if i, ok = skipString(s, i+1, simple); !ok {
				return 0, false
			}
		case 't', 'f', 'n':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if len(s)-i < len(lit) || s[i:i+len(lit)] != lit {
				return 0, false
			}
			i += len(lit)
		default:
			if i = skipNumber(s, i); i < 0 {
				return 0, false
			}
		}
		// After a value: the end of the outermost value, or a comma and the
		// next member or element, or the end of the container.
		for {
			if depth == 0 {
				return i, true
			}
			i = skipSpace(s, i)
			if i >= len(s) {
				return 0, false
			}
			inObject := objects>>depth&1 == 1
			if s[i] == ',' {
				i++
				if inObject {
					if i, ok = skipKey(s, skipSpace(s, i), simple); !ok {
						return 0, false
					}
				}
				break
			}
			if s[i] != "]}"[b2i(inObject)] {
				return 0, false
			}
			i++
			depth--
		}
	}
}

// skipKey skips the key at s[i], the colon after it and the whitespace
// around.
func skipKey(s string, i int, simple *[256]bool) (end int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return 0, false
	}
	if i, ok = skipString(s, i+1, simple); !ok {
		return 0, false
	}
	if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
		return 0, false
	}
	return i + 1, true
}

// skipString skips the rest of a string from s[i], after its opening quote,
// if it is valid: no control character, every escape a two-byte one or a
// \u with four hex digits.
func skipString(s string, i int, simple *[256]bool) (end int, ok bool) {
	for {
		i, _ = scanString(s, i, simple)
		if i >= len(s) {
			return 0, false
		}
		switch s[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(s) || s[i+1] != 'u' {
				return 0, false
			}
			if _, ok := hex4(s, i+2); !ok {
				return 0, false
			}
			i += 6
		default:
			return 0, false
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
