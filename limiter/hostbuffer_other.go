//go:build !wasm

package limiter

import "github.com/higress-group/proxy-wasm-go-sdk/proxywasm"

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
