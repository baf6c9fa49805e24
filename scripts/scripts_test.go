package scripts

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

const subject = "atrl:{chat|limit_by_header|x-api-key|sk-1}"

// window is "seconds:limit" shorthand for tests.
type window [2]int64

// admitAt runs admit.lua by source at a given time, reserving cost, for the
// one test subject.
func admitAt(r *redistest.Server, now int64, windows ...window) []int64 {
	return reserveAt(r, now, 0, windows...)
}

func reserveAt(r *redistest.Server, now, cost int64, windows ...window) []int64 {
	args := []string{"EVAL", Limiter.Source, "1", subject, opAdmit, strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "f", strconv.Itoa(len(windows))}
	for _, w := range windows {
		args = append(args, "t"+strconv.FormatInt(w[0], 10), strconv.FormatInt(w[1], 10))
	}
	return ints(r.Do(args...))[:4]
}

func chargeAt(r *redistest.Server, now, tokens int64, windows ...int64) []int64 {
	at := strconv.FormatInt(now, 10)
	args := []string{"EVAL", Limiter.Source, "1", subject, opCharge, at, at, "f", strconv.FormatInt(tokens, 10), "0", strconv.Itoa(len(windows))}
	for _, w := range windows {
		args = append(args, "t"+strconv.FormatInt(w, 10))
	}
	return ints(r.Do(args...))
}

func ints(v resp.Value) []int64 {
	var out []int64
	for _, e := range v.Array() {
		out = append(out, int64(e.Integer()))
	}
	return out
}

func bucketKey(key string, window, now int64) string {
	return key + ":t" + strconv.FormatInt(window, 10) + ":" + strconv.FormatInt(now/window, 10)
}

func TestAdmitAllowsUntilTheWindowIsUsedUp(t *testing.T) {
	r := redistest.Start(t)
	// An hour ahead of Redis's clock, 10 s into a minute: buckets of that time
	// live until it (the tests pass the time; expiries follow Redis's clock).
	base := (r.Now()/60 + 60) * 60
	now := base + 10
	assert.Equal(t, []int64{1, 100, 100, 50}, admitAt(r, now, window{60, 100}), "fresh: all left, resets at the minute")
	assert.Equal(t, []int64{60}, chargeAt(r, now, 60, 60))
	assert.Equal(t, []int64{1, 100, 40, 50}, admitAt(r, now, window{60, 100}))
	assert.Equal(t, []int64{100}, chargeAt(r, now+1, 40, 60))
	assert.Equal(t, []int64{0, 100, 0, 49}, admitAt(r, now+1, window{60, 100}), "used up: rejected")
	assert.Equal(t, []int64{1, 100, 100, 60}, admitAt(r, base+60, window{60, 100}), "next bucket: open again")
}

func TestChargeGoesPastTheLimitAndTheNextAdmissionSeesIt(t *testing.T) {
	r := redistest.Start(t)
	now := r.Now()
	chargeAt(r, now, 250, 60)
	assert.Equal(t, []int64{0, 100, 0, 60 - now%60}, admitAt(r, now, window{60, 100}), "remaining is never negative")
	assert.Equal(t, int64(250), r.Int("GET", bucketKey(subject, 60, now)))
}

func TestChargedBucketsExpireWithTheirWindow(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	now := r.Now()
	chargeAt(r, now, 5, 1, 60, 3600, 86400)
	for _, w := range []int64{1, 60, 3600, 86400} {
		key := bucketKey(subject, w, now)
		assert.Equal(t, int64(5), r.Int("GET", key), key)
		want := (now/w+1)*w - now + 1 // the rest of its window, plus one second
		assert.InDelta(t, want, r.Int("TTL", key), 1, "TTL of %s", key)
	}
	ttl := r.Int("TTL", bucketKey(subject, 60, now))
	chargeAt(r, now, 5, 60)
	assert.Equal(t, ttl, r.Int("TTL", bucketKey(subject, 60, now)), "a later charge keeps the expiry")
}

