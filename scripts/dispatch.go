package scripts

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/tidwall/resp"
)

// Sending a call through the gateway, and sending it again when Redis asks:
// by source when it answers NOSCRIPT, with the bounds of its calendar
// windows worked out anew when it answers ATRL_TIME (see Clock).

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
