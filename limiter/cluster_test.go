package limiter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// The plugin (Go and WASM mode) on a real Redis Cluster of three masters.
// The fixture fails a test as soon as the plugin sends a call whose keys are
// in more than one hash slot, and Redis itself refuses a script that touches
// a key outside the slot of its declared keys; so every test here also shows
// that the calls it makes work on a cluster.

// resetCluster empties every node and sets the scripts' clock to 01:00:00.25
// tomorrow, so every window of a subtest, a second to a day, stays in one
// bucket whatever the time of the run.
func resetCluster(c *redistest.Cluster) {
	c.Do("FLUSHALL")
	c.SetClock(float64((c.Now()/86400+1)*86400+3600) + 0.25)
}

// clusterCounter reads a counter of a subject in the bucket of the test
// clock: window "t60" (tokens a minute), "q1" (requests a second)..., or "c"
// for the number of concurrency leases held.
func clusterCounter(c *redistest.Cluster, subject, window string) int64 {
	if window == "c" {
		return plugintest.Leases(c, subject)
	}
	return plugintest.CounterAtClock(c, subject, window)
}

// requireSlotLocal asserts that calls were made, that each kept its keys in
// one slot, was answered by the node that serves that slot, and was not
// refused (a NOSCRIPT is retried with the source; any other error is not).
func requireSlotLocal(t *testing.T, c *redistest.Cluster, calls []redistest.Call) {
	t.Helper()
	require.NotEmpty(t, calls, "the plugin made no Redis call")
	for _, call := range calls {
		require.NotEmpty(t, call.Keys, "a %s without keys", call.Command)
		for _, k := range call.Keys {
			assert.Equal(t, cachekey.Slot([]byte(call.Keys[0])), cachekey.Slot([]byte(k)), "keys %q", call.Keys)
		}
		assert.Equal(t, c.Owner(call.Keys[0]), call.Node, "keys %q", call.Keys)
		if call.Reply.Type() == resp.Error {
			assert.True(t, strings.HasPrefix(call.Reply.String(), "NOSCRIPT"), "%s %s refused: %s", call.Command, call.Op(), call.Reply.String())
		}
	}
}

// nodesOf returns the distinct nodes that answered calls.
func nodesOf(calls []redistest.Call) map[string]bool {
	nodes := map[string]bool{}
	for _, call := range calls {
		nodes[call.Node] = true
	}
	return nodes
}

// TestCluster starts one cluster and compiles the WASM module once (both take
// seconds) for every cluster test.
func TestCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("every configuration keeps its keys in one slot", func(t *testing.T) {
			clusterEveryConfigurationKeepsItsKeysInOneSlot(t, cluster)
		})
		t.Run("layered rules fan out and roll back", func(t *testing.T) { clusterLayeredRulesFanOutAndRollBack(t, cluster) })
		t.Run("redirections are followed", func(t *testing.T) { clusterFollowsRedirections(t, cluster) })
		t.Run("slots agree on the fallback served", func(t *testing.T) { clusterFallbackSlotsAgree(t, cluster) })
	})
}

