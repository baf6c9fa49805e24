package redistest

import (
	"slices"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
)

// Late is calls a gateway gave up on that Redis has not run yet, but will:
// a Redis that hangs (stopped by SIGSTOP, a long fork, a slow script) keeps
// what it was sent and runs it when it resumes, long after the gateway
// answered the plugin with a failure once redis.timeout passed. Nobody
// reads the replies.
type Late struct {
	tb      TB
	backend Backend
	queries [][]byte
}

// GiveUp answers every Redis call pending for the context (those that
// answering makes too) as a gateway does when redis.timeout passes before
// Redis answers: with a failed status. Redis has run none of them yet; Run
// runs them, late, when the test says.
func GiveUp(tb TB, host proxytest.HostEmulator, b Backend, contextID uint32) *Late {
	tb.Helper()
	l := &Late{tb: tb, backend: b}
	for range 100 {
		pending := host.GetRedisCalloutAttributesFromContext(contextID)
		if len(pending) == 0 {
			return l
		}
		l.queries = append(l.queries, slices.Clone(pending[0].Query)) // the plugin may reuse its buffer once answered
		host.CallOnRedisCallResponse(pending[0].CalloutID, 1, nil)
	}
	tb.Fatalf("more than 100 Redis calls pending for context %d: the plugin is looping", contextID)
	return l
}

// Len is how many calls are waiting to run.
func (l *Late) Len() int { return len(l.queries) }

// And adds the calls of other to the ones waiting, after them: Redis runs
// them in the order they were sent.
func (l *Late) And(other *Late) *Late {
	l.queries = append(l.queries, other.queries...)
	other.queries = nil
	return l
}

// Run has Redis run the calls, in the order they were sent, as a Redis
// that resumes does; their replies go nowhere. It returns how many ran.
func (l *Late) Run() int {
	l.tb.Helper()
	n := len(l.queries)
	for _, q := range l.queries {
		l.backend.Forward(q)
	}
	l.queries = nil
	return n
}
