package limiter

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
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
	admission   // what its admission asked of Redis, and the answers
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
	groups     []group      // the matched subjects, by Redis Cluster slot (or all in one: see oneCall): one call each
	model      requestModel // the model the request names, resolved once (models.go)
	fallback   *fallbacks   // the candidates it may be served as, until admitted (fallback.go; nil: none)
	servedAs   string       // the model it is served as in place of the one it names, admitted as a fallback ("": its own)
	level      int          // its priority level (config.Priority; 0 without)
}

// admission is what a request's admission asked of Redis, and the answers.
type admission struct {
	reserved budget.Amounts // tokens and nanodollars reserved in every window at admission (0: none)
	leaseID  string         // the concurrency lease it takes ("": no subject limits concurrency)
	renewed  time.Time      // when its leases were last taken or renewed
	pending  int            // admission calls not answered yet
	// sentFromStream says the pending admission calls were sent from the
	// request's own hooks (not the tick): their answers go with its stream.
	sentFromStream bool
	failure        error                          // the first admission call that failed
	rejected       *budget.Verdict                // the closed window that resets last, if any
	rejectedBy     *group                         // the group it belongs to
	verdict        budget.Verdict                 // the tightest open window, once admitted
	shadowedBy     *group                         // a group that admitted it only because its closed limits are soft (shadow_mode)
	byKind         *[budget.KindUSD + 1]kindQuota // the tightest window of each kind (quota headers, quotaheaders.go)
	// chargedLocally says the local windows admitted it (failure_mode
	// local): its usage is charged there.
	chargedLocally bool
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
	held          *pendingCharge     // the charges the last chunk waits for (a list: pendingCharge.nextHeld)
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
			r.enter(phaseMatching)
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
		e := r.unreadBody(size)
		if e.Ambiguous != "" {
			if action, rejected := r.ambiguous(ctx, e); rejected {
				return action
			}
		}
		r.promptBySize = true
		r.modelOfBody(ctx, &e)
		return r.admit(r.cost(e))
	}
	// Wait for the whole body (bodyEnded) before asking Redis.
	r.enter(phaseReading)
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
		r.applyLevel()
	}
	r.enterQueueing(ctx)
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

// chargesUsage says whether a subject of the request is charged what it
// used (it has a token or a money window): a response without usage is
// then charged an estimate (estimated).
func (r *request) chargesUsage() bool {
	for i := range r.groups {
		if r.groups[i].tokens || r.groups[i].usd {
			return true
		}
	}
	return false
}

// modelOfBody resolves, without model limits, the model of a request whose
// body is estimated (e): the route's, else the body's (with model limits,
// model_source resolved it to match the request).
func (r *request) modelOfBody(ctx wrapper.HttpContext, e *estimate.Estimate) {
	if !r.pc.modelLimits {
		r.pc.resolveModel(ctx, &r.model, r.path, e, false)
	}
}

