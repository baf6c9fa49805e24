package limiter

import (
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
)

// Fallbacks (model_fallbacks). A request whose model has fallbacks is
// admitted as the first of its candidates (its own model, then each
// fallback, in order) whose limits all have room: each candidate is matched
// as a request for its model, so it has its own per-model limits, and
// reserves its own cost (its weights, its price), and admit.lua checks them
// in order in the one admission call (per slot on a Redis Cluster; when
// slots serve different candidates, every slot is asked again from the
// latest: see agree). A limit the candidates share with the same need
// rejects them all: a fallback never dodges a key's own limits. A request
// served as a fallback goes upstream naming it, in its body, its path and
// the model headers model_source reads, and is charged and priced as it.

// HeaderFallback names, on the response, the model a request was served as
// in place of the one it asked for.
const HeaderFallback = "X-TokenRateLimit-Fallback"

// fallbacks is what a request with candidates to serve instead of its model
// needs, until its admission is decided.
type fallbacks struct {
	candidates []candidate // the asked model, then its fallbacks
	first      int         // the first candidate its admission offers (after slots disagreed, see agree)
	// Where the upstream reads the model: the body's "model" string at
	// body[at:end] (end 0: the body names none), the path, headers.
	body      []byte
	at, end   int
	pathModel bool
	headers   []string
}

// candidate is a model a request may be served as, and what it reserves so.
type candidate struct {
	model string
	cost  budget.Amounts
}

// offerFallbacks gives a request whose body was read before admission the
// candidates it may be served as, when its model has fallbacks and the
// upstream can be told the one served: a body no parser reads otherwise
// (not ambiguous, not compressed) whose model can be rewritten in place, or
// a Gemini/Vertex path, or a model header. A route that names its model in
// a way no candidate can be put in (an Azure deployment) is never rewritten.
func (r *request) offerFallbacks(ctx wrapper.HttpContext, body []byte, e estimate.Estimate, cost budget.Amounts) {
	rules, asked := r.pc.rules, r.model.name
	models := rules.FallbacksOf(asked)
	if len(models) == 0 || len(r.model.others) > 0 || e.Ambiguous != "" || e.UnknownModel || r.coding != "" {
		return
	}
	f := &fallbacks{candidates: []candidate{{model: asked, cost: cost}}}
	if at, end, ok := estimate.ModelValue(body); ok {
		f.body, f.at, f.end = body, at, end
	}
	route := r.model.routeOf(rules, r.path)
	f.pathModel = route.Gemini
	if route.Addressed && !f.pathModel {
		return // a deployment's route: its upstream reads no model we can change
	}
	for _, s := range rules.ModelSources {
		if s.Kind == config.ModelFromHeader && requestHeader(s.Header) != "" {
			f.headers = append(f.headers, s.Header)
		}
	}
	if f.end == 0 && !f.pathModel && len(f.headers) == 0 {
		return // nowhere to name another model
	}
	perCandidate := [][]config.Match{r.admission.matchesOfGroups()}
	for _, m := range models {
		if m == asked {
			continue // a pattern's list may name the model itself
		}
		if f.pathModel {
			if _, ok := estimate.ReplacePathModel(r.path, m); !ok {
				continue // a name a path cannot carry
			}
		}
		c := candidate{model: m, cost: r.costAs(e, m)}
		matches := perCandidate[0]
		if r.pc.modelLimits {
			matches = r.pc.matchRequest(ctx, m, nil)
		} else if c.cost == cost {
			continue // the same limits, the same cost: it cannot fit where the model does not
		}
		f.candidates = append(f.candidates, c)
		perCandidate = append(perCandidate, matches)
	}
	if len(f.candidates) == 1 {
		return
	}
	r.fallback = f
	r.groups = groupCandidates(rules, perCandidate, r.pc.oneCall())
	r.admission.applyLevel(r.pc.rules, r.level)
}

