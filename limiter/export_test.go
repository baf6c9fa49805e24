package limiter

import "encoding/binary"

// MaxMetricModels is how many distinct models get counters of their own.
const MaxMetricModels = maxMetricModels

// ForgetMetricModels empties the VM's set of models with counters of their
// own. In Go mode every test runs on one VM, the test binary's, so a test
// that counts under models starts from an empty set and leaves one behind;
// in WASM mode each test.RunTest has a VM of its own.
func ForgetMetricModels() { clear(metricModels) }

// In the tests, a request moved along a transition the phase table does not
// allow fails the test that moved it (Go mode runs the plugin in the test
// process).
func init() {
	onIllegalTransition = func(from, to phase) {
		panic("a request moved from phase " + from.String() + " to " + to.String() + ": not in the phase table")
	}
}

// Transition is a move of a request from one phase to another.
type Transition struct{ From, To string }

// RecordTransitions records every move of every request until stop is
// called, which returns them.
func RecordTransitions() (stop func() []Transition) {
	var moves []Transition
	onTransition = func(from, to phase) { moves = append(moves, Transition{from.String(), to.String()}) }
	return func() []Transition {
		onTransition = nil
		return moves
	}
}

// PhaseTable is every legal move, and PhaseDiagram the diagram drawn from it.
func PhaseTable() []Transition {
	out := make([]Transition, 0, len(transitions))
	for _, m := range transitions {
		out = append(out, Transition{m.from.String(), m.to.String()})
	}
	return out
}

func PhaseDiagram() string { return phaseDiagram() }

// EachHeaderValue is eachHeaderValue, collecting the values.
func EachHeaderValue(m []byte, name string) (values []string) {
	eachHeaderValue(m, name, func(v string) { values = append(values, v) })
	return values
}

// ForgetIDs makes the Go-mode plugin that starts next a new gateway
// replica, as far as its ids go: the VM has no number from any Redis yet.
// restore gives the test process's VM its ids back.
func ForgetIDs() (restore func()) {
	saved := idsByEndpoint
	idsByEndpoint = map[string]*vmIDs{}
	return func() { idsByEndpoint = saved }
}

// WeakHostReplica is ForgetIDs, on a host whose randomness is not seeded
// and whose clock is fake (wazero's defaults, which the SDK's emulator
// loads modules with): every id prefix drawn from then on starts from the same bytes and
// the same time as in any other such replica. restore puts the host's
// randomness and the VM's ids back.
func WeakHostReplica() (restore func()) {
	forgotten := ForgetIDs()
	saved := hostSeed
	hostSeed = func(seed []byte) {
		clear(seed[:12])
		binary.LittleEndian.PutUint64(seed[12:20], 1767229200e9)
	}
	return func() {
		hostSeed = saved
		forgotten()
	}
}
