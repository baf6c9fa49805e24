package main

// atrl exporter: the subjects' budgets as Prometheus metrics. Each scrape
// reads Redis as atrl top does (a SCAN of each configuration's rule on
// every master, at most -scan-limit keys, then the status of the subjects
// found, many in one script call), within -scrape-timeout, and serves each
// window's limit, used, remaining and reset of the -n subjects nearest
// their limits, the others summed, with the alerts waiting in the
// outboxes and whether Redis answered. Subjects are named as atrl top
// names them, a credential by its fingerprint (config.Fingerprint).

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

const (
	// defaultExporterListen is loopback: the metrics name subjects, and
	// a deployment says where to serve them (0.0.0.0:9464 in
	// tools/deploy/exporter.yaml).
	defaultExporterListen = "127.0.0.1:9464"
	defaultExporterTopN   = 100
	// defaultScrapeTimeout is under Prometheus's default scrape_timeout
	// (10 s), so that a slow Redis is a failed read the exporter reports,
	// not a scrape Prometheus gives up on.
	defaultScrapeTimeout = 8 * time.Second
	// statusBatch is how many subjects one status call reads: on one
	// Redis server any of them, on a Redis Cluster those of one slot.
	// Each takes Redis a few microseconds a window.
	statusBatch = 100
	// shutdownGrace is how long a stopping exporter lets a scrape under
	// way finish.
	shutdownGrace = 2 * time.Second

	// subjectOther names the sum of the subjects past the -n nearest their
	// limits; subjectUnknown the sum of those whose limits are unknown.
	subjectOther   = "other"
	subjectUnknown = "unknown"
)

// exporterContext is the exporter's life: until SIGINT or SIGTERM.
// Tests replace it.
var exporterContext = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// The metric families. Budgets are gauges of one family per kind of
// window and quantity, in the kind's unit: tokens, requests, US dollars.
var (
	budgetLabels = []string{"rule", "subject", "window"}
	budgetDescs  = map[string]struct{ limit, used, remaining *prometheus.Desc }{}
	resetDesc    = prometheus.NewDesc("atrl_budget_reset_seconds",
		"Seconds until the window starts anew (for subject=\"other\", the latest of its subjects').",
		[]string{"rule", "subject", "kind", "window"}, nil)
	subjectsDesc = prometheus.NewDesc("atrl_budget_subjects",
		"Subjects counting in a current window of the rule, as the last scrape found them (those past -n are summed under subject=\"other\").",
		[]string{"rule"}, nil)
	truncatedDesc = prometheus.NewDesc("atrl_budget_scan_truncated",
		"1 when the last scrape stopped at -scan-limit keys: subjects in the keys not looked at are missing.",
		[]string{"rule"}, nil)
	outboxDesc = prometheus.NewDesc("atrl_alert_outbox_alerts",
		"Budget alerts waiting in the rule's outboxes in Redis to be delivered to the webhook.",
		[]string{"rule"}, nil)
	upDesc = prometheus.NewDesc("atrl_redis_up",
		"1 when the last scrape read the rule's Redis to the end, 0 when Redis could not be reached, failed or was too slow (-scrape-timeout).",
		[]string{"rule"}, nil)
	readSecondsDesc = prometheus.NewDesc("atrl_exporter_read_duration_seconds",
		"How long the last scrape took to read the rule's budgets from Redis.",
		[]string{"rule"}, nil)
)

func init() {
	for _, k := range []struct{ kind, what string }{
		{quota.KindTokens, "tokens"}, {quota.KindRequests, "requests"}, {quota.KindUSD, "US dollars"},
	} {
		budgetDescs[k.kind] = struct{ limit, used, remaining *prometheus.Desc }{
			limit: prometheus.NewDesc("atrl_budget_limit_"+k.kind,
				"The window's limit in "+k.what+" (an override when the subject has one; for subject=\"other\", the sum of its subjects').", budgetLabels, nil),
			used: prometheus.NewDesc("atrl_budget_used_"+k.kind,
				"What the subject used in "+k.what+" in the current window, as the plugin counts it (subject=\"other\": the subjects past -n, summed; subject=\"unknown\": those whose limits are unknown, summed).", budgetLabels, nil),
			remaining: prometheus.NewDesc("atrl_budget_remaining_"+k.kind,
				"What the window's limit leaves, in "+k.what+": limit less used, never below zero (subject=\"other\": summed).", budgetLabels, nil),
		}
	}
}

