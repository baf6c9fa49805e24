package limiter

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// maxRenewInterval is the longest a streaming request goes without renewing
// its concurrency leases; a lease shorter than three of them is renewed every
// third of its length, so that it never lapses while data flows.
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
	return leaseIDs.prefix + strconv.FormatUint(leaseIDs.next, 36)
}

// renewInterval is how often a request renews its leases while it streams.
func (pc PluginConfig) renewInterval() time.Duration {
	return min(maxRenewInterval, time.Duration(pc.rules.LeaseSeconds)*time.Second/3)
}

// renewLeases extends the request's concurrency leases if it has not done so
// for a renewal interval; nothing waits for the answer.
func (r *request) renewLeases() {
	if r.leaseID == "" {
		return // no leases: every chunk of most requests stops here, without reading the clock
	}
	now := time.Now()
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
				log.Warnf("renewing the concurrency lease of %s failed: %v", g.subjects[0].Key, err)
			}
		}
		if err := r.pc.redis.Renew(leased(g.subjects), r.leaseID, failed); err != nil {
			failed(err)
		}
	}
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
