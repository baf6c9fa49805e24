package limiter_test

import (
	"strconv"
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

// Issue 51, point 1: budget alerts on a Redis Cluster (redis.cluster:
// true, the default), where a subject's outbox and its rule's alert index
// are in two slots, so the call that records an alert cannot list it. Each
// alert is delivered, once, whatever fails in between and for however
// long. The breaker is off (breaker_failures: 0), so that what is shown is
// the alerts' own retries, not the breaker's probes.

// clusterAlertsConfig is alertsConfig without the breaker.
func clusterAlertsConfig(t *testing.T, thresholds string) string {
	config := strings.Replace(alertsConfig(thresholds, "", `"token_per_day": 1000`), `"timeout": 1000}`, `"timeout": 1000, "breaker_failures": 0}`, 1)
	require.Contains(t, config, `"breaker_failures": 0`)
	return config
}

// alertIndexKey is a key in the slot of the rule "chat"'s alert registry
// and indexes (hash tag "chat"): on a node other than the subject's
// (APIKeySubject).
const alertIndexKey = "atrl:alerts:{chat}"

// alertRegistryKey is the rule's alert registry, in that slot, which says
// where its sweep is.
const alertRegistryKey = "atrl:alerts:{chat}:c"

// TestAlertsOnACluster starts one cluster for the alert tests on it.
func TestAlertsOnACluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	require.NotEqual(t, cluster.Owner(alertIndexKey), cluster.Owner(plugintest.APIKeySubject), "the index and the subject on two nodes")
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("the index's node failing for a minute", func(t *testing.T) { clusterAlertIndexFailing(t, cluster) })
		t.Run("replies lost", func(t *testing.T) { clusterAlertRepliesLost(t, cluster) })
		t.Run("a replica stopped before it listed its alert", func(t *testing.T) { clusterAlertOfAReplicaThatStopped(t, cluster) })
	})
}

// The alert index's node fails (its calls answered with a failed status,
// none run) from the call that crossed until a minute later: the alert
// waits, is listed once the node is back, and is delivered once.
func clusterAlertIndexFailing(t *testing.T, cluster *redistest.Cluster) {
	resetCluster(cluster)
	p := plugintest.Start(t, cluster, clusterAlertsConfig(t, "50"))
	spendTokens(t, p, 600)
	back := cluster.Fail(alertIndexKey)
	defer back() // should the test stop before
	assert.Equal(t, -1.0, tickUntilAlert(t, p, 600), "nothing sent while the index fails")
	assert.Len(t, cluster.Keys("atrl:*:!o*"), 1, "the alert waits in its outbox")
	back()
	require.Greater(t, tickUntilAlert(t, p, 50), 0.0, "sent once the index is back")
	bodies := tickAlerts(t, p, 200)
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], `"subject":{"rule_item":0,`, "the body its replica attached")
	assert.Contains(t, bodies[0], `"used":600,`)
	assert.Contains(t, bodies[0], `"threshold":50,`)
	assert.Equal(t, -1.0, tickUntilAlert(t, p, 700), "sent once")
	assert.Equal(t, uint64(1), counter(p, alertsSent))
	assert.Empty(t, cluster.Keys("atrl:*:!o*"))
	assert.NotContains(t, strings.Join(p.Host.GetWarnLogs(), "\n"), "budget alert", "nothing given up, nothing to warn of")
}

