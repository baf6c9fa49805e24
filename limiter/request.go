package limiter

import (
	"errors"
	"slices"
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
	"github.com/tokenlimit/ai-token-ratelimit/streamusage"
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
	consumerHeader    = "x-mse-consumer"
	unavailableStatus = 503
	unavailableBody   = "Token rate limit unavailable: the limiter could not reach its store, and failure_mode is deny"
	concurrencyMsg    = "Too many concurrent requests: the number of requests in progress at once is limited to "
)

// request is the limiter's state for one HTTP request that rules apply to,
// or may apply to once its body is read (a model limit whose model the body
// names: it is matched then, in phase matching): where it is in its life
// (its phase, phase.go), then its data, by concern.
type request struct {
	pc    PluginConfig
	phase phase

	matched     // what it matched, as which model and level
	admission   // its admission: its groups' calls to Redis and their answers (admission.go)
	requestBody // what is read of its body
	waiting     // queueing (over_limit_action: queue, queue.go)
	response    // reading its response, and charging it
	streamUsage // stream_usage: inject (streams.go)
	accessLog   // what its access log names (accesslog.go)
}

// matched is what a request matched.
type matched struct {
	path string
	// routedPath is path as the upstream's router reads it
	// (config.CanonicalPath), which says whether it is a completions path
	// ("/v1/chat/%63ompletions" is): worked out once, where stream_usage
	// may ask for the usage (a canonical path, the common case, is path
	// itself, with no copy).
	routedPath string
	model      requestModel // the model the request names, resolved once (models.go)
	servedAs   string       // the model it is served as in place of the one it names, admitted as a fallback ("": its own)
	level      int          // its priority level (config.Priority; 0 without)
}

// requestBody is what the limiter reads of a request's body.
type requestBody struct {
	coding         string // the body's content coding, decompressed to be read ("": none)
	promptEstimate int64  // the prompt's estimated tokens, for a response without usage
	// compressed is a compressed body read only for its decompressed size,
	// kept until a response without usage needs it (estimated), which
	// inflates it then (nil: none, or inflated already).
	compressed    []byte
	promptBySize  bool  // promptEstimate is the body's declared size: the bytes that pass count at the end
	bodyBytes     int64 // the body's bytes that passed on unread (see promptBySize)
	bufferedBytes int64 // the body's bytes the host buffered while the admission waited (they pass with resume)
	// readDuringAdmission says the body is read while its admission goes
	// on (to ask the stream for its usage, or for its decompressed size),
	// until it ends; in phases matching and reading, the body is read
	// before.
	readDuringAdmission bool
}

// waiting is what queueing keeps of a request.
type waiting struct {
	httpCtx  wrapper.HttpContext // its HTTP context (nil: it cannot queue)
	ctxID    uint32              // the host's id of its HTTP context, to act on it from the tick or a call's answer
	giveUpAt uint64              // the tick at which it stops waiting
	queue    *waitLine           // the line it waits in, if any
}

// response is what the limiter keeps of a request's response.
type response struct {
	status        int                // the upstream's response status, 0 before response headers
	readsResponse bool               // its body is read (bodies.go): decided at its headers
	usage         *tokenusage.Parser // reads its usage while admitted (nil until its first chunk; back to the pool once settled: parsers.go)
	holding       *pendingCharge     // the charges whose answers the response's last chunk waits for, holding it (a list: pendingCharge.nextHolding)
}

// streamUsage is stream_usage: inject's part of a request (streams.go).
type streamUsage struct {
	mayInject bool                // its body is read, to be rewritten to ask for the stream's usage should it not
	injected  bool                // its body was rewritten to ask for it
	filter    *streamusage.Filter // takes the usage-only chunk out of its response (nil: the response passes as it came)
}

// readsBody says whether the limiter reads the request's body (and waits
// for its end).
func (r *request) readsBody() bool {
	return r.phase == phaseMatching || r.phase == phaseReading || r.readDuringAdmission
}

// group is the subjects admitted in one call: those of one Redis Cluster
// slot, or every subject of the request when one Redis holds them all
// (see PluginConfig.oneCall).
type group struct {
	limits                  // the subjects it limits by: with fallbacks, those of the candidate served
	verdict  budget.Verdict // its answer; At is the time its buckets were taken at
	answered bool           // got a verdict (allowed or not)
	marker   string         // names its admission call in Redis, to cancel it ("": it takes nothing)
	canceled bool           // its admission was cancelled: a late answer is ignored
	// With model_fallbacks (fallback.go): each candidate's subjects in this
	// slot, the asked model's first (nil: none), and the candidate its
	// answer is about.
	alternatives []limits
	served       int
}

