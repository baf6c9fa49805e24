package limiter_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 26, budget alerts and soft limits: a window's bucket that reaches
// a threshold alerts once, for every replica, by a POST to the webhook
// sent from the plugin's tick. Through the plugin (Go and WASM mode) on a
// real Redis, whose clock is set: 2026-01-01 01:00:00 UTC, 82,800 s before
// the day ends.

const (
	alertsClock = 1767229200 // 2026-01-01T01:00:00Z
	alertsTime  = `"time":"2026-01-01T01:00:00Z"`
	webhook     = "outbound|80||alerts.static"
	alertsSent  = "webhook.alerts.static.metric.token_ratelimit_alert_sent_count"
	alertsLost  = "webhook.alerts.static.metric.token_ratelimit_alert_failed_count"
)

// alertsConfig is APIKeyConfig with budget_alerts at the thresholds.
func alertsConfig(thresholds, extra, limits string) string {
	return plugintest.APIKeyConfig(`"budget_alerts": {"thresholds": [`+thresholds+`],
		"webhook": {"service_name": "alerts.static", "path": "/hooks/budget", "timeout": 500}}, `+extra, limits)
}

// spendTokens sends a request of sk-1 that is admitted and uses tokens, and
// checks that nothing went to the webhook meanwhile: its response went
// through whole (Respond holds nothing back), and no HTTP call was sent,
// from its context or the plugin's, before the tick.
func spendTokens(t *testing.T, p *plugintest.Plugin, tokens int) *plugintest.Exchange {
	t.Helper()
	x := p.Request(plugintest.APIKey)
	require.True(t, x.Passed())
	x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, tokens, 0))...)
	requireNoHTTPCalls(t, p, x.ID)
	return x
}

// requireNoHTTPCalls checks that neither the request's context nor the
// plugin's has sent an HTTP call.
func requireNoHTTPCalls(t *testing.T, p *plugintest.Plugin, id uint32) {
	t.Helper()
	require.Empty(t, p.Host.GetCalloutAttributesFromContext(id), "an HTTP call from the request's context")
	require.Empty(t, p.Host.GetCalloutAttributesFromContext(proxytest.PluginContextID), "an HTTP call before the tick")
}

// alertID is an alert body's "id" member, which tickAlerts takes out.
var alertID = regexp.MustCompile(`^\{"id":"([A-Za-z0-9_.-]+)",`)

// tickAlerts ticks the plugin and answers every webhook call it sent from
// its context with status, returning their bodies without their ids (each
// must have one).
func tickAlerts(t *testing.T, p *plugintest.Plugin, status int) []string {
	t.Helper()
	bodies, _ := tickAlertIDs(t, p, status)
	return bodies
}

// tickAlertIDs is tickAlerts, returning the alerts' ids too.
func tickAlertIDs(t *testing.T, p *plugintest.Plugin, status int) (bodies, ids []string) {
	t.Helper()
	return tickAlertsTo(t, p, webhook, "/hooks/budget", status)
}

// tickAlertsTo is tickAlertIDs for a webhook of another cluster (upstream)
// and path: every call must go there.
func tickAlertsTo(t *testing.T, p *plugintest.Plugin, upstream, path string, status int) (bodies, ids []string) {
	t.Helper()
	p.SendPostponed()
	return answerAlertsTo(t, p, upstream, path, status)
}

// answerAlertsTo answers the webhook calls the plugin has sent with status,
// as tickAlertsTo does after its tick.
func answerAlertsTo(t *testing.T, p *plugintest.Plugin, upstream, path string, status int) (bodies, ids []string) {
	t.Helper()
	calls := slices.Clone(p.Host.GetCalloutAttributesFromContext(proxytest.PluginContextID))
	for _, c := range calls {
		assert.Equal(t, upstream, c.Upstream)
		assert.Equal(t, "POST", plugintest.Header(c.Headers, ":method"))
		assert.Equal(t, path, plugintest.Header(c.Headers, ":path"))
		assert.Equal(t, "application/json", plugintest.Header(c.Headers, "content-type"))
		m := alertID.FindStringSubmatch(string(c.Body))
		require.NotNil(t, m, "an alert without an id: %s", c.Body)
		ids = append(ids, m[1])
		bodies = append(bodies, "{"+string(c.Body)[len(m[0]):])
		p.Host.CallOnHttpCallResponse(c.CalloutID, [][2]string{{":status", strconv.Itoa(status)}}, nil, nil)
	}
	return bodies, ids
}

