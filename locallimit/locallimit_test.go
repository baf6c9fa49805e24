package locallimit

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

func subjectOf(key string, concurrent int64, windows ...config.Window) budget.Subject {
	return budget.Subject{Key: []byte(key), Windows: windows, Concurrent: concurrent}
}

var (
	minute1000 = config.Window{Field: "token_per_minute", Unit: config.UnitTokens, Seconds: 60, Limit: 1000}
	hour3      = config.Window{Field: "query_per_hour", Unit: config.UnitRequests, Seconds: 3600, Limit: 3}
)

const t0 = 60 * 1000 // a minute's start

// newLimiter is New with charge ids 1, 2, 3…
func newLimiter(share int64, maxSubjects int) *Limiter {
	next := 0
	return New(share, maxSubjects, func() string {
		next++
		return strconv.Itoa(next)
	}, nil)
}

// The local share of a limit holds: checked before (used < limit), charged
// after, as Redis's admission does without reservation.
func TestLocalWindowsHoldTheShareOfALimit(t *testing.T) {
	l := newLimiter(2, 10) // two workers share: 500 tokens a minute here
	s := []budget.Subject{subjectOf("a", 0, minute1000)}
	used := int64(0)
	for i := 0; ; i++ {
		v := l.Admit(s, budget.Amounts{Tokens: 0}, t0+int64(i%50))
		if !v.Allowed {
			assert.Equal(t, budget.KindTokens, v.Kind)
			assert.Equal(t, int64(500), v.Limit)
			assert.Equal(t, int64(60-i%50), v.Reset)
			break
		}
		l.Charge(s, budget.Amounts{Tokens: 120, Requests: 0}, 0, t0+int64(i%50), false)
		used += 120
		require.Less(t, i, 100)
	}
	assert.Equal(t, int64(600), used, "the last request admitted under the limit uses more: ± one request's usage")
	assert.True(t, l.Admit(s, budget.Amounts{Tokens: 0}, t0+60).Allowed, "the next minute is a new window")
	assert.Equal(t, int64(600), l.LostTokens, "the first minute's usage was never told to Redis")
}

func TestReservationRequestsAndConcurrencyAllOrNothing(t *testing.T) {
	l := newLimiter(1, 10)
	s := []budget.Subject{subjectOf("a", 2, minute1000, hour3), subjectOf("b", 0, minute1000)}
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 600}, t0).Allowed)
	v := l.Admit(s, budget.Amounts{Tokens: 600}, t0)
	require.False(t, v.Allowed, "1,200 reserved would pass 1,000")
	assert.Equal(t, 0, v.Subject)
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 400}, t0).Allowed)
	v = l.Admit(s, budget.Amounts{Tokens: 0}, t0)
	assert.False(t, v.Allowed)
	assert.Equal(t, budget.KindTokens, v.Kind, "the token window, full, decides first")

	l = newLimiter(1, 10)
	for range 2 {
		require.True(t, l.Admit(s, budget.Amounts{Tokens: 0}, t0).Allowed)
	}
	v = l.Admit(s, budget.Amounts{Tokens: 0}, t0)
	assert.Equal(t, budget.KindConcurrent, v.Kind)
	assert.Equal(t, int64(2), v.Limit)
	l.Charge(s, budget.Amounts{Tokens: 10, Requests: 0}, 0, t0, true)
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 0}, t0).Allowed, "one ended: room for one")
	l.Charge(s, budget.Amounts{Tokens: 0, Requests: 0}, 0, t0, true)
	l.Charge(s, budget.Amounts{Tokens: 0, Requests: 0}, 0, t0, true)
	v = l.Admit(s, budget.Amounts{Tokens: 0}, t0)
	assert.Equal(t, budget.KindRequests, v.Kind, "three requests this hour")
	assert.False(t, v.Allowed)
	assert.Equal(t, int64(3), v.Limit)
}

