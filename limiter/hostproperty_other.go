//go:build !wasm

package limiter

import (
	"slices"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
)

// getAILog returns the ai_log property (nil: not set): outside WASM,
// through the SDK (hostproperty_wasm.go says why not in it).
func getAILog() []byte {
	v, err := proxywasm.GetProperty([]string{aiLogKey})
	if err != nil {
		return nil
	}
	return v
}

// setAILog sets the ai_log property to a copy of v: outside WASM, through
// the SDK, whose host emulator keeps the slice it is given.
func setAILog(v []byte) bool {
	return proxywasm.SetProperty([]string{aiLogKey}, slices.Clone(v)) == nil
}
