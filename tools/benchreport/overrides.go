package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// The price of limit_overrides: with it, the admission script also reads
// each subject's overrides (a hash beside its counters). Canned replies
// cannot show that, so these requests go through the plugin in Go mode to
// a real redis-server on loopback: the time of a whole request includes
// its two round trips and the scripts' run in Redis, which is where
// overrides cost something.

// overridesMode is one configuration the requests are timed under.
type overridesMode struct {
	name       string
	topLevel   string // top-level configuration fields
	overridden bool   // the subject has an override in Redis
}

var overridesModes = []overridesMode{
	{name: "limit_overrides off (the default)"},
	{name: "limit_overrides: true, the subject has no override", topLevel: `"limit_overrides": true,`},
	{name: "limit_overrides: true, the subject's minute overridden", topLevel: `"limit_overrides": true,`, overridden: true},
}

// overridesLimits are the configured limits: two token windows, high
// enough that nothing is rejected while timing.
const overridesLimits = `"token_per_minute": 100000000, "token_per_day": 1000000000`

// overridesRow is one mode's timed runs.
type overridesRow struct {
	mode        overridesMode
	perRequest  []float64 // ns per request, one per round
	inRedis     []float64 // ns Redis spent running a request's scripts, one per round
	admitBytes  int       // bytes of the admission call
	redisCalls  int       // calls per request
	limitedByIt bool      // an override of 1 token rejected the next request
}

// measureOverrides times whole requests under each mode, rounds times,
// the modes' order rotating every round so that the machine's drift hits
// them alike. After each run it checks that the plugin reads overrides
// exactly when the option is on.
func measureOverrides(t tb, s reportScale, vm types.VMContext) []overridesRow {
	redis := redistest.Start(t)
	rows := make([]overridesRow, len(overridesModes))
	for round := range s.rounds {
		for k := range overridesModes {
			i := (k + round) % len(overridesModes)
			if round%2 == 1 {
				i = len(overridesModes) - 1 - i
			}
			rows[i].mode = overridesModes[i]
			ns, probe := timeOverrides(t, redis, vm, overridesModes[i], s.overrideRequests)
			rows[i].perRequest = append(rows[i].perRequest, ns)
			rows[i].inRedis = append(rows[i].inRedis, probe.inRedis)
			rows[i].admitBytes, rows[i].redisCalls, rows[i].limitedByIt = probe.admitBytes, probe.calls, probe.limitedByIt
		}
	}
	for _, row := range rows {
		if on := row.mode.topLevel != ""; row.limitedByIt != on {
			t.Errorf("%s: an override of 1 token rejected the next request: %v, want %v", row.mode.name, row.limitedByIt, on)
		}
		if row.redisCalls != 2 {
			t.Errorf("%s: %d Redis calls per request, want 2", row.mode.name, row.redisCalls)
		}
	}
	return rows
}

// overridesProbe is what one run saw besides its time.
type overridesProbe struct {
	admitBytes, calls int
	limitedByIt       bool
	inRedis           float64 // ns Redis spent running a request's scripts
}

