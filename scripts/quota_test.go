package scripts

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// quota runs the quota script by source for the one test subject.
func quota(r *redistest.Server, op string, args ...string) []int64 {
	return ints(r.Do(append([]string{"EVAL", Quota.Source, "1", subject, op}, args...)...))
}

// reset runs a reset by source for the one test subject: the buckets deleted.
func reset(r *redistest.Server, args ...string) int {
	return r.Do(append([]string{"EVAL", Quota.Source, "1", subject, opReset}, args...)...).Integer()
}

// run sends an encoded call, by source, and returns its reply.
func run(t *testing.T, r *redistest.Server, call Call) resp.Value {
	t.Helper()
	v, err := ParseReply(r.Forward(call(true)), nil)
	require.NoError(t, err)
	return v
}

// snapshot is every key of Redis with its value, to see that nothing changed.
func snapshot(r *redistest.Server) map[string]string {
	out := map[string]string{}
	for _, k := range r.Keys("*") {
		out[k] = r.Do("DUMP", k).String()
	}
	return out
}

func tokens(seconds, limit int64) config.Window {
	return config.Window{Unit: config.UnitTokens, Seconds: seconds, Limit: limit}
}

func TestStatusReadsWhatAdmissionsCounted(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	parent := budget.Subject{Key: []byte(subject), Windows: []config.Window{tokens(60, 1000), {Unit: config.UnitRequests, Seconds: 3600, Limit: 50}}, Concurrent: 3}
	child := budget.Subject{Key: []byte(subject + ":m:gpt-4o"), Suffix: len(":m:gpt-4o"), Windows: []config.Window{tokens(60, 100)}}
	subjects := []budget.Subject{parent, child}
	c := &Client{options: Options{LeaseSeconds: 60}}
	v, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 80}, "lease-1", "", true)), nil)
	require.NoError(t, err)
	verdict, err := parseVerdict(v, 2)
	require.NoError(t, err)
	require.True(t, verdict.Allowed)
	_, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 5, Requests: 0}, verdict.At, "", "", "", true)), nil)
	require.NoError(t, err)

	before := snapshot(r)
	st, err := ParseStatus(run(t, r, c.options.StatusCall(subjects)), subjects)
	require.NoError(t, err)
	assert.Equal(t, before, snapshot(r), "reading the status writes nothing")
	require.Len(t, st, 2)
	require.Len(t, st[0], 3)
	reset := st[0][0].Reset
	assert.True(t, reset >= 1 && reset <= 60, "reset %d", reset)
	assert.Equal(t, budget.LimitStatus{Kind: budget.KindTokens, Seconds: 60, Limit: 1000, Used: 85, Reset: reset}, st[0][0])
	assert.Equal(t, budget.KindRequests, st[0][1].Kind)
	assert.Equal(t, int64(1), st[0][1].Used)
	assert.Equal(t, budget.LimitStatus{Kind: budget.KindConcurrent, Limit: 3, Used: 1}, st[0][2], "the lease held")
	assert.Equal(t, []budget.LimitStatus{{Kind: budget.KindTokens, Seconds: 60, Limit: 100, Used: 85, Reset: reset}}, st[1])
	assert.Equal(t, int64(15), st[1][0].Remaining())
}

func TestStatusOfASlidingWindow(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/60 + 1) * 60
	at := func(s int64) string { return strconv.FormatInt(s, 10) }
	call(r, opCharge, at(now), at(now), "s", "600", "0", "1", "t60")
	call(r, opCharge, at(now+60), at(now+60), "s", "100", "0", "1", "t60")
	// 15 s into the next bucket: 100 + 600 × 45/60 = 550.
	assert.Equal(t, []int64{1000, 550, 45, 0}, quota(r, opStatus, at(now+75), "s", "1", "t60", "1000"))
	// A lease that expired is no longer in progress.
	r.Do("ZADD", subject+":c", strconv.FormatInt(now+70, 10), "gone", strconv.FormatInt(now+90, 10), "live")
	assert.Equal(t, []int64{4, 1, 0, 0}, quota(r, opStatus, at(now+75), "f", "0c4"))
}

