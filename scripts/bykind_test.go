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

// admitRaw runs admit.lua by source at second now with the options given
// ("f", "F", ...), for subject heads and windows written as the client
// writes them, and returns the reply's integers.
func admitRaw(r *redistest.Server, now int64, cost, options string, args ...string) []int64 {
	call := append([]string{"EVAL", Limiter.Source, "1", subject, opAdmit, strconv.FormatInt(now, 10), cost, options}, args...)
	return ints(r.Do(call...))
}

// Asked for each kind ('F'), an admission reports, after its verdict, the
// tightest window of tokens, requests and money apart: what the OpenAI and
// IETF quota headers show.
func TestAdmitReportsEachKindsTightestWindow(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/86400+1)*86400 + 3600 + 30 // tomorrow, 1 h 30 s in
	chargeAt(r, now, 900, 60, 86400)           // 900 tokens in the minute and the day
	args := []string{"3", "t60", "1000", "t86400", "100000", "q60", "5"}
	reply := admitRaw(r, now, "0", "F", args...)
	require.Len(t, reply, verdictLen+byKindLen)
	assert.Equal(t, []int64{1, 1000, 100, 30}, reply[:4], "the verdict: the tightest token window")
	assert.Equal(t, []int64{1, 1}, reply[7:9], "subject 1, window 1")
	assert.Equal(t, []int64{1000, 100, 30_000, 1, 1}, reply[9:14], "tokens: the minute, 30 s to its end")
	assert.Equal(t, []int64{5, 4, 30_000, 1, 3}, reply[14:19], "requests: this one counted")
	assert.Equal(t, []int64{0, 0, 0, 0, 0}, reply[19:24], "no money window")

	// The client reads it into each kind's budget.Tightest.
	c := &Client{options: Options{ByKind: true}}
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{
		{Unit: config.UnitTokens, Seconds: 60, Limit: 1000}, {Unit: config.UnitTokens, Seconds: 86400, Limit: 100000}, {Unit: config.UnitRequests, Seconds: 60, Limit: 5},
	}}}
	v, err := c.parseAdmit(replyOf(reply), subjects)
	require.NoError(t, err)
	require.NotNil(t, v.ByKind)
	assert.Equal(t, budget.Tightest{Limit: 1000, Remaining: 100, ResetMs: 30_000}, v.ByKind[budget.KindTokens])
	assert.Equal(t, budget.Tightest{Limit: 5, Remaining: 4, ResetMs: 30_000, Window: 2}, v.ByKind[budget.KindRequests])
	assert.Zero(t, v.ByKind[budget.KindUSD].Limit)

	// Rejected by the minute: its kind reports the wait; requests still show.
	chargeAt(r, now, 100, 60, 86400)
	reply = admitRaw(r, now+10, "0", "F", args...)
	assert.Equal(t, []int64{0, 1000, 0, 20}, reply[:4])
	assert.Equal(t, []int64{1000, 0, 20_000, 1, 1}, reply[9:14])
	assert.Equal(t, []int64{5, 3, 20_000, 1, 3}, reply[14:19], "what the request would leave: it is not counted")

	// Not asked ('f'): the verdict alone.
	assert.Len(t, admitRaw(r, now+10, "0", "f", args...), verdictLen)

	// A block that names a window of another kind, or none, is refused.
	bad := append([]int64(nil), reply...)
	bad[13] = 3 // tokens said to be the request window
	_, err = c.parseAdmit(replyOf(bad), subjects)
	assert.ErrorIs(t, err, ErrMalformed)
	_, err = c.parseAdmit(replyOf(reply[:verdictLen+5]), subjects)
	assert.ErrorIs(t, err, ErrMalformed, "a short block")
}

// A soft window with no room admits, counts, and says so (allowed 2),
// describing the window that would have rejected; a hard window with no
// room still rejects, and decides over a soft one.
func TestSoftWindowsAdmitOverTheirLimitAndSaySo(t *testing.T) {
	r := redistest.Start(t)
	now := (r.Now()/86400+1)*86400 + 30
	chargeAt(r, now, 1000, 60)
	reply := admitRaw(r, now, "5", "f", "1", "t60", "1000s")
	assert.Equal(t, []int64{2, 1000, 0, 30}, reply[:4], "admitted over the soft minute")
	assert.Equal(t, int64(1005), r.Int("GET", bucketKey(subject, 60, now)), "and the reservation counted")

	reply = admitRaw(r, now, "5", "f", "2", "t60", "1000s", "t3600", "4")
	assert.Equal(t, int64(0), reply[0], "the hard hour rejects")
	assert.Equal(t, []int64{4, 0}, reply[1:3], "and the verdict names it")
	assert.Equal(t, int64(2), reply[8], "its window")
}

// A soft concurrency limit ('c<N>s', shadow_mode) takes its lease even when
// full, and reports that it would have rejected.
func TestSoftConcurrencyTakesItsLease(t *testing.T) {
	r := redistest.Start(t)
	now := r.Now()
	for i, want := range []int64{1, 1, 2, 2} {
		reply := admitRaw(r, now, "0", "f60:lease"+strconv.Itoa(i), "0c2s")
		assert.Equal(t, want, reply[0], "request %d", i)
		if want == 2 {
			assert.Equal(t, []int64{2, 0}, reply[1:3])
			assert.Equal(t, []int64{2, 0}, []int64{reply[5], reply[8]}, "kind: in progress, window 0")
		}
	}
	assert.Equal(t, int64(4), r.Int("ZCARD", subject+":c"), "every lease taken")
	assert.Equal(t, int64(0), admitRaw(r, now, "0", "f60:x", "0c2")[0], "the same limit, hard, rejects")
}

// replyOf makes a reply of integers, as Redis sends them.
func replyOf(ns []int64) resp.Value {
	vs := make([]resp.Value, len(ns))
	for i, n := range ns {
		vs[i] = resp.IntegerValue(int(n))
	}
	return resp.ArrayValue(vs)
}
