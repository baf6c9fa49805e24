package limiter

import (
	"slices"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/locallimit"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// admission is a request's admission: the calls it sends to Redis, one
// per group (what each reserves, the lease it takes, the marker that names
// it), their answers, and the undoing of what the calls took when the
// request does not go on. Its result is an outcome (failed, rejected,
// admitted) with the verdict that decided it, which the request acts on
// (request.decide); the request keeps the phase. It lives inside the
// request (no allocation of its own).
type admission struct {
	groups   []group        // the matched subjects, by Redis Cluster slot (or all in one: see oneCall): one call each
	fallback *fallbacks     // the candidates it may be served as, until admitted (fallback.go; nil: none)
	reserved budget.Amounts // tokens and nanodollars reserved in every window at admission (0: none)
	leaseID  string         // the concurrency lease it takes ("": no subject limits concurrency)
	renewed  time.Time      // when its leases were last taken or renewed
	// sentFromStream says the pending admission calls were sent from the
	// request's own hooks (not the tick): their answers go with its stream.
	sentFromStream bool
	answers                                       // the answers to the calls last sent
	byKind         *[budget.KindUSD + 1]kindQuota // the tightest window of each kind (quota headers, quotaheaders.go)
	// chargedLocally says the local windows admitted it (failure_mode
	// local): its usage is charged there.
	chargedLocally bool
}

// answers are what the groups' calls of one round answered: begin clears
// them, answer and take fill them.
type answers struct {
	pending    int             // admission calls not answered yet
	failure    error           // the first admission call that failed
	rejected   *budget.Verdict // the closed window that resets last, if any
	rejectedBy *group          // the group it belongs to
	verdict    budget.Verdict  // the tightest open window, once admitted
	shadowedBy *group          // a group that admitted it only because its closed limits are soft (shadow_mode)
}

// outcome is what an admission, every group answered, decided.
type outcome uint8

const (
	outcomeAdmitted outcome = iota // every group admitted it: the verdict is the tightest open window
	outcomeRejected                // a closed limit: rejected, rejectedBy say which
	outcomeFailed                  // a call failed (failure): failure_mode decides
)

// admissionOwner is what an admission needs of the request it admits: to
// be told each group's answer, and to give back what a call took.
type admissionOwner interface {
	// answered takes a group's answer (answer), and acts once the last came.
	answered(g *group, v budget.Verdict, err error)
	// charge adds (gives back, negative) amounts to the subjects' windows,
	// in the buckets of time at.
	charge(subjects []budget.Subject, a budget.Amounts, at int64)
	// cancelCall cancels the admission call marker of the subjects from the
	// tick: what it took (amounts, given back) is undone, whenever it runs.
	cancelCall(subjects []budget.Subject, amounts budget.Amounts, marker string)
}

// begin starts a round of the admission, reserving cost: the answers of
// any round before are forgotten.
func (a *admission) begin(cost budget.Amounts) {
	a.reserved = cost
	a.answers = answers{}
	if a.byKind != nil {
		*a.byKind = [budget.KindUSD + 1]kindQuota{}
	}
	for i := range a.groups {
		a.groups[i].verdict, a.groups[i].answered = budget.Verdict{}, false
	}
}

// send sends one admission call per group, reserving the round's cost in
// every window (0: check only); o takes each answer, some maybe at once
// (a call that could not leave). fromStream says it is sent from the
// request's own hooks (or the answer to its call for the VM's number),
// whose answers go with its stream.
func (a *admission) send(pc PluginConfig, fromStream bool, o admissionOwner) {
	ids := pc.ids
	if a.leaseID == "" && a.takesLeases() {
		a.leaseID = ids.newID()
	}
	a.pending = len(a.groups)
	a.sentFromStream = fromStream
	if a.leaseID != "" {
		a.renewed = time.Now()
	}
	for i := range a.groups {
		g := &a.groups[i]
		g.marker = ""
		if g.takes(a.reserved) || g.alternatives != nil {
			// Its answer may be lost with the stream (see cancel), or come
			// after the gateway gave up on it (see answer).
			g.marker = ids.newID()
		}
		var err error
		if g.alternatives != nil {
			err = a.sendFirst(pc, g, o)
		} else {
			err = pc.redis.Admit(g.subjects, a.reserved, a.leaseID, g.marker, func(v budget.Verdict, err error) { o.answered(g, v, err) })
		}
		if err != nil { // the call never left: that group fails now
			o.answered(g, budget.Verdict{}, err)
		}
	}
}

// applyLevel gives every subject of the admission (every candidate's,
// with fallbacks) priority level level, and the share of its concurrency
// limit open to it.
func (a *admission) applyLevel(rules *config.Config, level int) {
	if rules.Priority == nil {
		return
	}
	apply := func(l *limits) {
		for i := range l.subjects {
			s := &l.subjects[i]
			s.Level = level
			if s.Concurrent > 0 {
				s.ConcurrentOpen = l.matches[i].ConcurrentOpen(level)
			}
		}
	}
	for i := range a.groups {
		g := &a.groups[i]
		apply(&g.limits)
		for j := range g.alternatives {
			apply(&g.alternatives[j])
		}
	}
}

// chargesUsage says whether a subject of the admission is charged what
// the request used (it has a token or a money window): a response without
// usage is then charged an estimate (estimated).
func (a *admission) chargesUsage() bool {
	for i := range a.groups {
		if a.groups[i].tokens || a.groups[i].usd {
			return true
		}
	}
	return false
}

// takesLeases says whether the admission takes a concurrency lease: some
// subject of it (of any candidate it may be served as) limits concurrency.
func (a *admission) takesLeases() bool {
	for i := range a.groups {
		g := &a.groups[i]
		if g.leases || slices.ContainsFunc(g.alternatives, func(l limits) bool { return l.leases }) {
			return true
		}
	}
	return false
}

// answer takes one group's answer (budget alerts on its crossings, the
// access log l noting the limit that decides); it reports whether it was
// the last the round waited for.
func (a *admission) answer(pc PluginConfig, o admissionOwner, l *accessLog, g *group, v budget.Verdict, err error) bool {
	if g.canceled {
		return false // answered after all, but its stream is gone and its admission was cancelled
	}
	a.pending--
	if err == nil {
		a.serving(g, v) // with fallbacks: the candidate it is about
		a.noteByKind(g, v)
	} else if g.marker != "" && scripts.MayHaveRun(err) {
		// The gateway gave up on it (redis.timeout) or its reply made no
		// sense, but Redis may have run it, or run it still, late (a Redis
		// that hangs runs what it was sent when it resumes): failure_mode
		// decides the request, and what the admission took is undone,
		// whenever it runs.
		a.cancelGroup(o, g)
	}
	pc.alertCrossings(g.matches, g.subjects, v.Crossings) // budget alerts: sent from the tick
	if err != nil {
		if a.failure == nil {
			a.failure = err
		}
	} else {
		a.take(g, v, false, l)
	}
	return a.pending == 0
}

// take takes group g's verdict v, the one place the admission's verdict
// is written: a closed limit is the rejection when it resets last (or,
// alone, whatever came before: the local windows decide by themselves);
// an open one is the request's verdict (the quota headers show it, the
// access log l notes its limit) when it decides among the groups as each
// group's script chose among its windows.
func (a *admission) take(g *group, v budget.Verdict, alone bool, l *accessLog) {
	g.verdict, g.answered = v, true
	if !v.Allowed {
		if alone || a.rejected == nil || v.Reset > a.rejected.Reset {
			a.rejected, a.rejectedBy = &g.verdict, g
		}
		return
	}
	if v.OverSoft && a.shadowedBy == nil {
		a.shadowedBy = g
	}
	if v.Limit > 0 && (a.verdict.Limit == 0 || v.DecidesOver(a.verdict)) { // (no limit: a slot where nothing limits it)
		a.verdict = v
		l.noteLimit(g, v)
	}
}

// outcome is what the admission decided, every group answered.
func (a *admission) outcome() outcome {
	switch {
	case a.failure != nil:
		return outcomeFailed
	case a.rejected != nil:
		return outcomeRejected
	}
	return outcomeAdmitted
}

// rejectedScope names the limit that rejected the request, for the
// X-TokenRateLimit-Scope header (see scopeOf).
func (a *admission) rejectedScope(rules *config.Config) string {
	return scopeOf(rules, a.rejectedBy, a.rejected)
}

// decideLocally decides, with the worker's windows, an admission Redis
// could not decide, all its groups or none: admitted (charged locally from
// then on), or rejected as Redis would have, with the local limit.
func (a *admission) decideLocally(local *locallimit.Limiter, l *accessLog) outcome {
	now := time.Now().Unix()
	for i := range a.groups {
		g := &a.groups[i]
		v := local.Admit(g.subjects, a.reserved, now)
		if !v.Allowed {
			for j := range i { // give back what the groups before it took
				local.Charge(a.groups[j].subjects, a.reserved.GivenBack(), now, now, true)
			}
			a.take(g, v, true, l)
			return outcomeRejected
		}
		a.take(g, v, false, l)
	}
	a.chargedLocally = true
	return outcomeAdmitted
}

// rollBack undoes the admission of the groups that admitted the request when
// another group rejected it or failed: gives back their reservation, uncounts
// the request and releases its leases.
func (a *admission) rollBack(o admissionOwner) {
	for i := range a.groups {
		if g := &a.groups[i]; g.answered {
			a.rollBackGroup(o, g)
		}
	}
}

// rollBackGroup gives back what an answered group's admission took, if it
// admitted the request and took anything.
func (a *admission) rollBackGroup(o admissionOwner, g *group) {
	if reserved := a.reservedBy(g); g.verdict.Allowed && g.takes(reserved) && len(g.subjects) > 0 {
		o.charge(g.subjects, reserved.GivenBack(), g.verdict.At)
	}
}

// takes says whether the group's admission takes anything that must be given
// back should the request not go on: a reservation, a request count, a lease.
func (g *group) takes(reserved budget.Amounts) bool {
	return reserved != budget.Amounts{} || g.requests || g.leases
}

// cancel undoes the admission of a request whose stream ended before
// Redis answered it. The gateway delivers the answer to a call only while
// the stream it was sent from lives, so an admission sent from the
// request's hooks may never be answered: each group still waiting is
// cancelled (cancelGroup), and the groups that did admit it are rolled
// back, from the plugin's tick, whose calls are always answered. (A retry
// of a queued request is sent from the tick: its answer comes, and decide
// rolls it back.)
func (a *admission) cancel(o admissionOwner) {
	if a.pending == 0 || !a.sentFromStream {
		return
	}
	a.pending = 0
	for i := range a.groups {
		g := &a.groups[i]
		switch {
		case g.answered:
			a.rollBackGroup(o, g)
		case g.marker != "" && !g.canceled: // (one that failed is cancelled already: see answer)
			a.cancelGroup(o, g)
		}
	}
}

// cancelGroup cancels the admission of a group whose answer the request
// will not have (its stream ended first) or that failed where Redis may
// run it all the same (see answer), from the plugin's tick
// (scripts.Client.Cancel, tried until it lands: see pendingCharge.answered):
// the admission is undone if it ran and admitted (its reservation, its
// request count and its lease given back), and takes nothing if it runs
// later. A late answer to it is ignored.
func (a *admission) cancelGroup(o admissionOwner, g *group) {
	g.canceled = true
	if g.alternatives == nil {
		o.cancelCall(g.subjects, a.reserved.GivenBack(), g.marker)
		return
	}
	f := a.fallback
	for i := f.first; i < len(g.alternatives); i++ { // each candidate offered: the one it served, if any, is undone
		if subjects := g.alternatives[i].subjects; len(subjects) > 0 {
			o.cancelCall(subjects, f.candidates[i].cost.GivenBack(), scripts.FallbackMarker(g.marker, i-f.first))
		}
	}
}