func TestOverridesReplaceConfiguredLimits(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/60 + 1) * 60
	at := strconv.FormatInt(now, 10)
	set := func(limits ...Override) []Override {
		o, err := ParseOverrides(run(t, r, OverrideCall([]byte(subject), limits)))
		require.NoError(t, err)
		return o
	}
	got := set(Override{OverrideName(config.UnitTokens, 60), 10}, Override{ConcurrencyOverride, 1}, Override{OverrideName(config.UnitRequests, 86400), 7})
	assert.ElementsMatch(t, []Override{{"t60", 10}, {"c", 1}, {"q86400", 7}}, got)
	assert.Equal(t, int64(-1), r.Int("TTL", subject+":o"), "overrides last until removed")

	// Read with 'o': the override decides; without, the configuration.
	assert.Equal(t, []int64{1, 10, 0}, call(r, opAdmit, at, "10", "fo", "1", "t60", "1000")[:3])
	assert.Equal(t, []int64{0, 10, 0}, call(r, opAdmit, at, "1", "fo", "1", "t60", "1000")[:3])
	assert.Equal(t, []int64{1, 1000, 989}, call(r, opAdmit, at, "1", "f", "1", "t60", "1000")[:3])
	// The concurrency override, with a lease taken; an override of a limit
	// the subject does not have (q86400 here) adds nothing.
	assert.Equal(t, []int64{1, 1, 0}, call(r, opAdmit, at, "0", "fo60:l1", "0c5")[:3])
	v := call(r, opAdmit, at, "0", "fo60:l2", "0c5")
	assert.Equal(t, []int64{0, 1, 0}, v[:3])
	assert.Equal(t, int64(budget.KindConcurrent), v[5])
	assert.Equal(t, []int64{10, 11, 60, 1, 1, 1, 0, 1}, quota(r, opStatus, at, "fo", "1c5", "t60", "1000"), "status shows what applies")
	assert.Equal(t, []int64{1000, 11, 60, 0}, quota(r, opStatus, at, "f", "1", "t60", "1000"), "not read without 'o'")

	// A set replaces them all; none removes them.
	assert.Equal(t, []Override{{"t60", 2000}}, set(Override{"t60", 2000}))
	assert.Equal(t, []int64{1, 2000, 1988}, call(r, opAdmit, at, "1", "fo", "1", "t60", "1000")[:3])
	assert.Empty(t, set())
	assert.Equal(t, int64(0), r.Int("EXISTS", subject+":o"))
	assert.Equal(t, []int64{1, 1000, 987}, call(r, opAdmit, at, "1", "fo", "1", "t60", "1000")[:3])

	// A per-model subject's overrides are its own.
	child := subject + ":m:gpt-4o"
	_, err := ParseOverrides(run(t, r, OverrideCall([]byte(child), []Override{{"t60", 5}})))
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 5, 4, 60, now, 0, 0, 2}, call(r, opAdmit, at, "1", "fo", "1", "t60", "1000", "1:m:gpt-4o", "t60", "100")[:8], "the child's override is the tightest")
	assert.Equal(t, []int64{0, 5, 0}, call(r, opAdmit, at, "5", "fo", "1", "t60", "1000", "1:m:gpt-4o", "t60", "100")[:3])
}

func TestResetClearsWindows(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/3600 + 1) * 3600
	at := strconv.FormatInt(now, 10)
	call(r, opCharge, at, at, "f", "500", "0", "2", "t60", "t3600")
	call(r, opAdmit, at, "0", "f60:l1", "1c2", "q60", "10")
	// One window: the other is left, and so are leases (requests in progress).
	assert.Equal(t, 1, reset(r, at, "f", "", "1c", "t60"))
	assert.Equal(t, []int64{1000, 0, 60, 0, 1000, 500, 3600, 0}, quota(r, opStatus, at, "f", "2", "t60", "1000", "t3600", "1000"))
	assert.Equal(t, int64(1), r.Int("ZCARD", subject+":c"))
	assert.Equal(t, 2, reset(r, at, "f", "", "2", "t3600", "q60"))
	assert.Empty(t, r.Keys(subject+":t*"))
	assert.Empty(t, r.Keys(subject+":q*"))

	// Sliding: the previous bucket, which the window still reads, goes too.
	call(r, opCharge, at, at, "s", "300", "0", "1", "t60")
	later := strconv.FormatInt(now+61, 10)
	call(r, opCharge, later, later, "s", "100", "0", "1", "t60")
	assert.Equal(t, 2, reset(r, later, "s", "", "1", "t60"))
	assert.Equal(t, []int64{1000, 0, 59, 0}, quota(r, opStatus, later, "s", "1", "t60", "1000"))
}

