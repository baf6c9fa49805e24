package scripts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// Errors a call can end with; the limiter applies its failure mode to all of them.
var (
	// ErrUnavailable: the gateway could not get an answer from Redis (no
	// connection, connection reset, or no reply within the configured timeout).
	ErrUnavailable = errors.New("redis unavailable")
	// ErrNoReply: the call went out and no reply came (a connection reset,
	// or redis.timeout passed first); it comes with ErrUnavailable. Redis
	// may have run it, or may still run it, late: a Redis that hangs runs
	// what it was sent when it resumes (see MayHaveRun).
	ErrNoReply = errors.New("no reply")
	// ErrMalformed: Redis answered something that is not what the script returns.
	ErrMalformed = errors.New("malformed redis reply")
)

// Endpoint says where the Redis service is and how to log in to it.
type Endpoint struct {
	ServiceName string
	ServicePort int
	Username    string
	Password    string
	TimeoutMs   uint32
	Database    int
}

// Client sends script calls to one Redis service through the gateway. The
// proxy-wasm VM is single-threaded, so a Client is used without locking.
type Client struct {
	endpoint Endpoint
	options  Options
	cluster  string // the gateway's name for the Redis cluster
	ready    bool   // whether the gateway accepted RedisInit
	replies  *bufio.Reader
	flat     flatReply       // the flat integer replies, read without the RESP reader
	breaker  *Breaker        // nil: none
	latency  LatencyRecorder // where each call's time is recorded; nil: not timed
	// crossSlot: Redis refused a call whose keys span hash slots
	// (CROSSSLOT), so it is a Redis Cluster (see CrossSlotRefused).
	crossSlot bool
}

// CrossSlotRefused reports whether Redis refused a call of this client
// because its keys were in several hash slots: a Redis Cluster, which a
// configuration said was one server (redis.cluster: false). A refused call
// ran nothing; the caller sends one call per slot from then on.
func (c *Client) CrossSlotRefused() bool { return c.crossSlot }

// SetBreaker puts the client's calls behind a circuit breaker, which
// clients of the same endpoint may share.
func (c *Client) SetBreaker(b *Breaker) { c.breaker = b }

// SetLatency has the client record the time of each call of a script
// (each try: one sent again by source, or with Redis's clock, is timed
// anew), from when it is sent to its answer, whatever the answer (the
// gateway's failure after redis.timeout included), in whole milliseconds
// rounded down, as Envoy records its own request times: 0 is under a
// millisecond. Read on the host's monotonic clock, once when sent and once
// when answered.
func (c *Client) SetLatency(h LatencyRecorder) { c.latency = h }

// LatencyRecorder takes the time of each call, in milliseconds: a
// proxywasm.MetricHistogram, or something that adds to one later.
type LatencyRecorder interface{ Record(ms uint64) }

// BreakerOpen reports whether the client's calls fail at once.
func (c *Client) BreakerOpen() bool { return c.breaker.Open() }

// NewClient returns a client for the endpoint; Init must be called before use.
func NewClient(e Endpoint, o Options) *Client {
	cluster := wrapper.FQDNCluster{FQDN: e.ServiceName, Port: int64(e.ServicePort)}.ClusterName()
	return &Client{endpoint: e, options: o, cluster: cluster, replies: bufio.NewReader(nil)}
}

// Init asks the gateway to open the Redis connection. A failure is not fatal
// (the gateway may not know the cluster yet): it is retried before each call.
func (c *Client) Init() error {
	// Buffering is off: a limiter on the request path must not wait up to the
	// gateway's default 3 ms flush interval before its call leaves.
	options := "?db=" + strconv.Itoa(c.endpoint.Database) + "&buffer_flush_timeout=0&max_buffer_size_before_flush=0"
	err := proxywasm.RedisInit(c.cluster+options, c.endpoint.Username, c.endpoint.Password, c.endpoint.TimeoutMs)
	c.ready = err == nil
	if err != nil {
		return fmt.Errorf("%w: redis init for %s failed: %v", ErrUnavailable, c.cluster, err)
	}
	return nil
}

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

// Verdict is Admit's answer, about the limit that decided (see admit.lua).
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
	// ByKind is, when Options.ByKind asks for it, the window of each kind
	// (indexed by Kind; not KindConcurrent) that decides among those of its
	// kind as the verdict does among all; nil otherwise.
	ByKind *[KindUSD + 1]Tightest
	// Crossings are the alert thresholds the admission took a bucket past
	// (see alerts.go); nil without.
	Crossings []Crossing
	// Served is, in AdmitFirst's verdict, the index of the candidate it is
	// about: the one admitted, or (rejected) the one that has room first.
	// WouldServe is, when that candidate is admitted only over soft limits,
	// the first candidate whose limits all had room (-1: none): what
	// shadow_mode would have served.
	Served, WouldServe int
	// Overridden are, when Options.ByKind asks for each kind's window and
	// Options.Overrides reads overrides, the limits of the call's subjects
	// that an override replaced (the quota headers show the limit in
	// force); nil when none did.
	Overridden []Overridden
}