// tickQuietly ticks the plugin n times, answering its Redis calls, and
// checks that no alert was sent meanwhile.
func tickQuietly(t *testing.T, p *plugintest.Plugin, n int) {
	t.Helper()
	for range n {
		p.SendPostponed()
	}
	require.Empty(t, p.Host.GetCalloutAttributesFromContext(proxytest.PluginContextID), "an alert before its next try")
}

// counter reads a counter of the host (0 when not defined).
func counter(p *plugintest.Plugin, name string) uint64 {
	n, _ := p.Host.GetCounterMetric(name)
	return n
}

// "With thresholds [50, 80, 100] and 1,000 tokens a day, requests using
// 300 each alert at 50 % (600), 80 % (900) and 100 % (1,200), each once",
// whichever replica takes the bucket past a threshold: each request goes
// through another plugin instance on the same Redis.
func TestAlertThresholdsOnceAcrossReplicas(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.StartOver(t, alertsClock)
		config := alertsConfig("100, 50, 80", "", `"token_per_day": 1000`)
		alert := func(threshold, used int) string {
			return `{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"tokens","window":"day",` +
				`"limit":1000,"used":` + strconv.Itoa(used) + `,"reset_seconds":82800,"threshold":` + strconv.Itoa(threshold) + `,` + alertsTime + `}`
		}
		var replica *plugintest.Plugin
		var alerts []string
		for i, want := range [][]string{nil, {alert(50, 600)}, {alert(80, 900)}, {alert(100, 1200)}} {
			if replica != nil {
				replica.Stop()
			}
			replica = plugintest.Start(t, redis, config) // replica A, B, A, B: one emulator runs at a time
			spendTokens(t, replica, 300)
			got := tickAlerts(t, replica, 200)
			assert.Equal(t, want, got, "request %d", i+1)
			assert.Equal(t, uint64(len(want)), counter(replica, alertsSent))
			assert.Empty(t, tickAlerts(t, replica, 200), "sent once")
			alerts = append(alerts, got...)
		}
		require.Len(t, alerts, 3)

		// The markers outlive a reset of the bucket within its day: going
		// past the thresholds again alerts no more.
		redis.Do("SET", plugintest.APIKeySubject+":t86400:"+strconv.Itoa(alertsClock/86400), "0", "KEEPTTL")
		for range 4 {
			spendTokens(t, replica, 300)
		}
		assert.Empty(t, tickAlerts(t, replica, 200))
		assert.Equal(t, int64(82801), redis.Int("TTL", plugintest.APIKeySubject+":t86400:"+strconv.Itoa(alertsClock/86400)+":!100"),
			"a marker lives as long as its bucket")
	})
}

