package streamusage

import (
	"bytes"
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
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
	// The member is known to exist: sjson replaces it in one exact-size
	// copy instead of rebuilding the document.
	replaceExisting = &sjson.Options{Optimistic: true}
)

// MayAskForUsage reports whether a request may have its body rewritten by
// AskForUsage, from what is known in the request-header phase: a POST to a
// chat completions or legacy completions path (see AskForUsage) whose
// Content-Type is absent ("") or application/json, with any parameters.
// The media type is compared without case; anything else (for example
// application/octet-stream, text/plain, application/x-www-form-urlencoded,
// application/vnd.foo+json) is not JSON to it.
//
// The body's length changes when it is rewritten, so a plugin that may
// rewrite it must not forward the request's Content-Length.
func MayAskForUsage(method, path, contentType string) bool {
	return method == "POST" && isCompletionsPath(path) && isJSONMediaType(contentType)
}

// AskForUsage returns body rewritten to ask for the stream's usage, with
// ok true, when and only when:
//
//   - path (the request's :path, with any prefix such as /v1/ or
//     /openai/deployments/x/, and any query string) ends in
//     /chat/completions or /completions;
//   - body is at most MaxBodyBytes of valid JSON, and an object;
//   - its top-level "stream" is the JSON true;
//   - its "stream_options", if any, is null or an object whose
//     "include_usage", if any, is false or null.
//
// The rewrite sets include_usage to true and changes nothing else: an absent
// stream_options becomes `"stream_options":{"include_usage":true}`, added as
// the object's last member; a null one is replaced by that object; in an
// object, include_usage is added as its last member or its false or null is
// replaced, keeping the other members (include_obfuscation, ...) as they
// were. Every other byte of body is kept, except that whitespace before
// and after the top-level object may be dropped when a member is added.
//
// Keys are read as a JSON parser reads them (escapes decoded), and a body
// with duplicate "stream" or "stream_options" keys, or duplicate
// "include_usage" keys in stream_options, is left untouched: parsers
// disagree on which duplicate counts (most take the last, gjson the first),
// and a request this odd is better sent as it came. Likewise a
// stream_options that is neither null nor an object, or an include_usage
// that is neither a boolean nor null, is an error the upstream should
// report itself, not one to fix silently. An include_usage already true
// needs no rewrite: ok is false and the client gets the usage it asked for.
//
// When ok is false, rewritten is nil and the request is to be forwarded as
// it is. body is never modified. AskForUsage does not panic on any input.
func AskForUsage(path string, body []byte) (rewritten []byte, ok bool) {
	if !isCompletionsPath(path) || len(body) > MaxBodyBytes || !isObject(body) {
		return nil, false
	}

	// One pass over the top level reads the two members and counts their
	// keys, decoded as a parser decodes them. A body that is not what we
	// want is refused here, before the dearer validation. (gjson steps over
	// values without recursing into them, so this is safe on any bytes. It
	// reads the body through a string view, not a copy: nothing it returns
	// outlives this function but the two Results, which body outlives.)
	var stream, options gjson.Result
	var nStream, nOptions int
	gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))).ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "stream":
			stream = value
			nStream++
		case "stream_options":
			options = value
			nOptions++
		}
		return true
	})
	if nStream != 1 || nOptions > 1 || stream.Type != gjson.True {
		return nil, false
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
		n := 0
		options.ForEach(func(key, value gjson.Result) bool {
			if key.Str == "include_usage" {
				includeUsage = value
				n++
			}
			return true
		})
		switch {
		case n == 0:
			setPath, setValue = "stream_options.include_usage", jsonTrue
		case n == 1 && (includeUsage.Type == gjson.False || includeUsage.Type == gjson.Null):
			setPath, setValue, opts = "stream_options.include_usage", jsonTrue, replaceExisting
		default: // true already, not a boolean, or duplicated
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

// isJSONMediaType reports whether a Content-Type value is absent or
// application/json with optional parameters.
func isJSONMediaType(contentType string) bool {
	if contentType == "" {
		return true
	}
	mediaType, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.Trim(mediaType, " \t"), "application/json")
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
