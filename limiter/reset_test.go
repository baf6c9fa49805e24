package limiter_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// A client that resets (its stream ends) before Redis has answered its
// admission: the gateway drops the answer, and what the admission took, or
// will take, is given back. Through the plugin (Go and WASM mode) on a real
// Redis and on a Redis Cluster.

// The admission of a stream that ends before its answer is cancelled from
// the plugin's tick: undone if it ran, refused if it runs later; one
// answered in time is not cancelled. Issue 14, point 8: "A client reset
// before Redis answers keeps its reservation and request count:
// HEADERS+RST with max_tokens equal to the limit burns a shared window with
// no upstream call."
func TestHardening8ResetBeforeRedisAnswers(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	config := plugintest.APIKeyConfig(plugintest.ReservationOn+`"concurrency_lease_seconds": 600,`,
		`"token_per_day": 1000, "query_per_day": 100, "max_concurrent_requests": 1`)
	body := plugintest.ChatBody(1000 - plugintest.ChatBodyPrompt) // the whole window
	requests := func() int64 {
		return plugintest.Counter(redis, plugintest.APIKeySubject, "q86400", redis.Now())
	}
	leases := func() int64 { return plugintest.Leases(redis, plugintest.APIKeySubject) }

	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("Redis runs the admission, the stream has gone when it answers", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedisWithScript(t, redis, config)
			x := p.SendBody(body, key)
			p.Host.CompleteHttpContext(x.ID) // the client resets
			x.Answer()                       // Redis runs it; the answer is dropped
			require.Equal(t, []int64{1000, 1, 1}, []int64{p.DayCounter(plugintest.APIKeySubject), requests(), leases()})
			p.SendPostponed()
			assert.Equal(t, []int64{0, 0, 0}, []int64{p.DayCounter(plugintest.APIKeySubject), requests(), leases()}, "undone")
			y := p.SendBody(body, key).Answer()
			assert.True(t, y.Passed(), "the window is whole again")
		})

		t.Run("the cancel reaches Redis before the admission", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.SendBody(body, key)
			p.Host.CompleteHttpContext(x.ID)
			p.SendPostponed() // the cancel goes first
			x.Answer()        // then the admission runs: it takes nothing
			assert.Equal(t, []int64{0, 0, 0}, []int64{p.DayCounter(plugintest.APIKeySubject), requests(), leases()})
			p.SendPostponed()
			assert.True(t, p.SendBody(body, key).Answer().Passed())
		})

		t.Run("an admission answered in time is not cancelled", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, config)
			x := p.SendBody(body, key).Answer()
			require.True(t, x.Passed())
			x.Respond("application/json", `{"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
			p.SendPostponed()
			assert.Equal(t, []int64{30, 1, 0}, []int64{p.DayCounter(plugintest.APIKeySubject), requests(), leases()})
			for _, marker := range redis.Keys(plugintest.APIKeySubject + ":a:*") {
				assert.NotEqual(t, "c", redis.Do("GET", marker).String(), "no admission marked cancelled")
			}
		})
	})
}

// A client that resets while one slot group's admission has answered and
// another's has not. On a Redis Cluster, a request whose subjects live in
// two slots makes two admission calls; the gateway drops the answer to a
// call whose stream has ended, so the group that had not answered never
// will, to the plugin. admission.cancel must give back what the answered
// group took (its reservation, request count and lease) and cancel the
// other's admission, whether Redis runs it before the cancel or after: in
// the end, nothing of the request is left in Redis but markers that expire
// within seconds.
func TestResetWithOneSlotGroupAnswered(t *testing.T) {
	cluster := redistest.StartCluster(t)
	config := `{"rule_name": "layers", "rule_match_mode": "all", ` + plugintest.ReservationOn + `"rule_items": [
		{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 100000, "query_per_minute": 100}]},
		{"limit_by_header": "x-tier", "limit_keys": [{"key": "free", "token_per_day": 50000, "max_concurrent_requests": 10}]}],
		` + plugintest.RedisSection + `}`
	consumer := "atrl:{layers|limit_by_per_consumer|x-mse-consumer|bob}"
	tier := "atrl:{layers|limit_by_header|x-tier|free}"
	require.NotEqual(t, cachekey.Slot([]byte(consumer)), cachekey.Slot([]byte(tier)), "the test needs two slots")
	require.NotEqual(t, cluster.Owner(consumer), cluster.Owner(tier), "the test needs two nodes")
	bob := [][2]string{{"x-mse-consumer", "bob"}, {"x-tier", "free"}}

	// counters: the consumer's day tokens and minute requests, the tier's
	// day tokens and leases.
	counters := func() [4]int64 {
		return [4]int64{plugintest.CounterAtClock(cluster, consumer, "t86400"), plugintest.CounterAtClock(cluster, consumer, "q60"),
			plugintest.CounterAtClock(cluster, tier, "t86400"), plugintest.Leases(cluster, tier)}
	}
	// leftovers lists the keys Redis holds that are not markers (which
	// expire within seconds: AdmissionMarkerSeconds, ChargeMarkerSeconds)
	// nor the VM counter.
	leftovers := func(t *testing.T) []string {
		var left []string
		for _, k := range cluster.Keys("atrl:*") {
			if k == scripts.VMCounterKey {
				continue
			}
			_, rest, _ := strings.Cut(k, "}")
			if strings.HasPrefix(rest, ":a:") || strings.HasPrefix(rest, ":x:") {
				ttl := cluster.Int("TTL", k)
				assert.True(t, ttl > 0 && ttl <= 63, "marker %s expires within seconds (TTL %d)", k, ttl)
				continue
			}
			left = append(left, fmt.Sprintf("%s = %v", k, cluster.Do("TYPE", k)))
		}
		return left
	}
	// answerGroup answers the admission call of the group whose subject key
	// contains which, and only that one.
	answerGroup := func(t *testing.T, p *plugintest.Plugin, x *plugintest.Exchange, which string) {
		t.Helper()
		for _, call := range p.Host.GetRedisCalloutAttributesFromContext(x.ID) {
			if bytes.Contains(call.Query, []byte(which)) {
				p.Host.CallOnRedisCallResponse(call.CalloutID, 0, cluster.Forward(call.Query))
				return
			}
		}
		t.Fatalf("no pending admission of %s", which)
	}
	// start sends the request and leaves both admission calls pending.
	start := func(t *testing.T) (*plugintest.Plugin, *plugintest.Exchange) {
		t.Helper()
		resetCluster(cluster)
		t.Cleanup(func() { cluster.SetClock(0) })
		cluster.Do("SCRIPT", "LOAD", scripts.Limiter.Source) // loaded by earlier requests, as in production
		p := plugintest.Start(t, cluster, config)
		x := p.SendBody(plugintest.ChatBody(100), bob...)
		require.Len(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), 2, "two slots: two admission calls")
		return p, x
	}
	// settle ticks the plugin until it sends nothing more, and answers
	// whatever is still pending of the request (the gateway would drop
	// those answers; the plugin must ignore them).
	settle := func(t *testing.T, p *plugintest.Plugin, x *plugintest.Exchange) {
		t.Helper()
		p.SendPostponed()
		cluster.Answer(p.Host, x.ID)
		p.SendPostponed()
		assert.Zero(t, len(p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)), "nothing left to send")
	}

	plugintest.RunTest(t, func(t *testing.T) {
		for _, first := range []string{"x-mse-consumer|bob", "x-tier|free"} {
			t.Run(first+" answered, reset, the other cancelled before it runs", func(t *testing.T) {
				p, x := start(t)
				answerGroup(t, p, x, first)
				require.NotEqual(t, [4]int64{}, counters(), "the answered group took its part")
				p.Host.CompleteHttpContext(x.ID) // the client resets
				p.SendPostponed()                // the rollback and the cancel go first
				settle(t, p, x)                  // then the other admission runs: it takes nothing
				assert.Equal(t, [4]int64{}, counters(), "day tokens, minute requests, day tokens, leases")
				assert.Empty(t, leftovers(t))
			})
		}

		t.Run("consumer answered, reset, the other runs before its cancel", func(t *testing.T) {
			p, x := start(t)
			answerGroup(t, p, x, "x-mse-consumer|bob")
			p.Host.CompleteHttpContext(x.ID)
			answerGroup(t, p, x, "x-tier|free") // Redis runs it, and admits: its answer is dropped
			require.Equal(t, int64(1), plugintest.Leases(cluster, tier), "the tier's lease, taken")
			settle(t, p, x) // the rollback, and the cancel that undoes the tier's admission
			assert.Equal(t, [4]int64{}, counters())
			assert.Empty(t, leftovers(t))
		})

		t.Run("consumer answered rejected, reset: only the other is undone", func(t *testing.T) {
			p, x := start(t)
			full := plugintest.Bucket(consumer, "q60", int64(cluster.Clock()))
			cluster.Do("SET", full, "100", "EX", "120") // the consumer's 100 requests this minute are used
			answerGroup(t, p, x, "x-mse-consumer|bob")
			p.Host.CompleteHttpContext(x.ID)
			answerGroup(t, p, x, "x-tier|free")
			settle(t, p, x)
			assert.Equal(t, [4]int64{0, 100, 0, 0}, counters(), "the rejection took nothing; the tier's admission undone")
			assert.Equal(t, []string{full + " = string"}, leftovers(t))
		})
	})
}