// matchesOfGroups is the admission's matches, group by group (a per_model
// match still right after its parent's: they share a slot).
func (a *admission) matchesOfGroups() []config.Match {
	var out []config.Match
	for i := range a.groups {
		out = append(out, a.groups[i].matches...)
	}
	return out
}

// groupCandidates groups each candidate's subjects by slot (see
// groupBySlot), each group holding every candidate's subjects in its slot,
// the first candidate's as its own until an answer serves another.
func groupCandidates(rules *config.Config, perCandidate [][]config.Match, oneCall bool) []group {
	groups := make([]group, 0, 1)
	var inline [4]uint16 // as in groupBySlot
	slots := inline[:0]
	for c, matches := range perCandidate {
		for _, m := range matches {
			s := budget.SubjectOf(rules, m)
			var i int
			i, groups, slots = slotGroup(groups, slots, s, oneCall)
			g := &groups[i]
			if g.alternatives == nil {
				g.alternatives = make([]limits, len(perCandidate))
			}
			g.alternatives[c].add(s, m)
		}
	}
	for i := range groups {
		groups[i].limits = groups[i].alternatives[0]
	}
	return groups
}

// costAs is what a request so estimated reserves when served as model:
// its prompt as that model's family counts it (estimate.Estimate.PromptFor).
func (r *request) costAs(e estimate.Estimate, model string) budget.Amounts {
	if !r.pc.rules.Reservation.Enabled {
		return budget.Amounts{}
	}
	return r.costOfUsageAs(model, pricing.Tokens{Input: e.PromptFor(model), Output: e.Completion})
}

// serve makes an admitted request the candidate its groups served
// (admission.serve); served as a fallback, it is charged and counted as
// that model (servedAs), and the upstream is told it.
func (r *request) serve() {
	f, k := r.admission.serve()
	if k == 0 {
		return
	}
	asked := r.model.name
	r.servedAs = f.candidates[k].model
	r.pc.metrics.count(metricFallback, requestHeader(consumerHeader), asked)
	if debugEnabled() {
		log.Debugf("rule %s: %q has no room: served as %q", r.pc.rules.RuleName, asked, r.servedAs)
	}
	f.nameModel(r.path, r.servedAs)
}

// nameModel tells the upstream of a request whose path is path the model
// it is served as: in its body (its length updated), its path and its
// model headers.
func (f *fallbacks) nameModel(path, model string) {
	if f.end > 0 {
		body := estimate.SpliceModel(f.body, f.at, f.end, model)
		if err := proxywasm.ReplaceHttpRequestBody(body); err != nil {
			log.Warnf("serving %q in place of the model asked for: replacing the request body failed: %v", model, err)
		}
		if requestHeader("content-length") != "" {
			_ = proxywasm.ReplaceHttpRequestHeader("content-length", strconv.Itoa(len(body)))
		}
	}
	if f.pathModel {
		if path, ok := estimate.ReplacePathModel(path, model); ok {
			_ = proxywasm.ReplaceHttpRequestHeader(":path", path)
		}
	}
	for _, h := range f.headers {
		_ = proxywasm.ReplaceHttpRequestHeader(h, model)
	}
}

// shadowFallback logs, in shadow_mode, the model a request would have been
// served as had its limits been enforced (rate-limited with the shadow
// rejections' log); it reports whether it did (rather than a rejection).
func (r *request) shadowFallback() bool {
	f := r.fallback
	if f == nil || !r.pc.rules.Shadow || r.shadowedBy == nil || r.shadowedBy.alternatives == nil {
		return false
	}
	would := r.shadowedBy.verdict.WouldServe
	if would < 0 {
		return false
	}
	r.pc.metrics.count(metricShadowFallback, requestHeader(consumerHeader), r.model.name)
	r.noteShadow(decisionShadowFallback, r.shadowedBy)
	if ok, more := r.pc.shadowLog.allow(); ok {
		log.Warnf("shadow_mode: rule %s would have served %q in place of %q, whose limits have no room (%d more since the last line)",
			r.pc.rules.RuleName, f.candidates[f.first+would].model, r.model.name, more)
	}
	return true
}
