package limiter_test

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Issue 26, item 4: hierarchies of budgets, org > team > key, with
// rule_match_mode all, each level read from a header an auth plugin sets.
// Through the plugin (Go and WASM mode) on a real redis-server and on a
// Redis Cluster: every level counts every request of its members, the first
// level to run out rejects, and on one Redis (redis.cluster: false) a
// request makes one call at admission and one at the end, whatever the
// slots of its three subjects.

// hierarchyConfig is three levels: each org usd_per_month, each team
// usd_per_day, each key token_per_minute; every model at $1/$2 per million
// input/output tokens (1,000 and 2,000 nanodollars a token), the catalog
// off (one price for all: admitted at the headers). redis is the
// redis section's extra fields ("": the default, redis.cluster true).
func hierarchyConfig(orgUSD, teamUSD string, keyTokens int, redis string) string {
	return fmt.Sprintf(`{"rule_name": "orgs", "rule_match_mode": "all", "rule_items": [
		{"limit_by_per_header": "x-org-id", "limit_keys": [{"key": "*", "usd_per_month": %s}]},
		{"limit_by_per_header": "x-team-id", "limit_keys": [{"key": "*", "usd_per_day": %s}]},
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_minute": %d}]}],
		"pricing": {"*": {"input": 1, "output": 2}}, "pricing_catalog": "off",
		"redis": {"service_name": "redis.static", "timeout": 1000%s}}`, orgUSD, teamUSD, keyTokens, redis)
}

// oneRedis is the redis section's field of a single Redis server.
const oneRedis = `, "cluster": false`

// member is one API key of a team of an org, as an auth plugin names them.
type member struct{ org, team, key string }

func (m member) headers() [][2]string {
	return [][2]string{{"x-org-id", m.org}, {"x-team-id", m.team}, {"x-api-key", m.key}}
}

func levelSubject(header, value string) string {
	return "atrl:{orgs|limit_by_per_header|" + header + "|" + value + "}"
}

// members is 2 orgs × 2 teams × 4 keys.
func members() []member {
	var ms []member
	for _, org := range []string{"org-a", "org-b"} {
		for t := 1; t <= 2; t++ {
			team := fmt.Sprintf("%s-t%d", org, t)
			for k := 1; k <= 4; k++ {
				ms = append(ms, member{org, team, fmt.Sprintf("%s-k%d", team, k)})
			}
		}
	}
	return ms
}

// levels reads the three levels' counters, in the current buckets: each
// org's month in nanodollars, each team's day in nanodollars, each key's
// minute in tokens.
type levels struct{ orgs, teams, keys map[string]int64 }

func readLevels(r redistest.Backend, ms []member) levels {
	now := r.Now()
	t := time.Unix(now, 0).UTC()
	month := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
	l := levels{map[string]int64{}, map[string]int64{}, map[string]int64{}}
	for _, m := range ms {
		l.orgs[m.org] = r.Int("GET", fmt.Sprintf("%s:u2592000:%d", levelSubject("x-org-id", m.org), month))
		l.teams[m.team] = plugintest.Counter(r, levelSubject("x-team-id", m.team), "u86400", now)
		l.keys[m.key] = plugintest.Counter(r, levelSubject("x-api-key", m.key), "t60", now)
	}
	return l
}

// scriptOps lists the operations (admit, charge) of the limiter script
// calls pending for a context, with their key counts.
func scriptOps(host proxytest.HostEmulator, contextID uint32) []string {
	var ops []string
	for _, c := range host.GetRedisCalloutAttributesFromContext(contextID) {
		args := queryArgs(c.Query)
		if len(args) < 4 {
			ops = append(ops, "?")
			continue
		}
		n := args[2].Integer()
		ops = append(ops, fmt.Sprintf("%s/%d keys", args[3+n].String(), n))
	}
	return ops
}

// queryArgs decodes a RESP command.
func queryArgs(query []byte) []resp.Value {
	v, _, err := resp.NewReader(bufio.NewReader(bytes.NewReader(query))).ReadValue()
	if err != nil {
		return nil
	}
	return v.Array()
}

func TestHierarchy(t *testing.T) {
	redis := redistest.Start(t)
	cluster := redistest.StartCluster(t)
	plugintest.RunTest(t, func(t *testing.T) {
		for _, b := range []struct {
			name    string
			backend redistest.Backend
			extra   string // the redis section's extra fields
			calls   int    // script calls per request each way
		}{
			{"one Redis, redis.cluster false: one call each way", redis, oneRedis, 1},
			{"one Redis, redis.cluster true (the default): one call per slot", redis, "", 3},
			{"Redis Cluster: one call per slot", cluster, "", 3},
		} {
			t.Run(b.name, func(t *testing.T) {
				t.Run("32 concurrent requests are counted exactly at every level", func(t *testing.T) {
					hierarchyExactAccounting(t, b.backend, b.extra, b.calls)
				})
				t.Run("the first level to run out rejects", func(t *testing.T) {
					hierarchyFirstLevelRejects(t, b.backend, b.extra)
				})
			})
		}
		t.Run("a Redis Cluster configured as one Redis: refused once, then one call per slot", func(t *testing.T) {
			hierarchyLearnsCrossSlot(t, &crossSlotRedis{Server: redis})
		})
	})
}

