package scripts

import (
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
)

// FuzzReply: whatever bytes come back from Redis, reading them as a verdict
// gives either a verdict the limiter can act on or an error the limiter
// turns into failure_mode (ErrMalformed, or Redis's own error reply); it
// never panics. A well-formed verdict always reads back as itself.
func FuzzReply(f *testing.F) {
	f.Add([]byte("*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n"), int64(1), int64(100), int64(5))
	f.Add([]byte("*9\r\n:0\r\n:10\r\n:0\r\n:1\r\n:1763726400\r\n:2\r\n:0\r\n:2\r\n:0\r\n"), int64(0), int64(10), int64(0))
	f.Add([]byte("*9\r\n:2\r\n:10\r\n:0\r\n:1\r\n:1763726400\r\n:3\r\n:900\r\n:2\r\n:2\r\n"), int64(2), int64(10), int64(0))
	f.Add([]byte("-NOSCRIPT No matching script\r\n"), int64(1), int64(1), int64(1))
	f.Add([]byte("*2\r\n:1801\r\n:1801\r\n"), int64(1), int64(1801), int64(1801))
	f.Add([]byte("$-1\r\n"), int64(0), int64(0), int64(0))
	f.Add([]byte("*-1\r\n"), int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, raw []byte, allowed, limit, remaining int64) {
		if v, err := ParseReply(raw, nil); err == nil {
			verdict, err := parseVerdict(v, 2)
			if err == nil && (verdict.Limit <= 0 || verdict.Remaining < 0 || verdict.Reset < 0 || verdict.At <= 0 ||
				verdict.WaitMs < 0 || verdict.Kind > budget.KindUSD || verdict.Subject < 0 || verdict.Subject > 1 || verdict.Window < -1) {
				t.Fatalf("accepted a verdict the limiter cannot act on: %+v from %q", verdict, raw)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("a reply that is not a verdict gave %v, not ErrMalformed", err)
			}
		} else if !errors.Is(err, ErrMalformed) && (len(raw) == 0 || raw[0] != '-') {
			t.Fatalf("%q gave %v: neither malformed nor a Redis error", raw, err)
		}

		// A verdict as admit.lua writes it reads back unchanged.
		allowed = (allowed%3 + 3) % 3 // rejected, admitted, admitted over a soft limit
		limit, remaining = max(limit&0xffffffff, 1), remaining&0xffffffff
		ints := []int64{allowed, limit, remaining, 42, 1763726400, 1, 250, 2, 1}
		wire := []byte("*9\r\n")
		for _, n := range ints {
			wire = strconv.AppendInt(append(wire, ':'), n, 10)
			wire = append(wire, '\r', '\n')
		}
		v, err := ParseReply(wire, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseVerdict(v, 2)
		want := budget.Verdict{Allowed: allowed != 0, OverSoft: allowed == 2, Kind: budget.KindRequests, Limit: limit, Remaining: remaining, Reset: 42, At: 1763726400, WaitMs: 250, Subject: 1}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q read as %+v, %v; want %+v", wire, got, err, want)
		}
	})
}

// FuzzFlatReply: the fast path for flat integer replies reads a reply
// exactly as the RESP reader does, and only replies the reader takes: what
// it accepts, the reader reads as the same integers.
func FuzzFlatReply(f *testing.F) {
	f.Add([]byte("*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n"))
	f.Add([]byte("*2\r\n:-5\r\n:007\r\n"))
	f.Add([]byte("*0\r\n"))
	f.Add([]byte("*1\r\n$1\r\n5\r\n"))
	f.Add([]byte("*1\r\n:99999999999999999999\r\n"))
	f.Add([]byte("*2\r\n:1\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast flatReply
		v, ok := fast.read(raw)
		if !ok {
			return
		}
		ref, err := ParseReply(raw, nil)
		if err != nil {
			t.Fatalf("%q: the fast path read %v, the RESP reader refused it: %v", raw, v, err)
		}
		a, b := v.Array(), ref.Array()
		if ref.Type() != resp.Array || len(a) != len(b) {
			t.Fatalf("%q: the fast path read %v, the RESP reader %v", raw, v, ref)
		}
		for i := range a {
			if b[i].Type() != resp.Integer || a[i].Integer() != b[i].Integer() {
				t.Fatalf("%q: element %d: the fast path read %v, the RESP reader %v", raw, i, a[i], b[i])
			}
		}
	})
}

