package limiter

// MaxMetricModels is how many distinct models get counters of their own.
const MaxMetricModels = maxMetricModels

// ForgetMetricModels empties the VM's set of models with counters of their
// own. In Go mode every test runs on one VM, the test binary's, so a test
// that counts under models starts from an empty set and leaves one behind;
// in WASM mode each test.RunTest has a VM of its own.
func ForgetMetricModels() { clear(metricModels) }
