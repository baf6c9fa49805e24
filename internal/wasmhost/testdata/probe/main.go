// The probe: a proxy-wasm module for wasmhost's tests that shows what its
// host gives it. At each request's headers it logs its wall clock, the
// monotonic time since it started and 8 random bytes ("probe wall=… mono=…
// rand=…"); each stream holds 64 KiB of the module's memory until its
// context is deleted. Each request also counts in a counter
// (probe.requests), adds 2 to a gauge (probe.level) and records 3 then 5
// in a histogram (probe.samples), all three defined at the first request. It also sets the property "probe" to "property" from a
// buffer it then writes "scribble" over.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
)

func main() {}

func init() { proxywasm.SetVMContext(&vm{}) }

var started = time.Now()

// propertyBuf is the buffer the property is set from, reused.
var propertyBuf = make([]byte, 8)

type vm struct{ types.DefaultVMContext }

func (*vm) NewPluginContext(uint32) types.PluginContext { return &plugin{} }

type plugin struct{ types.DefaultPluginContext }

var (
	defined  bool
	requests proxywasm.MetricCounter
	level    proxywasm.MetricGauge
	samples  proxywasm.MetricHistogram
)

func (*plugin) NewHttpContext(uint32) types.HttpContext {
	return &stream{held: make([]byte, 64<<10)}
}

type stream struct {
	types.DefaultHttpContext
	held []byte
}

func (s *stream) OnHttpRequestHeaders(int, bool) types.Action {
	var b [8]byte
	_, _ = rand.Read(b[:])
	s.held[len(s.held)-1] = b[0]
	if !defined {
		requests = proxywasm.DefineCounterMetric("probe.requests")
		level = proxywasm.DefineGaugeMetric("probe.level")
		samples = proxywasm.DefineHistogramMetric("probe.samples")
		defined = true
	}
	requests.Increment(1)
	level.Add(2)
	samples.Record(3)
	samples.Record(5)
	copy(propertyBuf, "property")
	_ = proxywasm.SetProperty([]string{"probe"}, propertyBuf)
	copy(propertyBuf, "scribble")
	proxywasm.LogInfo("probe wall=" + strconv.FormatInt(time.Now().UnixNano(), 10) +
		" mono=" + strconv.FormatInt(int64(time.Since(started)), 10) + " rand=" + hex.EncodeToString(b[:]))
	return types.ActionContinue
}