// DecidesOver says whether v, a verdict that admits the request, describes
// it rather than w, another call's verdict that admits it: across calls the
// rule admit.lua's better applies among one call's windows. A limit over
// which only softness let the request through comes first (of two, the one
// that has room last); then token windows before the other kinds (the
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

// Subject is one limited subject: its windows and its concurrency limit.
type Subject struct {
	Key        []byte
	Windows    []config.Window
	Concurrent int64 // at most this many of its requests in progress; 0: no limit
	// Suffix, when not 0, says that Key is the key of the subject before it
	// in the call followed by a suffix of this many bytes, starting with
	// ':' (a per_model limit after its parent, see cachekey.AppendModel):
	// admissions and charges then send the suffix alone, in the subject's
	// head, rather than a key of its own.
	Suffix int
	// SoftWindows has bit j set when Windows[j] is soft: it never rejects
	// (config.LimitKey.Soft of the key the window is from, shadow_mode);
	// AllSoft for all of them. SoftConcurrency says its concurrency limit
	// does not reject either (shadow_mode). They count, lease and show as
	// usual.
	SoftWindows     uint32
	SoftConcurrency bool
	// Level is the priority level of the request it limits (see
	// config.Priority): each window is checked against the share of its
	// limit open to that level (config.Window.Open), its concurrency limit
	// against ConcurrentOpen percent of it (0: all of it); see Open.
	Level          int
	ConcurrentOpen int64
	// Secret says its value is read from a credential (see
	// config.RuleItem.Secret): logs name it by LogName.
	Secret bool
}

// LogName is the subject's key as a log line shows it: with its value
// (the last part of its hash tag, see cachekey.Parts) fingerprinted when it
// is read from a credential (see config.Fingerprint). A value the key holds
// hashed ('#' and hex digits) is shown as it is.
func (s *Subject) LogName() string {
	key := string(s.Key)
	if !s.Secret {
		return key
	}
	parts, tail, ok := cachekey.Parts(key)
	if value := parts[3]; !ok || value == "" || value[0] == '#' {
		return key
	}
	end := len(key) - len(tail) - 1 // the '}' after the value
	return key[:end-len(parts[3])] + config.Fingerprint(parts[3]) + key[end:]
}

// Open is the percent of limit j of the subject (-1: its concurrency
// limit) open to its request's priority level: 100 when every level may use
// all of it.
func (s *Subject) Open(j int) int64 {
	if j >= 0 {
		return s.Windows[j].Open(s.Level)
	}
	if s.ConcurrentOpen == 0 {
		return 100
	}
	return s.ConcurrentOpen
}

// AllSoft is Subject.SoftWindows when every window is soft.
const AllSoft = ^uint32(0)

// WindowSoft reports whether window j of the subject is soft.
func (s *Subject) WindowSoft(j int) bool { return s.SoftWindows>>j&1 != 0 }

// Options are the settings every call of a client shares.
type Options struct {
	Sliding      bool  // window_type sliding
	LeaseSeconds int64 // how long a concurrency lease outlives its last renewal
	Overrides    bool  // limit_overrides: admissions and status read the subjects' overrides
	// Calendar aligns day, week and month windows (nil: UTC, weeks from
	// Monday); their bounds are worked out from RedisClock (see period.lua).
	Calendar *config.Calendar
	// Thresholds are budget_alerts' (nil: none): admissions, and charges
	// sent with ChargeAlerting, report the buckets they take past them.
	Thresholds []int64
	// ByKind asks admissions for each kind's tightest window
	// (Verdict.ByKind): quota headers that show tokens and requests apart.
	ByKind bool
	// OneServer says that one call may touch keys of any slot
	// (redis.cluster: false): a call that records a budget alert lists its
	// outbox in the alert index too (see alerts.lua).
	OneServer bool
	// AlertOwner is the configuration's config.AlertOwner, with
	// Thresholds: whose outboxes its calls write alerts to.
	AlertOwner string
}

// defaultCalendar is the calendar of Options without one.
var defaultCalendar = &config.Calendar{WeekStart: time.Monday}

// Clock is the caller's view of Redis's clock, which decides the period of
// a calendar window: this machine's clock, corrected by the time Redis gave
// when the bounds worked out from it missed Redis's period (the scripts
// answer ATRL_TIME <Redis's second>, and the call is sent again).
type Clock struct {
	offset int64 // seconds: Redis's clock less this machine's
}

// RedisClock is the one Clock of this process (a plugin VM, the CLI): the
// Redis servers a process talks to keep one time.
var RedisClock = &Clock{}

// Now is the caller's estimate of Redis's unix second.
func (c *Clock) Now() int64 { return time.Now().Unix() + c.offset }

// Learn corrects the clock by Redis's second when err is a script's
// ATRL_TIME error, and reports whether it was: the call is to be sent
// again, its bounds worked out anew.
func (c *Clock) Learn(err error) bool {
	redisSecond, ok := redisTime(err)
	if ok {
		c.offset = redisSecond - time.Now().Unix()
	}
	return ok
}

