// Package locallimit is the limiter of failure_mode: local. While Redis
// fails, each worker enforces its subjects' windows in its own memory, each
// limit divided by local_share (the number of workers, on all replicas,
// that share it), and keeps what it counted so that it can be added to
// Redis once Redis answers again (the catch-up). It holds at most a given
// number of subjects, the least recently used going first. It knows
// nothing of proxy-wasm: time is passed in.
package locallimit

import (
	"container/list"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Limiter is one worker's local windows, for the subjects of one
// configuration.
type Limiter struct {
	share       int64
	maxSubjects int
	subjects    map[string]*subject
	recent      list.List // of *subject, the least recently used first
	mayOwe      bool      // something was counted since TakeDebts last found nothing

	// Lost counts what was counted locally in windows that ended (or whose
	// subject was evicted) before Redis was told: tokens and requests.
	LostTokens, LostRequests int64
}

// subject is one subject's local state.
type subject struct {
	key        string
	windows    []window
	inProgress int64
	place      *list.Element
}

// window is a fixed window counted locally (sliding windows are counted
// as fixed ones here): what it counted in its current bucket, and of that
// what Redis has not been told yet.
type window struct {
	config.Window
	bucket int64 // the bucket's number: seconds since the epoch / window length
	used   int64
	owed   int64
}

// add counts n (negative: gives back) in a window, never below zero.
func (w *window) add(n int64) {
	w.used, w.owed = max(w.used+n, 0), max(w.owed+n, 0)
}

// New returns a limiter dividing limits by share (at least 1) and holding
// at most maxSubjects subjects (at least 1).
func New(share int64, maxSubjects int) *Limiter {
	return &Limiter{share: max(share, 1), maxSubjects: max(maxSubjects, 1), subjects: map[string]*subject{}}
}

// Len is the number of subjects held.
func (l *Limiter) Len() int { return len(l.subjects) }

// limit is a configured limit's local share, never below 1.
func (l *Limiter) limit(configured int64) int64 { return max(configured/l.share, 1) }

// Admit decides one request of the subjects at unix second now, all or
// nothing as the admission script does: each token window must have room
// (with cost > 0: for cost tokens, which it then reserves), each request
// window room for one more, each concurrency limit room for one more in
// progress. The verdict names the first limit that has no room.
func (l *Limiter) Admit(subjects []scripts.Subject, cost, now int64) scripts.Verdict {
	held := make([]*subject, len(subjects))
	for i, s := range subjects {
		held[i] = l.subject(s, now)
	}
	best := scripts.Verdict{Allowed: true, Subject: -1}
	for i, h := range held {
		for j := range h.windows {
			w := &h.windows[j]
			limit, take := l.limit(w.Limit), int64(1)
			if w.Unit == config.UnitTokens {
				take = max(cost, 0)
			}
			kind, reset := kindOf(w.Unit), w.Seconds-now%w.Seconds
			fits := w.used+take <= limit && (w.Unit != config.UnitTokens || w.used < limit)
			if !fits {
				return scripts.Verdict{Kind: kind, Limit: limit, Reset: reset, WaitMs: 1000 * reset, Subject: i}
			}
			if left := limit - w.used - take; best.Subject < 0 || left < best.Remaining {
				best = scripts.Verdict{Allowed: true, Kind: kind, Limit: limit, Remaining: left, Reset: reset, Subject: i}
			}
		}
		if c := subjects[i].Concurrent; c > 0 && h.inProgress+1 > l.limit(c) {
			return scripts.Verdict{Kind: scripts.KindConcurrent, Limit: l.limit(c), Reset: 1, Subject: i}
		}
	}
	for i, h := range held {
		for j := range h.windows {
			w := &h.windows[j]
			if w.Unit == config.UnitTokens {
				w.add(max(cost, 0))
			} else {
				w.add(1)
			}
		}
		if subjects[i].Concurrent > 0 {
			h.inProgress++
		}
	}
	l.mayOwe = true
	best.At = now
	best.Subject = max(best.Subject, 0)
	return best
}

// Charge adds tokens (negative: gives back, never below zero) to the
// subjects' token windows and requests to their request windows, in the
// buckets current at now, and ends a request in progress when release is
// set.
func (l *Limiter) Charge(subjects []scripts.Subject, tokens, requests, now int64, release bool) {
	l.mayOwe = l.mayOwe || tokens > 0 || requests > 0
	for _, s := range subjects {
		h := l.subject(s, now)
		for j := range h.windows {
			w := &h.windows[j]
			if w.Unit == config.UnitTokens {
				w.add(tokens)
			} else {
				w.add(requests)
			}
		}
		if release && s.Concurrent > 0 {
			h.inProgress = max(h.inProgress-1, 0)
		}
	}
}

// Debt is what one window of a subject counted locally in its current
// bucket: what the catch-up adds to Redis.
type Debt struct {
	Key    string
	Window config.Window
	Amount int64
}

// TakeDebts returns, and forgets, up to n of the amounts Redis has not been
// told of, in windows still current at now; those of windows that ended are
// counted as lost. The subjects stay, with what they used (should Redis
// fail again within the window) and their requests in progress.
func (l *Limiter) TakeDebts(n int, now int64) []Debt {
	var debts []Debt
	defer func() { l.mayOwe = len(debts) > 0 }()
	for e := l.recent.Front(); e != nil && len(debts) < n; e = e.Next() {
		h := e.Value.(*subject)
		for j := range h.windows {
			w := &h.windows[j]
			l.roll(w, now)
			if w.owed > 0 && len(debts) < n {
				debts = append(debts, Debt{Key: h.key, Window: w.Window, Amount: w.owed})
				w.owed = 0
			}
		}
	}
	return debts
}

// Owes reports whether Redis may not have been told of something counted
// locally (cheap: no walk over the subjects).
func (l *Limiter) Owes() bool { return l.mayOwe }

// Owe gives back a debt the catch-up could not deliver: owed again while
// its window is current at now and its subject held, else lost.
func (l *Limiter) Owe(d Debt, now int64) {
	if h, ok := l.subjects[d.Key]; ok {
		for j := range h.windows {
			if w := &h.windows[j]; w.Window == d.Window {
				l.roll(w, now)
				if w.bucket == now/w.Seconds && d.Amount > 0 {
					w.owed += d.Amount
					l.mayOwe = true
					return
				}
			}
		}
	}
	if d.Window.Unit == config.UnitTokens {
		l.LostTokens += d.Amount
	} else {
		l.LostRequests += d.Amount
	}
}

// subject returns a subject's state, made (and the least recently used
// one evicted when full) on first use, its windows rolled to now.
func (l *Limiter) subject(s scripts.Subject, now int64) *subject {
	h, ok := l.subjects[string(s.Key)]
	if !ok {
		if len(l.subjects) >= l.maxSubjects {
			l.evict()
		}
		h = &subject{key: string(s.Key)}
		for _, w := range s.Windows {
			h.windows = append(h.windows, window{Window: w, bucket: now / w.Seconds})
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

// roll starts a window's new bucket when its bucket ended: what it counted
// then, Redis never sees.
func (l *Limiter) roll(w *window, now int64) {
	if b := now / w.Seconds; b != w.bucket {
		l.lose(w)
		w.bucket, w.used, w.owed = b, 0, 0
	}
}

// evict forgets the least recently used subject.
func (l *Limiter) evict() {
	h := l.recent.Remove(l.recent.Front()).(*subject)
	for j := range h.windows {
		l.lose(&h.windows[j])
	}
	delete(l.subjects, h.key)
}

func (l *Limiter) lose(w *window) {
	if w.Unit == config.UnitTokens {
		l.LostTokens += w.owed
	} else {
		l.LostRequests += w.owed
	}
}

func kindOf(u config.Unit) scripts.Kind {
	if u == config.UnitTokens {
		return scripts.KindTokens
	}
	return scripts.KindRequests
}