// Issue 35, point 5: an alert survives a webhook that fails four times
// (500, 503, 502, 500): it waits in Redis and is tried again after its age
// (at least 1 s: 1 s, then its age, about doubling; replicas scan every
// second), with the same id every time, and arrives once; one that fails
// for longer than budget_alerts.max_age_seconds is given up and counted.
func TestAlertSurvivesAFailingWebhook(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, alertsConfig("100", "", `"token_per_day": 1000`))
		spendTokens(t, p, 1000)
		want := `{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"tokens","window":"day",` +
			`"limit":1000,"used":1000,"reset_seconds":82800,"threshold":100,` + alertsTime + `}`
		got, ids := tickAlertIDs(t, p, 500)
		require.Equal(t, []string{want}, got)
		id := ids[0]
		age := 0.0
		for i, status := range []int{503, 502, 500, 200} {
			least := max(1, age)
			waited := tickUntilAlert(t, p, 200)
			assert.True(t, waited >= least && waited <= least+1.1, "try %d after %.1f s, not %.1f s", i+2, waited, least)
			age += waited
			got, ids = tickAlertIDs(t, p, status)
			require.Equal(t, []string{want}, got, "try %d", i+2)
			assert.Equal(t, []string{id}, ids, "the same id every time")
		}
		assert.Equal(t, uint64(1), counter(p, alertsSent))
		assert.Equal(t, uint64(0), counter(p, alertsLost))
		p.SendPostponed()
		assert.Empty(t, redis.Keys("atrl:*:!o:*"), "taken out of Redis once sent")
		assert.Equal(t, -1.0, tickUntilAlert(t, p, 200), "sent once")

		// At most 3 s of tries: at once, a second or two later; the next
		// would be past 3 s: given up.
		redis.StartOver(t, alertsClock)
		p.Stop()
		p = plugintest.Start(t, redis, plugintest.APIKeyConfig(`"budget_alerts": {"thresholds": [100], "max_age_seconds": 3,
			"webhook": {"service_name": "alerts.static", "path": "/hooks/budget", "timeout": 500}},`, `"token_per_day": 1000`))
		spendTokens(t, p, 1000)
		require.Len(t, tickAlerts(t, p, 500), 1)
		require.Greater(t, tickUntilAlert(t, p, 30), 0.0)
		require.Len(t, tickAlerts(t, p, 500), 1)
		assert.Equal(t, uint64(0), counter(p, alertsLost))
		assert.Equal(t, -1.0, tickUntilAlert(t, p, 40))
		assert.Equal(t, uint64(1), counter(p, alertsLost), "given up")
		assert.Contains(t, strings.Join(p.Host.GetWarnLogs(), "\n"), "not delivered in 3 s, given up: {\"id\":")
		assert.Empty(t, redis.Keys("atrl:*:!o:*"))
	})
}

// Issue 35, point 5: an alert is delivered by whichever replica is still
// running. Replica A makes an alert the webhook refuses, and stops; replica
// B sends it at its next try, with A's body and id. Replica A makes
// another and stops before its tick could give it a body: once the grace
// is over (10 s), B sends it with a body made from its key, under the id A
// would have given it.
func TestAlertDeliveredByAnotherReplica(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.StartOver(t, alertsClock)
		config := alertsConfig("50, 100", "", `"token_per_day": 1000`)
		a := plugintest.Start(t, redis, config)
		spendTokens(t, a, 500)
		first, ids := tickAlertIDs(t, a, 503)
		require.Len(t, first, 1)
		spendTokens(t, a, 500) // 100 %: A stops before its tick
		a.Stop()

		b := plugintest.Start(t, redis, config)
		assert.Greater(t, tickUntilAlert(t, b, 30), 0.0)
		got, again := tickAlertIDs(t, b, 200)
		assert.Equal(t, first, got, "A's alert, sent by B")
		assert.Equal(t, ids, again)
		waited := tickUntilAlert(t, b, 150)
		assert.Greater(t, waited, 8.0, "not before the grace")
		got, _ = tickAlertIDs(t, b, 200)
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"key":"x-api-key","value":"s...#0f2c10bf"},"kind":"tokens","window":"day",` +
			`"limit":1000,"used":1000,"reset_seconds":82800,"threshold":100,` + alertsTime + `}`}, got,
			"named from its key: the credential fingerprinted, no rule item")
		assert.Equal(t, uint64(2), counter(b, alertsSent))
		assert.Equal(t, -1.0, tickUntilAlert(t, b, 150))
		assert.Empty(t, redis.Keys("atrl:*:!o:*"))
		assert.Equal(t, []string{"atrl:alerts:{chat}:c"}, redis.Keys("atrl:alerts:*"), "nothing left listed once the last try's wait is over: the rule's registry")
		assert.Empty(t, redis.Keys("atrl:unlisted:*"), "nor noted for the sweep")
		b.Stop()

		// With redis.cluster: false, the call that crosses lists the
		// outbox itself: the first alert of a replica that stops before
		// its tick is delivered too.
		redis.StartOver(t, alertsClock)
		oneServer := strings.Replace(config, `"timeout": 1000}`, `"timeout": 1000, "cluster": false}`, 1)
		require.NotEqual(t, config, oneServer)
		a = plugintest.Start(t, redis, oneServer)
		spendTokens(t, a, 500)
		a.Stop()
		b = plugintest.Start(t, redis, oneServer)
		assert.Greater(t, tickUntilAlert(t, b, 150), 8.0)
		got, again = tickAlertIDs(t, b, 200)
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"key":"x-api-key","value":"s...#0f2c10bf"},"kind":"tokens","window":"day",` +
			`"limit":1000,"used":500,"reset_seconds":82800,"threshold":50,` + alertsTime + `}`}, got)
		assert.Equal(t, ids, again, "the id A would have given it")
	})
}

