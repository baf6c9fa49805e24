package limiter

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
)

// Every concurrency lease, charge and admission marker the plugin sends
// Redis carries an id no other request of any VM on that Redis uses: Redis
// takes a charge whose id it has seen for a retry of one it applied
// (charge.lua), and an admission marker it has seen for a cancelled
// admission. An id is a prefix and a counter. The prefix hashes the host's
// random bytes and time with a number Redis gives no other VM (INCR
// atrl:vms, scripts.Client.NumberVM): a host's randomness and clock may be
// the same in every VM (wazero's defaults, which the SDK's proxy-wasm emulator
// loads with, or any host that does not seed WASI's random_get), and then only
// the number tells two replicas apart.
//
// So a VM draws no id before it has its number from the Redis the id goes
// to. An admission sent from a request's hook before then (any admission:
// each leads to a charge, if not to a lease or a marker) asks for the
// number and waits for the answer (phase numbering): one round trip more,
// for the first requests of the VM's life. Each such request asks for
// itself, rather than waiting on another's call, whose answer the gateway
// drops should that request's stream end first; the tick asks too. A
// request whose call fails is decided by failure_mode, as when its
// admission fails; from then until a number comes (the tick asks every
// tick), ids are drawn without one, from the host's randomness alone,
// which a gateway's is, rather than every admission waiting on a Redis
// that does not give it.

// vmIDs are the ids the VM sends one Redis endpoint.
type vmIDs struct {
	prefix   string
	next     uint64
	numbered bool // the prefix holds the VM's number from that Redis
	failed   bool // the last call for the number failed: ids are drawn without it until one succeeds
}

// idsByEndpoint are the VM's ids by Redis endpoint (redisEndpointOf): its
// number from one Redis tells nothing to another. They outlive the
// plugin's restarts, as the VM does.
var idsByEndpoint = map[string]*vmIDs{}

// idsOf returns the VM's ids for a Redis endpoint, made on first use.
func idsOf(endpoint string) *vmIDs {
	ids, ok := idsByEndpoint[endpoint]
	if !ok {
		ids = &vmIDs{}
		idsByEndpoint[endpoint] = ids
	}
	return ids
}

// waits says whether an admission waits for the VM's number before it
// draws ids: the VM has none, and Redis has not failed to give it one.
func (ids *vmIDs) waits() bool { return !ids.numbered && !ids.failed }

// newID returns an id no other request of any VM on the endpoint uses
// (with the host's randomness alone, before the VM's number: see waits).
func (ids *vmIDs) newID() string {
	if ids.prefix == "" {
		ids.prefix = idPrefix(0)
	}
	ids.next++
	var buf [48]byte // the prefix's 17 bytes and a uint64 in base 36: one allocation, the string's
	return string(strconv.AppendUint(append(buf[:0], ids.prefix...), ids.next, 36))
}

// take takes the answer to a call for the VM's number: the first number
// goes into the prefix of the ids drawn from then on.
func (ids *vmIDs) take(n int64, err error) {
	switch {
	case ids.numbered:
	case err != nil:
		ids.failed = true
	default:
		ids.prefix, ids.numbered, ids.failed = idPrefix(n), true, false
	}
}

// idPrefix is the prefix of a VM's ids: 12 bytes of a hash of the host's
// random bytes, of the time to the nanosecond, and of the VM's number from
// Redis (0 without one).
func idPrefix(number int64) string {
	var seed [28]byte
	hostSeed(seed[:20])
	binary.LittleEndian.PutUint64(seed[20:], uint64(number))
	sum := sha256.Sum256(seed[:])
	return base64.RawURLEncoding.EncodeToString(sum[:12]) + "."
}

// hostSeed fills seed with what the host gives an id prefix: 12 random
// bytes, then the time to the nanosecond. The tests make it the same in
// two replicas (export_test.go), as a host with weak randomness and clock
// does.
var hostSeed = func(seed []byte) {
	if _, err := rand.Read(seed[:12]); err != nil {
		log.Warnf("no random id prefix: %v", err)
	}
	binary.LittleEndian.PutUint64(seed[12:20], uint64(time.Now().UnixNano()))
}

// awaitNumber asks Redis for the VM's number for a request whose admission,
// from its own hook, would draw ids before the VM has one (see waits), and
// reports whether it waits for the answer (numberCame); false: the call
// could not be sent (the breaker is open, or the gateway does not know the
// Redis cluster yet), and the admission goes on, to fail the same way at
// once (the next request asks again: nothing was learnt of Redis).
func (r *request) awaitNumber() bool {
	if r.pc.redis.NumberVM(r.numberCame) != nil {
		return false
	}
	r.sentFromStream = true // the answer comes with its stream
	r.phase.enter(phaseNumbering)
	return true
}

// numberCame takes the answer to the request's call for the VM's number:
// sends its admission, or decides it by failure_mode when the call failed,
// as when an admission call fails.
func (r *request) numberCame(n int64, err error) {
	r.pc.ids.take(n, err)
	if r.phase != phaseNumbering {
		return // its stream ended first
	}
	if err != nil {
		r.failure = err
		r.decide()
		return
	}
	if r.admit(r.reserved) == types.ActionContinue {
		r.resume() // decided at once
	}
}

// numberVM asks each Redis endpoint whose breaker is closed, from the tick,
// for the VM's number while the VM has none from it: one call at a time.
func (s *startState) numberVM() {
	for _, eb := range s.breakers {
		if eb.ids.numbered || eb.numbering || eb.breaker.Open() {
			continue
		}
		err := eb.prober.NumberVM(func(n int64, err error) {
			eb.numbering = false
			eb.ids.take(n, err)
		})
		eb.numbering = err == nil
	}
}
