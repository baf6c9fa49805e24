package scripts

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// call runs the limiter script by source for the one test subject.
func call(r *redistest.Server, op string, args ...string) []int64 {
	return ints(r.Do(append([]string{"EVAL", Limiter.Source, "1", subject, op}, args...)...))
}

func secs(t float64) string { return strconv.FormatFloat(t, 'f', -1, 64) }

func TestRequestWindowsCountEachAdmission(t *testing.T) {
	r := redistest.Start(t)
	now := float64((r.Now()/86400 + 1) * 86400) // tomorrow
	admit := func(at float64) []int64 {
		return call(r, opAdmit, secs(at), "0", "f", "1", "q86400", "5")
	}
	for i := 0; i < 5; i++ {
		v := admit(now + float64(i))
		require.Equal(t, []int64{1, 5, int64(4 - i)}, v[:3], "request %d", i+1)
		assert.Equal(t, int64(budget.KindRequests), v[5])
	}
	v := admit(now + 10)
	assert.Equal(t, []int64{0, 5, 0, 86390}, v[:4], "the sixth: rejected until the day resets")
	assert.Equal(t, int64(5), r.Int("GET", subject+":q86400:"+strconv.FormatInt(int64(now)/86400, 10)), "a rejection is not counted")

	// Rolling an admission back uncounts it; tokens windows are left alone.
	at := secs(now)
	assert.Equal(t, []int64{4}, call(r, opCharge, at, at, "f", "0", "-1", "1", "q86400"))
	assert.Equal(t, int64(1), admit(now + 20)[0])
}

func TestTokenAndRequestWindowsTogether(t *testing.T) {
	r := redistest.Start(t)
	now := secs(float64((r.Now()/60 + 60) * 60))
	// 100 tokens and 3 requests a minute: check-only for tokens.
	admit := func() []int64 { return call(r, opAdmit, now, "0", "f", "2", "t60", "100", "q60", "3") }
	v := admit()
	assert.Equal(t, []int64{1, 100, 100, 60, 0}, append(v[:4:4], v[5]), "allowed: the headers describe the token window")
	call(r, opCharge, now, now, "f", "99", "0", "2", "t60", "q60")
	v = admit()
	assert.Equal(t, []int64{1, 100, 1}, v[:3])
	assert.Equal(t, int64(1), admit()[0])
	v = admit()
	assert.Equal(t, []int64{0, 3, 0}, v[:3], "fourth request: tokens left, but the request window is full")
	assert.Equal(t, int64(budget.KindRequests), v[5])
}

// The boundary burst: a fixed window lets 10 through at 0:59 and 10 more at
// 1:01; a sliding window does not.
func TestSlidingWindowStopsTheBoundaryBurst(t *testing.T) {
	for _, c := range []struct {
		windowType  string
		secondBurst int
	}{{"f", 10}, {"s", 0}} {
		t.Run(c.windowType, func(t *testing.T) {
			r := redistest.Start(t)
			minute := float64((r.Now()/60 + 60) * 60)
			burst := func(at float64) int {
				admitted := 0
				for i := 0; i < 10; i++ {
					admitted += int(call(r, opAdmit, secs(at+float64(i)/100), "0", c.windowType, "1", "q60", "10")[0])
				}
				return admitted
			}
			assert.Equal(t, 10, burst(minute+59))
			assert.Equal(t, c.secondBurst, burst(minute+61))
		})
	}
}

func TestSlidingWindowWeighsThePreviousBucket(t *testing.T) {
	r := redistest.Start(t)
	minute := float64((r.Now()/60 + 60) * 60)
	// 60 requests a minute, 60 used last minute; 15 s into this one, 3/4 of
	// them still count: 45 used, 15 left.
	r.Do("SET", subject+":q60:"+strconv.FormatInt(int64(minute)/60-1, 10), "60")
	v := call(r, opAdmit, secs(minute+15), "0", "s", "1", "q60", "60")
	assert.Equal(t, []int64{1, 60, 14}, v[:3], "45 + this one: 14 left")
	// Fill it: 14 more go, the next waits until enough of the last minute
	// has slid out: used = 15 + 60·(1 − t/60) ≤ 59 at t = 16 s, 1 s from now.
	for i := 0; i < 14; i++ {
		call(r, opAdmit, secs(minute+15), "0", "s", "1", "q60", "60")
	}
	v = call(r, opAdmit, secs(minute+15), "0", "s", "1", "q60", "60")
	assert.Equal(t, []int64{0, 60, 0, 1}, v[:4])
	assert.Equal(t, int64(1), call(r, opAdmit, secs(minute+16), "0", "s", "1", "q60", "60")[0])
	// Buckets of a sliding window outlive their window by one: the next one
	// reads them.
	assert.InDelta(t, 60-15+60+1, r.Int("TTL", subject+":q60:"+strconv.FormatInt(int64(minute)/60, 10)), 2)
}