// tickUntilAlert ticks the plugin (0.1 s of Redis's clock each) until it
// has sent an alert, at most n times; it returns the seconds that took, or
// -1 when none was sent.
func tickUntilAlert(t *testing.T, p *plugintest.Plugin, n int) float64 {
	t.Helper()
	for i := 1; i <= n; i++ {
		p.Tick(nil)
		if len(p.Host.GetCalloutAttributesFromContext(proxytest.PluginContextID)) > 0 {
			return float64(i) / 10
		}
	}
	return -1
}

// A money window alerts in dollars, written exactly.
func TestAlertMoneyWindowInDollars(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, alertsConfig("50, 80", pricing, `"usd_per_day": 0.01`))
		// gpt-4o: 1,000 × $2.50 + 300 × $10 per million tokens: $0.0055.
		x := p.SendBody(chatNaming("gpt-4o"), plugintest.APIKey).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 1000, 300))...)
		requireNoHTTPCalls(t, p, x.ID)
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"usd","window":"day",` +
			`"limit":0.01,"used":0.0055,"reset_seconds":82800,"threshold":50,` + alertsTime + `}`}, tickAlerts(t, p, 204))
		assert.Equal(t, uint64(1), counter(p, alertsSent))
	})
}

// A soft limit admits a subject over it: the quota headers show nothing
// left, and its bucket alerts at 100 %.
func TestSoftLimitAdmitsAndAlerts(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, alertsConfig("100", `"show_limit_quota_header": true,`,
			`"token_per_minute": 100, "soft": true`))
		spendTokens(t, p, 150)
		x := p.Request(plugintest.APIKey)
		require.True(t, x.Passed(), "over a soft limit, admitted")
		headers := x.ResponseHeaders("text/event-stream")
		assert.Equal(t, "100", plugintest.Header(headers, "X-TokenRateLimit-Limit"))
		assert.Equal(t, "0", plugintest.Header(headers, "X-TokenRateLimit-Remaining"))
		assert.Equal(t, "60", plugintest.Header(headers, "X-TokenRateLimit-Reset"))
		x.Done()
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"tokens","window":"minute",` +
			`"limit":100,"used":150,"reset_seconds":60,"threshold":100,` + alertsTime + `}`}, tickAlerts(t, p, 200))

		// The same limit, hard: rejected.
		redis.Do("FLUSHALL")
		p.Stop()
		p = plugintest.Start(t, redis, alertsConfig("100", "", `"token_per_minute": 100`))
		spendTokens(t, p, 150)
		p.Request(plugintest.APIKey).RequireRejected(429)
	})
}

