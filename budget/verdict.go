package budget

// Verdict is an admission's answer (scripts.Client.Admit's, see
// scripts/admit.lua; or locallimit's, while Redis fails), about the limit
// that decided.
type Verdict struct {
	Allowed bool
	// OverSoft says the request was admitted only because the limits that
	// have no room for it are soft (a soft key, shadow_mode): this verdict
	// describes one of them.
	OverSoft  bool
	Kind      Kind
	Limit     int64 // tokens, requests or nanodollars per window, or requests in progress
	Remaining int64 // what is left in it after this request, never negative
	Reset     int64 // seconds until it has room again (rejected) or starts anew (allowed)
	At        int64 // Redis's time of the admission: the buckets it counted in
	// WaitMs is how long until the limit has room (rejected), to the
	// millisecond: 0 when allowed, and for a concurrency limit, whose
	// requests can end any time.
	WaitMs int64
	// Subject is the index, among the subjects of the call, of the one the
	// deciding limit belongs to, and Window the index of the window in its
	// Windows (-1: its concurrency limit).
	Subject, Window int
	// ByKind is, when scripts.Options.ByKind asks for it, the window of
	// each kind (indexed by Kind; not KindConcurrent) that decides among
	// those of its kind as the verdict does among all; nil otherwise.
	ByKind *[KindUSD + 1]Tightest
	// Crossings are the alert thresholds the admission took a bucket past
	// (see scripts/alerts.go); nil without.
	Crossings []Crossing
	// Served is, in scripts.Client.AdmitFirst's verdict, the index of the
	// candidate it is about: the one admitted, or (rejected) the one that
	// has room first.
	// WouldServe is, when that candidate is admitted only over soft limits,
	// the first candidate whose limits all had room (-1: none): what
	// shadow_mode would have served.
	Served, WouldServe int
	// Overridden are, when scripts.Options.ByKind asks for each kind's
	// window and scripts.Options.Overrides reads overrides, the limits of
	// the call's subjects that an override replaced (the quota headers show
	// the limit in force); nil when none did.
	Overridden []Overridden
}

// DecidesOver says whether v, a verdict that admits the request, describes
// it rather than w, another call's verdict that admits it: across calls the
// rule scripts/admit.lua's better applies among one call's windows. A limit
// over which only softness let the request through comes first (of two, the
// one that has room last); then token windows before the other kinds (the
// quota headers name tokens); then the fewest left, and of those the
// latest reset.
func (v Verdict) DecidesOver(w Verdict) bool {
	if v.OverSoft != w.OverSoft {
		return v.OverSoft
	}
	if v.OverSoft && v.WaitMs != w.WaitMs {
		return v.WaitMs > w.WaitMs
	}
	if v.Kind != w.Kind {
		return v.Kind < w.Kind
	}
	return v.Remaining < w.Remaining || (v.Remaining == w.Remaining && v.Reset > w.Reset)
}

// Overridden is a limit an override replaced in an admission: window
// Window of subject Subject (-1: its concurrency limit), whose limit is
// Limit.
type Overridden struct {
	Subject, Window int
	Limit           int64
}

// Tightest is, in a Verdict's ByKind, the window of one kind that decides
// among those of its kind: its limit (0: the call had no window of that
// kind), what is left in it, and the milliseconds until it starts anew
// (open) or has room (closed); its subject and window indexes.
type Tightest struct {
	Limit, Remaining, ResetMs int64
	Subject, Window           int
}

// Crossing is a threshold of budget_alerts a bucket of a window went past
// (see scripts/alerts.go).
type Crossing struct {
	Subject   int   // the subject's index among the call's subjects
	Window    int   // the window's index among that subject's Windows
	Threshold int64 // the percentage of the limit
	Used      int64 // what the bucket holds now (nanodollars for a money window)
	Limit     int64 // the window's limit: its override, when the subject has one
	Reset     int64 // seconds until the window starts anew
	Bucket    int64 // the bucket's number (see scripts/period.lua)
	At        int64 // Redis's second of the call
}
