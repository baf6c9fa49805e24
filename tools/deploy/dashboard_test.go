package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/tools/localgw/gateway"
	"github.com/tokenlimit/ai-token-ratelimit/tools/mockllm/llm"
)

// tools/deploy/grafana-dashboard.json and tools/deploy/prometheus-rules.yaml
// (issue 53, point 4): each is what Grafana and Prometheus take, and every
// query in them, and in docs/metrics.md's PromQL, names metrics and labels
// that the gateway (the plugin's /stats/prometheus, as a Higress gateway
// names them) or the budget exporter (atrl exporter) serves: the names are
// read off a live run of both, not from a list typed here.

const (
	dashboardFile = "tools/deploy/grafana-dashboard.json"
	rulesFile     = "tools/deploy/prometheus-rules.yaml"
	metricsDoc    = "docs/metrics.md"
)

// The parts of a Grafana dashboard (JSON model, schemaVersion 39) the tests read.
type grafanaDashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Collapsed  bool   `json:"collapsed"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID        string `json:"refId"`
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Instant      bool   `json:"instant"`
		Format       string `json:"format"`
	} `json:"targets"`
	GridPos struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"gridPos"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal(readRepoFile(t, dashboardFile), &d), dashboardFile)
	return d
}

// allPanels is every panel, those inside collapsed rows too.
func (d grafanaDashboard) allPanels() []grafanaPanel {
	var out []grafanaPanel
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// The parts of a Prometheus rule file: unknown keys are refused, as
// Prometheus refuses them.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name        string            `yaml:"name"`
	Interval    string            `yaml:"interval"`
	QueryOffset string            `yaml:"query_offset"`
	Limit       int               `yaml:"limit"`
	Labels      map[string]string `yaml:"labels"`
	Rules       []rule            `yaml:"rules"`
}

type rule struct {
	Record        string            `yaml:"record"`
	Alert         string            `yaml:"alert"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

func decodeRules(t *testing.T, doc []byte) ruleFile {
	t.Helper()
	var f ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&f))
	return f
}

// The dashboard is one Grafana imports: schemaVersion 39, a Prometheus
// data source chosen on import (the datasource variable, which every panel
// uses), unique panel ids, panels within the 24 columns and not over each
// other, each query with a refId of its own.
func TestDashboardIsWellFormed(t *testing.T) {
	d := loadDashboard(t)
	assert.Equal(t, 39, d.SchemaVersion)
	assert.NotEmpty(t, d.Title)
	assert.Regexp(t, `^[a-zA-Z0-9_-]{1,40}$`, d.UID, "Grafana's uid: at most 40 characters")
	var hasDatasource bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			hasDatasource = v.Type == "datasource" && v.Query == "prometheus"
		}
	}
	assert.True(t, hasDatasource, "a variable datasource of type datasource, query prometheus")

	known := []string{"row", "timeseries", "bargauge", "table", "stat", "gauge", "text", "heatmap", "piechart"}
	ids := map[int]string{}
	type rect struct {
		title          string
		x, y, x2, y2   int
		inCollapsedRow bool
	}
	var placed []rect
	for _, p := range d.allPanels() {
		assert.Contains(t, known, p.Type, "panel %q", p.Title)
		assert.NotEmpty(t, p.Title, "panel %d", p.ID)
		assert.Positive(t, p.ID, "panel %q", p.Title)
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q have the id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		assert.True(t, g.W >= 1 && g.H >= 1 && g.X >= 0 && g.Y >= 0 && g.X+g.W <= 24, "panel %q: gridPos %+v within 24 columns", p.Title, g)
		if p.Type == "row" {
			assert.Empty(t, p.Targets, "row %q", p.Title)
			assert.Equal(t, 24, g.W, "row %q", p.Title)
			assert.True(t, p.Collapsed || len(p.Panels) == 0, "row %q: an open row's panels follow it, not inside it", p.Title)
			continue
		}
		if assert.NotNil(t, p.Datasource, "panel %q", p.Title) {
			assert.Equal(t, "prometheus", p.Datasource.Type, "panel %q", p.Title)
			assert.Equal(t, "${datasource}", p.Datasource.UID, "panel %q: the data source chosen on import", p.Title)
		}
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		refs := map[string]bool{}
		for _, q := range p.Targets {
			assert.NotEmpty(t, q.RefID, "panel %q", p.Title)
			assert.False(t, refs[q.RefID], "panel %q: refId %s twice", p.Title, q.RefID)
			refs[q.RefID] = true
			assert.NotEmpty(t, strings.TrimSpace(q.Expr), "panel %q target %s", p.Title, q.RefID)
			if p.Type == "table" || p.Type == "bargauge" {
				assert.True(t, q.Instant, "panel %q target %s: a %s shows one value per series: an instant query", p.Title, q.RefID, p.Type)
			}
		}
	}
	// Top-level panels (open rows' included) do not overlap.
	for _, p := range d.Panels {
		g := p.GridPos
		r := rect{title: p.Title, x: g.X, y: g.Y, x2: g.X + g.W, y2: g.Y + g.H}
		for _, o := range placed {
			if r.x < o.x2 && o.x < r.x2 && r.y < o.y2 && o.y < r.y2 {
				t.Errorf("panels %q and %q overlap", o.title, r.title)
			}
		}
		placed = append(placed, r)
	}
}

