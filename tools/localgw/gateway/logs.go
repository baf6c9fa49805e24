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
// written to out with a time stamp, but for its note of each budget alert
// (alertMade). The emulator's traces of every host call (Redis queries as
// byte lists, header dumps…) are dropped unless trace is on.
type logWriter struct {
	mu    sync.Mutex
	out   io.Writer
	trace bool
	// held keeps the lines written while the plugin starts (nil: none
	// held): a configuration it refuses is said once, in New's error,
	// rather than also as the log lines that error repeats.
	held *[]string
}

const pluginLogMarker = "proxy_"

func (l *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	i := strings.Index(line, pluginLogMarker)
	if i >= 0 {
		level, msg, ok := strings.Cut(line[i+len(pluginLogMarker):], "_log: ")
		if ok && !strings.ContainsAny(level, " :") {
			if !alertMade(level, msg) {
				l.printf("plugin %s: %s", level, msg)
			}
			return len(p), nil
		}
	}
	if l.trace {
		l.printf("host: %s", line)
	}
	return len(p), nil
}

// alertMade says whether a plugin log line is its note of a budget alert it
// made ("budget alert: {...}", at info). The gateway leaves it out: its own
// line, when it sends the alert, says the alert and where it went
// (webhook.go), so that make run shows one line per alert. In a real
// gateway the plugin's line is kept, the only one there.
func alertMade(level, msg string) bool {
	return level == "info" && strings.HasPrefix(stripLogTags(msg), "budget alert: {")
}

// printf writes one time-stamped line.
func (l *logWriter) printf(format string, args ...any) {
	line := time.Now().Format("15:04:05.000") + " " + fmt.Sprintf(format, args...) + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		*l.held = append(*l.held, line)
		return
	}
	io.WriteString(l.out, line)
}

// hold keeps the lines written from now on until release.
func (l *logWriter) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = new([]string)
}

// release stops holding lines, and writes those held when write is true
// (drops them otherwise).
func (l *logWriter) release(write bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil && write {
		for _, line := range *l.held {
			io.WriteString(l.out, line)
		}
	}
	l.held = nil
}
