package limiter

import "github.com/higress-group/proxy-wasm-go-sdk/proxywasm"

// Tallies: what requests count on their way (the spend counters of each
// series, the estimate's and Redis's histograms) is kept in the VM and
// added to the gateway's metrics from the tick (startState.flushTallies),
// every tickMs, rather than by a host call per counter per request: a
// settled request counts up to twelve values (countSpend), and each host
// call is a stats lookup in Envoy (and, in the host emulator, a call
// through reflection).
// A metric is defined when first counted, so it exists from then on; its
// value is at most a tick behind. A VM that stops without its plugin's
// done (a gateway killed) loses at most a tick of counts.

// tallies are the series and histograms of a plugin's start (its
// configurations') with counts not yet added, each listed once. Its tick
// flushes them, and goes on ticking after a reload until the start is
// finished (start.go), so a reload loses none.
type tallies struct {
	series     []*series
	histograms []*histogramTally
}

// flush adds every tally to its metric.
func (t *tallies) flush() {
	for i, s := range t.series {
		for k, n := range s.tallied {
			if n > 0 {
				proxywasm.MetricCounter(s.ids[k]).Increment(n)
				s.tallied[k] = 0
			}
		}
		s.pending = false
		t.series[i] = nil
	}
	t.series = t.series[:0]
	for i, h := range t.histograms {
		h.flush()
		h.pending = false
		t.histograms[i] = nil
	}
	t.histograms = t.histograms[:0]
}

// tally adds n to the series' counter k, for the next flush.
func (s *series) tally(k seriesMetric, n uint64) {
	s.id(k) // defined now: the series' counter exists from its first count
	s.tallied[k] += n
	if !s.pending {
		s.pending = true
		s.tallies.series = append(s.tallies.series, s)
	}
}

// histogramTally is a histogram whose samples wait in the VM for the next
// flush: at most maxPendingSamples, past which a burst is recorded at once
// rather than kept.
type histogramTally struct {
	histogram proxywasm.MetricHistogram
	samples   []uint64
	tallies   *tallies
	pending   bool // in tallies
}

// maxPendingSamples bounds a histogram's samples kept between two ticks
// (8 KiB each).
const maxPendingSamples = 1024

func newHistogramTally(name string, t *tallies) *histogramTally {
	return &histogramTally{histogram: defineHistogram(name), tallies: t}
}

// Record keeps a sample for the next flush (scripts.LatencyRecorder).
func (h *histogramTally) Record(v uint64) {
	if len(h.samples) == maxPendingSamples {
		h.flush()
	}
	h.samples = append(h.samples, v)
	if !h.pending {
		h.pending = true
		h.tallies.histograms = append(h.tallies.histograms, h)
	}
}

// flush records the histogram's samples.
func (h *histogramTally) flush() {
	for _, v := range h.samples {
		h.histogram.Record(v)
	}
	h.samples = h.samples[:0]
}