// One request through every kind of configuration: its calls keep their keys
// in one slot and reach the node serving it, the response's 100 + 50 tokens
// land in the subject's counters there, and the next request is decided by
// them.
func clusterEveryConfigurationKeepsItsKeysInOneSlot(t *testing.T, cluster *redistest.Cluster) {
	item := func(rule, item string, extra ...string) string {
		return `{"rule_name": "` + rule + `", ` + strings.Join(extra, "") + `"rule_items": [` + item + `], ` + plugintest.RedisSection + `}`
	}
	perHeader := func(limits string) string {
		return `{"limit_by_per_header": "x-app-id", "limit_keys": [{"key": "*", ` + limits + `}]}`
	}
	app := "atrl:{kinds|limit_by_per_header|x-app-id|app-1}"
	type kind struct {
		name    string
		config  string
		path    string           // "": /v1/chat/completions
		headers [][2]string      // the request's
		peer    string           // the connection's address
		body    string           // "": none
		want    map[string]int64 // "<subject> <window>" (see clusterCounter): its value after the stream
		next    string           // what the next request gets: "rejected", "admitted" or "queued" (then admitted)
		nodes   int              // how many nodes the admission reaches (0: not checked)
		calls   int              // script calls of the first request, admission and charge, NOSCRIPT retries aside (0: not checked)
		lease   string           // a subject allowed 1 request in progress: a second is rejected while the first streams
	}
	cases := []kind{{
		name:    "token windows",
		config:  plugintest.APIKeyConfig("", `"token_per_second": 1000, "token_per_minute": 150, "token_per_hour": 1000, "token_per_day": 10000`),
		headers: [][2]string{plugintest.APIKey},
		want:    map[string]int64{plugintest.APIKeySubject + " t1": 150, plugintest.APIKeySubject + " t60": 150, plugintest.APIKeySubject + " t3600": 150, plugintest.APIKeySubject + " t86400": 150},
		next:    "rejected",
	}, {
		name:    "request windows",
		config:  item("kinds", perHeader(`"query_per_second": 10, "query_per_minute": 1, "query_per_day": 100`)),
		headers: [][2]string{{"x-app-id", "app-1"}},
		want:    map[string]int64{app + " q1": 1, app + " q60": 1, app + " q86400": 1},
		next:    "rejected",
	}, {
		name:    "max_concurrent_requests",
		config:  item("kinds", perHeader(`"max_concurrent_requests": 1, "token_per_day": 10000`)),
		headers: [][2]string{{"x-app-id", "app-1"}},
		want:    map[string]int64{app + " t86400": 150, app + " c": 0},
		next:    "admitted",
		lease:   app,
	}, {
		name:    "sliding windows",
		config:  item("kinds", perHeader(`"token_per_minute": 150, "query_per_hour": 10`), `"window_type": "sliding", `),
		headers: [][2]string{{"x-app-id", "app-1"}},
		want:    map[string]int64{app + " t60": 150, app + " q3600": 1},
		next:    "rejected",
	}, {
		name:    "token_reservation: 101 reserved, reconciled to 150; 150 + 101 > 200",
		config:  item("kinds", perHeader(`"token_per_minute": 200`), plugintest.ReservationOn),
		headers: [][2]string{{"x-app-id", "app-1"}},
		body:    plugintest.ChatBody(100),
		want:    map[string]int64{app + " t60": 150},
		next:    "rejected",
	}, {
		name: "weighted cost with per-model weights: 100 + 50 × 2",
		config: item("kinds", perHeader(`"token_per_minute": 200`),
			`"token_count_strategy": "weighted", "token_weights": {"output": 4, "models": {"gpt-4o": {"output": 2}}}, `),
		headers: [][2]string{{"x-app-id", "app-1"}},
		body:    plugintest.ChatBody(100),
		want:    map[string]int64{app + " t60": 200},
		next:    "rejected",
	}, {
		name:    "over_limit_action queue",
		config:  item("kinds", perHeader(`"query_per_second": 1`), `"over_limit_action": "queue", "max_queue_wait_ms": 2000, `),
		headers: [][2]string{{"x-app-id", "app-1"}},
		want:    map[string]int64{app + " q1": 1},
		next:    "queued",
	}, {
		name: "rule_match_mode all: three subjects on three nodes (a rejection by one is rolled back on the others)",
		config: item("layers", `{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_minute": 150}]},
			{"limit_by_per_ip": "from-remote-addr", "limit_keys": [{"key": "0.0.0.0/0", "query_per_minute": 5}]},
			{"limit_by_header": "x-tier", "limit_keys": [{"key": "free", "token_per_day": 1000, "max_concurrent_requests": 1}]}`,
			`"rule_match_mode": "all", `),
		headers: [][2]string{{"x-mse-consumer", "bob"}, {"x-tier", "free"}},
		peer:    "192.0.2.1:40000",
		want: map[string]int64{
			"atrl:{layers|limit_by_per_consumer|x-mse-consumer|bob} t60": 150,
			"atrl:{layers|limit_by_per_ip||192.0.2.1} q60":               1,
			"atrl:{layers|limit_by_header|x-tier|free} t86400":           150,
			"atrl:{layers|limit_by_header|x-tier|free} c":                0,
		},
		next:  "rejected",
		nodes: 3,
		lease: "atrl:{layers|limit_by_header|x-tier|free}",
	}, {
		name:   "global_threshold",
		config: `{"rule_name": "all", "global_threshold": {"token_per_minute": 150}, ` + plugintest.RedisSection + `}`,
		want:   map[string]int64{"atrl:{all|global_threshold||} t60": 150},
		next:   "rejected",
	}, {
		name:    "per IP, from X-Forwarded-For",
		config:  item("ip", `{"limit_by_per_ip": "from-header-x-forwarded-for", "limit_keys": [{"key": "0.0.0.0/0", "token_per_minute": 150}]}`),
		headers: [][2]string{{"x-forwarded-for", "203.0.113.7"}},
		want:    map[string]int64{"atrl:{ip|limit_by_per_ip|x-forwarded-for|203.0.113.7} t60": 150},
		next:    "rejected",
	}, {
		name:   "per IP, from the connection (v6)",
		config: item("ip", `{"limit_by_per_ip": "from-remote-addr", "limit_keys": [{"key": "::/0", "token_per_minute": 150}]}`),
		peer:   "[2001:db8::5]:443",
		want:   map[string]int64{"atrl:{ip|limit_by_per_ip||2001:db8::/64} t60": 150},
		next:   "rejected",
	}, {
		name:    "per header",
		config:  item("kinds", perHeader(`"token_per_minute": 150`)),
		headers: [][2]string{{"x-app-id", "app-1"}},
		want:    map[string]int64{app + " t60": 150},
		next:    "rejected",
	}, {
		name:   "by URL parameter, exact key",
		config: item("kinds", `{"limit_by_param": "apikey", "limit_keys": [{"key": "k-1", "token_per_minute": 150}]}`),
		path:   "/v1/chat/completions?apikey=k-1",
		want:   map[string]int64{"atrl:{kinds|limit_by_param|apikey|k-1} t60": 150},
		next:   "rejected",
	}, {
		name:   "per URL parameter",
		config: item("kinds", `{"limit_by_per_param": "apikey", "limit_keys": [{"key": "*", "token_per_minute": 150}]}`),
		path:   "/v1/chat/completions?apikey=k-2",
		want:   map[string]int64{"atrl:{kinds|limit_by_per_param|apikey|k-2} t60": 150},
		next:   "rejected",
	}, {
		name:    "by cookie and per cookie, layered",
		config:  item("kinds", `{"limit_by_cookie": "plan", "limit_keys": [{"key": "pro", "token_per_minute": 150}]}, {"limit_by_per_cookie": "session", "limit_keys": [{"key": "*", "token_per_hour": 1000}]}`, `"rule_match_mode": "all", `),
		headers: [][2]string{{"cookie", "plan=pro; session=s-1"}},
		want:    map[string]int64{"atrl:{kinds|limit_by_cookie|plan|pro} t60": 150, "atrl:{kinds|limit_by_per_cookie|session|s-1} t3600": 150},
		next:    "rejected",
	}, {
		name: "per_model under a consumer: the subject and its model in one slot, one call each way",
		config: item("models", `{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 10000,
			"per_model": [{"model": "regexp:^gpt-4o$", "token_per_minute": 150}, {"model": "*", "token_per_minute": 1000}]}]}`),
		headers: [][2]string{{"x-mse-consumer", "alice"}},
		body:    plugintest.ChatBody(100),
		want: map[string]int64{
			"atrl:{models|limit_by_per_consumer|x-mse-consumer|alice} t86400":       150,
			"atrl:{models|limit_by_per_consumer|x-mse-consumer|alice}:m:gpt-4o t60": 150,
		},
		next:  "rejected",
		nodes: 1,
		calls: 2,
	}, {
		name: "per_model and limit_by_per_model: two subjects, two slots, two calls each way",
		config: item("models", `{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 10000,
			"per_model": [{"model": "*", "token_per_minute": 1000}]}]},
			{"limit_by_per_model": "", "limit_keys": [{"key": "gpt-4o*", "token_per_minute": 150}]}`, `"rule_match_mode": "all", `),
		headers: [][2]string{{"x-mse-consumer", "alice"}},
		body:    plugintest.ChatBody(100),
		want: map[string]int64{
			"atrl:{models|limit_by_per_consumer|x-mse-consumer|alice}:m:gpt-4o t60": 150,
			"atrl:{models|limit_by_per_model||gpt-4o} t60":                          150,
		},
		next:  "rejected",
		calls: 4,
	}, {
		name:    "by consumer",
		config:  item("kinds", `{"limit_by_consumer": "", "limit_keys": [{"key": "alice", "token_per_minute": 150}]}`),
		headers: [][2]string{{"x-mse-consumer", "alice"}},
		want:    map[string]int64{"atrl:{kinds|limit_by_consumer|x-mse-consumer|alice} t60": 150},
		next:    "rejected",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resetCluster(cluster)
			defer cluster.SetClock(0)
			mark := len(cluster.Calls())
			p := plugintest.Start(t, cluster, c.config)
			if c.peer != "" {
				require.NoError(t, p.Host.SetProperty([]string{"source", "address"}, []byte(c.peer)))
			}
			send := func() *plugintest.Exchange {
				path := c.path
				if path == "" {
					path = "/v1/chat/completions"
				}
				x := p.SendTo(path, c.headers...)
				if c.body != "" {
					x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				}
				return x.Answer()
			}

			x := send()
			require.True(t, x.Passed(), "the first request is admitted")
			if c.nodes > 0 {
				assert.Len(t, nodesOf(cluster.Calls()[mark:]), c.nodes, "nodes the admission reached")
			}
			x.ResponseHeaders("text/event-stream")
			if c.lease != "" {
				assert.Equal(t, int64(1), clusterCounter(cluster, c.lease, "c"), "a lease is held while it streams")
				y := send()
				y.RequireRejected(429)
				y.DoneAndTick()
			}
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 100, 50))...)
			if c.calls > 0 {
				scriptCalls := 0
				for _, call := range cluster.Calls()[mark:] {
					if call.Reply.Type() != resp.Error { // a NOSCRIPT is answered by the same call with the script
						scriptCalls++
					}
				}
				assert.Equal(t, c.calls, scriptCalls, "script calls of one request")
			}
			for subject, want := range c.want {
				s, window, _ := strings.Cut(subject, " ")
				assert.Equal(t, want, clusterCounter(cluster, s, window), subject)
			}

			next := send()
			switch c.next {
			case "rejected":
				next.RequireRejected(429)
			case "admitted":
				assert.True(t, next.Passed())
			case "queued":
				require.False(t, next.Passed(), "waits")
				require.Nil(t, next.Local(), "waits, not rejected")
				for i := 0; i < 15 && !next.Passed(); i++ {
					p.Tick([]*plugintest.Exchange{next})
				}
				assert.True(t, next.Passed(), "admitted in the next second")
			}
			next.Done()
			requireSlotLocal(t, cluster, cluster.Calls()[mark:])
		})
	}
}

