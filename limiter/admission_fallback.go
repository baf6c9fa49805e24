package limiter

import (
	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// The admission of a request with fallbacks (model_fallbacks, fallback.go):
// each group's call offers its candidates, and the groups must agree on
// the one served.

// sendFirst sends the admission of a group with fallbacks: its candidates
// from the first offered.
// A group none of whose candidates offered has subjects (a slot only
// earlier candidates use) is answered at once: nothing in it stops the first.
func (a *admission) sendFirst(pc PluginConfig, g *group, o admissionOwner) error {
	f := a.fallback
	candidates := make([]scripts.Candidate, 0, len(f.candidates)-f.first)
	empty := true
	for i := f.first; i < len(f.candidates); i++ {
		subjects := g.alternatives[i].subjects
		empty = empty && len(subjects) == 0
		candidates = append(candidates, scripts.Candidate{Subjects: subjects, Cost: f.candidates[i].cost})
	}
	if empty {
		g.marker = ""
		o.answered(g, budget.Verdict{Allowed: true, Subject: -1, Window: -1, WouldServe: -1}, nil)
		return nil
	}
	if len(candidates) == 1 { // the last one alone: a plain admission
		c := candidates[0]
		return pc.redis.Admit(c.Subjects, c.Cost, a.leaseID, g.marker, func(v budget.Verdict, err error) {
			v.WouldServe = -1
			o.answered(g, v, err)
		})
	}
	return pc.redis.AdmitFirst(candidates, a.leaseID, g.marker, func(v budget.Verdict, err error) { o.answered(g, v, err) })
}

// serving notes which candidate a group's answer is about: the group's
// subjects are that candidate's from then on (the verdict's subject indexes
// are among them).
func (a *admission) serving(g *group, v budget.Verdict) {
	if g.alternatives == nil {
		return
	}
	g.served = a.fallback.first + v.Served
	g.limits = g.alternatives[g.served]
}

// reservedBy is what a group's admission reserved: its served candidate's
// cost, with fallbacks.
func (a *admission) reservedBy(g *group) budget.Amounts {
	if g.alternatives == nil {
		return a.reserved
	}
	return a.fallback.candidates[g.served].cost
}

// agree checks, once every group admitted the request, that they admitted
// it as the same candidate: slots on a Redis Cluster decide apart, each
// serving the first candidate with room there. When they did not, what
// they took is given back (through o) and the candidates offered start
// from the latest served (the earlier ones have no room in its slot): it
// returns false, and every slot is to be asked again. Candidates only
// grow, so this ends.
func (a *admission) agree(o admissionOwner) bool {
	if a.fallback == nil || len(a.groups) < 2 {
		return true
	}
	latest, same := a.groups[0].served, true
	for i := range a.groups {
		same = same && a.groups[i].served == latest
		latest = max(latest, a.groups[i].served)
	}
	if same {
		return true
	}
	a.rollBack(o)
	a.fallback.first = latest
	return false
}

// askedLimits puts every group back to the asked model's subjects: a
// request decided without Redis (failure_mode local) is limited as it asked.
func (a *admission) askedLimits() {
	if a.fallback == nil {
		return
	}
	for i := range a.groups {
		g := &a.groups[i]
		g.served, g.limits = 0, g.alternatives[0]
	}
	a.dropEmptyGroups()
	a.fallback = nil
}

// dropEmptyGroups forgets the groups whose candidate has no subjects in
// their slot: nothing there is charged or released.
func (a *admission) dropEmptyGroups() {
	kept := a.groups[:0]
	for _, g := range a.groups {
		if len(g.subjects) > 0 {
			kept = append(kept, g)
		}
	}
	a.groups = kept
}

// serve makes an admitted admission the candidate its groups served: its
// reservation that candidate's, its groups those with subjects. It returns
// the fallbacks it had and the index of the candidate served (nil, 0:
// none).
func (a *admission) serve() (*fallbacks, int) {
	f := a.fallback
	if f == nil {
		return nil, 0
	}
	k := a.groups[0].served
	a.reserved = f.candidates[k].cost
	a.dropEmptyGroups()
	a.fallback = nil
	return f, k
}
