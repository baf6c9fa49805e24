package locallimit

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

func subjectOf(key string, concurrent int64, windows ...config.Window) scripts.Subject {
	return scripts.Subject{Key: []byte(key), Windows: windows, Concurrent: concurrent}
}

var (
	minute1000 = config.Window{Field: "token_per_minute", Unit: config.UnitTokens, Seconds: 60, Limit: 1000}
	hour3      = config.Window{Field: "query_per_hour", Unit: config.UnitRequests, Seconds: 3600, Limit: 3}
)

const t0 = 60 * 1000 // a minute's start

// The local share of a limit holds: checked before (used < limit), charged
// after, as Redis's admission does without reservation.
func TestLocalWindowsHoldTheShareOfALimit(t *testing.T) {
	l := New(2, 10) // two workers share: 500 tokens a minute here
	s := []scripts.Subject{subjectOf("a", 0, minute1000)}
	used := int64(0)
	for i := 0; ; i++ {
		v := l.Admit(s, 0, t0+int64(i%50))
		if !v.Allowed {
			assert.Equal(t, scripts.KindTokens, v.Kind)
			assert.Equal(t, int64(500), v.Limit)
			assert.Equal(t, int64(60-i%50), v.Reset)
			break
		}
		l.Charge(s, 120, 0, t0+int64(i%50), false)
		used += 120
		require.Less(t, i, 100)
	}
	assert.Equal(t, int64(600), used, "the last request admitted under the limit uses more: ± one request's usage")
	assert.True(t, l.Admit(s, 0, t0+60).Allowed, "the next minute is a new window")
	assert.Equal(t, int64(600), l.LostTokens, "the first minute's usage was never told to Redis")
}

func TestReservationRequestsAndConcurrencyAllOrNothing(t *testing.T) {
	l := New(1, 10)
	s := []scripts.Subject{subjectOf("a", 2, minute1000, hour3), subjectOf("b", 0, minute1000)}
	require.True(t, l.Admit(s, 600, t0).Allowed)
	v := l.Admit(s, 600, t0)
	require.False(t, v.Allowed, "1,200 reserved would pass 1,000")
	assert.Equal(t, 0, v.Subject)
	require.True(t, l.Admit(s, 400, t0).Allowed)
	v = l.Admit(s, 0, t0)
	assert.False(t, v.Allowed)
	assert.Equal(t, scripts.KindTokens, v.Kind, "the token window, full, decides first")

	l = New(1, 10)
	for range 2 {
		require.True(t, l.Admit(s, 0, t0).Allowed)
	}
	v = l.Admit(s, 0, t0)
	assert.Equal(t, scripts.KindConcurrent, v.Kind)
	assert.Equal(t, int64(2), v.Limit)
	l.Charge(s, 10, 0, t0, true)
	require.True(t, l.Admit(s, 0, t0).Allowed, "one ended: room for one")
	l.Charge(s, 0, 0, t0, true)
	l.Charge(s, 0, 0, t0, true)
	v = l.Admit(s, 0, t0)
	assert.Equal(t, scripts.KindRequests, v.Kind, "three requests this hour")
	assert.False(t, v.Allowed)
	assert.Equal(t, int64(3), v.Limit)
}

// What was counted locally is handed over once, for windows still current;
// the rest is counted as lost.
func TestDebtsAreTakenOnceAndOnlyForCurrentWindows(t *testing.T) {
	l := New(1, 10)
	a := []scripts.Subject{subjectOf("a", 0, minute1000, hour3)}
	b := []scripts.Subject{subjectOf("b", 0, minute1000)}
	assert.False(t, l.Owes())
	l.Admit(a, 0, t0)
	l.Charge(a, 70, 0, t0, false)
	l.Admit(b, 0, t0)
	l.Charge(b, 30, 0, t0, false)
	require.True(t, l.Owes())
	debts := l.TakeDebts(2, t0+61) // a's minute ended
	assert.Equal(t, []Debt{{Key: "a", Window: hour3, Amount: 1}}, debts[:1])
	assert.Len(t, debts, 1, "b's minute ended too")
	assert.Equal(t, int64(100), l.LostTokens)
	assert.Empty(t, l.TakeDebts(10, t0+61))
	assert.False(t, l.Owes())

	l.Admit(b, 0, t0+62)
	l.Charge(b, 30, 0, t0+62, false)
	l.Admit(a, 0, t0+62)
	assert.Equal(t, []Debt{{Key: "b", Window: minute1000, Amount: 30}}, l.TakeDebts(1, t0+62), "at most n")
	assert.True(t, l.Owes())
	assert.Equal(t, []Debt{{Key: "a", Window: hour3, Amount: 1}}, l.TakeDebts(10, t0+62))
	// Taken, but still counted for the local limit should Redis fail again.
	l.Charge(b, 460, 0, t0+62, false)
	assert.True(t, l.Admit(b, 0, t0+63).Allowed)
	l.Charge(b, 600, 0, t0+63, false)
	assert.False(t, l.Admit(b, 0, t0+63).Allowed)
}

// At most maxSubjects are held: the least recently used goes, its unsent
// usage counted as lost.
func TestSubjectsAreBounded(t *testing.T) {
	l := New(1, 100)
	for i := range 100_000 {
		s := []scripts.Subject{subjectOf("subject-"+strconv.Itoa(i), 0, minute1000)}
		l.Admit(s, 0, t0)
		l.Charge(s, 1, 0, t0, false)
		require.LessOrEqual(t, l.Len(), 100)
	}
	assert.Equal(t, 100, l.Len())
	assert.Equal(t, int64(100_000-100), l.LostTokens)
	assert.Len(t, l.TakeDebts(1000, t0), 100)
}

// heapHeld is the heap a limiter holds after subjects distinct subjects
// (per-IP keys, two token windows each) were each admitted and charged.
func heapHeld(maxSubjects, subjects int) (held uint64, l *Limiter) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapAlloc
	l = New(1, maxSubjects)
	day := config.Window{Field: "token_per_day", Unit: config.UnitTokens, Seconds: 86400, Limit: 100000}
	for i := range subjects {
		key := "atrl:{chat|limit_by_per_ip|from-remote-addr|10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + "}"
		s := []scripts.Subject{subjectOf(key, 0, minute1000, day)}
		l.Admit(s, 0, t0)
		l.Charge(s, 10, 0, t0, false)
	}
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc - min(before, m.HeapAlloc), l
}

// 100,000 distinct subjects during an outage (a scan of client IPs) keep
// the memory of local_max_subjects subjects, not of 100,000: the Go heap
// the limiter holds, natively (the plugin's module holds the same
// structures with 4-byte pointers).
func TestMemoryStaysWithinTheSubjectBound(t *testing.T) {
	const bound = 10_000
	full, l1 := heapHeld(bound, bound)
	flooded, l2 := heapHeld(bound, 100_000)
	require.Equal(t, bound, l2.Len())
	t.Logf("%s/%s: %d subjects held: %d KiB (%d bytes each); after 100,000 offered: %d KiB",
		runtime.GOOS, runtime.GOARCH, l1.Len(), full>>10, full/bound, flooded>>10)
	assert.Less(t, flooded, 2*full+64<<10, "the memory of the bound, not of the subjects offered")
	assert.Less(t, full/bound, uint64(1024), "a subject with two windows costs well under 1 KiB")
	runtime.KeepAlive(l1)
	runtime.KeepAlive(l2)
}
