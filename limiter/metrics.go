package limiter

import (
	"strings"
	"unsafe"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Metric names end the Higress counter name
// route.<route>.upstream.<cluster>.model.<model>.consumer.<consumer>.metric.<name>.
const (
	// metricRejected counts requests answered with rejected_code (the Higress name).
	metricRejected = "token_ratelimit_count"
	// metricAdmitFailure counts admissions Redis could not decide (error,
	// timeout, malformed reply); failure_mode said what happened to them.
	metricAdmitFailure = "token_ratelimit_redis_failure_count"
	// metricChargeFailure counts charges that failed twice (see charges.go).
	metricChargeFailure = "token_ratelimit_charge_failure_count"
	// metricQueued counts over-limit requests that waited in a queue
	// (over_limit_action: queue); those that gave up count as rejected too.
	metricQueued = "token_ratelimit_queued_count"
	// metricEstimated counts responses charged by estimate: no usage reported.
	metricEstimated = "token_ratelimit_estimated_count"
	// metricInjected counts requests rewritten to ask for their stream's
	// usage (stream_usage: inject): one counter per worker, without the
	// route, model and consumer segments, tallied by each request and added
	// from the tick (see startState.flushTallies). Most requests stream
	// without asking: a counter per route and model would cost each of them
	// two property reads, a header read and a name to build.
	metricInjected = "token_ratelimit_stream_usage_injected_count"
	// metricShadowRejected counts requests shadow_mode let through that a
	// limit would have rejected.
	metricShadowRejected = "token_ratelimit_shadow_reject_count"
	// metricUnmatched counts requests no rule item matched: limited by
	// unmatched_threshold (and global_threshold) when set, otherwise not at
	// all.
	metricUnmatched = "token_ratelimit_unmatched_count"
	// With priority, rejections and shadow_mode's would-be rejections are
	// also counted by the request's level, in
	// token_ratelimit_priority_<level>_count and
	// token_ratelimit_priority_<level>_shadow_reject_count (see countByLevel).
	// metricFallback counts requests served as a fallback of the model
	// they asked for (model_fallbacks), under the model asked for.
	metricFallback = "token_ratelimit_fallback_count"
	// metricShadowFallback counts requests shadow_mode served as asked
	// that a fallback would have served.
	metricShadowFallback = "token_ratelimit_shadow_fallback_count"
	// metricUnlisted counts requests charged for a model that neither
	// pricing nor the price catalog lists, at its provider's dearest price
	// (config.FromDearest): a model worth a pricing entry.
	metricUnlisted = "token_ratelimit_unlisted_model_count"
)

// The <model> segment of a counter name is the model the request names, as
// the plugin resolved it (requestModel, models.go: the route's, the
// body's "model", or model_source's), which it does only where it reads
// requests anyway: token_reservation, per-model limits, weights or prices,
// fallbacks. The body is never read for metrics alone, since reading it
// delays admission to the body's end: without any of them, a request is admitted or rejected at
// its headers, before any body is read, and its rejection (or admission
// failure, or wait in a queue) counts under model.none. So does a request
// whose model the estimate did not find (no "model" member, or a body over
// max_body_bytes without per-model weights). A charge failure counts under
// the request's model too: the usage parser (tokenusage) does not read the
// response's "model", so there is no other source for it.
//
// The model comes from the client, so it is bounded before it names a
// counter: sanitized (see metricModel), and at most maxMetricModels
// distinct names get counters of their own.
const (
	// modelUnknown is the model segment when the request's model is not known.
	modelUnknown = "none"
	// modelOverflow is the model segment of every model met after
	// maxMetricModels others had counters of their own.
	modelOverflow = "other"
	// maxMetricModels caps how many distinct model names get counters of
	// their own in one plugin VM: the first ones met, for every counter,
	// route, upstream and consumer alike; further ones count under
	// model.other. A client naming a new model in every request thus adds
	// at most maxMetricModels + 2 (other, none) model segments. Envoy runs a
	// VM per worker thread, each with its own set, so a gateway reports at
	// most workers × maxMetricModels distinct model names.
	maxMetricModels = 32
	// maxMetricModelBytes caps the length of the model segment; longer
	// names are cut to it, so two names differing only past the cut share
	// counters.
	maxMetricModelBytes = 64
)

// metricModels is the sanitized model names that have counters of their own
// in this VM (at most maxMetricModels), each mapped to itself: shared by
// every configuration, and not reset when the plugin is reconfigured, since
// the counters it defined stay.
var metricModels = map[string]string{}

// The <consumer> segment is the x-mse-consumer header, which an auth plugin
// sets, but which a client can send itself on a route where none does: a
// new value in every request would make a new counter every time, in the
// gateway's stats and in this VM, for as long as it runs. So only the
// consumers the configuration names (the keys of limit_by_consumer items)
// get counters of their own; every other consumer counts under
// consumerOther, and a request without one under "none".
const consumerOther = "other"

// metrics defines the metrics of each route, upstream, model and consumer
// (a series) on first use and keeps their ids, so that counting is a map
// lookup and a host call: what a request was charged counts on the path
// of every request (spend.go), with no allocation once its series exists,
// beyond the host's copies of the route's and upstream's names and of the
// consumer header.
type metrics struct {
	tallies   *tallies // its start's
	series    map[seriesKey]*series
	consumers map[string]string // the consumers named in the configuration, each mapped to itself
}

func newMetrics(rules *config.Config, t *tallies) *metrics {
	m := &metrics{tallies: t, series: map[seriesKey]*series{}, consumers: map[string]string{}}
	for _, item := range rules.Items {
		if item.Type != config.ByConsumer {
			continue
		}
		for _, k := range item.Keys {
			if k.Kind == config.KeyExact {
				m.consumers[k.Key] = k.Key
			}
		}
	}
	return m
}

// seriesKey is the segments of a series' names. While a series is looked
// up, route and cluster are views of the host's copies; a stored key holds
// copies of its own.
type seriesKey struct{ route, cluster, model, consumer string }

// series is the metrics of one route, upstream, model and consumer: those
// of seriesMetricNames by index, tallied in the VM until the tick (see
// tally.go), and the other counters by name, added at once (they count
// rare events: rejections, failures, fallbacks).
type series struct {
	prefix     string // route.<route>.upstream.<cluster>.model.<model>.consumer.<consumer>.metric.
	ids        [firstSeriesHistogram]uint32
	defined    uint32 // bit i set: ids[i] is defined
	tallied    [firstSeriesHistogram]uint64
	tallies    *tallies
	pending    bool // in tallies
	histograms [numSeriesMetrics - firstSeriesHistogram]*histogramTally
	named      map[string]proxywasm.MetricCounter
}

// seriesOf returns the series of the current request's route and upstream,
// a model ("": not known) and a consumer ("": none), made on first use.
func (m *metrics) seriesOf(consumer, model string) *series {
	route, cluster := hostProperty(propertyRouteName), hostProperty(propertyClusterName)
	key := seriesKey{route: orNone(unsafe.String(unsafe.SliceData(route), len(route))),
		cluster: orNone(unsafe.String(unsafe.SliceData(cluster), len(cluster))),
		model:   metricModel(model), consumer: m.consumerLabel(consumer)}
	if s, ok := m.series[key]; ok {
		return s
	}
	key.route, key.cluster = strings.Clone(key.route), strings.Clone(key.cluster)
	s := &series{tallies: m.tallies, prefix: "route." + key.route + ".upstream." + key.cluster + ".model." + key.model +
		".consumer." + key.consumer + ".metric."}
	m.series[key] = s
	return s
}

// count adds one to the named counter for the request's route, upstream,
// model ("": not known) and consumer ("": none).
func (m *metrics) count(name, consumer, model string) {
	m.seriesOf(consumer, model).count(name)
}

// count adds one to the series' counter of that name.
func (s *series) count(name string) {
	counter, ok := s.named[name]
	if !ok {
		if s.named == nil {
			s.named = map[string]proxywasm.MetricCounter{}
		}
		counter = defineCounter(s.prefix + name)
		s.named[name] = counter
	}
	counter.Increment(1)
}

// add adds n (if positive) to the series' counter k.
func (s *series) add(k seriesMetric, n int64) {
	if n > 0 {
		s.tally(k, uint64(n))
	}
}

// record records v in the series' histogram k, made on first use.
func (s *series) record(k seriesMetric, v uint64) {
	h := &s.histograms[k-firstSeriesHistogram]
	if *h == nil {
		*h = newHistogramTally(s.prefix+seriesMetricNames[k], s.tallies)
	}
	(*h).Record(v)
}

// id is the id of the series' counter k, defined on first use.
func (s *series) id(k seriesMetric) uint32 {
	if s.defined&(1<<k) == 0 {
		s.ids[k] = uint32(defineCounter(s.prefix + seriesMetricNames[k]))
		s.defined |= 1 << k
	}
	return s.ids[k]
}

// metricNames holds the name of every metric the VM defined, each mapped
// to itself, and defineCounter and defineHistogram define a metric under
// the one string kept there. The host emulator (proxytest), which the
// tests and make run's gateway run the module on, keys a metric by a view
// of its name in the module's memory, not by a copy: a name built for the
// call and then collected would be overwritten there by what the memory
// holds next, and the metric be found under no name. Envoy copies the
// name; keeping it costs the VM each distinct name once (they are bounded
// as the series are).
var metricNames = map[string]string{}

func keptName(name string) string {
	if kept, ok := metricNames[name]; ok {
		return kept
	}
	metricNames[name] = name
	return name
}

func defineCounter(name string) proxywasm.MetricCounter {
	return proxywasm.DefineCounterMetric(keptName(name))
}

func defineHistogram(name string) proxywasm.MetricHistogram {
	return proxywasm.DefineHistogramMetric(keptName(name))
}

// metricModel returns the model segment of a counter name for a model the
// request named ("": none): modelUnknown, the model sanitized, or
// modelOverflow once maxMetricModels others have counters. Sanitizing keeps
// the first maxMetricModelBytes bytes and replaces each byte outside
// [A-Za-z0-9_:/+-] with '_': a '.' would split the segment, and anything
// else (spaces, quotes, non-ASCII, control bytes) has no place in a metric
// name. Common names stay readable: gpt-4o-mini as it is, gemini-2.5-flash
// as gemini-2_5-flash. A model met before costs no allocation.
func metricModel(model string) string {
	if model == "" {
		return modelUnknown
	}
	var buf [maxMetricModelBytes]byte
	name := sanitizeMetricModel(buf[:0], model)
	if known, ok := metricModels[string(name)]; ok {
		return known
	}
	if len(metricModels) >= maxMetricModels {
		return modelOverflow
	}
	known := string(name) // a copy: not a slice of a request's (possibly large) model string
	metricModels[known] = known
	return known
}

// sanitizeMetricModel appends model, cut to maxMetricModelBytes, to dst,
// each byte not allowed in a metric name segment replaced with '_'.
func sanitizeMetricModel(dst []byte, model string) []byte {
	model = model[:min(len(model), maxMetricModelBytes)]
	for i := 0; i < len(model); i++ {
		c := model[i]
		if !metricNameByte(c) {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// metricNameByte says whether c may appear in a model segment as it is.
func metricNameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '_' || c == ':' || c == '/' || c == '+' || c == '-'
}

// consumerLabel is the consumer segment of a counter name: the consumer
// when the configuration names it, else consumerOther ("none": no consumer).
func (m *metrics) consumerLabel(consumer string) string {
	if consumer == "" {
		return "none"
	}
	if named, ok := m.consumers[consumer]; ok {
		return named
	}
	return consumerOther
}

// The properties that name a series' route and upstream, as the host
// takes their paths (one segment each).
var (
	propertyRouteName   = []byte("route_name")
	propertyClusterName = []byte("cluster_name")
)

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// countByLevel counts a rejection (or with shadow, a would-be rejection) of
// a request of priority level level, for model, when priority is
// configured.
func (pc PluginConfig) countByLevel(level int, model string, shadow bool) {
	p := pc.rules.Priority
	if p == nil {
		return
	}
	name := "token_ratelimit_priority_" + p.Levels[level] + "_count"
	if shadow {
		name = "token_ratelimit_priority_" + p.Levels[level] + "_shadow_reject_count"
	}
	pc.metrics.count(name, requestHeader(consumerHeader), model)
}
