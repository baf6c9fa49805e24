package streamusage

import (
	"bytes"
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// MaxBodyBytes is the largest request body AskForUsage rewrites. It is a
// bound on the work done per request (validating and copying the body in a
// WASM VM), not a limit on requests: a larger body passes untouched, so its
// stream reports no usage.
const MaxBodyBytes = 16 << 20

// maxShallowOpeners bounds the nesting a body may have for gjson.Valid,
// which recurses once per level. A body with more '{' and '[' bytes than
// this (counted anywhere, so an upper bound on its depth) is validated by
// encoding/json instead, which keeps its own stack and refuses more than
// 10000 levels: a body of a million '[' cannot grow the VM's stack.
const maxShallowOpeners = 4096

var (
	includeUsageObject = []byte(`{"include_usage":true}`)
	jsonTrue           = []byte("true")
	askForUsageMember  = []byte(`"stream_options":{"include_usage":true},`)
	// What normalize writes first in the object, around the members it
	// keeps of the client's stream_options.
	normalizedHead = []byte(`"stream":true,"stream_options":{`)
	normalizedTail = []byte(`"include_usage":true}`)
	// The member is known to exist: sjson replaces it in one exact-size
	// copy instead of rebuilding the document.
	replaceExisting = &sjson.Options{Optimistic: true}
)

// MayAskForUsage reports whether a request may have its body rewritten by
// AskForUsage, from what is known in the request-header phase: a POST to a
// chat completions or legacy completions path (see AskForUsage), whatever
// its Content-Type: upstreams written in Go (Ollama, one-api) decode the
// body as JSON under any Content-Type, or none, and FastAPI does under
// every +json type, so a body that is JSON may stream without asking
// under any of them. AskForUsage decides by the body itself.
//
// The body's length changes when it is rewritten, so a plugin that may
// rewrite it must not forward the request's Content-Length.
func MayAskForUsage(method, path string) bool {
	return method == "POST" && isCompletionsPath(path)
}

// AskForUsage returns body rewritten to ask for the stream's usage, with
// ok true, when and only when:
//
//   - path (the request's :path, with any prefix such as /v1/ or
//     /openai/deployments/x/, and any query string) ends in
//     /chat/completions or /completions;
//   - body is at most MaxBodyBytes of valid JSON, and an object;
//   - one of its top-level "stream" members is true, or a value that
//     lax parsers take for true (see truthy: "true", 1);
//   - it does not already ask for the usage (see below).
//
// Keys are read as parsers read them: with their escapes decoded, and also
// without case, as Go's encoding/json matches a struct's fields (Unicode
// simple folding: "STREAM", "Stream" and "ſtream" are stream to an
// upstream written in Go, such as Ollama or one-api).
//
// A body with one "stream" (true), at most one "stream_options" and in it
// at most one "include_usage", each spelled exactly, is edited in one
// place, and every other byte of it is kept: an absent stream_options
// becomes `"stream_options":{"include_usage":true}`, put first in the
// object; a null one is replaced by that object; in an object,
// include_usage is added as its last member or its false or null is
// replaced, keeping the other members (include_obfuscation, ...) as they
// were. Whitespace around the top-level object may be dropped when a
// member is added. Such a body already asks when its include_usage is
// true; a stream_options that is neither null nor an object, or an
// include_usage that is neither a boolean nor null, is an error the
// upstream should report itself, not one to fix silently: in each case ok
// is false.
//
// Any other streaming body (a key repeated, as in
// `"stream":false,"stream":true`, or spelled in another case) is read
// differently by different parsers: most take the last duplicate, some the
// first, some refuse it, and only some fold case. Left as it is, it could
// stream without asking for its usage. So, unless it asks at every parser
// (one of its stream_options is spelled exactly, and each is an object
// with an include_usage spelled exactly and every member whose key folds
// to include_usage true), it is rewritten to mean one thing: every
// top-level member whose key folds to stream or stream_options is removed,
// and `"stream":true,"stream_options":{...,"include_usage":true}` is put
// first, where the object keeps the other members (include_obfuscation,
// ...) of the last stream_options that is an object, without any whose key
// folds to include_usage. A body that streams at any upstream then
// streams, and reports its usage, at all of them. The other members keep
// their bytes and order, without the whitespace between them. Here a
// stream_options or include_usage of the wrong type is dropped, not left
// to the upstream: which one the upstream would have read is not known.
//
// When ok is false, rewritten is nil and the request is to be forwarded as
// it is. body is never modified. AskForUsage does not panic on any input,
// takes time linear in len(body), and its stack does not grow with the
// body's nesting.
func AskForUsage(path string, body []byte) (rewritten []byte, ok bool) {
	if !isCompletionsPath(path) || len(body) > MaxBodyBytes || !isObject(body) {
		return nil, false
	}

	// One pass over the top level reads the members a parser may take for
	// stream and stream_options. A body that is not what we want is refused
	// here, before the dearer validation. The pass crosses each value with
	// estimate.SkipValue, and falls back to gjson for a body it does not
	// take whole (an escaped key, a value that is not valid JSON): gjson
	// steps over values without recursing into them, so this is safe on
	// any bytes. Both read the body through a string view, not a copy:
	// nothing they return outlives this function but the Results, which
	// body outlives.
	var top topLevel
	text := unsafe.String(unsafe.SliceData(body), len(body))
	if !eachMember(text, top.note) {
		top = topLevel{}
		gjsonMembers(text, top.note)
	}
	options, nOptions := top.options, top.nOptions
	switch {
	case !top.streams:
		return nil, false
	case top.nStream > 1 || nOptions > 1 || top.misspelled:
		return normalize(body)
	}

	// What to set, decided from stream_options.
	var (
		setPath  string
		setValue []byte
		opts     *sjson.Options // replaceExisting when the member exists
	)
	switch {
	case nOptions == 0:
		// The common case, and the one on every request of a client that
		// never heard of stream_options: the member goes first, with no
		// second parse and no validation. Put before the members, it cannot
		// change how any parser reads the rest, valid or not: the upstream
		// refuses an invalid body as it would have.
		return prependMember(body, askForUsageMember), true
	case options.Type == gjson.Null:
		setPath, setValue, opts = "stream_options", includeUsageObject, replaceExisting
	case options.IsObject():
		var includeUsage gjson.Result
		n, usageSpelled := 0, true
		options.ForEach(func(key, value gjson.Result) bool {
			if strings.EqualFold(key.Str, "include_usage") {
				includeUsage = value
				n++
				usageSpelled = usageSpelled && key.Str == "include_usage"
			}
			return true
		})
		switch {
		case n == 0:
			setPath, setValue = "stream_options.include_usage", jsonTrue
		case n > 1 || !usageSpelled:
			return normalize(body)
		case includeUsage.Type == gjson.False || includeUsage.Type == gjson.Null:
			setPath, setValue, opts = "stream_options.include_usage", jsonTrue, replaceExisting
		default: // true already, or not a boolean
			return nil, false
		}
	default:
		return nil, false
	}

	if !validJSON(body) {
		return nil, false
	}
	rewritten, err := sjson.SetRawBytesOptions(body, setPath, setValue, opts)
	if err != nil {
		return nil, false
	}
	return rewritten, true
}

// topLevel is what AskForUsage reads of a body's top-level members.
type topLevel struct {
	options           gjson.Result // the last stream_options
	nStream, nOptions int
	streams           bool // a stream member is true
	misspelled        bool // a key is a stream or stream_options in another case
}

// note takes a top-level member, its key (decoded) and its raw value.
// Keys match without case, as Go's encoding/json matches them.
func (t *topLevel) note(key, raw string) {
	switch {
	case strings.EqualFold(key, "stream"):
		t.nStream++
		t.streams = t.streams || truthy(raw)
		t.misspelled = t.misspelled || key != "stream"
	case strings.EqualFold(key, "stream_options"):
		t.nOptions++
		t.options = gjson.Parse(raw)
		t.misspelled = t.misspelled || key != "stream_options"
	}
}

// truthy reports whether a raw JSON value streams at some upstream: the
// JSON true, and what pydantic's lax mode (vLLM, LiteLLM, FastAPI apps)
// takes for true: the number 1 (1.0, 1e0) and the strings "true", "1",
// "yes", "on", "t" and "y", in any case.
func truthy(raw string) bool {
	v := gjson.Parse(raw)
	switch v.Type {
	case gjson.True:
		return true
	case gjson.Number:
		return v.Num == 1
	case gjson.String:
		switch strings.ToLower(v.Str) {
		case "true", "1", "yes", "on", "t", "y":
			return true
		}
	}
	return false
}

// eachMember calls member with the key and the raw value of each member of
// body's top-level object, in order, and returns true, when body is a JSON
// object (blank space around it) whose keys have no escapes and whose
// values are valid JSON; otherwise it returns false, maybe after calling
// member for some members. What it reads is what gjson's ForEach reads.
func eachMember(body string, member func(key, raw string)) bool {
	i := skipBlank(body, 0)
	if i == len(body) || body[i] != '{' {
		return false
	}
	if i = skipBlank(body, i+1); i < len(body) && body[i] == '}' {
		return skipBlank(body, i+1) == len(body)
	}
	for {
		if i == len(body) || body[i] != '"' {
			return false
		}
		q := strings.IndexByte(body[i+1:], '"')
		if q < 0 {
			return false
		}
		key := body[i+1 : i+1+q]
		for j := 0; j < len(key); j++ {
			if key[j] < ' ' || key[j] == '\\' { // not JSON, or escaped: gjson's to read
				return false
			}
		}
		if i = skipBlank(body, i+2+q); i == len(body) || body[i] != ':' {
			return false
		}
		start := skipBlank(body, i+1)
		end, ok := estimate.SkipValue(body, start)
		if !ok {
			return false
		}
		member(key, body[start:end])
		if i = skipBlank(body, end); i == len(body) {
			return false
		}
		switch body[i] {
		case ',':
			i = skipBlank(body, i+1)
		case '}':
			return skipBlank(body, i+1) == len(body)
		default:
			return false
		}
	}
}

// gjsonMembers calls member with the key (unescaped) and the raw value of
// each member of body's top level as gjson reads them: for a body
// eachMember does not take whole.
func gjsonMembers(body string, member func(key, raw string)) {
	gjson.Parse(body).ForEach(func(key, value gjson.Result) bool {
		member(key.Str, value.Raw)
		return true
	})
}

// skipBlank returns the index of the first byte at or after s[i] that is
// not JSON's blank space, or len(s).
func skipBlank(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// normalize rewrites a streaming body whose stream, stream_options or
// include_usage keys are repeated or spelled in another case, as
// AskForUsage says. It reads the body's top level twice and the kept
// stream_options once, and copies each byte at most once: linear time, and
// no recursion but validJSON's, which is bounded.
func normalize(body []byte) ([]byte, bool) {
	open := bytes.IndexByte(body, '{') // isObject found it first
	raw := body[open:]                 // the Results' Index is into raw
	doc := gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw)))

	var kept gjson.Result // the last stream_options that is an object
	asks, spelled := true, false
	doc.ForEach(func(key, value gjson.Result) bool {
		if strings.EqualFold(key.Str, "stream_options") {
			if value.IsObject() {
				kept = value
			}
			asks = asks && asksForUsage(value)
			spelled = spelled || key.Str == "stream_options"
		}
		return true
	})
	if asks && spelled {
		// Every parser reads include_usage true: the client gets the
		// usage it asked for, whichever stream member counts.
		return nil, false
	}
	if !validJSON(body) {
		return nil, false
	}

	out := make([]byte, 0, len(body)+len(normalizedHead)+len(normalizedTail))
	out = append(out, body[:open+1]...)
	out = append(out, normalizedHead...)
	if kept.Exists() {
		kept.ForEach(func(key, value gjson.Result) bool {
			if !strings.EqualFold(key.Str, "include_usage") {
				out = append(out, raw[key.Index:value.Index+len(value.Raw)]...)
				out = append(out, ',')
			}
			return true
		})
	}
	out = append(out, normalizedTail...)
	end := 1 // of the last member, just after the brace when none
	doc.ForEach(func(key, value gjson.Result) bool {
		end = value.Index + len(value.Raw)
		if !strings.EqualFold(key.Str, "stream") && !strings.EqualFold(key.Str, "stream_options") {
			out = append(out, ',')
			out = append(out, raw[key.Index:end]...)
		}
		return true
	})
	return append(out, raw[end:]...), true
}

