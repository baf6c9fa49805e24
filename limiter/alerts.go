package limiter

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Budget alerts (budget_alerts). The scripts say when an admission or a
// charge took a window's bucket past a threshold first, for every replica
// (see scripts/alerts.lua); the plugin then POSTs one JSON alert per
// crossing to the webhook. Sending never holds a request: the alert is
// queued, and the plugin's tick sends it from the plugin's context, whose
// calls are always answered. Each alert has an id, the same on every try,
// so that a receiver can drop a repeat (a 2xx that was lost on its way
// back). One that fails (a dispatch error, no answer, a status other than
// 2xx) is tried again from a later tick, waiting 1 s, then twice as long
// after each failure (at most a minute), until the webhook takes it or it
// is older than budget_alerts.max_age_seconds: then it is logged and
// counted failed, as one that finds the queue full is.

// Counters of the alerts, per webhook: webhook.<service_name>.metric.<name>.
const (
	metricAlertSent   = "token_ratelimit_alert_sent_count"
	metricAlertFailed = "token_ratelimit_alert_failed_count"
)

// maxAlertQueue bounds the alerts waiting for the tick: past it (a webhook
// down under a flood of crossings), an alert is dropped and counted failed.
const maxAlertQueue = 1000

// The waits between an alert's tries, in ticks: the first (a second),
// and the longest (a minute).
const (
	firstAlertRetry = 1000 / tickMs
	maxAlertRetry   = 60 * 1000 / tickMs
)

// alerter is one configuration's webhook and its counters.
type alerter struct {
	hook          config.Webhook
	cluster       string // the gateway's name for the webhook's cluster
	maxAgeSeconds int64  // budget_alerts.max_age_seconds: how long an alert is tried
	sent          proxywasm.MetricCounter
	failed        proxywasm.MetricCounter
}

// pendingAlert is one alert waiting for the tick, or being sent.
type pendingAlert struct {
	to    *alerter
	body  []byte
	made  uint64 // the tick it was queued at: it gives up at budget_alerts.max_age_seconds
	due   uint64 // the tick of its next try
	wait  uint64 // in ticks, since its last try
	tries int
}

// alertBody is the JSON an alert POSTs. Subject names the subject as the
// quota document does (rule_item, or threshold for the thresholds; key,
// value, model); Threshold is the percentage of Limit that Used reached.
// Money amounts are US dollars, written exactly.
type alertBody struct {
	// ID names the alert, the same on every try: a receiver drops one it
	// took already.
	ID           string      `json:"id"`
	RuleName     string      `json:"rule_name"`
	Subject      quota.Name  `json:"subject"`
	Kind         string      `json:"kind"`
	Window       string      `json:"window"`
	Limit        json.Number `json:"limit"`
	Used         json.Number `json:"used"`
	ResetSeconds int64       `json:"reset_seconds"`
	Threshold    int64       `json:"threshold"`
	Time         string      `json:"time"`
}

// newAlerter returns the alerter of a configuration with budget_alerts, nil
// without.
func newAlerter(rules *config.Config) *alerter {
	if rules.Alerts == nil {
		return nil
	}
	hook := rules.Alerts.Webhook
	name := "webhook." + hook.ServiceName + ".metric."
	return &alerter{
		hook:          hook,
		cluster:       wrapper.FQDNCluster{FQDN: hook.ServiceName, Port: int64(hook.ServicePort)}.ClusterName(),
		maxAgeSeconds: rules.Alerts.MaxAgeSeconds,
		sent:          proxywasm.DefineCounterMetric(name + metricAlertSent),
		failed:        proxywasm.DefineCounterMetric(name + metricAlertFailed),
	}
}

// alertCrossings queues an alert for each crossing of a call about the
// subjects (those of one of the request's groups).
func (r *request) alertCrossings(subjects []scripts.Subject, crossed []scripts.Crossing) {
	a := r.pc.alerts
	if a == nil || len(crossed) == 0 {
		return
	}
	matches := r.matchesOf(subjects)
	for _, c := range crossed {
		if c.Subject >= len(matches) {
			continue // not the request's group: never the case
		}
		body := alertJSON(r.pc.rules, matches[c.Subject].WindowFrom(c.Window), subjects[c.Subject].Windows[c.Window], c)
		log.Infof("budget alert: %s", body)
		tick := r.pc.start.ticks
		r.pc.start.queueAlert(&pendingAlert{to: a, body: body, made: tick, due: tick})
	}
}

