package limiter

import (
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
	"github.com/tokenlimit/ai-token-ratelimit/tokenusage"
)

// Response headers the limiter writes.
const (
	HeaderLimit      = "X-TokenRateLimit-Limit"
	HeaderRemaining  = "X-TokenRateLimit-Remaining"
	HeaderReset      = "X-TokenRateLimit-Reset"
	HeaderRetryAfter = "Retry-After"
)

const (
	stateKey          = "ai-token-ratelimit"
	consumerHeader    = "x-mse-consumer"
	unavailableStatus = 503
	unavailableBody   = "Token rate limit unavailable: the limiter could not reach its store, and failure_mode is deny"
)

// request is the limiter's state for one HTTP request that matched a rule.
type request struct {
	pc       PluginConfig
	subject  []byte          // the Redis key of the limited subject
	windows  []config.Window // the windows that limit it
	verdict  scripts.Verdict // Redis's answer, once admitted
	admitted bool            // passed the limit: its usage is to be charged
	charged  bool            // the charge was sent (or there was nothing to charge)
	usage    tokenusage.Parser
}

// OnRequestHeaders matches the request and, when a rule applies, pauses it
// until Redis says whether its subject has budget left.
func OnRequestHeaders(ctx wrapper.HttpContext, pc PluginConfig) types.Action {
	match, ok := pc.rules.Match(hostRequest{ctx})
	if !ok {
		ctx.DontReadResponseBody()
		return types.ActionContinue
	}
	r := &request{pc: pc, windows: match.Key.Windows}
	r.subject = subjectKey(pc.rules, match)
	ctx.SetContext(stateKey, r)
	log.Debugf("rule %s: %s matched limit key %q (%d windows); subject %s",
		pc.rules.RuleName, describeItem(match.Item), match.Key.Key, len(r.windows), r.subject)

	// The usage is read from the response body: ask the upstream for an
	// uncompressed one, or a compressed answer would never be charged.
	_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")

	err := pc.redis.Admit(r.subject, r.windows, func(v scripts.Verdict, err error) {
		r.decide(v, err)
	})
	if err != nil {
		// The call never left: decide now, without pausing.
		return r.fail(err, false)
	}
	return types.HeaderStopAllIterationAndWatermark
}

// subjectKey is the Redis key of the subject a match limits.
func subjectKey(rules *config.Config, m config.Match) []byte {
	dst := make([]byte, 0, 96)
	if m.Item == nil {
		return cachekey.AppendSubject(dst, rules.RuleName, "global_threshold", "", "")
	}
	return cachekey.AppendSubject(dst, rules.RuleName, m.Item.Type.String(), m.Item.Name, m.Value)
}

// describeItem names a rule item for logs: its type and what it reads.
func describeItem(item *config.RuleItem) string {
	if item == nil {
		return "global_threshold"
	}
	return item.Type.String() + " " + item.Raw
}

// decide acts on Redis's answer to a paused request.
func (r *request) decide(v scripts.Verdict, err error) {
	if err != nil {
		r.fail(err, true)
		return
	}
	if !v.Allowed {
		r.reject(v)
		return
	}
	r.verdict, r.admitted = v, true
	_ = proxywasm.ResumeHttpRequest()
}

// fail applies failure_mode when Redis could not decide: let the request go,
// or answer 503. paused says whether the request waits for this decision.
func (r *request) fail(err error, paused bool) types.Action {
	log.Warnf("token rate limit check failed for %s, failure_mode %s: %v", r.subject, r.pc.rules.FailureMode, err)
	r.pc.metrics.count(metricAdmitFailure, requestHeader(consumerHeader))
	if r.pc.rules.FailureMode == config.FailDeny {
		_ = proxywasm.SendHttpResponseWithDetail(unavailableStatus, "ai-token-ratelimit.unavailable",
			[][2]string{{"content-type", "text/plain; charset=utf-8"}}, []byte(unavailableBody), -1)
		return types.ActionPause
	}
	// allow: the request goes on unlimited and, not being admitted, uncharged
	// (the counters could not be trusted to take the charge either).
	if paused {
		_ = proxywasm.ResumeHttpRequest()
	}
	return types.ActionContinue
}

// reject answers rejected_code, telling the client when to come back.
func (r *request) reject(v scripts.Verdict) {
	rules := r.pc.rules
	log.Debugf("rule %s: %s used up (limit %d), rejected for %d s", rules.RuleName, r.subject, v.Limit, v.Reset)
	r.pc.metrics.count(metricRejected, requestHeader(consumerHeader))
	reset := strconv.FormatInt(max(v.Reset, 1), 10)
	headers := [][2]string{{HeaderReset, reset}, {HeaderRetryAfter, reset}, {"content-type", "text/plain; charset=utf-8"}}
	if rules.ShowLimitQuotaHeader {
		headers = append(headers, [2]string{HeaderLimit, strconv.FormatInt(v.Limit, 10)}, [2]string{HeaderRemaining, "0"})
	}
	_ = proxywasm.SendHttpResponseWithDetail(rules.RejectedCode, "ai-token-ratelimit.rejected", headers, []byte(rules.RejectedMsg), -1)
}

func requestHeader(name string) string {
	v, _ := proxywasm.GetHttpRequestHeader(name)
	return v
}

// hostRequest reads what the rules match on from the gateway.
type hostRequest struct{ ctx wrapper.HttpContext }

func (h hostRequest) Header(name string) string { return requestHeader(name) }
func (h hostRequest) Path() string              { return h.ctx.Path() }
func (h hostRequest) PeerAddress() string {
	v, err := proxywasm.GetProperty([]string{"source", "address"})
	if err != nil {
		return ""
	}
	return string(v)
}
