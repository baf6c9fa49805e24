package config

import (
	"strings"
	"time"
	_ "time/tzdata" // IANA time zones in the WASM VM, which has no /usr/share/zoneinfo

	"github.com/tidwall/gjson"
)

// Calendar windows. Second, minute and hour windows are aligned to the
// epoch, as they always were: a window of w seconds holds the seconds whose
// t / w is its number. Week and month windows follow the calendar of
// calendar.time_zone (UTC by default): a week starts at local midnight of
// calendar.week_start (Monday by default), a month at local midnight of
// its 1st; a day window does too when a time zone other than UTC is set
// (in UTC, the epoch's days are the calendar's). Daylight-saving changes
// are the time zone's: such a day lasts 23 or 25 hours; where the change
// skips midnight itself, the day starts when the clocks jump (see
// midnight).
//
// A calendar window keeps the length its configuration field names as its
// Seconds (week: WeekSeconds, month: MonthSeconds, nominal), which names
// it everywhere (Redis keys, overrides, the quota endpoints); its periods
// come from Period. Every replica computes the same periods from the
// same configuration; which period a call counts in is decided by Redis's
// clock (see scripts: the plugin sends the bounds around its own clock, the
// script takes the period that holds Redis's time).

// Nominal lengths of the calendar windows.
const (
	DaySeconds   = 86400
	WeekSeconds  = 7 * DaySeconds
	MonthSeconds = 30 * DaySeconds
)

// Calendar is calendar: the time zone and the first day of the week that
// align day, week and month windows.
type Calendar struct {
	Location  *time.Location // nil: UTC, where day windows keep the epoch's days
	WeekStart time.Weekday
}

// Aligned reports whether a window of this length follows the calendar
// rather than the epoch: weeks and months always, days in a time zone
// other than UTC.
func (c *Calendar) Aligned(seconds int64) bool {
	return seconds == WeekSeconds || seconds == MonthSeconds || seconds == DaySeconds && c.Location != nil
}

// Period returns the start and the end (unix seconds) of the period of a
// window of this length that holds unix second t: for a fixed window, the
// multiple of its length at or before t and the next.
func (c *Calendar) Period(seconds, t int64) (start, end int64) {
	if !c.Aligned(seconds) {
		start = t - mod(t, seconds)
		return start, start + seconds
	}
	s := c.periodStart(seconds, time.Unix(t, 0))
	return s.Unix(), c.step(seconds, s, 1).Unix()
}

// Bounds returns, for a calendar window, the start of the period before
// the one that holds t, the start of that one, of the next, and the next's
// end: what a script call carries so that Redis, whose clock decides, can
// pick the period of its own time (or of an admission's, for a refund).
func (c *Calendar) Bounds(seconds, t int64) [4]int64 {
	s := c.periodStart(seconds, time.Unix(t, 0))
	return [4]int64{c.step(seconds, s, -1).Unix(), s.Unix(), c.step(seconds, s, 1).Unix(), c.step(seconds, s, 2).Unix()}
}

// periodStart is the local midnight that starts the period holding t.
func (c *Calendar) periodStart(seconds int64, t time.Time) time.Time {
	loc := c.location()
	t = t.In(loc)
	y, m, d := t.Date()
	switch seconds {
	case MonthSeconds:
		return midnight(y, m, 1, loc)
	case WeekSeconds:
		back := (int(t.Weekday()) - int(c.WeekStart) + 7) % 7
		return midnight(y, m, d-back, loc)
	}
	return midnight(y, m, d, loc)
}

// step is the local midnight n periods after the period start s (n < 0:
// before).
func (c *Calendar) step(seconds int64, s time.Time, n int) time.Time {
	y, m, d := s.In(c.location()).Date()
	switch seconds {
	case MonthSeconds:
		return midnight(y, m+time.Month(n), 1, c.location())
	case WeekSeconds:
		return midnight(y, m, d+7*n, c.location())
	}
	return midnight(y, m, d+n, c.location())
}

// midnight is the first instant of the local date y-m-d in loc (month and
// day normalised as time.Date does): its midnight, or, where a
// daylight-saving change skips midnight (America/Santiago and
// Atlantic/Azores in spring, America/Havana, America/Asuncion until 2024),
// the instant the clocks jump at, to 01:00. time.Date would give the
// missing midnight the offset before the jump, an instant that is 23:00
// of the day before: that day would end an hour early.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date() // normalised
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty == y && tm == m && td == d {
		return t
	}
	_, jump := t.ZoneBounds() // t is on the day before, in the zone the jump ends
	return jump
}

func (c *Calendar) location() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// mod is t mod n, never negative.
func mod(t, n int64) int64 {
	if r := t % n; r >= 0 {
		return r
	}
	return t%n + n
}

// utcNames are the IANA names of UTC itself.
var utcNames = map[string]bool{"UTC": true, "Etc/UTC": true, "Etc/UCT": true, "UCT": true, "Universal": true,
	"Etc/Universal": true, "Zulu": true, "Etc/Zulu": true, "GMT": true, "Etc/GMT": true, "GMT0": true, "Etc/GMT0": true,
	"GMT+0": true, "GMT-0": true, "Etc/GMT+0": true, "Etc/GMT-0": true, "Greenwich": true, "Etc/Greenwich": true}

// calendarFields is the table of calendar.
var calendarFields = fields[Calendar]{
	customField("time_zone", readTimeZone),
	enumField("week_start", []string{"sunday", "monday"}, func(c *Calendar, i int) { c.WeekStart = time.Weekday(i) }),
}

// readTimeZone reads an IANA time zone name ("Europe/Berlin"); UTC (and
// its aliases) keeps the epoch's days.
func readTimeZone(c *Calendar, path string, v gjson.Result) error {
	name, err := readNonEmptyString(path, v)
	if err != nil {
		return err
	}
	loc, lerr := time.LoadLocation(name)
	if lerr != nil || strings.EqualFold(name, "local") {
		return fieldErr(path, "unknown time zone ", quote(name), ` (an IANA name, such as "Europe/Berlin" or "America/New_York")`)
	}
	if utcNames[loc.String()] {
		loc = nil // UTC itself: day windows keep the epoch's days
	}
	c.Location = loc
	return nil
}