// redisTime returns Redis's second from a script's ATRL_TIME error: the
// bounds of a calendar window the call carried were worked out from a
// clock a period off Redis's (see period.lua).
func redisTime(err error) (int64, bool) {
	if err == nil {
		return 0, false
	}
	msg := err.Error()
	i := strings.Index(msg, timeErrorPrefix)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(timeErrorPrefix):]
	if j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		rest = rest[:j]
	}
	n, perr := strconv.ParseInt(rest, 10, 64)
	return n, perr == nil && n > 0
}

// timeErrorPrefix starts the scripts' error reply of a clock a period off.
const timeErrorPrefix = "ATRL_TIME "

// Admit asks whether one more request of the subjects (all in one Redis
// Cluster slot) may go, reserving cost.Tokens in every token window and
// cost.USD in every money window when it may (0: check only; more than
// estimate.MaxTokens tokens or MaxLimit nanodollars reserves that),
// counting it in every request window, and taking a lease named leaseID in
// every subject with a concurrency limit. markerID ("": none) names the
// admission so that Cancel can undo it. done gets the verdict, or an error
// when Redis could not give one; when Admit itself returns an error, done is
// never called.
func (c *Client) Admit(subjects []Subject, cost Amounts, leaseID, markerID string, done func(Verdict, error)) error {
	encode := func(bySource bool) []byte { return c.encodeAdmit(subjects, cost, leaseID, markerID, bySource) }
	return c.dispatch(encode, func(v resp.Value, err error) {
		if err != nil {
			done(Verdict{}, err)
			return
		}
		done(c.parseAdmit(v, subjects))
	})
}

// encodeAdmit encodes one call of admit.lua.
func (c *Client) encodeAdmit(subjects []Subject, cost Amounts, leaseID, markerID string, bySource bool) []byte {
	q := Limiter.appendCall(make([]byte, 0, callSize(subjects, 24)+len(leaseID)+len(markerID)+20), bySource, opAdmit, subjects, true, 3+windowArgs(subjects, 2))
	q = appendBulkString(q, "") // no time given: the script reads Redis's clock
	q = appendAmounts(q, max(cost.Tokens, 0), max(cost.USD, 0))
	q = c.appendOptions(q, true, leaseID, true, markerID, true, firstKey(subjects))
	var now int64
	return c.appendAdmitSubjects(q, subjects, &now)
}

// appendAdmitSubjects appends the subjects of an admission: each one's head,
// then its windows, each followed by its limit (see admit.lua). *now is as
// appendWindow has it.
func (c *Client) appendAdmitSubjects(q []byte, subjects []Subject, now *int64) []byte {
	for i := range subjects {
		s := &subjects[i]
		q = appendSubjectHead(q, subjects, i, true)
		for j, w := range s.Windows {
			q = c.options.appendWindow(q, w, now)
			q = appendLimit(q, w.Limit, s.WindowSoft(j), s.Open(j))
		}
	}
	return q
}

// Charge settles a request in the subjects (all in one slot): it adds the
// amounts to every window of their kind, and releases the lease leaseID
// ("": none) where the subjects have a concurrency limit.
// What is added goes to the buckets current now, by Redis's clock; what is
// given back (negative amounts: a refund, a rollback) to the buckets of time
// at (a Verdict's At, where the reservation went; 0: now). Amounts are
// taken within ±estimate.MaxTokens (nanodollars ±MaxLimit). chargeID ("": none) names the charge so
// that sending it again applies it once (see ChargeMarkerSeconds). done, if
// not nil, gets nil or the error; when Charge itself returns an error, done
// is never called.
func (c *Client) Charge(subjects []Subject, a Amounts, at int64, leaseID, chargeID string, done func(error)) error {
	encode := func(bySource bool) []byte {
		return c.encodeCharge(subjects, a, at, leaseID, chargeID, "", bySource)
	}
	return c.dispatchCharge(subjects, chargeID != "", false, encode, ignoreCrossings(done))
}

// Cancel undoes the admission markerID of the subjects (all in one slot)
// whose answer was lost (or came as a failure that may hide a run: see
// MayHaveRun): when it ran and admitted, it adds the amounts (the
// reservation given back, negative, and -1 request) in the buckets it
// took from and releases the lease leaseID ("": none); when it did not, or
// has not run yet, it makes sure it never takes anything. Sent twice, it
// applies once. done, if not nil, gets nil or the error; when Cancel itself
// returns an error, done is never called.
func (c *Client) Cancel(subjects []Subject, a Amounts, leaseID, markerID string, done func(error)) error {
	encode := func(bySource bool) []byte {
		return c.encodeCharge(subjects, a, 0, leaseID, "", markerID, bySource)
	}
	return c.dispatchCharge(subjects, true, false, encode, ignoreCrossings(done))
}