// limits are subjects of one call, with what the call does in them.
type limits struct {
	subjects []budget.Subject
	matches  []config.Match // the match of each subject, in the same order
	tokens   bool           // some subject has a token window: usage is charged to it
	usd      bool           // some subject has a money window: what the usage costs is charged to it
	requests bool           // some subject has a request window: admission counts in it
	leases   bool           // some subject limits concurrency: admission takes a lease
}

// add appends a match's subject.
func (l *limits) add(s budget.Subject, m config.Match) {
	l.subjects = append(l.subjects, s)
	l.matches = append(l.matches, m)
	l.leases = l.leases || s.Concurrent > 0
	for _, w := range s.Windows {
		l.requests = l.requests || w.Unit == config.UnitRequests
		l.tokens = l.tokens || w.Unit == config.UnitTokens
		l.usd = l.usd || w.Unit == config.UnitUSD
	}
}

// onRequestHeaders matches the request and, when rules apply, pauses it
// until Redis says whether every subject has budget left. It first waits
// for the body (bodies.go) when the body decides what the request is
// limited or charged as (needsBody): a model limit whose model the body
// names (it is matched then: models.go), token_reservation (its cost is
// estimated from the body), per-model weights or prices (what it costs
// depends on its model), model_fallbacks (the candidates it may be served
// as: fallback.go). A streaming OpenAI request may have its body read to
// ask for its usage (streams.go), which does not delay admission.
func onRequestHeaders(ctx wrapper.HttpContext, pc PluginConfig) types.Action {
	if pc.rules.QuotaPath != "" || pc.rules.Admin != nil {
		if action, ok := pc.serveEndpoint(ctx); ok {
			return action
		}
	}
	var size int64 // unknown, or none: 0
	length := requestHeader("content-length")
	if length != "" {
		size, _ = strconv.ParseInt(length, 10, 64) // (an absent one would cost a parse error)
	}
	coding, readable := bodyCoding(ctx)
	var model requestModel
	if pc.modelLimits {
		if pc.resolveModel(ctx, &model, ctx.Path(), nil, readable) {
			// The model is in the body, and decides which limits apply:
			// the request is matched once its body has come (bodyEnded).
			r := newRequest(pc, ctx, coding, model)
			setCurrentRequest(r)
			r.prepare(ctx, readable, size, length != "")
			r.phase.enter(phaseMatching)
			return types.HeaderStopIteration
		}
		if model.unread && pc.rules.AmbiguousBody == config.AmbiguousReject {
			pc.metrics.count(metricAmbiguous, requestHeader(consumerHeader), "")
			return rejectAmbiguous(pc, unreadableCoding)
		}
	}
	matches := pc.matchRequest(ctx, model.name, nil)
	pc.noteUnmatched(ctx, model.name, matches)
	if len(matches) == 0 {
		return types.ActionContinue
	}
	if pc.rules.CompressedBody == config.CompressedReject && undecodable(ctx, readable) {
		return rejectCompressed()
	}
	r := newRequest(pc, ctx, coding, model)
	setCurrentRequest(r)
	r.limitBy(ctx, matches)
	r.prepare(ctx, readable, size, length != "")

	if !pc.needsBody() {
		// Unread, the prompt is estimated by the body's declared size (one
		// in a coding the limiter does not decode, at the bound: see
		// unreadSize), and by the bytes that pass once they have (read to
		// ask for the usage, by its size; compressed, by its decompressed
		// size, where a response without usage would be charged it: see
		// bodyEnded). Admission does not wait for the body.
		r.readDuringAdmission = r.mayInject || r.coding != "" && r.chargesUsage()
		if undecodable(ctx, readable) {
			size, _ = unreadSize(size, pc.rules.Reservation.MaxBodyBytes)
		}
		r.promptEstimate = estimate.PromptOfSize(size, pc.rules.EstimateOptions)
		r.promptBySize = true
		return r.admit(budget.Amounts{})
	}
	if !ctx.HasRequestBody() {
		e := estimate.Size(0, pc.rules.EstimateOptions)
		r.modelOfBody(ctx, &e)
		return r.admit(r.cost(e))
	}
	if !readable {
		e := pc.unreadBody(&r.model, r.path, size)
		if e.Ambiguous != "" {
			if action, rejected := r.pc.ambiguous(e, r.servedModel()); rejected {
				return action
			}
		}
		r.promptBySize = true
		r.modelOfBody(ctx, &e)
		return r.admit(r.cost(e))
	}
	// Wait for the whole body (bodyEnded) before asking Redis.
	r.phase.enter(phaseReading)
	return types.HeaderStopIteration
}