// resetHierarchy empties Redis, keeps the test's windows in one bucket and
// loads the script, so that no NOSCRIPT retry adds a call to count.
func resetHierarchy(r redistest.Backend) {
	r.AvoidWindowEdge(60, 8) // a day's and a month's edge are a minute's too
	r.Do("FLUSHALL")
	r.Do("SCRIPT", "LOAD", scripts.Limiter.Source)
}

// (a) 32 requests of 16 keys in flight at once, their admissions answered
// in an interleaved order, their responses (each with its own usage) in
// another, their charges in a third: every key, team and org holds exactly
// the sum of its members' usage; each request made calls script calls at
// admission and as many at the end.
func hierarchyExactAccounting(t *testing.T, backend redistest.Backend, extra string, calls int) {
	resetHierarchy(backend)
	p := plugintest.Start(t, backend, hierarchyConfig("1000", "100", 1_000_000, extra))
	ms := members()
	const n = 32
	xs := make([]*plugintest.Exchange, n)
	for i := range xs {
		xs[i] = p.Send(ms[i%len(ms)].headers()...)
		ops := scriptOps(p.Host, xs[i].ID)
		require.Len(t, ops, calls, "admission calls of request %d: %v", i, ops)
		for _, op := range ops {
			assert.Equal(t, fmt.Sprintf("admit/%d keys", 3/calls), op)
		}
	}
	for i := range n { // 13 is prime to 32: every request, out of order
		x := xs[i*13%n].Answer()
		require.True(t, x.Passed(), "request %d admitted", i*13%n)
	}
	usage := func(i int) (prompt, completion int) { return 100 + i, 10 + 2*i }
	order := func(i int) int { return (n - 1 - i*5%n) }
	for i := range n { // every response ends, each charge held until answered
		j := order(i)
		x := xs[j]
		x.ResponseHeaders("text/event-stream")
		prompt, completion := usage(j)
		action := p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, prompt, completion)), true)
		require.Equal(t, types.ActionPause, action, "the end waits for its charge")
		ops := scriptOps(p.Host, x.ID)
		require.Len(t, ops, calls, "charge calls of request %d: %v", j, ops)
		for _, op := range ops {
			assert.Equal(t, fmt.Sprintf("charge/%d keys", 3/calls), op)
		}
	}
	for i := range n { // the charges, answered in a third order
		x := xs[i*7%n]
		require.Equal(t, calls, backend.Answer(p.Host, x.ID))
		require.Equal(t, types.ActionContinue, p.Host.GetCurrentHttpStreamAction(x.ID))
		x.Done()
	}

	want := levels{map[string]int64{}, map[string]int64{}, map[string]int64{}}
	for i := range n {
		m := ms[i%len(ms)]
		prompt, completion := usage(i)
		usd := int64(prompt*1000 + completion*2000)
		want.orgs[m.org] += usd
		want.teams[m.team] += usd
		want.keys[m.key] += int64(prompt + completion)
	}
	got := readLevels(backend, ms)
	assert.Equal(t, want.orgs, got.orgs, "each org: its teams' requests, in nanodollars")
	assert.Equal(t, want.teams, got.teams, "each team: its keys' requests, in nanodollars")
	assert.Equal(t, want.keys, got.keys, "each key: its requests' tokens")
	if c, ok := backend.(*redistest.Cluster); ok {
		requireSlotLocal(t, c, c.Calls())
	}
}