// dispatchCharge sends a call of charge.lua and checks its reply: a total
// per window, or nothing (maybeEmpty: a charge applied before, a cancel with
// nothing to undo); when alerting, the totals may be followed by crossings
// (see parseCharge).
func (c *Client) dispatchCharge(subjects []Subject, maybeEmpty, alerting bool, encode func(bySource bool) []byte, done func([]Crossing, error)) error {
	return c.dispatch(encode, func(v resp.Value, err error) {
		var crossed []Crossing
		if err == nil {
			crossed, err = c.parseCharge(v, subjects, maybeEmpty, alerting)
		}
		if done != nil {
			done(crossed, err)
		}
	})
}

// encodeCharge encodes one call of charge.lua.
func (c *Client) encodeCharge(subjects []Subject, a Amounts, at int64, leaseID, chargeID, cancelID string, bySource bool) []byte {
	return c.encodeChargeCall(subjects, a, nil, at, leaseID, chargeID, cancelID, false, bySource)
}

// encodeChargeCall encodes one call of charge.lua, with each window's limit
// and the thresholds when alerting (and thresholds are configured).
func (c *Client) encodeChargeCall(subjects []Subject, a Amounts, spent *Amounts, at int64, leaseID, chargeID, cancelID string, alerting, bySource bool) []byte {
	alerting = alerting && len(c.options.Thresholds) > 0
	perWindow := 1
	if alerting {
		perWindow = 2 // its limit
	}
	q := Limiter.appendCall(make([]byte, 0, callSize(subjects, 12*perWindow)+len(leaseID)+len(chargeID)+len(cancelID)+32), bySource, opCharge, subjects, true, 5+windowArgs(subjects, perWindow))
	q = appendBulkString(q, "") // now, by Redis's clock
	if at > 0 {
		q = appendBulkInt(q, at)
	} else {
		q = appendBulkString(q, "") // the buckets of now
	}
	q = c.appendChargeOptions(q, leaseID, chargeID, cancelID, spent, alerting, firstKey(subjects))
	q = appendAmounts(q, a.Tokens, a.USD)
	q = appendBulkInt(q, tokenAmount(a.Requests))
	var now int64
	for i, s := range subjects {
		q = appendSubjectHead(q, subjects, i, false)
		for _, w := range s.Windows {
			q = c.options.appendWindow(q, w, &now)
			if alerting {
				q = appendBulkInt(q, w.Limit)
			}
		}
	}
	return q
}

// tokenAmount takes an amount the scripts add into ±estimate.MaxTokens:
// they read it as a double, exact only up to 2^53.
func tokenAmount(n int64) int64 {
	return min(max(n, -estimate.MaxTokens), estimate.MaxTokens)
}

// appendAmounts appends the argument of tokens and nanodollars: the tokens
// alone when there is no money ("1200"), else both ("1200:3250000"), each
// bounded so that the scripts hold it exactly.
func appendAmounts(dst []byte, tokens, usd int64) []byte {
	if usd == 0 {
		return appendBulkInt(dst, tokenAmount(tokens))
	}
	var buf [48]byte
	return appendBulk(dst, amountsArg(buf[:0], tokens, usd))
}

// amountsArg appends tokens and, when not 0, ':' and nanodollars, each
// bounded so that the scripts hold it exactly.
func amountsArg(arg []byte, tokens, usd int64) []byte {
	arg = strconv.AppendInt(arg, tokenAmount(tokens), 10)
	if usd != 0 {
		arg = strconv.AppendInt(append(arg, ':'), min(max(usd, -config.MaxLimit), config.MaxLimit), 10)
	}
	return arg
}

// Renew extends the lease leaseID in every subject with a concurrency limit
// (all in one slot), as long as it is still held. done, if not nil, gets nil
// or the error; when Renew itself returns an error, done is never called.
func (c *Client) Renew(subjects []Subject, leaseID string, done func(error)) error {
	encode := func(bySource bool) []byte {
		q := Limiter.appendCall(make([]byte, 0, callSize(subjects, 0)+len(leaseID)), bySource, opRenew, subjects, false, 2)
		q = appendBulkString(q, "") // now, by Redis's clock
		return c.appendOptions(q, false, leaseID, true, "", false, nil)
	}
	return c.dispatch(encode, func(v resp.Value, err error) {
		if err == nil && v.Type() != resp.Integer {
			err = fmt.Errorf("%w: renew returned %s", ErrMalformed, describe(v))
		}
		if done != nil {
			done(err)
		}
	})
}

// appendWindowType appends the window type as the scripts read it: 'f'
// (fixed) or 's' (sliding); in capitals, for an admission, when it is to
// report each kind's tightest window (ByKind).
func (o Options) appendWindowType(arg []byte, admission bool) []byte {
	c := byte('f')
	if o.Sliding {
		c = 's'
	}
	if admission && o.ByKind {
		c -= 'a' - 'A'
	}
	return append(arg, c)
}