// newRequest is a request whose headers matched a rule (or whose body may
// make it match one), in phase new, its body in content coding coding, its
// model as its headers resolved it (with model limits).
func newRequest(pc PluginConfig, ctx wrapper.HttpContext, coding string, model requestModel) *request {
	r := &request{pc: pc}
	r.path, r.ctxID, r.coding, r.model = ctx.Path(), currentContextID(), coding, model
	return r
}

// levelReading is the request whose level limitBy reads, the VM's (its
// hooks run one at a time): passed by address, it costs no allocation.
var levelReading modelRequest

// limitBy makes the request one that the matched limits apply to: its
// subjects grouped by slot, its level (as its model, with model limits).
func (r *request) limitBy(ctx wrapper.HttpContext, matches []config.Match) {
	pc := r.pc
	r.groups = groupBySlot(pc.rules, matches, pc.oneCall())
	if p := pc.rules.Priority; p != nil {
		header := config.NoLevel
		if p.Header != "" { // every line of it: the lowest level holds
			hostHeaderValues(requestHeaders, p.Header, func(line string) { header = p.HeaderLevel(header, line) })
		}
		levelReading = modelRequest{hostRequest{ctx}, ""}
		if pc.modelLimits {
			levelReading.model = r.model.name
		}
		r.level = pc.rules.LevelOf(&levelReading, r.model.others, matches, header)
		levelReading = modelRequest{}
		r.admission.applyLevel(pc.rules, r.level)
	}
	pc.queues.enterQueueing(r, ctx)
	for i := 0; i < len(matches) && debugEnabled(); i++ {
		m := matches[i]
		if m.Model == "" {
			log.Debugf("rule %s: %s matched limit key %q (%d windows)", pc.rules.RuleName, describeItem(m), m.ShownKey(m.Key), len(m.Windows()))
		} else {
			log.Debugf("rule %s: %s matched limit key %q for model %q (%d windows)", pc.rules.RuleName, describeItem(m), m.ShownKey(m.Key), m.Model, len(m.Windows()))
		}
	}
}

// prepare readies a request that is or may be limited, at its headers: its
// response is to come uncompressed, and its body may be read to ask a
// stream for its usage. declared says it has a Content-Length, of
// declaredSize.
func (r *request) prepare(ctx wrapper.HttpContext, readable bool, declaredSize int64, declared bool) {
	// The usage is read from the response body: ask the upstream for an
	// uncompressed one, or a compressed answer would never be charged.
	_ = proxywasm.RemoveHttpRequestHeader("accept-encoding")
	r.mayInject = readable && r.coding == "" && r.mayAskForUsage(ctx, declaredSize, declared)
}

// needsBody says whether requests are read before admission: to estimate
// their cost (token_reservation), or to know their model for per-model
// weights or prices, or for model_fallbacks. (A model limit's body source
// is read before matching: see resolveModel.)
func (pc PluginConfig) needsBody() bool {
	return pc.rules.Reservation.Enabled || len(pc.rules.Cost.ModelWeights) > 0 || pc.pricesByModel || len(pc.rules.Fallbacks) > 0
}

// modelOfBody resolves, without model limits, the model of a request whose
// body is estimated (e): the route's, else the body's (with model limits,
// model_source resolved it to match the request); and counts e's prompt as
// that model's family does (estimate.Estimate.PromptFor).
func (r *request) modelOfBody(ctx wrapper.HttpContext, e *estimate.Estimate) {
	if !r.pc.modelLimits {
		r.pc.resolveModel(ctx, &r.model, r.path, e, false)
	}
	if r.model.name != e.Model { // (the body's model's count is the estimate's)
		e.Prompt = e.PromptFor(r.model.name)
	}
}

// cost is what to reserve for a request so estimated, as its model, in the
// configured cost (0 without token_reservation).
func (r *request) cost(e estimate.Estimate) budget.Amounts {
	r.promptEstimate = e.Prompt
	if !r.pc.rules.Reservation.Enabled {
		return budget.Amounts{}
	}
	cost := r.costOfUsage(pricing.Tokens{Input: e.Prompt, Output: e.Completion})
	if debugEnabled() {
		log.Debugf("estimated %d prompt + %d completion tokens (model %q): reserving %d tokens, %d nanodollars",
			e.Prompt, e.Completion, r.model.name, cost.Tokens, cost.USD)
	}
	return cost
}

