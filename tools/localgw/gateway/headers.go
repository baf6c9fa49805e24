package gateway

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// hopByHop are the headers of one connection, not of the request: they are
// neither shown to the plugin nor forwarded (as Envoy and net/http/httputil do).
var hopByHop = map[string]bool{
	"connection": true, "proxy-connection": true, "keep-alive": true, "proxy-authenticate": true,
	"proxy-authorization": true, "te": true, "trailer": true, "transfer-encoding": true, "upgrade": true,
}

// connectionScoped reports whether a header is hop-by-hop for this message:
// listed above, or named in its Connection header.
func connectionScoped(h http.Header) func(name string) bool {
	named := map[string]bool{}
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				named[strings.ToLower(f)] = true
			}
		}
	}
	return func(name string) bool { return hopByHop[name] || named[name] }
}

// appendHeaders appends h as proxy-wasm headers: lower-case names, one
// entry per value, hop-by-hop headers left out.
func appendHeaders(dst [][2]string, h http.Header) [][2]string {
	skip := connectionScoped(h)
	for name, values := range h {
		lower := strings.ToLower(name)
		if skip(lower) {
			continue
		}
		for _, v := range values {
			dst = append(dst, [2]string{lower, v})
		}
	}
	return dst
}

// requestHeaders are a downstream request's headers as Envoy gives them to
// a plugin: the pseudo-headers first, then the real ones, with an
// x-request-id made up when the client sent none.
func requestHeaders(r *http.Request, requestID string) [][2]string {
	path := r.RequestURI
	if path == "" || !strings.HasPrefix(path, "/") {
		path = r.URL.RequestURI()
	}
	h := [][2]string{{":authority", r.Host}, {":path", path}, {":method", r.Method}, {":scheme", "http"}}
	h = appendHeaders(h, r.Header)
	if r.Header.Get("X-Request-Id") == "" {
		h = append(h, [2]string{"x-request-id", requestID})
	}
	return h
}

// responseHeaders are an upstream response's headers for the plugin.
func responseHeaders(resp *http.Response) [][2]string {
	return appendHeaders([][2]string{{":status", strconv.Itoa(resp.StatusCode)}}, resp.Header)
}

// header returns the first value of a header (names are lower case), or "".
func header(h [][2]string, name string) string {
	for _, kv := range h {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}

// toHTTP turns what the plugin left of a header map back into net/http
// headers: pseudo-headers, hop-by-hop headers and those in skip are left out.
func toHTTP(h [][2]string, skip ...string) http.Header {
	out := make(http.Header, len(h))
	for _, kv := range h {
		name := kv[0]
		if strings.HasPrefix(name, ":") || hopByHop[name] || contains(skip, name) {
			continue
		}
		out.Add(name, kv[1])
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// cloneHeaders deep-copies a header map read from the emulator: its strings
// may point into the plugin's memory, which the plugin reuses.
func cloneHeaders(h [][2]string) [][2]string {
	out := make([][2]string, len(h))
	for i, kv := range h {
		out[i] = [2]string{strings.Clone(kv[0]), strings.Clone(kv[1])}
	}
	return out
}

// newRequestID makes an x-request-id as Envoy does: a random UUID (v4).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
