package scripts

import (
	"strconv"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// The encoding of the calls' arguments as the scripts read them: those of
// the limiter's calls (admit.lua, charge.lua, renew.lua), and the subjects'
// heads, windows and amounts the calls of every script share. The RESP
// framing and a call's head are in scripts.go.

// defaultCalendar is the calendar of Options without one.
var defaultCalendar = &config.Calendar{WeekStart: time.Monday}

// encodeAdmit encodes one call of admit.lua. The cost is never negative:
// it is what the limiter priced (config.Cost.Tokens, config.Pricing.NanoUSD
// bound it where a request's counts become amounts), and appendAmounts
// keeps it exact for the script whatever it is.
func (c *Client) encodeAdmit(subjects []budget.Subject, cost budget.Amounts, leaseID, markerID string, bySource bool) []byte {
	q := Limiter.appendCall(make([]byte, 0, callSize(subjects, 24)+len(leaseID)+len(markerID)+20), bySource, opAdmit, subjects, true, 3+windowArgs(subjects, 2))
	q = appendBulkString(q, "") // no time given: the script reads Redis's clock
	q = appendAmounts(q, cost.Tokens, cost.USD)
	q = c.appendOptions(q, true, leaseID, true, markerID, true, firstKey(subjects))
	var now int64
	return c.appendAdmitSubjects(q, subjects, &now)
}

// appendAdmitSubjects appends the subjects of an admission: each one's head,
// then its windows, each followed by its limit (see admit.lua). *now is as
// appendWindow has it.
func (c *Client) appendAdmitSubjects(q []byte, subjects []budget.Subject, now *int64) []byte {
	for i := range subjects {
		s := &subjects[i]
		q = appendSubjectHead(q, subjects, i, true)
		for j, w := range s.Windows {
			q = c.options.appendWindow(q, w, now)
			q = appendLimit(q, w.Limit, s.WindowSoft(j), s.Open(j))
		}
	}
	return q
}

// encodeCharge encodes one call of charge.lua.
func (c *Client) encodeCharge(subjects []budget.Subject, a budget.Amounts, at int64, leaseID, chargeID, cancelID string, bySource bool) []byte {
	return c.encodeChargeCall(subjects, a, nil, at, leaseID, chargeID, cancelID, false, bySource)
}

// encodeChargeCall encodes one call of charge.lua, with each window's limit
// and the thresholds when alerting (and thresholds are configured).
func (c *Client) encodeChargeCall(subjects []budget.Subject, a budget.Amounts, spent *budget.Amounts, at int64, leaseID, chargeID, cancelID string, alerting, bySource bool) []byte {
	alerting = alerting && len(c.options.Thresholds) > 0
	perWindow := 1
	if alerting {
		perWindow = 2 // its limit
	}
	q := Limiter.appendCall(make([]byte, 0, callSize(subjects, 12*perWindow)+len(leaseID)+len(chargeID)+len(cancelID)+32), bySource, opCharge, subjects, true, 5+windowArgs(subjects, perWindow))
	q = appendBulkString(q, "") // now, by Redis's clock
	if at > 0 {
		q = appendBulkInt(q, at)
	} else {
		q = appendBulkString(q, "") // the buckets of now
	}
	q = c.appendChargeOptions(q, leaseID, chargeID, cancelID, spent, alerting, firstKey(subjects))
	q = appendAmounts(q, a.Tokens, a.USD)
	q = appendBulkInt(q, tokenAmount(a.Requests))
	var now int64
	for i, s := range subjects {
		q = appendSubjectHead(q, subjects, i, false)
		for _, w := range s.Windows {
			q = c.options.appendWindow(q, w, &now)
			if alerting {
				q = appendBulkInt(q, w.Limit)
			}
		}
	}
	return q
}

// tokenAmount takes an amount the scripts add into ±estimate.MaxTokens:
// they read it as a double, exact only up to 2^53. It and usdAmount are
// the one bound of the amounts sent: what the limiter sends is within it
// already (see encodeAdmit), but a Client sends nothing Lua cannot hold,
// whatever it is asked.
func tokenAmount(n int64) int64 {
	return min(max(n, -estimate.MaxTokens), estimate.MaxTokens)
}

// usdAmount takes nanodollars the scripts add into ±config.MaxLimit, as
// tokenAmount does tokens.
func usdAmount(n int64) int64 {
	return min(max(n, -config.MaxLimit), config.MaxLimit)
}

// appendAmounts appends the argument of tokens and nanodollars: the tokens
// alone when there is no money ("1200"), else both ("1200:3250000"), each
// bounded so that the scripts hold it exactly.
func appendAmounts(dst []byte, tokens, usd int64) []byte {
	if usd == 0 {
		return appendBulkInt(dst, tokenAmount(tokens))
	}
	var buf [48]byte
	return appendBulk(dst, amountsArg(buf[:0], tokens, usd))
}

// amountsArg appends tokens and, when not 0, ':' and nanodollars, each
// bounded so that the scripts hold it exactly.
func amountsArg(arg []byte, tokens, usd int64) []byte {
	arg = strconv.AppendInt(arg, tokenAmount(tokens), 10)
	if usd != 0 {
		arg = strconv.AppendInt(append(arg, ':'), usdAmount(usd), 10)
	}
	return arg
}

// appendWindowType appends the window type as the scripts read it: 'f'
// (fixed) or 's' (sliding); in capitals, for an admission, when it is to
// report each kind's tightest window (ByKind).
func (o Options) appendWindowType(arg []byte, admission bool) []byte {
	c := byte('f')
	if o.Sliding {
		c = 's'
	}
	if admission && o.ByKind {
		c -= 'a' - 'A'
	}
	return append(arg, c)
}

// appendOptions appends the options argument of a call, without allocating:
// the window type ('f' or 's') and 'o' with overrides when withWindowType
// (admit.lua),
// then, with a lease, "<lease seconds>:<id>" to take or renew it
// (withSeconds) or ":<id>" to release it, then, with an admission marker,
// "!<seconds>/<marker id>", then, when alerting, the thresholds (see
// appendThresholds: key is the call's first).
func (c *Client) appendOptions(dst []byte, withWindowType bool, leaseID string, withSeconds bool, markerID string, alerting bool, key []byte) []byte {
	var buf [96]byte
	arg := buf[:0]
	if withWindowType {
		arg = c.options.appendWindowType(arg, true)
		if c.options.Overrides {
			arg = append(arg, 'o')
		}
	}
	if leaseID != "" {
		if withSeconds {
			arg = strconv.AppendInt(arg, c.options.LeaseSeconds, 10)
		}
		arg = append(append(arg, ':'), leaseID...)
	}
	return appendBulk(dst, c.appendThresholds(c.appendMarker(arg, markerID), alerting, false, key))
}

// appendMarker appends "!<seconds>/<marker id>" for an admission marker ("":
// none), the suffix of an admission that notes it ran and of the charge that
// cancels it.
func (c *Client) appendMarker(arg []byte, markerID string) []byte {
	if markerID == "" {
		return arg
	}
	arg = strconv.AppendInt(append(arg, '!'), c.AdmissionMarkerSeconds(), 10)
	return append(append(arg, '/'), markerID...)
}

// appendChargeOptions appends the options argument of a charge (see
// charge.lua): the window type, ":<lease id>" to release a lease, and
// "/<seconds>/<charge id>" to mark the charge applied, or "!<seconds>/<marker
// id>" to cancel an admission, then, when alerting, "=<tokens>:<nanodollars>"
// for the usage of a reservation's charge (spent) and the thresholds (see
// appendThresholds: key is the call's first), without allocating.
func (c *Client) appendChargeOptions(dst []byte, leaseID, chargeID, cancelID string, spent *budget.Amounts, alerting bool, key []byte) []byte {
	var buf [128]byte
	arg := c.options.appendWindowType(buf[:0], false)
	if leaseID != "" {
		arg = append(append(arg, ':'), leaseID...)
	}
	if chargeID != "" {
		arg = strconv.AppendInt(append(arg, '/'), c.ChargeMarkerSeconds(), 10)
		arg = append(append(arg, '/'), chargeID...)
	}
	arg = c.appendMarker(arg, cancelID)
	if alerting && spent != nil && len(c.options.Thresholds) > 0 { // the usage a reservation's charge is of (never negative, as encodeAdmit's cost)
		arg = strconv.AppendInt(append(arg, '='), tokenAmount(spent.Tokens), 10)
		arg = strconv.AppendInt(append(arg, ':'), usdAmount(spent.USD), 10)
	}
	return appendBulk(dst, c.appendThresholds(arg, alerting, c.options.Overrides, key))
}

// appendLimit appends a window's limit in an admission, followed by 's'
// when the window is soft (it counts, but never closes), then, when less
// than all of it is open to the request's priority level, '%' and the
// percent that is ("1000s%70").
func appendLimit(dst []byte, limit int64, soft bool, open int64) []byte {
	if !soft && open >= 100 {
		return appendBulkInt(dst, limit)
	}
	var digits [32]byte
	arg := strconv.AppendInt(digits[:0], limit, 10)
	if soft {
		arg = append(arg, 's')
	}
	if open < 100 {
		arg = strconv.AppendInt(append(arg, '%'), open, 10)
	}
	return appendBulk(dst, arg)
}

// appendSubjectHead appends subject i's window count and, when it has a
// concurrency limit, "c" and (admit) the limit, then, when it is sent
// relative to the subject before it (see budget.Subject.Suffix), its key's
// suffix: "2", "2c5", "2c" or "1:m:gpt-4o".
func appendSubjectHead(dst []byte, subjects []budget.Subject, i int, admit bool) []byte {
	s := subjects[i]
	var head [96]byte
	h := strconv.AppendInt(head[:0], int64(len(s.Windows)), 10)
	if s.Concurrent > 0 {
		h = append(h, 'c')
		if admit {
			h = strconv.AppendInt(h, s.Concurrent, 10)
			if s.SoftConcurrency {
				h = append(h, 's')
			}
			if open := s.Open(-1); open < 100 {
				h = strconv.AppendInt(append(h, '%'), open, 10)
			}
		}
	}
	if isRelative(subjects, i) {
		h = append(h, s.Key[len(s.Key)-s.Suffix:]...)
	}
	return appendBulk(dst, h)
}

// appendWindow appends a window as the scripts name it: its unit ('t'
// tokens, 'q' requests, 'u' money) and its length in seconds, e.g. "t60";
// for a calendar window, then '@' and the bounds of the periods around the
// clock's time, "t2592000@1761955200:1764547200:1767225600:1769904000"
// (see period.lua). *now is the clock's time, read on first use (0: not
// yet), so that a call reads it once, and only when it has a calendar
// window.
func (o Options) appendWindow(dst []byte, w config.Window, now *int64) []byte {
	var spec [80]byte
	s := appendSpec(spec[:0], w.Unit, w.Seconds)
	cal := o.Calendar
	if cal == nil {
		cal = defaultCalendar
	}
	if cal.Aligned(w.Seconds) {
		if *now == 0 {
			*now = RedisClock.Now()
		}
		for i, b := range cal.Bounds(w.Seconds, *now) {
			s = strconv.AppendInt(append(s, "@:::"[i]), b, 10)
		}
	}
	return appendBulk(dst, s)
}

// appendSpec appends a window's name in the scripts: "t60", "q3600".
func appendSpec(dst []byte, unit config.Unit, seconds int64) []byte {
	c := byte('t')
	switch unit {
	case config.UnitRequests:
		c = 'q'
	case config.UnitUSD:
		c = 'u'
	}
	return strconv.AppendInt(append(dst, c), seconds, 10)
}

// windowArgs counts the per-window arguments of a call: a window count per
// subject, plus perWindow arguments per window.
func windowArgs(subjects []budget.Subject, perWindow int) int {
	n := 0
	for _, s := range subjects {
		n += 1 + perWindow*len(s.Windows)
	}
	return n
}

// firstKey is the key of a call's first subject (nil: none).
func firstKey(subjects []budget.Subject) []byte {
	if len(subjects) == 0 {
		return nil
	}
	return subjects[0].Key
}

// callSize guesses an encoded call's size so it is built in one allocation.
func callSize(subjects []budget.Subject, perWindow int) int {
	n := 96
	for _, s := range subjects {
		n += len(s.Key) + 16 + perWindow*len(s.Windows)
	}
	return n
}