// oneCall says whether a request's subjects go to Redis in one call each
// way, whatever their Redis Cluster slots: the configuration says one Redis
// server holds every key (redis.cluster: false), and Redis has not refused
// a call for keys in several slots (then it is a cluster after all, and
// every request limited from then on makes one call per slot).
func (pc PluginConfig) oneCall() bool {
	return !pc.rules.Redis.Cluster && !pc.redis.CrossSlotRefused()
}

// groupBySlot builds each match's subject and groups them by Redis Cluster
// slot, in order of first appearance; with oneCall, all in one group, in
// the matches' order (a per_model subject still follows its parent, so is
// still sent as a suffix of its key: see budget.Subject).
func groupBySlot(rules *config.Config, matches []config.Match, oneCall bool) []group {
	oneCall = oneCall || len(matches) == 1 // one subject: one group, whatever its slot (no hash of its key)
	groups := make([]group, 0, 1)
	var inline [4]uint16 // the groups' slots, on the stack for a few groups
	slots := inline[:0]
	for _, m := range matches {
		s := budget.SubjectOf(rules, m)
		var i int
		i, groups, slots = slotGroup(groups, slots, s, oneCall)
		groups[i].add(s, m)
	}
	return groups
}

// slotGroup returns the index of the group of subject s's slot (the one
// group with oneCall) among groups, whose slots are slots, appending it
// (and its slot) when it is new; and the groups and slots so extended.
func slotGroup(groups []group, slots []uint16, s budget.Subject, oneCall bool) (int, []group, []uint16) {
	slot := uint16(0) // one group
	if !oneCall {
		slot = cachekey.Slot(s.Key)
	}
	if i := slices.Index(slots, slot); i >= 0 {
		return i, groups, slots
	}
	return len(groups), append(groups, group{}), append(slots, slot)
}

// describeItem names what a match limits by, for logs: its rule item's type
// and what it reads, or the threshold.
func describeItem(m config.Match) string {
	switch {
	case m.Unmatched:
		return "unmatched_threshold"
	case m.Item == nil:
		return "global_threshold"
	}
	return m.Item.Describe()
}

// admit sends the request's admission (admission.send), reserving cost
// tokens in every window (0: check only), unless it waits behind others
// for the same subjects, or for the VM's number. It returns what the
// calling hook returns: pause until every group answers, or go on when it
// was decided at once.
func (r *request) admit(cost budget.Amounts) types.Action {
	// Sent from its own hooks, or from the answer to its call for the VM's
	// number (which comes with its stream), its calls' answers go with its
	// stream.
	fromStream := current != nil || r.phase == phaseNumbering
	r.phase.enter(phaseDispatching)
	r.admission.begin(cost)
	if line := r.pc.queues.lineAhead(r); line != nil && r.pc.queues.join(r, line) != nil {
		r.phase.enter(phaseQueued)
		return types.HeaderStopAllIterationAndWatermark // others wait for the same subjects: it waits behind them
	}
	if r.pc.ids.waits() && current != nil && r.awaitNumber() {
		return types.HeaderStopAllIterationAndWatermark // its ids wait for the VM's number (ids.go)
	}
	r.admission.send(r.pc, fromStream, r)
	switch r.phase {
	case phaseDispatching: // its answers are to come
		r.phase.enter(phaseAdmitting)
		return types.HeaderStopAllIterationAndWatermark
	case phaseQueued:
		return types.HeaderStopAllIterationAndWatermark
	case phaseAdmitted, phasePassed: // decided at once
		return types.ActionContinue
	}
	return types.ActionPause // answered locally
}

// answered takes one group's answer to the request's admission (see
// admissionOwner); the last one decides.
func (r *request) answered(g *group, v budget.Verdict, err error) {
	if r.admission.answer(r.pc, r, &r.accessLog, g, v, err) {
		r.decide()
	}
}

// cancelCall cancels an admission call of the request from the tick (see
// admissionOwner).
func (r *request) cancelCall(subjects []budget.Subject, amounts budget.Amounts, marker string) {
	c := &pendingCharge{r: r, subjects: subjects, amounts: amounts, cancel: marker}
	c.postpone()
}