// timeOverrides starts the plugin in a mode on an empty Redis, times n
// whole requests of one key (after a warm-up), then sets an override of 1
// token a minute and sees whether the next request is rejected.
func timeOverrides(t tb, redis *redistest.Server, vm types.VMContext, mode overridesMode, n int) (float64, overridesProbe) {
	redis.Do("FLUSHALL")
	overrides := plugintest.APIKeySubject + ":o"
	minute := scripts.OverrideName(config.UnitTokens, 60)
	if mode.overridden {
		redis.Do("HSET", overrides, minute, "200000000")
	}
	host, stop := plugintest.StartEmulator(t, vm, plugintest.APIKeyConfig(mode.topLevel, overridesLimits))
	defer stop()
	p := &plugintest.Plugin{T: t, Host: host, Redis: redis}
	key := [2]string{"x-api-key", "sk-1"}
	usage := plugintest.SSEEvents(plugintest.OpenAIStream(3, 100, 50))
	var probe overridesProbe
	request := func() bool {
		x := p.Send(key)
		if calls := host.GetRedisCalloutAttributesFromContext(x.ID); len(calls) == 1 {
			probe.admitBytes = len(calls[0].Query)
		}
		x.Answer()
		if !x.Passed() {
			x.RequireRejected(429)
			x.Done()
			return false
		}
		x.Respond("text/event-stream", usage...)
		return true
	}
	for range max(n/10, 1) { // warm-up
		if !request() {
			t.Fatalf("%s: a request was rejected while timing", mode.name)
		}
	}
	callsBefore, usecBefore, _ := redisCommandStats(redis)
	start := time.Now()
	for range n {
		request()
	}
	elapsed := time.Since(start)
	calls, usec, _ := redisCommandStats(redis)
	probe.calls = int((calls - callsBefore + int64(n)/2) / int64(n))
	probe.inRedis = 1000 * float64(usec-usecBefore) / float64(n)
	redis.Do("HSET", overrides, minute, "1")
	probe.limitedByIt = !request()
	return float64(elapsed.Nanoseconds()) / float64(n), probe
}

// writeOverrides writes what limit_overrides costs a request.
func (r benchReport) writeOverrides(b *strings.Builder) {
	b.WriteString("## The price of limit overrides\n\n")
	fmt.Fprintf(b, "With `limit_overrides: true` the admission script also reads each subject's overrides (a hash "+
		"beside its counters, which the admin API and `atrl override` set). Canned replies cannot show that, so these "+
		"requests go through the plugin in Go mode to a real `redis-server` on loopback, one key with two token "+
		"windows: the time of a whole request (its two round trips, both scripts' run in Redis, a 3-event stream) "+
		"is the median of %d runs of %s requests, the configurations alternating; *Redis running the scripts* is the time Redis itself counts for them (`INFO commandstats`), the part overrides add to. With the option off the plugin "+
		"sends the same bytes as without it, and quota_path and admin.path cost no byte either (compare the rows "+
		"of the first table).\n\n", r.scale.rounds, thousands(int64(r.scale.overrideRequests)))
	b.WriteString("| configuration | Redis calls | bytes of the admission call | time per request | added | spread | Redis running the scripts | added |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|\n")
	off, offInRedis := median(r.overrides[0].perRequest), median(r.overrides[0].inRedis)
	for _, row := range r.overrides {
		m, inRedis := median(row.perRequest), median(row.inRedis)
		fmt.Fprintf(b, "| %s | %d | %s | **%s** | %s | %s | %s | %s |\n", row.mode.name, row.redisCalls, strconv.Itoa(row.admitBytes),
			micros(m), percent(m/off-1), spread(row.perRequest), micros(inRedis), signedMicros(inRedis-offInRedis))
	}
	// The verdict rests on what overrides add and Redis measures itself,
	// the scripts' run time: the whole-request medians move by more than
	// that from run to run on a shared machine (their spread).
	worst := 0.0
	for _, row := range r.overrides[1:] {
		worst = max(worst, median(row.inRedis)-offInRedis)
	}
	share := worst / off
	verdict := "within"
	if share > overridesBudget {
		verdict = "**more than**"
	}
	fmt.Fprintf(b, "\nOverrides add at most %s of Redis's own time to a request (its scripts' run, as Redis counts it): "+
		"%.1f %% of a request's time with them off, %s the %.0f %% they may cost. The plugin sends one byte more; "+
		"the whole-request times move by more than that from run to run (see their spread).\n\n",
		micros(worst), 100*share, verdict, 100*overridesBudget)
}

// overridesBudget is the most limit_overrides may add to a request's time.
const overridesBudget = 0.10

// percent formats a fraction as a signed percentage.
func percent(x float64) string {
	if x < 0 {
		return fmt.Sprintf("−%.1f %%", -100*x)
	}
	return fmt.Sprintf("+%.1f %%", 100*x)
}
