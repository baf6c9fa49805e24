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
// calls are always answered. One that fails (a dispatch error, no answer,
// a status other than 2xx) is tried once more from a later tick; one that
// fails twice, or finds the queue full, is logged and counted.

// Counters of the alerts, per webhook: webhook.<service_name>.metric.<name>.
const (
	metricAlertSent   = "token_ratelimit_alert_sent_count"
	metricAlertFailed = "token_ratelimit_alert_failed_count"
)

// maxAlertQueue bounds the alerts waiting for the tick: past it (a webhook
// down under a flood of crossings), an alert is dropped and counted failed.
const maxAlertQueue = 1000

// alerter is one configuration's webhook and its counters.
type alerter struct {
	hook    config.Webhook
	cluster string // the gateway's name for the webhook's cluster
	sent    proxywasm.MetricCounter
	failed  proxywasm.MetricCounter
}

// pendingAlert is one alert waiting for the tick, or being sent.
type pendingAlert struct {
	to      *alerter
	body    []byte
	retried bool // this is its second try
}

// alertBody is the JSON an alert POSTs. Subject names the subject as the
// quota document does (rule_item, or threshold for the thresholds; key,
// value, model); Threshold is the percentage of Limit that Used reached.
// Money amounts are US dollars, written exactly.
type alertBody struct {
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
		hook:    hook,
		cluster: wrapper.FQDNCluster{FQDN: hook.ServiceName, Port: int64(hook.ServicePort)}.ClusterName(),
		sent:    proxywasm.DefineCounterMetric(name + metricAlertSent),
		failed:  proxywasm.DefineCounterMetric(name + metricAlertFailed),
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
		r.pc.start.queueAlert(&pendingAlert{to: a, body: body})
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
	body, _ := json.Marshal(alertBody{RuleName: rules.RuleName, Subject: s, Kind: kind, Window: config.WindowName(w.Seconds),
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

// sendAlerts POSTs the queued alerts, from the plugin's context (the tick).
func (s *startState) sendAlerts() {
	out := s.alerts
	s.alerts = nil
	for _, a := range out {
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

// answered takes the outcome of one try: a 2xx status is sent; a first
// failure is tried again from a later tick, a second is counted failed.
func (a *pendingAlert) answered(s *startState, status int, err error) {
	switch {
	case err == nil && status >= 200 && status < 300:
		a.to.sent.Increment(1)
	case !a.retried:
		log.Debugf("budget alert to %s failed (status %d, %v), trying again: %s", a.to.cluster, status, err, a.body)
		a.retried = true
		s.queueAlert(a)
	default:
		log.Warnf("budget alert to %s failed twice (status %d, %v): %s", a.to.cluster, status, err, a.body)
		a.to.failed.Increment(1)
	}
}