// decide acts on the admission's outcome once every group has answered:
// admits the request, rejects it, applies failure_mode, or (queueing) lets
// it wait.
func (r *request) decide() {
	a := &r.admission
	if r.phase == phaseGone { // a retry answered after the client left: undo what it took
		a.rollBack(r)
		return
	}
	out := a.outcome()
	if out == outcomeAdmitted && !a.agree(r) {
		r.admit(a.fallback.candidates[0].cost) // slots served different candidates: asked again
		return
	}
	if out != outcomeAdmitted {
		a.rollBack(r)
	}
	if out == outcomeRejected && r.pc.queues.wait(r, *a.rejected, a.rejectedScope(r.pc.rules)) {
		r.phase.enter(phaseQueued)
		return
	}
	line := r.queue
	r.pc.queues.leave(r)
	pumped := line != nil && r.phase != phaseDispatching
	if pumped {
		line.pump(r.pc.queues.tick) // the next in line may fit now (first: see actOnItsContext)
	}
	if pumped || !a.sentFromStream {
		// Sent from its own hooks, the admission is answered with the host
		// pointed at its stream already (the SDK does it before a call's
		// callback, as a gateway does within a hook): one host call less.
		r.actOnItsContext()
	}
	switch {
	case out == outcomeFailed && r.pc.local != nil:
		r.pc.noteFailure(a.failure, r.servedModel())
		a.askedLimits()
		r.pc.metrics.count(metricDecidedLocally, requestHeader(consumerHeader), r.servedModel())
		if a.decideLocally(r.pc.local, &r.accessLog) == outcomeRejected {
			r.reject(*a.rejected, a.rejectedScope(r.pc.rules))
			return
		}
		r.shadowReject()
		r.letThrough(phaseAdmitted)
	case out == outcomeFailed:
		r.fail(a.failure)
	case out == outcomeRejected:
		r.reject(*a.rejected, a.rejectedScope(r.pc.rules))
	default:
		if !r.shadowFallback() {
			r.shadowReject()
		}
		r.serve()
		r.pc.start.holdLeases(r)
		r.letThrough(phaseAdmitted)
	}
}

// letThrough moves a request Redis (or the local windows, or failure_mode
// allow) let through to phase p (admitted, passed), and resumes it:
// outside the hook dispatching its admission, which returns the action
// itself.
func (r *request) letThrough(p phase) {
	dispatching := r.phase == phaseDispatching
	r.phase.enter(p)
	if !dispatching {
		r.resume()
	}
}

// fail applies failure_mode when Redis could not decide: let the request go,
// or answer 503.
func (r *request) fail(err error) {
	r.pc.noteFailure(err, r.servedModel())
	r.logFailed(r.pc.rules.FailureMode == config.FailDeny)
	if r.pc.rules.FailureMode == config.FailDeny {
		r.phase.enter(phaseRejected)
		_ = proxywasm.SendHttpResponseWithDetail(unavailableStatus, "ai-token-ratelimit.unavailable",
			[][2]string{{"content-type", "text/plain; charset=utf-8"}}, []byte(unavailableBody), -1)
		return
	}
	// allow: the request goes on unlimited and, not being admitted, uncharged
	// (the counters could not be trusted to take the charge either).
	r.letThrough(phasePassed)
}

// resume lets the paused request go on, with the body chunks the host
// buffered while it waited: they pass now, and count among the bytes that
// passed (bodyBytes). The host gives the chunks that come later alone.
func (r *request) resume() {
	r.bodyBytes += r.bufferedBytes
	r.bufferedBytes = 0
	_ = proxywasm.ResumeHttpRequest()
}

// noteFailure logs and counts an admission (of a request for model) Redis
// could not decide.
func (pc PluginConfig) noteFailure(err error, model string) {
	if errors.Is(err, scripts.ErrBreakerOpen) {
		// The breaker logged its opening once; not a line per request.
		if debugEnabled() {
			log.Debugf("token rate limit not checked, failure_mode %s: %v", pc.rules.FailureMode, err)
		}
	} else {
		log.Warnf("token rate limit check failed, failure_mode %s: %v", pc.rules.FailureMode, err)
	}
	pc.metrics.count(metricAdmitFailure, requestHeader(consumerHeader), model)
}

// requestHeader returns a request header's value ("" when absent).
func requestHeader(name string) string { return hostHeader(requestHeaders, name) }

// hostRequest reads what the rules match on from the gateway.
type hostRequest struct{ ctx wrapper.HttpContext }

func (h hostRequest) Header(name string) string { return requestHeader(name) }
func (h hostRequest) Path() string              { return h.ctx.Path() }

// Model is "": a configuration with model limits matches a modelRequest.
func (h hostRequest) Model() string { return "" }

func (h hostRequest) PeerAddress() string {
	v, err := proxywasm.GetProperty([]string{"source", "address"})
	if err != nil {
		return ""
	}
	return string(v)
}
