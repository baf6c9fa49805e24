package limiter

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Budget alerts (budget_alerts). The scripts say when an admission or a
// charge took a window's bucket past a threshold first, for every replica,
// and in the same call write the alert to the subject's outbox of the
// configuration's owner (config.AlertOwner: its webhook and reading of
// credentials) in Redis (see scripts/alerts.lua). The replica that made the
// call gives the alert its body (the JSON the webhook gets, naming the
// subject as this configuration does) and lists the outbox in its owner's
// alert index, from its tick, trying until the listing lands; every
// replica's tick scans its owner's index, every second or at once after a
// listing, claims the alerts due (each claim puts an alert off: another
// replica tries it only if this try fails), POSTs them, and takes out of
// Redis those the webhook took (a 2xx). An alert that fails is tried again
// after its age (at least 1 s and the webhook's timeout, at most a minute:
// about doubling), by whichever replica of its owner gets to it, until it
// is older than budget_alerts.max_age_seconds: then it is dropped, logged
// and counted failed. On a Redis Cluster the index is in another slot than
// the outbox, so the call that writes an alert also notes the outbox in its
// own slot, and the scans sweep those notes, 16 slots a second for the
// rule: an outbox that no listing reached (its replica stopped first, the
// answer of the call that crossed was lost, a flood outgrew maxUnlisted) is
// listed within about 17 minutes. The alerts of an owner no replica has
// scanned for an hour (its configuration is gone) are given up, logged and
// counted failed, by a replica of another owner of the rule. So an alert is
// delivered at least once, to its owner's webhook only, whichever replica
// made it, across reloads and restarts, each time with the same id, so
// that a receiver can drop a repeat; or it is given up, logged at warn and
// counted. Sending never holds a request: every call goes from the tick,
// in the plugin's context, whose calls are always answered.

// Counters of the alerts, per webhook: webhook.<service_name>.metric.<name>.
const (
	metricAlertSent   = "token_ratelimit_alert_sent_count"
	metricAlertFailed = "token_ratelimit_alert_failed_count"
)

// maxAttaching bounds the alerts waiting for the tick to attach their body:
// past it (a flood of crossings with Redis failing), an alert waits in its
// outbox without one, and is delivered after the grace with a body made
// from its key (alertFromKey).
const maxAttaching = 1000

// maxUnlisted bounds the outboxes waiting for the tick to list them: past
// it, an outbox is left to what the call that wrote its alert did (one
// server: it listed it; a Redis Cluster: it noted it for the sweep).
const maxUnlisted = 1000

// Delivery's rhythm, in ticks and seconds: a scan every second (and at
// once after a listing); an outbox leased for 5 s by the replica that
// scanned it; at most 16 outboxes a scan and 16 alerts an outbox; an attach
// tried for 5 s (alerts.lua's grace is 10 s); a failed listing tried again
// every second, at most 64 outboxes a call; the sweep lists the outboxes
// of a slot noted at least a minute ago (their own listing had time to
// land), at most 64 a slot.
const (
	scanTicks      = 1000 / tickMs
	outboxLease    = 5
	scanOutboxes   = 16
	claimAlerts    = 16
	attachForTicks = 5000 / tickMs
	listOutboxes   = 64
	sweepSlots     = 16 // alertbox.lua's sweep_slots: the slots a scan hands out
	sweepAge       = 60
	sweepOutboxes  = 64
	silentSeconds  = 3600 // alertbox.lua's silent
)

// alerter is one configuration's budget alerts: its webhook, its counters,
// its owner and rule's registry, and the work waiting for the tick.
type alerter struct {
	rules         *config.Config
	redis         *scripts.Client
	start         *startState
	hook          config.Webhook
	cluster       string // the gateway's name for the webhook's cluster
	owner         string // config.AlertOwner
	registry      []byte // the rule's alert registry (cachekey.AlertRegistry)
	maxAgeSeconds int64  // budget_alerts.max_age_seconds: how long an alert is tried
	leastWait     int64  // seconds between two tries of an alert, at least: a try has timed out by then
	sent          proxywasm.MetricCounter
	failed        proxywasm.MetricCounter

	attaching []*newAlert                // alerts this replica made, whose body goes to Redis from the tick
	unlisted  map[string]*unlistedOutbox // outboxes to list in their owner's index, from the tick
	listing   bool                       // a listing in flight: one at a time
	nextList  uint64                     // the tick of the next listing, after one failed
	scanning  int                        // calls of a scan in flight (the scan, its claims and settles): one scan at a time
	nextScan  uint64                     // the tick of the next scan
	overflow  rateLimitedLog             // outboxes past maxUnlisted
}

