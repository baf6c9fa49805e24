package scripts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// The budget alerts' outboxes (alerts.lua writes them, alertbox.lua hands
// them out). A call that takes a bucket past a threshold writes the alert
// to its subject's outbox of the configuration's owner (config.AlertOwner)
// in Redis, in the same call (and, on a Redis Cluster, notes the outbox in
// its slot's unlisted outboxes for the rule's sweep); the replica that made
// the call attaches the alert's body (AttachAlert) and lists the outbox in
// its owner's index (ListOutboxes), trying until it lands; every replica
// scans its owner's index now and then (ScanAlerts), claims what is due in
// the outboxes it leased (ClaimAlerts), POSTs it, removes what the webhook
// took (RemoveAlert), and settles the outbox in the index (SettleOutbox);
// scans hand out, once a second for the rule, slots whose unlisted
// outboxes the replica lists (UnlistedOutboxes). So an alert is delivered
// at least once, whichever replica made it or is still running, to its
// owner's webhook only, and with the same id every time.

// Outbox is where the budget alerts of an owner about a subject (its key)
// wait.
func Outbox(subject []byte, owner string) []byte {
	out := make([]byte, 0, len(subject)+len(cachekey.OutboxSuffix)+len(owner))
	return append(append(append(out, subject...), cachekey.OutboxSuffix...), owner...)
}