// Calls that Redis runs but whose replies never come back (the gateway
// gave up on them after redis.timeout: a node that hung, then resumed):
// the calls the tick makes for a new alert (its body's attach twice, a
// scan, the listing), then the taking out of the alert the webhook took.
// The alert is POSTed once. When the taking out never runs, the alert is
// POSTed again, under the same id: the receiver drops the repeat.
func clusterAlertRepliesLost(t *testing.T, cluster *redistest.Cluster) {
	resetCluster(cluster)
	p := plugintest.Start(t, cluster, clusterAlertsConfig(t, "50, 100"))
	cluster.Do("SCRIPT", "LOAD", scripts.Alerts.Source) // on every node, as earlier alerts would have: what runs late runs
	spendTokens(t, p, 600)
	tick := func() {
		cluster.SetClock(cluster.Clock() + 0.1)
		p.Host.Tick()
	}
	lost := func(what string) { // the plugin's calls pending: run, their answers lost
		late := redistest.GiveUp(t, p.Host, cluster, proxytest.PluginContextID)
		require.Positive(t, late.Len(), what)
		late.Run()
	}
	tick()
	lost("the body's attach, a scan")
	tick()
	lost("the attach again (the alert has its body already)")
	tick()
	pending := p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID)
	require.Len(t, pending, 1, "the attach, once more")
	p.Host.CallOnRedisCallResponse(pending[0].CalloutID, 0, cluster.Forward(pending[0].Query)) // answered: "gone", it has its body
	lost("the outbox's listing")
	require.Greater(t, tickUntilAlert(t, p, 150), 0.0)
	bodies, ids := answerAlertsTo(t, p, webhook, "/hooks/budget", 200)
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], `"threshold":50,`)
	late := redistest.GiveUp(t, p.Host, cluster, proxytest.PluginContextID) // the alert's removal
	require.Equal(t, 1, late.Len())
	late.Run()
	assert.Equal(t, -1.0, tickUntilAlert(t, p, 700), "POSTed once")
	assert.Equal(t, uint64(1), counter(p, alertsSent))
	assert.Empty(t, cluster.Keys("atrl:*:!o*"))

	// The removal of the next alert lost for good: it comes again, under
	// its id.
	spendTokens(t, p, 400)
	require.Greater(t, tickUntilAlert(t, p, 150), 0.0)
	bodies, ids = answerAlertsTo(t, p, webhook, "/hooks/budget", 200)
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], `"threshold":100,`)
	redistest.GiveUp(t, p.Host, cluster, proxytest.PluginContextID) // never runs
	require.Greater(t, tickUntilAlert(t, p, 700), 0.0, "sent again")
	again, sameIDs := answerAlertsTo(t, p, webhook, "/hooks/budget", 200)
	assert.Equal(t, bodies, again)
	assert.Equal(t, ids, sameIDs, "under the same id")
	assert.Equal(t, -1.0, tickUntilAlert(t, p, 700))
	assert.Equal(t, uint64(3), counter(p, alertsSent), "the repeat counted: the webhook took it")
}

// A replica takes a bucket past a threshold and stops before its tick
// could list the outbox (a crash; the answer of the call lost likewise).
// The call noted the outbox in its own slot: the rule's sweep, which the
// replicas' scans take turns at, 16 slots a second (all 16,384 in about
// 17 minutes; here it starts just before the subject's slot), finds it a
// minute on, and another replica delivers the alert, with a body made
// from its key.
func clusterAlertOfAReplicaThatStopped(t *testing.T, cluster *redistest.Cluster) {
	resetCluster(cluster)
	config := clusterAlertsConfig(t, "50")
	a := plugintest.Start(t, cluster, config)
	spendTokens(t, a, 600)
	a.Stop()
	require.Len(t, cluster.Keys("atrl:unlisted:*"), 1, "noted in the subject's slot")
	assert.Equal(t, []string{alertRegistryKey}, cluster.Keys("atrl:alerts:*"), "never listed: no index")

	slot := int(cachekey.Slot([]byte(plugintest.APIKeySubject)))
	sweepFrom := func() { cluster.Do("HSET", alertRegistryKey, "!slot", strconv.Itoa(slot-20)) }
	sweepFrom()
	b := plugintest.Start(t, cluster, config)
	assert.Equal(t, -1.0, tickUntilAlert(t, b, 50), "not before a minute: its replica may list it yet")
	cluster.SetClock(cluster.Clock() + 55)
	sweepFrom()
	require.Greater(t, tickUntilAlert(t, b, 50), 0.0, "swept")
	bodies := tickAlerts(t, b, 200)
	require.Len(t, bodies, 1)
	assert.Contains(t, bodies[0], `"subject":{"key":"x-api-key","value":"s...#0f2c10bf"},`, "named from its key")
	assert.Contains(t, bodies[0], `"used":600,`)
	assert.Equal(t, -1.0, tickUntilAlert(t, b, 700), "once")
	assert.Equal(t, uint64(1), counter(b, alertsSent))
	assert.Empty(t, cluster.Keys("atrl:*:!o:*"))
	assert.Empty(t, cluster.Keys("atrl:unlisted:*"))
	assert.Contains(t, strings.Join(b.Host.GetInfoLogs(), "\n"), "was not listed: the sweep lists it")
}
