//go:build wasm

package limiter

import "unsafe"

// hostBuffer returns the first size bytes of the body the host buffered
// (the request's, or the response's chunk), nil when there is none. It is
// the SDK's GetHttpRequestBody and GetHttpResponseBody, but for where the
// host writes the buffer's address and length: the SDK passes two
// variables of its own, which a pointer handed to an import moves to the
// heap, two allocations on every chunk of every stream. These are the
// VM's, whose hooks run one at a time (the host calls back into the module
// only to allocate the copy, which reads no body), at addresses that never
// move.
func hostBuffer(b bodyBuffer, size int) []byte {
	returned.data, returned.size = nil, 0
	status := proxyGetBufferBytes(uint32(b), 0, int32(min(size, maxBufferedBody)), unsafe.Pointer(&returned.data), &returned.size)
	data, n := returned.data, returned.size
	returned.data = nil // the copy is the caller's, not kept alive here
	if status != 0 || data == nil {
		return nil
	}
	return unsafe.Slice(data, n)
}

// hostHeader returns a header's value, "" when absent: the SDK's
// GetHttpRequestHeader and GetHttpResponseHeader, but for where the host
// writes the value's address and length, as in hostBuffer (two allocations
// fewer on every header read). The value is the host's copy, the caller's.
func hostHeader(m headerMap, name string) string {
	returned.data, returned.size = nil, 0
	status := proxyGetHeaderMapValue(uint32(m), unsafe.StringData(name), int32(len(name)), unsafe.Pointer(&returned.data), &returned.size)
	data, n := returned.data, returned.size
	returned.data = nil
	if status != 0 || data == nil {
		return ""
	}
	return unsafe.String(data, n)
}

// hostHeaderValues calls f with the value of each line of a header, in
// order. The host's proxy_get_header_map_value gives only the first (Envoy
// returns the first of several lines); proxy_get_header_map_pairs gives
// them all, in one copy of the map, read in place (eachHeaderValue): one
// allocation, as for hostHeader.
func hostHeaderValues(m headerMap, name string, f func(string)) {
	returned.data, returned.size = nil, 0
	status := proxyGetHeaderMapPairs(uint32(m), unsafe.Pointer(&returned.data), &returned.size)
	data, n := returned.data, returned.size
	returned.data = nil
	if status != 0 || data == nil || n <= 0 {
		return
	}
	eachHeaderValue(unsafe.Slice(data, n), name, f)
}

// hostProperty returns the value of a property of one path segment (its
// serialized path is the segment itself), nil when it has none: the SDK's
// GetProperty, but for the path, which the SDK serializes anew on every
// read, and for where the host writes the value's address and length, as
// in hostBuffer. The value is the host's copy, the caller's.
func hostProperty(path []byte) []byte {
	returned.data, returned.size = nil, 0
	status := proxyGetProperty(unsafe.SliceData(path), int32(len(path)), unsafe.Pointer(&returned.data), &returned.size)
	data, n := returned.data, returned.size
	returned.data = nil
	if status != 0 || data == nil {
		return nil
	}
	return unsafe.Slice(data, n)
}

// returned is where the host writes a buffer's address and length.
var returned struct {
	data *byte
	size int32
}

// proxyGetBufferBytes is the host's proxy_get_buffer_bytes (proxy-wasm ABI
// 0.2.1), as the SDK declares it.
//
//go:wasmimport env proxy_get_buffer_bytes
func proxyGetBufferBytes(bufferType uint32, start, maxSize int32, returnData unsafe.Pointer, returnSize *int32) uint32

// proxyGetHeaderMapValue is the host's proxy_get_header_map_value
// (proxy-wasm ABI 0.2.1), as the SDK declares it.
//
//go:wasmimport env proxy_get_header_map_value
func proxyGetHeaderMapValue(mapType uint32, keyData *byte, keySize int32, returnValueData unsafe.Pointer, returnValueSize *int32) uint32

// proxyGetHeaderMapPairs is the host's proxy_get_header_map_pairs
// (proxy-wasm ABI 0.2.1), as the SDK declares it.
//
//go:wasmimport env proxy_get_header_map_pairs
func proxyGetHeaderMapPairs(mapType uint32, returnValueData unsafe.Pointer, returnValueSize *int32) uint32

// proxyGetProperty is the host's proxy_get_property (proxy-wasm ABI
// 0.2.1), as the SDK declares it.
//
//go:wasmimport env proxy_get_property
func proxyGetProperty(pathData *byte, pathSize int32, returnValueData unsafe.Pointer, returnValueSize *int32) uint32
