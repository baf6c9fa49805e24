package limiter

import "testing"

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