// promTemplateFuncs stand for the functions Prometheus gives alert
// templates, so that a template can be parsed here as Prometheus parses it.
var promTemplateFuncs = func() template.FuncMap {
	m := template.FuncMap{}
	for _, name := range []string{"query", "first", "label", "value", "strvalue", "args", "reReplaceAll", "safeHtml",
		"match", "title", "toUpper", "toLower", "graphLink", "tableLink", "sortByLabel", "humanize", "humanize1024",
		"humanizeDuration", "humanizePercentage", "humanizeTimestamp", "toTime", "toDuration", "pathPrefix",
		"externalURL", "parseDuration", "stripPort", "stripDomain", "now"} {
		m[name] = func(...any) any { return nil }
	}
	return m
}()

// The rule file is one Prometheus loads (rule_files): known keys only,
// unique group names, each rule an alert or a recording rule with an
// expression, durations Prometheus reads, valid label names, alerts with
// a severity and a summary whose template Prometheus can parse.
func TestPrometheusRulesAreWellFormed(t *testing.T) {
	f := decodeRules(t, readRepoFile(t, rulesFile))
	require.NotEmpty(t, f.Groups)
	groups := map[string]bool{}
	alerts := map[string]bool{}
	labelName := regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	for _, g := range f.Groups {
		assert.NotEmpty(t, g.Name)
		assert.False(t, groups[g.Name], "group %q twice", g.Name)
		groups[g.Name] = true
		require.NotEmpty(t, g.Rules, "group %q", g.Name)
		for _, d := range []string{g.Interval, g.QueryOffset} {
			if d != "" {
				_, err := model.ParseDuration(d)
				assert.NoError(t, err, "group %q", g.Name)
			}
		}
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			assert.True(t, (r.Alert == "") != (r.Record == ""), "%s: an alert or a record, not both", name)
			assert.NotEmpty(t, strings.TrimSpace(r.Expr), name)
			if r.Record != "" {
				assert.Regexp(t, `^[a-zA-Z_:][a-zA-Z0-9_:]*$`, r.Record)
				continue
			}
			assert.False(t, alerts[r.Alert], "alert %s twice", r.Alert)
			alerts[r.Alert] = true
			for _, d := range []string{r.For, r.KeepFiringFor} {
				if d != "" {
					_, err := model.ParseDuration(d)
					assert.NoError(t, err, "%s: %q", name, d)
				}
			}
			assert.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "%s: its severity", name)
			assert.NotEmpty(t, r.Annotations["summary"], name)
			for k, v := range r.Labels {
				assert.Regexp(t, labelName, k, name)
				assert.NotContains(t, v, "{{", "%s: a label with a template: each value is an alert of its own", name)
			}
			for k, v := range r.Annotations {
				assert.Regexp(t, labelName, k, name)
				// Prometheus's header: $labels, $externalLabels, $value.
				_, err := template.New(k).Funcs(promTemplateFuncs).Option("missingkey=zero").
					Parse("{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}" + v)
				assert.NoError(t, err, "%s: annotation %s", name, k)
			}
		}
	}
}