func TestSlidingTokenWindowReservesAndReconciles(t *testing.T) {
	r := redistest.Start(t)
	minute := float64((r.Now()/60 + 60) * 60)
	now := secs(minute + 30)
	r.Do("SET", subject+":t60:"+strconv.FormatInt(int64(minute)/60-1, 10), "1000")
	// 1,000 a minute, 500 of last minute's 1,000 still count: 400 fit, 600 do not.
	assert.Equal(t, int64(0), call(r, opAdmit, now, "600", "s", "1", "t60", "1000")[0])
	assert.Equal(t, []int64{1, 1000, 100}, call(r, opAdmit, now, "400", "s", "1", "t60", "1000")[:3])
	assert.Equal(t, []int64{300}, call(r, opCharge, now, now, "s", "-100", "0", "1", "t60"), "reconciled: used 300 of the 400")
}

func TestConcurrencyLeases(t *testing.T) {
	r := redistest.Start(t)
	now := float64(r.Now() + 3600)
	set := subject + ":c"
	admit := func(at float64, id string) []int64 {
		return call(r, opAdmit, secs(at), "0", "f600:"+id, "0c2")
	}
	v := admit(now, "a")
	assert.Equal(t, []int64{1, 2, 1}, v[:3])
	assert.Equal(t, int64(budget.KindConcurrent), v[5])
	assert.Equal(t, int64(1), admit(now, "b")[0])
	v = admit(now, "c")
	assert.Equal(t, []int64{0, 2, 0, 1}, v[:4], "two in progress: the third waits, told to retry in a second")
	assert.Equal(t, int64(budget.KindConcurrent), v[5])
	assert.Equal(t, []string{"a", "b"}, members(r, set))
	assert.InDelta(t, 601, r.Int("TTL", set), 1, "the set goes when its last lease would")

	// Releasing a lease frees its slot at once.
	assert.Empty(t, call(r, opCharge, secs(now), "", "f:a", "0", "0", "0c"))
	assert.Equal(t, []string{"b"}, members(r, set))
	assert.Equal(t, int64(1), admit(now, "c")[0])

	// A lease its gateway never released expires after the lease time; the
	// next admission sweeps it. Renewing keeps a lease alive.
	renew := func(id string) int {
		return r.Do("EVAL", Limiter.Source, "1", subject, opRenew, secs(now+300), "600:"+id).Integer()
	}
	assert.Equal(t, 1, renew("c"), "c renewed until now+900")
	assert.Equal(t, 0, renew("gone"), "an unknown lease is not created")
	assert.Equal(t, int64(0), admit(now+599, "d")[0], "b and c still held")
	assert.Equal(t, int64(1), admit(now+601, "d")[0], "b expired and was swept")
	assert.Equal(t, []string{"c", "d"}, members(r, set))
}

func TestLeasesTakeAllOrNothing(t *testing.T) {
	r := redistest.Start(t)
	now := secs(float64(r.Now() + 3600))
	// One request allowed a minute and two in progress: the second request
	// is rejected by the window and takes no lease.
	admit := func(id string) int64 { return call(r, opAdmit, now, "0", "f600:"+id, "1c2", "q60", "1")[0] }
	assert.Equal(t, int64(1), admit("a"))
	assert.Equal(t, int64(0), admit("b"))
	assert.Equal(t, []string{"a"}, members(r, subject+":c"))
}

func members(r *redistest.Server, set string) []string {
	var out []string
	for _, v := range r.Do("ZRANGE", set, "0", "-1").Array() {
		out = append(out, v.String())
	}
	return out
}

