package scripts

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 35, point 5: an alert is written to its subject's outbox by the
// call that crossed, listed in its owner's index (by that call on one Redis
// server), and handed out by scan and claim until it is removed or too old;
// an outbox is taken off the index only when nothing was listed since the
// scan that leased it.
func TestOutboxHandsAlertsOutUntilRemoved(t *testing.T) {
	r := redistest.Start(t)
	const at = 1767229210
	r.SetClock(at)
	const owner = "1a2b3c4d"
	registry := cachekey.AlertRegistry("chat")
	index := string(cachekey.AlertIndex("chat", owner))
	require.Equal(t, "atrl:alerts:{chat}:c", string(registry))
	require.Equal(t, "atrl:alerts:{chat}:1a2b3c4d", index)
	outbox := string(Outbox([]byte(subject), owner))
	require.Equal(t, subject+":!o:1a2b3c4d", outbox)
	unlisted := cachekey.Unlisted(cachekey.Slot([]byte(subject)), "chat")
	c := &Client{options: Options{Thresholds: []int64{50}, OneServer: true, AlertOwner: owner}}
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{tokens(60, 1000)}}}
	crossed, err := c.parseCharge(runReply(t, r, c.encodeChargeCall(subjects, budget.Amounts{Tokens: 600}, nil, 0, "", "c1", "", true, true)), subjects, true, true)
	require.NoError(t, err)
	require.Len(t, crossed, 1)
	member := AlertMember(crossed[0], OverrideName(config.UnitTokens, 60))
	assert.Equal(t, "t60:29453820:!50|600|1000|50|1767229210", member)
	assert.Equal(t, []string{member}, r.Strings("ZRANGE", outbox, "0", "-1"))
	assert.Equal(t, int64(at+10), r.Int("ZSCORE", index, outbox), "listed in the same call, due after the grace")
	assert.Equal(t, int64(at), r.Int("HGET", string(registry), owner), "its owner registered")
	assert.Empty(t, r.Keys("atrl:unlisted:*"), "listed: not noted for the sweep")

	scan := func() (string, []string) {
		sc, err := parseScanned(run(t, r, alertCall([][]byte{registry}, "scan", owner, "16", "5", "alerts.static", "0")))
		require.NoError(t, err)
		assert.Equal(t, -1, sc.Sweep, "no sweep: one server")
		assert.Empty(t, sc.Silent)
		return sc.Token, sc.Own
	}
	claim := func(maxAge string) Claimed {
		cl, err := parseClaimed(run(t, r, alertCall([][]byte{[]byte(outbox), unlisted}, "claim", maxAge, "1", "16")))
		require.NoError(t, err)
		return cl
	}
	settle := func(token, next string) {
		assert.Equal(t, 1, run(t, r, alertCall([][]byte{registry}, "settle", outbox, token, next)).Integer())
	}
	list := func(due string) {
		assert.Equal(t, 1, run(t, r, alertCall([][]byte{registry}, "list", due, outbox)).Integer())
	}
	_, due := scan()
	assert.Empty(t, due, "not before its body is attached, or the grace ends")
	assert.Equal(t, "alerts.static", r.Do("HGET", string(registry), owner+":w").String(), "the owner's webhook, for the logs of others")

	// The caller attaches the body and lists the outbox due now.
	assert.Equal(t, 1, run(t, r, alertCall([][]byte{[]byte(outbox)}, "attach", member, `{"id":"x"}`)).Integer())
	list("")
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
	assert.Equal(t, int64(at+1), r.Int("ZSCORE", index, outbox))
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
	assert.Equal(t, []string{string(registry)}, r.Keys("atrl:alerts:*"), "the index and its leases are gone with the last outbox")

	// An alert listed between a scan and its settle keeps its outbox listed.
	r.Do("ZADD", outbox, "1767229230", "q3600:490897:!50|2|4|3590|1767229230")
	r.Do("ZADD", index, "1767229230", outbox)
	r.SetClock(at + 20)
	token, due = scan()
	require.Equal(t, []string{outbox}, due)
	r.Do("DEL", outbox) // delivered by another replica meanwhile
	cl = claim("3600")
	r.Do("ZADD", outbox, "1767229240", "q3600:490897:!80|3|4|3590|1767229230")
	list("1767229240")
	settle(token, cl.Next)
	assert.Equal(t, int64(1767229235), r.Int("ZSCORE", index, outbox), "still listed: by its lease's end")

	// Older than the max age: dropped, and reported so.
	r.SetClock(1767229240 + 3601)
	cl = claim("3600")
	assert.Empty(t, cl.Taken)
	require.Len(t, cl.Dropped, 1)
	assert.Equal(t, int64(80), cl.Dropped[0].Threshold)
}