// appendOptions appends the options argument of a call, without allocating:
// the window type ('f' or 's') and 'o' with overrides when withWindowType
// (admit.lua),
// then, with a lease, "<lease seconds>:<id>" to take or renew it
// (withSeconds) or ":<id>" to release it, then, with an admission marker,
// "!<seconds>/<marker id>", then, when alerting, the thresholds (see
// appendThresholds: key is the call's first).
func (c *Client) appendOptions(dst []byte, withWindowType bool, leaseID string, withSeconds bool, markerID string, alerting bool, key []byte) []byte {
	var buf [96]byte
	arg := buf[:0]
	if withWindowType {
		arg = c.options.appendWindowType(arg, true)
		if c.options.Overrides {
			arg = append(arg, 'o')
		}
	}
	if leaseID != "" {
		if withSeconds {
			arg = strconv.AppendInt(arg, c.options.LeaseSeconds, 10)
		}
		arg = append(append(arg, ':'), leaseID...)
	}
	return appendBulk(dst, c.appendThresholds(c.appendMarker(arg, markerID), alerting, false, key))
}

// appendMarker appends "!<seconds>/<marker id>" for an admission marker ("":
// none), the suffix of an admission that notes it ran and of the charge that
// cancels it.
func (c *Client) appendMarker(arg []byte, markerID string) []byte {
	if markerID == "" {
		return arg
	}
	arg = strconv.AppendInt(append(arg, '!'), c.AdmissionMarkerSeconds(), 10)
	return append(append(arg, '/'), markerID...)
}

// appendChargeOptions appends the options argument of a charge (see
// charge.lua): the window type, ":<lease id>" to release a lease, and
// "/<seconds>/<charge id>" to mark the charge applied, or "!<seconds>/<marker
// id>" to cancel an admission, then, when alerting, "=<tokens>:<nanodollars>"
// for the usage of a reservation's charge (spent) and the thresholds (see
// appendThresholds: key is the call's first), without allocating.
func (c *Client) appendChargeOptions(dst []byte, leaseID, chargeID, cancelID string, spent *Amounts, alerting bool, key []byte) []byte {
	var buf [128]byte
	arg := c.options.appendWindowType(buf[:0], false)
	if leaseID != "" {
		arg = append(append(arg, ':'), leaseID...)
	}
	if chargeID != "" {
		arg = strconv.AppendInt(append(arg, '/'), c.ChargeMarkerSeconds(), 10)
		arg = append(append(arg, '/'), chargeID...)
	}
	arg = c.appendMarker(arg, cancelID)
	if alerting && spent != nil && len(c.options.Thresholds) > 0 { // the usage a reservation's charge is of
		arg = strconv.AppendInt(append(arg, '='), max(tokenAmount(spent.Tokens), 0), 10)
		arg = strconv.AppendInt(append(arg, ':'), min(max(spent.USD, 0), config.MaxLimit), 10)
	}
	return appendBulk(dst, c.appendThresholds(arg, alerting, c.options.Overrides, key))
}

// MayHaveRun says whether a call that failed with err may have run in
// Redis, or may still run: it went out and no reply came (ErrNoReply), or
// the reply was not what the script returns (ErrMalformed). A call that
// never left (ErrBreakerOpen, a failed dispatch) did not, nor one Redis
// refused with an error reply (the scripts write nothing before they can
// fail: see admit.lua).
func MayHaveRun(err error) bool {
	return errors.Is(err, ErrNoReply) || errors.Is(err, ErrMalformed)
}

// ChargeMarkerSeconds is how long Redis remembers a charge id, counted from
// the charge's first run: a retry lands within a timeout of its sending,
// and one sent after an outage within a probe interval (MaxProbeInterval)
// of Redis answering again, which is when a Redis that hung runs the tries
// it kept; two timeouts and a minute cover that, the plugin's tick and
// clocks.
func (c *Client) ChargeMarkerSeconds() int64 {
	return 2*((int64(c.endpoint.TimeoutMs)+999)/1000) + 60
}

// AdmissionMarkerSeconds is how long Redis keeps an admission's marker, and
// a cancelled one's. A cancel is sent from the plugin's tick when the
// admission's answer will not come (its stream ended first) or came as a
// failure that may hide a run (MayHaveRun: the gateway gave up after
// redis.timeout), and is tried until it lands. A Redis that hung runs the
// admission and the cancel's tries it kept when it resumes; the plugin's
// next try then goes out at most a probe interval (MaxProbeInterval) after
// Redis answers again. Three timeouts, a probe interval and a few seconds
// cover that; markers of admissions that are never cancelled (all but a
// few) cost Redis no more than that long.
func (c *Client) AdmissionMarkerSeconds() int64 {
	return 3*((int64(c.endpoint.TimeoutMs)+999)/1000) + int64(MaxProbeInterval/time.Second) + 5
}

