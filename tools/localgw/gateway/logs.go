package gateway

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Log levels as the plugin's get_log_level foreign function returns them
// (wasm-go's order: trace 0 … critical 5).
var logLevels = []string{"trace", "debug", "info", "warn", "error", "critical"}

// parseLogLevel returns the number of a level name.
func parseLogLevel(name string) (uint32, error) {
	if name == "" {
		name = "info"
	}
	for i, l := range logLevels {
		if strings.EqualFold(name, l) {
			return uint32(i), nil
		}
	}
	return 0, fmt.Errorf("unknown log level %q (want one of %s)", name, strings.Join(logLevels, ", "))
}

// logWriter receives what the host emulator writes to the standard logger
// and keeps the plugin's own log lines ("proxy_<level>_log: <message>"),
// written to out with a time stamp. The emulator's traces of every host
// call (Redis queries as byte lists, header dumps…) are dropped unless
// trace is on.
type logWriter struct {
	mu    sync.Mutex
	out   io.Writer
	trace bool
}

const pluginLogMarker = "proxy_"

func (l *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	i := strings.Index(line, pluginLogMarker)
	if i >= 0 {
		level, msg, ok := strings.Cut(line[i+len(pluginLogMarker):], "_log: ")
		if ok && !strings.ContainsAny(level, " :") {
			l.printf("plugin %s: %s", level, msg)
			return len(p), nil
		}
	}
	if l.trace {
		l.printf("host: %s", line)
	}
	return len(p), nil
}

// printf writes one time-stamped line.
func (l *logWriter) printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "%s %s\n", time.Now().Format("15:04:05.000"), msg)
}
