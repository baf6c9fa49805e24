package config

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Budget alerts: budget_alerts names percentages of a window's limit
// (thresholds) and a webhook. When a subject's window first reaches one in
// a bucket, the limiter's scripts note it in Redis (once for all the
// gateway's replicas) and the plugin POSTs the alert to the webhook, from
// its tick, never holding a request. A limit key marked soft (LimitKey.Soft)
// counts and alerts but never rejects.

// Defaults and bounds of budget_alerts.
const (
	DefaultWebhookTimeoutMs = 1000
	DefaultWebhookPort      = 80
	maxWebhookTimeoutMs     = 60_000
	maxThreshold            = 100
	DefaultAlertAgeSeconds  = 3600      // an hour of tries
	maxAlertAgeSeconds      = 7 * 86400 // a week
)

// Alerts is budget_alerts.
type Alerts struct {
	// Thresholds are the percentages of a limit that alert, distinct,
	// between 1 and 100, sorted.
	Thresholds []int64
	Webhook    Webhook
	// MaxAgeSeconds is max_age_seconds: how long an alert the webhook
	// fails to take is tried again before it is given up.
	MaxAgeSeconds int64
}

// Webhook is budget_alerts.webhook: where alerts are POSTed, a cluster the
// gateway knows, as redis.service_name is.
type Webhook struct {
	ServiceName string
	ServicePort int // DefaultWebhookPort when not set
	Path        string
	TimeoutMs   int64
}

// alertFields is the table of budget_alerts.
var alertFields = fields[Alerts]{
	required(customField("thresholds", readThresholds)),
	required(objectField("webhook", webhookFields, func(a *Alerts) *Webhook { return &a.Webhook })),
	intField("max_age_seconds", 1, maxAlertAgeSeconds, func(a *Alerts, n int64) { a.MaxAgeSeconds = n }),
}

// webhookFields is the table of budget_alerts.webhook.
var webhookFields = fields[Webhook]{
	required(nonEmptyStringField("service_name", func(w *Webhook, s string) { w.ServiceName = s })),
	intField("service_port", 1, 65535, func(w *Webhook, n int64) { w.ServicePort = int(n) }),
	required(customField("path", readWebhookPath)),
	intField("timeout", 1, maxWebhookTimeoutMs, func(w *Webhook, n int64) { w.TimeoutMs = n }),
}

// readBudgetAlerts reads budget_alerts.
func readBudgetAlerts(c *Config, path string, v gjson.Result) error {
	a := &Alerts{Webhook: Webhook{ServicePort: DefaultWebhookPort, TimeoutMs: DefaultWebhookTimeoutMs}, MaxAgeSeconds: DefaultAlertAgeSeconds}
	if err := alertFields.read(a, path, v); err != nil {
		return err
	}
	c.Alerts = a
	return nil
}

// readThresholds reads budget_alerts.thresholds: a non-empty array of
// distinct integer percentages, 1 to 100, kept sorted.
func readThresholds(a *Alerts, path string, v gjson.Result) (err error) {
	a.Thresholds, err = readNonEmptyArray(path, v, func(p string, v gjson.Result) (int64, error) {
		n, err := readInt(p, v, 1, maxThreshold)
		if err == nil && slices.Contains(a.Thresholds, n) {
			err = fieldErr(p, "duplicate threshold ", strconv.FormatInt(n, 10))
		}
		a.Thresholds = append(a.Thresholds, n) // what the next element is compared with
		return n, err
	})
	slices.Sort(a.Thresholds)
	return err
}

// readWebhookPath reads budget_alerts.webhook.path: an absolute path, sent
// as it is.
func readWebhookPath(w *Webhook, path string, v gjson.Result) error {
	s, err := readNonEmptyString(path, v)
	if err == nil && (s[0] != '/' || strings.ContainsAny(s, " \t\r\n")) {
		err = fieldErr(path, "must be a path starting with '/', without spaces, got ", quote(s))
	}
	w.Path = s
	return err
}

// AlertOwner names the configuration's budget alerts in Redis (their
// outboxes and index, see cachekey.AlertIndex): 8 hex digits of a hash of
// what decides where an alert goes and how its body names a subject: the
// webhook's service, port and path, and secret_headers and secret_params
// (which values are credentials, see ReadsSecret). Configurations that
// share a rule_name and these deliver each other's alerts; others never do.
// "" without budget_alerts.
func (c *Config) AlertOwner() string {
	if c.Alerts == nil {
		return ""
	}
	h := sha256.New()
	w := c.Alerts.Webhook
	h.Write([]byte(w.ServiceName + "\x00" + strconv.Itoa(w.ServicePort) + "\x00" + w.Path))
	for _, list := range [][]string{c.SecretHeaders, c.SecretParams} {
		h.Write([]byte{1})
		for _, s := range slices.Sorted(slices.Values(list)) {
			h.Write([]byte("\x00" + s))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:4])
}
