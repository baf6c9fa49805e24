package config

import (
	"bytes"
	"strings"
)

// CanonicalPath returns a request's path (its :path, with any query string)
// as common upstream routers and proxies read it, so that a request is
// recognised by the route it reaches upstream, however its path is
// spelled: the plugin's endpoints (quota_path, admin.path) and the
// completions paths whose streams are asked for their usage.
//
//   - The query string is dropped: the path ends before the first '?'.
//   - Every percent-escape of two hex digits is decoded, once (as uvicorn
//     and most frameworks decode a path before routing): %2F is a '/' that
//     separates segments like any other, %2E a '.', and %2541 is "%41",
//     not "A". A '%' not followed by two hex digits is a malformed escape,
//     kept as it is.
//   - The path starts with '/': one is added when it does not.
//   - Duplicate slashes are merged ("//a///b" is "/a/b").
//   - The segments "." are removed, and each ".." removes the segment
//     before it, never above the root ("/../a" is "/a").
//   - A trailing slash is removed, except from "/" itself.
//
// The result is written so that it is its own canonical path
// (CanonicalPath(CanonicalPath(p)) == CanonicalPath(p)): a decoded
// character that a second reading would take for something else is
// escaped again, '?' as %3F, and '%' as %25 when two hex digits follow it
// (whether it was %25 or a malformed escape that decoding put before two
// hex digits: "/a%4%31" is "/a%2541"). Any other byte is kept as it is,
// valid UTF-8 or not.
//
// It does not allocate when the path (up to its query) is canonical
// already, the common case, and it does not panic on any input.
func CanonicalPath(path string) string {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if isCanonical(path) {
		return path
	}
	decoded := decodePath(path)
	out := make([]byte, 0, len(decoded)+1)
	for len(decoded) > 0 {
		var segment string
		segment, decoded = nextSegment(decoded)
		switch segment {
		case "", ".":
		case "..":
			out = out[:max(bytes.LastIndexByte(out, '/'), 0)]
		default:
			out = append(out, '/')
			out = appendSegment(out, segment)
		}
	}
	if len(out) == 0 {
		return "/"
	}
	return string(out)
}

// nextSegment splits the segment before the next '/' (the slashes before
// it skipped) from the rest of a decoded path.
func nextSegment(p string) (segment, rest string) {
	p = strings.TrimLeft(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// decodePath decodes every percent-escape of two hex digits of path, once,
// keeping a malformed one as it is.
func decodePath(path string) string {
	if strings.IndexByte(path, '%') < 0 {
		return path
	}
	b := make([]byte, 0, len(path))
	for i := 0; i < len(path); i++ {
		if c, ok := escapeAt(path, i); ok {
			b = append(b, c)
			i += 2
			continue
		}
		b = append(b, path[i])
	}
	return string(b)
}

// appendSegment appends a decoded segment, escaping again what would be
// read as something else: '?' (a query) and a '%' that two hex digits
// follow (an escape).
func appendSegment(out []byte, segment string) []byte {
	for i := 0; i < len(segment); i++ {
		switch c := segment[i]; {
		case c == '?':
			out = append(out, "%3F"...)
		case c == '%' && i+2 < len(segment) && isHex(segment[i+1]) && isHex(segment[i+2]):
			out = append(out, "%25"...)
		default:
			out = append(out, c)
		}
	}
	return out
}

// isCanonical reports whether CanonicalPath returns path as it is: it
// starts with '/', has no empty, "." or ".." segment, no trailing '/'
// (unless it is "/"), and no escape but those CanonicalPath writes (%3F,
// and %25 before two hex digits).
func isCanonical(path string) bool {
	if path == "/" {
		return true
	}
	if path == "" || path[0] != '/' || path[len(path)-1] == '/' {
		return false
	}
	start := 1 // of the current segment
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			if path[i] == '%' {
				if _, ok := escapeAt(path, i); ok && !writtenEscape(path, i) {
					return false
				}
			}
			continue
		}
		if s := path[start:i]; s == "" || s == "." || s == ".." {
			return false
		}
		start = i + 1
	}
	return true
}

// writtenEscape reports whether the escape at path[i] is one CanonicalPath
// writes: %3F, or %25 before two hex digits.
func writtenEscape(path string, i int) bool {
	switch path[i+1 : i+3] {
	case "3F":
		return true
	case "25":
		return i+4 < len(path) && isHex(path[i+3]) && isHex(path[i+4])
	}
	return false
}

// escapeAt decodes the escape at path[i] when it is '%' and two hex digits.
func escapeAt(path string, i int) (byte, bool) {
	if path[i] != '%' || i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2]) {
		return 0, false
	}
	return hexValue(path[i+1])<<4 | hexValue(path[i+2]), true
}

// hexValue is the value of a hex digit (see isHex, in requestvalue.go).
func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
