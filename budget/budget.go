// Package budget holds the types that describe a budget and its decisions:
// the subjects a request is limited as, with their windows and concurrency
// limits; the amounts a request adds to them; the verdict of an admission
// and the limits a status reads. They are plain values: scripts encodes them
// into the calls of the Lua scripts and reads them from the replies, and
// locallimit decides by them while Redis fails, without Redis.
package budget

import "github.com/tokenlimit/ai-token-ratelimit/config"

// Kind is what the limit that decided a Verdict counts.
type Kind uint8

const (
	KindTokens     Kind = iota // a token window
	KindRequests               // a request window (query_per_*)
	KindConcurrent             // max_concurrent_requests
	KindUSD                    // a money window (usd_per_*), in nanodollars
)

// KindOf is the kind of limit a window of unit u is.
func KindOf(u config.Unit) Kind {
	switch u {
	case config.UnitTokens:
		return KindTokens
	case config.UnitUSD:
		return KindUSD
	}
	return KindRequests
}

// Amounts are what a call adds to each kind of window: tokens to token
// windows, requests to request windows, nanodollars to money windows
// (negative: gives back). An admission reserves Tokens and USD (Requests
// is always one there).
type Amounts struct {
	Tokens, Requests, USD int64
}

// GivenBack is what undoing an admission that reserved a adds: a taken
// back, and one request less.
func (a Amounts) GivenBack() Amounts {
	return Amounts{Tokens: -a.Tokens, Requests: -1, USD: -a.USD}
}

// AtLeast is a's tokens and nanodollars, each at least other's.
func (a Amounts) AtLeast(other Amounts) Amounts {
	return Amounts{Tokens: max(a.Tokens, other.Tokens), USD: max(a.USD, other.USD)}
}

// Exceeds says whether a reserves more than a window of kind k with this
// limit can ever hold.
func (a Amounts) Exceeds(k Kind, limit int64) bool {
	return k == KindTokens && a.Tokens > limit || k == KindUSD && a.USD > limit
}

// LimitStatus is one limit of a subject, as status.lua reads it (see
// scripts.ParseStatus).
type LimitStatus struct {
	Kind    Kind  // KindTokens, KindRequests, KindUSD (counting nanodollars) or KindConcurrent
	Seconds int64 // the window's length; 0 for KindConcurrent
	// Limit is what admissions apply: the subject's override when it has
	// one (with scripts.Options.Overrides), else the configured limit.
	Limit int64
	// Used is what the window counts now (sliding: with the previous
	// bucket's share, rounded up); for KindConcurrent, the requests in
	// progress.
	Used       int64
	Reset      int64 // seconds until the window's bucket ends; 0 for KindConcurrent
	Overridden bool  // Limit is an override
}

// Remaining is what the limit leaves: Limit − Used, never below zero.
func (l LimitStatus) Remaining() int64 { return max(l.Limit-l.Used, 0) }
