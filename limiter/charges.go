package limiter

import (
	"errors"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// A charge is confirmed: the limiter waits for Redis's answer, retries a
// failed charge once and counts the charges that failed twice; one that
// gives back (a refund of unused reservation, a rollback, a cancel) is
// tried again for as long as Redis does not answer (see answered). The gateway
// delivers the answer to a call only while the context it was sent from
// lives, so:
//   - the charges of a response's last chunk are sent from its hook, and
//     the chunk (with the end of the stream) is held until they are
//     answered: at most redis.timeout, after which the gateway answers
//     the call with a failure itself;
//   - every other charge (a stream reset by either side, the rollback of
//     an admission another slot refused) and every retry is sent from the
//     plugin's tick, whose context lives as long as the plugin: within
//     100 ms, and its answer always comes.
// Each charge carries an id, so that a retry of a charge whose first try
// reached Redis but whose answer was lost is not counted twice.

// maxOutbox bounds the charges waiting for the tick, those that give back
// and wait for Redis to answer again among them: past it (Redis failing
// under a flood of ending requests), a charge fails at once.
const maxOutbox = 10000

// giveBackRetriesPerTick bounds the tries of charges that give back, whose
// last try got no answer, that a tick sends (the first tries are not
// counted), as catchUpPerTick bounds the catch-up's: Redis refusing
// connections fails each at once, and without a breaker
// (redis.breaker_failures 0) they would all go again every tick. A full
// outbox goes again in 10 s.
const giveBackRetriesPerTick = 100

// pendingCharge is one charge call of a request and how it is going.
type pendingCharge struct {
	r           *request
	subjects    []budget.Subject
	amounts     budget.Amounts
	spent       *budget.Amounts // the usage, when amounts are its difference with a reservation (nil: amounts are)
	at          int64
	id          string         // marks it applied in Redis (see charge.lua)
	cancel      string         // the marker of an admission it cancels instead (see admission.cancel)
	retried     bool           // this is its second try (of one that gives back: after an answer that was an error)
	again       bool           // it gives back, and a try got no answer: it is tried again (see giveBackRetriesPerTick)
	holds       bool           // its first try holds the response's last chunk until answered
	dropped     bool           // the stream ended before this try's answer: it went to the tick again (resendHolding)
	nextHolding *pendingCharge // the request's next charge the last chunk waits for (response.holding: a list, no allocation)
	ticked      bool           // this try was sent from the tick (startState.charging counts it)
}

// charge adds the amounts (negative: gives back) to every window of their
// kind of subjects, and releases the request's lease, if any: what is added goes to the buckets current now, what is
// given back to the buckets of time at (the admission's; 0: now). From the
// hook of the response's last chunk it goes out at once and holds that chunk
// until answered; otherwise it goes out from the next tick.
func (r *request) charge(subjects []budget.Subject, a budget.Amounts, at int64) {
	r.chargeSpent(subjects, a, nil, at)
}

// chargeSpent is charge, of the usage spent when the request had a
// reservation (a is then the difference; nil otherwise): budget alerts are
// decided on it, not on buckets that hold reservations too.
func (r *request) chargeSpent(subjects []budget.Subject, a budget.Amounts, spent *budget.Amounts, at int64) {
	if r.chargedLocally { // admitted by the local windows: charged there, and caught up later
		r.pc.local.Charge(subjects, a, at, time.Now().Unix(), true)
		return
	}
	c := &pendingCharge{r: r, subjects: subjects, amounts: a, spent: spent, at: at, id: r.pc.ids.newID()}
	if r.phase != phaseSettling { // only the hook of the response's end can hold it
		c.postpone()
		return
	}
	c.holds = true
	if err := c.send(); err != nil {
		c.holds = false
		c.answered(err)
		return
	}
	c.nextHolding, r.holding = r.holding, c
	holdLastChunk()
}

// resendHolding hands the charges whose answers the end of the response
// waits for to the tick, when the stream ends first (its client reset
// it): the gateway drops their answers with the stream, so whether they
// were applied, and which thresholds they took a bucket past, would be
// lost. Sent again under the same id, each is applied once, and answered
// with what its first try crossed (see charge.lua).
func (r *request) resendHolding() {
	for c := r.holding; c != nil; c = c.nextHolding {
		c.dropped = true // if its answer comes after all, it is ignored
		again := &pendingCharge{r: r, subjects: c.subjects, amounts: c.amounts, spent: c.spent, at: c.at, id: c.id, retried: true}
		again.postpone()
	}
	r.holding = nil
}

// send dispatches the charge call; reply gets its answer.
func (c *pendingCharge) send() error {
	r := c.r
	if c.cancel != "" {
		return r.pc.redis.Cancel(c.subjects, c.amounts, r.leaseID, c.cancel, c.reply)
	}
	return r.pc.redis.ChargeAlerting(c.subjects, c.amounts, c.spent, c.at, r.leaseID, c.id, func(crossed []budget.Crossing, err error) {
		r.pc.alertCrossings(r.matchesOf(c.subjects), c.subjects, crossed) // budget alerts: sent from the tick
		c.reply(err)
	})
}

// reply takes the answer to a try, and lets the last chunk the try held go
// once no other charge holds it.
func (c *pendingCharge) reply(err error) {
	if c.ticked {
		c.ticked = false
		c.r.pc.start.charging--
	}
	if c.dropped {
		return // sent again from the tick
	}
	if !c.holds {
		c.answered(err)
		return
	}
	r := c.r
	c.holds = false
	for p := &r.holding; *p != nil; p = &(*p).nextHolding {
		if *p == c {
			*p = c.nextHolding
			break
		}
	}
	c.answered(err)
	if r.holding == nil {
		_ = proxywasm.ResumeHttpResponse()
	}
}

// answered takes the answer to one try: a first failure is tried again
// from the tick, a second is logged and counted. A charge that gives back
// is tried again from the tick for as long as Redis does not answer (no
// reply, the breaker open: see sendPostponed), as the catch-up of the local
// windows is: dropped, what it gives back would stay taken in Redis until
// its window ends (a lease until it expires), which is every request's
// budget. It is bounded as every postponed charge is, by maxOutbox; an
// error reply is an answer, after which it is tried once more, as any
// charge.
func (c *pendingCharge) answered(err error) {
	switch {
	case err == nil:
	case c.givesBack() && errors.Is(err, scripts.ErrUnavailable):
		log.Debugf("giving back to %s failed, trying again once Redis answers: %v", c.subjects[0].LogName(), err)
		c.again = true
		c.postpone()
	case !c.retried:
		log.Debugf("charging %d tokens to %s failed, trying again: %v", c.amounts.Tokens, c.subjects[0].LogName(), err)
		c.retried = true
		c.postpone()
	case c.r.pc.local != nil && c.cancel == "":
		// failure_mode local: kept in the local windows, for the catch-up.
		log.Debugf("charging %d tokens to %s failed twice, kept for the catch-up: %v", c.amounts.Tokens, c.subjects[0].LogName(), err)
		c.r.pc.local.Charge(c.subjects, c.amounts, c.at, time.Now().Unix(), false)
	default:
		log.Warnf("charging %d tokens to %s failed twice: %v", c.amounts.Tokens, c.subjects[0].LogName(), err)
		c.r.pc.metrics.count(metricChargeFailure, "", c.r.servedModel())
	}
}

// givesBack says whether the charge gives anything back: a cancel, a
// rollback, or the refund of a reservation larger than the usage.
func (c *pendingCharge) givesBack() bool {
	return c.cancel != "" || c.amounts.Tokens < 0 || c.amounts.Requests < 0 || c.amounts.USD < 0
}

// postpone hands the charge to the plugin's tick.
func (c *pendingCharge) postpone() {
	start := c.r.pc.start
	if len(start.outbox) >= maxOutbox {
		c.retried = true // no second chance: count it now
		c.answered(errOutboxFull)
		return
	}
	start.outbox = append(start.outbox, c)
}

// sendPostponed sends the charges waiting for the tick, from the plugin's
// context; those that give back wait while their Redis's breaker is open
// (they would fail at once), and go once it has closed, at most
// giveBackRetriesPerTick of those tried before a tick.
func (s *startState) sendPostponed() {
	out := s.outbox
	s.outbox = nil
	var waiting []*pendingCharge
	retries := 0
	for _, c := range out {
		if c.givesBack() && (c.r.pc.redis.BreakerOpen() || c.again && retries >= giveBackRetriesPerTick) {
			waiting = append(waiting, c)
			continue
		}
		if c.again {
			retries++
		}
		s.charging++
		c.ticked = true
		if err := c.send(); err != nil {
			c.reply(err)
		}
	}
	if waiting != nil {
		s.outbox = append(waiting, s.outbox...)
	}
}