func TestAdmitReportsTheDecidingWindow(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/86400+1)*86400 + 3600 + 30 // tomorrow, 1 h 30 s in
	// minute: 1,000 per minute, 900 used; day: 100,000 per day, 900 used.
	chargeAt(r, now, 900, 60, 86400)
	assert.Equal(t, []int64{1, 1000, 100, 30}, admitAt(r, now, window{60, 1000}, window{86400, 100000}), "allowed: the tightest window")
	chargeAt(r, now, 100, 60, 86400)
	assert.Equal(t, []int64{0, 1000, 0, 30}, admitAt(r, now, window{60, 1000}, window{86400, 100000}), "the minute is used up")
	// Day used up too: the client can only come back when the day resets.
	assert.Equal(t, []int64{0, 1000, 0, 82770}, admitAt(r, now, window{60, 1000}, window{86400, 1000}), "both used up: the later reset")
	assert.Equal(t, []int64{0, 1000, 0, 82770}, admitAt(r, now, window{86400, 1000}, window{60, 1000}), "order does not matter")
	// A used-up day rejects even when the minute is open.
	assert.Equal(t, []int64{0, 500, 0, 82710}, admitAt(r, now+60, window{60, 1000}, window{86400, 500}))
}

func TestAdmitWritesNothing(t *testing.T) {
	r := redistest.Start(t)
	admitAt(r, 1000, window{1, 10}, window{60, 100})
	assert.Empty(t, r.Keys("*"))
}

func TestScriptsUseRedisTimeWhenNoTimeIsGiven(t *testing.T) {
	r := redistest.Start(t)
	now := r.Do("TIME").Array()[0].Integer()
	r.Do("EVAL", Limiter.Source, "1", subject, opCharge, "", "", "f", "7", "0", "1", "t86400")
	assert.Equal(t, int64(7), r.Int("GET", subject+":t86400:"+strconv.Itoa(now/86400)))
	v := ints(r.Do("EVAL", Limiter.Source, "1", subject, opAdmit, "", "0", "f", "1", "t86400", "10"))
	assert.Equal(t, int64(3), v[2])
	assert.InDelta(t, now, v[4], 1, "the admission reports the time it used")
}

func TestEncodedCallsRunOnRedisAndRecoverFromNoScript(t *testing.T) {
	r := redistest.Start(t)
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{{Seconds: 60, Limit: 1000}, {Seconds: 86400, Limit: 5000}}}}
	c := &Client{}

	_, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 0}, "", "", false)), nil)
	require.Error(t, err, "a fresh Redis does not know the script")
	assert.Contains(t, err.Error(), "NOSCRIPT")

	v, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 0}, "", "", true)), nil)
	require.NoError(t, err)
	verdict, err := parseVerdict(v, len(subjects))
	require.NoError(t, err)
	assert.Equal(t, budget.Verdict{Allowed: true, Limit: 1000, Remaining: 1000, Reset: verdict.Reset, At: verdict.At}, verdict)
	assert.True(t, verdict.Reset >= 1 && verdict.Reset <= 60)

	v, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 1200, Requests: 0}, 0, "", "", "", false)), nil)
	require.NoError(t, err, "loading the script for the admission loaded the charge too")
	assert.Len(t, v.Array(), 2)

	v, err = ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 0}, "", "", false)), nil)
	require.NoError(t, err, "EVAL cached the script: EVALSHA works now")
	verdict, err = parseVerdict(v, len(subjects))
	require.NoError(t, err)
	assert.False(t, verdict.Allowed)
	assert.Equal(t, int64(0), verdict.Remaining)
}

// A charge sent again under the same id (a retry after its reply was lost)
// is applied once; another id is another charge. The marker lives in the
// subject's slot and expires.
func TestChargeIDAppliesARetriedChargeOnce(t *testing.T) {
	r := redistest.Start(t)
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{{Seconds: 86400, Limit: 1000}}}}
	c := &Client{endpoint: Endpoint{TimeoutMs: 1000}}
	day := func() int64 { return r.Int("GET", fmt.Sprintf("%s:t86400:%d", subject, r.Now()/86400)) }

	v, err := ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 300, Requests: 0}, 0, "", "req-1", "", true)), nil)
	require.NoError(t, err)
	assert.Len(t, v.Array(), 1, "the first try reports the window's total")
	v, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 300, Requests: 0}, 0, "", "req-1", "", true)), nil)
	require.NoError(t, err)
	assert.Empty(t, v.Array(), "the retry finds the marker: nothing added")
	assert.Equal(t, int64(300), day())

	_, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 5, Requests: 0}, 0, "", "req-2", "", true)), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(305), day(), "another charge id is another charge")

	ttl := r.Int("TTL", subject+":x:req-1")
	assert.True(t, ttl > 60 && ttl <= c.ChargeMarkerSeconds(), "the marker expires (ttl %d)", ttl)
}