// A subject two rule items name: item 0's soft minute and item 1's hard
// hour, each window as soft as the key it is from, each alert naming the
// item and key whose window crossed.
func TestSharedSubjectSoftAndHardWindowsAlert(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, `{"rule_name": "chat",
			"budget_alerts": {"thresholds": [100], "webhook": {"service_name": "alerts.static", "path": "/hooks/budget", "timeout": 500}},
			"rule_items": [
				{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_minute": 100, "soft": true}]},
				{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-", "token_per_hour": 300}]}],
			`+plugintest.RedisSection+`}`)
		spendTokens(t, p, 150) // the minute past its soft 100
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":0,"key":"*","value":"s...#0f2c10bf"},"kind":"tokens","window":"minute",` +
			`"limit":100,"used":150,"reset_seconds":60,"threshold":100,` + alertsTime + `}`}, tickAlerts(t, p, 200))
		spendTokens(t, p, 150) // over the soft minute: admitted; the hour at its 300
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":1,"key":"regexp:^sk-","value":"s...#0f2c10bf"},"kind":"tokens","window":"hour",` +
			`"limit":300,"used":300,"reset_seconds":3600,"threshold":100,` + alertsTime + `}`}, tickAlerts(t, p, 200))
		local := p.Request(plugintest.APIKey).RequireRejected(429)
		assert.Equal(t, "rule_item=1; key=regexp:^sk-", plugintest.Header(local.Headers, "X-TokenRateLimit-Scope"), "the hard hour closed")
	})
}

// Issue 35, point 5: alerts are decided on the usage charged, never on a
// reservation. A request that reserves 90 % of a day (max_tokens 900) but
// uses 100 tokens does not alert at 80 %; the request that then takes the
// usage past 800 does, with what was used.
func TestAlertsAreDecidedOnUsageNotReservations(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, alertsConfig("80", plugintest.ReservationOn, `"token_per_day": 1000`))
		x := p.SendBody(plugintest.ChatBody(900), key).Answer()
		require.True(t, x.Passed())
		assert.Greater(t, plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"), int64(800), "reserved past 80 %")
		assert.Empty(t, tickAlerts(t, p, 200), "a reservation is no usage")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 60, 40))...)
		assert.Empty(t, tickAlerts(t, p, 200), "100 tokens used")

		x = p.SendBody(plugintest.ChatBody(10), key).Answer()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 700, 50))...)
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"tokens","window":"day",` +
			`"limit":1000,"used":850,"reset_seconds":82800,"threshold":80,` + alertsTime + `}`}, tickAlerts(t, p, 200))
		assert.Equal(t, int64(850), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"), "the bucket holds the usage once reconciled")
	})
}

// Issue 36 (found with make run's curl, which closes its connection once
// it has a response of known length): a client that resets the stream
// while its last chunk waits for the charge takes the charge's answer with
// it. The charge goes to the tick again under its id: applied once, and
// answered with the threshold its first try crossed, so the alert keeps the
// body its configuration gives it.
func TestAlertOfAChargeWhoseAnswerWasDropped(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, alertsConfig("50", "", `"token_per_day": 1000`))
		x := p.Request(plugintest.APIKey)
		require.True(t, x.Passed())
		x.ResponseHeaders("application/json")
		held := p.Host.CallOnResponseBody(x.ID, []byte(`{"usage":{"prompt_tokens":400,"completion_tokens":200,"total_tokens":600}}`), true)
		require.Equal(t, types.ActionPause, held, "the end waits for the charge")
		sent := slices.Clone(p.Host.GetRedisCalloutAttributesFromContext(x.ID))
		require.Len(t, sent, 1)
		redis.Forward(sent[0].Query) // it reaches Redis, but its answer is lost with the stream
		p.Host.CompleteHttpContext(x.ID)
		assert.Equal(t, int64(600), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"))

		p.SendPostponed() // the charge, sent again
		assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"tokens","window":"day",` +
			`"limit":1000,"used":600,"reset_seconds":82800,"threshold":50,` + alertsTime + `}`}, tickAlerts(t, p, 200), "its body as configured")
		assert.Equal(t, int64(600), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"), "charged once")
	})
}

