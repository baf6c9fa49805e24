package scripts

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
)

// Budget alerts (config.Alerts, alerts.lua). With thresholds in Options,
// admissions carry them in their options argument ("#50,80,100"), and so do
// the charges sent with ChargeAlerting, which also carry each window's
// limit (and "o" before the thresholds when overrides replace limits). A
// call that takes a bucket past a threshold first (once for every replica:
// a marker in Redis says so) reports it after its usual reply. A call
// without alerts is encoded byte for byte as before, and so is its reply.

// Crossing is a threshold a bucket of a window went past.
type Crossing struct {
	Subject   int   // the subject's index among the call's subjects
	Window    int   // the window's index among that subject's Windows
	Threshold int64 // the percentage of the limit
	Used      int64 // what the bucket holds now (nanodollars for a money window)
	Limit     int64 // the window's limit: its override, when the subject has one
	Reset     int64 // seconds until the window starts anew
	Bucket    int64 // the bucket's number (see period.lua)
	At        int64 // Redis's second of the call
}

// crossingLen is how many integers a crossing takes in a reply.
const crossingLen = 7

// verdictLen is how many integers admit.lua's verdict takes in its reply,
// and byKindLen how many its tightest window of each kind takes after it
// (Options.ByKind): 5 for each of tokens, requests and money.
const (
	verdictLen = 9
	byKindLen  = 15
)

// ChargeAlerting is Charge, reporting to done the thresholds it took a
// bucket past when budget_alerts is configured (then each window's limit
// is sent too). spent, when not nil, is the usage the charge is of, when
// the request had a reservation (a is then the difference): token and
// money windows alert on it, counted beside each bucket, not on the bucket
// (which holds reservations in flight too).
func (c *Client) ChargeAlerting(subjects []Subject, a Amounts, spent *Amounts, at int64, leaseID, chargeID string, done func([]Crossing, error)) error {
	encode := func(bySource bool) []byte {
		return c.encodeChargeCall(subjects, a, spent, at, leaseID, chargeID, "", true, bySource)
	}
	return c.dispatchCharge(subjects, chargeID != "", len(c.options.Thresholds) > 0, encode, done)
}

// ignoreCrossings adapts a charge's done, which takes no crossings.
func ignoreCrossings(done func(error)) func([]Crossing, error) {
	if done == nil {
		return nil
	}
	return func(_ []Crossing, err error) { done(err) }
}

