package limiter

import (
	"encoding/binary"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
)

// logLevelDebug is the gateway's debug level in get_log_level's answer
// (trace 0, debug 1, info 2, …), as the wrapper's logger reads it.
const logLevelDebug = 1

// debugLog caches whether the gateway logs at debug level. The wrapper's
// logger asks the gateway on every call, formatting its arguments first; the
// per-request debug lines ask here, and skip all of it at the usual info
// level. The level is read at the first check after a plugin start, then
// once a second from the plugin's tick (startState.onTick): a check costs
// no host call, not even the clock's (time.Now is two in WASM).
var debugLog struct {
	enabled bool
	read    bool // enabled was read since the plugin started
}

// debugEnabled reports whether debug logs are on.
func debugEnabled() bool {
	if !debugLog.read {
		readLogLevel()
	}
	return debugLog.enabled
}

// readLogLevel asks the gateway whether it logs at debug level.
func readLogLevel() {
	level, err := proxywasm.CallForeignFunction("get_log_level", nil)
	debugLog.enabled = err != nil || len(level) < 4 || binary.LittleEndian.Uint32(level) <= logLevelDebug
	debugLog.read = true
}

// logLevelTicks is how often the tick reads the level again: once a second.
const logLevelTicks = 1000 / tickMs
