package limiter

import (
	"strings"

	"github.com/higress-group/wasm-go/pkg/log"
)

// phase is where a request is in its life: one per request, moved on by
// its hooks, by Redis's answers and by the plugin's tick, only along the
// transitions of the table below (which the phase test drives, and
// docs/how-it-works.md draws).
//
//	new          its headers matched a rule (the hook of its headers runs)
//	matching     its model is in its body: it is matched once the body has come (models.go)
//	reading      its body is read before admission, to estimate what it costs (bodies.go)
//	dispatching  its admission calls are being sent: admit is on the stack
//	numbering    its ids wait for the VM's number from Redis, which it asked for (ids.go)
//	admitting    its admission calls are out, not all answered
//	queued       over a limit, it waits in a line for room (queue.go)
//	admitted     it passed every limit (Redis's, or the local windows'): its usage is to be charged
//	passed       Redis could not decide, and failure_mode allow let it go: nothing is charged
//	rejected     answered in the gateway's place (429, 503)
//	settling     the hook of its response's end charges it: the charges may hold that end (charges.go)
//	settled      its usage was charged, or had nothing to charge
//	gone         its stream ended: nothing is to be done to it any more
type phase uint8

const (
	phaseNew phase = iota
	phaseMatching
	phaseReading
	phaseDispatching
	phaseNumbering
	phaseAdmitting
	phaseQueued
	phaseAdmitted
	phasePassed
	phaseRejected
	phaseSettling
	phaseSettled
	phaseGone
	phaseCount
)

var phaseNames = [phaseCount]string{"new", "matching", "reading", "dispatching", "numbering", "admitting", "queued", "admitted",
	"passed", "rejected", "settling", "settled", "gone"}

func (p phase) String() string {
	if p < phaseCount {
		return phaseNames[p]
	}
	return "phase?"
}

// transition is a legal move from one phase to another, on an event.
type transition struct {
	from, to phase
	on       string
}

// transitions are the legal moves: every other one is a bug.
var transitions = []transition{
	{phaseNew, phaseMatching, "its model is in its body"},
	{phaseNew, phaseReading, "its cost is in its body"},
	{phaseNew, phaseDispatching, "admitted at its headers"},
	{phaseMatching, phaseDispatching, "body read: matched, admission sent"},
	{phaseMatching, phaseGone, "stream ended"},
	{phaseReading, phaseDispatching, "body read: admission sent"},
	{phaseReading, phaseGone, "stream ended"},
	{phaseDispatching, phaseNumbering, "the VM has no number yet: asked for it"},
	{phaseDispatching, phaseAdmitting, "calls out"},
	{phaseDispatching, phaseQueued, "others wait for its limits"},
	{phaseDispatching, phaseAdmitted, "decided at once: admitted"},
	{phaseDispatching, phasePassed, "decided at once: failure_mode allow"},
	{phaseDispatching, phaseRejected, "decided at once: rejected"},
	{phaseNumbering, phaseDispatching, "numbered: admission sent"},
	{phaseNumbering, phaseAdmitted, "the call failed: the local windows admit it"},
	{phaseNumbering, phasePassed, "the call failed: failure_mode allow"},
	{phaseNumbering, phaseRejected, "the call failed: failure_mode deny, or local"},
	{phaseNumbering, phaseGone, "stream ended"},
	{phaseAdmitting, phaseDispatching, "slots served different fallbacks"},
	{phaseAdmitting, phaseAdmitted, "every call allowed it"},
	{phaseAdmitting, phasePassed, "a call failed: failure_mode allow"},
	{phaseAdmitting, phaseRejected, "over a limit, or failure_mode deny"},
	{phaseAdmitting, phaseQueued, "over a limit: waits for room"},
	{phaseAdmitting, phaseGone, "stream ended: admission cancelled"},
	{phaseQueued, phaseDispatching, "its turn: asked again"},
	{phaseQueued, phaseRejected, "waited its longest"},
	{phaseQueued, phaseGone, "stream ended: left the line"},
	{phaseAdmitted, phaseSettling, "the response's end"},
	{phaseAdmitted, phaseSettled, "stream ended before its end"},
	{phaseSettling, phaseSettled, "charges sent"},
	{phasePassed, phaseGone, "stream ended"},
	{phaseRejected, phaseGone, "stream ended"},
	{phaseSettled, phaseGone, "stream ended"},
}

// legal[from][to] says whether a move is in transitions.
var legal = func() (t [phaseCount][phaseCount]bool) {
	for _, m := range transitions {
		t[m.from][m.to] = true
	}
	return t
}()

// onIllegalTransition is told of a move the table does not allow: a bug.
// The plugin logs it and goes on (the request is in the phase it was moved
// to); the tests make it fail.
var onIllegalTransition = func(from, to phase) {
	log.Errorf("internal error: a request moved from phase %s to %s", from, to)
}

// onTransition, when set (by the tests), is told of every move.
var onTransition func(from, to phase)

// enter moves a request in phase *p to phase to.
func (p *phase) enter(to phase) {
	if *p == to {
		return
	}
	if !legal[*p][to] {
		onIllegalTransition(*p, to)
	}
	if onTransition != nil {
		onTransition(*p, to)
	}
	*p = to
}

// undecided says whether Redis (or a queue) has not decided on a request
// in phase p yet: nothing of it may pass.
func (p phase) undecided() bool {
	return p == phaseDispatching || p == phaseNumbering || p == phaseAdmitting || p == phaseQueued
}

// phaseDiagram is the transitions as a Mermaid state diagram, for
// docs/how-it-works.md (a test keeps the two the same).
func phaseDiagram() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	b.WriteString("    [*] --> new: headers matched a rule\n")
	for _, m := range transitions {
		b.WriteString("    " + m.from.String() + " --> " + m.to.String() + ": " + m.on + "\n")
	}
	b.WriteString("    gone --> [*]\n")
	return b.String()
}