// newAlert is an alert this replica made, waiting to get its body in its
// outbox.
type newAlert struct {
	outbox []byte
	member string // as the outbox holds it (scripts.AlertMember)
	body   []byte
	made   uint64 // the tick it was made at
	busy   bool   // its calls are in flight
}

// unlistedOutbox is an outbox this replica is to list in its owner's
// index: one it wrote an alert to, or one the sweep found.
type unlistedOutbox struct {
	bodies int    // its alerts whose body is being attached: listed once they have it, so that they are due at once
	since  uint64 // the tick it was added at
	sent   bool   // in the listing in flight
	again  bool   // added again since that was sent: listed again
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

// newAlerter returns the alerter of a configuration with budget_alerts,
// nil without; the start's tick works for it.
func newAlerter(rules *config.Config, redis *scripts.Client, s *startState) *alerter {
	if rules.Alerts == nil {
		return nil
	}
	hook := rules.Alerts.Webhook
	name := "webhook." + hook.ServiceName + ".metric."
	a := &alerter{
		rules:         rules,
		redis:         redis,
		start:         s,
		hook:          hook,
		cluster:       wrapper.FQDNCluster{FQDN: hook.ServiceName, Port: int64(hook.ServicePort)}.ClusterName(),
		owner:         rules.AlertOwner(),
		registry:      cachekey.AlertRegistry(rules.RuleName),
		maxAgeSeconds: rules.Alerts.MaxAgeSeconds,
		leastWait:     hook.TimeoutMs/1000 + 1,
		sent:          defineCounter(name + metricAlertSent),
		failed:        defineCounter(name + metricAlertFailed),
		unlisted:      map[string]*unlistedOutbox{},
	}
	s.alerters = append(s.alerters, a)
	return a
}

// alertCrossings makes the alert of each crossing of a call about the
// subjects (those of one of a request's groups, whose matches are
// matches): its body goes to its outbox, and the outbox to its index, from
// the tick.
func (pc PluginConfig) alertCrossings(matches []config.Match, subjects []budget.Subject, crossed []budget.Crossing) {
	a := pc.alerts
	if a == nil || len(crossed) == 0 {
		return
	}
	for _, c := range crossed {
		if c.Subject >= len(matches) {
			continue // not the request's group: never the case
		}
		w := subjects[c.Subject].Windows[c.Window]
		outbox := scripts.Outbox(subjects[c.Subject].Key, a.owner)
		member := scripts.AlertMember(c, scripts.OverrideName(w.Unit, w.Seconds))
		id := scripts.AlertID(outbox, member[:strings.IndexByte(member, '|')])
		body := alertJSON(pc.rules, id, quota.ShownNameOf(pc.rules, matches[c.Subject].WindowFrom(c.Window)), w.Unit, w.Seconds, c)
		log.Infof("budget alert: %s", body)
		a.add(&newAlert{outbox: outbox, member: member, body: body, made: pc.start.ticks})
	}
}

// matchesOf returns the matches of the admission's group whose subjects
// these are (nil: none).
func (a *admission) matchesOf(subjects []budget.Subject) []config.Match {
	for i := range a.groups {
		if g := &a.groups[i]; len(g.subjects) > 0 && len(subjects) > 0 && &g.subjects[0] == &subjects[0] {
			return g.matches
		}
	}
	return nil
}

// alertJSON is the body of the alert id of a crossing of a window (its
// unit and length) of subject s; the posted and logged name shows a
// credential as its fingerprint.
func alertJSON(rules *config.Config, id string, s quota.Name, unit config.Unit, seconds int64, c budget.Crossing) []byte {
	kind := quota.KindName(budget.KindOf(unit))
	body, _ := json.Marshal(alertBody{ID: id, RuleName: rules.RuleName, Subject: s, Kind: kind, Window: config.WindowName(seconds),
		Limit: quota.Amount(kind, c.Limit), Used: quota.Amount(kind, c.Used), ResetSeconds: c.Reset, Threshold: c.Threshold,
		Time: time.Unix(c.At, 0).UTC().Format(time.RFC3339)})
	return body
}

// alertFromKey is the body of an alert found in an outbox without one: the
// replica that made it stopped (or failed to reach Redis) before it gave
// it one. The subject is named from its key: the limit key's source and the
// value (a credential's fingerprint; a long value as the key holds it,
// hashed), without the rule item, which the key does not say. foreign: the
// alert is another owner's, whose reading of credentials is not known here:
// every value is fingerprinted.
func alertFromKey(rules *config.Config, outbox string, a scripts.Alert, foreign bool) []byte {
	var s quota.Name
	parts, tail, _ := cachekey.Parts(outbox)
	switch parts[1] {
	case config.GlobalThreshold, config.UnmatchedThreshold:
		s.Threshold, s.Key = parts[1], "*"
	default:
		s.Key, s.Value = parts[2], parts[3]
		if !strings.HasPrefix(s.Value, "#") && (foreign || rules.ReadsSecret(parts[1], parts[2])) {
			s.Value = config.Fingerprint(s.Value)
		}
	}
	if m, ok := strings.CutPrefix(tail, cachekey.ModelSeparator); ok {
		s.Model, _, _ = strings.Cut(m, cachekey.OutboxSuffix)
	}
	c := budget.Crossing{Threshold: a.Threshold, Used: a.Used, Limit: a.Limit, Reset: a.Reset, At: a.At}
	return alertJSON(rules, scripts.AlertID([]byte(outbox), a.Head), s, a.Unit, a.Seconds, c)
}

// add hands an alert this replica made to the tick, which gives it its
// body in Redis (past maxAttaching it waits there without one), then lists
// its outbox.
func (a *alerter) add(n *newAlert) {
	withBody := len(a.attaching) < maxAttaching
	if withBody {
		a.attaching = append(a.attaching, n)
	} else {
		log.Warnf("budget alert waits in Redis without its body: %d alerts wait already: %s", len(a.attaching), n.body)
	}
	a.toList(string(n.outbox), withBody)
}

// toList has the tick list an outbox in its owner's index, once its alert
// has its body when withBody; past maxUnlisted it is left to what the call
// that wrote its alert did, or to the next sweep.
func (a *alerter) toList(outbox string, withBody bool) {
	u := a.unlisted[outbox]
	if u == nil {
		if len(a.unlisted) >= maxUnlisted {
			if ok, more := a.overflow.allow(); ok {
				log.Warnf("budget alerts: %d outboxes wait to be listed already (%d more since the last line): %s is left to the sweep "+
					"(or, with redis.cluster false, to the listing of the call that wrote its alert)", len(a.unlisted), more, shownKey(outbox))
			}
			return
		}
		u = &unlistedOutbox{since: a.start.ticks}
		a.unlisted[outbox] = u
	}
	if withBody {
		u.bodies++
	}
	u.again = u.sent
}

// bodyDone notes that an alert of an outbox no longer waits for its body.
func (a *alerter) bodyDone(outbox []byte) {
	if u := a.unlisted[string(outbox)]; u != nil && u.bodies > 0 {
		u.bodies--
	}
}

// onTick gives the alerts this replica made their body, lists their
// outboxes, and scans the index when a scan is due and none is in flight.
func (a *alerter) onTick(tick uint64) {
	kept := a.attaching[:0]
	for _, n := range a.attaching {
		switch {
		case n.busy:
		case tick-n.made > attachForTicks:
			log.Warnf("budget alert's body not attached in %d s: it is sent with a body made from its key, without its rule item: %s",
				attachForTicks*tickMs/1000, n.body)
			a.bodyDone(n.outbox)
			continue
		default:
			a.sendAttach(n)
		}
		kept = append(kept, n)
	}
	clear(a.attaching[len(kept):])
	a.attaching = kept
	a.listSoon()
	if a.scanning == 0 && tick >= a.nextScan {
		a.nextScan = tick + scanTicks
		a.scan()
	}
}

// scanSoon scans now, or at the next tick when a scan is in flight (it may
// have missed what was just listed).
func (a *alerter) scanSoon() {
	if a.scanning > 0 {
		a.nextScan = 0
		return
	}
	a.scan()
}

// sendAttach attaches an alert's body in its outbox (due now then). Once
// Redis answers, attached or not (gone: delivered or dropped already, or
// attached by a try whose answer was lost), its outbox is listed.
func (a *alerter) sendAttach(n *newAlert) {
	n.busy = true
	failed := func(err error) {
		n.busy = false
		log.Debugf("budget alert not attached yet (%v): %s", err, n.body)
	}
	err := a.redis.AttachAlert(n.outbox, n.member, n.body, func(_ bool, err error) {
		if err != nil {
			failed(err)
			return
		}
		a.forget(n)
		a.bodyDone(n.outbox)
		a.listSoon()
	})
	if err != nil {
		failed(err)
	}
}

// forget takes an alert off the ones waiting to be attached.
func (a *alerter) forget(n *newAlert) {
	if i := slices.Index(a.attaching, n); i >= 0 {
		a.attaching = slices.Delete(a.attaching, i, i+1)
	}
}

// listSoon lists the outboxes ready now, unless a listing is in flight or
// the last failed less than a second ago.
func (a *alerter) listSoon() {
	if !a.listing && a.start.ticks >= a.nextList && len(a.unlisted) > 0 {
		a.list(a.start.ticks)
	}
}

// list lists at most listOutboxes of the outboxes waiting (those whose
// alerts have their body, or waited for it long enough) in their owners'
// indexes, in one call; one that fails is tried again a second later, and
// so on until it lands.
func (a *alerter) list(tick uint64) {
	var batch []string
	for outbox, u := range a.unlisted {
		if u.bodies > 0 && tick-u.since <= attachForTicks {
			continue
		}
		batch = append(batch, outbox)
		if len(batch) == listOutboxes {
			break
		}
	}
	if len(batch) == 0 {
		return
	}
	for _, outbox := range batch {
		a.unlisted[outbox].sent, a.unlisted[outbox].again = true, false
	}
	a.listing = true
	failed := func(err error) {
		a.listing = false
		a.nextList = a.start.ticks + scanTicks
		for _, outbox := range batch {
			if u := a.unlisted[outbox]; u != nil {
				u.sent = false
			}
		}
		log.Debugf("budget alerts: listing %d outboxes failed (%v): tried again in a second", len(batch), err)
	}
	err := a.redis.ListOutboxes(a.registry, batch, func(err error) {
		if err != nil {
			failed(err)
			return
		}
		a.listing = false
		for _, outbox := range batch {
			if u := a.unlisted[outbox]; u != nil && !u.again {
				delete(a.unlisted, outbox)
			} else if u != nil {
				u.sent = false
			}
		}
		a.listSoon() // what got ready meanwhile
		a.scanSoon()
	})
	if err != nil {
		failed(err)
	}
}

// sweeps reports whether this configuration's calls note the outboxes of
// their alerts for the sweep, which it then takes its share of: on a Redis
// Cluster, where the call that writes an alert cannot list it.
func (a *alerter) sweeps() bool { return a.rules.Redis.Cluster || a.redis.CrossSlotRefused() }

// scan leases the outboxes of the owner's index with alerts due and claims
// them; the outboxes of a silent owner it leased too are claimed to be
// given up, and the slots it handed out swept.
func (a *alerter) scan() {
	a.scanning++
	err := a.redis.ScanAlerts(a.registry, a.owner, scanOutboxes, outboxLease, a.hook.ServiceName, a.sweeps(), func(sc scripts.Scanned, err error) {
		defer a.callDone()
		if err != nil {
			log.Debugf("budget alerts: scanning %s failed: %v", a.registry, err)
			return
		}
		for _, outbox := range sc.Own {
			a.claim(outbox, sc.Token, "")
		}
		for _, outbox := range sc.Silent {
			a.claim(outbox, sc.Token, cmp.Or(sc.SilentWebhook, "an unknown webhook"))
		}
		if sc.Sweep >= 0 {
			a.sweep(sc.Sweep)
		}
	})
	if err != nil {
		a.callDone()
	}
}

// callDone notes the answer of one of a scan's calls.
func (a *alerter) callDone() { a.scanning-- }

// claim takes the alerts due from an outbox, settles the outbox in its
// index, counts and logs those dropped, and POSTs the others. silent ("":
// the outbox is the owner's) is the webhook of the silent owner whose
// outbox it is: its alerts due are all dropped.
func (a *alerter) claim(outbox, token, silent string) {
	maxAge := a.maxAgeSeconds
	if silent != "" {
		maxAge = -1
	}
	unlisted := cachekey.Unlisted(cachekey.Slot([]byte(outbox)), a.rules.RuleName)
	a.scanning++
	err := a.redis.ClaimAlerts(outbox, unlisted, maxAge, a.leastWait, claimAlerts, func(cl scripts.Claimed, err error) {
		defer a.callDone()
		if err != nil {
			log.Debugf("budget alerts: claiming %s failed: %v", shownKey(outbox), err)
			return
		}
		a.scanning++
		if err := a.redis.SettleOutbox(a.registry, outbox, token, cl.Next, func(error) { a.callDone() }); err != nil {
			a.callDone()
		}
		for _, d := range cl.Dropped {
			if silent != "" {
				log.Warnf("budget alert to %s given up: no replica of the configuration that made it (that webhook) has run for %d s: %s",
					silent, silentSeconds, a.bodyOf(outbox, d, true))
			} else {
				log.Warnf("budget alert to %s not delivered in %d s, given up: %s", a.cluster, a.maxAgeSeconds, a.bodyOf(outbox, d, false))
			}
			a.failed.Increment(1)
		}
		if silent != "" {
			return // another configuration's: never POSTed here
		}
		for _, t := range cl.Taken {
			a.post(outbox, t)
		}
	})
	if err != nil {
		a.callDone()
	}
}

// sweep lists the outboxes the slots from first on noted a minute ago or
// more, which no listing has reached: their replica stopped before it
// listed them, or never had the answer of the call that wrote the alert.
// A slot whose call fails is swept again at the next round.
func (a *alerter) sweep(first int) {
	for i := range sweepSlots {
		slot := uint16((first + i) % cachekey.Slots)
		err := a.redis.UnlistedOutboxes(cachekey.Unlisted(slot, a.rules.RuleName), sweepAge, sweepOutboxes, func(outboxes []string, err error) {
			if err != nil {
				log.Debugf("budget alerts: sweeping slot %d failed: %v", slot, err)
				return
			}
			for _, outbox := range outboxes {
				if _, ok := scripts.OutboxOwner(outbox); ok {
					log.Infof("budget alerts: %s was not listed: the sweep lists it", shownKey(outbox))
					a.toList(outbox, false)
				}
			}
		})
		if err != nil {
			log.Debugf("budget alerts: sweeping slot %d failed: %v", slot, err)
		}
	}
}

// shownKey is a key of a subject as logs show it: its value, which may be
// a credential, as a fingerprint (the key does not say whether it is one).
func shownKey(key string) string {
	s := budget.Subject{Key: []byte(key), Secret: true}
	return s.LogName()
}

// bodyOf is an alert's body: the one attached, else one made from its key
// (foreign: another owner's alert, see alertFromKey).
func (a *alerter) bodyOf(outbox string, alert scripts.Alert, foreign bool) []byte {
	if alert.Body != "" {
		return []byte(alert.Body)
	}
	if alert.Head == "" { // not the limiter's: shown as Redis holds it
		return []byte(alert.Raw)
	}
	return alertFromKey(a.rules, outbox, alert, foreign)
}

// post POSTs an alert to the webhook; when the webhook takes it (2xx), it
// is counted sent and taken out of its outbox; otherwise it waits there
// for its next try.
func (a *alerter) post(outbox string, alert scripts.Alert) {
	headers := [][2]string{{":method", "POST"}, {":path", a.hook.Path}, {":authority", a.hook.ServiceName},
		{"content-type", "application/json"}}
	body := a.bodyOf(outbox, alert, false)
	_, err := proxywasm.DispatchHttpCall(a.cluster, headers, body, nil, uint32(a.hook.TimeoutMs), func(numHeaders, _, _ int) {
		status := 0
		if headers, err := proxywasm.GetHttpCallResponseHeaders(); numHeaders > 0 && err == nil {
			for _, h := range headers {
				if h[0] == ":status" {
					status, _ = strconv.Atoi(h[1])
				}
			}
		}
		if status < 200 || status > 299 {
			log.Debugf("budget alert to %s failed (status %d), tried again later: %s", a.cluster, status, body)
			return
		}
		a.sent.Increment(1)
		notRemoved := func(err error) {
			if err != nil {
				log.Debugf("budget alert sent, but not taken out of %s (%v): it may be sent again", shownKey(outbox), err)
			}
		}
		if err := a.redis.RemoveAlert(outbox, alert.Raw, notRemoved); err != nil {
			notRemoved(err)
		}
	})
	if err != nil {
		log.Debugf("budget alert to %s failed (%v), tried again later: %s", a.cluster, err, body)
	}
}
