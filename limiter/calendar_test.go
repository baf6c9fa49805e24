package limiter_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 26, calendar windows: weeks and months (and days, in a time zone)
// that reset at local midnight of the right day, across daylight-saving
// changes and month ends, on the test clock. Redis's clock decides; the
// plugin's own clock is years off it here (and the WASM VM's another), so
// every first call is told Redis's time and sent again.
func TestCalendarWindows(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	at := func(s string) float64 {
		tm, err := time.ParseInLocation("2006-01-02 15:04:05", s, berlin)
		require.NoError(t, err)
		return float64(tm.Unix())
	}
	calendar := `"calendar": {"time_zone": "Europe/Berlin"},`
	spend := func(p *plugintest.Plugin, tokens int) *plugintest.Exchange {
		t.Helper()
		x := p.Request(key)
		if x.Passed() {
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, tokens, 0))...)
		}
		return x
	}
	rejectedFor := func(x *plugintest.Exchange) int64 {
		t.Helper()
		local := x.RequireRejected(429)
		x.Done()
		n, err := strconv.ParseInt(plugintest.Header(local.Headers, "Retry-After"), 10, 64)
		require.NoError(t, err)
		return n
	}
	plugintest.RunTest(t, func(t *testing.T) {
		t.Cleanup(func() { redis.SetClock(0) })
		for _, c := range []struct {
			name, limits  string
			before, after string // the last seconds of a period, and the first of the next
			periodStart   string // the next period's start, local
			retryAfter    int64
			spec          string
		}{
			// March 2026 ends two days after the clocks went forward (29 March).
			{"a month, after a DST change", `"token_per_month": 1000`, "2026-03-31 23:58:00", "2026-04-01 00:00:30", "2026-04-01 00:00:00", 120, "t2592000"},
			// The week of 19 October 2026 ends on the Sunday the clocks go back.
			{"a week ending on a 25-hour day", `"token_per_week": 1000`, "2026-10-25 23:59:30", "2026-10-26 00:00:01", "2026-10-26 00:00:00", 30, "t604800"},
			// 29 March 2026 has 23 hours: its day ends at local midnight.
			{"a 23-hour day", `"token_per_day": 1000`, "2026-03-29 23:59:00", "2026-03-30 00:00:00", "2026-03-30 00:00:00", 60, "t86400"},
		} {
			t.Run(c.name, func(t *testing.T) {
				redis.Do("FLUSHALL")
				redis.SetClock(at(c.before))
				p := plugintest.Start(t, redis, plugintest.APIKeyConfig(calendar, c.limits))
				require.True(t, spend(p, 1000).Passed())
				assert.Equal(t, c.retryAfter, rejectedFor(spend(p, 1)), "until local midnight")
				redis.SetClock(at(c.after))
				require.True(t, spend(p, 400).Passed(), "a new period")
				start := int64(at(c.periodStart))
				assert.Equal(t, int64(400), redis.Int("GET", fmt.Sprintf("%s:%s:%d", plugintest.APIKeySubject, c.spec, start)),
					"the new period's bucket, numbered by its start")
			})
		}
	})
}

// Issue 35, point 4: where a daylight-saving change skips local midnight
// (America/Santiago, 6 September 2026: 00:00 -04 is 01:00 -03), the day
// ends when the clocks jump. A key that used its day up at 22:59 waits
// 3,660 s, not 60; at 23:30 it is still rejected; once the clocks have
// jumped, its new day counts in the bucket numbered by the jump.
func TestCalendarDayWhereDSTSkipsMidnight(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	jump := time.Date(2026, 9, 6, 4, 0, 0, 0, time.UTC).Unix() // 00:00 -04, which is 01:00 -03
	plugintest.RunTest(t, func(t *testing.T) {
		t.Cleanup(func() { redis.SetClock(0) })
		redis.Do("FLUSHALL")
		redis.SetClock(float64(jump - 61*60)) // 22:59 -04
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"calendar": {"time_zone": "America/Santiago"},`, `"token_per_day": 1000`))
		x := p.Request(key)
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1000, 0))...)
		local := p.Request(key).RequireRejected(429)
		assert.Equal(t, "3660", plugintest.Header(local.Headers, "Retry-After"), "until the day ends, when the clocks jump")
		redis.SetClock(float64(jump - 30*60)) // 23:30 -04
		local = p.Request(key).RequireRejected(429)
		assert.Equal(t, "1800", plugintest.Header(local.Headers, "Retry-After"))
		redis.SetClock(float64(jump + 30)) // 01:00:30 -03
		x = p.Request(key)
		require.True(t, x.Passed(), "a new day")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 400, 0))...)
		assert.Equal(t, int64(400), redis.Int("GET", fmt.Sprintf("%s:t86400:%d", plugintest.APIKeySubject, jump)))
	})
}
