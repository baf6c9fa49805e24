package limiter

import (
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
)

// Metric names end the Higress counter name
// route.<route>.upstream.<cluster>.model.<model>.consumer.<consumer>.metric.<name>.
const (
	// metricRejected counts requests answered with rejected_code (the Higress name).
	metricRejected = "token_ratelimit_count"
	// metricAdmitFailure counts admissions Redis could not decide (error,
	// timeout, malformed reply); failure_mode said what happened to them.
	metricAdmitFailure = "token_ratelimit_redis_failure_count"
	// metricChargeFailure counts responses whose usage could not be charged.
	metricChargeFailure = "token_ratelimit_charge_failure_count"
	// metricQueued counts over-limit requests that waited in a queue
	// (over_limit_action: queue); those that gave up count as rejected too.
	metricQueued = "token_ratelimit_queued_count"
)

// metrics defines counters on first use and keeps them; only rejections,
// failures and queueing touch it, never the path of an admitted request.
type metrics struct {
	counters map[string]proxywasm.MetricCounter
}

func newMetrics() *metrics {
	return &metrics{counters: map[string]proxywasm.MetricCounter{}}
}

// count adds one to the named counter for the request's route, upstream and consumer.
func (m *metrics) count(name, consumer string) {
	full := "route." + property("route_name") + ".upstream." + property("cluster_name") +
		".model.none.consumer." + orNone(consumer) + ".metric." + name
	counter, ok := m.counters[full]
	if !ok {
		counter = proxywasm.DefineCounterMetric(full)
		m.counters[full] = counter
	}
	counter.Increment(1)
}

func property(name string) string {
	v, err := proxywasm.GetProperty([]string{name})
	if err != nil {
		return "none"
	}
	return orNone(string(v))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
