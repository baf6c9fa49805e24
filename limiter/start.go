package limiter

import (
	"errors"
	"fmt"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"

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
	alerters     []*alerter                  // the budget alerts of its configurations (alerts.go)
	injected     uint64                      // requests asked for their stream's usage since the last tick (metricInjected)
	tallies      tallies                     // what requests counted since the last tick (tally.go)
	ticks        uint64                      // the ticks so far (every tickMs)
	charging     int                         // charges sent from the tick, not answered yet
	finishing    bool                        // the gateway is done with the plugin: the tick sends what is left, then tells it
	finished     uint64                      // the ticks since the gateway was done with it
}

// finishTicks bounds how long a plugin the gateway is done with keeps
// sending what is left (OnPluginDone): a charge's two tries and their
// timeouts fit many times over.
const finishTicks = 30 * 1000 / tickMs

// idle reports whether the start has nothing left to send: no charge
// postponed or in flight, no local debt, no alert without its body or its
// listing.
func (s *startState) idle() bool {
	if len(s.outbox) > 0 || s.charging > 0 {
		return false
	}
	for _, ls := range s.locals {
		if ls.limiter.Owes() {
			return false
		}
	}
	for _, a := range s.alerters {
		if len(a.attaching) > 0 || len(a.unlisted) > 0 {
			return false
		}
	}
	return true
}

// pending says what the start still has to send.
func (s *startState) pending() string {
	attaching, unlisted := 0, 0
	for _, a := range s.alerters {
		attaching += len(a.attaching)
		unlisted += len(a.unlisted)
	}
	owes := 0
	for _, ls := range s.locals {
		if ls.limiter.Owes() {
			owes++
		}
	}
	return fmt.Sprintf("%d charges, %d budget alerts' bodies, %d outboxes to list, the debts of %d local windows",
		len(s.outbox)+s.charging, attaching, unlisted, owes)
}

// finish tells the gateway the plugin is done once nothing is left to send,
// or finishTicks after it asked, saying what is lost then.
func (s *startState) finish() {
	s.finished++
	if !s.idle() && s.finished < finishTicks {
		return
	}
	if s.idle() {
		log.Infof("plugin done: everything sent")
	} else {
		log.Warnf("plugin done: %s not sent in %d s: charges and debts lost, budget alerts left in Redis to other replicas",
			s.pending(), finishTicks*tickMs/1000)
	}
	s.finishing = false
	proxywasm.PluginDone()
}

// injectedCounter is the worker's metricInjected (0: not defined yet): a
// counter outlives the plugin's restarts.
var injectedCounter proxywasm.MetricCounter

// flushTallies adds to the gateway's metrics what requests tallied since
// the last tick (see tally.go).
func (s *startState) flushTallies() {
	s.tallies.flush()
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
	debugLog.read = false // the gateway's level is read again
	injectedCounter = 0   // defined again: by name, the gateway's counter is the same
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

// onTick reads the gateway's log level every second (logging.go), asks Redis for the VM's number (ids.go), probes the Redis endpoints whose breakers are open, sends the
// postponed charges, catches up what local windows counted, renews the
// leases that are due, sends the budget alerts, then moves the queues on. It runs in the plugin's context: calls sent from it
// are always answered.
func (s *startState) onTick() {
	s.ticks++
	if s.ticks%logLevelTicks == 0 {
		readLogLevel()
	}
	s.numberVM()
	s.probeBreakers()
	s.sendPostponed()
	s.catchUp()
	s.renewDueLeases()
	for _, a := range s.alerters {
		a.onTick(s.ticks)
	}
	s.flushTallies()
	if s.room != nil {
		s.room.onTick()
	}
	if s.finishing {
		s.finish()
	}
}