func TestCallsAreSmall(t *testing.T) {
	one := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{{Seconds: 60, Limit: 10000}}}}
	c := &Client{}
	admit, charge := c.encodeAdmit(one, budget.Amounts{Tokens: 0}, "", "", false), c.encodeCharge(one, budget.Amounts{Tokens: 1234, Requests: 0}, 0, "", "", "", false)
	t.Logf("admit %d bytes, charge %d bytes", len(admit), len(charge))
	assert.LessOrEqual(t, len(admit)+len(charge), 450, "bytes sent to Redis per request")
}

func TestRepliesThatAreNotVerdicts(t *testing.T) {
	for name, raw := range map[string]string{
		"empty":          "",
		"inline garbage": "hello world\r\n",
		"binary":         "\x00\xff\x10",
		"truncated":      "*4\r\n:1\r\n:100\r\n",
		"bad length":     "$5\r\nab\r\n",
	} {
		_, err := ParseReply([]byte(raw), nil)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err := ParseReply([]byte("-ERR boom\r\n"), nil)
	assert.EqualError(t, err, "ERR boom")

	for name, raw := range map[string]string{
		"nil":                     "$-1\r\n",
		"eight elements":          "*8\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n",
		"string element":          "*9\r\n:1\r\n$3\r\n100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n",
		"allowed is 3":            "*9\r\n:3\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n",
		"limit 0":                 "*9\r\n:1\r\n:0\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n",
		"negative reset":          "*9\r\n:1\r\n:100\r\n:5\r\n:-3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n",
		"negative remains":        "*9\r\n:1\r\n:100\r\n:-5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n",
		"no time":                 "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:0\r\n:0\r\n:0\r\n:1\r\n:1\r\n",
		"unknown kind":            "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:4\r\n:0\r\n:1\r\n:1\r\n",
		"negative wait":           "*9\r\n:0\r\n:100\r\n:0\r\n:3\r\n:9\r\n:0\r\n:-1\r\n:1\r\n:1\r\n",
		"subject 0":               "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:0\r\n:1\r\n",
		"subject past n":          "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:2\r\n:1\r\n",
		"negative window":         "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:-1\r\n",
		"tokens, window 0":        "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:0\r\n",
		"concurrency in a window": "*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:2\r\n:0\r\n:1\r\n:1\r\n",
		"status":                  "+OK\r\n",
	} {
		v, err := ParseReply([]byte(raw), nil)
		require.NoError(t, err, name)
		_, err = parseVerdict(v, 1)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	// Each of them differs from a good verdict in one place.
	v, err := ParseReply([]byte("*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n"), nil)
	require.NoError(t, err)
	_, err = parseVerdict(v, 1)
	require.NoError(t, err)
}

func TestReservationIsAllOrNothing(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/86400 + 1) * 86400 // tomorrow, at midnight
	assert.Equal(t, []int64{1, 1000, 300, 60}, reserveAt(r, now, 700, window{60, 1000}, window{86400, 5000}),
		"admitted: the minute is tightest, 300 left after the reservation")
	assert.Equal(t, int64(700), r.Int("GET", bucketKey(subject, 60, now)))
	assert.Equal(t, int64(700), r.Int("GET", bucketKey(subject, 86400, now)))

	assert.Equal(t, []int64{0, 1000, 0, 60}, reserveAt(r, now, 301, window{60, 1000}, window{86400, 5000}),
		"no room for 301 in the minute: rejected")
	assert.Equal(t, int64(700), r.Int("GET", bucketKey(subject, 86400, now)), "and nothing reserved in the day either")
	assert.Equal(t, []int64{1, 1000, 0, 60}, reserveAt(r, now, 300, window{60, 1000}, window{86400, 5000}), "exactly the rest fits")
}

func TestConcurrentReservationsNeverOvershoot(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/60 + 60) * 60
	admitted := 0
	for i := 0; i < 32; i++ {
		admitted += int(reserveAt(r, now, 1000, window{60, 10000})[0])
	}
	assert.Equal(t, 10, admitted, "32 × 1,000 against 10,000: ten fit")
	assert.Equal(t, int64(10000), r.Int("GET", bucketKey(subject, 60, now)))
}