// asksForUsage reports whether a stream_options value asks for the usage
// at every parser: an object with an include_usage spelled exactly, whose
// every member that folds to include_usage is true.
func asksForUsage(options gjson.Result) bool {
	if !options.IsObject() {
		return false
	}
	asks, spelled := true, false
	options.ForEach(func(key, value gjson.Result) bool {
		if strings.EqualFold(key.Str, "include_usage") {
			asks = asks && value.Type == gjson.True
			spelled = spelled || key.Str == "include_usage"
		}
		return true
	})
	return asks && spelled
}

// prependMember returns a copy of the object body with member (and its
// comma) inserted right after the opening brace.
func prependMember(body, member []byte) []byte {
	open := bytes.IndexByte(body, '{') + 1 // isObject found it first
	out := make([]byte, 0, len(body)+len(member))
	out = append(out, body[:open]...)
	out = append(out, member...)
	return append(out, body[open:]...)
}

// isCompletionsPath reports whether path, without its query string, ends in
// /completions, which covers /chat/completions: OpenAI's /v1/completions
// and /v1/chat/completions, and the same under any prefix (Azure's
// /openai/deployments/<name>/chat/completions, a gateway's route prefix).
// /v1/responses, /v1/embeddings and the like are not matched; neither is a
// trailing slash, which OpenAI does not route.
func isCompletionsPath(path string) bool {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	return strings.HasSuffix(path, "/completions")
}

// validJSON reports whether b is one valid JSON text, without letting its
// nesting depth decide how much stack the check takes (see
// maxShallowOpeners). gjson is the fast path: about three times the speed
// of encoding/json.
func validJSON(b []byte) bool {
	if openersOver(b, maxShallowOpeners) {
		return json.Valid(b)
	}
	return gjson.ValidBytes(b)
}

// openersOver reports whether b has more than limit '{' and '[' bytes. It
// counts with IndexByte, which is vectorised natively and hand-written for
// WASM, where bytes.Count is a plain loop several times slower; and it
// stops at the limit.
func openersOver(b []byte, limit int) bool {
	n := 0
	for _, c := range []byte("{[") {
		for p := b; ; {
			i := bytes.IndexByte(p, c)
			if i < 0 {
				break
			}
			if n++; n > limit {
				return true
			}
			p = p[i+1:]
		}
	}
	return false
}

// isObject reports whether b's first byte other than whitespace is '{':
// whether b, once known to be valid JSON, is an object.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}