// runExporter is `atrl exporter`.
func runExporter(args []string, s streams) int {
	f := newFlagSet("atrl exporter", s, exporterHelp)
	listen := f.fs.String("listen", defaultExporterListen, "serve /metrics on `HOST:PORT`")
	n := f.fs.Int("n", defaultExporterTopN, "export the `N` subjects nearest their limits of each configuration, the others summed")
	scanLimit := f.fs.Int("scan-limit", defaultScanLimit, "look at no more than `N` keys of each configuration, each scrape")
	scrapeTimeout := f.fs.Duration("scrape-timeout", defaultScrapeTimeout, "read Redis within `DURATION` each scrape")
	rest, status, ok := parseArgs(f.fs, args)
	switch {
	case !ok:
		return status
	case len(rest) > 0:
		return unexpectedArg(f.fs, s, rest[0])
	case f.json:
		fmt.Fprintln(s.stderr, "atrl exporter: -json: the exporter serves Prometheus's text format")
		return exitBadArgs
	case *n < 1 || *scanLimit < 1:
		fmt.Fprintln(s.stderr, "atrl exporter: -n and -scan-limit must be at least 1")
		return exitBadArgs
	case *scrapeTimeout <= 0:
		fmt.Fprintf(s.stderr, "atrl exporter: -scrape-timeout must be positive, got %v\n", *scrapeTimeout)
		return exitBadArgs
	}
	qs, status := f.openAll(s)
	if qs == nil {
		return status
	}
	e := newExporter(distinctRules(qs, s.stderr), *n, *scanLimit, *scrapeTimeout, s.stderr)
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(s.stderr, "atrl exporter: -listen: %v\n", err)
		return exitFailed
	}
	ctx, stop := exporterContext()
	defer stop()
	fmt.Fprintf(s.stdout, "atrl exporter listening on http://%s/metrics\n", l.Addr())
	return e.serve(ctx, l)
}

// distinctRules keeps the first configuration of each rule_name: the
// configurations of one rule count in the same keys, which one read
// exports.
func distinctRules(qs []*quotaCommand, stderr io.Writer) []*quotaCommand {
	var out []*quotaCommand
	first := map[string]*quotaCommand{}
	for _, q := range qs {
		if f, ok := first[q.rules.RuleName]; ok {
			fmt.Fprintf(stderr, "atrl exporter: %s counts in the keys of %s: exported once, with %s's limits\n",
				configLabel(q.config, q.rules), configLabel(f.config, f.rules), configLabel(f.config, f.rules))
			continue
		}
		first[q.rules.RuleName] = q
		out = append(out, q)
	}
	return out
}

// exporter is a prometheus.Collector reading the budgets of its
// configurations from Redis at each scrape, one scrape at a time.
type exporter struct {
	qs            []*quotaCommand
	n, scanLimit  int
	scrapeTimeout time.Duration
	log           io.Writer

	mu       sync.Mutex // one read of Redis at a time
	failures *prometheus.CounterVec
	reg      *prometheus.Registry
}

func newExporter(qs []*quotaCommand, n, scanLimit int, scrapeTimeout time.Duration, log io.Writer) *exporter {
	e := &exporter{qs: qs, n: n, scanLimit: scanLimit, scrapeTimeout: scrapeTimeout, log: log}
	e.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "atrl_exporter_scrape_failures_total",
		Help: "Scrapes that could not read the rule's budgets from Redis: unreachable, an error, or no answer within -scrape-timeout.",
	}, []string{"rule"})
	for _, q := range qs {
		e.failures.GetMetricWithLabelValues(q.rules.RuleName) // 0 from the start (a rule name not UTF-8 has none)
	}
	e.reg = prometheus.NewRegistry()
	e.reg.MustRegister(e, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return e
}

// Describe sends every family's descriptor.
func (e *exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range budgetDescs {
		ch <- d.limit
		ch <- d.used
		ch <- d.remaining
	}
	for _, d := range []*prometheus.Desc{resetDesc, subjectsDesc, truncatedDesc, outboxDesc, upDesc, readSecondsDesc} {
		ch <- d
	}
	e.failures.Describe(ch)
}

