package limiter

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
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

// leaseIDs names the concurrency leases, charges and admission markers this
// VM makes: a prefix, drawn once, that tells gateway replicas (and
// restarts) apart, and a counter.
var leaseIDs struct {
	prefix   string
	next     uint64
	numbered bool // the prefix holds the VM's number from Redis (numberVM)
	asking   bool // numberVM's call is out
}

// newLeaseID returns an id no other request of any replica uses.
func newLeaseID() string {
	if leaseIDs.prefix == "" {
		leaseIDs.prefix = idPrefix(time.Now(), 0)
	}
	leaseIDs.next++
	var buf [48]byte // the prefix's 17 bytes and a uint64 in base 36: one allocation, the string's
	return string(strconv.AppendUint(append(buf[:0], leaseIDs.prefix...), leaseIDs.next, 36))
}

// idPrefix is the prefix of a VM's ids: 12 bytes of a hash of the host's
// random bytes, of the time to the nanosecond, and of the VM's number from
// Redis (0 before it has one). The host's randomness and clock may be weak:
// a WASM runtime's defaults (wazero's, which the proxy-wasm emulator runs)
// give every VM the same bytes and the same time, and two replicas with one
// prefix would take each other's charges for repeats, and their admission
// markers for cancellations. Gateways give real randomness; the number
// tells apart the VMs of any host.
func idPrefix(now time.Time, number int64) string {
	var seed [28]byte
	if _, err := rand.Read(seed[:12]); err != nil {
		log.Warnf("no random id prefix: %v", err)
	}
	binary.LittleEndian.PutUint64(seed[12:], uint64(now.UnixNano()))
	binary.LittleEndian.PutUint64(seed[20:], uint64(number))
	sum := sha256.Sum256(seed[:])
	return base64.RawURLEncoding.EncodeToString(sum[:12]) + "."
}

// numberVM asks Redis, from the tick, for a number no other VM on it has
// (scripts.Client.NumberVM), once it answers, and mixes it into the prefix
// of the ids drawn from then on (see idPrefix). Until it answers, ids take
// the host's randomness alone, which a gateway's is.
func (s *startState) numberVM() {
	if leaseIDs.numbered || leaseIDs.asking {
		return
	}
	for _, eb := range s.breakers {
		if eb.breaker.Open() {
			continue
		}
		err := eb.prober.NumberVM(func(n int64, err error) {
			leaseIDs.asking = false
			if err == nil {
				leaseIDs.prefix, leaseIDs.numbered = idPrefix(time.Now(), n), true
			}
		})
		leaseIDs.asking = err == nil
		return
	}
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
		if r.phase == phaseSettled || r.phase == phaseGone {
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
