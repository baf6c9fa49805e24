package limiter

import (
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"
)

// admitted returns the state of a request whose usage is to be charged, or nil.
func admitted(ctx wrapper.HttpContext) *request {
	r, _ := ctx.GetContext(stateKey).(*request)
	if r == nil || !r.admitted {
		return nil
	}
	return r
}

// onResponseHeaders notes the status and adds the quota headers when asked
// to. Local replies (a rejection) pass here too: they are not admitted.
func onResponseHeaders(ctx wrapper.HttpContext, pc PluginConfig) types.Action {
	r := admitted(ctx)
	if r == nil {
		ctx.DontReadResponseBody()
		return types.ActionContinue
	}
	if status, err := proxywasm.GetHttpResponseHeader(":status"); err == nil {
		r.status, _ = strconv.Atoi(status)
	}
	if pc.rules.ShowLimitQuotaHeader {
		_ = proxywasm.AddHttpResponseHeader(HeaderLimit, strconv.FormatInt(r.verdict.Limit, 10))
		_ = proxywasm.AddHttpResponseHeader(HeaderRemaining, strconv.FormatInt(r.verdict.Remaining, 10))
		_ = proxywasm.AddHttpResponseHeader(HeaderReset, strconv.FormatInt(r.verdict.Reset, 10))
	}
	return types.ActionContinue
}

// onResponseBody reads the usage from each chunk as it streams; the chunk
// itself goes on unchanged and undelayed.
func onResponseBody(ctx wrapper.HttpContext, pc PluginConfig, chunk []byte, last bool) []byte {
	if r := admitted(ctx); r != nil {
		r.usage.Write(chunk)
		if last {
			r.lastChunk = true
			r.settle(true)
			r.lastChunk = false
		} else {
			r.renewLeases()
		}
	}
	return chunk
}

// onStreamDone settles a request that ended without a last body chunk: no
// body, or a stream reset by the client or the upstream. Its concurrency
// leases are released either way. A request still waiting in a queue (its
// client gave up) leaves it.
func onStreamDone(ctx wrapper.HttpContext, pc PluginConfig) {
	r, _ := ctx.GetContext(stateKey).(*request)
	if r == nil {
		return
	}
	r.gone = true
	r.leaveQueue()
	if r.admitted {
		r.settle(false) // a no-op when the last chunk settled it
	}
}

// settle charges what the request cost, once: the usage the response
// reported, in the configured cost, less what was reserved at admission.
// Without usage, an upstream error gives the reservation back, and anything
// else (an aborted stream) keeps it. A successful stream cut short pays at
// least its reservation, whatever usage it reported so far: that may be
// partial (Anthropic reports the input, and one output token, as it starts).
// complete says whether the response body reached its end.
func (r *request) settle(complete bool) {
	if r.settled {
		return
	}
	r.settled = true
	r.usage.Finish()
	cost := r.reserved
	failed := r.status >= 300 || r.status != 0 && r.status < 200
	if u, ok := r.usage.Usage(); ok {
		cost = r.pc.rules.Cost.Tokens(u.Input, u.Output, u.CacheRead, u.CacheCreation, r.model)
		if !complete && !failed {
			cost = max(cost, r.reserved)
		}
	} else if failed {
		cost = 0
		if debugEnabled() {
			log.Debugf("upstream answered %d without usage: giving back %d reserved tokens", r.status, r.reserved)
		}
	} else if r.reserved == 0 && debugEnabled() {
		log.Debug("no token usage reported: nothing to charge")
	}
	delta := cost - r.reserved
	for i := range r.groups {
		g := &r.groups[i]
		if (delta == 0 || !g.tokens) && !g.leases {
			continue // nothing to charge, nothing to release
		}
		at := int64(0) // not reserved: charge the windows current now
		if r.reserved > 0 {
			at = g.verdict.At // reconcile in the buckets of the reservation
		}
		r.charge(g.subjects, delta, 0, at)
	}
}
