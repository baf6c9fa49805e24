package limiter

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// maxRenewInterval is the longest a request in progress goes without
// renewing its concurrency leases; a lease shorter than three of them is
// renewed every third of its length, so that it never lapses while the
// request lasts.
const maxRenewInterval = 10 * time.Second

// leaseIDs names the concurrency leases this VM takes: a random prefix, drawn
// once, that tells gateway replicas (and restarts) apart, and a counter.
var leaseIDs struct {
	prefix string
	next   uint64
}

// newLeaseID returns a lease id no other request of any replica uses.
func newLeaseID() string {
	if leaseIDs.prefix == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			// No randomness from the host: the time still tells restarts
			// apart, though not replicas started in the same nanosecond.
			log.Warnf("no random lease id prefix: %v", err)
			b = [12]byte{}
			copy(b[:], strconv.FormatInt(time.Now().UnixNano(), 36))
		}
		leaseIDs.prefix = base64.RawURLEncoding.EncodeToString(b[:]) + "."
	}
	leaseIDs.next++
	var buf [48]byte // the prefix's 17 bytes and a uint64 in base 36: one allocation, the string's
	return string(strconv.AppendUint(append(buf[:0], leaseIDs.prefix...), leaseIDs.next, 36))
}

// renewInterval is how often a request renews its leases while it streams.
func (pc PluginConfig) renewInterval() time.Duration {
	return min(maxRenewInterval, time.Duration(pc.rules.LeaseSeconds)*time.Second/3)
}

// renewLeases extends the request's concurrency leases if it has not done so
// for a renewal interval; nothing waits for the answer. The tick calls it
// (renewDueLeases), so that a request renews its leases while it is in
// progress, streaming or not.
func (r *request) renewLeases(now time.Time) {
	if now.Sub(r.renewed) < r.pc.renewInterval() {
		return
	}
	r.renewed = now
	for i := range r.groups {
		g := &r.groups[i]
		if !g.leases {
			continue
		}
		failed := func(err error) {
			if err != nil {
				log.Warnf("renewing the concurrency lease of %s failed: %v", g.subjects[0].LogName(), err)
			}
		}
		if err := r.pc.redis.Renew(leased(g.subjects), r.leaseID, failed); err != nil {
			failed(err)
		}
	}
}

// holdsLeases notes an admitted request that took concurrency leases, for
// the tick to renew them until it ends.
func (r *request) holdsLeases() {
	if r.leaseID != "" {
		r.pc.start.leaseHolders = append(r.pc.start.leaseHolders, r)
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
		if r.settled || r.gone {
			continue
		}
		r.renewLeases(now)
		kept = append(kept, r)
	}
	clear(s.leaseHolders[len(kept):])
	s.leaseHolders = kept
}

// leased returns the subjects with a concurrency limit, reusing the slice
// when they all have one.
func leased(subjects []scripts.Subject) []scripts.Subject {
	n := 0
	for _, s := range subjects {
		if s.Concurrent > 0 {
			n++
		}
	}
	if n == len(subjects) {
		return subjects
	}
	out := make([]scripts.Subject, 0, n)
	for _, s := range subjects {
		if s.Concurrent > 0 {
			out = append(out, s)
		}
	}
	return out
}
