package scripts

import (
	"errors"
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