// Issue 51, point 1: on a Redis Cluster the call that writes an alert
// notes its outbox in its own slot; the scans of the rule hand out 16
// slots a second, for all its replicas together, whose notes a minute old
// (no listing reached them) the replica lists; a claim of the outbox takes
// its note out. Point 2: the outboxes of an owner that no replica has
// scanned for an hour, while others scanned, are handed out to be given up
// (claimed with max age -1); one with nothing left is forgotten.
func TestSweepAndSilentOwners(t *testing.T) {
	r := redistest.Start(t)
	const at = 1767229210
	r.SetClock(at)
	registry := cachekey.AlertRegistry("chat")
	slot := cachekey.Slot([]byte(subject))
	unlisted := cachekey.Unlisted(slot, "chat")
	c := &Client{options: Options{Thresholds: []int64{50}, AlertOwner: "0000000b"}}
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{tokens(60, 1000)}}}
	_, err := c.parseCharge(runReply(t, r, c.encodeChargeCall(subjects, budget.Amounts{Tokens: 600}, nil, 0, "", "c1", "", true, true)), subjects, true, true)
	require.NoError(t, err)
	outboxB := subject + ":!o:0000000b"
	require.Equal(t, []string{outboxB}, r.Strings("ZRANGE", string(unlisted), "0", "-1"))
	notes := func() []string {
		out, err := bulkStrings(run(t, r, alertCall([][]byte{unlisted}, "unlisted", "60", "64")), "unlisted", 0)
		require.NoError(t, err)
		return out
	}
	assert.Empty(t, notes(), "not before a minute: its replica lists it")

	scan := func(owner, sweep string) Scanned {
		sc, err := parseScanned(run(t, r, alertCall([][]byte{registry}, "scan", owner, "16", "5", "hooks-"+owner, sweep)))
		require.NoError(t, err)
		return sc
	}
	assert.Equal(t, 0, scan("0000000a", "1").Sweep, "the first slots")
	assert.Equal(t, -1, scan("0000000a", "1").Sweep, "once a second for the rule")
	r.SetClock(at + 1)
	assert.Equal(t, 16, scan("0000000b", "1").Sweep, "whichever owner scans first")
	r.Do("HSET", string(registry), "!slot", "16380")
	r.SetClock(at + 2)
	assert.Equal(t, 16380, scan("0000000a", "1").Sweep)
	r.SetClock(at + 3)
	assert.Equal(t, 12, scan("0000000a", "1").Sweep, "round and round")

	r.SetClock(at + 60)
	assert.Equal(t, []string{outboxB}, notes(), "a minute old: swept")
	assert.Equal(t, 1, run(t, r, alertCall([][]byte{registry}, "list", "", outboxB)).Integer())
	assert.Equal(t, []string{outboxB}, r.Strings("ZRANGE", string(cachekey.AlertIndex("chat", "0000000b")), "0", "-1"), "listed in its owner's index")
	_, err = parseClaimed(run(t, r, alertCall([][]byte{[]byte(outboxB), unlisted}, "claim", "3600", "1", "16")))
	require.NoError(t, err)
	assert.Empty(t, r.Keys("atrl:unlisted:*"), "claimed: its note is out")

	// Owner b stops scanning; a scans on, every 59 s, for an hour: b is
	// silent, and its outboxes due are handed out to a.
	for s := int64(61); s < 3601; s += 59 { // b last scanned at 1 s (its listing at 60 s found it registered)
		r.SetClock(float64(at + s))
		assert.Empty(t, scan("0000000a", "0").Silent, "at %d s", s)
	}
	r.SetClock(at + 3601)
	sc := scan("0000000a", "0")
	assert.Equal(t, []string{outboxB}, sc.Silent, "b's outbox, to be given up")
	assert.Equal(t, "hooks-0000000b", sc.SilentWebhook)
	cl, err := parseClaimed(run(t, r, alertCall([][]byte{[]byte(outboxB), unlisted}, "claim", "-1", "1", "16")))
	require.NoError(t, err)
	require.Len(t, cl.Dropped, 1, "every alert due dropped")
	assert.Empty(t, cl.Taken)
	assert.Equal(t, 1, run(t, r, alertCall([][]byte{registry}, "settle", outboxB, sc.Token, cl.Next)).Integer())
	r.SetClock(at + 3602)
	assert.Empty(t, scan("0000000a", "0").Silent)
	assert.Empty(t, r.Do("HGET", string(registry), "0000000b").String(), "b forgotten: nothing of it left")

	// After a pause of scans (the registry's slot down for over a minute),
	// no owner is silent before an hour of scans.
	r.Do("HSET", string(registry), "0000000c", strconv.Itoa(at))
	r.Do("ZADD", string(cachekey.AlertIndex("chat", "0000000c")), "0", subject+":!o:0000000c")
	const back = at + 3602 + 61
	for s := int64(0); s < 3600; s += 59 {
		r.SetClock(float64(back + s))
		assert.Empty(t, scan("0000000a", "0").Silent, "%d s after the pause", s)
	}
	r.SetClock(back + 3600)
	assert.Equal(t, []string{subject + ":!o:0000000c"}, scan("0000000a", "0").Silent, "an hour of scans after the pause")
}

// An alert's id is the same for every replica and try, and names nothing.
func TestAlertIDs(t *testing.T) {
	outbox := Outbox([]byte(subject), "1a2b3c4d")
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