// appendSubjectHead appends subject i's window count and, when it has a
// concurrency limit, "c" and (admit) the limit, then, when it is sent
// relative to the subject before it (see Subject.Suffix), its key's suffix:
// "2", "2c5", "2c" or "1:m:gpt-4o".
func appendSubjectHead(dst []byte, subjects []Subject, i int, admit bool) []byte {
	s := subjects[i]
	var head [96]byte
	h := strconv.AppendInt(head[:0], int64(len(s.Windows)), 10)
	if s.Concurrent > 0 {
		h = append(h, 'c')
		if admit {
			h = strconv.AppendInt(h, s.Concurrent, 10)
			if s.SoftConcurrency {
				h = append(h, 's')
			}
			if open := s.Open(-1); open < 100 {
				h = strconv.AppendInt(append(h, '%'), open, 10)
			}
		}
	}
	if isRelative(subjects, i) {
		h = append(h, s.Key[len(s.Key)-s.Suffix:]...)
	}
	return appendBulk(dst, h)
}

// appendWindow appends a window as the scripts name it: its unit ('t'
// tokens, 'q' requests, 'u' money) and its length in seconds, e.g. "t60";
// for a calendar window, then '@' and the bounds of the periods around the
// clock's time, "t2592000@1761955200:1764547200:1767225600:1769904000"
// (see period.lua). *now is the clock's time, read on first use (0: not
// yet), so that a call reads it once, and only when it has a calendar
// window.
func (o Options) appendWindow(dst []byte, w config.Window, now *int64) []byte {
	var spec [80]byte
	s := appendSpec(spec[:0], w.Unit, w.Seconds)
	cal := o.Calendar
	if cal == nil {
		cal = defaultCalendar
	}
	if cal.Aligned(w.Seconds) {
		if *now == 0 {
			*now = RedisClock.Now()
		}
		for i, b := range cal.Bounds(w.Seconds, *now) {
			s = strconv.AppendInt(append(s, "@:::"[i]), b, 10)
		}
	}
	return appendBulk(dst, s)
}

// appendSpec appends a window's name in the scripts: "t60", "q3600".
func appendSpec(dst []byte, unit config.Unit, seconds int64) []byte {
	c := byte('t')
	switch unit {
	case config.UnitRequests:
		c = 'q'
	case config.UnitUSD:
		c = 'u'
	}
	return strconv.AppendInt(append(dst, c), seconds, 10)
}

// windowArgs counts the per-window arguments of a call: a window count per
// subject, plus perWindow arguments per window.
func windowArgs(subjects []Subject, perWindow int) int {
	n := 0
	for _, s := range subjects {
		n += 1 + perWindow*len(s.Windows)
	}
	return n
}

// firstKey is the key of a call's first subject (nil: none).
func firstKey(subjects []Subject) []byte {
	if len(subjects) == 0 {
		return nil
	}
	return subjects[0].Key
}

// callSize guesses an encoded call's size so it is built in one allocation.
func callSize(subjects []Subject, perWindow int) int {
	n := 96
	for _, s := range subjects {
		n += len(s.Key) + 16 + perWindow*len(s.Windows)
	}
	return n
}

// dispatch sends a call by digest; when Redis does not have the script (it
// restarted, or its script cache was flushed) the call is sent once more with
// the script's source, which also puts the script back in Redis's cache.
func (c *Client) dispatch(encode func(bySource bool) []byte, done func(resp.Value, error)) error {
	if c.breaker.Open() {
		return ErrBreakerOpen
	}
	if !c.ready {
		if err := c.Init(); err != nil {
			c.breaker.Record(err, time.Now())
			return err
		}
	}
	return c.sendRetrying(encode, false, true, done)
}

// sendRetrying sends a call encoded by digest or by source, and sends it
// once more when Redis asks: by source when it does not have the script,
// with bounds worked out again when its clock is a period off this one's
// (learning Redis's time: see Clock). Each outcome goes to the breaker.
// One closure per try takes the host's answer to the end (every request
// makes two calls: the chain of closures was the most of its allocations).
func (c *Client) sendRetrying(encode func(bySource bool) []byte, bySource, clockRetry bool, done func(resp.Value, error)) error {
	query := encode(bySource)
	var sent time.Time
	if c.latency != nil {
		sent = time.Now()
	}
	err := c.dispatchQuery(query, func(status, size int) {
		// The host may read the query after the call returns (the test host
		// does): keep it from being collected and reused until the reply.
		runtime.KeepAlive(query)
		if c.latency != nil {
			c.latency.Record(uint64(max(time.Since(sent).Milliseconds(), 0)))
		}
		v, err := c.readReply(status, size)
		c.noteOutcome(err)
		retry := false
		switch {
		case err == nil:
		case !bySource && strings.HasPrefix(err.Error(), "NOSCRIPT"):
			bySource, retry = true, true
		case clockRetry && RedisClock.Learn(err):
			clockRetry, retry = false, true
		}
		if !retry {
			done(v, err)
			return
		}
		if err := c.sendRetrying(encode, bySource, clockRetry, done); err != nil {
			done(resp.Value{}, err)
		}
	})
	if err != nil {
		c.breaker.Record(err, time.Now())
	}
	return err
}