// cost is what to reserve for a request so estimated, as its model, in the
// configured cost (0 without token_reservation).
func (r *request) cost(e estimate.Estimate) budget.Amounts {
	r.promptEstimate = e.Prompt
	if !r.pc.rules.Reservation.Enabled {
		return budget.Amounts{}
	}
	cost := r.costOfUsage(e.Prompt, e.Completion, 0, 0)
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

// applyLevel gives every subject of the request (every candidate's, with
// fallbacks) its priority level, and the share of its concurrency limit open
// to it.
func (r *request) applyLevel() {
	if r.pc.rules.Priority == nil {
		return
	}
	apply := func(l *limits) {
		for i := range l.subjects {
			s := &l.subjects[i]
			s.Level = r.level
			if s.Concurrent > 0 {
				s.ConcurrentOpen = l.matches[i].ConcurrentOpen(r.level)
			}
		}
	}
	for i := range r.groups {
		g := &r.groups[i]
		apply(&g.limits)
		for j := range g.alternatives {
			apply(&g.alternatives[j])
		}
	}
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

// admit sends one admission call per group, reserving cost tokens in
// every window (0: check only). It returns what the calling hook returns:
// pause until every group answers, or go on when it was decided at once.
func (r *request) admit(cost budget.Amounts) types.Action {
	// Sent from its own hooks, or from the answer to its call for the VM's
	// number (which comes with its stream), its calls' answers go with its
	// stream.
	fromStream := current != nil || r.phase == phaseNumbering
	r.enter(phaseDispatching)
	r.reserved = cost
	if line := r.lineAhead(); line != nil && r.join(line) != nil {
		r.enter(phaseQueued)
		return types.HeaderStopAllIterationAndWatermark // others wait for the same subjects: it waits behind them
	}
	ids := r.pc.ids
	if ids.waits() && current != nil && r.awaitNumber() {
		return types.HeaderStopAllIterationAndWatermark // its ids wait for the VM's number (ids.go)
	}
	if r.leaseID == "" && r.takesLeases() {
		r.leaseID = ids.newID()
	}
	r.pending = len(r.groups)
	r.shadowedBy = nil
	if r.byKind != nil {
		*r.byKind = [budget.KindUSD + 1]kindQuota{}
	}
	r.sentFromStream = fromStream
	if r.leaseID != "" {
		r.renewed = time.Now()
	}
	for i := range r.groups {
		g := &r.groups[i]
		g.marker = ""
		if g.takes(cost) || g.alternatives != nil {
			// Its answer may be lost with the stream (see cancelAdmission),
			// or come after the gateway gave up on it (see answer).
			g.marker = ids.newID()
		}
		var err error
		if g.alternatives != nil {
			err = r.admitFirst(g)
		} else {
			err = r.pc.redis.Admit(g.subjects, cost, r.leaseID, g.marker, func(v budget.Verdict, err error) { r.answer(g, v, err) })
		}
		if err != nil { // the call never left: that group fails now
			r.answer(g, budget.Verdict{}, err)
		}
	}
	switch r.phase {
	case phaseDispatching: // its answers are to come
		r.enter(phaseAdmitting)
		return types.HeaderStopAllIterationAndWatermark
	case phaseQueued:
		return types.HeaderStopAllIterationAndWatermark
	case phaseAdmitted, phasePassed: // decided at once
		return types.ActionContinue
	}
	return types.ActionPause // answered locally
}

// takesLeases says whether the request's admission takes a concurrency
// lease: some subject of it (of any candidate it may be served as) limits
// concurrency.
func (r *request) takesLeases() bool {
	for i := range r.groups {
		g := &r.groups[i]
		if g.leases || slices.ContainsFunc(g.alternatives, func(l limits) bool { return l.leases }) {
			return true
		}
	}
	return false
}

// answer takes one group's answer; the last one decides.
func (r *request) answer(g *group, v budget.Verdict, err error) {
	if g.canceled {
		return // answered after all, but its stream is gone and its admission was cancelled
	}
	r.pending--
	if err == nil {
		r.serving(g, v) // with fallbacks: the candidate it is about
		r.noteByKind(g, v)
	} else if g.marker != "" && scripts.MayHaveRun(err) {
		// The gateway gave up on it (redis.timeout) or its reply made no
		// sense, but Redis may have run it, or run it still, late (a Redis
		// that hangs runs what it was sent when it resumes): failure_mode
		// decides the request, and what the admission took is undone,
		// whenever it runs.
		r.cancelGroup(g)
	}
	r.alertCrossings(g.subjects, v.Crossings) // budget alerts: sent from the tick
	switch {
	case err != nil:
		if r.failure == nil {
			r.failure = err
		}
	case !v.Allowed:
		g.verdict, g.answered = v, true
		if r.rejected == nil || v.Reset > r.rejected.Reset {
			r.rejected, r.rejectedBy = &g.verdict, g
		}
	default:
		r.allowedBy(g, v)
	}
	if r.pending == 0 {
		r.decide()
	}
}

// allowedBy notes a group's verdict that allows the request, keeping as
// the request's (the quota headers show it) the one that decides among the
// groups as each group's script chose among its windows.
func (r *request) allowedBy(g *group, v budget.Verdict) {
	g.verdict, g.answered = v, true
	if v.OverSoft && r.shadowedBy == nil {
		r.shadowedBy = g
	}
	if v.Limit > 0 && (r.verdict.Limit == 0 || v.DecidesOver(r.verdict)) { // (no limit: a slot where nothing limits it)
		r.verdict = v
		r.noteLimit(g, v)
	}
}

// decide acts once every group has answered: admits the request, rejects
// it, applies failure_mode, or (queueing) lets it wait.
func (r *request) decide() {
	if r.phase == phaseGone { // a retry answered after the client left: undo what it took
		r.rollBack()
		return
	}
	if r.failure == nil && r.rejected == nil && !r.agree() {
		return // slots served different candidates: asked again
	}
	if r.failure != nil || r.rejected != nil {
		r.rollBack()
	}
	if r.rejected != nil && r.failure == nil && r.wait(*r.rejected, r.rejectedScope()) {
		r.enter(phaseQueued)
		return
	}
	line := r.queue
	r.leaveQueue()
	pumped := line != nil && r.phase != phaseDispatching
	if pumped {
		line.pump(r.pc.queues.tick) // the next in line may fit now (first: see actOnItsContext)
	}
	if pumped || !r.sentFromStream {
		// Sent from its own hooks, the admission is answered with the host
		// pointed at its stream already (the SDK does it before a call's
		// callback, as a gateway does within a hook): one host call less.
		r.actOnItsContext()
	}
	switch {
	case r.failure != nil && r.pc.local != nil:
		r.noteFailure(r.failure)
		r.askedLimits()
		r.decideLocally()
	case r.failure != nil:
		r.fail(r.failure)
	case r.rejected != nil:
		r.reject(*r.rejected, r.rejectedScope())
	default:
		if !r.shadowFallback() {
			r.shadowReject()
		}
		r.serve()
		r.holdsLeases()
		r.goOn(phaseAdmitted)
	}
}

// goOn moves a request Redis (or the local windows, or failure_mode allow)
// let through to phase p (admitted, passed), and lets it go on: outside the
// hook dispatching its admission, which returns the action itself.
func (r *request) goOn(p phase) {
	dispatching := r.phase == phaseDispatching
	r.enter(p)
	if !dispatching {
		r.resume()
	}
}

// rollBack undoes the admission of the groups that admitted the request when
// another group rejected it or failed: gives back their reservation, uncounts
// the request and releases its leases.
func (r *request) rollBack() {
	for i := range r.groups {
		if g := &r.groups[i]; g.answered {
			r.rollBackGroup(g)
		}
	}
}

// rollBackGroup gives back what an answered group's admission took, if it
// admitted the request and took anything.
func (r *request) rollBackGroup(g *group) {
	if reserved := r.reservedBy(g); g.verdict.Allowed && g.takes(reserved) && len(g.subjects) > 0 {
		r.charge(g.subjects, reserved.GivenBack(), g.verdict.At)
	}
}

// takes says whether the group's admission takes anything that must be given
// back should the request not go on: a reservation, a request count, a lease.
func (g *group) takes(reserved budget.Amounts) bool {
	return reserved != budget.Amounts{} || g.requests || g.leases
}

// cancelAdmission undoes the admission of a request whose stream ended
// before Redis answered it. The gateway delivers the answer to a call only
// while the stream it was sent from lives, so an admission sent from the
// request's hooks may never be answered: each group still waiting is
// cancelled (cancelGroup), and the groups that did admit it are rolled
// back, from the plugin's tick, whose calls are always answered. (A retry
// of a queued request is sent from the tick: its answer comes, and decide
// rolls it back.)
func (r *request) cancelAdmission() {
	if r.pending == 0 || !r.sentFromStream {
		return
	}
	r.pending = 0
	for i := range r.groups {
		g := &r.groups[i]
		switch {
		case g.answered:
			r.rollBackGroup(g)
		case g.marker != "" && !g.canceled: // (one that failed is cancelled already: see answer)
			r.cancelGroup(g)
		}
	}
}

// cancelGroup cancels the admission of a group whose answer the request
// will not have (its stream ended first) or that failed where Redis may
// run it all the same (see answer), from the plugin's tick
// (scripts.Client.Cancel, tried until it lands: see pendingCharge.answered):
// the admission is undone if it ran and admitted (its reservation, its
// request count and its lease given back), and takes nothing if it runs
// later. A late answer to it is ignored.
func (r *request) cancelGroup(g *group) {
	g.canceled = true
	if g.alternatives == nil {
		c := &pendingCharge{r: r, subjects: g.subjects, amounts: r.reserved.GivenBack(), cancel: g.marker}
		c.postpone()
		return
	}
	for i := r.fallback.first; i < len(g.alternatives); i++ { // each candidate offered: the one it served, if any, is undone
		if subjects := g.alternatives[i].subjects; len(subjects) > 0 {
			marker := scripts.FallbackMarker(g.marker, i-r.fallback.first)
			c := &pendingCharge{r: r, subjects: subjects, amounts: r.fallback.candidates[i].cost.GivenBack(), cancel: marker}
			c.postpone()
		}
	}
}

// fail applies failure_mode when Redis could not decide: let the request go,
// or answer 503.
func (r *request) fail(err error) {
	r.noteFailure(err)
	r.logFailed(r.pc.rules.FailureMode == config.FailDeny)
	if r.pc.rules.FailureMode == config.FailDeny {
		r.enter(phaseRejected)
		_ = proxywasm.SendHttpResponseWithDetail(unavailableStatus, "ai-token-ratelimit.unavailable",
			[][2]string{{"content-type", "text/plain; charset=utf-8"}}, []byte(unavailableBody), -1)
		return
	}
	// allow: the request goes on unlimited and, not being admitted, uncharged
	// (the counters could not be trusted to take the charge either).
	r.goOn(phasePassed)
}

// resume lets the paused request go on, with the body chunks the host
// buffered while it waited: they pass now, and count among the bytes that
// passed (bodyBytes). The host gives the chunks that come later alone.
func (r *request) resume() {
	r.bodyBytes += r.bufferedBytes
	r.bufferedBytes = 0
	_ = proxywasm.ResumeHttpRequest()
}

// noteFailure logs and counts an admission Redis could not decide.
func (r *request) noteFailure(err error) {
	if errors.Is(err, scripts.ErrBreakerOpen) {
		// The breaker logged its opening once; not a line per request.
		if debugEnabled() {
			log.Debugf("token rate limit not checked, failure_mode %s: %v", r.pc.rules.FailureMode, err)
		}
	} else {
		log.Warnf("token rate limit check failed, failure_mode %s: %v", r.pc.rules.FailureMode, err)
	}
	r.pc.metrics.count(metricAdmitFailure, requestHeader(consumerHeader), r.servedModel())
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
