package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCalendarPeriods(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	at := func(s string) int64 {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		require.NoError(t, err)
		return tm.Unix()
	}
	c := &Calendar{Location: berlin, WeekStart: time.Monday}

	// Days start at local midnight; the day DST starts (2026-03-29) lasts 23 hours, the day it ends 25.
	start, end := c.Period(DaySeconds, at("2026-03-29 12:00"))
	require.Equal(t, at("2026-03-29 00:00"), start)
	require.Equal(t, at("2026-03-30 00:00"), end)
	require.Equal(t, int64(23*3600), end-start)
	start, end = c.Period(DaySeconds, at("2026-10-25 23:59"))
	require.Equal(t, int64(25*3600), end-start)

	// Weeks start on Monday (Sunday when asked); months on the 1st, across
	// a DST change and a month end.
	start, end = c.Period(WeekSeconds, at("2026-03-29 12:00")) // a Sunday
	require.Equal(t, at("2026-03-23 00:00"), start)
	require.Equal(t, at("2026-03-30 00:00"), end)
	sunday := &Calendar{Location: berlin, WeekStart: time.Sunday}
	start, end = sunday.Period(WeekSeconds, at("2026-03-29 12:00"))
	require.Equal(t, at("2026-03-29 00:00"), start)
	require.Equal(t, at("2026-04-05 00:00"), end)
	start, end = c.Period(MonthSeconds, at("2026-03-31 23:59"))
	require.Equal(t, at("2026-03-01 00:00"), start)
	require.Equal(t, at("2026-04-01 00:00"), end)
	start, _ = c.Period(MonthSeconds, at("2026-04-01 00:00"))
	require.Equal(t, at("2026-04-01 00:00"), start, "the month starts at local midnight of the 1st")
	require.Equal(t, [4]int64{at("2025-12-01 00:00"), at("2026-01-01 00:00"), at("2026-02-01 00:00"), at("2026-03-01 00:00")},
		c.Bounds(MonthSeconds, at("2026-01-15 10:00")), "across a year end")

	// Without a time zone, days are the epoch's; hours and minutes always are.
	utc := &Calendar{WeekStart: time.Monday}
	require.False(t, utc.Aligned(DaySeconds))
	require.True(t, utc.Aligned(WeekSeconds))
	start, end = utc.Period(DaySeconds, 86400*20000+5)
	require.Equal(t, [2]int64{86400 * 20000, 86400 * 20001}, [2]int64{start, end})
	start, _ = c.Period(3600, 3600*500000+7)
	require.Equal(t, int64(3600*500000), start)
	start, end = utc.Period(WeekSeconds, time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC).Unix()) // a Thursday
	require.Equal(t, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Unix(), start)
	require.Equal(t, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).Unix(), end)
}

// Where a daylight-saving change skips local midnight, the day starts
// when the clocks jump (to 01:00): the day before ends then, not an hour
// early, and no period is empty.
func TestCalendarDaysWhereDSTSkipsMidnight(t *testing.T) {
	for _, z := range []struct {
		zone        string
		jump        string // the first instant of the day, UTC
		dayBefore   string // its start, UTC
		hoursOfJump int64  // the jump day's length
	}{
		{"America/Santiago", "2026-09-06 04:00", "2026-09-05 04:00", 23},
		{"America/Asuncion", "2024-10-06 04:00", "2024-10-05 04:00", 23},
		{"America/Havana", "2026-03-08 05:00", "2026-03-07 05:00", 23},
		{"Atlantic/Azores", "2026-03-29 01:00", "2026-03-28 01:00", 23},
	} {
		loc, err := time.LoadLocation(z.zone)
		require.NoError(t, err)
		utc := func(s string) int64 {
			tm, err := time.Parse("2006-01-02 15:04", s)
			require.NoError(t, err)
			return tm.Unix()
		}
		c := &Calendar{Location: loc, WeekStart: time.Monday}
		jump := utc(z.jump)
		start, end := c.Period(DaySeconds, jump-1800) // 23:30 of the day before
		require.Equal(t, utc(z.dayBefore), start, z.zone)
		require.Equal(t, jump, end, "%s: the day before ends when the clocks jump", z.zone)
		start, end = c.Period(DaySeconds, jump)
		require.Equal(t, jump, start, z.zone)
		require.Equal(t, z.hoursOfJump*3600, end-start, z.zone)
		b := c.Bounds(DaySeconds, jump+60)
		require.Equal(t, [4]int64{utc(z.dayBefore), jump, end, end + 86400}, b, z.zone)
		for i := 1; i < 4; i++ {
			require.Greater(t, b[i], b[i-1], "%s: no empty period", z.zone)
		}
		// A week and a month that start on such a day start at the jump too.
		for _, seconds := range []int64{WeekSeconds, MonthSeconds} {
			start, end := c.Period(seconds, jump)
			require.Less(t, start, end, z.zone)
			local := time.Unix(start, 0).In(loc)
			require.Equal(t, local.Day(), time.Unix(start-1, 0).In(loc).AddDate(0, 0, 1).Day(), "%s: the day before ends at its start", z.zone)
		}
	}
	sunday := &Calendar{Location: mustLoad(t, "America/Santiago"), WeekStart: time.Sunday}
	start, _ := sunday.Period(WeekSeconds, time.Date(2026, 9, 8, 12, 0, 0, 0, time.UTC).Unix())
	require.Equal(t, time.Date(2026, 9, 6, 4, 0, 0, 0, time.UTC).Unix(), start, "a week from Sunday 6 September starts at its jump")
}

func mustLoad(t *testing.T, zone string) *time.Location {
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	return loc
}

func TestParseCalendar(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","calendar":{"time_zone":"Europe/Berlin","week_start":"sunday"},"global_threshold":{"token_per_month":100,"query_per_week":5},`+redisOK+`}`)
	require.Equal(t, "Europe/Berlin", c.Calendar.Location.String())
	require.Equal(t, time.Sunday, c.Calendar.WeekStart)
	require.Equal(t, []Window{
		{Field: "query_per_week", Unit: UnitRequests, Seconds: WeekSeconds, Limit: 5},
		{Field: "token_per_month", Unit: UnitTokens, Seconds: MonthSeconds, Limit: 100},
	}, c.Global.Windows)
	c = mustParse(t, `{"rule_name":"r","calendar":{"time_zone":"UTC"},"global_threshold":{"token_per_day":100},`+redisOK+`}`)
	require.Nil(t, c.Calendar.Location, "UTC keeps the epoch's days")
	require.Equal(t, time.Monday, c.Calendar.WeekStart, "weeks start on Monday by default")
	for config, msg := range map[string]string{
		`"calendar":{"time_zone":"Mars/Olympus"}`: `calendar.time_zone: unknown time zone "Mars/Olympus" (an IANA name, such as "Europe/Berlin" or "America/New_York")`,
		`"calendar":{"time_zone":"Local"}`:        `calendar.time_zone: unknown time zone "Local" (an IANA name, such as "Europe/Berlin" or "America/New_York")`,
		`"calendar":{"week_start":"friday"}`:      `calendar.week_start: must be "sunday" or "monday", got "friday"`,
		`"calendar":{"timezone":"UTC"}`:           `calendar.timezone: unknown field (did you mean time_zone?)`,
	} {
		_, err := ParseString(`{"rule_name":"r",` + config + `,"global_threshold":{"token_per_day":100},` + redisOK + `}`)
		require.EqualError(t, err, msg)
	}
}
