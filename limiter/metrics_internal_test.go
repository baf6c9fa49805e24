package limiter

import (
	"strings"
	"testing"
	"unsafe"
)

// Naming a request's model in a counter allocates only the first time the
// model is met: the request that settles counts under it on every
// response, and a name with bytes to replace (gemini-2.5-flash) was
// sanitized into a new string on each.
func TestMetricModelMetBeforeAllocatesNothing(t *testing.T) {
	clear(metricModels)
	t.Cleanup(func() { clear(metricModels) })
	for _, model := range []string{"gpt-4o-mini", "gemini-2.5-flash", "a model \"with\" spaces.and.dots"} {
		first := metricModel(model)
		if n := testing.AllocsPerRun(100, func() {
			if metricModel(model) != first {
				t.Fatalf("%q: another segment the second time", model)
			}
		}); n != 0 {
			t.Errorf("%q: %v allocations per call once met", model, n)
		}
	}
}

// A metric is defined under one string per name, kept by the VM: the host
// emulator keeps a view of the name passed, not a copy, and a name built
// for one call would be collected and its memory overwritten (in WASM mode
// on a VM whose memory no longer grows, TestHardening5 then found no
// counter under its name).
func TestMetricNamesAreDefinedUnderOneKeptString(t *testing.T) {
	first := strings.Clone("route.r.upstream.c.model.m.consumer.none.metric.token_ratelimit_kept_test")
	again := strings.Clone(first)
	t.Cleanup(func() { delete(metricNames, first) })
	if unsafe.StringData(keptName(first)) != unsafe.StringData(first) {
		t.Fatal("the first name is not the one kept")
	}
	if unsafe.StringData(keptName(again)) != unsafe.StringData(first) {
		t.Fatal("an equal name built later is passed to the host instead of the kept one")
	}
}
