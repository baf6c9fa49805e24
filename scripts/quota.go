package scripts

import (
	"fmt"
	"strconv"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Call is one encoded script call: by digest (EVALSHA) or, when Redis
// answered NOSCRIPT, by source (EVAL). The calls of the Quota script are
// built without a Client, so that the CLI sends the same ones to Redis
// directly.
type Call func(bySource bool) []byte

// Run sends a call through the gateway (retrying once by source after a
// NOSCRIPT). done gets the reply or an error; when Run itself returns an
// error, done is never called.
func (c *Client) Run(call Call, done func(resp.Value, error)) error {
	return c.dispatch(call, done)
}

// StatusCall reads the status of subjects (all in one slot): each of their
// windows and concurrency limits (see status.lua). Nothing is written.
func (o Options) StatusCall(subjects []budget.Subject) Call {
	return func(bySource bool) []byte {
		q := Quota.appendCall(make([]byte, 0, callSize(subjects, 24)), bySource, opStatus, subjects, true, 2+windowArgs(subjects, 2))
		q = appendBulkString(q, "") // now, by Redis's clock
		arg := o.appendWindowType(make([]byte, 0, 2), false)
		if o.Overrides {
			arg = append(arg, 'o')
		}
		q = appendBulk(q, arg)
		var now int64
		for i, s := range subjects {
			q = appendSubjectHead(q, subjects, i, true)
			for _, w := range s.Windows {
				q = o.appendWindow(q, w, &now)
				q = appendBulkInt(q, w.Limit)
			}
		}
		return q
	}
}

// ParseStatus reads the reply of a StatusCall about subjects: the limits
// of each subject, its windows in order, then its concurrency limit.
func ParseStatus(v resp.Value, subjects []budget.Subject) ([][]budget.LimitStatus, error) {
	a := v.Array()
	want := 0
	for _, s := range subjects {
		want += len(s.Windows)
		if s.Concurrent > 0 {
			want++
		}
	}
	if v.Type() != resp.Array || len(a) != 4*want {
		return nil, fmt.Errorf("%w: status returned %s", ErrMalformed, describe(v))
	}
	out := make([][]budget.LimitStatus, len(subjects))
	for i, s := range subjects {
		limits := make([]budget.LimitStatus, 0, len(s.Windows)+1)
		next := func(kind budget.Kind, seconds int64) error {
			e := a[:4]
			a = a[4:]
			for _, x := range e {
				if x.Type() != resp.Integer {
					return fmt.Errorf("%w: status returned %s", ErrMalformed, describe(v))
				}
			}
			l := budget.LimitStatus{Kind: kind, Seconds: seconds, Limit: int64(e[0].Integer()), Used: int64(e[1].Integer()),
				Reset: int64(e[2].Integer()), Overridden: e[3].Integer() == 1}
			if l.Limit <= 0 || l.Reset < 0 || l.Used < 0 {
				return fmt.Errorf("%w: status returned %s", ErrMalformed, describe(v))
			}
			limits = append(limits, l)
			return nil
		}
		for _, w := range s.Windows {
			if err := next(budget.KindOf(w.Unit), w.Seconds); err != nil {
				return nil, err
			}
		}
		if s.Concurrent > 0 {
			if err := next(budget.KindConcurrent, 0); err != nil {
				return nil, err
			}
		}
		out[i] = limits
	}
	return out, nil
}

// ResetCall clears the windows of subjects (one slot): each budget.Subject's
// Windows are the windows to clear (see manage.lua). Its reply is the
// number of buckets deleted.
func (o Options) ResetCall(subjects []budget.Subject) Call {
	return o.manageCall(opReset, subjects, "")
}

// GrantCall gives tokens back to subjects (one slot) in each of their
// token windows (request and money windows are left alone): what they
// used, down to zero (see manage.lua). tokens is
// taken within [1, config.MaxLimit]. Its reply is the new count of each
// window's current bucket.
func (o Options) GrantCall(subjects []budget.Subject, tokens int64) Call {
	return o.manageCall(opGrant, subjects, strconv.FormatInt(min(max(tokens, 1), config.MaxLimit), 10))
}

func (o Options) manageCall(op string, subjects []budget.Subject, amount string) Call {
	return func(bySource bool) []byte {
		q := Quota.appendCall(make([]byte, 0, callSize(subjects, 12)), bySource, op, subjects, true, 3+windowArgs(subjects, 1))
		q = appendBulkString(q, "") // now, by Redis's clock
		q = appendBulk(q, o.appendWindowType(make([]byte, 0, 1), false))
		q = appendBulkString(q, amount)
		var now int64
		for i, s := range subjects {
			q = appendSubjectHead(q, subjects, i, false) // a 'c' in it is ignored: leases are never reset
			for _, w := range s.Windows {
				q = o.appendWindow(q, w, &now)
			}
		}
		return q
	}
}

// ParseReset reads the reply of a ResetCall: the buckets deleted.
func ParseReset(v resp.Value) (int64, error) {
	if v.Type() != resp.Integer || v.Integer() < 0 {
		return 0, fmt.Errorf("%w: reset returned %s", ErrMalformed, describe(v))
	}
	return int64(v.Integer()), nil
}

// ParseGrant checks the reply of a GrantCall about subjects: a count per
// window.
func ParseGrant(v resp.Value, subjects []budget.Subject) error {
	if n := len(v.Array()); v.Type() != resp.Array || n != windowArgs(subjects, 1)-len(subjects) {
		return fmt.Errorf("%w: grant returned %s", ErrMalformed, describe(v))
	}
	return nil
}

// ConcurrencyOverride names a subject's concurrency limit among its
// overrides; windows are named by OverrideName.
const ConcurrencyOverride = "c"

// OverrideName is the name of a window among a subject's overrides, as the
// scripts name windows: "t60", "q3600", "u86400" (a money window, whose
// override is in nanodollars).
func OverrideName(unit config.Unit, seconds int64) string {
	return string(appendSpec(nil, unit, seconds))
}

// ParseWindowName reads a window's name in keys (OverrideName): its unit
// and length; ok is false for what is not one.
func ParseWindowName(name string) (unit config.Unit, seconds int64, ok bool) {
	if len(name) < 2 {
		return 0, 0, false
	}
	switch name[0] {
	case 't':
		unit = config.UnitTokens
	case 'q':
		unit = config.UnitRequests
	case 'u':
		unit = config.UnitUSD
	default:
		return 0, 0, false
	}
	seconds, err := strconv.ParseInt(name[1:], 10, 64)
	if err != nil || seconds <= 0 || name[1] == '+' {
		return 0, 0, false
	}
	return unit, seconds, true
}

// Override is one of a subject's limit overrides.
type Override struct {
	Name  string // OverrideName of a window, or ConcurrencyOverride
	Limit int64  // in [1, config.MaxLimit]
}

// OverrideCall replaces all the limit overrides of the subject key (the
// whole key, with its model suffix for a per-model subject) with limits;
// none removes them. Its reply is the overrides after (ParseOverrides).
func OverrideCall(key []byte, limits []Override) Call {
	return func(bySource bool) []byte {
		q := Quota.appendCall(make([]byte, 0, 128+len(key)+24*len(limits)), bySource, opOverride, []budget.Subject{{Key: key}}, false, 1+2*len(limits))
		q = appendBulkString(q, "") // the time (unused)
		for _, l := range limits {
			q = appendBulkString(q, l.Name)
			q = appendBulkInt(q, min(max(l.Limit, 1), config.MaxLimit))
		}
		return q
	}
}

// ParseOverrides reads the reply of an OverrideCall: the subject's
// overrides, in the order Redis keeps them.
func ParseOverrides(v resp.Value) ([]Override, error) {
	a := v.Array()
	if v.Type() != resp.Array || len(a)%2 != 0 {
		return nil, fmt.Errorf("%w: override returned %s", ErrMalformed, describe(v))
	}
	out := make([]Override, 0, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		n, err := strconv.ParseInt(a[i+1].String(), 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: override returned %s", ErrMalformed, describe(v))
		}
		out = append(out, Override{Name: a[i].String(), Limit: n})
	}
	return out, nil
}
