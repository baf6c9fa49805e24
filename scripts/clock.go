package scripts

import (
	"strconv"
	"strings"
	"time"
)

// Clock is the caller's view of Redis's clock, which decides the period of
// a calendar window: this machine's clock, corrected by the time Redis gave
// when the bounds worked out from it missed Redis's period (the scripts
// answer ATRL_TIME <Redis's second>, and the call is sent again).
type Clock struct {
	offset int64 // seconds: Redis's clock less this machine's
}

// RedisClock is the one Clock of this process (a plugin VM, the CLI): the
// Redis servers a process talks to keep one time.
var RedisClock = &Clock{}

// Now is the caller's estimate of Redis's unix second.
func (c *Clock) Now() int64 { return time.Now().Unix() + c.offset }

// Learn corrects the clock by Redis's second when err is a script's
// ATRL_TIME error, and reports whether it was: the call is to be sent
// again, its bounds worked out anew.
func (c *Clock) Learn(err error) bool {
	redisSecond, ok := redisTime(err)
	if ok {
		c.offset = redisSecond - time.Now().Unix()
	}
	return ok
}

// redisTime returns Redis's second from a script's ATRL_TIME error: the
// bounds of a calendar window the call carried were worked out from a
// clock a period off Redis's (see period.lua).
func redisTime(err error) (int64, bool) {
	if err == nil {
		return 0, false
	}
	msg := err.Error()
	i := strings.Index(msg, timeErrorPrefix)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(timeErrorPrefix):]
	if j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		rest = rest[:j]
	}
	n, perr := strconv.ParseInt(rest, 10, 64)
	return n, perr == nil && n > 0
}

// timeErrorPrefix starts the scripts' error reply of a clock a period off.
const timeErrorPrefix = "ATRL_TIME "
