package gateway

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
)

// MetricsPath is where the gateway serves the plugin's metrics in
// Prometheus's text format, as Envoy's admin serves a gateway's. It is
// answered on the gateway's own listener, before anything else: a request
// for it never reaches the plugin or the upstream, is not logged and is
// not counted in Stats. Any other path is the plugin's.
const MetricsPath = "/stats/prometheus"

// The page is what a Higress gateway's /stats/prometheus shows of the same
// metrics, so that a dashboard or an alert written against make run works
// on Higress:
//
//   - Envoy names a proxy-wasm metric wasmcustom.<name>
//     (envoyproxy/envoy source/extensions/common/wasm/stats_handler.h,
//     CustomStatNamespace, and context.cc, Context::defineMetric);
//   - Higress's bootstrap extracts tags from such names (higress-group/istio
//     tools/packaging/common/higress_envoy_bootstrap.json, stats_config;
//     Higress builds its gateway from that fork, a submodule of
//     alibaba/higress): see statTags;
//   - a tag's regex removes its first group from the name and takes its
//     second as the value, every regex applied to the whole name
//     (source/common/stats/tag_extractor_impl.cc, tag_producer_impl.cc);
//   - the admin's Prometheus page strips the wasmcustom namespace (no
//     envoy_ prefix), turns every character outside [a-zA-Z0-9_] into _,
//     leaves out a name that would start with a digit, escapes label
//     values, and writes counters, then gauges, then histograms, each
//     family sorted by name under its # TYPE line and followed by an empty
//     line; a histogram as cumulative _bucket lines (le "%.32g"), +Inf,
//     _sum and _count (source/server/admin/prometheus_stats_formatter.cc,
//     prometheus_stats.cc, prometheus_stats_render.cc);
//   - its buckets are Envoy's defaults, in the histogram's unit
//     (source/common/stats/histogram_impl.cc,
//     HistogramSettingsImpl::defaultBuckets): envoyBuckets.
//
// Thus the plugin's counter
// route.r1.upstream.outbound|443||llm.dns.model.gpt-4o.consumer.alice.metric.token_ratelimit_count
// is, on both,
//
//	route_upstream_model_consumer_metric_token_ratelimit_count{ai_route="r1",ai_cluster="outbound|443||llm.dns",ai_model="gpt-4o",ai_consumer="alice"} 1
//
// as Higress's ai-statistics documents its own
// (route_upstream_model_consumer_metric_input_token{ai_route=…}), and
// webhook.<svc>.metric.<name> or a bare name is a metric without labels.
//
// What differs: each family also has a # HELP line (Envoy writes none),
// naming the plugin's metric with <tag> where a label's value was;
// histograms are counted exactly, and at once (Envoy approximates them
// from its log-linear histogram, and updates them at each stats flush);
// Envoy's query parameters (usedonly, filter) are ignored; and Envoy's own
// metrics (envoy_…) are not there: only the plugin's.

// statTag is one of the bootstrap's stats_tags.
type statTag struct {
	name string
	re   *regexp.Regexp
}

// statTags are the stats_tags of Higress's bootstrap that can match a
// proxy-wasm metric's name, in the order Envoy applies them: those without
// a prefix token first (response_code_class), then those for names
// starting wasmcustom. The others (wasm_runtime, thread_name,
// plugin_name, listener_address, http_conn_manager_prefix, cluster_name)
// are anchored to names starting wasm., listener., http. or cluster.; the
// extra_stat_tags ones need "=.=" in a name.
var statTags = []statTag{
	{"response_code_class", regexp.MustCompile(`_rq(_(\dxx))$`)},
	{"ai_route", regexp.MustCompile(`^wasmcustom\.route\.((.*?)\.)upstream`)},
	{"ai_cluster", regexp.MustCompile(`^wasmcustom\..*?\.upstream\.((.*?)\.)model`)},
	{"ai_model", regexp.MustCompile(`^wasmcustom\..*?\.model\.((.*?)\.)consumer`)},
	{"ai_consumer", regexp.MustCompile(`^wasmcustom\..*?\.consumer\.((.*?)\.)metric`)},
}

// envoyBuckets are the upper bounds of Envoy's default histogram buckets.
var envoyBuckets = [...]float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
	60000, 300000, 600000, 1800000, 3600000}

// label is a tag Envoy extracted from a metric's name.
type label struct{ name, value string }

// promName is what Envoy's admin makes of the proxy-wasm metric name: its
// family's name in Prometheus, its labels, the tag-extracted stat name
// (what Envoy sorts families by), and the name with <tag> for each label's
// value (for HELP). ok is false when Envoy leaves it out.
func promName(name string) (family string, labels []label, extracted, pattern string, ok bool) {
	full := "wasmcustom." + name
	type span struct {
		from, to int
		tag      string
	}
	var removed, values []span
	for _, t := range statTags {
		m := t.re.FindStringSubmatchIndex(full)
		if m == nil || len(m) < 4 || m[2] < 0 {
			continue
		}
		value := span{m[2], m[3], t.name}
		if len(m) >= 6 && m[4] >= 0 {
			value = span{m[4], m[5], t.name}
		}
		labels = append(labels, label{t.name, full[value.from:value.to]})
		removed = append(removed, span{m[2], m[3], t.name})
		values = append(values, value)
	}
	var kept, pat strings.Builder
	for i := 0; i < len(full); i++ {
		if !slices.ContainsFunc(removed, func(s span) bool { return i >= s.from && i < s.to }) {
			kept.WriteByte(full[i])
		}
	}
	slices.SortFunc(values, func(a, b span) int { return a.from - b.from })
	at := 0
	for _, v := range values {
		if v.from < at {
			continue // overlapping tags: none of statTags do
		}
		pat.WriteString(full[at:v.from] + "<" + v.tag + ">")
		at = v.to
	}
	pat.WriteString(full[at:])
	// The wasmcustom namespace is registered: stripped, and no envoy_.
	extracted = kept.String()
	_, rest, _ := strings.Cut(extracted, ".")
	family = sanitize(rest)
	if family == "" || family[0] >= '0' && family[0] <= '9' {
		return "", nil, "", "", false
	}
	_, pattern, _ = strings.Cut(pat.String(), ".")
	return family, labels, extracted, pattern, true
}

var notPromChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

func sanitize(s string) string { return notPromChars.ReplaceAllString(s, "_") }

// escapeValue escapes a label value as Envoy does (and the text format
// requires): backslash, newline and double quote.
var escapeValue = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace

// escapeHelp escapes a HELP line's text: backslash and newline.
var escapeHelp = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace

// samples are the plugin's histogram samples, by metric id, counted as the
// plugin records them (wasmhost.Options.Recorded): the emulator keeps only
// the last one. Gauges' values pass here too, and are not shown from here.
type samples struct {
	mu   sync.Mutex
	byID map[uint32]*histogram
}

// maxHistograms bounds the metric ids samples keeps: ids are the
// emulator's, one per metric the plugin defined (a record into another
// fails in the plugin), and the plugin bounds those; this is a guard only.
const maxHistograms = 10000

// histogram is one histogram's samples: how many fell in each of
// envoyBuckets (not cumulated), their count and sum.
type histogram struct {
	buckets [len(envoyBuckets)]uint64
	count   uint64
	sum     float64
}

func newSamples() *samples { return &samples{byID: map[uint32]*histogram{}} }

func (s *samples) record(id uint32, value uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.byID[id]
	if h == nil {
		if len(s.byID) >= maxHistograms {
			return
		}
		h = &histogram{}
		s.byID[id] = h
	}
	v := float64(value)
	if i, _ := slices.BinarySearch(envoyBuckets[:], v); i < len(envoyBuckets) {
		h.buckets[i]++
	}
	h.count++
	h.sum += v
}

func (s *samples) get(id uint32) histogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.byID[id]; h != nil {
		return *h
	}
	return histogram{}
}

// serveMetrics answers MetricsPath.
func (g *Gateway) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "gateway: "+MetricsPath+" answers GET", http.StatusMethodNotAllowed)
		return
	}
	page, err := g.vm.prometheus()
	if err != nil {
		http.Error(w, "gateway: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(page)))
	if r.Method == http.MethodGet {
		_, _ = w.Write(page)
	}
}

// prometheus writes the plugin's metrics as Envoy's admin writes them, read
// between two calls into the plugin.
func (v *vm) prometheus() ([]byte, error) {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil, fmt.Errorf("the gateway is closed")
	}
	metrics := wasmhost.Metrics(v.host)
	v.mu.Unlock()
	return renderPrometheus(metrics, v.samples), nil
}

// renderPrometheus writes metrics in Prometheus's text format, named,
// labelled and ordered as Envoy's admin does (see MetricsPath).
func renderPrometheus(metrics []wasmhost.Metric, s *samples) []byte {
	type series struct {
		name   string
		labels []label
		m      wasmhost.Metric
	}
	type family struct {
		name, extracted, pattern string
		series                   []series
	}
	var out strings.Builder
	for _, typ := range []wasmhost.MetricType{wasmhost.Counter, wasmhost.Gauge, wasmhost.Histogram} {
		families := map[string]*family{}
		for _, m := range metrics {
			if m.Type != typ {
				continue
			}
			name, labels, extracted, pattern, ok := promName(m.Name)
			if !ok {
				continue
			}
			f := families[name]
			if f == nil {
				f = &family{name: name, extracted: extracted, pattern: pattern}
				families[name] = f
			}
			f.series = append(f.series, series{m.Name, labels, m})
		}
		sorted := slices.SortedFunc(maps.Values(families), func(a, b *family) int { return compareStatNames(a.extracted, b.extracted) })
		for _, f := range sorted {
			slices.SortFunc(f.series, func(a, b series) int { return compareStatNames(a.name, b.name) })
			fmt.Fprintf(&out, "# HELP %s The plugin's %s %s, as a Higress gateway shows it (docs/metrics.md).\n", f.name, typ, escapeHelp(f.pattern))
			fmt.Fprintf(&out, "# TYPE %s %s\n", f.name, typ)
			for _, x := range f.series {
				tags := formatLabels(x.labels)
				if typ != wasmhost.Histogram {
					fmt.Fprintf(&out, "%s{%s} %d\n", f.name, tags, x.m.Value)
					continue
				}
				h := s.get(x.m.ID)
				hist := tags
				if hist != "" {
					hist += ","
				}
				cum := uint64(0)
				for i, b := range envoyBuckets {
					cum += h.buckets[i]
					fmt.Fprintf(&out, "%s_bucket{%sle=\"%.32g\"} %d\n", f.name, hist, b, cum)
				}
				fmt.Fprintf(&out, "%s_bucket{%sle=\"+Inf\"} %d\n", f.name, hist, h.count)
				fmt.Fprintf(&out, "%s_sum{%s} %.32g\n", f.name, tags, h.sum)
				fmt.Fprintf(&out, "%s_count{%s} %d\n", f.name, tags, h.count)
			}
			out.WriteString("\n")
		}
	}
	return []byte(out.String())
}

func formatLabels(labels []label) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = sanitize(l.name) + `="` + escapeValue(l.value) + `"`
	}
	return strings.Join(parts, ",")
}

// compareStatNames orders two stat names as Envoy's symbol table does:
// element by element, the elements being what the dots separate.
func compareStatNames(a, b string) int {
	return slices.Compare(strings.Split(a, "."), strings.Split(b, "."))
}
