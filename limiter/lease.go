package limiter

import (
	"time"

	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
)

// maxRenewInterval is the longest a request in progress goes without
// renewing its concurrency leases; a lease shorter than three of them is
// renewed every third of its length, so that it never lapses while the
// request lasts.
const maxRenewInterval = 10 * time.Second

// renewInterval is how often a request renews its leases while it streams.
func (pc PluginConfig) renewInterval() time.Duration {
	return min(maxRenewInterval, time.Duration(pc.rules.LeaseSeconds)*time.Second/3)
}

// renewLeases extends the admission's concurrency leases if it has not done so
// for a renewal interval; nothing waits for the answer. The tick calls it
// (renewDueLeases), so that a request's admission renews its leases while it is in
// progress, streaming or not.
func (a *admission) renewLeases(pc PluginConfig, now time.Time) {
	if now.Sub(a.renewed) < pc.renewInterval() {
		return
	}
	a.renewed = now
	for i := range a.groups {
		g := &a.groups[i]
		if !g.leases {
			continue
		}
		failed := func(err error) {
			if err != nil {
				log.Warnf("renewing the concurrency lease of %s failed: %v", g.subjects[0].LogName(), err)
			}
		}
		if err := pc.redis.Renew(leased(g.subjects), a.leaseID, failed); err != nil {
			failed(err)
		}
	}
}

// holdLeases notes an admitted request that took concurrency leases, for
// the tick to renew them until it ends.
func (s *startState) holdLeases(r *request) {
	if r.leaseID != "" {
		s.leaseHolders = append(s.leaseHolders, r)
	}
}

// renewDueLeases renews the leases of the requests in progress that are
// due, from the tick (whose calls are always answered), and forgets the
// requests that ended: their last charge released their leases.
func (s *startState) renewDueLeases() {
	if len(s.leaseHolders) == 0 {
		return
	}
	now := time.Now()
	kept := s.leaseHolders[:0]
	for _, r := range s.leaseHolders {
		if r.phase == phaseSettled || r.phase == phaseGone {
			continue
		}
		r.admission.renewLeases(r.pc, now)
		kept = append(kept, r)
	}
	clear(s.leaseHolders[len(kept):])
	s.leaseHolders = kept
}

// leased returns the subjects with a concurrency limit, reusing the slice
// when they all have one.
func leased(subjects []budget.Subject) []budget.Subject {
	n := 0
	for _, s := range subjects {
		if s.Concurrent > 0 {
			n++
		}
	}
	if n == len(subjects) {
		return subjects
	}
	out := make([]budget.Subject, 0, n)
	for _, s := range subjects {
		if s.Concurrent > 0 {
			out = append(out, s)
		}
	}
	return out
}