// Issue 51, point 2: two routes (or WasmPlugins) that share a rule_name
// share its budget, each with its own webhook. Route B's alert, refused
// once (503), is B's: route A's replica, ticking before B's retry, never
// POSTs it to A's webhook; B delivers it, with its id, to its own.
func TestAlertsGoOnlyToTheWebhookOfTheirConfiguration(t *testing.T) {
	redis := redistest.Start(t)
	const (
		webhookB = "outbound|80||alerts-b.static"
		sentB    = "webhook.alerts-b.static.metric.token_ratelimit_alert_sent_count"
	)
	routeA := alertsConfig("50", "", `"token_per_day": 1000`)
	routeB := strings.Replace(routeA, `"service_name": "alerts.static", "path": "/hooks/budget"`, `"service_name": "alerts-b.static", "path": "/hooks/b"`, 1)
	require.NotEqual(t, routeA, routeB)
	plugintest.RunTest(t, func(t *testing.T) {
		b := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, routeB)
		spendTokens(t, b, 600)
		first, ids := tickAlertsTo(t, b, webhookB, "/hooks/b", 503)
		require.Len(t, first, 1)
		b.Stop()

		a := plugintest.Start(t, redis, routeA) // another replica, serving route A
		assert.Equal(t, -1.0, tickUntilAlert(t, a, 50), "A sends nothing of B's in 5 s")
		assert.Equal(t, uint64(0), counter(a, alertsSent))
		a.Stop()

		b = plugintest.Start(t, redis, routeB)
		require.Greater(t, tickUntilAlert(t, b, 50), 0.0)
		again, sameIDs := tickAlertsTo(t, b, webhookB, "/hooks/b", 200)
		assert.Equal(t, first, again, "B's alert, to B's webhook")
		assert.Equal(t, ids, sameIDs)
		assert.Equal(t, uint64(1), counter(b, sentB))
	})
}

// Issue 51, point 2: route B's configuration changes its webhook (or goes
// away) while its alert waits for a webhook that refuses it. The alert
// stays B's: nobody POSTs it elsewhere, and once no replica of B's
// configuration has looked for its alerts for an hour, while route A's
// replicas went on, A's replica gives it up: logged at warn, naming B's
// webhook, and counted in A's token_ratelimit_alert_failed_count.
func TestAlertsOfAConfigurationGoneAreGivenUp(t *testing.T) {
	redis := redistest.Start(t)
	routeA := alertsConfig("50", "", `"token_per_day": 1000`)
	routeB := strings.Replace(routeA, `"service_name": "alerts.static", "path": "/hooks/budget"`, `"service_name": "alerts-b.static", "path": "/hooks/b"`, 1)
	plugintest.RunTest(t, func(t *testing.T) {
		b := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, routeB)
		spendTokens(t, b, 600)
		bodies, _ := tickAlertsTo(t, b, "outbound|80||alerts-b.static", "/hooks/b", 503)
		require.Len(t, bodies, 1)
		b.Stop()

		a := plugintest.Start(t, redis, routeA)
		minute := func() { // 59 s on, then a second of A's ticks: a scan
			redis.SetClock(redis.Clock() + 59)
			tickQuietly(t, a, 10)
		}
		for range 61 { // 3,599 s
			minute()
		}
		assert.Equal(t, uint64(0), counter(a, alertsLost))
		require.Len(t, redis.Keys("atrl:*:!o:*"), 1, "B's alert waits")
		minute() // 3,658 s
		require.Empty(t, a.Host.GetCalloutAttributesFromContext(proxytest.PluginContextID))
		assert.Equal(t, uint64(1), counter(a, alertsLost), "given up")
		assert.Contains(t, strings.Join(a.Host.GetWarnLogs(), "\n"),
			`budget alert to alerts-b.static given up: no replica of the configuration that made it (that webhook) has run for 3600 s: {"id":`)
		assert.Empty(t, redis.Keys("atrl:*:!o:*"))
	})
}
