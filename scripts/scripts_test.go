package scripts

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

const subject = "atrl:{chat|limit_by_header|x-api-key|sk-1}"

// admitAt runs admit.lua at a given time, by source, as EVAL.
func admitAt(r *redistest.Server, now int64, windows ...int64) []int64 {
	args := []string{"EVAL", Admit.Source, "1", subject, strconv.FormatInt(now, 10)}
	for _, w := range windows {
		args = append(args, strconv.FormatInt(w, 10))
	}
	return ints(r.Do(args...))
}

func chargeAt(r *redistest.Server, now, tokens int64, windows ...int64) []int64 {
	args := []string{"EVAL", Charge.Source, "1", subject, strconv.FormatInt(now, 10), strconv.FormatInt(tokens, 10)}
	for _, w := range windows {
		args = append(args, strconv.FormatInt(w, 10))
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

func TestAdmitAllowsUntilTheWindowIsUsedUp(t *testing.T) {
	r := redistest.Start(t)
	now := int64(60*1000 + 10) // 10 s into a minute bucket
	assert.Equal(t, []int64{1, 100, 100, 50}, admitAt(r, now, 60, 100), "fresh: all left, resets at the minute")
	assert.Equal(t, []int64{60}, chargeAt(r, now, 60, 60))
	assert.Equal(t, []int64{1, 100, 40, 50}, admitAt(r, now, 60, 100))
	assert.Equal(t, []int64{100}, chargeAt(r, now+1, 40, 60))
	assert.Equal(t, []int64{0, 100, 0, 49}, admitAt(r, now+1, 60, 100), "used up: rejected")
	assert.Equal(t, []int64{1, 100, 100, 60}, admitAt(r, 60*1001, 60, 100), "next bucket: open again")
}

func TestChargeGoesPastTheLimitAndTheNextAdmissionSeesIt(t *testing.T) {
	r := redistest.Start(t)
	now := int64(3600 * 500)
	chargeAt(r, now, 250, 60)
	assert.Equal(t, []int64{0, 100, 0, 60}, admitAt(r, now, 60, 100), "remaining is never negative")
	assert.Equal(t, int64(250), r.Int("GET", subject+":t60:"+strconv.FormatInt(now/60, 10)))
}

func TestChargedBucketsExpireWithTheirWindow(t *testing.T) {
	r := redistest.Start(t)
	now := int64(86400*20000 + 3600 + 30) // 30 s into a minute, 1 h into a day
	chargeAt(r, now, 5, 1, 60, 3600, 86400)
	for _, c := range []struct {
		window, ttl int64
	}{{1, 2}, {60, 31}, {3600, 3571}, {86400, 82771}} {
		key := subject + ":t" + strconv.FormatInt(c.window, 10) + ":" + strconv.FormatInt(now/c.window, 10)
		assert.Equal(t, int64(5), r.Int("GET", key), key)
		assert.Equal(t, c.ttl, r.Int("TTL", key), "TTL of %s: the rest of its window plus one second", key)
	}
	chargeAt(r, now+10, 5, 60)
	assert.Equal(t, int64(31), r.Int("TTL", subject+":t60:"+strconv.FormatInt(now/60, 10)), "a later charge keeps the expiry")
}

func TestAdmitReportsTheDecidingWindow(t *testing.T) {
	r := redistest.Start(t)
	now := int64(86400*20000 + 3600 + 30)
	// minute: 1,000 per minute, 900 used; day: 100,000 per day, 900 used.
	chargeAt(r, now, 900, 60, 86400)
	assert.Equal(t, []int64{1, 1000, 100, 30}, admitAt(r, now, 60, 1000, 86400, 100000), "allowed: the tightest window")
	chargeAt(r, now, 100, 60, 86400)
	assert.Equal(t, []int64{0, 1000, 0, 30}, admitAt(r, now, 60, 1000, 86400, 100000), "the minute is used up")
	// Day used up too: the client can only come back when the day resets.
	assert.Equal(t, []int64{0, 1000, 0, 82770}, admitAt(r, now, 60, 1000, 86400, 1000), "both used up: the later reset")
	assert.Equal(t, []int64{0, 1000, 0, 82770}, admitAt(r, now, 86400, 1000, 60, 1000), "order does not matter")
	// A used-up day rejects even when the minute is open.
	assert.Equal(t, []int64{0, 500, 0, 82710}, admitAt(r, now+60, 60, 1000, 86400, 500))
}

func TestAdmitWritesNothing(t *testing.T) {
	r := redistest.Start(t)
	admitAt(r, 1000, 1, 10, 60, 100)
	assert.Empty(t, r.Keys("*"))
}

func TestScriptsUseRedisTimeWhenNoTimeIsGiven(t *testing.T) {
	r := redistest.Start(t)
	now := r.Do("TIME").Array()[0].Integer()
	r.Do("EVAL", Charge.Source, "1", subject, "", "7", "86400")
	assert.Equal(t, int64(7), r.Int("GET", subject+":t86400:"+strconv.Itoa(now/86400)))
	v := ints(r.Do("EVAL", Admit.Source, "1", subject, "", "86400", "10"))
	assert.Equal(t, int64(3), v[2])
}

func TestEncodedCallsRunOnRedisAndRecoverFromNoScript(t *testing.T) {
	r := redistest.Start(t)
	windows := []config.Window{{Seconds: 60, Limit: 1000}, {Seconds: 86400, Limit: 5000}}
	key := []byte(subject)

	_, err := ParseReply(r.Forward(encodeAdmit(key, windows, false)), nil)
	require.Error(t, err, "a fresh Redis does not know the script")
	assert.Contains(t, err.Error(), "NOSCRIPT")

	v, err := ParseReply(r.Forward(encodeAdmit(key, windows, true)), nil)
	require.NoError(t, err)
	verdict, err := parseVerdict(v)
	require.NoError(t, err)
	assert.Equal(t, Verdict{Allowed: true, Limit: 1000, Remaining: 1000, Reset: verdict.Reset}, verdict)
	assert.True(t, verdict.Reset >= 1 && verdict.Reset <= 60)

	_, err = ParseReply(r.Forward(encodeCharge(key, 1200, windows, false)), nil)
	require.Error(t, err, "charge.lua not loaded yet")
	v, err = ParseReply(r.Forward(encodeCharge(key, 1200, windows, true)), nil)
	require.NoError(t, err)
	assert.Len(t, v.Array(), 2)

	v, err = ParseReply(r.Forward(encodeAdmit(key, windows, false)), nil)
	require.NoError(t, err, "EVAL cached the script: EVALSHA works now")
	verdict, err = parseVerdict(v)
	require.NoError(t, err)
	assert.False(t, verdict.Allowed)
	assert.Equal(t, int64(0), verdict.Remaining)
}

func TestCallsAreSmall(t *testing.T) {
	key := []byte(subject)
	one := []config.Window{{Seconds: 60, Limit: 10000}}
	admit, charge := encodeAdmit(key, one, false), encodeCharge(key, 1234, one, false)
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
		"nil":              "$-1\r\n",
		"three elements":   "*3\r\n:1\r\n:100\r\n:5\r\n",
		"string element":   "*4\r\n:1\r\n$3\r\n100\r\n:5\r\n:3\r\n",
		"allowed is 2":     "*4\r\n:2\r\n:100\r\n:5\r\n:3\r\n",
		"limit 0":          "*4\r\n:1\r\n:0\r\n:5\r\n:3\r\n",
		"negative reset":   "*4\r\n:1\r\n:100\r\n:5\r\n:-3\r\n",
		"negative remains": "*4\r\n:1\r\n:100\r\n:-5\r\n:3\r\n",
		"status":           "+OK\r\n",
	} {
		v, err := ParseReply([]byte(raw), nil)
		require.NoError(t, err, name)
		_, err = parseVerdict(v)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
}