// docs/metrics.md's PrometheusRule for the Prometheus Operator is made
// from the rule file by the documented command, and holds its groups as
// they are.
func TestPrometheusRuleWrapperInDocs(t *testing.T) {
	doc := string(readRepoFile(t, metricsDoc))
	m := regexp.MustCompile("(?s)```sh\n(\\{ printf 'apiVersion: monitoring\\.coreos\\.com/v1.*?\\}) \\| kubectl apply -f -\n```").FindStringSubmatch(doc)
	require.NotNil(t, m, "%s: the command that wraps %s in a PrometheusRule", metricsDoc, rulesFile)
	cmd := exec.Command("sh", "-c", m[1])
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	require.NoError(t, err, m[1])
	var wrapped struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string            `yaml:"name"`
			Namespace string            `yaml:"namespace"`
			Labels    map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec yaml.Node `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(out, &wrapped), "%s", out)
	assert.Equal(t, "monitoring.coreos.com/v1", wrapped.APIVersion)
	assert.Equal(t, "PrometheusRule", wrapped.Kind)
	assert.NotEmpty(t, wrapped.Metadata.Name)
	spec, err := yaml.Marshal(&wrapped.Spec)
	require.NoError(t, err)
	assert.Equal(t, decodeRules(t, readRepoFile(t, rulesFile)), decodeRules(t, spec), "spec is the rule file")
}

// promQuery is one PromQL expression of the dashboard, the rule file or
// the docs, with the labels its surroundings read from its result
// (legendFormat's {{label}}, an alert's $labels.label).
type promQuery struct {
	where  string
	expr   string
	labels []string
}

var (
	legendLabel   = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	templateLabel = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
)

func submatches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// allQueries is every PromQL expression: the dashboard's targets (in
// collapsed rows too), the rule file's expressions, and each line of
// docs/metrics.md's promql blocks.
func allQueries(t *testing.T) []promQuery {
	t.Helper()
	var qs []promQuery
	for _, p := range loadDashboard(t).allPanels() {
		for _, q := range p.Targets {
			qs = append(qs, promQuery{fmt.Sprintf("%s: panel %q, target %s", dashboardFile, p.Title, q.RefID), q.Expr,
				submatches(legendLabel, q.LegendFormat)})
		}
	}
	for _, g := range decodeRules(t, readRepoFile(t, rulesFile)).Groups {
		for _, r := range g.Rules {
			var labels []string
			for _, v := range slices.Sorted(maps.Values(r.Annotations)) {
				labels = append(labels, submatches(templateLabel, v)...)
			}
			qs = append(qs, promQuery{fmt.Sprintf("%s: %s%s", rulesFile, r.Alert, r.Record), r.Expr, labels})
		}
	}
	inBlock := false
	for i, line := range strings.Split(string(readRepoFile(t, metricsDoc)), "\n") {
		switch {
		case line == "```promql":
			inBlock = true
		case strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			qs = append(qs, promQuery{fmt.Sprintf("%s:%d", metricsDoc, i+1), line, nil})
		}
	}
	return qs
}

// servedFamilies are the names a Prometheus scraping a page can query, each
// with the label names its series carry: a histogram's as its _bucket (with
// le), _sum and _count.
type servedFamilies map[string]map[string]bool

func (s servedFamilies) add(families map[string]*dto.MetricFamily) {
	for name, f := range families {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		if f.GetType() != dto.MetricType_HISTOGRAM {
			s[name] = labels
			continue
		}
		bucket := maps.Clone(labels)
		bucket["le"] = true
		s[name+"_bucket"], s[name+"_sum"], s[name+"_count"] = bucket, labels, labels
	}
}

// scrapeLabels are the labels Prometheus adds to every series it scrapes.
var scrapeLabels = []string{"job", "instance"}

// check reports every name of q that s does not serve, every __name__
// regex that matches none of its names, and every label that none of the
// series q names carries.
func (s servedFamilies) check(t *testing.T, q promQuery) {
	t.Helper()
	refs, err := parsePromQLRefs(q.expr)
	if !assert.NoError(t, err, "%s: %s", q.where, q.expr) {
		return
	}
	labels := map[string]bool{}
	for _, l := range scrapeLabels {
		labels[l] = true
	}
	served := slices.Sorted(maps.Keys(s))
	// like lists the served names that start as name does (route_, redis_, atrl_…).
	like := func(name string) string {
		prefix, _, _ := strings.Cut(name, "_")
		var out []string
		for _, n := range served {
			if strings.HasPrefix(n, prefix+"_") {
				out = append(out, n)
			}
		}
		return strings.Join(out, " ")
	}
	for _, m := range refs.metrics {
		if s[m] == nil {
			t.Errorf("%s: %s is served by neither the gateway nor the exporter\nexpr: %s\nserved: %s", q.where, m, q.expr, like(m))
			continue
		}
		maps.Copy(labels, s[m])
	}
	for _, re := range refs.nameRegexps {
		rx, err := regexp.Compile("^(?:" + re + ")$")
		if !assert.NoError(t, err, "%s: %s", q.where, re) {
			continue
		}
		var matched []string
		for _, name := range served {
			if rx.MatchString(name) {
				matched = append(matched, name)
				maps.Copy(labels, s[name])
			}
		}
		if len(matched) == 0 {
			t.Errorf("%s: __name__=~%q matches no metric the gateway or the exporter serves\nexpr: %s\nserved: %s", q.where, re, q.expr, like(re))
		}
	}
	for _, l := range append(refs.labels, q.labels...) {
		if !labels[l] {
			t.Errorf("%s: label %q is on none of the series it names (%s)\nexpr: %s", q.where, l, strings.Join(slices.Sorted(maps.Keys(labels)), ", "), q.expr)
		}
	}
}

