package scripts

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
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
	// (budget.Verdict.ByKind): quota headers that show tokens and requests
	// apart.
	ByKind bool
	// OneServer says that one call may touch keys of any slot
	// (redis.cluster: false): a call that records a budget alert lists its
	// outbox in the alert index too (see alerts.lua).
	OneServer bool
	// AlertOwner is the configuration's config.AlertOwner, with
	// Thresholds: whose outboxes its calls write alerts to.
	AlertOwner string
}

// Admit asks whether one more request of the subjects (all in one Redis
// Cluster slot) may go, reserving cost.Tokens in every token window and
// cost.USD in every money window when it may (0: check only; never
// negative; more than estimate.MaxTokens tokens or MaxLimit nanodollars
// reserves that),
// counting it in every request window, and taking a lease named leaseID in
// every subject with a concurrency limit. markerID ("": none) names the
// admission so that Cancel can undo it. done gets the verdict, or an error
// when Redis could not give one; when Admit itself returns an error, done is
// never called.
func (c *Client) Admit(subjects []budget.Subject, cost budget.Amounts, leaseID, markerID string, done func(budget.Verdict, error)) error {
	encode := func(bySource bool) []byte { return c.encodeAdmit(subjects, cost, leaseID, markerID, bySource) }
	return c.dispatch(encode, func(v resp.Value, err error) {
		if err != nil {
			done(budget.Verdict{}, err)
			return
		}
		done(c.parseAdmit(v, subjects))
	})
}

// Charge settles a request in the subjects (all in one slot): it adds the
// amounts to every window of their kind, and releases the lease leaseID
// ("": none) where the subjects have a concurrency limit.
// What is added goes to the buckets current now, by Redis's clock; what is
// given back (negative amounts: a refund, a rollback) to the buckets of time
// at (a budget.Verdict's At, where the reservation went; 0: now). Amounts are
// taken within ±estimate.MaxTokens (nanodollars ±MaxLimit). chargeID ("": none) names the charge so
// that sending it again applies it once (see ChargeMarkerSeconds). done, if
// not nil, gets nil or the error; when Charge itself returns an error, done
// is never called.
func (c *Client) Charge(subjects []budget.Subject, a budget.Amounts, at int64, leaseID, chargeID string, done func(error)) error {
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
func (c *Client) Cancel(subjects []budget.Subject, a budget.Amounts, leaseID, markerID string, done func(error)) error {
	encode := func(bySource bool) []byte {
		return c.encodeCharge(subjects, a, 0, leaseID, "", markerID, bySource)
	}
	return c.dispatchCharge(subjects, true, false, encode, ignoreCrossings(done))
}

// dispatchCharge sends a call of charge.lua and checks its reply: a total
// per window, or nothing (maybeEmpty: a charge applied before, a cancel with
// nothing to undo); when alerting, the totals may be followed by crossings
// (see parseCharge).
func (c *Client) dispatchCharge(subjects []budget.Subject, maybeEmpty, alerting bool, encode func(bySource bool) []byte, done func([]budget.Crossing, error)) error {
	return c.dispatch(encode, func(v resp.Value, err error) {
		var crossed []budget.Crossing
		if err == nil {
			crossed, err = c.parseCharge(v, subjects, maybeEmpty, alerting)
		}
		if done != nil {
			done(crossed, err)
		}
	})
}

// Renew extends the lease leaseID in every subject with a concurrency limit
// (all in one slot), as long as it is still held. done, if not nil, gets nil
// or the error; when Renew itself returns an error, done is never called.
func (c *Client) Renew(subjects []budget.Subject, leaseID string, done func(error)) error {
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