// OutboxOwner returns the owner an outbox's key ends with.
func OutboxOwner(outbox string) (string, bool) {
	i := strings.LastIndex(outbox, cachekey.OutboxSuffix)
	if i < 0 || len(outbox)-i-len(cachekey.OutboxSuffix) != ownerLen {
		return "", false
	}
	owner := outbox[i+len(cachekey.OutboxSuffix):]
	for _, c := range owner {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return owner, true
}

// ownerLen is the length of an owner (config.AlertOwner).
const ownerLen = 8

// Alert is an alert in an outbox, as alerts.lua writes it
// ('t86400:20454:!80|850|1000|82800|1767229200'), with its body once
// attached.
type Alert struct {
	Head      string      // the bucket's window and number, and the threshold: "t86400:20454:!80"
	Unit      config.Unit // the window's
	Seconds   int64       // the window's length
	Threshold int64
	Used      int64
	Limit     int64
	Reset     int64  // seconds until the window starts anew, when it crossed
	At        int64  // the second it crossed
	Body      string // "" until attached
	Raw       string // the member, as Redis holds it
}

// AlertMember is the alert of a crossing of a subject's window (its name
// in keys, see OverrideName: "t86400") as its outbox holds it until its
// body is attached (ParseAlert reads it).
func AlertMember(c budget.Crossing, window string) string {
	return fmt.Sprintf("%s:%d:!%d|%d|%d|%d|%d", window, c.Bucket, c.Threshold, c.Used, c.Limit, c.Reset, c.At)
}

// ParseAlert reads an alert from an outbox; ok is false for what is not one.
func ParseAlert(raw string) (a Alert, ok bool) {
	f := strings.SplitN(raw, "|", 6)
	if len(f) < 5 {
		return a, false
	}
	a.Raw, a.Head = raw, f[0]
	head := strings.Split(a.Head, ":") // "t86400", "20454", "!80"
	if len(head) != 3 || !strings.HasPrefix(head[2], "!") {
		return Alert{}, false
	}
	var ok1 bool
	a.Unit, a.Seconds, ok1 = ParseWindowName(head[0])
	var err [6]error
	_, err[0] = strconv.ParseUint(head[1], 10, 63)
	a.Threshold, err[1] = strconv.ParseInt(head[2][1:], 10, 64)
	a.Used, err[2] = strconv.ParseInt(f[1], 10, 64)
	a.Limit, err[3] = strconv.ParseInt(f[2], 10, 64)
	a.Reset, err[4] = strconv.ParseInt(f[3], 10, 64)
	a.At, err[5] = strconv.ParseInt(f[4], 10, 64)
	for _, e := range err {
		if e != nil {
			return Alert{}, false
		}
	}
	if !ok1 || a.Threshold <= 0 || a.Threshold > 100 || a.Used < 0 || a.Limit <= 0 || a.Reset < 0 || a.At < 0 {
		return Alert{}, false
	}
	if len(f) == 6 {
		a.Body = f[5]
	}
	return a, true
}

// AlertID names the alert of head in outbox, the same for every replica
// and every try: a short hash, which gives nothing of the subject away.
func AlertID(outbox []byte, head string) string {
	h := sha256.New()
	h.Write(outbox)
	h.Write([]byte{'|'})
	h.Write([]byte(head))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// alertCall encodes a call of alertbox.lua: the keys, the operation, an
// empty time (Redis's clock) and the arguments.
func alertCall(keys [][]byte, op string, args ...string) Call {
	return func(bySource bool) []byte {
		subjects := make([]budget.Subject, len(keys))
		for i, k := range keys {
			subjects[i].Key = k
		}
		q := Alerts.appendCall(nil, bySource, op, subjects, false, 1+len(args))
		q = appendBulkString(q, "")
		for _, a := range args {
			q = appendBulkString(q, a)
		}
		return q
	}
}

// ListOutboxes lists outboxes in their owners' indexes among the rule's
// (its registry, cachekey.AlertRegistry), due now.
func (c *Client) ListOutboxes(registry []byte, outboxes []string, done func(error)) error {
	return c.dispatch(alertCall([][]byte{registry}, "list", append([]string{""}, outboxes...)...), func(v resp.Value, err error) {
		done(checkOne(v, err, "list"))
	})
}

// Scanned is what ScanAlerts handed out.
type Scanned struct {
	Token string   // the leases'
	Sweep int      // the first of the slots to sweep (-1: none)
	Own   []string // the owner's outboxes with an alert due, leased
	// Silent are the outboxes with an alert due of an owner no replica
	// has scanned for an hour (its configuration is gone), leased, to be
	// given up; SilentWebhook is its webhook's name, when known.
	Silent        []string
	SilentWebhook string
}

// ScanAlerts notes a scan of the owner (whose webhook it names) and leases
// at most n outboxes of its index that have an alert due, for
// leaseSeconds; once a second for the rule it hands out slots to sweep
// (sweep: the owner's calls note their outboxes there) and the outboxes
// of a silent owner (see Scanned).
func (c *Client) ScanAlerts(registry []byte, owner string, n int, leaseSeconds int64, webhook string, sweep bool, done func(Scanned, error)) error {
	flag := "0"
	if sweep {
		flag = "1"
	}
	args := []string{owner, strconv.Itoa(n), strconv.FormatInt(leaseSeconds, 10), webhook, flag}
	return c.dispatch(alertCall([][]byte{registry}, "scan", args...), func(v resp.Value, err error) {
		var sc Scanned
		if err == nil {
			sc, err = parseScanned(v)
		}
		done(sc, err)
	})
}

// parseScanned reads scan's reply: the token, the first slot to sweep or
// "", the silent owner's webhook, the number of the owner's outboxes, them,
// then the silent owner's.
func parseScanned(v resp.Value) (Scanned, error) {
	out, err := bulkStrings(v, "scan", 4)
	if err != nil {
		return Scanned{}, err
	}
	own, err := strconv.Atoi(out[3])
	sc := Scanned{Token: out[0], Sweep: -1, SilentWebhook: out[2]}
	if out[1] != "" {
		sc.Sweep, err = strconv.Atoi(out[1])
	}
	if err != nil || own < 0 || 4+own > len(out) || sc.Sweep >= cachekey.Slots {
		return Scanned{}, fmt.Errorf("%w: scan returned %s", ErrMalformed, describe(v))
	}
	sc.Own, sc.Silent = out[4:4+own], out[4+own:]
	return sc, nil
}

// SettleOutbox lists an outbox a scan leased by when its next alert is due
// (next, as ClaimAlerts gave it), or takes it off its owner's index when
// it has none and nothing was listed since the scan.
func (c *Client) SettleOutbox(registry []byte, outbox, token, next string, done func(error)) error {
	return c.dispatch(alertCall([][]byte{registry}, "settle", outbox, token, next), func(v resp.Value, err error) {
		done(checkOne(v, err, "settle"))
	})
}

// UnlistedOutboxes returns at most n outboxes of a slot's unlisted ones of
// a rule (cachekey.Unlisted) noted at least age seconds ago: none of their
// listings has reached their index since.
func (c *Client) UnlistedOutboxes(unlisted []byte, age int64, n int, done func([]string, error)) error {
	args := []string{strconv.FormatInt(age, 10), strconv.Itoa(n)}
	return c.dispatch(alertCall([][]byte{unlisted}, "unlisted", args...), func(v resp.Value, err error) {
		var out []string
		if err == nil {
			out, err = bulkStrings(v, "unlisted", 0)
		}
		done(out, err)
	})
}

// Claimed is what ClaimAlerts took from an outbox.
type Claimed struct {
	Next    string  // when its next alert is due ("": it has none)
	Dropped []Alert // older than the max age: given up
	Taken   []Alert // to be tried now (each is put off, in case this try fails)
}

// ClaimAlerts takes at most n alerts due from an outbox: those older than
// maxAge seconds (-1: all) are dropped, the others put off (least seconds
// at least) and handed to done. The outbox leaves its slot's unlisted ones
// (unlisted, cachekey.Unlisted): it was scanned, so it is listed.
func (c *Client) ClaimAlerts(outbox string, unlisted []byte, maxAge, least int64, n int, done func(Claimed, error)) error {
	args := []string{strconv.FormatInt(maxAge, 10), strconv.FormatInt(least, 10), strconv.Itoa(n)}
	return c.dispatch(alertCall([][]byte{[]byte(outbox), unlisted}, "claim", args...), func(v resp.Value, err error) {
		var cl Claimed
		if err == nil {
			cl, err = parseClaimed(v)
		}
		done(cl, err)
	})
}

// parseClaimed reads claim's reply: when the next alert is due, the number
// dropped, the dropped, the taken. An alert it cannot read is dropped.
func parseClaimed(v resp.Value) (Claimed, error) {
	a := v.Array()
	if v.Type() != resp.Array || len(a) < 2 || a[1].Type() != resp.Integer || a[1].Integer() < 0 || 2+a[1].Integer() > len(a) {
		return Claimed{}, fmt.Errorf("%w: claim returned %s", ErrMalformed, describe(v))
	}
	cl := Claimed{Next: a[0].String()}
	for i, x := range a[2:] {
		alert, ok := ParseAlert(x.String())
		if !ok {
			alert = Alert{Raw: x.String()}
		}
		if i < a[1].Integer() || !ok {
			cl.Dropped = append(cl.Dropped, alert)
		} else {
			cl.Taken = append(cl.Taken, alert)
		}
	}
	return cl, nil
}

// AttachAlert gives an alert in an outbox (AlertMember) its body and
// makes it due now; done gets whether it was still there.
func (c *Client) AttachAlert(outbox []byte, member string, body []byte, done func(bool, error)) error {
	return c.dispatch(alertCall([][]byte{outbox}, "attach", member, string(body)), func(v resp.Value, err error) {
		if err == nil && (v.Type() != resp.Integer || v.Integer() < 0 || v.Integer() > 1) {
			err = fmt.Errorf("%w: attach returned %s", ErrMalformed, describe(v))
		}
		done(err == nil && v.Integer() == 1, err)
	})
}

// RemoveAlert takes a delivered alert out of its outbox.
func (c *Client) RemoveAlert(outbox, raw string, done func(error)) error {
	return c.dispatch(func(bool) []byte {
		q := appendArrayHeader(nil, 3)
		q = appendBulkString(q, "ZREM")
		q = appendBulkString(q, outbox)
		return appendBulkString(q, raw)
	}, func(v resp.Value, err error) {
		if err == nil && v.Type() != resp.Integer {
			err = fmt.Errorf("%w: ZREM returned %s", ErrMalformed, describe(v))
		}
		done(err)
	})
}

// checkOne checks a reply that is the integer 1.
func checkOne(v resp.Value, err error, op string) error {
	if err == nil && (v.Type() != resp.Integer || v.Integer() != 1) {
		err = fmt.Errorf("%w: %s returned %s", ErrMalformed, op, describe(v))
	}
	return err
}

// bulkStrings reads a reply that is an array of at least least bulk
// strings, as the elements of the array.
func bulkStrings(v resp.Value, op string, least int) ([]string, error) {
	a := v.Array()
	if v.Type() != resp.Array || len(a) < least {
		return nil, fmt.Errorf("%w: %s returned %s", ErrMalformed, op, describe(v))
	}
	out := make([]string, len(a))
	for i, x := range a {
		if x.Type() != resp.BulkString {
			return nil, fmt.Errorf("%w: %s returned %s", ErrMalformed, op, describe(v))
		}
		out[i] = x.String()
	}
	return out, nil
}
