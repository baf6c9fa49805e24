package limiter

import (
	"slices"
	"strings"
	"time"

	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// What operators see of the requests the limits do not stop: in
// shadow_mode, those a limit would have rejected; in any mode, those no rule
// item matched, which pass unlimited unless unmatched_threshold limits them.
// Each is counted on every request, and logged at most once every
// logEvery per configuration (and worker), with how many were not logged
// since: a busy route would otherwise write a line per request.

// logEvery is the least time between two lines of one rateLimitedLog.
const logEvery = 10 * time.Second

// rateLimitedLog lets one line through every logEvery, counting the others.
type rateLimitedLog struct {
	next       time.Time
	suppressed int
}

// allow says whether a line may be logged now and, if so, how many were
// not since the last one.
func (l *rateLimitedLog) allow() (bool, int) {
	now := time.Now()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.next, l.suppressed = now.Add(logEvery), 0
	return true, n
}

// shadowReject notes an admitted request that a closed limit would have
// rejected but for shadow_mode: counted, and logged (rate-limited) with
// the answer it would have had. A soft key's limits (soft: true) admit
// over their limit too, but are meant to: only shadow_mode reports them.
func (r *request) shadowReject() {
	g := r.shadowedBy
	if g == nil || !r.pc.rules.Shadow {
		return
	}
	r.pc.metrics.count(metricShadowRejected, requestHeader(consumerHeader), r.servedModel())
	r.pc.countByLevel(r.level, r.servedModel(), true)
	r.noteShadow(decisionShadowRejected, g)
	ok, more := r.pc.shadowLog.allow()
	if !ok {
		return
	}
	v := g.verdict
	waitMs := v.WaitMs
	if waitMs <= 0 {
		waitMs = max(v.Reset, 1) * 1000
	}
	log.Warnf("shadow_mode: rule %s would have answered %d: %s (%d more since the last line)",
		r.pc.rules.RuleName, r.pc.rules.RejectedCode, rejectionMessage(r.pc.rules.Priority, g, v, scopeOf(r.pc.rules, g, &v), waitMs), more)
}

// noteUnmatched counts a request that no rule item matched (matches is
// what it matched) and, when nothing limits it, warns (rate-limited), with
// what each item found in it: a header an SDK sends under another name
// leaves every call of that SDK unlimited, and uncharged.
func (pc PluginConfig) noteUnmatched(ctx wrapper.HttpContext, model string, matches []config.Match) {
	if len(pc.rules.Items) == 0 || slices.ContainsFunc(matches, func(m config.Match) bool { return m.Item != nil }) {
		return // a rule item matched (or there are none: the global threshold is all there is)
	}
	pc.metrics.count(metricUnmatched, requestHeader(consumerHeader), model)
	if len(matches) > 0 {
		return // global_threshold or unmatched_threshold limits it
	}
	ok, more := pc.unmatchedLog.allow()
	if !ok {
		return
	}
	log.Warnf("rule %s: a request to %s matched no rule item and passed unlimited (%d more since the last line); %s. "+
		"Check that clients send what the rule items read, or set unmatched_threshold to limit such requests",
		pc.rules.RuleName, pathOnly(ctx.Path()), more, pc.rules.DescribeUnmatched(modelRequest{hostRequest{ctx}, model}))
}

// pathOnly is a path for a log line: without its query, which may carry a
// credential, and at most maxLoggedPathBytes long.
func pathOnly(path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	return path[:min(len(path), maxLoggedPathBytes)]
}

// maxLoggedPathBytes bounds a path in a log line: it comes from the client.
const maxLoggedPathBytes = 256