// Layered rules whose subjects live on three nodes: one call per slot at
// admission and at the end, and when one subject rejects, the reservation,
// request count and lease the others took are given back on their own nodes.
func clusterLayeredRulesFanOutAndRollBack(t *testing.T, cluster *redistest.Cluster) {
	config := `{"rule_name": "layers", "rule_match_mode": "all", ` + plugintest.ReservationOn + `"rule_items": [
		{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 100000, "query_per_minute": 100}]},
		{"limit_by_per_ip": "from-remote-addr", "limit_keys": [{"key": "0.0.0.0/0", "token_per_minute": 1000}]},
		{"limit_by_header": "x-tier", "limit_keys": [{"key": "free", "token_per_day": 50000, "max_concurrent_requests": 10}]}],
		` + plugintest.RedisSection + `}`
	consumer := "atrl:{layers|limit_by_per_consumer|x-mse-consumer|bob}"
	ip := "atrl:{layers|limit_by_per_ip||192.0.2.1}"
	tier := "atrl:{layers|limit_by_header|x-tier|free}"
	owners := map[string]bool{cluster.Owner(consumer): true, cluster.Owner(ip): true, cluster.Owner(tier): true}
	require.Len(t, owners, 3, "the test needs its three subjects on three nodes")
	// consumer day tokens, its minute requests, IP minute tokens, tier day tokens, tier leases
	counters := func() [5]int64 {
		return [5]int64{clusterCounter(cluster, consumer, "t86400"), clusterCounter(cluster, consumer, "q60"),
			clusterCounter(cluster, ip, "t60"), clusterCounter(cluster, tier, "t86400"), clusterCounter(cluster, tier, "c")}
	}
	ops := func(calls []redistest.Call) map[string][]string {
		nodes := map[string][]string{}
		for _, c := range calls {
			nodes[c.Op()] = append(nodes[c.Op()], c.Node)
		}
		return nodes
	}
	resetCluster(cluster)
	defer cluster.SetClock(0)
	start := len(cluster.Calls())
	cluster.Do("SCRIPT", "LOAD", scripts.Limiter.Source) // on every node: no NOSCRIPT retry to count
	p := plugintest.Start(t, cluster, config)
	require.NoError(t, p.Host.SetProperty([]string{"source", "address"}, []byte("192.0.2.1:40000")))
	bob := [][2]string{{"x-mse-consumer", "bob"}, {"x-tier", "free"}}

	mark := len(cluster.Calls())
	x := p.SendBody(plugintest.ChatBody(100), bob...)
	assert.Len(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), 3, "three slots: three calls at once")
	x.Answer()
	require.True(t, x.Passed())
	admission := cluster.Calls()[mark:]
	assert.Len(t, admission, 3)
	assert.Len(t, nodesOf(admission), 3, "one call on each node")
	reserved := int64(100 + plugintest.ChatBodyPrompt)
	assert.Equal(t, [5]int64{reserved, 1, reserved, reserved, 1}, counters(), "the reservation in each, counted, leased")

	mark = len(cluster.Calls())
	x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 400, 500))...)
	charges := cluster.Calls()[mark:]
	assert.Len(t, charges, 3)
	assert.Len(t, nodesOf(charges), 3, "each node settles its subject")
	assert.Equal(t, [5]int64{900, 1, 900, 900, 0}, counters(), "reconciled to 900 on every node, lease released")

	// The IP has 100 tokens left this minute: 101 does not fit. The
	// consumer and the tier admitted it on their nodes; both give it back.
	mark = len(cluster.Calls())
	y := p.SendBody(plugintest.ChatBody(100), bob...).Answer()
	y.RequireRejected(429)
	y.DoneAndTick() // the rollbacks go out from the plugin's tick
	calls := cluster.Calls()[mark:]
	byOp := ops(calls)
	assert.Len(t, byOp["admit"], 3)
	assert.ElementsMatch(t, []string{cluster.Owner(consumer), cluster.Owner(tier)}, byOp["charge"],
		"rolled back where it was admitted, and only there")
	assert.Equal(t, [5]int64{900, 1, 900, 900, 0}, counters(), "a rejected request costs none of its limits")
	requireSlotLocal(t, cluster, cluster.Calls()[start:])
}