// reconcile runs charge.lua for a request admitted at admission and
// settled at now, with the window type ('f' or 's').
func reconcile(r *redistest.Server, windowType string, admission, now, tokens int64, windows ...int64) []int64 {
	args := []string{"EVAL", Limiter.Source, "1", subject, opCharge, strconv.FormatInt(now, 10), strconv.FormatInt(admission, 10),
		windowType, strconv.FormatInt(tokens, 10), "0", strconv.Itoa(len(windows))}
	for _, w := range windows {
		args = append(args, "t"+strconv.FormatInt(w, 10))
	}
	return ints(r.Do(args...))
}

// A stream that outlives its window: what it used beyond its reservation
// goes to the buckets current when it is charged, where the next admission
// reads it; a refund goes back to the buckets the reservation went into.
func TestReconcileSplitsAcrossWindows(t *testing.T) {
	r := redistest.Start(t)
	admission := (r.Now()/86400+1)*86400 + 3600 // tomorrow, 1 h in: minute M
	later := admission + 120                    // minute M+2, the same day
	reserveAt(r, admission, 1000, window{60, 10000}, window{86400, 100000})

	// Used 1,400: +400 into minute M+2 (the minute M keeps its 1,000), and
	// into the day, current at both times.
	assert.Equal(t, []int64{400, 1400}, reconcile(r, "f", admission, later, 400, 60, 86400))
	assert.Equal(t, int64(1000), r.Int("GET", bucketKey(subject, 60, admission)), "the admission's minute keeps the reservation")
	assert.Equal(t, int64(400), r.Int("GET", bucketKey(subject, 60, later)), "the current minute holds the excess")
	assert.Equal(t, int64(1400), r.Int("GET", bucketKey(subject, 86400, later)))
	assert.InDelta(t, 60+1, r.Int("TTL", bucketKey(subject, 60, later)), 1, "a new current bucket expires with its window")
	assert.Equal(t, []int64{0, 400, 0}, admitAt(r, later, window{60, 400})[:3], "the next admission of minute M+2 sees it")

	// Another stream of minute M used 600 of its 1,000: 400 go back to
	// minute M, nothing to minute M+2.
	reserveAt(r, admission, 1000, window{60, 10000}, window{86400, 100000})
	assert.Equal(t, []int64{1600, 2000}, reconcile(r, "f", admission, later, -400, 60, 86400))
	assert.Equal(t, int64(400), r.Int("GET", bucketKey(subject, 60, later)), "untouched")

	// Settled in the minute it was admitted in: the whole difference there.
	assert.Equal(t, []int64{2100, 3700}, reconcile(r, "f", later, later, 1700, 60, 86400))
	assert.Equal(t, int64(1300), reconcile(r, "f", later, later, -800, 60)[0])

	// A refund into a bucket that has expired writes nothing.
	assert.Equal(t, []int64{0}, reconcile(r, "f", admission-600, later, -1000, 60))
	assert.Empty(t, r.Keys(bucketKey(subject, 60, admission-600)))
}

// A sliding window reads its previous bucket weighted: an excess charged
// there would count only in part. It goes to the current bucket, which
// lives a window longer for the next one to read.
func TestSlidingReconcileChargesTheExcessToTheCurrentBucket(t *testing.T) {
	r := redistest.Start(t)
	minute := (r.Now()/60 + 60) * 60
	admission := minute + 50
	args := func(at int64, cost string) []string {
		return []string{secs(float64(at)), cost, "s", "1", "t60", "10000"}
	}
	require.Equal(t, int64(1), call(r, opAdmit, args(admission, "1000")...)[0])
	now := minute + 70 // the next minute: the admission's bucket is the previous one
	assert.Equal(t, []int64{8000}, reconcile(r, "s", admission, now, 8000, 60))
	assert.Equal(t, int64(1000), r.Int("GET", bucketKey(subject, 60, admission)))
	assert.Equal(t, int64(8000), r.Int("GET", bucketKey(subject, 60, now)))
	assert.InDelta(t, 50+1+60, r.Int("TTL", bucketKey(subject, 60, now)), 1, "it outlives its window by one")
	// 8,000 + 1,000 × 50/60 used: 1,166 left, not 9,000 − 833.
	assert.Equal(t, []int64{1, 10000, 1166}, call(r, opAdmit, args(now, "0")...)[:3])
	assert.Equal(t, int64(0), call(r, opAdmit, args(now, "1200")...)[0])
}