// noteOutcome records a call's outcome in the breaker, and notes a
// refusal of keys in several slots (see CrossSlotRefused).
func (c *Client) noteOutcome(err error) {
	if !c.breaker.Quiet(err) {
		c.breaker.Record(err, time.Now())
	}
	if err != nil && strings.HasPrefix(err.Error(), "CROSSSLOT") {
		c.crossSlot = true
	}
}

// call sends a query to the gateway's Redis cluster; done gets the reply.
func (c *Client) call(query []byte, done func(resp.Value, error)) error {
	return c.dispatchQuery(query, func(status, size int) {
		runtime.KeepAlive(query) // as in sendRetrying
		done(c.readReply(status, size))
	})
}

// dispatchQuery hands a query to the gateway's Redis cluster; reply gets
// the host's answer.
func (c *Client) dispatchQuery(query []byte, reply func(status, size int)) error {
	if _, err := proxywasm.DispatchRedisCall(c.cluster, query, reply); err != nil {
		return fmt.Errorf("%w: dispatch to %s failed: %v", ErrUnavailable, c.cluster, err)
	}
	return nil
}

// VMCounterKey counts the plugin's VMs (see NumberVM): the one key the
// plugin keeps that belongs to no subject.
const VMCounterKey = "atrl:vms"

// vmNumberQuery increments VMCounterKey.
var vmNumberQuery = []byte("*2\r\n$4\r\nINCR\r\n$8\r\n" + VMCounterKey + "\r\n")

// NumberVM asks Redis for a number no other VM of the plugin on it got
// (INCR atrl:vms), for a VM's ids (the limiter mixes it into their
// prefix). done gets the number, or an error; when NumberVM itself returns
// an error, done is never called.
func (c *Client) NumberVM(done func(n int64, err error)) error {
	return c.dispatch(func(bool) []byte { return vmNumberQuery }, func(v resp.Value, err error) {
		if err == nil && (v.Type() != resp.Integer || v.Integer() <= 0) {
			err = fmt.Errorf("%w: INCR atrl:vms returned %s", ErrMalformed, describe(v))
		}
		if err != nil {
			done(0, err)
			return
		}
		done(int64(v.Integer()), nil)
	})
}

// probeQuery is the breaker's probe: a read of one key, which any Redis
// (or the node of its slot in a cluster) answers without a script.
var probeQuery = []byte("*2\r\n$6\r\nEXISTS\r\n$10\r\natrl:probe\r\n")

// Probe sends the breaker's probe when one is due (from the plugin's tick,
// whose calls are always answered); its answer closes the breaker.
func (c *Client) Probe(now time.Time) {
	if !c.breaker.ProbeDue(now) {
		return
	}
	if !c.ready {
		if err := c.Init(); err != nil {
			c.breaker.ProbeDone(err, now)
			return
		}
	}
	if err := c.call(probeQuery, func(_ resp.Value, err error) { c.breaker.ProbeDone(err, time.Now()) }); err != nil {
		c.breaker.ProbeDone(err, now)
	}
}

// readReply reads the reply of the call the gateway is answering now.
func (c *Client) readReply(status, size int) (resp.Value, error) {
	if status != 0 {
		return resp.Value{}, fmt.Errorf("%w: %w: call failed with status %d (no connection, reset, or timed out)", ErrUnavailable, ErrNoReply, status)
	}
	raw, err := proxywasm.GetRedisCallResponse(0, size)
	if err != nil {
		return resp.Value{}, fmt.Errorf("%w: %w: reading the reply: %v", ErrUnavailable, ErrNoReply, err)
	}
	if v, ok := c.flat.read(raw); ok {
		return v, nil
	}
	return ParseReply(raw, c.replies)
}

// flatReply reads what the scripts answer almost every call with, a flat
// array of integers, into an array of values it reuses: the RESP reader
// takes some twenty allocations for one. Anything else (an error, a bulk
// string, a nested array, a malformed reply) is left to the reader. The
// value is valid until the next reply: every caller reads it at once.
type flatReply struct{ vals []resp.Value }

// maxFlatReply bounds the integers of a flat reply read this way (a call
// about many subjects and windows, or with many crossings, goes to the
// RESP reader).
const maxFlatReply = 256

// read reads raw as "*<n>\r\n" followed by n integers ":<i>\r\n" and
// nothing else, exactly as the RESP reader reads it.
func (f *flatReply) read(raw []byte) (resp.Value, bool) {
	if len(raw) < 4 || raw[0] != '*' {
		return resp.Value{}, false
	}
	n, i, ok := readDecimal(raw, 1)
	if !ok || n < 0 || n > maxFlatReply {
		return resp.Value{}, false
	}
	f.vals = f.vals[:0]
	for range n {
		if i >= len(raw) || raw[i] != ':' {
			return resp.Value{}, false
		}
		var x int64
		if x, i, ok = readDecimal(raw, i+1); !ok {
			return resp.Value{}, false
		}
		f.vals = append(f.vals, resp.IntegerValue(int(x)))
	}
	if i != len(raw) {
		return resp.Value{}, false
	}
	return resp.ArrayValue(f.vals), true
}