// (b) Each request uses 1,000 + 500 tokens: $0.002. A key closes after two
// (3,000 of 2,000 tokens a minute), a team after three ($0.006 of $0.005 a
// day), an org after five ($0.010 of $0.009 a month). The scope header names
// the level that closed.
func hierarchyFirstLevelRejects(t *testing.T, backend redistest.Backend, extra string) {
	resetHierarchy(backend)
	p := plugintest.Start(t, backend, hierarchyConfig("0.009", "0.005", 2000, extra))
	a1 := func(k int) member { return member{"org-a", "org-a-t1", fmt.Sprintf("org-a-t1-k%d", k)} }
	a2 := func(k int) member { return member{"org-a", "org-a-t2", fmt.Sprintf("org-a-t2-k%d", k)} }
	b1 := member{"org-b", "org-b-t1", "org-b-t1-k1"}
	admitted := func(m member) {
		t.Helper()
		x := p.Request(m.headers()...)
		require.True(t, x.Passed(), "%v admitted", m)
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1000, 500))...)
	}
	rejected := func(m member, scope string) {
		t.Helper()
		x := p.Request(m.headers()...)
		local := x.RequireRejected(429)
		assert.Equal(t, scope, plugintest.Header(local.Headers, limiter.HeaderScope), "%v", m)
		x.Done()
	}

	admitted(a1(1))
	admitted(a1(1))
	rejected(a1(1), "rule_item=2; key=*") // the key's minute
	admitted(a1(2))                       // the team's third: $0.006 of $0.005
	rejected(a1(3), "rule_item=1; key=*") // a fresh key of that team: the team's day
	admitted(a2(1))                       // another team of the org: $0.008 of $0.009
	admitted(a2(2))                       // $0.010: the org is over
	rejected(a2(3), "rule_item=0; key=*") // its team has $0.001 left, the org none
	x := p.Request(a1(4).headers()...)    // every team of the org
	x.RequireRejected(429)
	x.Done()
	admitted(b1) // another org

	ms := []member{a1(1), a1(2), a1(3), a1(4), a2(1), a2(2), a2(3), b1}
	got := readLevels(backend, ms)
	assert.Equal(t, map[string]int64{"org-a": 10_000_000, "org-b": 2_000_000}, got.orgs, "five and one requests of $0.002: rejected ones cost nothing")
	assert.Equal(t, map[string]int64{"org-a-t1": 6_000_000, "org-a-t2": 4_000_000, "org-b-t1": 2_000_000}, got.teams)
	assert.Equal(t, map[string]int64{"org-a-t1-k1": 3000, "org-a-t1-k2": 1500, "org-a-t1-k3": 0, "org-a-t1-k4": 0,
		"org-a-t2-k1": 1500, "org-a-t2-k2": 1500, "org-a-t2-k3": 0, "org-b-t1-k1": 1500}, got.keys)
	if c, ok := backend.(*redistest.Cluster); ok {
		requireSlotLocal(t, c, c.Calls())
	}
}

// crossSlotRedis is one redis-server that refuses, as a Redis Cluster
// does, a script call whose keys are in several hash slots (CROSSSLOT),
// and counts the calls it refused.
type crossSlotRedis struct {
	*redistest.Server
	refused int
}

func (c *crossSlotRedis) Forward(query []byte) []byte {
	if args := queryArgs(query); len(args) > 3 {
		slots := map[uint16]bool{}
		for _, k := range args[3 : 3+args[2].Integer()] {
			slots[cachekey.Slot(k.Bytes())] = true
		}
		if len(slots) > 1 {
			c.refused++
			return []byte("-CROSSSLOT Keys in request don't hash to the same slot\r\n")
		}
	}
	return c.Server.Forward(query)
}

// Answer answers a context's pending calls through Forward.
func (c *crossSlotRedis) Answer(host proxytest.HostEmulator, contextID uint32) int {
	n := 0
	for pending := host.GetRedisCalloutAttributesFromContext(contextID); len(pending) > 0; pending = host.GetRedisCalloutAttributesFromContext(contextID) {
		host.CallOnRedisCallResponse(pending[0].CalloutID, 0, c.Forward(pending[0].Query))
		n++
	}
	return n
}

// A configuration that says one Redis (redis.cluster: false) in front of a
// cluster: the first request's one call is refused before it runs anything,
// so that request goes by failure_mode (allow: on, uncounted and uncharged);
// from then on the plugin makes one call per slot, counted once.
func hierarchyLearnsCrossSlot(t *testing.T, redis *crossSlotRedis) {
	resetHierarchy(redis)
	p := plugintest.Start(t, redis, hierarchyConfig("1000", "100", 1_000_000, oneRedis))
	m := members()[0]
	x := p.Send(m.headers()...)
	require.Equal(t, []string{"admit/3 keys"}, scriptOps(p.Host, x.ID))
	x.Answer()
	assert.Equal(t, 1, redis.refused)
	require.True(t, x.Passed(), "failure_mode allow")
	x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1000, 500))...)
	got := readLevels(redis, []member{m})
	assert.Zero(t, got.orgs[m.org]+got.teams[m.team]+got.keys[m.key], "the refused request counted nowhere")

	for range 2 {
		x = p.Send(m.headers()...)
		assert.Equal(t, []string{"admit/1 keys", "admit/1 keys", "admit/1 keys"}, scriptOps(p.Host, x.ID))
		require.True(t, x.Answer().Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 1000, 500))...)
	}
	assert.Equal(t, 1, redis.refused, "refused once")
	got = readLevels(redis, []member{m})
	assert.Equal(t, []int64{4_000_000, 4_000_000, 3000}, []int64{got.orgs[m.org], got.teams[m.team], got.keys[m.key]}, "two requests, each counted once at every level")
}