// The fast path takes the replies the scripts send, and leaves the rest.
func TestFlatReplies(t *testing.T) {
	var f flatReply
	for raw, want := range map[string][]int{
		"*9\r\n:1\r\n:100\r\n:5\r\n:3\r\n:9\r\n:0\r\n:0\r\n:1\r\n:1\r\n": {1, 100, 5, 3, 9, 0, 0, 1, 1},
		"*2\r\n:-5\r\n:9007199254740992\r\n":                             {-5, 9007199254740992},
		"*0\r\n":                                                         {},
	} {
		v, ok := f.read([]byte(raw))
		if !ok {
			t.Fatalf("%q not read", raw)
		}
		got := []int{}
		for _, e := range v.Array() {
			got = append(got, e.Integer())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, want %v", raw, got, want)
		}
	}
	for _, raw := range []string{"", "*", "*1\r\n", "*1\r\n$1\r\n5\r\n", "*1\r\n:1\r\n:2\r\n", "*1\r\n:1\r", "-ERR x\r\n", ":5\r\n",
		"*-1\r\n", "*1\r\n*1\r\n:1\r\n", "*1\r\n:1234567890123456789\r\n", "*257\r\n", "*1\r\n:+1\r\n", "*1\r\n:\r\n"} {
		if _, ok := f.read([]byte(raw)); ok {
			t.Fatalf("%q read by the fast path", raw)
		}
	}
}

// FuzzOutbox: whatever a claim's reply holds (an outbox anyone can write
// to), it is read as alerts the limiter can deliver or drop, or as
// ErrMalformed; never a panic. An alert as alerts.lua writes it reads back
// as itself.
func FuzzOutbox(f *testing.F) {
	f.Add([]byte("*3\r\n$10\r\n1767229211\r\n:0\r\n$41\r\nt60:29453820:!50|600|1000|50|1767229210|{}\r\n"), "t60", int64(29453820), int64(50), int64(600))
	f.Add([]byte("*4\r\n$0\r\n\r\n:1\r\n$5\r\n:!|||\r\n$9\r\nq1:1:!1|0\r\n"), "u86400", int64(0), int64(100), int64(0))
	f.Add([]byte("*2\r\n$0\r\n\r\n:-1\r\n"), "x1", int64(1), int64(0), int64(-1))
	f.Add([]byte("*5\r\n$3\r\n1.5\r\n$5\r\n16368\r\n$0\r\n\r\n$1\r\n1\r\n$3\r\na:b\r\n"), "t60", int64(1), int64(50), int64(1))
	f.Fuzz(func(t *testing.T, raw []byte, window string, bucket, threshold, used int64) {
		if v, err := ParseReply(raw, nil); err == nil {
			cl, err := parseClaimed(v)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%q gave %v, not ErrMalformed", raw, err)
			}
			for _, a := range cl.Taken {
				if a.Head == "" || a.Seconds <= 0 || a.Threshold <= 0 || a.Threshold > 100 || a.Limit <= 0 || a.Used < 0 || a.Reset < 0 {
					t.Fatalf("took an alert the limiter cannot describe: %+v", a)
				}
			}
			sc, err := parseScanned(v) // a scan's reply, as read from the same bytes
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%q gave %v, not ErrMalformed", raw, err)
			}
			if err == nil && (sc.Sweep < -1 || sc.Sweep >= cachekey.Slots) {
				t.Fatalf("%q: sweep slot %d", raw, sc.Sweep)
			}
		}
		unit, seconds, ok := ParseWindowName(window)
		if !ok || bucket < 0 || threshold < 1 || threshold > 100 || used < 0 {
			return
		}
		c := budget.Crossing{Threshold: threshold, Used: used, Limit: 1000, Reset: 60, Bucket: bucket, At: 1767229210}
		a, ok := ParseAlert(AlertMember(c, OverrideName(unit, seconds)))
		if !ok || a.Unit != unit || a.Seconds != seconds || a.Threshold != threshold || a.Used != used || a.At != c.At {
			t.Fatalf("%+v read back as %+v (%v)", c, a, ok)
		}
	})
}