// dashboardConfig limits consumers (x-mse-consumer, as Higress's auth sets
// it) so that a few requests make every family of the plugin appear: one
// with room (tokens, dollars and requests), and one per kind of limit that
// rejects; tokens reserved and priced; a short Redis timeout and a breaker
// that opens after two failures.
const dashboardConfig = `{"rule_name": "dashboard",
	"token_reservation": {"enabled": true},
	"pricing": {"*": {"input": 2.5, "output": 10}},
	"rule_items": [{"limit_by_consumer": "", "limit_keys": [
		{"key": "team-a", "token_per_day": 1000000, "usd_per_day": 100, "query_per_minute": 1000},
		{"key": "few-tokens", "token_per_day": 5},
		{"key": "few-dollars", "token_per_day": 1000000, "usd_per_day": 0.000001},
		{"key": "one-a-minute", "query_per_minute": 1},
		{"key": "one-at-a-time", "max_concurrent_requests": 1}]}],
	"redis": {"service_name": "redis.static", "timeout": 150, "breaker_failures": 2, "breaker_probe_ms": 50}}`

// scrape GETs a metrics page and parses it with Prometheus's text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "%s:\n%s", url, body)
	return families
}

// counterValue is a counter's value summed over its series; 0 when absent.
func counterValue(families map[string]*dto.MetricFamily, name string) float64 {
	var v float64
	for _, m := range families[name].GetMetric() {
		v += m.GetCounter().GetValue()
	}
	return v
}

