package limiter

import (
	"encoding/binary"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
)

// logLevelDebug is the gateway's debug level in get_log_level's answer
// (trace 0, debug 1, info 2, …), as the wrapper's logger reads it.
const logLevelDebug = 1

// debugLog caches whether the gateway logs at debug level. The wrapper's
// logger asks the gateway on every call, formatting its arguments first; the
// per-request debug lines ask here, at most once a second, and skip all of it
// at the usual info level.
var debugLog struct {
	enabled bool
	checked time.Time
}

// debugEnabled reports whether debug logs are on.
func debugEnabled() bool {
	if now := time.Now(); now.Sub(debugLog.checked) >= time.Second {
		debugLog.checked = now
		level, err := proxywasm.CallForeignFunction("get_log_level", nil)
		debugLog.enabled = err != nil || len(level) < 4 || binary.LittleEndian.Uint32(level) <= logLevelDebug
	}
	return debugLog.enabled
}
