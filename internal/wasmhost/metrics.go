package wasmhost

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// MetricType is a metric's type, as proxy-wasm numbers them
// (proxy_define_metric's metric_type).
type MetricType uint32

const (
	Counter   MetricType = 0
	Gauge     MetricType = 1
	Histogram MetricType = 2
)

func (t MetricType) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return fmt.Sprintf("metric type %d", uint32(t))
}

// Metric is a metric the module defined, as the host emulator holds it.
type Metric struct {
	ID   uint32 // the id proxy_define_metric gave it (what Options.Recorded is told)
	Name string // the name the module gave it
	Type MetricType
	// Value is a counter's count or a gauge's value; of a histogram, the
	// last sample recorded (Options.Recorded sees them all).
	Value uint64
}

// Metrics returns the metrics the module defined in the host emulator,
// by ID. Nothing the emulator exports lists them (it answers for a name
// given), so Metrics reads its fields by name, as Forget does;
// TestMetricsListWhatTheModuleDefined fails if an upgrade of the SDK
// renames them. It must not run during a call into the module.
func Metrics(host proxytest.HostEmulator) []Metric {
	e := reflect.ValueOf(host)
	if e.Kind() != reflect.Pointer || e.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("wasmhost.Metrics: the host emulator is a %T, not the struct it knows", host))
	}
	root := field(e.Elem(), "rootHostEmulator").Elem()
	names, types, values := field(root, "metricNameToID"), field(root, "metricIDToType"), field(root, "metricIDToValue")
	for _, m := range []reflect.Value{names, types, values} {
		if m.Kind() != reflect.Map {
			panic(fmt.Sprintf("wasmhost.Metrics: %s is not a map any more (SDK upgraded?)", m.Type()))
		}
	}
	var out []Metric
	for it := names.MapRange(); it.Next(); {
		id := it.Value()
		m := Metric{ID: uint32(id.Uint()), Name: it.Key().String()}
		if t := types.MapIndex(id); t.IsValid() {
			m.Type = MetricType(t.Uint())
		}
		if v := values.MapIndex(id); v.IsValid() {
			m.Value = v.Uint()
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Metric) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// recordListener hands each call of the emulator's proxy_record_metric
// (metric_id, value) to a function, before the emulator takes it; wazero
// calls it for that host function only (the others get no listener).
type recordListener func(metricID uint32, value uint64)

func (f recordListener) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if !slices.Contains(def.ExportNames(), "proxy_record_metric") {
		return nil
	}
	return experimental.FunctionListenerFunc(func(_ context.Context, _ api.Module, _ api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
		if len(params) == 2 {
			f(uint32(params[0]), params[1])
		}
	})
}