// A client that does not know where a slot lives (or whose map is stale
// after a resharding) is redirected; the plugin's calls still succeed and
// land on the node that serves the slot.
func clusterFollowsRedirections(t *testing.T, cluster *redistest.Cluster) {
	subject := func(key string) string { return "atrl:{chat|limit_by_header|x-api-key|" + key + "}" }
	keyConfig := func(key string) string {
		return `{"rule_name": "chat", "rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "` + key + `", "token_per_minute": 150}]}], ` + plugintest.RedisSection + `}`
	}
	since := func(mark int) []redistest.Call { return cluster.Calls()[mark:] }
	// spend sends a request and, when admitted, streams 150 tokens back.
	spend := func(p *plugintest.Plugin, key string) *plugintest.Exchange {
		x := p.Request([2]string{"x-api-key", key})
		if x.Passed() {
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 100, 50))...)
		} else {
			x.Done()
		}
		return x
	}
	t.Run("MOVED, when the client only knows a seed node", func(t *testing.T) {
		resetCluster(cluster)
		defer cluster.SetClock(0)
		key := "sk-2"
		require.NotEqual(t, cluster.Addrs[0], cluster.Owner(subject(key)), "the subject must live away from the seed node")
		cluster.ForgetSlots()
		p := plugintest.Start(t, cluster, keyConfig(key))
		mark := len(cluster.Calls())
		require.True(t, spend(p, key).Passed())
		calls := since(mark)
		require.NotEmpty(t, calls)
		assert.Equal(t, 1, calls[0].Moved, "the first call was sent to the seed and redirected")
		for _, c := range calls[1:] {
			assert.Zero(t, c.Moved, "later calls go straight to the slot's node")
		}
		assert.Equal(t, int64(150), clusterCounter(cluster, subject(key), "t60"))
		spend(p, key).RequireRejected(429)
		requireSlotLocal(t, cluster, since(mark))
	})

	t.Run("MOVED after a resharding: the counters moved with the slot", func(t *testing.T) {
		resetCluster(cluster)
		defer cluster.SetClock(0)
		key := "sk-3"
		p := plugintest.Start(t, cluster, keyConfig(key))
		require.True(t, spend(p, key).Passed())
		from := cluster.Owner(subject(key))
		to := cluster.Addrs[0]
		if to == from {
			to = cluster.Addrs[1]
		}
		cluster.MigrateSlot(subject(key), to)() // the client's map still says from
		require.Equal(t, to, cluster.Owner(subject(key)))

		mark := len(cluster.Calls())
		spend(p, key).RequireRejected(429) // not a fresh budget on the new node
		calls := since(mark)
		require.NotEmpty(t, calls)
		assert.Equal(t, 1, calls[0].Moved, "the old node sent the call on")
		for _, c := range calls {
			assert.Equal(t, to, c.Node)
		}
		assert.Equal(t, int64(150), clusterCounter(cluster, subject(key), "t60"))
		requireSlotLocal(t, cluster, since(mark))
	})

	t.Run("ASK while the slot of a new subject is being migrated", func(t *testing.T) {
		resetCluster(cluster)
		defer cluster.SetClock(0)
		key := "sk-4"
		from := cluster.Owner(subject(key))
		to := cluster.Addrs[0]
		if to == from {
			to = cluster.Addrs[2]
		}
		p := plugintest.Start(t, cluster, keyConfig(key))
		finish := cluster.MigrateSlot(subject(key), to)
		mark := len(cluster.Calls())
		require.True(t, spend(p, key).Passed())
		calls := since(mark)
		require.NotEmpty(t, calls)
		for _, c := range calls {
			assert.Equal(t, 1, c.Asked, "%s asked the importing node", c.Op())
			assert.Equal(t, to, c.Node)
		}
		bucket := plugintest.Bucket(subject(key), "t60", int64(cluster.Clock()))
		cluster.DoOn(to, "ASKING") // or the importing node sends the GET back to the old one
		assert.Equal(t, "150", cluster.DoOn(to, "GET", bucket).String(), "charged on the importing node")
		finish()
		assert.Equal(t, int64(150), clusterCounter(cluster, subject(key), "t60"))
		spend(p, key).RequireRejected(429)
	})
}

