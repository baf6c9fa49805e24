package limiter

import (
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/locallimit"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// failure_mode: local. When Redis cannot decide a request, the worker
// decides it with its own windows (package locallimit), each limit divided
// by local_share, and charges its usage there; what it counted is added to
// Redis from the tick once Redis answers again (the catch-up), so the
// windows that span the outage see it on every replica. A charge of a
// request Redis admitted that fails twice is kept for the catch-up too.
// The catch-up sends debts (locallimit.Debt): each under a charge id of its
// own, the same on every attempt, so that an attempt whose answer was lost
// is applied once; a refund that comes after its reservation was caught up
// is a debt too, a negative one, given back in the reservation's bucket.

// catchUpPerTick bounds the catch-up calls one tick sends, per configuration.
const catchUpPerTick = 100

// Metric names of failure_mode local.
const (
	// metricDecidedLocally counts requests decided by the local windows.
	metricDecidedLocally = "token_ratelimit_local_decision_count"
	// metricCaughtUp and metricLost count tokens counted locally that were
	// added to Redis afterwards, and those whose window ended first.
	metricCaughtUp = "token_ratelimit_local_caught_up_tokens"
	metricLost     = "token_ratelimit_local_lost_tokens"
)

// localState is one configuration's local windows and what the tick needs
// to catch them up.
type localState struct {
	limiter  *locallimit.Limiter
	client   *scripts.Client
	ids      *vmIDs // the VM's ids for the client's Redis: a debt's charge id is one
	caughtUp proxywasm.MetricCounter
	lost     proxywasm.MetricCounter
	lostSeen int64 // the limiter's lost tokens already counted
}

// newLocal makes a configuration's local windows, caught up from the tick.
func (s *startState) newLocal(rules *config.Config, client *scripts.Client, ids *vmIDs) *locallimit.Limiter {
	name := "redis." + rules.Redis.ServiceName + ".metric."
	ls := &localState{
		limiter:  locallimit.New(rules.LocalShare, int(rules.LocalMaxSubjects), ids.newID, &rules.Calendar),
		client:   client,
		ids:      ids,
		caughtUp: defineCounter(name + metricCaughtUp),
		lost:     defineCounter(name + metricLost),
	}
	s.locals = append(s.locals, ls)
	return ls.limiter
}

// decideLocally decides a request Redis could not decide with the local
// windows, all its groups or none: admits it, or rejects it as Redis
// would have, with the local limit.
func (r *request) decideLocally() {
	r.pc.metrics.count(metricDecidedLocally, requestHeader(consumerHeader), r.servedModel())
	now := time.Now().Unix()
	for i := range r.groups {
		g := &r.groups[i]
		v := r.pc.local.Admit(g.subjects, r.reserved, now)
		if !v.Allowed {
			for j := range i { // give back what the groups before it took
				r.pc.local.Charge(r.groups[j].subjects, r.reserved.GivenBack(), now, now, true)
			}
			g.verdict = v
			r.rejected, r.rejectedBy = &g.verdict, g
			r.reject(v, r.rejectedScope())
			return
		}
		r.allowedBy(g, v)
	}
	r.chargedLocally = true
	r.shadowReject()
	r.goOn(phaseAdmitted)
}

// catchUp adds to Redis what the local windows counted, a bounded number
// of calls per configuration and tick, while Redis's breaker is closed and
// the VM's ids need not wait for its number (ids.go; the tick asks). A
// debt goes to the bucket current by Redis's clock, where charge.lua puts
// what is added: a refund (a negative debt) too (at 0: now's, not the
// worker's bucket's second), so that it goes where what it gives back went
// even when the worker's clock and Redis's disagree. A call that fails
// gives its debt back to the local window, to be sent again as it was from
// a later tick.
func (s *startState) catchUp() {
	now := time.Now().Unix()
	for _, ls := range s.locals {
		ls.countLost()
		if !ls.limiter.Owes() || ls.client.BreakerOpen() || ls.ids.waits() {
			continue
		}
		for _, d := range ls.limiter.TakeDebts(catchUpPerTick, now) {
			subject := []budget.Subject{{Key: []byte(d.Key), Windows: []config.Window{d.Window}}}
			err := ls.client.Charge(subject, locallimit.AmountsOf(d.Window.Unit, d.Amount), 0, "", d.ID, func(err error) { ls.caughtUpOrNot(d, err) })
			if err != nil {
				ls.caughtUpOrNot(d, err)
			}
		}
	}
}

// caughtUpOrNot takes the answer to a catch-up call. The caught-up counter
// counts what was added; a refund takes nothing from it.
func (ls *localState) caughtUpOrNot(d locallimit.Debt, err error) {
	if err != nil {
		// The debt does not say whether its value is a credential: the line
		// shows every value as one.
		log.Debugf("catching up %d on %s failed, kept for later: %v", d.Amount, shownKey(d.Key), err)
		ls.limiter.Owe(d, time.Now().Unix())
		return
	}
	ls.limiter.Paid(d)
	if d.Window.Unit == config.UnitTokens && d.Amount > 0 {
		ls.caughtUp.Increment(uint64(d.Amount))
	}
}

// countLost counts the tokens the local windows lost since it last looked.
func (ls *localState) countLost() {
	if n := ls.limiter.LostTokens - ls.lostSeen; n > 0 {
		ls.lost.Increment(uint64(n))
		ls.lostSeen = ls.limiter.LostTokens
	}
}