// A rejection says how long until there is room, to the millisecond, so a
// queue can retry when it comes rather than at the next whole second.
func TestRejectionSaysHowLongToWait(t *testing.T) {
	r := redistest.Start(t)
	second := float64(r.Now() + 3600)
	admit := func(windowType string, at float64) []int64 {
		return call(r, opAdmit, secs(at), "0", windowType, "1", "q1", "10")
	}
	for i := 0; i < 10; i++ {
		require.Equal(t, int64(0), admit("f", second+0.3)[6], "allowed: no wait")
	}
	v := admit("f", second+0.3)
	assert.Equal(t, []int64{0, 10, 0, 1}, v[:4], "the eleventh in the second: rejected, Retry-After 1")
	assert.Equal(t, int64(700), v[6], "room when the window turns, 700 ms on")

	// Sliding, 10 a second, the last second full: at 0.3 s in, 7 of its 10
	// still count; room for one more once 0.2 s more has slid out.
	v = admit("s", second+1.3)
	assert.Equal(t, int64(1), v[0], "7 of the last second's 10 count: room for 3")
	admit("s", second+1.3)
	admit("s", second+1.3)
	v = admit("s", second+1.3)
	assert.Equal(t, []int64{0, 10, 0, 1}, v[:4])
	assert.Equal(t, int64(100), v[6], "3 + 10·(1 − t) ≤ 9 at t = 0.4 s")

	// A full concurrency limit has no known wait: a request may end any time.
	lease := func(id string) []int64 { return call(r, opAdmit, secs(second), "0", "f60:"+id, "0c1") }
	lease("a")
	v = lease("b")
	assert.Equal(t, []int64{0, 1, 0, 1}, v[:4])
	assert.Equal(t, int64(budget.KindConcurrent), v[5])
	assert.Equal(t, int64(0), v[6])
}

// An admission whose answer is lost with its stream is cancelled: undone
// when it ran and admitted (in the buckets it took from), and unable to
// take anything when it runs after the cancel. A cancel sent twice applies
// once; an admission without a marker cannot be cancelled.
func TestCancelAnAdmission(t *testing.T) {
	r := redistest.Start(t)
	minute := float64((r.Now()/60 + 60) * 60)
	bucket := func(spec string) int64 {
		return r.Int("GET", subject+":"+spec+":"+strconv.FormatInt(int64(minute)/60, 10))
	}
	leases := func() int64 { return r.Int("ZCARD", subject+":c") }
	// 500 tokens reserved, a request counted and a lease taken, marked m1.
	admit := func(marker string) []int64 {
		return call(r, opAdmit, secs(minute+1), "500", "f600:lease-1!8/"+marker, "2c5", "t60", "1000", "q60", "10")
	}
	cancel := func(marker string, at float64) []int64 {
		return call(r, opCharge, secs(at), "", "f:lease-1!8/"+marker, "-500", "-1", "2c", "t60", "q60")
	}

	t.Run("after it admitted: undone where it took", func(t *testing.T) {
		r.Do("FLUSHALL")
		require.Equal(t, int64(1), admit("m1")[0])
		require.Equal(t, []int64{500, 1, 1}, []int64{bucket("t60"), bucket("q60"), leases()})
		assert.Equal(t, []int64{0, 0}, cancel("m1", minute+70), "given back in the admission's buckets, a minute later too")
		assert.Equal(t, []int64{0, 0, 0}, []int64{bucket("t60"), bucket("q60"), leases()})
		assert.Empty(t, cancel("m1", minute+71), "a second cancel does nothing")
		assert.Equal(t, []int64{0, 0, 0}, []int64{bucket("t60"), bucket("q60"), leases()})
	})

	t.Run("before it ran: it takes nothing", func(t *testing.T) {
		r.Do("FLUSHALL")
		assert.Empty(t, cancel("m2", minute), "nothing to undo")
		assert.Equal(t, int64(0), admit("m2")[0], "a cancelled admission is refused")
		assert.Equal(t, []int64{0, 0, 0}, []int64{bucket("t60"), bucket("q60"), leases()})
		assert.Equal(t, int64(1), admit("m3")[0], "another admission goes as usual")
	})

	t.Run("its marker lives for the seconds given", func(t *testing.T) {
		r.Do("FLUSHALL")
		require.Equal(t, int64(1), admit("m4")[0])
		ttl := r.Int("TTL", subject+":a:m4")
		assert.True(t, ttl > 0 && ttl <= 8, "TTL %d", ttl)
		call(r, opAdmit, secs(minute+1), "500", "f600:lease-2", "2c5", "t60", "1000", "q60", "10")
		assert.Len(t, r.Keys(subject+":a:*"), 1, "an admission without a marker writes none")
	})
}
