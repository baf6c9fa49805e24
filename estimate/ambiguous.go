package estimate

import (
	"strings"
	"unicode/utf8"
)

// Bodies that JSON parsers read differently. The limiter prices and limits
// a request by what its upstream reads; where common parsers disagree, it
// must take the reading that costs most (see Request). What disagrees:
//
//   - A UTF-8 byte order mark before the JSON: Python's json (FastAPI,
//     vLLM, SGLang, LiteLLM) reads a body of bytes without it; strict
//     parsers refuse the body.
//   - NaN, Infinity and -Infinity as values (Python's json), comments and
//     trailing commas (JSON5 and lenient modes of other parsers): read as
//     those parsers read them; strict parsers refuse the body.
//   - A top-level key given more than once, or in another letter case:
//     Go's encoding/json (Ollama, one-api/new-api and other Go upstreams)
//     matches keys without regard to case, with Unicode simple folding
//     ("ſtream" is "stream" to it), and most parsers keep the last
//     occurrence, some the first. Every "model" value so given is a model
//     the request may name; of two output caps, the larger counts.
//   - A model name that is not valid UTF-8: Go reads each bad byte as
//     U+FFFD, others keep the bytes or refuse the body.
//
// Case variants of keys inside messages and parts ("Content") count no
// prompt text: the estimate is only a reservation, corrected by the usage
// the response reports.

// MaxOtherModels bounds the other models an Estimate names: a body naming
// more has a model that cannot be told (Estimate.UnknownModel).
const MaxOtherModels = 3

// What makes a body ambiguous (Estimate.Ambiguous), in words a client can
// read in a 400.
const (
	AmbiguousBOM     = "the body starts with a byte order mark"
	AmbiguousLenient = "the body is not strict JSON (NaN, Infinity, a comment or a trailing comma)"
	AmbiguousModel   = `the body names its "model" more than once, or with keys in other letter cases, with different values`
	AmbiguousUTF8    = "the body's model name is not valid UTF-8"
	AmbiguousCap     = "the body gives an output cap more than once with different values"
	AmbiguousUnread  = "the body starts as a JSON object but cannot be read as JSON"
)

// byteOrderMark is UTF-8's.
const byteOrderMark = "\xef\xbb\xbf"

// topKeys are the top-level keys the walk reads.
var topKeys = [...]string{
	"model", "messages", "contents", "input", "instructions", "prompt", "system",
	"systemInstruction", "system_instruction", "tools", "functions", "tool_choice",
	"max_completion_tokens", "max_tokens", "max_output_tokens", "generationConfig", "generation_config",
	"response_format", "text", "output_format", "outputConfig", "toolConfig",
}

// camelTopKeys are the top-level keys with upper-case letters: the only
// ones a key of lower-case ASCII alone can be a case variant of.
var camelTopKeys = [...]string{"systemInstruction", "generationConfig", "outputConfig", "toolConfig"}

// topKey returns the top-level key the walk reads that k is to a parser
// that matches keys without regard to case (Go's encoding/json), noting
// the body ambiguous when k is such a variant; any other key is returned
// as it is. A key of lower-case ASCII, the common case, costs a scan of
// its bytes and two comparisons.
func (w *walker) topKey(k string) string {
	switch k {
	case "model", "messages", "contents", "input", "instructions", "prompt", "system",
		"systemInstruction", "system_instruction", "tools", "functions", "tool_choice",
		"max_completion_tokens", "max_tokens", "max_output_tokens", "generationConfig", "generation_config",
		"response_format", "text", "output_format", "outputConfig", "toolConfig":
		return k
	}
	if len(k) > 3*len("max_completion_tokens") { // no variant is longer (3 bytes is the longest fold of an ASCII letter)
		return k
	}
	plain := true
	for i := 0; i < len(k) && plain; i++ {
		plain = k[i] < utf8.RuneSelf && (k[i] < 'A' || k[i] > 'Z')
	}
	candidates := topKeys[:]
	if plain {
		candidates = camelTopKeys[:]
	}
	for _, known := range candidates {
		if (!plain || len(k) == len(known)) && strings.EqualFold(k, known) { // ASCII folds keep the length
			w.ambiguous = `the body gives the key "` + known + `" in another letter case`
			return known
		}
	}
	return k
}

// noteModel takes the raw string token of a "model" member: the last one
// becomes the model, the others distinct from it are kept (see others).
func (w *walker) noteModel(tok string) {
	if w.model != "" && w.model != tok {
		w.noteOther(w.model)
	}
	w.model = tok
}

