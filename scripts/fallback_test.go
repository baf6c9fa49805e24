package scripts

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// The subjects of the fallback tests: a key's budget, shared by every
// model, and its budget on each of two models (per_model, sent as suffixes).
const (
	keySubject  = "atrl:{chat|limit_by_header|x-api-key|sk-1}"
	askedSuffix = ":m:gpt-4o"
	otherSuffix = ":m:gpt-4o-mini"
)

// admitEither runs admit.lua with two candidates, each the key (limit
// keyLimit tokens a minute) and its model (modelLimit), reserving cost0 as
// the asked model and cost1 as the fallback; options as ARGV[3].
func admitEither(r *redistest.Server, now string, options string, keyLimit, modelLimit, cost0, cost1 int64) []int64 {
	k, m := strconv.FormatInt(keyLimit, 10), strconv.FormatInt(modelLimit, 10)
	return ints(r.Do("EVAL", Limiter.Source, "2", keySubject, keySubject, opAdmit, now, strconv.FormatInt(cost0, 10), options,
		"1", "t60", k, "1"+askedSuffix, "t60", m,
		"|"+strconv.FormatInt(cost1, 10),
		"1", "t60", k, "1"+otherSuffix, "t60", m))
}

func TestAdmitServesTheFirstCandidateWithRoom(t *testing.T) {
	r := redistest.Start(t)
	minute := (r.Now()/60 + 60) * 60
	now := secs(float64(minute))
	used := func(suffix string) int64 { return r.Int("GET", bucketKey(keySubject+suffix, 60, minute)) }

	for i := 0; i < 2; i++ {
		v := admitEither(r, now, "f", 1000, 100, 50, 50)
		require.Len(t, v, 11)
		assert.Equal(t, []int64{1, 0, -1}, []int64{v[0], v[9], v[10]}, "request %d: the asked model has room", i+1)
	}
	v := admitEither(r, now, "f", 1000, 100, 50, 50)
	assert.Equal(t, []int64{1, 1, -1}, []int64{v[0], v[9], v[10]}, "gpt-4o's minute is used up: served as the fallback")
	assert.Equal(t, []int64{100, 50, 150}, []int64{used(askedSuffix), used(otherSuffix), used("")},
		"taken for the candidate served alone, and once in the key's window")
	assert.Equal(t, int64(2), v[7], "the verdict's subject is the served candidate's own (from 1)")

	admitEither(r, now, "f", 1000, 100, 50, 50)
	v = admitEither(r, now, "f", 1000, 100, 50, 50)
	assert.Equal(t, int64(0), v[0], "both models used up: rejected")
	assert.Equal(t, []int64{100, 100, 200}, []int64{used(askedSuffix), used(otherSuffix), used("")}, "a rejection takes nothing")

	// A limit both candidates share, with the same need, rejects them both.
	r.Do("FLUSHALL")
	admitEither(r, now, "f", 60, 100, 50, 50)
	v = admitEither(r, now, "f", 60, 100, 50, 50)
	assert.Equal(t, []int64{0, 0}, []int64{v[0], v[9]}, "the key's window: no fallback dodges it")
	assert.Equal(t, int64(1), v[7], "about the key's window")
}

// Each candidate reserves its own cost: where the asked model's estimate no
// longer fits a shared window, a cheaper model's may.
func TestAdmitReservesEachCandidatesOwnCost(t *testing.T) {
	r := redistest.Start(t)
	minute := (r.Now()/60 + 60) * 60
	now := secs(float64(minute))
	r.Do("SET", bucketKey(keySubject, 60, minute), "30")
	v := admitEither(r, now, "f", 100, 1000, 80, 20)
	assert.Equal(t, []int64{1, 1}, []int64{v[0], v[9]}, "80 does not fit the 70 left; 20 does")
	assert.Equal(t, int64(50), r.Int("GET", bucketKey(keySubject, 60, minute)))
	assert.Equal(t, int64(20), r.Int("GET", bucketKey(keySubject+otherSuffix, 60, minute)))
	assert.Equal(t, int64(0), r.Int("EXISTS", bucketKey(keySubject+askedSuffix, 60, minute)))
}

// Soft limits do not reject, so nothing falls back: the asked model is
// admitted over them, and the reply names the candidate that had room.
func TestAdmitOverSoftLimitsNamesWhatWouldHaveBeenServed(t *testing.T) {
	r := redistest.Start(t)
	minute := (r.Now()/60 + 60) * 60
	now := secs(float64(minute))
	r.Do("SET", bucketKey(keySubject+askedSuffix, 60, minute), "100")
	v := ints(r.Do("EVAL", Limiter.Source, "2", keySubject, keySubject, opAdmit, now, "10", "f",
		"1", "t60", "1000", "1"+askedSuffix, "t60", "100s",
		"|10",
		"1", "t60", "1000", "1"+otherSuffix, "t60", "100s"))
	assert.Equal(t, []int64{2, 0, 1}, []int64{v[0], v[9], v[10]}, "admitted over its soft limit; the fallback would have fitted")
	assert.Equal(t, int64(110), r.Int("GET", bucketKey(keySubject+askedSuffix, 60, minute)), "taken as the asked model")
}