func TestGrantGivesTokensBack(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/60 + 1) * 60
	at := strconv.FormatInt(now, 10)
	status := func() []int64 { return quota(r, opStatus, at, "f", "2", "t60", "1000", "q60", "5")[:2] }
	call(r, opCharge, at, at, "f", "1000", "0", "1", "t60")
	assert.Equal(t, int64(0), call(r, opAdmit, at, "0", "f", "1", "t60", "1000")[0], "used up")
	assert.Equal(t, []int64{600, 0}, quota(r, opGrant, at, "f", "400", "2", "t60", "q60"), "request windows are left alone")
	assert.Equal(t, []int64{1000, 600}, status())
	assert.Equal(t, int64(1), call(r, opAdmit, at, "400", "f", "1", "t60", "1000")[0], "the grant is usable")

	// More than was used: all of it, never more (a window never gives more
	// than its limit); the empty bucket is gone.
	assert.Equal(t, []int64{0}, quota(r, opGrant, at, "f", "5000", "1", "t60"))
	assert.Empty(t, r.Keys(subject+":t60:*"))
	assert.Equal(t, []int64{0}, quota(r, opGrant, at, "f", "50", "1", "t3600"), "nothing used: nothing to give")
	assert.Empty(t, r.Keys(subject+":t3600:*"))

	// Sliding: what the current bucket does not hold comes off the previous one.
	call(r, opCharge, at, at, "s", "800", "0", "1", "t60")
	later := strconv.FormatInt(now+90, 10)
	call(r, opCharge, later, later, "s", "100", "0", "1", "t60")
	assert.Equal(t, []int64{1000, 500}, quota(r, opStatus, later, "s", "1", "t60", "1000")[:2], "100 + 800/2")
	assert.Equal(t, []int64{0}, quota(r, opGrant, later, "s", "500", "1", "t60"))
	assert.Equal(t, []int64{1000, 200}, quota(r, opStatus, later, "s", "1", "t60", "1000")[:2], "400 left in the previous bucket, half of it in the window")
	ttl := r.Int("TTL", subject+":t60:"+strconv.FormatInt(now/60, 10))
	assert.True(t, ttl > 0, "a bucket given back to keeps its expiry")
}

func TestQuotaCallsRunEncoded(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{tokens(60, 1000)}}}
	o := Options{Overrides: true}
	_, err := ParseReply(r.Forward(o.StatusCall(subjects)(false)), nil)
	require.ErrorContains(t, err, "NOSCRIPT")

	c := &Client{options: o}
	_, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 100, Requests: 0}, 0, "", "", "", true)), nil)
	require.NoError(t, err)
	require.NoError(t, ParseGrant(run(t, r, o.GrantCall(subjects, 30)), subjects))
	st, err := ParseStatus(run(t, r, o.StatusCall(subjects)), subjects)
	require.NoError(t, err)
	assert.Equal(t, int64(70), st[0][0].Used)
	assert.Equal(t, int64(930), st[0][0].Remaining())
	n, err := ParseReset(run(t, r, o.ResetCall(subjects)))
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)

	// A client with overrides sends admissions that read them; one without
	// does not, and pays nothing for them.
	_, err = ParseOverrides(run(t, r, OverrideCall([]byte(subject), []Override{{"t60", 5}})))
	require.NoError(t, err)
	verdict := func(c *Client) budget.Verdict {
		v, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 0}, "", "", true)), nil)
		require.NoError(t, err)
		verdict, err := parseVerdict(v, 1)
		require.NoError(t, err)
		return verdict
	}
	assert.Equal(t, int64(5), verdict(c).Limit)
	assert.Equal(t, int64(1000), verdict(&Client{}).Limit)
	assert.NotContains(t, string((&Client{}).encodeAdmit(subjects, budget.Amounts{Tokens: 0}, "", "", false)), "fo")

	// Malformed replies are errors, not panics.
	for _, raw := range []string{"*1\r\n:1\r\n", ":3\r\n", "*4\r\n:0\r\n:1\r\n:1\r\n:0\r\n", "*4\r\n$1\r\na\r\n:1\r\n:1\r\n:0\r\n"} {
		v, err := ParseReply([]byte(raw), nil)
		require.NoError(t, err)
		_, err = ParseStatus(v, subjects)
		assert.ErrorIs(t, err, ErrMalformed, raw)
	}
	for _, raw := range []string{"*1\r\n$1\r\nt\r\n", "*2\r\n$3\r\nt60\r\n$1\r\nx\r\n", ":1\r\n"} {
		v, _ := ParseReply([]byte(raw), nil)
		_, err = ParseOverrides(v)
		assert.ErrorIs(t, err, ErrMalformed, raw)
	}
	v, _ := ParseReply([]byte(":-1\r\n"), nil)
	_, err = ParseReset(v)
	assert.ErrorIs(t, err, ErrMalformed)
}

