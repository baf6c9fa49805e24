package scripts

import (
	"errors"
	"fmt"
	"time"
)

// ErrBreakerOpen is a call not sent: its endpoint's breaker is open. It
// wraps ErrUnavailable, so callers apply failure_mode as for any outage.
var ErrBreakerOpen = fmt.Errorf("%w: the circuit breaker is open after consecutive failures", ErrUnavailable)

// MaxProbeInterval is the longest a breaker waits between two probes.
const MaxProbeInterval = 30 * time.Second

// Breaker is the circuit breaker of one Redis endpoint in one worker: after
// a number of consecutive failed calls (no connection, a reset, a timeout)
// it opens, and calls fail at once instead of waiting for Redis. While it
// is open, one probe at a time is due every probe interval, doubling after
// each failed probe up to MaxProbeInterval; the first call that succeeds
// closes it. Time is passed in: the breaker is plain state.
type Breaker struct {
	failuresToOpen int
	firstProbe     time.Duration

	failures  int       // consecutive failed calls
	open      bool      //
	openedAt  time.Time // when it opened
	interval  time.Duration
	nextProbe time.Time
	probing   bool // a probe is out

	// OnChange, when set, is told when the breaker opens (with the error of
	// the call that opened it) and when it closes (err nil), with how long
	// it was open.
	OnChange func(open bool, openFor time.Duration, err error)
}

// NewBreaker returns a closed breaker that opens after failures
// consecutive failures (0: never) and probes every probe at first.
func NewBreaker(failures int, probe time.Duration) *Breaker {
	return &Breaker{failuresToOpen: failures, firstProbe: probe}
}

// Open reports whether calls must fail at once.
func (b *Breaker) Open() bool { return b != nil && b.open }

// OpenSince is when the breaker opened (zero when closed).
func (b *Breaker) OpenSince() time.Time {
	if !b.Open() {
		return time.Time{}
	}
	return b.openedAt
}

// Quiet reports whether an outcome would change nothing: a success (or an
// answer, even an error one) while the breaker is closed and counts no
// failure, the common case; Record's callers skip reading the clock then
// (time.Now is two host calls in WASM).
func (b *Breaker) Quiet(err error) bool {
	return b == nil || (err == nil || !errors.Is(err, ErrUnavailable)) && !b.open && b.failures == 0
}

// Record notes the outcome of a call that went to Redis: err nil or not
// ErrUnavailable (Redis answered, even with an error) is a success.
func (b *Breaker) Record(err error, now time.Time) {
	if b == nil {
		return
	}
	if err == nil || !errors.Is(err, ErrUnavailable) {
		b.failures = 0
		if b.open {
			b.open, b.probing = false, false
			if b.OnChange != nil {
				b.OnChange(false, now.Sub(b.openedAt), nil)
			}
		}
		return
	}
	b.failures++
	if b.open || b.failuresToOpen == 0 || b.failures < b.failuresToOpen {
		return
	}
	b.open, b.openedAt = true, now
	b.interval, b.nextProbe = b.firstProbe, now.Add(b.firstProbe)
	if b.OnChange != nil {
		b.OnChange(true, 0, err)
	}
}

// ProbeDue reports whether a probe should go out now, and if so counts it
// as out until ProbeDone.
func (b *Breaker) ProbeDue(now time.Time) bool {
	if !b.Open() || b.probing || now.Before(b.nextProbe) {
		return false
	}
	b.probing = true
	return true
}

// ProbeDone notes a probe's outcome: a success closes the breaker, a
// failure doubles the wait before the next probe.
func (b *Breaker) ProbeDone(err error, now time.Time) {
	b.probing = false
	if err == nil || !errors.Is(err, ErrUnavailable) {
		b.Record(nil, now)
		return
	}
	b.interval = min(2*b.interval, MaxProbeInterval)
	b.nextProbe = now.Add(b.interval)
}
