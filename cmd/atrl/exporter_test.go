package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// exporterRules limits API keys (a credential: x-api-key) by tokens,
// requests and dollars, with a per_model limit, a tier by its key (a
// counter per limit key), and teams (not a credential) by tokens a minute.
const exporterRules = `rule_name: chat
limit_overrides: true
pricing:
  "*":
    input: 1
    output: 2
rule_items:
  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "regexp:^sk-"
        token_per_minute: 1000
        token_per_hour: 5000
        query_per_minute: 100
        usd_per_day: 20
        max_concurrent_requests: 3
        per_model:
          - model: "gpt-4*"
            token_per_minute: 100
  - limit_by_header: x-tier
    limit_keys:
      - key: "regexp:^gold"
        token_per_day: 9000
  - limit_by_per_header: x-team
    limit_keys:
      - key: "*"
        token_per_minute: 500
`

// teamKey is the Redis key of a team of exporterRules.
func teamKey(team string) string {
	return string(cachekey.AppendSubject(nil, "chat", "limit_by_per_header", "x-team", team))
}

// runningExporter is atrl exporter run by a test, as from the command line.
type runningExporter struct {
	url    string // of /metrics
	stderr *syncbuf.Buffer
}

// startExporter runs `atrl exporter` with args (and -listen
// 127.0.0.1:0) until the test ends, when it checks that it stopped
// cleanly, as on SIGTERM.
func startExporter(t *testing.T, args ...string) *runningExporter {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	saved := exporterContext
	exporterContext = func() (context.Context, context.CancelFunc) { return ctx, stop }
	t.Cleanup(func() { exporterContext = saved })
	stdout, stderr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(append([]string{"exporter", "-listen", "127.0.0.1:0"}, args...), strings.NewReader(""), stdout, stderr)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case status := <-exited:
			assert.Equal(t, exitOK, status, "stopped as on SIGTERM; stderr:\n%s", stderr)
		case <-time.After(10 * time.Second):
			t.Error("atrl exporter did not stop")
		}
	})
	line := regexp.MustCompile(`^atrl exporter listening on (http://127\.0\.0\.1:\d+/metrics)\n$`)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m := line.FindStringSubmatch(stdout.String()); m != nil {
			return &runningExporter{url: m[1], stderr: stderr}
		}
		select {
		case status := <-exited:
			exited <- status // for the cleanup
			t.Fatalf("atrl exporter exited with status %d:\n%s", status, stderr)
		case <-time.After(10 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "atrl exporter did not listen; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// scrape is one scrape of /metrics, parsed by Prometheus's text parser.
type scrape struct {
	text     string
	families map[string]*dto.MetricFamily
}

func (e *runningExporter) scrape(t *testing.T) scrape {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Get(e.url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4"), resp.Header.Get("Content-Type"))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "%s", body)
	return scrape{text: string(body), families: families}
}

// value is the value of the series of family name with these labels (all
// of them); ok is false when there is none.
func (s scrape) value(name string, labels ...string) (v float64, ok bool) {
	f := s.families[name]
	if f == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		same := true
		for k, v := range want {
			same = same && got[k] == v
		}
		if !same {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// must is value, failing the test when the series is missing.
func (s scrape) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	require.True(t, ok, "no series %s%v in:\n%s", name, labels, s.text)
	return v
}

// subjects are the subject labels of a family's series.
func (s scrape) subjects(name string) []string {
	seen := map[string]bool{}
	var out []string
	if f := s.families[name]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "subject" && !seen[l.GetValue()] {
					seen[l.GetValue()] = true
					out = append(out, l.GetValue())
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// window is the labels of a budget series.
func window(subject, w string) []string {
	return []string{"rule", "chat", "subject", subject, "window", w}
}

// chargeAlerting charges tokens in a token window of the given limit as
// the plugin's charge does with budget_alerts at 80 and 100 %: an alert
// for each threshold the bucket goes past lands in the subject's outbox of
// the owner 1a2b3c4d.
func chargeAlerting(t *testing.T, b redistest.Backend, key string, tokens int64, window string, limit int64) {
	t.Helper()
	v := b.Do("EVAL", scripts.Limiter.Source, "1", key, "charge", "", "", "f#i1a2b3c4d80,100",
		strconv.FormatInt(tokens, 10), "0", "1", window, strconv.FormatInt(limit, 10))
	require.NotEqual(t, resp.Error, v.Type(), v.String())
}

// A scrape in the same second of Redis's clock as before and after it:
// then each window's reset is known to the second.
func scrapeWithinASecond(t *testing.T, r *redistest.Server, e *runningExporter) (scrape, int64) {
	t.Helper()
	for range 5 {
		before := r.Now()
		s := e.scrape(t)
		if r.Now() == before {
			return s, before
		}
	}
	t.Fatal("no scrape within one second of Redis's clock, five times")
	return scrape{}, 0
}

// The budgets of known charges, exact: tokens, requests and dollars (as
// dollars), each window's reset to the second, credentials by their
// fingerprints, the alerts in the outboxes, every family with HELP and
// TYPE.
func TestExporterServesTheBudgets(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, exporterRules)
	const apiKey = "sk-live-0123456789abcdef"
	key := subjectKey(apiKey)
	chargeUSD(t, r, key, 300, 9_870_000, "t60", "t3600", "u86400") // $0.00987
	charge(t, r, key, 0, 1, "q60")
	charge(t, r, key+":m:gpt-4o", 30, 0, "t60")
	charge(t, r, string(cachekey.AppendSubject(nil, "chat", "limit_by_header", "x-tier", "regexp:^gold")), 4500, 0, "t86400")
	charge(t, r, teamKey("blue"), 100, 0, "t60")
	chargeAlerting(t, r, teamKey("blue"), 500, "t60", 500) // 600 of 500: past 80 and 100 %, two alerts
	assert.Equal(t, int64(2), r.Int("ZCARD", teamKey("blue")+":!o:1a2b3c4d"))

	e := startExporter(t, "-config", cfg)
	s, now := scrapeWithinASecond(t, r, e)

	apiSubject := "item 0 " + config.Fingerprint(apiKey)
	assert.Equal(t, "item 0 sk-l...#", apiSubject[:len("item 0 sk-l...#")])
	assert.NotContains(t, s.text, apiKey, "a credential is never a label")
	minute, hour := float64(60-now%60), float64(3600-now%3600)
	day := float64(86400 - now%86400) // the calendar's day: UTC
	for _, tc := range []struct {
		kind, subject, window  string
		limit, used, remaining float64
		reset                  float64
	}{
		{"tokens", apiSubject, "minute", 1000, 300, 700, minute},
		{"tokens", apiSubject, "hour", 5000, 300, 4700, hour},
		{"requests", apiSubject, "minute", 100, 1, 99, minute},
		{"usd", apiSubject, "day", 20, 0.00987, 19.99013, day},
		{"tokens", apiSubject + " model gpt-4o", "minute", 100, 30, 70, minute},
		{"tokens", "item 1 regexp:^gold", "day", 9000, 4500, 4500, day},
		{"tokens", "item 2 blue", "minute", 500, 600, 0, minute},
	} {
		labels := window(tc.subject, tc.window)
		assert.Equal(t, tc.limit, s.must(t, "atrl_budget_limit_"+tc.kind, labels...), "%+v", tc)
		assert.Equal(t, tc.used, s.must(t, "atrl_budget_used_"+tc.kind, labels...), "%+v", tc)
		assert.Equal(t, tc.remaining, s.must(t, "atrl_budget_remaining_"+tc.kind, labels...), "%+v", tc)
		assert.Equal(t, tc.reset, s.must(t, "atrl_budget_reset_seconds", "rule", "chat", "subject", tc.subject, "kind", tc.kind, "window", tc.window), "%+v", tc)
	}
	assert.Contains(t, s.text, `atrl_budget_used_usd{rule="chat",subject="`+apiSubject+`",window="day"} 0.00987`+"\n", "dollars as written")
	assert.Equal(t, []string{apiSubject, apiSubject + " model gpt-4o", "item 1 regexp:^gold", "item 2 blue"}, s.subjects("atrl_budget_used_tokens"),
		"every subject on its own: fewer than -n; none other or unknown")
	assert.Equal(t, 4.0, s.must(t, "atrl_budget_subjects", "rule", "chat"))
	assert.Equal(t, 0.0, s.must(t, "atrl_budget_scan_truncated", "rule", "chat"))
	assert.Equal(t, 2.0, s.must(t, "atrl_alert_outbox_alerts", "rule", "chat"))
	assert.Equal(t, 1.0, s.must(t, "atrl_redis_up", "rule", "chat"))
	assert.Equal(t, 0.0, s.must(t, "atrl_exporter_scrape_failures_total", "rule", "chat"))
	assert.Greater(t, s.must(t, "atrl_exporter_read_duration_seconds", "rule", "chat"), 0.0)

	for name, f := range s.families {
		assert.NotEmpty(t, f.GetHelp(), "%s has no HELP", name)
		assert.Contains(t, s.text, "\n# TYPE "+name+" ", "%s has no TYPE", name)
	}
	for _, name := range []string{"atrl_budget_limit_tokens", "atrl_redis_up", "atrl_alert_outbox_alerts"} {
		assert.Equal(t, dto.MetricType_GAUGE, s.families[name].GetType(), name)
	}
	assert.Equal(t, dto.MetricType_COUNTER, s.families["atrl_exporter_scrape_failures_total"].GetType())

	// Read at each scrape: a charge shows at the next.
	charge(t, r, key, 200, 0, "t60")
	assert.Equal(t, 500.0, e.scrape(t).must(t, "atrl_budget_used_tokens", window(apiSubject, "minute")...))
	assert.Empty(t, e.stderr.String())
}

// The -n subjects nearest a limit, by the part of it they used, each on
// its own; the others summed per window under subject="other"; subjects
// whose limits are unknown summed under subject="unknown", used only.
func TestExporterBoundsTheSubjects(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, exporterRules)
	for team, used := range map[string]int64{"a": 100, "b": 200, "c": 300, "d": 400, "e": 450} {
		charge(t, r, teamKey(team), used, 0, "t60")
	}
	charge(t, r, subjectKey("sk-1"), 950, 0, "t60", "t3600") // 95 % of its minute
	charge(t, r, subjectKey("sk-2"), 10, 0, "t60", "t3600")  // 1 %: summed, its two windows apart
	charge(t, r, subjectKey("sk-"+strings.Repeat("x", 80)), 50, 0, "t60")
	charge(t, r, subjectKey("zz-1"), 20, 0, "t60") // no longer matches regexp:^sk-

	e := startExporter(t, "-config", cfg, "-n", "3")
	s := e.scrape(t)
	top := []string{"item 0 " + config.Fingerprint("sk-1"), "item 2 d", "item 2 e"}
	assert.Equal(t, append(append([]string{}, top...), "other", "unknown"), s.subjects("atrl_budget_used_tokens"))
	assert.Equal(t, 950.0, s.must(t, "atrl_budget_used_tokens", window(top[0], "minute")...))
	assert.Equal(t, 450.0, s.must(t, "atrl_budget_used_tokens", window("item 2 e", "minute")...))

	// a, b, c (500 each) and sk-2's minute (1000), and sk-2's hour alone.
	assert.Equal(t, 3*500.0+1000, s.must(t, "atrl_budget_limit_tokens", window("other", "minute")...))
	assert.Equal(t, 100+200+300+10.0, s.must(t, "atrl_budget_used_tokens", window("other", "minute")...))
	assert.Equal(t, 400+300+200+990.0, s.must(t, "atrl_budget_remaining_tokens", window("other", "minute")...))
	assert.Equal(t, 5000.0, s.must(t, "atrl_budget_limit_tokens", window("other", "hour")...))
	assert.Equal(t, 10.0, s.must(t, "atrl_budget_used_tokens", window("other", "hour")...))
	reset := s.must(t, "atrl_budget_reset_seconds", "rule", "chat", "subject", "other", "kind", "tokens", "window", "minute")
	assert.True(t, reset > 0 && reset <= 60, reset)

	assert.Equal(t, 50+20.0, s.must(t, "atrl_budget_used_tokens", window("unknown", "minute")...))
	_, ok := s.value("atrl_budget_limit_tokens", window("unknown", "minute")...)
	assert.False(t, ok, "limits unknown: used alone")
	assert.Equal(t, 9.0, s.must(t, "atrl_budget_subjects", "rule", "chat"), "all it found")
	assert.NotContains(t, s.text, "zz-1")

	// -scan-limit: the scan stops, and says so.
	s = startExporter(t, "-config", cfg, "-scan-limit", "2").scrape(t)
	assert.Equal(t, 1.0, s.must(t, "atrl_budget_scan_truncated", "rule", "chat"))
	// Two keys may be one subject's two windows: SCAN's order is Redis's
	// hash order, which changes with every redis-server.
	found := s.must(t, "atrl_budget_subjects", "rule", "chat")
	assert.True(t, found >= 1 && found <= 2, "the subjects of the 2 keys it looked at, not %v", found)
}

// Redis hung, then stopped: each scrape still answers, within
// -scrape-timeout, atrl_redis_up 0 and the failure counted; Redis back,
// the budgets are back.
func TestExporterKeepsServingWhenRedisIsDown(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 10)
	cfg := quotaConfig(t, r.Addr, exporterRules)
	charge(t, r, teamKey("blue"), 100, 0, "t60")
	e := startExporter(t, "-config", cfg, "-scrape-timeout", "500ms")
	blue := window("item 2 blue", "minute")
	s := e.scrape(t)
	assert.Equal(t, 1.0, s.must(t, "atrl_redis_up", "rule", "chat"))
	assert.Equal(t, 100.0, s.must(t, "atrl_budget_used_tokens", blue...))

	r.Hang()
	start := time.Now()
	s = e.scrape(t)
	r.Resume()
	assert.Less(t, time.Since(start), 3*time.Second, "within -scrape-timeout")
	assert.Equal(t, 0.0, s.must(t, "atrl_redis_up", "rule", "chat"))
	assert.Equal(t, 1.0, s.must(t, "atrl_exporter_scrape_failures_total", "rule", "chat"))
	_, ok := s.value("atrl_budget_used_tokens", blue...)
	assert.False(t, ok, "no budgets it could not read")
	assert.Contains(t, e.stderr.String(), `atrl exporter: rule "chat": redis `+r.Addr+": no answer before the scrape's end (-scrape-timeout)\n")

	s = e.scrape(t)
	assert.Equal(t, 1.0, s.must(t, "atrl_redis_up", "rule", "chat"), "Redis answers again")
	assert.Equal(t, 100.0, s.must(t, "atrl_budget_used_tokens", blue...))
	assert.Equal(t, 1.0, s.must(t, "atrl_exporter_scrape_failures_total", "rule", "chat"))

	r.Stop()
	for i := 2; i <= 3; i++ {
		s = e.scrape(t)
		assert.Equal(t, 0.0, s.must(t, "atrl_redis_up", "rule", "chat"))
		assert.Equal(t, float64(i), s.must(t, "atrl_exporter_scrape_failures_total", "rule", "chat"))
	}
	assert.Contains(t, e.stderr.String(), `atrl exporter: rule "chat": redis `+r.Addr+": connection refused\n")

	// Never reached from the start: it serves all the same.
	s = startExporter(t, "-config", quotaConfig(t, closedAddr(t), exporterRules)).scrape(t)
	assert.Equal(t, 0.0, s.must(t, "atrl_redis_up", "rule", "chat"))
	assert.Equal(t, 1.0, s.must(t, "atrl_exporter_scrape_failures_total", "rule", "chat"))
}

// On a Redis Cluster, the subjects of every master, a subject and its
// per_model limit (one slot) read in one call.
func TestExporterOnACluster(t *testing.T) {
	c := redistest.StartCluster(t)
	c.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, c.Addrs[0], exporterRules)
	values := map[string]string{}
	for i := 0; i < 200 && len(values) < len(c.Addrs); i++ {
		v := "sk-" + strconv.Itoa(i)
		if owner := c.Owner(subjectKey(v)); values[owner] == "" {
			values[owner] = v
		}
	}
	require.Len(t, values, len(c.Addrs))
	for i, addr := range c.Addrs {
		charge(t, c, subjectKey(values[addr]), int64(100*(i+1)), 0, "t60")
	}
	far := values[c.Addrs[2]]
	charge(t, c, subjectKey(far)+":m:gpt-4o", 40, 0, "t60")

	s := startExporter(t, "-config", cfg).scrape(t)
	for i, addr := range c.Addrs {
		assert.Equal(t, float64(100*(i+1)), s.must(t, "atrl_budget_used_tokens", window("item 0 "+config.Fingerprint(values[addr]), "minute")...))
	}
	assert.Equal(t, 40.0, s.must(t, "atrl_budget_used_tokens", window("item 0 "+config.Fingerprint(far)+" model gpt-4o", "minute")...))
	assert.Equal(t, 1.0, s.must(t, "atrl_redis_up", "rule", "chat"))
}

// A manifest's configurations are each a rule of their own; /healthz
// answers without Redis.
func TestExporterOfAManifest(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	charge(t, r, string(cachekey.AppendSubject(nil, "llm-chat", "limit_by_per_api_key", "", "sk-premium-1")), 1000, 0, "t60")
	e := startExporter(t, "-config", "../../tools/deploy/wasmplugin.yaml", "-redis", r.Addr)
	s := e.scrape(t)
	assert.Equal(t, 1.0, s.must(t, "atrl_redis_up", "rule", "consumers"))
	assert.Equal(t, 1.0, s.must(t, "atrl_redis_up", "rule", "llm-chat"))
	assert.Equal(t, 1000.0, s.must(t, "atrl_budget_used_tokens", "rule", "llm-chat", "subject", "item 0 "+config.Fingerprint("sk-premium-1"), "window", "minute"))
	assert.Equal(t, 200000.0, s.must(t, "atrl_budget_limit_tokens", "rule", "llm-chat", "subject", "item 0 "+config.Fingerprint("sk-premium-1"), "window", "minute"))

	resp, err := http.Get(strings.TrimSuffix(e.url, "/metrics") + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Configurations of one rule_name count in the same keys: exported once,
// not as the same series twice (which Prometheus refuses), and said so.
func TestExporterOfOneRuleTwice(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, exporterRules+"_rules_:\n  - _match_route_: [batch]\n    rule_name: chat\n"+
		"    global_threshold: {token_per_day: 10}\n    redis: {service_name: redis.static}\n")
	charge(t, r, teamKey("blue"), 100, 0, "t60")
	e := startExporter(t, "-config", cfg, "-redis", r.Addr)
	s := e.scrape(t)
	assert.Equal(t, 100.0, s.must(t, "atrl_budget_used_tokens", window("item 2 blue", "minute")...))
	assert.Len(t, s.families["atrl_redis_up"].Metric, 1)
	assert.Equal(t, `atrl exporter: _rules_[0] (route batch): rule "chat" counts in the keys of rule "chat": exported once, with rule "chat"'s limits`+"\n",
		e.stderr.String())
}

func TestExporterBadFlags(t *testing.T) {
	cfg := quotaConfig(t, closedAddr(t), exporterRules)
	for _, tc := range []struct{ args, stderr string }{
		{"exporter -config CFG -n 0", "atrl exporter: -n and -scan-limit must be at least 1"},
		{"exporter -config CFG -scrape-timeout 0s", "atrl exporter: -scrape-timeout must be positive"},
		{"exporter -config CFG -json", "atrl exporter: -json: the exporter serves Prometheus's text format"},
		{"exporter -config CFG extra", `atrl exporter: unexpected argument "extra"`},
		{"exporter", "atrl exporter: -config is required"},
	} {
		status, out, errOut := atrl("", strings.Fields(strings.Replace(tc.args, "CFG", cfg, 1))...)
		assert.Equal(t, exitBadArgs, status, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Contains(t, errOut, tc.stderr, tc.args)
	}
	status, _, errOut := atrl("", "exporter", "-config", cfg, "-listen", "127.0.0.1:99999")
	assert.Equal(t, exitFailed, status)
	assert.Contains(t, errOut, "atrl exporter: -listen: ")
	status, out, _ := atrl("", "help", "exporter")
	assert.Equal(t, exitOK, status)
	assert.Contains(t, out, "usage: atrl exporter -config FILE")
	assert.NotContains(t, out, "-json")
	assert.Contains(t, out, "Exit status: 0 stopped by SIGINT or SIGTERM")
}