// Money windows ('u' specs, in nanodollars) are read, overridden, reset
// and left alone by a grant as the scripts name them, with nothing of
// their own: the status shows what charges counted, an override applies
// in admissions, a reset of the money windows keeps the token window.
func TestQuotaCallsOfMoneyWindows(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	tokenMinute := tokens(60, 1000)
	usdDay := config.Window{Unit: config.UnitUSD, Seconds: 86400, Limit: 20 * config.NanoPerDollar}
	usdHour := config.Window{Unit: config.UnitUSD, Seconds: 3600, Limit: config.NanoPerDollar}
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{tokenMinute, usdDay, usdHour}}}
	o := Options{Overrides: true}
	c := &Client{options: o}
	_, err := ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 100, USD: 9_870_000}, 0, "", "", "", true)), nil)
	require.NoError(t, err)
	status := func() []budget.LimitStatus {
		st, err := ParseStatus(run(t, r, o.StatusCall(subjects)), subjects)
		require.NoError(t, err)
		for i := range st[0] {
			st[0][i].Reset = 0
		}
		return st[0]
	}
	assert.Equal(t, []budget.LimitStatus{
		{Kind: budget.KindTokens, Seconds: 60, Limit: 1000, Used: 100},
		{Kind: budget.KindUSD, Seconds: 86400, Limit: 20_000_000_000, Used: 9_870_000},
		{Kind: budget.KindUSD, Seconds: 3600, Limit: 1_000_000_000, Used: 9_870_000},
	}, status())

	// An override of the day's dollars, stored under its spec: the status
	// shows it, and the admission applies it.
	assert.Equal(t, "u86400", OverrideName(config.UnitUSD, 86400))
	_, err = ParseOverrides(run(t, r, OverrideCall([]byte(subject), []Override{{"u86400", 10_000_000}})))
	require.NoError(t, err)
	assert.Equal(t, budget.LimitStatus{Kind: budget.KindUSD, Seconds: 86400, Limit: 10_000_000, Used: 9_870_000, Overridden: true}, status()[1])
	admit := func(usd int64) budget.Verdict {
		v, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 1, USD: usd}, "", "", true)), nil)
		require.NoError(t, err)
		verdict, err := parseVerdict(v, 1)
		require.NoError(t, err)
		return verdict
	}
	assert.False(t, admit(130_001).Allowed, "over the override's $0.01")
	verdict := admit(130_000)
	require.True(t, verdict.Allowed, "exactly the override's $0.01")
	assert.Equal(t, int64(10_000_000), status()[1].Used)

	// A grant gives tokens only: the money windows' counts stay (0 in its
	// reply).
	money := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{tokenMinute, usdDay}}}
	assert.Equal(t, []int64{51, 0}, ints(run(t, r, o.GrantCall(money, 50))))
	assert.Equal(t, int64(10_000_000), status()[1].Used)

	// A reset of the money windows alone.
	n, err := ParseReset(run(t, r, o.ResetCall([]budget.Subject{{Key: []byte(subject), Windows: []config.Window{usdDay, usdHour}}})))
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	st := status()
	assert.Equal(t, []int64{51, 0, 0}, []int64{st[0].Used, st[1].Used, st[2].Used})
	assert.Empty(t, r.Keys(subject+":u*"))
}
