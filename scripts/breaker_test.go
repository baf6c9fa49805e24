package scripts

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errDown = errors.New("down")

func TestBreakerOpensAfterConsecutiveFailuresAndProbesWithBackoff(t *testing.T) {
	var changes []string
	b := NewBreaker(3, time.Second)
	b.OnChange = func(open bool, openFor time.Duration, err error) {
		if open {
			changes = append(changes, "open: "+err.Error())
		} else {
			changes = append(changes, "closed after "+openFor.String())
		}
	}
	t0 := time.Unix(1000, 0)
	fail := ErrUnavailable

	b.Record(fail, t0)
	b.Record(fail, t0)
	b.Record(nil, t0) // a success in between: the count starts again
	b.Record(errDown, t0)
	b.Record(fail, t0)
	b.Record(fail, t0)
	assert.False(t, b.Open(), "a Redis error reply is an answer, not a failure")
	b.Record(fail, t0)
	require.True(t, b.Open())
	assert.Equal(t, t0, b.OpenSince())
	assert.Equal(t, []string{"open: " + fail.Error()}, changes)

	assert.False(t, b.ProbeDue(t0.Add(999*time.Millisecond)))
	require.True(t, b.ProbeDue(t0.Add(time.Second)))
	assert.False(t, b.ProbeDue(t0.Add(2*time.Second)), "one probe at a time")
	b.ProbeDone(fail, t0.Add(time.Second))
	assert.False(t, b.ProbeDue(t0.Add(2900*time.Millisecond)), "the wait doubles: 2 s")
	require.True(t, b.ProbeDue(t0.Add(3*time.Second)))
	b.ProbeDone(fail, t0.Add(3*time.Second))
	var waits []time.Duration
	for at := 3 * time.Second; len(waits) < 5; {
		next := at
		for !b.ProbeDue(t0.Add(next)) {
			next += 100 * time.Millisecond
		}
		waits = append(waits, next-at)
		b.ProbeDone(fail, t0.Add(next))
		at = next
	}
	assert.Equal(t, []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second, MaxProbeInterval, MaxProbeInterval}, waits)
	require.True(t, b.Open())

	require.True(t, b.ProbeDue(t0.Add(2*time.Hour)))
	b.ProbeDone(nil, t0.Add(2*time.Hour))
	assert.False(t, b.Open())
	assert.Equal(t, "closed after 2h0m0s", changes[1])
	assert.Len(t, changes, 2, "each change told once")

	// Closed again: it takes three more failures to open.
	b.Record(fail, t0)
	b.Record(fail, t0)
	assert.False(t, b.Open())
}

func TestBreakerOff(t *testing.T) {
	b := NewBreaker(0, time.Second)
	for range 100 {
		b.Record(ErrUnavailable, time.Now())
	}
	assert.False(t, b.Open())
	var none *Breaker
	assert.False(t, none.Open())
	none.Record(ErrUnavailable, time.Now()) // a client without a breaker
}

func TestBreakerOpenErrorIsAnOutage(t *testing.T) {
	assert.True(t, errors.Is(ErrBreakerOpen, ErrUnavailable))
}

// Quiet says when an outcome changes nothing, so that the client skips the
// clock: a call answered while the breaker is closed and counts no failure.
// Every other outcome is recorded, as the breaker needs it.
func TestBreakerQuietOnlyWhenNothingChanges(t *testing.T) {
	b := NewBreaker(2, time.Second)
	down := fmt.Errorf("%w: timeout", ErrUnavailable)
	refused := errors.New("ERR wrong number of arguments") // Redis answered
	assert.True(t, b.Quiet(nil))
	assert.True(t, b.Quiet(refused), "an error reply is an answer")
	assert.False(t, b.Quiet(down), "a failure counts")
	b.Record(down, time.Now())
	assert.False(t, b.Quiet(nil), "a success after a failure resets the count")
	b.Record(nil, time.Now())
	assert.True(t, b.Quiet(nil))
	b.Record(down, time.Now())
	b.Record(down, time.Now())
	require.True(t, b.Open())
	assert.False(t, b.Quiet(nil), "a success closes an open breaker, and says how long it was open")
	assert.True(t, (*Breaker)(nil).Quiet(down), "no breaker: nothing to record")
}
