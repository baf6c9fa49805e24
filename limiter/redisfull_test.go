package limiter_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// A Redis that is full. With maxmemory and maxmemory-policy noeviction,
// Redis refuses every command that could grow its memory ("OOM command not
// allowed when used memory > 'maxmemory'"), and a script fails at its
// first such write, unless it has already written something (Redis cannot
// stop a script halfway). With an evicting policy it makes room instead,
// by deleting keys: which ones decides whose limits are forgotten. These
// tests fill the test's redis-server and show what the plugin does, and
// measure what each subject costs Redis (docs/redis-memory.md).

// perAPIKeyConfig limits each x-api-key value on its own (limit_by_per_header),
// as an operator limits API keys or client IPs: a flood of new values is a
// flood of new subjects.
func perAPIKeyConfig(extra, limits string) string {
	return `{"rule_name": "chat", ` + extra + `"rule_items": [{"limit_by_per_header": "x-api-key",
		"limit_keys": [{"key": "*", ` + limits + `}]}], ` + plugintest.RedisSection + `}`
}

// perAPIKeySubject is perAPIKeyConfig's subject of an API key.
func perAPIKeySubject(key string) string {
	return "atrl:{chat|limit_by_per_header|x-api-key|" + key + "}"
}

// redisInfo reads a number from a section of Redis's INFO.
func redisInfo(t *testing.T, redis *redistest.Server, section, field string) int64 {
	t.Helper()
	for _, line := range strings.Split(redis.Do("INFO", section).String(), "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, line)
			return n
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return 0
}

// redisUsedMemory is Redis's used_memory, in bytes.
func redisUsedMemory(t *testing.T, redis *redistest.Server) int64 {
	t.Helper()
	return redisInfo(t, redis, "memory", "used_memory")
}

// redisAllocated is what Redis has allocated (MEMORY STATS total.allocated,
// its used_memory) less its clients' buffers, which come and go with the
// test's own calls.
func redisAllocated(t *testing.T, redis *redistest.Server) int64 {
	t.Helper()
	stats := redis.Do("MEMORY", "STATS").Array()
	fields := map[string]int64{}
	for i := 0; i+1 < len(stats); i += 2 {
		if stats[i+1].Type() == resp.Integer {
			fields[stats[i].String()] = int64(stats[i+1].Integer())
		}
	}
	require.Positive(t, fields["total.allocated"], "MEMORY STATS: %v", stats)
	return fields["total.allocated"] - fields["clients.normal"]
}

// setEvictionPolicy sets Redis's eviction policy, before the test writes any key
// (a key made under one policy has, under another, a meaningless LRU or LFU
// field); Redis is unlimited again when the test ends.
func setEvictionPolicy(t *testing.T, redis *redistest.Server, policy string) {
	t.Helper()
	t.Cleanup(func() {
		redis.Do("CONFIG", "SET", "maxmemory", "0")
		redis.Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
		redis.Do("FLUSHALL")
	})
	require.Equal(t, "OK", redis.Do("CONFIG", "SET", "maxmemory-policy", policy).String())
}

// setRedisRoom limits Redis to what it uses now plus headroom bytes.
func setRedisRoom(t *testing.T, redis *redistest.Server, headroom int64) {
	t.Helper()
	limit := redisUsedMemory(t, redis) + headroom
	require.Equal(t, "OK", redis.Do("CONFIG", "SET", "maxmemory", strconv.FormatInt(limit, 10)).String())
}

// fillUntilFull writes keys without expiry (another application's data, or
// anything that is not the limiter's) into a Redis limited by noeviction
// until it refuses a write: from then on, it refuses every write the
// limiter's scripts make first.
func fillUntilFull(t *testing.T, redis *redistest.Server) {
	t.Helper()
	setEvictionPolicy(t, redis, "noeviction")
	setRedisRoom(t, redis, 1<<20)
	const fill = `for i = 1, 500 do redis.call('SET', 'fill:' .. ARGV[1] .. ':' .. i, string.rep('x', 1000)) end`
	for batch := 0; batch < 100; batch++ {
		v := redis.Do("EVAL", fill, "0", strconv.Itoa(batch))
		if v.Type() == resp.Error {
			require.True(t, strings.HasPrefix(v.String(), "OOM "), "filling: %s", v.String())
			// Full by a margin: what Redis's own buffers free meanwhile (a
			// client's output buffer, say) must not open it again.
			setRedisRoom(t, redis, -256<<10)
			return
		}
	}
	t.Fatalf("Redis never refused a write (used_memory %d)", redisUsedMemory(t, redis))
}

// clockTomorrow sets the scripts' clock to 01:00:00.25 tomorrow, so that a
// subtest's windows, a minute to a day, stay in one bucket whatever the
// time of the run; it is Redis's own again when the test ends. Expiries
// still run on Redis's clock: a minute's bucket lives a minute.
func clockTomorrow(t *testing.T, redis *redistest.Server) {
	redis.SetClock(float64((redis.Now()/86400+1)*86400+3600) + 0.25)
	t.Cleanup(func() { redis.SetClock(0) })
}

// countedAnyModel reads a counter of the test route, whatever the model.
func countedAnyModel(p *plugintest.Plugin, metric string) uint64 {
	return counted(p, "none", metric) + counted(p, "gpt-4o", metric)
}

// usageStream is a response stream reporting tokens of usage.
func usageStream(tokens int) []string {
	return plugintest.SSEEvents(plugintest.OpenAIStream(1, tokens, 0))
}

func TestRedisFull(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("noeviction", func(t *testing.T) { redisFullNoEviction(t, redis) })
		t.Run("volatile-lru: a flood of new subjects does not free an active one", func(t *testing.T) {
			f := floodRedis(t, redis, "volatile-lru")
			assert.Zero(t, f.activeAdmitted, "the active subject, over its limit, was let through during the flood")
			assert.Equal(t, int64(1000), f.activeUsed, "its minute still holds what it used")
			assert.True(t, f.overrideKept, "an override (no expiry) is never evicted")
			assert.Greater(t, f.evicted, int64(f.subjects), "most of the flood's keys were evicted")
		})
	})
}

