//go:build wasm

package limiter

import "unsafe"

// getAILog returns the ai_log property (nil: not set): the SDK's
// GetProperty, but for where the host writes the value's address and
// length (see hostBuffer) and for the path, which for one name is the name
// itself: three allocations fewer. The value is the host's copy, the
// caller's.
func getAILog() []byte {
	returned.data, returned.size = nil, 0
	status := proxyGetProperty(unsafe.StringData(aiLogKey), int32(len(aiLogKey)), unsafe.Pointer(&returned.data), &returned.size)
	data, n := returned.data, returned.size
	returned.data = nil
	if status != 0 || data == nil || n <= 0 {
		return nil
	}
	return unsafe.Slice(data, n)
}

// setAILog sets the ai_log property to v, which the host copies (v stays
// the caller's): the SDK's SetProperty without its copy of the path.
func setAILog(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	return proxySetProperty(unsafe.StringData(aiLogKey), int32(len(aiLogKey)), unsafe.SliceData(v), int32(len(v))) == 0
}

// proxyGetProperty is the host's proxy_get_property (proxy-wasm ABI
// 0.2.1), as the SDK declares it.
//
//go:wasmimport env proxy_get_property
func proxyGetProperty(pathData *byte, pathSize int32, returnValueData unsafe.Pointer, returnValueSize *int32) uint32

// proxySetProperty is the host's proxy_set_property (proxy-wasm ABI
// 0.2.1), as the SDK declares it.
//
//go:wasmimport env proxy_set_property
func proxySetProperty(pathData *byte, pathSize int32, valueData *byte, valueSize int32) uint32