// readDecimal reads an optionally negative decimal of at most 18 digits at
// raw[i:], followed by "\r\n", and returns it and the index after the line.
func readDecimal(raw []byte, i int) (int64, int, bool) {
	neg := i < len(raw) && raw[i] == '-'
	if neg {
		i++
	}
	start := i
	var x int64
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' && i-start < 18 {
		x = x*10 + int64(raw[i]-'0')
		i++
	}
	if i == start || i+1 >= len(raw) || raw[i] != '\r' || raw[i+1] != '\n' {
		return 0, i, false
	}
	if neg {
		x = -x
	}
	return x, i + 2, true
}

// ParseReply decodes one RESP reply. A Redis error reply becomes an error
// carrying Redis's message; bytes that are not RESP become ErrMalformed. br is
// a reader to reuse between calls (nil: one is made).
func ParseReply(raw []byte, br *bufio.Reader) (resp.Value, error) {
	if br == nil {
		br = bufio.NewReader(nil)
	}
	br.Reset(bytes.NewReader(raw))
	v, _, err := resp.NewReader(br).ReadValue()
	if err != nil || len(raw) == 0 || !isRESPType(raw[0]) {
		return resp.Value{}, fmt.Errorf("%w: %.64q", ErrMalformed, raw)
	}
	if v.Type() == resp.Error {
		return resp.Value{}, errors.New(v.String())
	}
	return v, nil
}

// isRESPType rejects what the resp reader would accept as an inline
// ("telnet") command: no Redis reply starts that way.
func isRESPType(b byte) bool {
	return b == '+' || b == '-' || b == ':' || b == '$' || b == '*'
}

// parseVerdict checks that a reply has the shape admit.lua returns for a
// call about n subjects.
func parseVerdict(v resp.Value, n int) (Verdict, error) {
	a := v.Array()
	if len(a) != verdictLen {
		return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	for _, e := range a {
		if e.Type() != resp.Integer {
			return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
		}
	}
	allowed, limit, remaining, reset, at, kind, wait, subject, window := a[0].Integer(), int64(a[1].Integer()), int64(a[2].Integer()), int64(a[3].Integer()), int64(a[4].Integer()), a[5].Integer(), int64(a[6].Integer()), a[7].Integer(), a[8].Integer()
	if n == 0 && allowed == 1 && limit == 0 && subject == 0 && at > 0 {
		// A candidate of AdmitFirst without subjects in the call's slot:
		// nothing here limits it.
		return Verdict{Allowed: true, At: at, Subject: -1, Window: -1}, nil
	}
	if allowed < 0 || allowed > 2 || limit <= 0 || remaining < 0 || reset < 0 || at <= 0 || kind < 0 || kind > int(KindUSD) || wait < 0 ||
		subject < 1 || subject > n || window < 0 || (window == 0) != (Kind(kind) == KindConcurrent) && allowed != 0 {
		return Verdict{}, fmt.Errorf("%w: admit returned %s", ErrMalformed, describe(v))
	}
	return Verdict{Allowed: allowed != 0, OverSoft: allowed == 2, Kind: Kind(kind), Limit: limit, Remaining: remaining, Reset: reset, At: at,
		WaitMs: wait, Subject: subject - 1, Window: window - 1}, nil
}

// describe renders a reply for an error message, briefly.
func describe(v resp.Value) string {
	s := v.String()
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%s %q", v.Type(), s)
}

// SubjectOf is the subject a match limits, under the rules: its Redis key
// (see package cachekey) and, for a per_model limit, the length of the
// suffix it adds to its parent's key; its windows and concurrency limit
// (all of those of the matches merged into it: see config.Shared).
func SubjectOf(rules *config.Config, m config.Match) Subject {
	dst := make([]byte, 0, 96)
	switch {
	case m.Unmatched:
		dst = cachekey.AppendSubject(dst, rules.RuleName, config.UnmatchedThreshold, "", "")
	case m.Item == nil:
		dst = cachekey.AppendSubject(dst, rules.RuleName, config.GlobalThreshold, "", "")
	default:
		dst = cachekey.AppendSubject(dst, rules.RuleName, m.Item.Type.String(), m.Item.Name, m.Value)
	}
	s := Subject{Windows: m.Windows(), Concurrent: m.MaxConcurrent(), SoftConcurrency: rules.Shadow, Secret: m.Secret()}
	switch {
	case rules.Shadow || m.Shared == nil && m.Key.Soft:
		s.SoftWindows = AllSoft
	case m.Shared != nil: // each window as soft as the key it is from
		for j := range s.Windows {
			if m.WindowFrom(j).Key.Soft {
				s.SoftWindows |= 1 << j
			}
		}
	}
	if m.Parent != nil { // a per_model limit: the subject together with the model, in its slot
		parent := len(dst)
		dst = cachekey.AppendModel(dst, m.Model)
		s.Suffix = len(dst) - parent // sent as a suffix of its parent's key (see Subject)
	}
	s.Key = dst
	return s
}