// TestRedisFullEvictionPolicies floods the other evicting policies the
// same way, in Go mode only (the scripts and keys are the same in both):
// volatile-ttl evicts what expires first, which is every minute's buckets
// (the active subject's too, in most runs: its window ends with the
// flood's), before the charge markers; allkeys-lru keeps the active subject
// but evicts an idle subject's limit override, which has no expiry.
func TestRedisFullEvictionPolicies(t *testing.T) {
	redis := redistest.Start(t)
	test.RunGoTest(t, func(t *testing.T) {
		t.Run("volatile-ttl", func(t *testing.T) {
			f := floodRedis(t, redis, "volatile-ttl")
			// The minute's buckets go first: nine in ten of them, the active
			// subject's among them in most runs (it then passes again, over
			// its limit; which ones Redis's sampled eviction spares is chance,
			// about one run in ten keeps it), and the charge markers, which
			// expire later, stay.
			assert.Less(t, f.buckets, f.subjects/5, "the flood's minute buckets were evicted")
			assert.Greater(t, f.markers, 4*f.buckets, "before the charge markers")
			assert.True(t, f.overrideKept)
		})
		t.Run("allkeys-lru", func(t *testing.T) {
			// Redis evicts the least recently used of a sample of keys (5
			// by default): the idle override, the least recently used key,
			// went in most runs, not in all (twice kept under a loaded
			// machine). 64 samples, the most Redis takes, make its LRU all
			// but exact: what this checks is the policy's order, not its
			// sampling's luck.
			require.Equal(t, "OK", redis.Do("CONFIG", "SET", "maxmemory-samples", "64").String())
			t.Cleanup(func() { redis.Do("CONFIG", "SET", "maxmemory-samples", "5") })
			f := floodRedis(t, redis, "allkeys-lru")
			assert.Zero(t, f.activeAdmitted)
			assert.False(t, f.overrideKept, "the idle subject's override was evicted: its configured limit applies again")
		})
	})
}

// flooded is what a flood of new subjects did to a Redis that evicts.
type flooded struct {
	subjects       int   // one-request subjects in the flood
	checks         int   // requests of the active subject during it
	activeAdmitted int   // of those, admitted (it was over its limit throughout)
	activeUsed     int64 // its minute bucket afterwards (1,000: what it used)
	overrideKept   bool  // an idle subject's limit override is still there
	evicted        int64 // keys Redis evicted
	buckets        int   // window buckets left
	markers        int   // charge markers left
}