// Collect reads each configuration's budgets from Redis, all within
// -scrape-timeout, and sends them; a read that fails sends its rule's
// atrl_redis_up 0 and counts a failure.
func (e *exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	deadline := time.Now().Add(e.scrapeTimeout)
	for _, q := range e.qs {
		rule := q.rules.RuleName
		start := time.Now()
		b, err := e.read(q, deadline)
		up := 1.0
		if err != nil {
			up = 0
			if c, err := e.failures.GetMetricWithLabelValues(rule); err == nil {
				c.Inc()
			}
			fmt.Fprintf(e.log, "atrl exporter: %s: %v\n", configLabel(q.config, q.rules), err)
		} else {
			b.send(ch, rule)
		}
		sendGauge(ch, upDesc, up, rule)
		sendGauge(ch, readSecondsDesc, time.Since(start).Seconds(), rule)
	}
	e.failures.Collect(ch)
}

// read reads a configuration's budgets, every command answered by the
// deadline.
func (e *exporter) read(q *quotaCommand, deadline time.Time) (*budgets, error) {
	opts := q.redis
	opts.deadline = deadline
	c, err := dialRedis(opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return readBudgets(c, q.rules, e.n, e.scanLimit)
}

// handler serves /metrics, and /healthz for a deployment's probes
// (without reading Redis).
func (e *exporter) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, // a series that cannot be written is logged, the others served
		ErrorLog:      log.New(e.log, "atrl exporter: ", 0),
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "atrl exporter: the subjects' budgets, read from Redis at each scrape, are at /metrics\n")
	})
	return mux
}

// serve serves on l until ctx ends, then lets a scrape under way finish.
func (e *exporter) serve(ctx context.Context, l net.Listener) int {
	srv := &http.Server{Handler: e.handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		fmt.Fprintf(e.log, "atrl exporter: %v\n", err)
		return exitFailed
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		srv.Close()
	}
	return exitOK
}

// budgetSeries is one window of one exported subject, its amounts in the
// window's unit (US dollars for money).
type budgetSeries struct {
	subject string
	kind    string // quota.KindTokens, KindRequests or KindUSD
	window  string // "minute"...
	limit   float64
	used    float64
	remain  float64
	reset   float64
	// hasLimit is false for subject="unknown": its used alone is known.
	hasLimit bool
}

// budgets is what one read of a configuration found.
type budgets struct {
	series    []budgetSeries
	subjects  int // subjects counting in a current window
	truncated bool
	alerts    int64 // in the outboxes
}

// rankedSubject is a subject whose limits are known, with its windows.
type rankedSubject struct {
	label    string
	fraction float64 // the largest part of a limit it used
	limits   []quota.Limit
}

