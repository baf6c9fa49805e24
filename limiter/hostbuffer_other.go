//go:build !wasm

package limiter

import (
	"strings"
	"unsafe"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
)

// hostBuffer returns the first size bytes of the body the host buffered,
// nil when there is none: outside WASM, through the SDK
// (hostbuffer_wasm.go says why not in it).
func hostBuffer(b bodyBuffer, size int) []byte {
	get := proxywasm.GetHttpResponseBody
	if b == requestBodyBuffer {
		get = proxywasm.GetHttpRequestBody
	}
	body, err := get(0, size)
	if err != nil {
		return nil
	}
	return body
}

// hostHeader returns a header's value, "" when absent: outside WASM,
// through the SDK.
func hostHeader(m headerMap, name string) string {
	get := proxywasm.GetHttpResponseHeader
	if m == requestHeaders {
		get = proxywasm.GetHttpRequestHeader
	}
	v, _ := get(name)
	return v
}

// hostHeaderValues calls f with the value of each line of a header, in
// order: outside WASM, through the SDK.
func hostHeaderValues(m headerMap, name string, f func(string)) {
	get := proxywasm.GetHttpResponseHeaders
	if m == requestHeaders {
		get = proxywasm.GetHttpRequestHeaders
	}
	headers, _ := get()
	for _, h := range headers {
		if strings.EqualFold(h[0], name) {
			f(h[1])
		}
	}
}

// hostProperty returns the value of a property of one path segment, nil
// when it has none: outside WASM, through the SDK.
func hostProperty(path []byte) []byte {
	v, err := proxywasm.GetProperty([]string{unsafe.String(unsafe.SliceData(path), len(path))})
	if err != nil {
		return nil
	}
	return v
}
