package scripts

import (
	"slices"
	"strconv"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
)

// Budget alerts (config.Alerts, alerts.lua). With thresholds in Options,
// admissions carry them in their options argument ("#50,80,100"), and so do
// the charges sent with ChargeAlerting, which also carry each window's
// limit (and "o" before the thresholds when overrides replace limits). A
// call that takes a bucket past a threshold first (once for every replica:
// a marker in Redis says so) reports it after its usual reply. A call
// without alerts is encoded byte for byte as before, and so is its reply.

// crossingLen is how many integers a crossing takes in a reply.
const crossingLen = 7

// ChargeAlerting is Charge, reporting to done the thresholds it took a
// bucket past when budget_alerts is configured (then each window's limit
// is sent too). spent, when not nil, is the usage the charge is of, when
// the request had a reservation (a is then the difference): token and
// money windows alert on it, counted beside each bucket, not on the bucket
// (which holds reservations in flight too).
func (c *Client) ChargeAlerting(subjects []budget.Subject, a budget.Amounts, spent *budget.Amounts, at int64, leaseID, chargeID string, done func([]budget.Crossing, error)) error {
	encode := func(bySource bool) []byte {
		return c.encodeChargeCall(subjects, a, spent, at, leaseID, chargeID, "", true, bySource)
	}
	return c.dispatchCharge(subjects, chargeID != "", len(c.options.Thresholds) > 0, encode, done)
}

// ignoreCrossings adapts a charge's done, which takes no crossings.
func ignoreCrossings(done func(error)) func([]budget.Crossing, error) {
	if done == nil {
		return nil
	}
	return func(_ []budget.Crossing, err error) { done(err) }
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

// parseCrossings reads at least one crossing, crossingLen integers each,
// about the subjects of the call, at Redis's second at.
func (c *Client) parseCrossings(a []resp.Value, subjects []budget.Subject, at int64) ([]budget.Crossing, error) {
	if len(a) == 0 || len(a)%crossingLen != 0 {
		return nil, ErrMalformed
	}
	out := make([]budget.Crossing, 0, len(a)/crossingLen)
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
		out = append(out, budget.Crossing{Subject: int(s), Window: int(w), Threshold: n[2], Used: n[3], Limit: n[4], Reset: n[5], Bucket: n[6], At: at})
	}
	return out, nil
}
