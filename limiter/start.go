package limiter

import (
	"errors"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"

	"github.com/higress-group/wasm-go/pkg/wrapper"
)

// startState is what the configurations parsed at one start of the plugin
// (one per worker; again at each reload) share: the tick, the charges
// waiting for it (charges.go), the requests whose leases it renews
// (lease.go) and the waiting room of queueing configurations (queue.go).
type startState struct {
	outbox       []*pendingCharge
	room         *waitingRoom                // nil until a configuration queues
	leaseHolders []*request                  // admitted requests in progress that hold concurrency leases (lease.go)
	breakers     map[string]*endpointBreaker // by endpoint (breaker.go)
	locals       []*localState               // the local windows of failure_mode local (local.go)
	alerts       []*pendingAlert             // budget alerts waiting for the tick (alerts.go)
	injected     uint64                      // requests asked for their stream's usage since the last tick (metricInjected)
	ticks        uint64                      // the ticks so far (every tickMs): alerts wait for their next try in them
}

// injectedCounter is the worker's metricInjected (0: not defined yet): a
// counter outlives the plugin's restarts.
var injectedCounter proxywasm.MetricCounter

// flushTallies adds to the gateway's counters what requests tallied since
// the last tick.
func (s *startState) flushTallies() {
	if s.injected == 0 {
		return
	}
	if injectedCounter == 0 {
		injectedCounter = proxywasm.DefineCounterMetric(metricInjected)
	}
	injectedCounter.Increment(s.injected)
	s.injected = 0
}

// started is the state of the plugin started last.
var started *startState

var errOutboxFull = errors.New("too many charges waiting to be sent")

// onPluginStart runs before the configurations of a (re)started plugin are
// parsed: they get a new state, ticked by the new plugin.
func onPluginStart(wrapper.PluginContext) error {
	started = nil
	injectedCounter = 0 // defined again: by name, the gateway's counter is the same
	return nil
}

// thisStart returns the state of the plugin being started, registering its
// tick function on first use.
func thisStart() *startState {
	if started == nil {
		started = &startState{}
		// Period 0: every host tick (tickMs). The wrapper compares
		// wall-clock readings against the period, and a tick that comes
		// 1 ms early would be skipped.
		wrapper.RegisterTickFunc(0, started.onTick)
	}
	return started
}

// waitingRoom returns the start's waiting room, made on first use.
func (s *startState) waitingRoom() *waitingRoom {
	if s.room == nil {
		s.room = &waitingRoom{lines: map[string]*waitLine{}}
	}
	return s.room
}

// onTick numbers the VM (lease.go), probes the Redis endpoints whose breakers are open, sends the
// postponed charges, catches up what local windows counted, renews the
// leases that are due, sends the budget alerts, then moves the queues on. It runs in the plugin's context: calls sent from it
// are always answered.
func (s *startState) onTick() {
	s.ticks++
	s.numberVM()
	s.probeBreakers()
	s.sendPostponed()
	s.catchUp()
	s.renewDueLeases()
	s.sendAlerts()
	s.flushTallies()
	if s.room != nil {
		s.room.onTick()
	}
}