// When a charge brings a bucket to zero, or would take it below (its
// reservation went with a Redis restart), the bucket is deleted rather than
// left at 0 until it expires.
func TestBucketsGivenBackToZeroAreDeleted(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/60 + 60) * 60
	reserveAt(r, now, 700, window{60, 1000})
	assert.Equal(t, []int64{0}, reconcile(r, "f", now, now, -700, 60))
	assert.Empty(t, r.Keys(subject+"*"), "given back exactly")

	// After a Redis restart the bucket may exist again (new admissions)
	// without the reservation: a refund stops at zero.
	r.Do("SET", bucketKey(subject, 60, now), "300", "EX", "100")
	assert.Equal(t, []int64{0}, reconcile(r, "f", now, now, -700, 60), "never below zero")
	assert.Empty(t, r.Keys(subject+"*"))

	// A rolled-back admission uncounts its request windows the same way.
	at := secs(float64(now))
	require.Equal(t, int64(1), call(r, opAdmit, at, "0", "f", "1", "q60", "5")[0])
	assert.Equal(t, []int64{0}, call(r, opCharge, at, at, "f", "0", "-1", "1", "q60"))
	assert.Empty(t, r.Keys(subject+"*"))
}

// A bucket holds at most 2^53 (config.MaxLimit), the largest count Lua's
// doubles hold exactly: charges past the limit, however many and however
// large, never make INCRBY overflow nor the script fail, and a limit of
// 2^53 is still enforced.
func TestBucketsHoldAtMostTwoToThe53(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/60 + 60) * 60
	key := bucketKey(subject, 60, now)
	most := strconv.FormatInt(config.MaxLimit, 10)
	for i := 1; i <= 1030; i++ { // 1,024 charges of 2^53 reach 2^63
		if got := reconcile(r, "f", now, now, config.MaxLimit, 60); len(got) != 1 || got[0] != config.MaxLimit {
			t.Fatalf("charge %d of 2^53: %v %v", i, got, r.Do("GET", key))
		}
	}
	assert.Equal(t, most, r.Do("GET", key).String())
	assert.InDelta(t, 61, r.Int("TTL", key), 1, "it keeps its expiry")
	assert.Equal(t, []int64{config.MaxLimit}, reconcile(r, "f", now, now, math.MaxInt64, 60), "even an amount no caller sends")
	assert.Equal(t, []int64{0, config.MaxLimit, 0}, admitAt(r, now, window{60, config.MaxLimit})[:3], "a limit of 2^53 is used up")
	assert.Equal(t, []int64{config.MaxLimit - 1}, reconcile(r, "f", now, now, -1, 60), "and given back to exactly")
	assert.Equal(t, []int64{0, config.MaxLimit, 0}, reserveAt(r, now, 2, window{60, config.MaxLimit})[:3])
	assert.Equal(t, []int64{1, config.MaxLimit, 0}, reserveAt(r, now, 1, window{60, config.MaxLimit})[:3])
}

// The client never sends Redis a cost or a charge past estimate.MaxTokens,
// whatever it is asked: Lua reads arguments as doubles.
func TestClientBoundsWhatItSends(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{{Seconds: 60, Limit: config.MaxLimit}}}}
	c := &Client{}
	v, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: math.MaxInt64}, "", "", true)), nil)
	require.NoError(t, err)
	verdict, err := parseVerdict(v, len(subjects))
	require.NoError(t, err)
	assert.True(t, verdict.Allowed)
	assert.Equal(t, config.MaxLimit-estimate.MaxTokens, verdict.Remaining, "MaxTokens reserved")

	v, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: math.MinInt64, Requests: 0}, verdict.At, "", "", "", true)), nil)
	require.NoError(t, err)
	assert.Equal(t, "[0]", fmt.Sprint(ints(v)), "MaxTokens given back")
	v, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: math.MaxInt64, Requests: 0}, 0, "", "", "", true)), nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{estimate.MaxTokens}, ints(v))
}

