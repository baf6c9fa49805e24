package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
)

// parsePrometheus parses a page with the Prometheus text parser, names as
// Prometheus has always required them.
func parsePrometheus(t *testing.T, page string) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(page))
	require.NoError(t, err, "the page:\n%s", page)
	return families
}

// labelsOf is a metric's labels, as a map.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Issue 53, point 2: the page is what a Higress gateway's Envoy shows of
// the same proxy-wasm metrics (prometheus.go cites the sources): the
// wasmcustom namespace stripped, route, cluster, model and consumer taken
// out of the name as ai_route, ai_cluster, ai_model and ai_consumer (the
// bootstrap's stats_tags), the rest of the name with _ for every other
// character; names without them have no labels; a name starting with a
// digit is left out; counters, gauges, then histograms, each family sorted;
// a histogram in Envoy's default buckets, cumulated.
func TestPrometheusPageNamesAndLabelsAsHigress(t *testing.T) {
	s := newSamples()
	for _, v := range []uint64{0, 3, 7000} {
		s.record(4, v)
	}
	page := string(renderPrometheus([]wasmhost.Metric{
		{ID: 0, Name: "route.r1.upstream.outbound|443||llm.dns.model.gpt-4o.consumer.bob.metric.token_ratelimit_count", Type: wasmhost.Counter, Value: 1},
		{ID: 1, Name: "route.r1.upstream.outbound|443||llm.dns.model.gpt-4o.consumer.alice.metric.token_ratelimit_count", Type: wasmhost.Counter, Value: 3},
		{ID: 2, Name: "webhook.alerts.static.metric.token_ratelimit_alert_sent_count", Type: wasmhost.Counter, Value: 2},
		{ID: 3, Name: "token_ratelimit_stream_usage_injected_count", Type: wasmhost.Counter, Value: 5},
		{ID: 4, Name: `route.r1.upstream.c.model.m"x.consumer.none.metric.redis_latency_ms`, Type: wasmhost.Histogram, Value: 7000},
		{ID: 5, Name: "9lives", Type: wasmhost.Gauge, Value: 1},
		{ID: 6, Name: "a.level", Type: wasmhost.Gauge, Value: 4},
		{ID: 7, Name: "route.r1.upstream.c.model.m.consumer.none.metric.empty_ms", Type: wasmhost.Histogram},
	}, s))
	const route = `ai_route="r1",ai_cluster="outbound|443||llm.dns",ai_model="gpt-4o",ai_consumer=`
	const hist = `route_upstream_model_consumer_metric_redis_latency_ms`
	const histLabels = `ai_route="r1",ai_cluster="c",ai_model="m\"x",ai_consumer="none"`
	const empty = `route_upstream_model_consumer_metric_empty_ms`
	const emptyLabels = `ai_route="r1",ai_cluster="c",ai_model="m",ai_consumer="none"`
	help := func(family, typ, pattern string) string {
		return "# HELP " + family + " The plugin's " + typ + " " + pattern + ", as a Higress gateway shows it (docs/metrics.md).\n" +
			"# TYPE " + family + " " + typ + "\n"
	}
	buckets := func(name, labels string, counts ...int) string {
		var b strings.Builder
		for i, le := range []string{"0.5", "1", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000", "10000", "30000",
			"60000", "300000", "600000", "1800000", "3600000", "+Inf"} {
			b.WriteString(name + "_bucket{" + labels + `,le="` + le + `"} ` + []string{"0", "1", "2", "3"}[counts[i]] + "\n")
		}
		return b.String()
	}
	want := help("route_upstream_model_consumer_metric_token_ratelimit_count", "counter",
		"route.<ai_route>.upstream.<ai_cluster>.model.<ai_model>.consumer.<ai_consumer>.metric.token_ratelimit_count") +
		`route_upstream_model_consumer_metric_token_ratelimit_count{` + route + `"alice"} 3` + "\n" +
		`route_upstream_model_consumer_metric_token_ratelimit_count{` + route + `"bob"} 1` + "\n\n" +
		help("token_ratelimit_stream_usage_injected_count", "counter", "token_ratelimit_stream_usage_injected_count") +
		"token_ratelimit_stream_usage_injected_count{} 5\n\n" +
		help("webhook_alerts_static_metric_token_ratelimit_alert_sent_count", "counter", "webhook.alerts.static.metric.token_ratelimit_alert_sent_count") +
		"webhook_alerts_static_metric_token_ratelimit_alert_sent_count{} 2\n\n" +
		help("a_level", "gauge", "a.level") +
		"a_level{} 4\n\n" +
		help(empty, "histogram", "route.<ai_route>.upstream.<ai_cluster>.model.<ai_model>.consumer.<ai_consumer>.metric.empty_ms") +
		buckets(empty, emptyLabels, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) +
		empty + "_sum{" + emptyLabels + "} 0\n" + empty + "_count{" + emptyLabels + "} 0\n\n" +
		help(hist, "histogram", "route.<ai_route>.upstream.<ai_cluster>.model.<ai_model>.consumer.<ai_consumer>.metric.redis_latency_ms") +
		buckets(hist, histLabels, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3) +
		hist + "_sum{" + histLabels + "} 7003\n" + hist + "_count{" + histLabels + "} 3\n\n"
	assert.Equal(t, want, page)

	families := parsePrometheus(t, page)
	assert.Len(t, families, 6)
	h := families[hist].GetMetric()[0]
	assert.Equal(t, map[string]string{"ai_route": "r1", "ai_cluster": "c", "ai_model": `m"x`, "ai_consumer": "none"}, labelsOf(h))
	assert.Equal(t, uint64(3), h.GetHistogram().GetSampleCount())
}

