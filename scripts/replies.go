package scripts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
)

// Reading the replies: the gateway's answer to a call, the RESP reader and
// the flat integer replies read without it, and the replies of the
// limiter's calls (admit.lua's verdict, charge.lua's totals). The replies
// of the quota and alert calls are read beside those calls.

// readReply reads the reply of the call the gateway is answering now.
func (c *Client) readReply(status, size int) (resp.Value, error) {
	if status != 0 {
		return resp.Value{}, fmt.Errorf("%w: %w: call failed with status %d (no connection, reset, or timed out)", ErrUnavailable, ErrNoReply, status)
	}
	raw, err := proxywasm.GetRedisCallResponse(0, size)
	if err != nil {
		return resp.Value{}, fmt.Errorf("%w: %w: reading the reply: %v", ErrUnavailable, ErrNoReply, err)
	}
	if v, ok := c.flat.read(raw); ok {
		return v, nil
	}
	return ParseReply(raw, c.replies)
}

// flatReply reads what the scripts answer almost every call with, a flat
// array of integers, into an array of values it reuses: the RESP reader
// takes some twenty allocations for one. Anything else (an error, a bulk
// string, a nested array, a malformed reply) is left to the reader. The
// value is valid until the next reply: every caller reads it at once.
type flatReply struct{ vals []resp.Value }

// maxFlatReply bounds the integers of a flat reply read this way (a call
// about many subjects and windows, or with many crossings, goes to the
// RESP reader).
const maxFlatReply = 256

// read reads raw as "*<n>\r\n" followed by n integers ":<i>\r\n" and
// nothing else, exactly as the RESP reader reads it.
func (f *flatReply) read(raw []byte) (resp.Value, bool) {
	if len(raw) < 4 || raw[0] != '*' {
		return resp.Value{}, false
	}
	n, i, ok := readDecimal(raw, 1)
	if !ok || n < 0 || n > maxFlatReply {
		return resp.Value{}, false
	}
	f.vals = f.vals[:0]
	for range n {
		if i >= len(raw) || raw[i] != ':' {
			return resp.Value{}, false
		}
		var x int64
		if x, i, ok = readDecimal(raw, i+1); !ok {
			return resp.Value{}, false
		}
		f.vals = append(f.vals, resp.IntegerValue(int(x)))
	}
	if i != len(raw) {
		return resp.Value{}, false
	}
	return resp.ArrayValue(f.vals), true
}

// readDecimal reads an optionally negative decimal of at most 18 digits at
// raw[i:], followed by "\r\n", and returns it and the index after the line.
func readDecimal(raw []byte, i int) (int64, int, bool) {
	neg := i < len(raw) && raw[i] == '-'
	if neg {
		i++
	}
	start := i
	var x int64
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' && i-start < 18 {
		x = x*10 + int64(raw[i]-'0')
		i++
	}
	if i == start || i+1 >= len(raw) || raw[i] != '\r' || raw[i+1] != '\n' {
		return 0, i, false
	}
	if neg {
		x = -x
	}
	return x, i + 2, true
}

// ParseReply decodes one RESP reply. A Redis error reply becomes an error
// carrying Redis's message; bytes that are not RESP become ErrMalformed. br is
// a reader to reuse between calls (nil: one is made).
func ParseReply(raw []byte, br *bufio.Reader) (resp.Value, error) {
	if br == nil {
		br = bufio.NewReader(nil)
	}
	br.Reset(bytes.NewReader(raw))
	v, _, err := resp.NewReader(br).ReadValue()
	if err != nil || len(raw) == 0 || !isRESPType(raw[0]) {
		return resp.Value{}, fmt.Errorf("%w: %.64q", ErrMalformed, raw)
	}
	if v.Type() == resp.Error {
		return resp.Value{}, errors.New(v.String())
	}
	return v, nil
}

// isRESPType rejects what the resp reader would accept as an inline
// ("telnet") command: no Redis reply starts that way.
func isRESPType(b byte) bool {
	return b == '+' || b == '-' || b == ':' || b == '$' || b == '*'
}

// describe renders a reply for an error message, briefly.
func describe(v resp.Value) string {
	s := v.String()
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%s %q", v.Type(), s)
}

// verdictLen is how many integers admit.lua's verdict takes in its reply,
// and byKindLen how many its tightest window of each kind takes after it
// (Options.ByKind): 5 for each of tokens, requests and money.
const (
	verdictLen = 9
	byKindLen  = 15
)