// The flood: floodSubjects subjects that make one request each (a scan, or
// an attack with random API keys), floodRate a second, into a Redis with
// floodRoom bytes of room: about 1.6 s of the flood's keys (two a
// subject, ~370 bytes), so that most of them are evicted. Redis's LRU
// clock counts whole seconds: a flood that all fits in the last second is
// one LRU cannot tell from an active subject; a Redis sized for its
// subjects holds many seconds of it.
const (
	floodSubjects = 20000
	floodRate     = 5000
	floodRoom     = 3 << 20
)

// floodRedis floods a Redis under an eviction policy while an active subject,
// over its limit, asks 10 times a second, and an idle subject holds a
// limit override. The flood's calls are those the plugin sends for its
// first subject, captured and replayed straight to Redis for the others
// (the emulator would take a minute for 20,000 requests): the same scripts,
// keys and expiries.
func floodRedis(t *testing.T, redis *redistest.Server, policy string) flooded {
	redis.Do("FLUSHALL")
	redis.Do("CONFIG", "RESETSTAT")
	setEvictionPolicy(t, redis, policy)
	// The scripts' clock runs with Redis's from the start of a minute, so
	// that every bucket of the flood is in one window and expires as it
	// would in production: at the window's end (+1 s), whenever it was made.
	base, began := float64((redis.Now()/60+2)*60)+0.25, time.Now()
	clock := func() { redis.SetClock(base + time.Since(began).Seconds()) }
	clock()
	defer redis.SetClock(0)
	p := plugintest.Start(t, redis, perAPIKeyConfig(`"limit_overrides": true,`, `"token_per_minute": 1000`))
	active := [2]string{"x-api-key", "sk-active"}
	x := p.Request(active)
	require.True(t, x.Passed())
	x.Respond("text/event-stream", usageStream(1000)...)
	require.Equal(t, int64(1000), plugintest.CounterAtClock(redis, perAPIKeySubject("sk-active"), "t60"))
	override := perAPIKeySubject("sk-override") + ":o"
	redis.Do("HSET", override, "t60", "5000")

	// One request of the flood's first subject: its admission and its
	// charge as the plugin sends them.
	first := [2]string{"x-api-key", "flood-00000"}
	x = p.Send(first)
	calls := p.Host.GetRedisCalloutAttributesFromContext(x.ID)
	require.Len(t, calls, 1)
	admit := bytes.Clone(calls[0].Query)
	x.Answer()
	require.True(t, x.Passed())
	x.ResponseHeaders("text/event-stream")
	p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(1, 10, 0)), true)
	calls = p.Host.GetRedisCalloutAttributesFromContext(x.ID)
	require.Len(t, calls, 1)
	charge := bytes.Clone(calls[0].Query)
	x.Done()

	setRedisRoom(t, redis, floodRoom)
	f := flooded{subjects: floodSubjects}
	start := time.Now()
	for i := 1; i < floodSubjects; i++ {
		value := []byte(fmt.Sprintf("flood-%05d", i))
		for _, q := range [][]byte{admit, charge} {
			require.NoError(t, redisReplyError(redis.Forward(bytes.ReplaceAll(q, []byte(first[1]), value))), "subject %d", i)
		}
		if i%(floodRate/10) != 0 {
			continue
		}
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / floodRate)))
		clock()
		f.checks++
		y := p.Request(active)
		if y.Passed() {
			f.activeAdmitted++
			y.Respond("text/event-stream", usageStream(0)...)
		} else {
			y.RequireRejected(429)
			y.Done()
		}
	}
	f.activeUsed = plugintest.CounterAtClock(redis, perAPIKeySubject("sk-active"), "t60")
	f.overrideKept = redis.Int("EXISTS", override) == 1
	f.evicted = redisInfo(t, redis, "stats", "evicted_keys")
	for _, k := range redis.Keys("atrl:*") {
		switch limiterKeyClass(k) {
		case "window bucket":
			f.buckets++
		case "charge marker":
			f.markers++
		}
	}
	t.Logf("%s: the active subject admitted %d times of %d over its limit, its minute %d; the override kept: %v; "+
		"%d keys evicted, %d buckets and %d charge markers left",
		policy, f.activeAdmitted, f.checks, f.activeUsed, f.overrideKept, f.evicted, f.buckets, f.markers)
	assert.LessOrEqual(t, redisUsedMemory(t, redis), redisInfo(t, redis, "memory", "maxmemory")+64<<10, "Redis kept to its limit")
	return f
}