// readBudgets reads the budgets of the configuration's subjects that count
// in a current window: the n nearest a limit (by the part of it they
// used) each on its own, the others summed per window under
// subject="other", those whose limits are unknown (their value hashed in
// Redis, or no longer in the configuration) summed under
// subject="unknown", used only.
func readBudgets(c *redisClient, rules *config.Config, n, scanLimit int) (*budgets, error) {
	scan, err := scanSubjects(c, rules, scanLimit)
	if err != nil {
		return nil, err
	}
	var matches []config.Match
	var known, unknown []budget.Subject
	for _, f := range scan.subjects {
		ms, _ := resolveFound(rules, f.key)
		if ms == nil {
			unknown = append(unknown, budget.Subject{Key: []byte(f.key.subject), Windows: f.windows})
			continue
		}
		m := ms[len(ms)-1]
		target := budget.SubjectOf(rules, m)
		target.Suffix = 0 // read alone: a key of its own
		matches, known = append(matches, m), append(known, target)
	}
	st, err := readStatuses(c, quota.Options(rules), known)
	if err != nil {
		return nil, err
	}
	// A subject whose limits are unknown is read with a limit of 1 it
	// never shows, as atrl top reads it.
	ust, err := readStatuses(c, scripts.Options{Sliding: rules.WindowType == config.Sliding, Calendar: &rules.Calendar}, unknown)
	if err != nil {
		return nil, err
	}
	b := &budgets{subjects: len(scan.subjects), truncated: scan.truncated}
	for _, key := range scan.outboxes {
		v, err := c.do([]byte(key), redisCommand("ZCARD", key))
		if err != nil {
			return nil, err
		}
		b.alerts += int64(v.Integer())
	}

	ranked := make([]rankedSubject, 0, len(known))
	for i := range known {
		s := quota.Describe(rules, matches[i:i+1], st[i:i+1], true).Subjects[0] // shown: a credential fingerprinted
		r := rankedSubject{label: exportedName(rules, s), fraction: -1}
		for _, l := range s.Limits {
			if l.Kind == quota.KindConcurrent { // requests in progress: not a budget
				continue
			}
			r.limits = append(r.limits, l)
			r.fraction = max(r.fraction, float64(l.Used)/float64(l.Limit))
		}
		if len(r.limits) > 0 {
			ranked = append(ranked, r)
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool {
		if ranked[i].fraction != ranked[j].fraction {
			return ranked[i].fraction > ranked[j].fraction
		}
		return ranked[i].label < ranked[j].label
	})
	other := newSums(subjectOther, true)
	named := map[string]bool{}
	for _, r := range ranked {
		// Two subjects of one name (their fingerprints alike) would be
		// one series twice, which Prometheus refuses: the second is summed.
		if len(named) == n || named[r.label] {
			for _, l := range r.limits {
				other.add(l.Kind, l.Window, l.Limit, l.Used, l.Remaining, l.ResetSeconds)
			}
			continue
		}
		named[r.label] = true
		for _, l := range r.limits {
			b.series = append(b.series, budgetSeries{subject: r.label, kind: l.Kind, window: l.Window,
				limit: amount(l.Kind, l.Limit), used: amount(l.Kind, l.Used), remain: amount(l.Kind, l.Remaining),
				reset: float64(l.ResetSeconds), hasLimit: true})
		}
	}
	unknownSums := newSums(subjectUnknown, false)
	for i := range unknown {
		for _, l := range ust[i] {
			unknownSums.add(quota.KindName(l.Kind), config.WindowName(l.Seconds), 0, l.Used, 0, 0)
		}
	}
	b.series = append(append(b.series, other.series()...), unknownSums.series()...)
	return b, nil
}

// exportedName names a subject as atrl top does ("item 0 sk-p...#9f86d081",
// "global_threshold model gpt-4o"), a credential by its fingerprint; a
// subject of an item whose requests share a counter per limit key
// (limit_by_header…) by its key, as the configuration shows it.
func exportedName(rules *config.Config, s quota.Subject) string {
	if s.RuleItem != nil && *s.RuleItem >= 0 && *s.RuleItem < len(rules.Items) && !rules.Items[*s.RuleItem].Type.PerValue() {
		s.Value = s.Key
	}
	return subjectLabel(s)
}

// amount is an amount of a limit of kind in its exported unit: a count,
// or for money nanodollars as US dollars.
func amount(kind string, n int64) float64 {
	if kind == quota.KindUSD {
		return float64(n) / config.NanoPerDollar
	}
	return float64(n)
}

// readStatuses reads the status of subjects (each with a key of its own),
// statusBatch to a call; on a Redis Cluster a call's subjects share a
// slot. statuses[i] are subjects[i]'s limits.
func readStatuses(c *redisClient, o scripts.Options, subjects []budget.Subject) ([][]budget.LimitStatus, error) {
	out := make([][]budget.LimitStatus, len(subjects))
	groups := map[uint16][]int{}
	var slots []uint16
	for i, s := range subjects {
		var slot uint16
		if c.cluster {
			slot = cachekey.Slot(s.Key)
		}
		if _, ok := groups[slot]; !ok {
			slots = append(slots, slot)
		}
		groups[slot] = append(groups[slot], i)
	}
	for _, slot := range slots {
		for idx := groups[slot]; len(idx) > 0; {
			batch := idx[:min(len(idx), statusBatch)]
			idx = idx[len(batch):]
			call := make([]budget.Subject, len(batch))
			for j, i := range batch {
				call[j] = subjects[i]
			}
			st, err := readStatus(c, o, call)
			if err != nil {
				return nil, err
			}
			for j, i := range batch {
				out[i] = st[j]
			}
		}
	}
	return out, nil
}

// sums adds up windows of several subjects into one series per window.
type sums struct {
	subject  string
	hasLimit bool
	by       map[[2]string]*[4]int64 // (kind, window) → limit, used, remaining, reset
	order    [][2]string
}

func newSums(subject string, hasLimit bool) *sums {
	return &sums{subject: subject, hasLimit: hasLimit, by: map[[2]string]*[4]int64{}}
}

// add adds a window's amounts, saturating: a sum past an int64 stays there
// (nanodollars of many large money limits).
func (s *sums) add(kind, window string, limit, used, remaining, reset int64) {
	k := [2]string{kind, window}
	v := s.by[k]
	if v == nil {
		v = new([4]int64)
		s.by[k] = v
		s.order = append(s.order, k)
	}
	v[0], v[1], v[2] = addSat(v[0], limit), addSat(v[1], used), addSat(v[2], remaining)
	v[3] = max(v[3], reset)
}

func addSat(a, b int64) int64 {
	if b > 0 && a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}

// series are the sums, a series per window.
func (s *sums) series() []budgetSeries {
	out := make([]budgetSeries, 0, len(s.order))
	for _, k := range s.order {
		v := s.by[k]
		out = append(out, budgetSeries{subject: s.subject, kind: k[0], window: k[1], limit: amount(k[0], v[0]), used: amount(k[0], v[1]),
			remain: amount(k[0], v[2]), reset: float64(v[3]), hasLimit: s.hasLimit})
	}
	return out
}

// send sends a read's metrics, of rule.
func (b *budgets) send(ch chan<- prometheus.Metric, rule string) {
	for _, s := range b.series {
		d, ok := budgetDescs[s.kind]
		if !ok {
			continue
		}
		sendGauge(ch, d.used, s.used, rule, s.subject, s.window)
		if !s.hasLimit {
			continue
		}
		sendGauge(ch, d.limit, s.limit, rule, s.subject, s.window)
		sendGauge(ch, d.remaining, s.remain, rule, s.subject, s.window)
		sendGauge(ch, resetDesc, s.reset, rule, s.subject, s.kind, s.window)
	}
	sendGauge(ch, subjectsDesc, float64(b.subjects), rule)
	truncated := 0.0
	if b.truncated {
		truncated = 1
	}
	sendGauge(ch, truncatedDesc, truncated, rule)
	sendGauge(ch, outboxDesc, float64(b.alerts), rule)
}

// sendGauge sends one gauge; labels that cannot be written (not UTF-8)
// send an invalid metric instead, which the handler logs and skips.
func sendGauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

func exporterHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl exporter -config FILE [-listen 127.0.0.1:9464] [-n 100] [-scan-limit 100000] [-scrape-timeout 8s] [flags]

Serves the subjects' budgets as Prometheus metrics at http://HOST:PORT/metrics,
read from the plugin's Redis at each scrape, as atrl top finds them: with
SCAN, on every master, at most -scan-limit of each configuration's keys.
For each subject counting in a current window, each window's limit, used,
remaining (tokens, requests, and money in US dollars) and reset in seconds:

  atrl_budget_used_tokens{rule="chat",subject="item 0 sk-p...#9f86d081",window="minute"} 900
  atrl_budget_limit_usd{rule="chat",subject="item 0 sk-p...#9f86d081",window="day"} 20

A subject is named as atrl top names it, a credential by its fingerprint,
never its value. The -n subjects nearest a limit (by the part of it they
used) of each configuration are exported on their own, the others summed
per window under subject="other"; subjects whose limits are unknown (their
value hashed in Redis, or no longer in the configuration) are summed under
subject="unknown", what they used alone. Also: atrl_alert_outbox_alerts
(budget alerts waiting to be delivered), atrl_budget_subjects,
atrl_budget_scan_truncated, atrl_redis_up, and the exporter's own
atrl_exporter_scrape_failures_total and atrl_exporter_read_duration_seconds,
each by rule.

When Redis cannot be reached, fails or does not answer within
-scrape-timeout, the scrape still answers: atrl_redis_up 0, the failure
counted, no budgets. /healthz answers without reading Redis. SIGINT or
SIGTERM stops it.

  atrl exporter -config tools/deploy/wasmplugin.yaml -listen 0.0.0.0:9464

Flags:

  -listen HOST:PORT
	where to serve /metrics (default 127.0.0.1:9464; port 0 picks one,
	printed on the first line)
  -n N
	the subjects of each configuration exported on their own (default 100)
  -scan-limit N
	look at no more than N of each configuration's keys (default 100000)
  -scrape-timeout DURATION
	read Redis within DURATION each scrape (default 8s, under Prometheus's
	default scrape_timeout)
`+exporterConnHelp())
}

// exporterConnHelp is connFlagsHelp for the exporter, which prints no
// JSON and runs until it is stopped.
func exporterConnHelp() string {
	h := strings.Replace(connFlagsHelp, "  -json\n\tprint JSON\n", "", 1)
	if i := strings.Index(h, "\nExit status:"); i >= 0 {
		h = h[:i] + "\nExit status: 0 stopped by SIGINT or SIGTERM; 1 it could not listen on -listen;\n2 a bad flag or configuration.\n"
	}
	return h
}