// runGatewayScenario runs the plugin (make build's main.wasm) in the local
// gateway before the mock LLM, on a real Redis, through requests that make
// every family of the plugin appear, and returns its /stats/prometheus.
func runGatewayScenario(t *testing.T, redis *redistest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	held := make(chan struct{}, 1)
	mock := httptest.NewServer(llm.New(llm.Options{Observe: func(r *http.Request) {
		if r.Header.Get("x-test-hold") != "" {
			held <- struct{}{}
		}
	}}))
	defer mock.Close()
	var log syncbuf.Buffer
	g, err := gateway.New(gateway.Options{Wasm: pluginWasm(t), Config: []byte(dashboardConfig), Upstream: mock.URL,
		Redis: redis.Addr, Log: &log, AccessLog: true})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	defer func() {
		if t.Failed() {
			t.Logf("the gateway's log:\n%s", log.String())
		}
	}()

	client := &http.Client{Timeout: 30 * time.Second}
	send := func(path, model, consumer string, headers ...string) int {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"max_tokens":50,"messages":[{"role":"user","content":"What is the answer?"}]}`, model)
		req, err := http.NewRequest(http.MethodPost, front.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("content-type", "application/json")
		req.Header.Set("x-mse-consumer", consumer)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	const chat, messages = "/v1/chat/completions", "/v1/messages"
	redis.AvoidWindowEdge(60, 10) // one-a-minute's two requests in one minute

	// Usage reported: cache reads and reasoning (OpenAI), a cache write
	// (Anthropic); then a response without usage, charged an estimate.
	require.Equal(t, 200, send(chat, "gpt-4o", "team-a", llm.HeaderUsage, "1000,120,300,0,50"))
	require.Equal(t, 200, send(messages, "claude-sonnet-4-5", "team-a", llm.HeaderUsage, "1000,100,0,200"))
	require.Equal(t, 200, send(chat, "gpt-4o-mini", "team-a", llm.HeaderUsage, llm.UsageNone))

	// A 429 of each kind of limit.
	require.Equal(t, 429, send(chat, "gpt-4o", "few-tokens"), "the reservation is over 5 tokens")
	require.Equal(t, 429, send(chat, "gpt-4o", "few-dollars"), "the reservation priced is over a millionth of a dollar")
	require.Equal(t, 200, send(chat, "gpt-4o", "one-a-minute", llm.HeaderUsage, "10,5"))
	require.Equal(t, 429, send(chat, "gpt-4o", "one-a-minute", llm.HeaderUsage, "10,5"), "one request a minute")
	first := make(chan int, 1)
	go func() {
		first <- send(chat, "gpt-4o", "one-at-a-time", llm.HeaderUsage, "10,5", llm.HeaderDelay, "300", llm.HeaderEvents, "2", "x-test-hold", "1")
	}()
	select {
	case <-held:
	case code := <-first:
		t.Fatalf("the first request of one-at-a-time ended (%d) before the upstream held it", code)
	case <-time.After(20 * time.Second):
		t.Fatal("the first request of one-at-a-time never reached the upstream")
	}
	require.Equal(t, 429, send(chat, "gpt-4o", "one-at-a-time", llm.HeaderUsage, "10,5"), "one request at a time")
	require.Equal(t, 200, <-first)

	// Redis hangs: admissions time out (failure_mode allow lets them
	// through), the breaker opens; Redis answers again, a probe closes it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, g.WaitIdle(ctx))
	redis.Hang()
	t.Cleanup(redis.Resume)
	for range 3 {
		require.Equal(t, 200, send(chat, "gpt-4o", "team-a", llm.HeaderUsage, "10,5"), "failure_mode allow")
	}
	redis.Resume()
	require.NoError(t, g.WaitIdle(ctx))

	families := scrape(t, front.URL+gateway.MetricsPath)
	var breaker float64
	for name := range families {
		if strings.HasSuffix(name, "_metric_token_ratelimit_breaker_open_count") {
			breaker += counterValue(families, name)
		}
	}
	require.GreaterOrEqual(t, breaker, 1.0, "the breaker opened")
	require.GreaterOrEqual(t, counterValue(families, "route_upstream_model_consumer_metric_token_ratelimit_redis_failure_count"), 2.0)
	return families
}

// runExporter builds atrl, runs `atrl exporter` with the configuration on
// Redis, and returns its /metrics.
func runExporter(t *testing.T, redis *redistest.Server, config string) map[string]*dto.MetricFamily {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin.json")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	url, stderr := startExporter(t, buildAtrl(t), nil, "exporter", "-config", path, "-listen", "127.0.0.1:0", "-redis", redis.Addr)
	families := scrape(t, url+"/metrics")
	require.Empty(t, stderr.String())
	return families
}

// buildAtrl builds cmd/atrl into a temporary directory.
func buildAtrl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "atrl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/atrl")
	build.Dir = repoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/atrl:\n%s", out)
	return bin
}

// startExporter runs bin with args (an `atrl exporter` whose -listen has
// port 0) and env (nil: PATH alone), and returns its base URL once it
// says it listens, and its standard error. The test's end stops it.
func startExporter(t *testing.T, bin string, env []string, args ...string) (string, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		m := regexp.MustCompile(`^atrl exporter listening on (http://127\.0\.0\.1:\d+)/metrics$`).FindStringSubmatch(line)
		require.NotNil(t, m, "%q\n%s", line, stderr.String())
		return m[1], stderr
	case <-time.After(30 * time.Second):
		t.Fatalf("atrl exporter did not listen:\n%s", stderr.String())
		return "", nil
	}
}

// Issue 53, point 4: every query of the dashboard, the rule file and the
// docs names metrics that the gateway or the exporter serves, with labels
// their series carry, as read off a live run: the plugin (main.wasm) in
// the local gateway, which names and labels its metrics as a Higress
// gateway does, before the mock LLM, on a real Redis, through requests
// that make every family appear (usage with cache reads and writes and
// reasoning, an estimate, a 429 of each kind of limit, a Redis that hangs
// until the breaker opens); and atrl exporter on the same Redis and
// configuration. Histograms count as their _bucket, _sum and _count.
func TestDashboardAndRulesQueryServedMetrics(t *testing.T) {
	redis := redistest.Start(t)
	served := servedFamilies{}
	served.add(runGatewayScenario(t, redis))
	served.add(runExporter(t, redis, dashboardConfig))

	t.Logf("served: %s", strings.Join(slices.Sorted(maps.Keys(served)), " "))
	queries := allQueries(t)
	require.NotEmpty(t, queries)
	var sources []string
	for _, q := range queries {
		served.check(t, q)
		file, _, _ := strings.Cut(q.where, ":")
		if !slices.Contains(sources, file) {
			sources = append(sources, file)
		}
	}
	assert.Equal(t, []string{dashboardFile, rulesFile, metricsDoc}, sources, "queries from each")
}