// A fallback on a cluster: the consumer's budget, the asked model's and the
// fallback's are in three slots, each deciding apart. The consumer's slot
// admits the asked model, the asked model's slot has no room for it: the
// consumer's admission is given back and every slot asked again from the
// fallback, which is served, reserved once in the consumer's budget.
func clusterFallbackSlotsAgree(t *testing.T, cluster *redistest.Cluster) {
	config := `{"rule_name": "fb", "rule_match_mode": "all", ` + plugintest.ReservationOn + `
		"model_fallbacks": {"gpt-4o": ["gpt-4o-mini"]},
		"rule_items": [
		{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 100000}]},
		{"limit_by_per_model": "", "limit_keys": [{"key": "regexp:^gpt-4o$", "token_per_minute": 100}, {"key": "gpt-4o-mini*", "token_per_minute": 1000}]}],
		` + plugintest.RedisSection + `}`
	consumer := "atrl:{fb|limit_by_per_consumer|x-mse-consumer|bob}"
	asked, fallback := "atrl:{fb|limit_by_per_model||gpt-4o}", "atrl:{fb|limit_by_per_model||gpt-4o-mini}"
	resetCluster(cluster)
	defer cluster.SetClock(0)
	p := plugintest.Start(t, cluster, config)
	cluster.Do("SET", plugintest.Bucket(asked, "t60", int64(cluster.Clock())), "100")

	mark := len(cluster.Calls())
	x := p.SendBody(chatNaming("gpt-4o"), [2]string{"x-mse-consumer", "bob"})
	p.AnswerAll([]*plugintest.Exchange{x})
	require.True(t, x.Passed())
	p.SendPostponed() // the consumer's first admission given back, from the tick
	requireSlotLocal(t, cluster, cluster.Calls()[mark:])
	body, _ := upstreamSees(x)
	assert.Equal(t, chatNaming("gpt-4o-mini"), body)
	reserved := clusterCounter(cluster, fallback, "t60")
	assert.Positive(t, reserved, "reserved as the fallback")
	assert.Equal(t, reserved, clusterCounter(cluster, consumer, "t86400"), "and once in the consumer's day")
	assert.Equal(t, int64(100), clusterCounter(cluster, asked, "t60"))

	headers := respondWith(t, x, 20, 30)
	assert.Equal(t, "gpt-4o-mini", plugintest.Header(headers, "X-TokenRateLimit-Fallback"))
	assert.Equal(t, [3]int64{50, 50, 100}, [3]int64{clusterCounter(cluster, consumer, "t86400"),
		clusterCounter(cluster, fallback, "t60"), clusterCounter(cluster, asked, "t60")}, "reconciled to the usage")
}
