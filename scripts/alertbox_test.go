package scripts

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 35, point 5: an alert is written to its subject's outbox by the
// call that crossed, listed in its rule's index (by that call on one Redis
// server), and handed out by scan and claim until it is removed or too old;
// an outbox is taken off the index only when nothing was listed since the
// scan that leased it.
func TestOutboxHandsAlertsOutUntilRemoved(t *testing.T) {
	r := redistest.Start(t)
	const at = 1767229210
	r.SetClock(at)
	index := cachekey.AlertIndex("chat")
	require.Equal(t, "atrl:alerts:{chat}", string(index))
	outbox := subject + cachekey.OutboxSuffix
	c := &Client{options: Options{Thresholds: []int64{50}, OneServer: true}}
	subjects := []Subject{{Key: []byte(subject), Windows: []config.Window{tokens(60, 1000)}}}
	crossed, err := c.parseCharge(runReply(t, r, c.encodeChargeCall(subjects, Amounts{Tokens: 600}, nil, 0, "", "c1", "", true, true)), subjects, true, true)
	require.NoError(t, err)
	require.Len(t, crossed, 1)
	member := crossed[0].Member(OverrideName(config.UnitTokens, 60))
	assert.Equal(t, "t60:29453820:!50|600|1000|50|1767229210", member)
	assert.Equal(t, []string{member}, r.Strings("ZRANGE", outbox, "0", "-1"))
	assert.Equal(t, int64(at+10), r.Int("ZSCORE", string(index), outbox), "listed in the same call, due after the grace")

	scan := func() (string, []string) {
		out, err := bulkStrings(run(t, r, alertCall([][]byte{index, leasesOf(index)}, "scan", "16", "5")), "scan", 1)
		require.NoError(t, err)
		return out[0], out[1:]
	}
	claim := func(maxAge string) Claimed {
		cl, err := parseClaimed(run(t, r, alertCall([][]byte{[]byte(outbox)}, "claim", maxAge, "1", "16")))
		require.NoError(t, err)
		return cl
	}
	settle := func(token, next string) {
		assert.Equal(t, 1, run(t, r, alertCall([][]byte{index, leasesOf(index)}, "settle", outbox, token, next)).Integer())
	}
	_, due := scan()
	assert.Empty(t, due, "not before its body is attached, or the grace ends")

	// The caller attaches the body and lists the outbox due now.
	assert.Equal(t, 1, run(t, r, alertCall([][]byte{[]byte(outbox)}, "attach", member, `{"id":"x"}`)).Integer())
	assert.Equal(t, 1, run(t, r, alertCall([][]byte{index, leasesOf(index)}, "list", outbox, "")).Integer())
	token, due := scan()
	assert.Equal(t, []string{outbox}, due)
	_, again := scan()
	assert.Empty(t, again, "leased")
	cl := claim("3600")
	require.Len(t, cl.Taken, 1)
	assert.Equal(t, Alert{Head: "t60:29453820:!50", Unit: config.UnitTokens, Seconds: 60, Threshold: 50, Used: 600, Limit: 1000, Reset: 50, At: at, Body: `{"id":"x"}`,
		Raw: member + `|{"id":"x"}`}, cl.Taken[0])
	assert.Equal(t, "1767229211", cl.Next, "tried again in a second")
	settle(token, cl.Next)
	assert.Equal(t, int64(at+1), r.Int("ZSCORE", string(index), outbox))
	assert.Empty(t, claim("3600").Taken, "not due yet")

	// Tries put off by their age: 1 s, 1 s, 2 s, 4 s after it crossed.
	for _, wait := range []int64{1, 2, 4} {
		r.SetClock(float64(at + wait))
		cl = claim("3600")
		require.Len(t, cl.Taken, 1, "at %d s", wait)
		assert.Equal(t, formatInt(at+2*wait), cl.Next)
	}

	// Removed: the outbox is gone, and taken off the index.
	assert.Equal(t, int64(1), r.Int("ZREM", outbox, cl.Taken[0].Raw))
	r.SetClock(at + 20)
	token, due = scan()
	assert.Equal(t, []string{outbox}, due)
	cl = claim("3600")
	assert.Equal(t, Claimed{}, cl)
	settle(token, cl.Next)
	assert.Empty(t, r.Keys("atrl:alerts:*"), "the index and its leases are gone with the last outbox")

	// An alert listed between a scan and its settle keeps its outbox listed.
	r.Do("ZADD", outbox, "1767229230", "q3600:490897:!50|2|4|3590|1767229230")
	r.Do("ZADD", string(index), "1767229230", outbox)
	r.SetClock(at + 20)
	token, due = scan()
	require.Equal(t, []string{outbox}, due)
	r.Do("DEL", outbox) // delivered by another replica meanwhile
	cl = claim("3600")
	r.Do("ZADD", outbox, "1767229240", "q3600:490897:!80|3|4|3590|1767229230")
	run(t, r, alertCall([][]byte{index, leasesOf(index)}, "list", outbox, "1767229240"))
	settle(token, cl.Next)
	assert.Equal(t, int64(1767229235), r.Int("ZSCORE", string(index), outbox), "still listed: by its lease's end")

	// Older than the max age: dropped, and reported so.
	r.SetClock(1767229240 + 3601)
	cl = claim("3600")
	assert.Empty(t, cl.Taken)
	require.Len(t, cl.Dropped, 1)
	assert.Equal(t, int64(80), cl.Dropped[0].Threshold)
}

// An alert's id is the same for every replica and try, and names nothing.
func TestAlertIDs(t *testing.T) {
	outbox := Outbox([]byte(subject))
	id := AlertID(outbox, "t60:29453820:!50")
	assert.Len(t, id, 24)
	assert.Equal(t, id, AlertID(outbox, "t60:29453820:!50"))
	assert.NotEqual(t, id, AlertID(outbox, "t60:29453821:!50"), "another bucket")
	assert.NotEqual(t, id, AlertID(outbox, "t60:29453820:!80"), "another threshold")
	assert.NotContains(t, id, "sk-1")
	_, ok := ParseAlert("t60:29453820:!50|600|1000")
	assert.False(t, ok)
	_, ok = ParseAlert("t60:29453820:!x|600|1000|50|1767229210")
	assert.False(t, ok)
	a, ok := ParseAlert(`t60:1:!50|600|1000|50|1767229210|{"a":"b|c"}`)
	require.True(t, ok)
	assert.Equal(t, `{"a":"b|c"}`, a.Body)
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
