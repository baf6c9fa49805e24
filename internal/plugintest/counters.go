package plugintest

// The counters the plugin keeps in Redis, as a test reads them.

import (
	"strconv"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Bucket is the Redis key of a subject's bucket of a window that holds the
// second at: the window as the scripts' keys name it, a kind and its length
// in seconds ("t60": tokens a minute, "q86400": requests a day, "u86400":
// nanodollars a day). Calendar windows (weeks, months, days in a time
// zone) number their buckets by their start instead.
func Bucket(subject, window string, at int64) string {
	seconds, err := strconv.ParseInt(window[1:], 10, 64)
	if err != nil || seconds <= 0 {
		panic("plugintest.Bucket: not a window: " + window)
	}
	return subject + ":" + window + ":" + strconv.FormatInt(at/seconds, 10)
}

// Counter reads a subject's counter of a window (see Bucket) in the bucket
// that holds the second at (0 when absent).
func Counter(r redistest.Backend, subject, window string, at int64) int64 {
	return r.Int("GET", Bucket(subject, window, at))
}

// CounterAtClock reads a subject's counter of a window in the bucket of the
// test clock (Backend.SetClock), the time the scripts' calls run at.
func CounterAtClock(r redistest.Backend, subject, window string) int64 {
	return Counter(r, subject, window, int64(r.Clock()))
}

// Leases reads how many concurrency leases a subject holds.
func Leases(r redistest.Backend, subject string) int64 {
	return r.Int("ZCARD", subject+":c")
}

// DayCounter reads the day counter of a subject (0 when absent), in the
// bucket of Redis's own clock.
func (p *Plugin) DayCounter(subject string) int64 {
	p.T.Helper()
	return Counter(p.Redis, subject, "t86400", p.Redis.Now())
}

// MinuteCounter reads the current minute counter of a subject, in the
// bucket of Redis's own clock.
func (p *Plugin) MinuteCounter(subject string) int64 {
	p.T.Helper()
	return Counter(p.Redis, subject, "t60", p.Redis.Now())
}