// appendThresholds appends the alerts' suffix of an options argument when
// alerting and thresholds are configured: '#', 'o' when a charge is to read
// overrides, 'i' when the call may list an outbox in its owner's alert
// index (Options.OneServer, and no Redis Cluster refused a call), the
// alerts' owner (Options.AlertOwner), without 'i' the hash tag of the slot
// of key (the call's first key, in the slot of all), the thresholds
// ("#oi1a2b3c4d50,80,100", "#1a2b3c4dAKOB50,80,100").
func (c *Client) appendThresholds(arg []byte, alerting, overrides bool, key []byte) []byte {
	if !alerting || len(c.options.Thresholds) == 0 {
		return arg
	}
	arg = append(arg, '#')
	if overrides {
		arg = append(arg, 'o')
	}
	oneCall := c.options.OneServer && !c.crossSlot
	if oneCall {
		arg = append(arg, 'i')
	}
	arg = append(arg, c.options.AlertOwner...)
	if !oneCall {
		arg = cachekey.AppendSlotTag(arg, cachekey.Slot(key))
	}
	for i, t := range c.options.Thresholds {
		if i > 0 {
			arg = append(arg, ',')
		}
		arg = strconv.AppendInt(arg, t, 10)
	}
	return arg
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

// parseAdmit checks admit.lua's reply: a verdict, then with thresholds
// configured the crossings, if any.
func (c *Client) parseAdmit(v resp.Value, subjects []Subject) (Verdict, error) {
	a := v.Array()
	head := verdictLen
	if c.options.ByKind {
		head += byKindLen
	}
	if len(a) < head {
		return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	verdict, err := parseVerdict(resp.ArrayValue(a[:verdictLen]), len(subjects))
	if err != nil {
		return Verdict{}, err
	}
	if verdict.Subject >= 0 && verdict.Window >= len(subjects[verdict.Subject].Windows) {
		return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	if c.options.ByKind {
		if verdict.ByKind, err = parseByKind(a[verdictLen:head], subjects); err != nil {
			return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
		if c.options.Overrides {
			var n int
			if verdict.Overridden, n, err = parseOverridden(a[head:], subjects); err != nil {
				return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
			}
			head += n
		}
	}
	if len(a) > head {
		if len(c.options.Thresholds) == 0 {
			return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
		if verdict.Crossings, err = c.parseCrossings(a[head:], subjects, verdict.At); err != nil {
			return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
	}
	return verdict, nil
}

// parseByKind reads the tightest window of tokens, requests and money, in
// turn, from an admission's reply: 5 integers each (see admit.lua).
func parseByKind(a []resp.Value, subjects []Subject) (*[KindUSD + 1]Tightest, error) {
	var out [KindUSD + 1]Tightest
	for i, kind := range [...]Kind{KindTokens, KindRequests, KindUSD} {
		var n [5]int64
		for j := range n {
			if a[5*i+j].Type() != resp.Integer {
				return nil, ErrMalformed
			}
			n[j] = int64(a[5*i+j].Integer())
		}
		if n[0] == 0 {
			continue // no window of that kind
		}
		s, w := n[3]-1, n[4]-1
		if n[0] < 0 || n[1] < 0 || n[2] < 0 || s < 0 || s >= int64(len(subjects)) || w < 0 || w >= int64(len(subjects[s].Windows)) ||
			KindOf(subjects[s].Windows[w].Unit) != kind {
			return nil, ErrMalformed
		}
		out[kind] = Tightest{Limit: n[0], Remaining: n[1], ResetMs: n[2], Subject: int(s), Window: int(w)}
	}
	return &out, nil
}

// parseOverridden reads the overrides in force from an admission's reply
// (see admit.lua): their count, then 3 integers each; it returns them and
// how many values they took.
func parseOverridden(a []resp.Value, subjects []Subject) ([]Overridden, int, error) {
	if len(a) == 0 || a[0].Type() != resp.Integer {
		return nil, 0, ErrMalformed
	}
	n := a[0].Integer()
	if n < 0 || 1+3*n > len(a) {
		return nil, 0, ErrMalformed
	}
	if n == 0 {
		return nil, 1, nil
	}
	out := make([]Overridden, 0, n)
	for i := 1; i < 1+3*n; i += 3 {
		if a[i].Type() != resp.Integer || a[i+1].Type() != resp.Integer || a[i+2].Type() != resp.Integer {
			return nil, 0, ErrMalformed
		}
		s, w, limit := a[i].Integer()-1, a[i+1].Integer()-1, int64(a[i+2].Integer())
		if s < 0 || s >= len(subjects) || w < -1 || w >= len(subjects[s].Windows) || w < 0 && subjects[s].Concurrent == 0 || limit <= 0 {
			return nil, 0, ErrMalformed
		}
		out = append(out, Overridden{Subject: s, Window: w, Limit: limit})
	}
	return out, 1 + 3*n, nil
}

// parseCharge checks charge.lua's reply: a total per window, or nothing
// (maybeEmpty: a charge applied before, a cancel with nothing to undo), or
// when alerting the totals, Redis's second and at least one crossing; or,
// for a charge applied before that crossed, -1, its second and crossings.
func (c *Client) parseCharge(v resp.Value, subjects []Subject, maybeEmpty, alerting bool) ([]Crossing, error) {
	a, windows := v.Array(), windowArgs(subjects, 1)-len(subjects)
	switch {
	case v.Type() == resp.Array && (len(a) == windows || maybeEmpty && len(a) == 0):
		return nil, nil
	case maybeEmpty && alerting && len(a) >= 2+crossingLen && a[0].Type() == resp.Integer && a[0].Integer() == -1 && a[1].Type() == resp.Integer:
		// Applied before: what its first try crossed, kept in its marker.
		crossed, err := c.parseCrossings(a[2:], subjects, int64(a[1].Integer()))
		if err != nil || a[1].Integer() <= 0 {
			return nil, fmt.Errorf("%w: charge returned %s", ErrMalformed, describe(v))
		}
		return crossed, nil
	case !alerting || len(a) < windows+1+crossingLen || a[windows].Type() != resp.Integer || a[windows].Integer() <= 0:
		return nil, fmt.Errorf("%w: charge returned %s", ErrMalformed, describe(v))
	}
	crossed, err := c.parseCrossings(a[windows+1:], subjects, int64(a[windows].Integer()))
	if err != nil {
		return nil, fmt.Errorf("%w: charge returned %s", ErrMalformed, describe(v))
	}
	return crossed, nil
}

// parseCrossings reads at least one crossing, crossingLen integers each,
// about the subjects of the call, at Redis's second at.
func (c *Client) parseCrossings(a []resp.Value, subjects []Subject, at int64) ([]Crossing, error) {
	if len(a) == 0 || len(a)%crossingLen != 0 {
		return nil, ErrMalformed
	}
	out := make([]Crossing, 0, len(a)/crossingLen)
	for i := 0; i < len(a); i += crossingLen {
		var n [crossingLen]int64
		for j := range n {
			if a[i+j].Type() != resp.Integer {
				return nil, ErrMalformed
			}
			n[j] = int64(a[i+j].Integer())
		}
		s, w := n[0]-1, n[1]-1
		if s < 0 || s >= int64(len(subjects)) || w < 0 || w >= int64(len(subjects[s].Windows)) ||
			!slices.Contains(c.options.Thresholds, n[2]) || n[3] < 0 || n[4] <= 0 || n[5] < 0 || n[6] < 0 {
			return nil, ErrMalformed
		}
		out = append(out, Crossing{Subject: int(s), Window: int(w), Threshold: n[2], Used: n[3], Limit: n[4], Reset: n[5], Bucket: n[6], At: at})
	}
	return out, nil
}
