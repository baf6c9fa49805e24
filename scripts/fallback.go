package scripts

import (
	"fmt"
	"strconv"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
)

// Admissions with fallbacks (model_fallbacks): a request that may be served
// as its own model or, when that model's limits have no room, as one of the
// models configured to serve instead, is admitted as the first of these
// candidates whose limits all have room, in one call of admit.lua per slot.

// Candidate is one way an admission with fallbacks may serve a request: the
// subjects that limit it in the call's slot (none: nothing here stops it)
// and what it reserves.
type Candidate struct {
	Subjects []budget.Subject
	Cost     budget.Amounts
}

// AdmitFirst is Admit for a request that may be served as any of the
// candidates (all their subjects in one slot), in order: it admits the first
// whose limits all have room (or are soft), taking for it alone, and
// budget.Verdict.Served says which; rejected, the verdict is about the
// candidate that has room first. Candidate i's admission marker is FallbackMarker(markerID, i).
func (c *Client) AdmitFirst(candidates []Candidate, leaseID, markerID string, done func(budget.Verdict, error)) error {
	encode := func(bySource bool) []byte { return c.encodeAdmitFirst(candidates, leaseID, markerID, bySource) }
	return c.dispatch(encode, func(v resp.Value, err error) {
		if err != nil {
			done(budget.Verdict{}, err)
			return
		}
		done(c.parseAdmitFirst(v, candidates))
	})
}

// FallbackMarker is the marker of candidate i of an admission with
// fallbacks named markerID, which Cancel takes to undo it: markerID for the
// first, markerID.i for the others (see admit.lua).
func FallbackMarker(markerID string, i int) string {
	if i == 0 || markerID == "" {
		return markerID
	}
	return markerID + "." + strconv.Itoa(i)
}

// encodeAdmitFirst encodes a call of admit.lua with fallbacks: the first
// candidate as an admission, each other one after '|' and what it reserves.
func (c *Client) encodeAdmitFirst(candidates []Candidate, leaseID, markerID string, bySource bool) []byte {
	lists := make([][]budget.Subject, len(candidates))
	size, nargs := len(leaseID)+len(markerID)+20, 3
	for i, cand := range candidates {
		lists[i] = cand.Subjects
		size += callSize(cand.Subjects, 24) + 24
		nargs += windowArgs(cand.Subjects, 2)
		if i > 0 {
			nargs++ // '|' and its reservation
		}
	}
	q := Limiter.appendCallOf(make([]byte, 0, size), bySource, opAdmit, true, nargs, lists...)
	q = appendBulkString(q, "") // no time given: the script reads Redis's clock
	first := candidates[0].Cost
	q = appendAmounts(q, first.Tokens, first.USD) // never negative: see encodeAdmit
	q = c.appendOptions(q, true, leaseID, true, markerID, true, firstKey(candidates[0].Subjects))
	var now int64
	for i, cand := range candidates {
		if i > 0 { // '|' and what it reserves
			var buf [48]byte
			q = appendBulk(q, amountsArg(append(buf[:0], '|'), cand.Cost.Tokens, cand.Cost.USD))
		}
		q = c.appendAdmitSubjects(q, cand.Subjects, &now)
	}
	return q
}

// parseAdmitFirst checks admit.lua's reply to a call with fallbacks: the
// verdict's 9 numbers, the candidate served and the one that would have
// been (see admit.lua), then the rest as parseAdmit reads it, about the
// served candidate's subjects.
func (c *Client) parseAdmitFirst(v resp.Value, candidates []Candidate) (budget.Verdict, error) {
	a := v.Array()
	if len(a) < verdictLen+2 || a[verdictLen].Type() != resp.Integer || a[verdictLen+1].Type() != resp.Integer {
		return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	served, would := a[verdictLen].Integer(), a[verdictLen+1].Integer()
	if served < 0 || served >= len(candidates) || would < -1 || would >= len(candidates) {
		return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	rest := make([]resp.Value, 0, len(a)-2)
	rest = append(append(rest, a[:verdictLen]...), a[verdictLen+2:]...)
	verdict, err := c.parseAdmit(resp.ArrayValue(rest), candidates[served].Subjects)
	verdict.Served, verdict.WouldServe = served, would
	return verdict, err
}
