package config

// Strict reading of JSON values: each reader accepts exactly one JSON type
// (JSON null is the caller's business: see isSet) and refuses anything else
// with a *FieldError naming the path and describing the bad value. Nothing
// here knows the configuration's field names; the tables in parse.go do.

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// FieldError is the error returned by Parse. Path is the JSON path of the
// offending field, e.g. "rule_items[1].limit_keys[0].key", or "" for errors
// about the document as a whole.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// fieldErr returns a *FieldError at path whose message is msg joined.
func fieldErr(path string, msg ...string) error {
	return &FieldError{Path: path, Msg: strings.Join(msg, "")}
}

// isSet reports whether v is present and not null: JSON null is what an
// empty YAML value becomes, and means "not set".
func isSet(v gjson.Result) bool { return v.Type != gjson.Null }

// readMembers returns the members of the object obj, at path, by key. It
// refuses a value that is not an object, duplicate keys, and keys known does
// not list, suggesting the closest known one; the first error in document
// order is returned. Keys for which skip (if not nil) returns true are
// ignored. A member set to null is returned: its presence may matter.
func readMembers(path string, obj gjson.Result, known []string, skip func(string) bool) (map[string]gjson.Result, error) {
	if !obj.IsObject() {
		return nil, fieldErr(path, "must be an object, got ", describe(obj))
	}
	members := make(map[string]gjson.Result, len(known))
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if skip != nil && skip(key) {
			return true
		}
		switch _, dup := members[key]; {
		case dup:
			err = fieldErr(child(path, key), "duplicate field")
		case !slices.Contains(known, key):
			err = errUnknownField(child(path, key), key, known)
		default:
			members[key] = v
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return members, nil
}

// errUnknownField refuses the member key, at path, with the known field
// closest to it as a suggestion.
func errUnknownField(path, key string, known []string) error {
	msg := "unknown field"
	if s := suggest(key, known); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	return fieldErr(path, msg)
}

// readNonEmptyArray reads a non-empty array at path, each element with
// readElem, stopping at the first error.
func readNonEmptyArray[E any](path string, v gjson.Result, readElem func(path string, v gjson.Result) (E, error)) ([]E, error) {
	if !v.IsArray() {
		return nil, fieldErr(path, "must be an array, got ", describe(v))
	}
	arr := v.Array()
	if len(arr) == 0 {
		return nil, fieldErr(path, "must not be empty")
	}
	elems := make([]E, 0, len(arr))
	for i, ev := range arr {
		e, err := readElem(index(path, i), ev)
		if err != nil {
			return nil, err
		}
		elems = append(elems, e)
	}
	return elems, nil
}

// readEnum reads a string that must be one of names, returning the index of
// the one it is.
func readEnum(path string, v gjson.Result, names []string) (int, error) {
	s, err := readString(path, v)
	if err != nil {
		return 0, err
	}
	if i := slices.Index(names, s); i >= 0 {
		return i, nil
	}
	var want strings.Builder
	for i, name := range names {
		switch {
		case i == len(names)-1 && i > 0:
			want.WriteString(" or ")
		case i > 0:
			want.WriteString(", ")
		}
		want.WriteString(quote(name))
	}
	return 0, fieldErr(path, "must be ", want.String(), ", got ", quote(s))
}

// readString reads a string.
func readString(path string, v gjson.Result) (string, error) {
	if v.Type != gjson.String {
		return "", fieldErr(path, "must be a string, got ", describe(v))
	}
	return v.Str, nil
}

// readNonEmptyString reads a string that must not be "".
func readNonEmptyString(path string, v gjson.Result) (string, error) {
	s, err := readString(path, v)
	if err == nil && s == "" {
		err = fieldErr(path, "must not be empty")
	}
	return s, err
}

// readBool reads true or false.
func readBool(path string, v gjson.Result) (bool, error) {
	switch v.Type {
	case gjson.True:
		return true, nil
	case gjson.False:
		return false, nil
	}
	return false, fieldErr(path, "must be a boolean, got ", describe(v))
}

// readInt reads an integer in [min, max]. Integral numbers written as
// floats (100.0, 1e3) are accepted, as YAML tools emit them; strings are not.
func readInt(path string, v gjson.Result, min, max int64) (int64, error) {
	n, ok := intValue(v)
	if ok && n >= min && n <= max {
		return n, nil
	}
	want := "an integer between " + strconv.FormatInt(min, 10) + " and " + strconv.FormatInt(max, 10)
	if max == math.MaxInt64 {
		switch min {
		case 1:
			want = "a positive integer"
		case 0:
			want = "a non-negative integer"
		default:
			want = "an integer no less than " + strconv.FormatInt(min, 10)
		}
	}
	return 0, fieldErr(path, "must be ", want, ", got ", describe(v))
}

// intValue returns the integer v holds, if it is a number with an integral
// value that fits in an int64.
func intValue(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(v.Raw, 64)
	// 2^63 is exactly representable; anything >= it does not fit.
	if err != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// readNumber reads a number in [min, max].
func readNumber(path string, v gjson.Result, min, max float64) (float64, error) {
	if v.Type != gjson.Number || v.Num < min || v.Num > max || math.IsNaN(v.Num) {
		return 0, fieldErr(path, "must be a number between ", formatFloat(min), " and ", formatFloat(max), ", got ", describe(v))
	}
	return v.Num, nil
}

// formatFloat renders a bound in full (1000000, not 1e+06).
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// describe renders a JSON value for an error message.
func describe(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return "string " + quote(v.Str)
	case gjson.Number:
		return "number " + truncate(v.Raw)
	case gjson.True:
		return "true"
	case gjson.False:
		return "false"
	case gjson.JSON:
		if v.IsArray() {
			return "array"
		}
		return "object"
	}
	if v.Raw == "" {
		return "nothing"
	}
	return "null"
}

// truncate cuts s to maxQuotedValueInMessage bytes, at a rune boundary, and
// marks the cut with "...".
func truncate(s string) string {
	if len(s) <= maxQuotedValueInMessage {
		return s
	}
	cut := maxQuotedValueInMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quote quotes s Go-style, truncating long values.
func quote(s string) string {
	if t := truncate(s); len(t) != len(s) {
		return strconv.Quote(t[:len(t)-3]) + "..."
	}
	return strconv.Quote(s)
}

// child returns the path of member key of the object at path.
func child(path, key string) string {
	if !plainKey(key) {
		key = quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// index returns the path of element i of the array at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// plainKey reports whether key can be shown unquoted in a path.
func plainKey(s string) bool { return plainName(s, maxQuotedValueInMessage) }

// plainName reports whether s is 1 to maxLen ASCII letters, digits, '_'
// and '-'.
func plainName(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// suggest returns the known field closest to key, if close enough: the
// first of the closest, in the order of known.
func suggest(key string, known []string) string {
	if len(key) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