// noteOther keeps a model value another parser may read.
func (w *walker) noteOther(tok string) {
	for _, o := range w.others {
		if o == tok {
			return
		}
	}
	for i := range w.others {
		if w.others[i] == "" {
			w.others[i] = tok
			return
		}
	}
	w.tooMany = true
}

// models sets e's model and other models from the walk's, decoded and
// copied (the body may be reused once Request returns), and notes what
// makes them ambiguous.
func (w *walker) models(e *Estimate) {
	if w.ambiguous != "" && e.Ambiguous == "" {
		e.Ambiguous = w.ambiguous
	}
	if w.dialect == DialectGemini || w.model == "" { // the path names the model (see Request)
		return
	}
	m := decodeString(w.model)
	if m == "" {
		return
	}
	e.Model = strings.Clone(m)
	n := 0
	add := func(o string) {
		if o == "" || o == e.Model || n > 0 && contains(e.OtherModels[:n], o) {
			return
		}
		if n == MaxOtherModels {
			w.tooMany = true
			return
		}
		e.OtherModels[n] = strings.Clone(o)
		n++
	}
	for _, tok := range w.others {
		if tok != "" {
			add(decodeString(tok))
		}
	}
	if n > 0 {
		e.Ambiguous = AmbiguousModel
	}
	// Invalid UTF-8 is read by Go as U+FFFD, by others as it is.
	for _, m := range append([]string{e.Model}, e.OtherModels[:n]...) {
		if !utf8.ValidString(m) {
			add(strings.ToValidUTF8(m, string(utf8.RuneError)))
			e.Ambiguous = AmbiguousUTF8
		}
	}
	if w.tooMany {
		e.UnknownModel = true
		e.Ambiguous = AmbiguousModel
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// looksLikeObject reports whether the body's first byte other than JSON
// whitespace is '{': a body meant as a JSON object, which names its model
// if it names one.
func looksLikeObject(s string) bool {
	i := skipSpace(s, 0)
	return i < len(s) && s[i] == '{'
}

// relaxed returns the body rewritten as strict JSON the way lenient
// parsers read it: comments (// to the end of the line, /* to */) and
// commas before a closing '}' or ']' blanked, NaN, Infinity and -Infinity
// written 0 (and blanks), in place of a copy: every byte stays where it
// was. ok is false when the body has none of these, or an unterminated
// comment or string: no lenient reading differs from the strict one. One
// pass, linear in the body: strings are crossed by scanString (assembly in
// WASM), the rest a byte at a time where it is not copied.
func relaxed(s string) (out []byte, ok bool) {
	return relaxedSteps(s, nil)
}

// relaxedSteps is relaxed, counting in work (when not nil) a step for each
// string and each other byte it reads.
func relaxedSteps(s string, work *work) (out []byte, ok bool) {
	steps := int64(0)
	defer func() {
		if work != nil {
			work.steps += steps / 2 // a byte read in a tight loop: half a step
		}
	}()
	out = []byte(s)
	blank := func(from, to int) {
		for k := from; k < to; k++ {
			out[k] = ' '
		}
	}
	comma := -1 // where the last ',' is, while only whitespace and comments followed it
	changed := false
	for i := 0; i < len(s); steps++ {
		switch c := s[i]; {
		case c == '"':
			j := i + 1
			for {
				j, _ = scanString(s, j, &simpleEscape)
				if j >= len(s) {
					return nil, false
				}
				if s[j] == '"' {
					break
				}
				if s[j] == '\\' {
					j++ // another escape: the walk says whether it is one
				}
				j++ // or a control character
			}
			i, comma = j+1, -1
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			blank(i, i+j)
			i += j
			changed = true
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, false
			}
			blank(i, i+j+4)
			i += j + 4
			changed = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == ',':
			comma = i
			i++
		case (c == '}' || c == ']') && comma >= 0:
			out[comma] = ' '
			i, comma, changed = i+1, -1, true
		case c == 'N' && strings.HasPrefix(s[i:], "NaN"),
			c == 'I' && strings.HasPrefix(s[i:], "Infinity"),
			c == '-' && strings.HasPrefix(s[i:], "-Infinity"):
			n := len("NaN")
			if c != 'N' {
				n = strings.IndexByte(s[i:], 'y') + 1
			}
			out[i] = '0'
			blank(i+1, i+n)
			i, comma, changed = i+n, -1, true
		default:
			i++
			comma = -1
		}
	}
	return out, changed
}