// What was counted locally is handed over once, for windows still current;
// the rest is counted as lost.
func TestDebtsAreTakenOnceAndOnlyForCurrentWindows(t *testing.T) {
	l := newLimiter(1, 10)
	a := []budget.Subject{subjectOf("a", 0, minute1000, hour3)}
	b := []budget.Subject{subjectOf("b", 0, minute1000)}
	assert.False(t, l.Owes())
	l.Admit(a, budget.Amounts{Tokens: 0}, t0)
	l.Charge(a, budget.Amounts{Tokens: 70, Requests: 0}, 0, t0, false)
	l.Admit(b, budget.Amounts{Tokens: 0}, t0)
	l.Charge(b, budget.Amounts{Tokens: 30, Requests: 0}, 0, t0, false)
	require.True(t, l.Owes())
	debts := l.TakeDebts(2, t0+61) // a's minute ended; two windows visited
	assert.Equal(t, []Debt{{ID: "1", Key: "a", Window: hour3, Amount: 1}}, debts)
	assert.Equal(t, int64(70), l.LostTokens)
	assert.True(t, l.Owes(), "b's minute was not visited yet")
	assert.Empty(t, l.TakeDebts(10, t0+61), "b's minute ended too")
	assert.Equal(t, int64(100), l.LostTokens)
	assert.False(t, l.Owes())
	l.Paid(debts[0])

	l.Admit(b, budget.Amounts{Tokens: 0}, t0+62)
	l.Charge(b, budget.Amounts{Tokens: 30, Requests: 0}, 0, t0+62, false)
	l.Admit(a, budget.Amounts{Tokens: 0}, t0+62)
	debts = l.TakeDebts(1, t0+62)
	assert.Equal(t, []Debt{{ID: "2", Key: "b", Window: minute1000, Amount: 30}}, debts, "at most n")
	assert.True(t, l.Owes())
	assert.Equal(t, []Debt{{ID: "3", Key: "a", Window: hour3, Amount: 1}}, l.TakeDebts(10, t0+62))
	// Taken, but still counted for the local limit should Redis fail again.
	l.Charge(b, budget.Amounts{Tokens: 460, Requests: 0}, 0, t0+62, false)
	assert.True(t, l.Admit(b, budget.Amounts{Tokens: 0}, t0+63).Allowed)
	l.Charge(b, budget.Amounts{Tokens: 600, Requests: 0}, 0, t0+63, false)
	assert.False(t, l.Admit(b, budget.Amounts{Tokens: 0}, t0+63).Allowed)
	assert.Empty(t, l.TakeDebts(10, t0+63), "b's debt of 30 is out: what came since waits for its answer")
	l.Paid(debts[0])
	assert.Equal(t, []Debt{{ID: "4", Key: "b", Window: minute1000, Amount: 1060}}, l.TakeDebts(10, t0+63),
		"then goes, as a debt of its own")
}

