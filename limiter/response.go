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

// OnResponseHeaders adds the quota headers when asked to. Local replies (a
// rejection) pass here too: they are neither admitted nor charged.
func OnResponseHeaders(ctx wrapper.HttpContext, pc PluginConfig) types.Action {
	r := admitted(ctx)
	if r == nil {
		ctx.DontReadResponseBody()
		return types.ActionContinue
	}
	if pc.rules.ShowLimitQuotaHeader {
		_ = proxywasm.AddHttpResponseHeader(HeaderLimit, strconv.FormatInt(r.verdict.Limit, 10))
		_ = proxywasm.AddHttpResponseHeader(HeaderRemaining, strconv.FormatInt(r.verdict.Remaining, 10))
		_ = proxywasm.AddHttpResponseHeader(HeaderReset, strconv.FormatInt(r.verdict.Reset, 10))
	}
	return types.ActionContinue
}

// OnResponseBody reads the usage from each chunk as it streams; the chunk
// itself goes on unchanged and undelayed.
func OnResponseBody(ctx wrapper.HttpContext, pc PluginConfig, chunk []byte, last bool) []byte {
	if r := admitted(ctx); r != nil {
		r.usage.Write(chunk)
		if last {
			r.charge()
		}
	}
	return chunk
}

// OnStreamDone charges a request that ended without a last body chunk: no
// body, or a stream reset by the client or the upstream.
func OnStreamDone(ctx wrapper.HttpContext, pc PluginConfig) {
	if r := admitted(ctx); r != nil {
		r.charge()
	}
}

// charge adds the reported usage to every window of the subject, once.
func (r *request) charge() {
	if r.charged {
		return
	}
	r.charged = true
	r.usage.Finish()
	u, ok := r.usage.Usage()
	if !ok || u.Total() <= 0 {
		log.Debugf("no token usage reported for %s: nothing to charge", r.subject)
		return
	}
	metrics, subject := r.pc.metrics, r.subject
	err := r.pc.redis.Charge(subject, u.Total(), r.windows, func(err error) {
		if err != nil {
			log.Warnf("charging %d tokens to %s failed: %v", u.Total(), subject, err)
			metrics.count(metricChargeFailure, "")
		}
	})
	if err != nil {
		log.Warnf("charging %d tokens to %s failed: %v", u.Total(), subject, err)
		metrics.count(metricChargeFailure, "")
	}
}
