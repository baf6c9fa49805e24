// Package locallimit is the limiter of failure_mode: local. While Redis
// fails, each worker enforces its subjects' windows in its own memory, each
// limit divided by local_share (the number of workers, on all replicas,
// that share it), and keeps what it counted so that it can be added to
// Redis once Redis answers again (the catch-up). It holds at most a given
// number of subjects, the least recently used going first. It knows
// nothing of proxy-wasm: time is passed in.
//
// The catch-up sends debts: what one window counted in one bucket that
// Redis has not been told, under a charge id that names it in Redis, so
// that an attempt whose answer was lost and is sent again is applied once.
// A window has at most one debt out at a time, so that its debts reach
// Redis in order: a refund (a negative debt, given back after its
// reservation was caught up) never goes before the reservation it gives
// back. The windows that have something to send wait in a queue, so that
// taking debts visits those and no other.
package locallimit

import (
	"container/list"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Limiter is one worker's local windows, for the subjects of one
// configuration.
type Limiter struct {
	share       int64
	maxSubjects int
	chargeID    func() string    // a new charge id, unique among all workers' charges
	calendar    *config.Calendar // the periods of calendar windows
	subjects    map[string]*subject
	recent      list.List // of *subject, the least recently used first
	owing       list.List // of *window: those with a debt to send (phase owing or resending), the longest waiting first

	// Lost counts what was counted locally in windows that ended (or whose
	// subject was evicted) before Redis was told: tokens, requests and nanodollars.
	LostTokens, LostRequests, LostNanoUSD int64
}

// subject is one subject's local state.
type subject struct {
	key        string
	windows    []window // made with the subject, never appended to: the owing queue points into it
	inProgress int64
	place      *list.Element // in recent
}

// window is a fixed window counted locally (sliding windows are counted
// as fixed ones here) in its current bucket, and where telling Redis of it
// stands. What it counted is what Redis confirmed, plus its debt out (while
// resending or sending), plus what it owes: used = confirmed + debt.amount
// + owed. A give-back takes from used no more than it holds, so once its
// debts are delivered Redis holds of the bucket what used holds, never
// less than zero: a refund never takes back more than Redis was told.
type window struct {
	config.Window
	subject *subject
	bucket  int64 // the bucket: the unix second it starts at (see Limiter.bucket)
	used    int64 // counted in the bucket: what the local limit checks
	owed    int64 // of used, what no debt carries yet; negative: given back after Redis was told
	debt    debt  // while resending or sending: the debt taken from the bucket Redis has not confirmed
	phase   phase
	queued  *list.Element // in the limiter's owing queue, while owing or resending
}

// debt is a window's debt out: its charge id and amount, the same on every
// attempt.
type debt struct {
	id     string
	amount int64
}

// phase is where telling Redis of a window's bucket stands.
type phase uint8

const (
	told      phase = iota // nothing to send: Redis confirmed what the bucket counted, or it counted nothing
	owing                  // owed is to be sent, as a new debt: in the owing queue
	resending              // debt failed and goes again, as is; owed waits behind it: in the owing queue
	sending                // debt is on its way; what is counted meanwhile waits in owed
)

// New returns a limiter dividing limits by share (at least 1) and holding
// at most maxSubjects subjects (at least 1); chargeID names each new debt's
// charge in Redis, and must not repeat among the workers sharing Redis.
func New(share int64, maxSubjects int, chargeID func() string, calendar *config.Calendar) *Limiter {
	if calendar == nil {
		calendar = &config.Calendar{WeekStart: time.Monday}
	}
	return &Limiter{share: max(share, 1), maxSubjects: max(maxSubjects, 1), chargeID: chargeID, calendar: calendar, subjects: map[string]*subject{}}
}

// bucket is the number of the bucket of a window that holds unix second t,
// and when it ends: its start (a calendar window's period, see
// config.Calendar, or a multiple of its length).
func (l *Limiter) bucket(w config.Window, t int64) (number, end int64) {
	return l.calendar.Period(w.Seconds, t)
}

// Len is the number of subjects held.
func (l *Limiter) Len() int { return len(l.subjects) }

// limit is a configured limit's local share, never below 1.
func (l *Limiter) limit(configured int64) int64 { return max(configured/l.share, 1) }

// Admit decides one request of the subjects at unix second now, all or
// nothing as the admission script does: each token (money) window must
// have room (with cost.Tokens (cost.USD) > 0: for that much, which it then
// reserves), each request window room for one more, each concurrency limit
// room for one more in progress. The verdict names the first limit that
// has no room. The cost is never negative: it is what the limiter priced
// (config.Cost.Tokens, config.Pricing.NanoUSD bound it), as Redis's
// admission is sent (scripts.Client.Admit).
func (l *Limiter) Admit(subjects []budget.Subject, cost budget.Amounts, now int64) budget.Verdict {
	cost.Requests = 1
	held := make([]*subject, len(subjects))
	for i, s := range subjects {
		held[i] = l.subject(s, now)
	}
	best := budget.Verdict{Allowed: true, Subject: -1}
	for i, h := range held {
		for j := range h.windows {
			w := &h.windows[j]
			limit, take := l.limit(config.Share(w.Limit, subjects[i].Open(j))), amountOf(cost, w.Unit) // its level's share
			_, end := l.bucket(w.Window, now)
			kind, reset := budget.KindOf(w.Unit), end-now
			fits := w.used+take <= limit && (w.Unit == config.UnitRequests || w.used < limit)
			if !fits && !subjects[i].WindowSoft(j) { // a soft window counts, but never rejects
				return budget.Verdict{Kind: kind, Limit: limit, Reset: reset, WaitMs: 1000 * reset, Subject: i, Window: j}
			}
			if left := max(limit-w.used-take, 0); best.Subject < 0 || !fits && !best.OverSoft || fits == !best.OverSoft && left < best.Remaining {
				best = budget.Verdict{Allowed: true, OverSoft: !fits, Kind: kind, Limit: limit, Remaining: left, Reset: reset, Subject: i, Window: j}
			}
		}
		c := config.Share(subjects[i].Concurrent, subjects[i].Open(-1)) // its level's share (0: none of it)
		if subjects[i].Concurrent > 0 && h.inProgress+1 > l.limit(c) {
			if !subjects[i].SoftConcurrency {
				return budget.Verdict{Kind: budget.KindConcurrent, Limit: l.limit(c), Reset: 1, Subject: i, Window: -1}
			}
			if !best.OverSoft {
				best = budget.Verdict{Allowed: true, OverSoft: true, Kind: budget.KindConcurrent, Limit: l.limit(c), Reset: 1, Subject: i, Window: -1}
			}
		}
	}
	for i, h := range held {
		for j := range h.windows {
			w := &h.windows[j]
			l.count(w, amountOf(cost, w.Unit))
		}
		if subjects[i].Concurrent > 0 {
			h.inProgress++
		}
	}
	best.At = now
	best.Subject = max(best.Subject, 0)
	return best
}

// Charge adds the amounts to the subjects' windows of their kind, and ends
// a request in progress when release is set.
// As charge.lua does, what is added goes to the buckets current at now,
// what is given back (a negative amount) to the buckets of second at (the
// admission's, where its reservation went; 0: now): a window whose bucket
// of at ended has nothing to give back to. A give-back takes from a
// bucket no more than it holds; of it, what Redis was told already
// becomes a refund owed to Redis.
func (l *Limiter) Charge(subjects []budget.Subject, a budget.Amounts, at, now int64, release bool) {
	if at == 0 {
		at = now
	}
	for _, s := range subjects {
		h := l.subject(s, now)
		for j := range h.windows {
			w := &h.windows[j]
			n := amountOf(a, w.Unit)
			if atBucket, _ := l.bucket(w.Window, at); n > 0 || n < 0 && atBucket == w.bucket {
				l.count(w, n)
			}
		}
		if release && s.Concurrent > 0 {
			h.inProgress = max(h.inProgress-1, 0)
		}
	}
}

// count adds n to a window's bucket (negative: gives back, no more than
// it holds) and owes Redis the change, queueing the window when it has
// something to send that was not queued yet.
func (l *Limiter) count(w *window, n int64) {
	n = max(w.used+n, 0) - w.used
	w.used += n
	w.owed += n
	switch {
	case w.phase == told && w.owed != 0:
		w.phase = owing
		l.enqueue(w)
	case w.phase == owing && w.owed == 0: // given back before it was sent: nothing to send
		w.phase = told
		l.dequeue(w)
	}
}

// Debt is what the catch-up adds to Redis for one window of a subject:
// what the window counted locally in its current bucket (negative: a
// refund of some of what Redis was told of the bucket). It goes under a
// charge id that stays the same on every attempt, so that Redis applies it
// once. Every debt of a window goes to the bucket current by Redis's clock
// when it arrives (the refunds too: see limiter's catchUp), and is sent
// only while the window's bucket is current by the worker's: so a refund
// goes where what it gives back went, unless Redis's window turned between
// the two.
type Debt struct {
	ID     string // its charge id, the same on every attempt
	Key    string
	Window config.Window
	Amount int64
}

// TakeDebts returns up to n debts to send Redis, visiting at most n windows,
// and only windows that have one, the longest waiting first: of each, the
// debt given back by Owe, as it was, else a new debt of what it owes. A
// window whose bucket ended by now yields none: what it owed is counted as
// lost. Each debt waits for Paid or Owe; until then its window gives no
// other, and what it counts meanwhile waits for the next. The subjects
// stay, with what they used (should Redis fail again within the window)
// and their requests in progress.
func (l *Limiter) TakeDebts(n int, now int64) []Debt {
	var debts []Debt
	for visited := 0; visited < n && l.owing.Len() > 0; visited++ {
		w := l.owing.Front().Value.(*window)
		if l.roll(w, now) {
			continue // ended: lost, and out of the queue
		}
		l.dequeue(w)
		if w.phase == owing {
			w.debt = debt{id: l.chargeID(), amount: w.owed}
			w.owed = 0
		}
		w.phase = sending
		debts = append(debts, Debt{ID: w.debt.id, Key: w.subject.key, Window: w.Window, Amount: w.debt.amount})
	}
	return debts
}

// Owes reports whether some window has a debt to send (cheap: no walk over
// the subjects). Debts out are not counted: their answers decide.
func (l *Limiter) Owes() bool { return l.owing.Len() > 0 }

// Paid takes Redis's confirmation of a debt: what its window counted since
// it was taken is owed next.
func (l *Limiter) Paid(d Debt) {
	w := l.sent(d)
	if w == nil {
		return // its bucket ended, or its subject went, since: nothing more to send of it
	}
	w.debt = debt{}
	w.phase = told
	if w.owed != 0 {
		w.phase = owing
		l.enqueue(w)
	}
}

// Owe gives back a debt the catch-up could not deliver, to be sent again
// as it was (its id, its amount) while its bucket is current at now and
// its subject held; else it is lost.
func (l *Limiter) Owe(d Debt, now int64) {
	w := l.sent(d)
	if w == nil || l.roll(w, now) {
		l.lost(d.Window.Unit, max(d.Amount, 0))
		return
	}
	w.phase = resending
	l.enqueue(w)
}

// sent returns the window a debt was taken from while it waits for the
// debt's answer; nil when the bucket ended or the subject went since.
func (l *Limiter) sent(d Debt) *window {
	h, ok := l.subjects[d.Key]
	if !ok {
		return nil
	}
	for j := range h.windows {
		if w := &h.windows[j]; w.phase == sending && w.debt.id == d.ID {
			return w
		}
	}
	return nil
}

// subject returns a subject's state, made (and the least recently used
// one evicted when full) on first use, its windows rolled to now.
func (l *Limiter) subject(s budget.Subject, now int64) *subject {
	h, ok := l.subjects[string(s.Key)]
	if !ok {
		if len(l.subjects) >= l.maxSubjects {
			l.evict()
		}
		h = &subject{key: string(s.Key), windows: make([]window, len(s.Windows))}
		for j, w := range s.Windows {
			b, _ := l.bucket(w, now)
			h.windows[j] = window{Window: w, subject: h, bucket: b}
		}
		h.place = l.recent.PushBack(h)
		l.subjects[h.key] = h
	} else {
		l.recent.MoveToBack(h.place)
	}
	for j := range h.windows {
		l.roll(&h.windows[j], now)
	}
	return h
}

// roll starts a window's new bucket when its bucket ended by now, and
// reports whether it did: what the old one had to send, Redis never sees.
// The answer of a debt out of it finds no window (see sent).
func (l *Limiter) roll(w *window, now int64) bool {
	b, _ := l.bucket(w.Window, now)
	if b == w.bucket {
		return false
	}
	l.lose(w)
	l.dequeue(w)
	*w = window{Window: w.Window, subject: w.subject, bucket: b}
	return true
}

// evict forgets the least recently used subject.
func (l *Limiter) evict() {
	h := l.recent.Remove(l.recent.Front()).(*subject)
	for j := range h.windows {
		l.lose(&h.windows[j])
		l.dequeue(&h.windows[j])
	}
	delete(l.subjects, h.key)
}

// lose counts as lost what a window's bucket had to send as it ends or its
// subject goes: what it owes, and a debt to send again. A debt on its way
// is counted by its answer (see Owe); a refund that never reaches Redis
// loses nothing.
func (l *Limiter) lose(w *window) {
	unsent := w.owed
	if w.phase == resending {
		unsent += w.debt.amount
	}
	l.lost(w.Unit, max(unsent, 0))
}

// lost counts n tokens, requests or nanodollars, by the window's unit, as
// lost.
func (l *Limiter) lost(u config.Unit, n int64) {
	switch u {
	case config.UnitTokens:
		l.LostTokens += n
	case config.UnitUSD:
		l.LostNanoUSD += n
	default:
		l.LostRequests += n
	}
}

// enqueue puts a window at the back of the owing queue.
func (l *Limiter) enqueue(w *window) { w.queued = l.owing.PushBack(w) }

// dequeue takes a window out of the owing queue, if it is in it.
func (l *Limiter) dequeue(w *window) {
	if w.queued != nil {
		l.owing.Remove(w.queued)
		w.queued = nil
	}
}

// amountOf is what amounts add to a window of unit u.
func amountOf(a budget.Amounts, u config.Unit) int64 {
	switch u {
	case config.UnitTokens:
		return a.Tokens
	case config.UnitUSD:
		return a.USD
	}
	return a.Requests
}

// AmountsOf are amounts that add n to the windows of unit u alone: what a
// debt sends.
func AmountsOf(u config.Unit, n int64) budget.Amounts {
	switch u {
	case config.UnitTokens:
		return budget.Amounts{Tokens: n}
	case config.UnitUSD:
		return budget.Amounts{USD: n}
	}
	return budget.Amounts{Requests: n}
}
