package estimate

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"
)

// skipValue skips valid objects and arrays and refuses anything else, in Go
// and in WASM assembly alike (make test runs this package in both).
func TestSkipValue(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		ok      bool
	}{
		{"empty object", `{}`, true},
		{"empty array", `[ ]`, true},
		{"every kind of value", `{"a" : [1, -0, 0.5, -12.5e+3, 4E-2, 7e9, true, false, null, "s", {}, []], "b":{"c":"\u00e9\n\"\\\/\b\f\r\t"}}`, true},
		{"whitespace everywhere", " {\n\t\"a\"\r: [ 1 , 2 ] , \"b\" : { } } ", true},
		{"a trailing comma", `[1,]`, false},
		{"a leading comma", `[,1]`, false},
		{"a missing comma", `[1 2]`, false},
		{"a missing colon", `{"a" 1}`, false},
		{"a key that is not a string", `{a:1}`, false},
		{"a mismatched close", `[1}`, false},
		{"an unclosed array", `[1`, false},
		{"an unclosed string", `["a]`, false},
		{"a control character", "[\"a\tb\"]", false},
		{"a bad escape", `["\x"]`, false},
		{"a short \\u escape", `["\u12"]`, false},
		{"a \\u escape with a bad digit", `["\u12g4"]`, false},
		{"a lone surrogate escape (valid JSON)", `["\ud800"]`, true},
		{"a number with a leading zero", `[01]`, false},
		{"a number without digits after the point", `[1.]`, false},
		{"a number without an exponent", `[1e]`, false},
		{"a number with a plus sign", `[+1]`, false},
		{"a bare minus", `[-]`, false},
		{"a cut literal", `[tru]`, false},
		{"a misspelt literal", `[nul1]`, false},
		{"a literal at the end", `[true`, false},
		{"63 levels", strings.Repeat("[", 63) + strings.Repeat("]", 63), true},
		{"64 levels, for the walker", strings.Repeat("[", 64) + strings.Repeat("]", 64), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trimmed := strings.TrimSpace(tc.s)
			end, ok := skipValue("x"+trimmed+" ,", 1, MaxDepth, &simpleEscape)
			assert.Equal(t, tc.ok, ok)
			if ok {
				assert.Equal(t, 1+len(trimmed), end)
			}
		})
	}
	// The depth allowed is the caller's.
	_, ok := skipValue(`[[[]]]`, 0, 3, &simpleEscape)
	assert.True(t, ok)
	_, ok = skipValue(`[[[]]]`, 0, 2, &simpleEscape)
	assert.False(t, ok)
}

// Random values, whole, cut or with a byte changed: skipValue accepts
// exactly what the walker's own skipNested accepts (valid values) and ends
// where it ends, and a body that holds them is estimated as the gjson-based
// reference estimates it.
func TestSkipValueAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	pick := func(options ...string) string { return options[r.IntN(len(options))] }
	space := func() string { return pick("", "", "", " ", "\n  ", "\t") }
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(10); {
		case k < 3 && depth < 6:
			var members []string
			for n := r.IntN(4); n > 0; n-- {
				members = append(members, space()+`"`+pick("a", "type", "k\\u0041", "")+`"`+space()+":"+space()+value(depth+1)+space())
			}
			return "{" + strings.Join(members, ",") + space() + "}"
		case k < 5 && depth < 6:
			var elems []string
			for n := r.IntN(4); n > 0; n-- {
				elems = append(elems, space()+value(depth+1)+space())
			}
			return "[" + strings.Join(elems, ",") + "]"
		case k < 7:
			return `"` + pick("", "text", `a\"b`, `\u00e9\ud83d\ude00`, `\n\t`, "é") + `"`
		case k < 9:
			return pick("0", "-1", "12.5", "1e9", "-0.0E-7", "3E+2")
		default:
			return pick("true", "false", "null")
		}
	}
	valid := 0
	for i := range 5000 {
		var v []byte
		for len(v) == 0 || v[0] != '{' && v[0] != '[' {
			v = []byte(value(1))
		}
		switch r.IntN(4) {
		case 0:
			v = v[:1+r.IntN(len(v))]
		case 1:
			v[r.IntN(len(v))] = pick(`"`, `,`, `}`, `]`, `\`, "\x01", `{`, `[`, ` `, `:`, `e`, `-`)[0]
		}
		s := string(v)
		if s[0] == '{' || s[0] == '[' { // where skipValue is called
			end, ok := skipValue(s, 0, MaxDepth, &simpleEscape)
			w := walker{s: s}
			w.skipNested() // what the walker makes of it
			if ok != !w.bad || ok && (end != w.i || !gjson.Valid(s[:end])) {
				t.Fatalf("value %d %s: skipValue = %d, %v; the walker: %d, %v", i, s, end, ok, w.i, !w.bad)
			}
			if ok {
				valid++
			}
		}
		body := []byte(`{"tools":` + s + `,"messages":[{"role":"user","content":"hi"}]}`)
		if got, want := readings(Request(body, DialectOther, opts)), reference(body, "", opts); got != want {
			t.Fatalf("body %d %s: Request = %+v, reference = %+v", i, body, got, want)
		}
	}
	if valid < 1000 {
		t.Fatalf("only %d valid values of 5000", valid)
	}
}

// skipNested skips the object or array at w.i, a token at a time with the
// walker's own reading: what skipValue is held to (the walker's skip once
// was this, and read what skipValue did not accept again with it).
func (w *walker) skipNested() {
	var objects [MaxDepth/64 + 1]uint64 // bit d set: the container opened at depth d is an object
	outer := w.depth
	atValue := true // w.i is at a value, else right after one
	for !w.bad {
		if atValue {
			switch c := w.peek(); c {
			case '{', '[':
				if !w.enter() {
					return
				}
				word, bit := w.depth/64, uint(w.depth%64)
				objects[word] = objects[word]&^(1<<bit) | uint64(c>>5&1)<<bit // '{' is 0x7b, '[' 0x5b
				w.ws()
				if w.peek() == c+2 { // '}' or ']'
					w.i++
					w.depth--
					atValue = false
				} else if c == '{' {
					w.skipKey()
				}
				continue
			case '"':
				w.str()
			default:
				w.scalar()
			}
			atValue = false
			continue
		}
		if w.depth == outer {
			return
		}
		inObject := objects[w.depth/64]>>uint(w.depth%64)&1 == 1
		w.ws()
		switch w.peek() {
		case ',':
			w.i++
			w.ws()
			if inObject {
				w.skipKey()
			}
			atValue = true
		case '}':
			w.close(inObject)
		case ']':
			w.close(!inObject)
		default:
			w.bad = true
		}
	}
}

// close consumes the closing byte of the container skipNested is in, if it
// matches the container.
func (w *walker) close(matches bool) {
	if !matches {
		w.bad = true
		return
	}
	w.i++
	w.depth--
}

// skipKey reads a key, undecoded, and the colon after it, leaving w.i at
// the value.
func (w *walker) skipKey() {
	if w.peek() != '"' {
		w.bad = true
		return
	}
	w.str()
	w.ws()
	if w.peek() != ':' {
		w.bad = true
		return
	}
	w.i++
	w.ws()
}