// A stream admitted locally reserves its estimate; the catch-up tells
// Redis of the reservation; the stream then uses less: what it gives back
// becomes a refund owed to Redis (a negative debt), in the bucket the
// reservation went into, never more than the bucket holds locally.
func TestARefundAfterTheDebtWasTakenIsOwedToRedis(t *testing.T) {
	l := newLimiter(1, 10)
	s := []budget.Subject{subjectOf("a", 1, minute1000, hour3)}
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 1000}, t0+5).Allowed)
	debts := l.TakeDebts(10, t0+6)
	require.Equal(t, []Debt{
		{ID: "1", Key: "a", Window: minute1000, Amount: 1000},
		{ID: "2", Key: "a", Window: hour3, Amount: 1},
	}, debts)
	for _, d := range debts {
		l.Paid(d)
	}
	assert.False(t, l.Owes())

	l.Charge(s, budget.Amounts{Tokens: 30 - 1000, Requests: 0}, t0+5, t0+20, true) // used 30 of the 1,000 reserved at t0+5
	assert.Equal(t, []Debt{{ID: "3", Key: "a", Window: minute1000, Amount: -970}}, l.TakeDebts(10, t0+21))
	assert.True(t, l.Admit(s, budget.Amounts{Tokens: 970}, t0+22).Allowed, "the local window holds 30: room for 970")
	assert.False(t, l.Admit(s, budget.Amounts{Tokens: 1}, t0+22).Allowed)

	// A give-back takes no more than the bucket holds: Redis is never owed
	// back more than it was told.
	l = newLimiter(1, 10)
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 600}, t0).Allowed)
	for _, d := range l.TakeDebts(10, t0) {
		l.Paid(d)
	}
	l.Charge(s, budget.Amounts{Tokens: 100, Requests: 0}, 0, t0, false)
	l.Charge(s, budget.Amounts{Tokens: -5000, Requests: -1}, t0, t0, true)
	debts = l.TakeDebts(10, t0)
	assert.ElementsMatch(t, []Debt{
		{ID: "3", Key: "a", Window: minute1000, Amount: -600},
		{ID: "4", Key: "a", Window: hour3, Amount: -1},
	}, debts, "the 100 owed and the 600 told, given back: 600 owed back")
	assert.True(t, l.Admit(s, budget.Amounts{Tokens: 1000}, t0).Allowed, "the local window is empty, not below")

	// A give-back to a bucket that ended has nothing to give back to, in
	// the new bucket nor in Redis.
	l = newLimiter(1, 10)
	s = []budget.Subject{subjectOf("a", 0, minute1000, hour3)}
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 600}, t0+50).Allowed)
	for _, d := range l.TakeDebts(10, t0+50) {
		l.Paid(d)
	}
	require.True(t, l.Admit(s, budget.Amounts{Tokens: 100}, t0+61).Allowed)
	l.Charge(s, budget.Amounts{Tokens: -580, Requests: 0}, t0+50, t0+62, true)
	debts = l.TakeDebts(10, t0+62)
	assert.Equal(t, []Debt{{ID: "3", Key: "a", Window: minute1000, Amount: 100}, {ID: "4", Key: "a", Window: hour3, Amount: 1}}, debts)
}

// A debt the catch-up could not deliver is given back and sent again as
// it was: its charge id and its amount, so that Redis, which may have
// applied it (its answer was lost), applies it once. What was counted in
// the meantime goes after it, as a new debt with an id of its own.
func TestAFailedDebtIsSentAgainAsItWas(t *testing.T) {
	l := newLimiter(1, 10)
	s := []budget.Subject{subjectOf("a", 0, minute1000)}
	l.Charge(s, budget.Amounts{Tokens: 100, Requests: 0}, 0, t0, false)
	debts := l.TakeDebts(10, t0)
	require.Equal(t, []Debt{{ID: "1", Key: "a", Window: minute1000, Amount: 100}}, debts)
	l.Charge(s, budget.Amounts{Tokens: 50, Requests: 0}, 0, t0+1, false)
	l.Charge(s, budget.Amounts{Tokens: -20, Requests: 0}, t0, t0+1, false)
	assert.False(t, l.Owes(), "its debt is out: the window waits for the answer")
	l.Owe(debts[0], t0+2)
	require.True(t, l.Owes())
	assert.Equal(t, debts, l.TakeDebts(10, t0+3), "again, as it was")
	l.Owe(debts[0], t0+3)
	assert.Equal(t, debts, l.TakeDebts(10, t0+4), "and again")
	assert.Empty(t, l.TakeDebts(10, t0+4))
	l.Paid(debts[0])
	l.Paid(debts[0]) // an answer twice changes nothing
	assert.Equal(t, []Debt{{ID: "2", Key: "a", Window: minute1000, Amount: 30}}, l.TakeDebts(10, t0+5))
	assert.Zero(t, l.LostTokens)

	// Given back after its bucket ended: lost, with what waited behind it.
	l = newLimiter(1, 10)
	l.Charge(s, budget.Amounts{Tokens: 100, Requests: 0}, 0, t0, false)
	debts = l.TakeDebts(10, t0)
	l.Charge(s, budget.Amounts{Tokens: 50, Requests: 0}, 0, t0, false)
	l.Owe(debts[0], t0+60)
	assert.Equal(t, int64(150), l.LostTokens)
	assert.False(t, l.Owes())

	// Given back, then its bucket ended before it went again: lost too.
	l = newLimiter(1, 10)
	l.Charge(s, budget.Amounts{Tokens: 100, Requests: 0}, 0, t0, false)
	l.Owe(l.TakeDebts(10, t0)[0], t0+1)
	l.Charge(s, budget.Amounts{Tokens: 50, Requests: 0}, 0, t0+2, false)
	assert.Empty(t, l.TakeDebts(10, t0+60))
	assert.Equal(t, int64(150), l.LostTokens)

	// Paid after its bucket ended: nothing more of it to send, nothing lost
	// but what waited behind it.
	l = newLimiter(1, 10)
	l.Charge(s, budget.Amounts{Tokens: 100, Requests: 0}, 0, t0, false)
	debts = l.TakeDebts(10, t0)
	l.Charge(s, budget.Amounts{Tokens: 50, Requests: 0}, 0, t0, false)
	l.Charge(s, budget.Amounts{Tokens: 7, Requests: 0}, 0, t0+60, false)
	l.Paid(debts[0])
	assert.Equal(t, []Debt{{ID: "2", Key: "a", Window: minute1000, Amount: 7}}, l.TakeDebts(10, t0+60))
	assert.Equal(t, int64(50), l.LostTokens)

	// A refund given back and never delivered loses nothing; what it
	// would have given back of a lost debt is taken from the loss.
	l = newLimiter(1, 10)
	l.Charge(s, budget.Amounts{Tokens: 100, Requests: 0}, 0, t0, false)
	debts = l.TakeDebts(10, t0)
	l.Owe(debts[0], t0)
	l.Charge(s, budget.Amounts{Tokens: -70, Requests: 0}, t0, t0, false)
	assert.Empty(t, l.TakeDebts(10, t0+60))
	assert.Equal(t, int64(30), l.LostTokens, "the 100 never delivered, less the 70 given back")
}