// Issue 53, point 2: make run's gateway, with make run's example
// configuration and the plugin itself, serves the plugin's counters at
// /stats/prometheus, as a Higress gateway names and labels them: after
// demo-1's 200, 200 and 429, one rejection under its model, and the two
// budget alerts the second call sent. The path is not the plugin's: it
// answers a client the plugin rejects, is not logged or counted, and a
// POST is refused.
func TestMetricsPageShowsThePluginsCounters(t *testing.T) {
	redis := redistest.Start(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":20,"total_tokens":50}}`)
	}))
	defer up.Close()
	configs, err := configfile.Load("../example.yaml")
	require.NoError(t, err)
	var log syncbuf.Buffer
	g, err := New(Options{Wasm: buildLimiter(t), Config: configs[0].JSON, Upstream: up.URL, Redis: redis.Addr, Log: &log, AccessLog: true})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()

	send := func(method, path string) (int, string, http.Header) {
		req, err := http.NewRequest(method, front.URL+path, strings.NewReader(`{"model":"mock","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("x-api-key", "demo-1")
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body), resp.Header
	}
	var codes []int
	for range 3 {
		code, _, _ := send("POST", "/v1/chat/completions")
		codes = append(codes, code)
	}
	require.Equal(t, []int{200, 200, 429}, codes)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.WaitIdle(ctx))

	const alerts = "webhook_alerts_static_metric_token_ratelimit_alert_sent_count"
	var families map[string]*dto.MetricFamily
	var page string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body, header := send("GET", MetricsPath)
		require.Equal(t, 200, code, body)
		assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", header.Get("Content-Type"))
		page, families = body, parsePrometheus(t, body)
		if f := families[alerts]; f != nil && f.GetMetric()[0].GetCounter().GetValue() == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the two alerts sent, counted:\n%s", page)
	}

	rejected := families["route_upstream_model_consumer_metric_token_ratelimit_count"]
	require.NotNil(t, rejected, page)
	assert.Equal(t, dto.MetricType_COUNTER, rejected.GetType())
	require.Len(t, rejected.GetMetric(), 1, page)
	assert.Equal(t, map[string]string{"ai_route": "none", "ai_cluster": "none", "ai_model": "mock", "ai_consumer": "none"},
		labelsOf(rejected.GetMetric()[0]), "make run has no route, cluster or consumer; the model is the request's")
	assert.Equal(t, 1.0, rejected.GetMetric()[0].GetCounter().GetValue())
	assert.Contains(t, page, "\nroute_upstream_model_consumer_metric_token_ratelimit_count"+
		`{ai_route="none",ai_cluster="none",ai_model="mock",ai_consumer="none"} 1`+"\n")
	assert.Empty(t, labelsOf(families[alerts].GetMetric()[0]))
	for name, f := range families {
		assert.NotEmpty(t, f.GetHelp(), "%s has a HELP line", name)
	}

	assert.Equal(t, int64(3), g.Stats().Requests, "the plugin's requests only")
	assert.NotContains(t, log.String(), MetricsPath, "not in the access log")
	code, body, header := send("POST", MetricsPath)
	assert.Equal(t, http.StatusMethodNotAllowed, code, body)
	assert.Equal(t, "GET, HEAD", header.Get("Allow"))
}

// Issue 53, point 2: a histogram's every sample counts, in Envoy's
// buckets, also when the plugin records two in one call (the emulator
// keeps only the last): the probe module records 3 then 5 per request, and
// counts each in a counter and a gauge.
func TestMetricsPageCountsEveryHistogramSample(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "probe.wasm")
	require.NoError(t, wasmbuild.Build("github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost/testdata/probe", out))
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	var log syncbuf.Buffer
	g, err := New(Options{Wasm: wasm, Config: []byte(`{}`), Upstream: up.URL, Redis: "127.0.0.1:9", Log: &log})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	get := func(path string) string {
		resp, err := http.Get(front.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode, string(body))
		return string(body)
	}
	assert.Empty(t, get(MetricsPath), "nothing defined yet")
	get("/a")
	get("/b")
	page := get(MetricsPath)
	families := parsePrometheus(t, page)
	h := families["probe_samples"].GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(4), h.GetSampleCount())
	assert.Equal(t, 16.0, h.GetSampleSum())
	cumulative := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		cumulative[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	assert.Equal(t, uint64(0), cumulative[1])
	assert.Equal(t, uint64(4), cumulative[5])
	assert.Equal(t, uint64(4), cumulative[3600000])
	assert.Contains(t, page, "\nprobe_samples_bucket{le=\"3600000\"} 4\nprobe_samples_bucket{le=\"+Inf\"} 4\nprobe_samples_sum{} 16\nprobe_samples_count{} 4\n")
	assert.Equal(t, 2.0, families["probe_requests"].GetMetric()[0].GetCounter().GetValue())
	assert.Equal(t, 4.0, families["probe_level"].GetMetric()[0].GetGauge().GetValue())
}
