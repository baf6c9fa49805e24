package limiter

import (
	"slices"
	"strings"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// over_limit_action: queue keeps an over-limit request paused and asks Redis
// again when its answer said there would be room: Redis decides when
// capacity is back (by its own clock, so replicas agree), and the request is
// rejected like any other once max_queue_wait_ms have passed since it
// arrived, or as soon as Redis says room comes later than that.
//
// A worker's waiting requests form one line per set of subjects: only the
// first of a line asks Redis; the others wait behind it, so that requests
// are admitted in arrival order as far as one worker can see, and a line
// makes one call per retry whatever its length. The plugin's tick paces the
// retries and counts the waits (the wall clock of a WASM VM is a host call,
// and some hosts do not advance it between calls).
//
// A retry is sent from the tick, or from the answer to the retry before it,
// never from a request's own hook: the host ties a call to the context it
// was sent from and drops its answer when that context ends, which would
// strand the line behind a request that has gone. Sent from the plugin's
// context, its answer always comes: a request whose client left meanwhile
// gives back what the retry took.

// tickMs is the tick period the wrapper asks the host for, in milliseconds,
// when a tick function is registered.
const tickMs = 100

// waitingRoom is the waiting lines of one started plugin (one per worker).
type waitingRoom struct {
	tick  uint64               // ticks since the plugin started
	lines map[string]*waitLine // by the subjects their requests wait for
}

// waitLine is the requests waiting for one set of subjects, in arrival order.
type waitLine struct {
	key     string
	waiting []*request
	retryAt uint64         // the tick at which waiting[0] asks again (0: at once)
	asking  bool           // waiting[0]'s retry is with Redis
	verdict budget.Verdict // the latest rejection: what those who give up are told
	scope   string         // and the limit it names (see rejectedScope)
}

// ticksFor converts a wait in milliseconds to ticks, rounding up.
func ticksFor(ms int64) uint64 {
	return uint64((max(ms, 0) + tickMs - 1) / tickMs)
}

// enterQueueing notes, for a request of a queueing configuration, its
// context (to act on it from the tick, should it wait) and when it must stop
// waiting.
func (room *waitingRoom) enterQueueing(r *request, ctx wrapper.HttpContext) {
	if room != nil {
		r.httpCtx = ctx
		r.giveUpAt = room.tick + ticksFor(r.pc.rules.MaxQueueWaitMs)
	}
}

// queueKey names the set of subjects an admission waits for.
func (a *admission) queueKey() string {
	var b strings.Builder
	for _, g := range a.groups {
		for _, s := range g.subjects {
			b.Write(s.Key)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// lineAhead returns the line of requests already waiting for the request's
// subjects, which it must wait behind, or nil.
func (room *waitingRoom) lineAhead(r *request) *waitLine {
	if r.httpCtx == nil || r.queue != nil || len(room.lines) == 0 {
		return nil
	}
	return room.lines[r.queueKey()]
}

// join puts the request at the end of a line (a new one for its subjects
// when line is nil). It returns nil when the request cannot wait: its
// context id is unknown.
func (room *waitingRoom) join(r *request, line *waitLine) *waitLine {
	if r.ctxID == 0 {
		log.Errorf("over_limit_action queue: the request's context id is unknown; rejecting instead of queueing")
		return nil
	}
	if line == nil {
		key := r.queueKey()
		if line = room.lines[key]; line == nil {
			line = &waitLine{key: key}
			room.lines[key] = line
		}
	}
	line.waiting = append(line.waiting, r)
	r.queue = line
	r.pc.metrics.count(metricQueued, requestHeader(consumerHeader), r.servedModel())
	return line
}

// wait queues a rejected request, or keeps it queued, until Redis says there
// is room; it returns false when the request is not to wait: queueing is
// off, the room comes after the request's maximum wait, or never comes (a
// reservation larger than a token window). scope names the limit that
// closed, for those who give up.
func (room *waitingRoom) wait(r *request, v budget.Verdict, scope string) bool {
	if r.httpCtx == nil || !r.admission.fits(r.pc.rules) || r.reserved.Exceeds(v.Kind, v.Limit) {
		return false
	}
	retryAt := room.tick + max(ticksFor(v.WaitMs), 1)
	if retryAt > r.giveUpAt {
		return false
	}
	line := r.queue
	if line == nil {
		if line = room.join(r, nil); line == nil {
			return false
		}
	}
	line.verdict, line.scope = v, scope
	if line.waiting[0] == r {
		line.retryAt, line.asking = retryAt, false
	}
	return true
}

// fits says whether the admission's reservation fits every token and money
// window at all: one larger than a window's limit (the share of it open to
// the request's priority level) would wait in vain. With
// limit_overrides, a subject's limit may be another than configured: only
// the limit Redis reported (wait) says.
func (a *admission) fits(rules *config.Config) bool {
	if rules.LimitOverrides {
		return true
	}
	for _, g := range a.groups {
		for _, s := range g.subjects {
			for j, w := range s.Windows { // the share of it open to the request's priority level
				if a.reserved.Exceeds(budget.KindOf(w.Unit), config.Share(w.Limit, s.Open(j))) {
					return false
				}
			}
		}
	}
	return true
}

// leave takes a decided (or gone) request out of its line; the next in
// line asks Redis at the next chance.
func (room *waitingRoom) leave(r *request) {
	line := r.queue
	if line == nil {
		return
	}
	r.queue = nil
	i := slices.Index(line.waiting, r)
	if i < 0 {
		return
	}
	line.waiting = slices.Delete(line.waiting, i, i+1)
	if i == 0 {
		line.retryAt, line.asking = 0, false
	}
	if len(line.waiting) == 0 {
		delete(room.lines, line.key)
	}
}

// onTick retries the first of each line whose time has come, then gives up
// on the requests that waited their maximum. Calls go out before any
// request is acted on: see actOnItsContext.
func (room *waitingRoom) onTick() {
	room.tick++
	for _, line := range room.lines {
		line.pump(room.tick)
	}
	for _, line := range room.lines {
		line.giveUp(room.tick)
	}
}

// giveUp rejects the requests of the line whose maximum wait ended at an
// earlier tick (at that tick, a retry could still admit them), except the
// first while Redis is deciding on it.
func (line *waitLine) giveUp(tick uint64) {
	for i := len(line.waiting) - 1; i >= 0; i-- {
		r := line.waiting[i]
		if tick <= r.giveUpAt || i == 0 && line.asking {
			continue
		}
		v, scope := line.verdict, line.scope
		r.pc.queues.leave(r)
		r.actOnItsContext()
		r.reject(v, scope)
	}
}

// pump retries the first request of the line while it is its time and no
// retry is with Redis: when one is decided at once (the call could not be
// sent), the next goes.
func (line *waitLine) pump(tick uint64) {
	for len(line.waiting) > 0 && !line.asking && line.retryAt <= tick {
		line.asking = true
		line.waiting[0].retry()
	}
}

// retry asks Redis again for a queued request. The call goes out on the
// context the tick (or the answer to the retry before) runs on, which is
// the plugin's: its answer comes even if the request's stream ends first.
func (r *request) retry() {
	if r.admit(r.reserved) == types.ActionContinue {
		r.actOnItsContext()
		r.resume() // decided at once: admitted, or failure_mode allow
	}
}

// actOnItsContext points the host at the request's stream, to resume or
// answer it from outside its own hooks (from the tick, or an answer to a
// call sent from it). Calls are sent before it, not after: the test host
// ties a call to the context last pointed at (a gateway ties it to the one
// running), and drops its answer when that stream ends.
func (w *waiting) actOnItsContext() {
	if w.ctxID != 0 {
		_ = proxywasm.SetEffectiveContext(w.ctxID)
	}
}
