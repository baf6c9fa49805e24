package limiter

import (
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
	"github.com/tokenlimit/ai-token-ratelimit/tokenusage"
)

// onResponseHeaders notes the status and adds the quota headers when asked
// to, and decides whether the response is filtered (streams.go) and whether
// its body is read (bodies.go). Local replies (a rejection) pass here too:
// they are not admitted. The response of a request that asked for its
// usage is filtered even when the request is not charged (failure_mode
// allow): the client gets what it asked for.
func onResponseHeaders(ctx wrapper.HttpContext, pc PluginConfig) types.Action {
	r := currentRequest()
	if r == nil {
		return types.ActionContinue
	}
	if status := responseHeader(":status"); status != "" {
		r.status, _ = strconv.Atoi(status)
	}
	var encoding string // none: the wrapper read the headers, and says so without a host call
	if ctx.IsBinaryResponseBody() {
		encoding = responseHeader("content-encoding")
	}
	r.filterResponse(encoding)
	r.readResponse(encoding)
	if r.servedAs != "" {
		_ = proxywasm.AddHttpResponseHeader(HeaderFallback, r.servedAs)
	}
	if r.phase == phaseAdmitted && pc.rules.QuotaHeaders != 0 {
		var buf [12][2]string // every form: 3 + 6 + 2 headers
		for _, h := range r.admission.appendQuotaHeaders(r.pc.rules, buf[:0], r.verdict, false) {
			_ = proxywasm.AddHttpResponseHeader(h[0], h[1])
		}
	}
	return types.ActionContinue
}

// onStreamDone settles a request that ended without a last body chunk: no
// body, or a stream reset by the client or the upstream. Its concurrency
// leases are released either way. A request still waiting in a queue (its
// client gave up) leaves it; one whose admission Redis has not answered yet
// has it cancelled.
func onStreamDone(ctx wrapper.HttpContext, pc PluginConfig) {
	r := currentRequest()
	if r == nil {
		return
	}
	r.pc.queues.leave(r)
	r.admission.cancel(r)         // its answer may never come
	r.resendHolding()             // nor may the answers of the charges the last chunk waited for
	if r.phase == phaseAdmitted { // its response did not reach its end
		r.settle(false)
		r.phase.enter(phaseSettled)
	}
	r.phase.enter(phaseGone)
}

// settle charges what the request cost, once: the usage the response
// reported, in the configured cost, less what was reserved at admission.
// Without usage, an upstream error gives the reservation back; anything
// else (a provider or an answer that reports none, a stream cut before its
// usage, a body that cannot be read) is charged an estimate: the request's
// prompt estimate plus the output text the client received (see
// estimated). A successful stream cut short pays at least its reservation,
// whatever usage it reported so far: that may be partial (Anthropic reports
// the input, and one output token, as it starts). complete says whether the
// response body reached its end.
func (r *request) settle(complete bool) {
	var u tokenusage.Usage
	ok := false
	if r.usage != nil {
		r.usage.Finish()
		u, ok = r.usage.Usage()
	}
	var cost budget.Amounts
	how := settledReported
	failed := r.status >= 300 || r.status != 0 && r.status < 200
	if ok {
		cost = r.costOfUsage(u.Tokens())
		if !complete && !failed {
			cost = cost.AtLeast(r.reserved)
		}
	} else if failed {
		how = settledNothing
		if debugEnabled() {
			log.Debugf("upstream answered %d without usage: giving back %d reserved tokens, %d nanodollars", r.status, r.reserved.Tokens, r.reserved.USD)
		}
	} else {
		how = settledEstimated
		cost, u = r.estimated()
		if !complete {
			cost = cost.AtLeast(r.reserved)
		}
	}
	r.countSpend(how, u, cost, complete && !failed)
	r.compressed = nil // inflated by estimated, or not needed
	r.logSettled(u, ok, !ok && !failed, cost)
	delta := budget.Amounts{Tokens: cost.Tokens - r.reserved.Tokens, USD: cost.USD - r.reserved.USD}
	var spent *budget.Amounts // with a reservation, what the charge is of: alerts decide on it
	if r.reserved != (budget.Amounts{}) {
		spent = &budget.Amounts{Tokens: cost.Tokens, USD: cost.USD}
	}
	alertsOnly := spent != nil && r.pc.alerts != nil && *spent != budget.Amounts{} // the usage to alert on, if not to add
	for i := range r.groups {
		g := &r.groups[i]
		if (delta == budget.Amounts{} && !alertsOnly || !g.tokens && !g.usd) && !g.leases {
			continue // nothing to charge, nothing to release
		}
		// What the response used beyond its reservation goes to the windows
		// current now, where the next admission reads it, however long the
		// stream lasted; a refund goes back to the buckets the reservation
		// went into, those of the admission (charge.lua).
		at := int64(0) // nothing reserved: everything goes to the windows current now, which the script reads itself
		if r.reserved != (budget.Amounts{}) {
			at = g.verdict.At
		}
		r.chargeSpent(g.subjects, delta, spent, at)
	}
	r.releaseParser()
}

// estimated is the cost of a response that reported no usage: the prompt
// estimate of its request (from the body when the plugin read it, else
// from its declared size) and the bytes of output text the client received
// (the content, text and delta fields of the APIs tokenusage reads) at
// bytes_per_token (4 when it is not set); and those tokens, as the usage
// estimated (Input, Output).
func (r *request) estimated() (budget.Amounts, tokenusage.Usage) {
	opts := r.pc.rules.EstimateOptions
	bytesPerToken := opts.SizeBytesPerToken()
	text := int64(0) // no chunk read: no text
	if r.usage != nil {
		text = r.usage.TextBytes()
	}
	output := text/bytesPerToken + min(text%bytesPerToken, 1)
	if r.compressed != nil { // kept for this (keepCompressed)
		r.promptEstimate = estimate.PromptOfSize(r.inflatedSize(r.compressed, r.pc.rules.Reservation.MaxBodyBytes), opts)
		r.compressed = nil
	}
	if r.promptBySize { // the body's size was declared (or not): what passed counts, if more
		r.promptEstimate = max(r.promptEstimate, estimate.PromptOfSize(r.bodyBytes, opts))
	}
	cost := r.costOfUsage(pricing.Tokens{Input: r.promptEstimate, Output: output})
	if debugEnabled() {
		log.Debugf("no token usage reported: charging an estimate of %d prompt + %d output tokens (%d bytes of text): %d tokens, %d nanodollars",
			r.promptEstimate, output, text, cost.Tokens, cost.USD)
	}
	return cost, tokenusage.Usage{Input: r.promptEstimate, Output: output}
}