// limiterKeyClass names what a key of the limiter holds (see README, Redis keys).
func limiterKeyClass(key string) string {
	_, rest, _ := strings.Cut(key, "}")
	switch {
	case strings.HasPrefix(rest, ":x:"):
		return "charge marker"
	case strings.HasPrefix(rest, ":a:"):
		return "admission marker"
	case strings.HasSuffix(rest, ":c"):
		return "lease set"
	case strings.HasSuffix(rest, ":o"):
		return "overrides"
	}
	return "window bucket"
}

// redisReplyError is the error of a raw Redis reply: its error reply, or nil.
func redisReplyError(raw []byte) error {
	v, _, err := resp.NewReader(bytes.NewReader(raw)).ReadValue()
	if err == nil && v.Type() == resp.Error {
		err = fmt.Errorf("%s", v.String())
	}
	return err
}

// redisFullNoEviction: what each failure_mode does once a Redis limited by
// maxmemory-policy noeviction is full.
func redisFullNoEviction(t *testing.T, redis *redistest.Server) {
	key := plugintest.APIKey
	modes := map[string]string{
		"allow": `"failure_mode": "allow",`,
		"deny":  `"failure_mode": "deny",`,
		"local": `"failure_mode": "local", "local_share": 1,`,
	}
	// start loads the scripts and charges a first request (150 tokens) while
	// Redis has room, as in production, then fills Redis.
	start := func(t *testing.T, config string) *plugintest.Plugin {
		t.Helper()
		redis.Do("FLUSHALL")
		clockTomorrow(t, redis)
		p := plugintest.Start(t, redis, config)
		x := p.SendBody(plugintest.ChatBody(100), key).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", usageStream(150)...)
		require.Equal(t, int64(150), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t60"))
		fillUntilFull(t, redis)
		return p
	}

	// Every admission is refused with OOM before it reads or takes
	// anything (admit.lua's first call is a write Redis refuses when full):
	// a Redis error, to which failure_mode applies as to any. Before that
	// first write, an admission that only checked token windows was
	// answered, and its refused charge left the subject unlimited under
	// every failure_mode.
	writing := []struct{ name, extra, limits string }{
		{"reserving (token_reservation)", plugintest.ReservationOn, `"token_per_minute": 1000`},
		{"counting (query_per_minute)", "", `"token_per_minute": 1000, "query_per_minute": 100`},
		{"checking only (token windows)", "", `"token_per_minute": 1000`},
	}
	for _, w := range writing {
		name, extra, limits := w.name, w.extra, w.limits
		t.Run(name+"/allow: passes, uncharged", func(t *testing.T) {
			p := start(t, plugintest.APIKeyConfig(extra+modes["allow"], limits))
			for i := 0; i < 10; i++ {
				x := p.SendBody(plugintest.ChatBody(100), key).Answer()
				require.True(t, x.Passed(), "request %d", i)
				x.Respond("text/event-stream", usageStream(150)...)
				p.SendPostponed()
			}
			assert.Equal(t, int64(150), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t60"), "1,500 tokens over the limit, none counted")
			assert.Equal(t, uint64(10), countedAnyModel(p, admitFailure))
			assert.Zero(t, countedAnyModel(p, chargeFailure), "not admitted: nothing to charge")
			assert.Contains(t, strings.Join(p.Host.GetWarnLogs(), "\n"), "OOM command not allowed")
		})
		t.Run(name+"/deny: 503", func(t *testing.T) {
			p := start(t, plugintest.APIKeyConfig(extra+modes["deny"], limits))
			x := p.SendBody(plugintest.ChatBody(100), key).Answer()
			local := x.RequireRejected(503)
			assert.Contains(t, string(local.Data), "failure_mode is deny")
			x.Done()
			assert.Equal(t, int64(150), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t60"))
		})
		t.Run(name+"/local: the worker's own windows decide", func(t *testing.T) {
			p := start(t, plugintest.APIKeyConfig(extra+modes["local"], limits))
			admitted := 0
			for ; ; admitted++ {
				require.Less(t, admitted, 20, "the local window never closed")
				x := p.SendBody(plugintest.ChatBody(100), key).Answer()
				if !x.Passed() {
					x.RequireRejected(429)
					x.Done()
					break
				}
				x.Respond("text/event-stream", usageStream(150)...)
				p.SendPostponed()
			}
			// The local window starts from zero at the outage (README,
			// Failure behaviour): up to the limit, and at most one request's
			// usage more when it only checks.
			assert.LessOrEqual(t, admitted*150, 1000+150)
			assert.GreaterOrEqual(t, admitted*150, 1000-2*150)
			assert.Equal(t, uint64(admitted+1), countedAnyModel(p, "token_ratelimit_local_decision_count"))
			assert.Equal(t, int64(150), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t60"), "the catch-up is refused too, and kept for later")
		})
	}

	// A subject with a concurrency limit: its admission is refused before
	// it takes a lease, and a lease taken before Redis filled is released
	// all the same (charge.lua releases leases first, which Redis allows
	// when full): the subject is not held at its limit after its requests
	// ended.
	t.Run("concurrency: a lease taken before Redis filled is released", func(t *testing.T) {
		redis.Do("FLUSHALL")
		clockTomorrow(t, redis)
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig(modes["allow"], `"token_per_minute": 100000, "max_concurrent_requests": 1`))
		x := p.SendBody(plugintest.ChatBody(100), key).Answer()
		require.True(t, x.Passed())
		require.Equal(t, int64(1), plugintest.Leases(redis, plugintest.APIKeySubject), "in progress")
		fillUntilFull(t, redis)
		x.Respond("text/event-stream", usageStream(150)...)
		p.SendPostponed()
		assert.Zero(t, plugintest.Leases(redis, plugintest.APIKeySubject), "the ended request's lease is given back")
		y := p.SendBody(plugintest.ChatBody(100), key).Answer()
		require.True(t, y.Passed(), "failure_mode allow: passes, taking no lease")
		y.Respond("text/event-stream", usageStream(150)...)
		assert.Zero(t, plugintest.Leases(redis, plugintest.APIKeySubject))
	})
}

// TestRedisMemoryPerSubject measures what the limiter's keys cost Redis,
// for sizing maxmemory (docs/redis-memory.md): per kind of limit, 1,000
// requests of subjects with 20-byte API keys through the plugin, ended (or
// in progress, for a concurrency limit); what Redis allocated meanwhile is
// shared among the keys they left by MEMORY USAGE, the rest being each
// key's entry among the expiries. It logs the table, and fails when a kind
// costs more than its bound (a key layout that bloats) or when the limiter
// leaves a key without an expiry: the recommended volatile-lru evicts only
// keys that have one. Go mode only: the scripts, and so the keys, are
// those of WASM mode.
func TestRedisMemoryPerSubject(t *testing.T) {
	redis := redistest.Start(t)
	type kind struct {
		name, extra, limits string
		inProgress          int    // requests left in progress per subject (0: each ends)
		windows             int    // windows the subject is active in (sliding: 2, its previous bucket read too)
		value               string // the API key's format
		buckets, leases     int    // keys per subject it must leave
		maxSubject          int64  // bytes per subject at most
	}
	key20 := "key-%016d"
	kinds := []kind{
		{name: "token_per_minute", limits: `"token_per_minute": 100000000`, buckets: 1, maxSubject: 210},
		{name: "token_per_minute, key of 64 bytes", limits: `"token_per_minute": 100000000`, value: "key-%060d", buckets: 1, maxSubject: 260},
		{name: "token_per_minute + token_per_day", limits: `"token_per_minute": 100000000, "token_per_day": 100000000`, buckets: 2, maxSubject: 400},
		{name: "query_per_minute", limits: `"query_per_minute": 1000`, buckets: 1, maxSubject: 210},
		{name: "token_reservation, token_per_minute", extra: plugintest.ReservationOn, limits: `"token_per_minute": 100000000`, buckets: 1, maxSubject: 210},
		{name: "sliding token_per_minute, two windows", extra: `"window_type": "sliding", `, limits: `"token_per_minute": 100000000`, windows: 2, buckets: 2, maxSubject: 400},
		{name: "per_model: token_per_day + the model's token_per_minute", limits: `"token_per_day": 100000000, "per_model": [{"model": "*", "token_per_minute": 100000000}]`, buckets: 2, maxSubject: 420},
		{name: "max_concurrent_requests, 1 in progress", limits: `"max_concurrent_requests": 100`, inProgress: 1, leases: 1, maxSubject: 270},
		{name: "max_concurrent_requests, 10 in progress", limits: `"max_concurrent_requests": 100`, inProgress: 10, leases: 1, maxSubject: 680},
	}
	test.RunGoTest(t, func(t *testing.T) {
		var table []string
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				const n = 1000
				subjects := n / max(k.inProgress, 1)
				if k.value == "" {
					k.value = key20
				}
				setEvictionPolicy(t, redis, "volatile-lru") // as recommended: the integers it holds are not shared
				require.Equal(t, "OK", redis.Do("CONFIG", "SET", "maxmemory", "1gb").String())
				clockTomorrow(t, redis)
				p := plugintest.Start(t, redis, perAPIKeyConfig(k.extra, k.limits))
				warm := p.SendBody(plugintest.ChatBody(100), [2]string{"x-api-key", "warm-up"}).Answer()
				warm.Respond("text/event-stream", usageStream(150)...)
				redis.Do("FLUSHALL")
				// Redis's hash tables (of keys, and of expiries) double as they
				// fill: sized for 16,384 keys beforehand, they stay so through
				// the measure (at most 4,000 keys), which counts the keys alone.
				redis.Do("EVAL", `for i = 1, 10000 do redis.call('SET', 'pad:' .. i, '1', 'EX', 3600) end`, "0")
				time.Sleep(300 * time.Millisecond) // Redis's cron finishes the tables' rehashing
				before := redisAllocated(t, redis)
				var open []*plugintest.Exchange
				for w := 0; w < max(k.windows, 1); w++ {
					if w > 0 {
						redis.SetClock(redis.Clock() + 60) // the next minute
					}
					for i := 0; i < subjects; i++ {
						apiKey := [2]string{"x-api-key", fmt.Sprintf(k.value, i)}
						for j := 0; j < max(k.inProgress, 1); j++ {
							x := p.SendBody(plugintest.ChatBody(100), apiKey).Answer()
							require.True(t, x.Passed())
							if k.inProgress > 0 {
								open = append(open, x)
								continue
							}
							x.Respond("text/event-stream", usageStream(150)...)
						}
					}
				}
				grown := redisAllocated(t, redis) - before

				// Each key costs what MEMORY USAGE says (its name, value and
				// entry) and its entry among the expiries, which is the rest.
				count := map[string]int{}
				usage := map[string]int64{}
				ttls := map[string][2]int64{}
				keys, used := 0, int64(0)
				for _, key := range redis.Keys("atrl:*") {
					c := limiterKeyClass(key)
					n := redis.Int("MEMORY", "USAGE", key, "SAMPLES", "0")
					count[c]++
					usage[c] += n
					keys, used = keys+1, used+n
					ttl := redis.Int("TTL", key)
					require.Positive(t, ttl, "%s has no expiry: volatile-lru could never evict it", key)
					r, seen := ttls[c]
					if !seen {
						r = [2]int64{ttl, ttl}
					}
					ttls[c] = [2]int64{min(r[0], ttl), max(r[1], ttl)}
				}
				assert.Equal(t, k.buckets*subjects, count["window bucket"], "window buckets")
				assert.Equal(t, k.leases*subjects, count["lease set"], "lease sets")
				overhead := (grown - used) / int64(keys)
				assert.True(t, overhead >= 8 && overhead <= 64, "bytes a key beyond MEMORY USAGE (its expiry's entry): %d", overhead)
				cost := func(classes ...string) int64 {
					var total int64
					for _, c := range classes {
						total += usage[c] + overhead*int64(count[c])
					}
					return total
				}
				perSubject := cost("window bucket", "lease set") / int64(subjects)
				assert.LessOrEqual(t, perSubject, k.maxSubject, "bytes a subject")
				for _, c := range []string{"charge marker", "admission marker"} {
					if count[c] > 0 {
						assert.LessOrEqual(t, cost(c)/int64(count[c]), int64(260), "bytes a %s", c)
					}
				}

				var detail []string
				for _, c := range []string{"window bucket", "lease set", "charge marker", "admission marker"} {
					if count[c] > 0 {
						detail = append(detail, fmt.Sprintf("%s: %.0f a subject, %d bytes each, TTL %d-%d s",
							c, float64(count[c])/float64(subjects), cost(c)/int64(count[c]), ttls[c][0], ttls[c][1]))
					}
				}
				table = append(table, fmt.Sprintf("%-56s %4d bytes a subject; %s",
					k.name, perSubject, strings.Join(detail, "; ")))
				for _, x := range open {
					x.Respond("text/event-stream", usageStream(150)...)
				}
			})
		}
		t.Logf("Redis %s, bytes a key (hash table slots aside: 16 to 32 bytes a key more):\n%s", redisVersion(t, redis), strings.Join(table, "\n"))
	})
}

// redisVersion is the test's redis-server version.
func redisVersion(t *testing.T, redis *redistest.Server) string {
	for _, line := range strings.Split(redis.Do("INFO", "server").String(), "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