func TestOneCallCoversSeveralSubjects(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/86400 + 1) * 86400
	other := "atrl:{chat|limit_by_per_ip||10.0.0.1}"
	admit := func(cost int64) []int64 {
		v := ints(r.Do("EVAL", Limiter.Source, "2", subject, other, opAdmit, strconv.FormatInt(now, 10), strconv.FormatInt(cost, 10), "f",
			"1", "t86400", "10000", "2", "t60", "500", "t86400", "800"))
		return append(v[:4:4], v[7]) // and the subject the deciding limit belongs to
	}
	assert.Equal(t, []int64{1, 500, 100, 60, 2}, admit(400))
	assert.Equal(t, []int64{0, 500, 0, 60, 2}, admit(400), "the second subject's minute has 100 left")
	assert.Equal(t, int64(400), r.Int("GET", bucketKey(subject, 86400, now)), "nothing reserved for the first subject either")
	at := strconv.FormatInt(now, 10)
	r.Do("EVAL", Limiter.Source, "2", subject, other, opCharge, at, at, "f", "50", "0", "1", "t86400", "2", "t60", "t86400")
	assert.Equal(t, int64(450), r.Int("GET", bucketKey(subject, 86400, now)))
	assert.Equal(t, int64(450), r.Int("GET", bucketKey(other, 60, now)))
	assert.Equal(t, int64(450), r.Int("GET", bucketKey(other, 86400, now)))
}

// A per_model subject right after its parent is sent as a suffix of the
// parent's key, not as a key of its own: one key fewer in every admission
// and charge, and its counters land under the full key all the same.
func TestSubjectSentAsASuffixOfTheOneBefore(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	parent := budget.Subject{Key: []byte(subject), Windows: []config.Window{{Unit: config.UnitTokens, Seconds: 60, Limit: 1000}}}
	child := budget.Subject{Key: []byte(subject + ":m:gpt-4o"), Suffix: len(":m:gpt-4o"),
		Windows: []config.Window{{Unit: config.UnitTokens, Seconds: 60, Limit: 100}}, Concurrent: 1}
	subjects := []budget.Subject{parent, child}
	c := &Client{options: Options{LeaseSeconds: 60}}

	admit := c.encodeAdmit(subjects, budget.Amounts{Tokens: 80}, "lease-1", "", true)
	assert.Equal(t, 1, bytes.Count(admit, []byte(subject)), "the parent's key once, the child's as a suffix")
	v, err := ParseReply(r.Forward(admit), nil)
	require.NoError(t, err)
	verdict, err := parseVerdict(v, len(subjects))
	require.NoError(t, err)
	assert.Equal(t, budget.Verdict{Allowed: true, Limit: 100, Remaining: 20, Reset: verdict.Reset, At: verdict.At, Subject: 1}, verdict, "the child's window is the tightest")
	minute := strconv.FormatInt(verdict.At/60, 10)
	assert.Equal(t, int64(80), r.Int("GET", subject+":t60:"+minute))
	assert.Equal(t, int64(80), r.Int("GET", subject+":m:gpt-4o:t60:"+minute))
	assert.Equal(t, int64(1), r.Int("ZCARD", subject+":m:gpt-4o:c"), "the child's lease")

	v, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: 5, Requests: 0}, verdict.At, "lease-1", "", "", true)), nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{85, 85}, ints(v))
	assert.Equal(t, int64(0), r.Int("ZCARD", subject+":m:gpt-4o:c"), "released")

	// Not after its parent (or not a suffix of it): a key of its own.
	q := c.encodeAdmit([]budget.Subject{child, parent}, budget.Amounts{Tokens: 0}, "", "", true)
	assert.Equal(t, 2, bytes.Count(q, []byte(subject)))
}