// A fallback's admission marker is its own, so that the cancel of an
// admission whose answer was lost undoes the candidate it served.
func TestCancelUndoesTheServedCandidate(t *testing.T) {
	r := redistest.Start(t)
	minute := (r.Now()/60 + 60) * 60
	now := secs(float64(minute))
	r.Do("SET", bucketKey(keySubject+askedSuffix, 60, minute), "100")
	v := admitEither(r, now, "f!30/m1", 1000, 100, 40, 40)
	require.Equal(t, []int64{1, 1}, []int64{v[0], v[9]})
	assert.Equal(t, int64(0), r.Int("EXISTS", keySubject+":a:m1"), "the asked model's marker: not served")
	assert.Equal(t, int64(minute), r.Int("GET", keySubject+":a:m1.1"))

	cancel := func(marker, suffix string) []int64 {
		return call(r, opCharge, now, "", "f!30/"+marker, "-40", "-1", "1", "t60", "1"+suffix, "t60")
	}
	assert.Empty(t, cancel("m1", askedSuffix), "the asked model's cancel: nothing to undo")
	cancel("m1.1", otherSuffix)
	assert.Equal(t, int64(0), r.Int("EXISTS", bucketKey(keySubject+otherSuffix, 60, minute)), "the fallback's reservation given back")
	assert.Equal(t, int64(0), r.Int("EXISTS", bucketKey(keySubject, 60, minute)))

	// Cancelled before it runs, by any candidate's cancel: it takes nothing.
	cancel("m2.1", otherSuffix)
	v = admitEither(r, now, "f!30/m2", 1000, 100, 40, 40)
	assert.Equal(t, int64(0), v[0])
	assert.Equal(t, int64(0), r.Int("EXISTS", bucketKey(keySubject, 60, minute)))
}

// A candidate without subjects in a call's slot has nothing there to stop it.
func TestAdmitCandidateWithoutSubjectsHere(t *testing.T) {
	r := redistest.Start(t)
	minute := (r.Now()/60 + 60) * 60
	now := secs(float64(minute))
	r.Do("SET", bucketKey(keySubject, 60, minute), "100")
	v := ints(r.Do("EVAL", Limiter.Source, "1", keySubject, opAdmit, now, "10", "f", "1", "t60", "100", "|10"))
	assert.Equal(t, []int64{1, 0, 0, 1, -1}, []int64{v[0], v[1], v[7], v[9], v[10]})
}

// FuzzAdmitFirstReply: whatever Redis answers a call with fallbacks, reading
// it gives a verdict about a candidate that was offered, whose subject and
// window exist in that candidate (none for a candidate without subjects), or
// an error; it never panics.
func FuzzAdmitFirstReply(f *testing.F) {
	f.Add([]byte("*11\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:2\r\n:1\r\n:1\r\n:-1\r\n"))
	f.Add([]byte("*11\r\n:1\r\n:0\r\n:0\r\n:0\r\n:9\r\n:0\r\n:0\r\n:0\r\n:0\r\n:2\r\n:-1\r\n"))
	f.Add([]byte("*11\r\n:2\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n:0\r\n:1\r\n"))
	f.Add([]byte("*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n"))
	window := config.Window{Unit: config.UnitTokens, Seconds: 60, Limit: 100}
	subjects := []budget.Subject{{Key: []byte("a"), Windows: []config.Window{window}}, {Key: []byte("b"), Windows: []config.Window{window, window}}}
	candidates := []Candidate{{Subjects: subjects[:1]}, {Subjects: subjects}, {}}
	c := &Client{}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, err := ParseReply(raw, nil)
		if err != nil {
			return
		}
		verdict, err := c.parseAdmitFirst(v, candidates)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%q gave %v, not ErrMalformed", raw, err)
			}
			return
		}
		if verdict.Served < 0 || verdict.Served >= len(candidates) || verdict.WouldServe < -1 || verdict.WouldServe >= len(candidates) {
			t.Fatalf("%q: served %d, would serve %d", raw, verdict.Served, verdict.WouldServe)
		}
		served := candidates[verdict.Served].Subjects
		if verdict.Subject >= len(served) || verdict.Subject < 0 && len(served) > 0 ||
			verdict.Subject >= 0 && verdict.Window >= len(served[verdict.Subject].Windows) {
			t.Fatalf("%q: subject %d window %d of a candidate with %d subjects", raw, verdict.Subject, verdict.Window, len(served))
		}
	})
}