// matchesOf returns the matches of the request's group whose subjects
// these are (nil: none).
func (r *request) matchesOf(subjects []scripts.Subject) []config.Match {
	for i := range r.groups {
		if g := &r.groups[i]; len(g.subjects) > 0 && len(subjects) > 0 && &g.subjects[0] == &subjects[0] {
			return g.matches
		}
	}
	return nil
}

// alertJSON is the body of the alert of a crossing of window w of the
// subject of match m.
func alertJSON(rules *config.Config, m config.Match, w config.Window, c scripts.Crossing) []byte {
	s := quota.ShownNameOf(rules, m) // posted and logged: a credential as its fingerprint
	kind := quota.KindName(scripts.KindOf(w.Unit))
	body, _ := json.Marshal(alertBody{ID: newLeaseID(), RuleName: rules.RuleName, Subject: s, Kind: kind, Window: config.WindowName(w.Seconds),
		Limit: quota.Amount(kind, c.Limit), Used: quota.Amount(kind, c.Used), ResetSeconds: c.Reset, Threshold: c.Threshold,
		Time: time.Unix(c.At, 0).UTC().Format(time.RFC3339)})
	return body
}

// queueAlert hands an alert to the tick; a full queue drops it.
func (s *startState) queueAlert(a *pendingAlert) {
	if len(s.alerts) >= maxAlertQueue {
		log.Warnf("budget alert dropped: %d alerts wait already: %s", len(s.alerts), a.body)
		a.to.failed.Increment(1)
		return
	}
	s.alerts = append(s.alerts, a)
}

// sendAlerts POSTs the queued alerts that are due, from the plugin's
// context (the tick).
func (s *startState) sendAlerts() {
	if len(s.alerts) == 0 {
		return
	}
	out := s.alerts
	s.alerts = nil
	for _, a := range out {
		if s.ticks < a.due {
			s.alerts = append(s.alerts, a) // waits for its next try
			continue
		}
		a.send(s)
	}
}

// send POSTs the alert to its webhook; its answer decides whether it is
// counted sent, tried again or counted failed.
func (a *pendingAlert) send(s *startState) {
	headers := [][2]string{{":method", "POST"}, {":path", a.to.hook.Path}, {":authority", a.to.hook.ServiceName},
		{"content-type", "application/json"}}
	_, err := proxywasm.DispatchHttpCall(a.to.cluster, headers, a.body, nil, uint32(a.to.hook.TimeoutMs), func(numHeaders, _, _ int) {
		status := 0
		if headers, err := proxywasm.GetHttpCallResponseHeaders(); numHeaders > 0 && err == nil {
			for _, h := range headers {
				if h[0] == ":status" {
					status, _ = strconv.Atoi(h[1])
				}
			}
		}
		a.answered(s, status, nil)
	})
	if err != nil {
		a.answered(s, 0, err)
	}
}

// answered takes the outcome of one try: a 2xx status is sent; a failure
// is tried again after a wait that doubles each time (at most a minute),
// unless the alert is older than budget_alerts.max_age_seconds by then.
func (a *pendingAlert) answered(s *startState, status int, err error) {
	if err == nil && status >= 200 && status < 300 {
		a.to.sent.Increment(1)
		return
	}
	a.tries++
	a.wait = min(max(2*a.wait, firstAlertRetry), maxAlertRetry)
	a.due = s.ticks + a.wait
	if age := uint64(a.to.maxAgeSeconds) * 1000 / tickMs; a.due-a.made > age {
		log.Warnf("budget alert to %s failed %d times in %d s (status %d, %v), given up: %s", a.to.cluster, a.tries,
			(s.ticks-a.made)*tickMs/1000, status, err, a.body)
		a.to.failed.Increment(1)
		return
	}
	log.Debugf("budget alert to %s failed (status %d, %v), trying again in %d ms: %s", a.to.cluster, status, err, a.wait*tickMs, a.body)
	s.queueAlert(a)
}