// Taking debts visits the windows that owe and no other, however many
// subjects are held: 100,000 subjects, 3 of which owe.
func TestTakingDebtsVisitsOnlyTheWindowsThatOwe(t *testing.T) {
	l := newLimiter(1, 200_000)
	for i := range 100_000 {
		require.True(t, l.Admit([]budget.Subject{subjectOf("subject-"+strconv.Itoa(i), 0, minute1000)}, budget.Amounts{}, t0).Allowed)
	}
	assert.False(t, l.Owes(), "admitted without a reservation: nothing counted yet")
	for _, i := range []int{5, 50_000, 99_999} {
		l.Charge([]budget.Subject{subjectOf("subject-"+strconv.Itoa(i), 0, minute1000)}, budget.Amounts{Tokens: 10}, 0, t0+1, false)
	}
	assert.Equal(t, 3, l.owing.Len(), "what TakeDebts walks: the 3 windows that owe")
	debts := l.TakeDebts(100, t0+2)
	assert.Equal(t, []string{"subject-5", "subject-50000", "subject-99999"}, []string{debts[0].Key, debts[1].Key, debts[2].Key})
	assert.Len(t, debts, 3)
	assert.Zero(t, l.owing.Len())
	assert.Empty(t, l.TakeDebts(100, t0+2))
}

// BenchmarkTakeDebts takes the debts of 3 subjects among many: the time
// of a call does not grow with the subjects held.
func BenchmarkTakeDebts(b *testing.B) {
	for _, held := range []int{100, 100_000} {
		b.Run(strconv.Itoa(held)+" subjects", func(b *testing.B) {
			l := newLimiter(1, held)
			subjects := make([][]budget.Subject, held)
			for i := range subjects {
				subjects[i] = []budget.Subject{subjectOf("subject-"+strconv.Itoa(i), 0, minute1000)}
				l.Admit(subjects[i], budget.Amounts{}, t0)
			}
			b.ResetTimer()
			for i := range b.N {
				for k := range 3 {
					l.Charge(subjects[(i+k*held/3)%held], budget.Amounts{Tokens: 1}, 0, t0, false)
				}
				debts := l.TakeDebts(100, t0)
				if len(debts) != 3 {
					b.Fatalf("%d debts", len(debts))
				}
				for _, d := range debts {
					l.Paid(d)
				}
			}
		})
	}
}