// parseAdmit checks admit.lua's reply: a verdict, then with thresholds
// configured the crossings, if any.
func (c *Client) parseAdmit(v resp.Value, subjects []budget.Subject) (budget.Verdict, error) {
	a := v.Array()
	head := verdictLen
	if c.options.ByKind {
		head += byKindLen
	}
	if len(a) < head {
		return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	verdict, err := parseVerdict(resp.ArrayValue(a[:verdictLen]), len(subjects))
	if err != nil {
		return budget.Verdict{}, err
	}
	if verdict.Subject >= 0 && verdict.Window >= len(subjects[verdict.Subject].Windows) {
		return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	if c.options.ByKind {
		if verdict.ByKind, err = parseByKind(a[verdictLen:head], subjects); err != nil {
			return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
		if c.options.Overrides {
			var n int
			if verdict.Overridden, n, err = parseOverridden(a[head:], subjects); err != nil {
				return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
			}
			head += n
		}
	}
	if len(a) > head {
		if len(c.options.Thresholds) == 0 {
			return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
		if verdict.Crossings, err = c.parseCrossings(a[head:], subjects, verdict.At); err != nil {
			return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
	}
	return verdict, nil
}

// parseVerdict checks that a reply has the shape admit.lua returns for a
// call about n subjects.
func parseVerdict(v resp.Value, n int) (budget.Verdict, error) {
	a := v.Array()
	if len(a) != verdictLen {
		return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	for _, e := range a {
		if e.Type() != resp.Integer {
			return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
	}
	allowed, limit, remaining, reset, at, kind, wait, subject, window := a[0].Integer(), int64(a[1].Integer()), int64(a[2].Integer()), int64(a[3].Integer()), int64(a[4].Integer()), a[5].Integer(), int64(a[6].Integer()), a[7].Integer(), a[8].Integer()
	if n == 0 && allowed == 1 && limit == 0 && subject == 0 && at > 0 {
		// A candidate of AdmitFirst without subjects in the call's slot:
		// nothing here limits it.
		return budget.Verdict{Allowed: true, At: at, Subject: -1, Window: -1}, nil
	}
	if allowed < 0 || allowed > 2 || limit <= 0 || remaining < 0 || reset < 0 || at <= 0 || kind < 0 || kind > int(budget.KindUSD) || wait < 0 ||
		subject < 1 || subject > n || window < 0 || (window == 0) != (budget.Kind(kind) == budget.KindConcurrent) && allowed != 0 {
		return budget.Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	return budget.Verdict{Allowed: allowed != 0, OverSoft: allowed == 2, Kind: budget.Kind(kind), Limit: limit, Remaining: remaining, Reset: reset, At: at,
		WaitMs: wait, Subject: subject - 1, Window: window - 1}, nil
}

// parseByKind reads the tightest window of tokens, requests and money, in
// turn, from an admission's reply: 5 integers each (see admit.lua).
func parseByKind(a []resp.Value, subjects []budget.Subject) (*[budget.KindUSD + 1]budget.Tightest, error) {
	var out [budget.KindUSD + 1]budget.Tightest
	for i, kind := range [...]budget.Kind{budget.KindTokens, budget.KindRequests, budget.KindUSD} {
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
			budget.KindOf(subjects[s].Windows[w].Unit) != kind {
			return nil, ErrMalformed
		}
		out[kind] = budget.Tightest{Limit: n[0], Remaining: n[1], ResetMs: n[2], Subject: int(s), Window: int(w)}
	}
	return &out, nil
}

// parseOverridden reads the overrides in force from an admission's reply
// (see admit.lua): their count, then 3 integers each; it returns them and
// how many values they took.
func parseOverridden(a []resp.Value, subjects []budget.Subject) ([]budget.Overridden, int, error) {
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
	out := make([]budget.Overridden, 0, n)
	for i := 1; i < 1+3*n; i += 3 {
		if a[i].Type() != resp.Integer || a[i+1].Type() != resp.Integer || a[i+2].Type() != resp.Integer {
			return nil, 0, ErrMalformed
		}
		s, w, limit := a[i].Integer()-1, a[i+1].Integer()-1, int64(a[i+2].Integer())
		if s < 0 || s >= len(subjects) || w < -1 || w >= len(subjects[s].Windows) || w < 0 && subjects[s].Concurrent == 0 || limit <= 0 {
			return nil, 0, ErrMalformed
		}
		out = append(out, budget.Overridden{Subject: s, Window: w, Limit: limit})
	}
	return out, 1 + 3*n, nil
}

// parseCharge checks charge.lua's reply: a total per window, or nothing
// (maybeEmpty: a charge applied before, a cancel with nothing to undo), or
// when alerting the totals, Redis's second and at least one crossing; or,
// for a charge applied before that crossed, -1, its second and crossings.
func (c *Client) parseCharge(v resp.Value, subjects []budget.Subject, maybeEmpty, alerting bool) ([]budget.Crossing, error) {
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