// At most maxSubjects are held: the least recently used goes, its unsent
// usage counted as lost.
func TestSubjectsAreBounded(t *testing.T) {
	l := newLimiter(1, 100)
	for i := range 100_000 {
		s := []budget.Subject{subjectOf("subject-"+strconv.Itoa(i), 0, minute1000)}
		l.Admit(s, budget.Amounts{Tokens: 0}, t0)
		l.Charge(s, budget.Amounts{Tokens: 1, Requests: 0}, 0, t0, false)
		require.LessOrEqual(t, l.Len(), 100)
	}
	assert.Equal(t, 100, l.Len())
	assert.Equal(t, int64(100_000-100), l.LostTokens)
	assert.Equal(t, 100, l.owing.Len(), "the evicted left the owing queue")
	assert.Len(t, l.TakeDebts(1000, t0), 100)
}

// heapHeld is the heap a limiter holds after subjects distinct subjects
// (per-IP keys, two token windows each) were each admitted and charged.
func heapHeld(maxSubjects, subjects int) (held uint64, l *Limiter) {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapAlloc
	l = newLimiter(1, maxSubjects)
	day := config.Window{Field: "token_per_day", Unit: config.UnitTokens, Seconds: 86400, Limit: 100000}
	for i := range subjects {
		key := "atrl:{chat|limit_by_per_ip|from-remote-addr|10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + "}"
		s := []budget.Subject{subjectOf(key, 0, minute1000, day)}
		l.Admit(s, budget.Amounts{Tokens: 0}, t0)
		l.Charge(s, budget.Amounts{Tokens: 10, Requests: 0}, 0, t0, false)
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

// A request decided locally sees the share of each limit open to its
// priority level, as Redis's admission does.
func TestLocalWindowsKeepTheReserveOfHigherLevels(t *testing.T) {
	c, err := config.ParseString(`{"rule_name": "r", "priority": {"levels": ["high", "low"]},
		"global_threshold": {"token_per_minute": 1000, "max_concurrent_requests": 2, "reserve": {"high": 30}},
		"redis": {"service_name": "redis.static"}}`)
	require.NoError(t, err)
	l := newLimiter(1, 10)
	low := []budget.Subject{{Key: []byte("g"), Windows: c.Global.Windows, Level: 1}}
	high := []budget.Subject{{Key: []byte("g"), Windows: c.Global.Windows, Level: 0}}
	for i := 0; i < 7; i++ {
		require.True(t, l.Admit(low, budget.Amounts{}, t0).Allowed, "low request %d", i+1)
		l.Charge(low, budget.Amounts{Tokens: 100}, 0, t0, false)
	}
	v := l.Admit(low, budget.Amounts{}, t0)
	assert.False(t, v.Allowed)
	assert.Equal(t, int64(700), v.Limit, "70 % open to low")
	for i := 0; i < 3; i++ {
		require.True(t, l.Admit(high, budget.Amounts{}, t0).Allowed, "high request %d", i+1)
		l.Charge(high, budget.Amounts{Tokens: 100}, 0, t0, false)
	}
	assert.False(t, l.Admit(high, budget.Amounts{}, t0).Allowed)

	// Concurrency: 1 of 2 slots (70 % of 2, rounded down) for low.
	lowC := []budget.Subject{{Key: []byte("c"), Concurrent: 2, ConcurrentOpen: c.Global.ConcurrentOpen(1), Level: 1}}
	highC := []budget.Subject{{Key: []byte("c"), Concurrent: 2, ConcurrentOpen: c.Global.ConcurrentOpen(0)}}
	require.True(t, l.Admit(lowC, budget.Amounts{}, t0).Allowed)
	v = l.Admit(lowC, budget.Amounts{}, t0)
	assert.False(t, v.Allowed)
	assert.Equal(t, int64(1), v.Limit)
	assert.True(t, l.Admit(highC, budget.Amounts{}, t0).Allowed)
	assert.False(t, l.Admit(highC, budget.Amounts{}, t0).Allowed)
}
