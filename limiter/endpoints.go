package limiter

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"strings"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// The plugin's own endpoints, answered by the plugin and never forwarded:
// quota_path, where a client sees the status of every subject its request
// matches, and the admin API under admin.path, where an operator reads or
// changes any subject's (package quota says what they share with the CLI).
// Neither counts, reserves or limits anything of the request itself.

// Metric names of the endpoints (see metrics.go for the rest of the name).
const (
	// metricAdminAction counts the admin API's writes: resets, grants,
	// overrides set or removed.
	metricAdminAction = "token_ratelimit_admin_action_count"
	// metricAdminDenied counts admin API requests refused with 403.
	metricAdminDenied = "token_ratelimit_admin_denied_count"
)

// endpoint is one request to an endpoint: what it asks, and the answer it
// waits for.
type endpoint struct {
	pc    PluginConfig
	op    quota.Op
	admin bool   // the admin API (else quota_path)
	who   string // who called the admin API, for its log lines
	query string // the query string, without '?'
	model string // the model a quota request names ("": none)
	ctxID uint32 // the host's id of its HTTP context, to answer it from a call's answer
	body  []byte // the admin request's body, once read

	// buffered is the size of the body the host holds, as its last chunk
	// said: what is read when trailers end the body.
	buffered int

	// The status calls, one per Redis Cluster slot, and their answers.
	matches  []config.Match
	statuses [][]budget.LimitStatus
	pending  int
	failure  error
}

// serveEndpoint answers the request when its path is one of the plugin's
// endpoints: ok is false for any other request, which the limiter handles.
//
// The paths are compared as the upstream's router reads them
// (config.CanonicalPath: decoded, slashes merged, dot segments resolved,
// no trailing slash), so that no spelling of an endpoint's path
// ("/v1/quota/", "//atrl/reset", "/atrl%2Freset") goes upstream as an LLM
// request; the query string is read as it came.
//
// With admin.header, the admin token's header is taken off every request
// here, once its value has been read: whatever the path, it never goes
// upstream.
func (pc PluginConfig) serveEndpoint(ctx wrapper.HttpContext) (action types.Action, ok bool) {
	rules := pc.rules
	if rules.Admin != nil && rules.Admin.Header != "" {
		defer func() { _ = proxywasm.RemoveHttpRequestHeader(rules.Admin.Header) }()
	}
	_, query, _ := strings.Cut(ctx.Path(), "?")
	path := config.CanonicalPath(ctx.Path())
	var adminPath string // "": no admin API; canonical, as the configuration's paths are
	if rules.Admin != nil {
		adminPath = rules.Admin.Path
	}
	method := ctx.Method()
	switch {
	case rules.QuotaPath != "" && path == rules.QuotaPath:
		if method != "GET" {
			return methodNotAllowed("GET"), true
		}
		e := &endpoint{pc: pc, op: quota.OpStatus, query: query, ctxID: currentContextID()}
		return e.serveQuota(ctx), true
	case adminPath != "" && underPath(path, adminPath):
		who, allowed := pc.adminCaller()
		if !allowed {
			log.Warnf("admin API: %s %s refused: %s", method, truncateForLog(path), who)
			pc.metrics.count(metricAdminDenied, requestHeader(consumerHeader), "")
			return answerError(403, "forbidden: the admin API takes the admin consumer or the admin token"), true
		}
		op, allow := adminOp(strings.TrimPrefix(path[len(adminPath):], "/"), method)
		switch {
		case allow == "":
			return answerError(404, "no such admin operation: "+truncateForLog(path)+"; they are status, reset, grant and overrides"), true
		case op == 0:
			return methodNotAllowed(allow), true
		}
		e := &endpoint{pc: pc, op: op, admin: true, who: who, query: query, ctxID: currentContextID()}
		if !ctx.HasRequestBody() {
			return e.serveAdmin(), true
		}
		if current != nil {
			current.ep = e
		}
		return types.HeaderStopIteration, true // the body comes to bodyChunk
	}
	return types.ActionContinue, false
}

// underPath reports whether a canonical path is prefix or a path under it.
func underPath(path, prefix string) bool {
	return strings.HasPrefix(path, prefix) && (len(path) == len(prefix) || path[len(prefix)] == '/')
}

// adminOp is the operation of an admin API path (after admin.path and its
// '/') and method, or 0 with the methods the path allows; allow is "" for
// a path that is no operation.
func adminOp(op, method string) (quota.Op, string) {
	switch op {
	case "status":
		if method == "GET" {
			return quota.OpStatus, "GET"
		}
		return 0, "GET"
	case "reset", "grant":
		if method != "POST" {
			return 0, "POST"
		}
		if op == "reset" {
			return quota.OpReset, "POST"
		}
		return quota.OpGrant, "POST"
	case "overrides":
		switch method {
		case "PUT":
			return quota.OpSetOverrides, "PUT, DELETE"
		case "DELETE":
			return quota.OpRemoveOverrides, "PUT, DELETE"
		}
		return 0, "PUT, DELETE"
	}
	return 0, ""
}

// adminCaller says who calls the admin API, and whether they may: the
// admin consumer (as the auth plugin set it), or whoever carries the
// admin token, whose SHA-256 is compared in constant time.
func (pc PluginConfig) adminCaller() (who string, allowed bool) {
	a := pc.rules.Admin
	consumer := requestHeader(consumerHeader)
	if a.Consumer != "" && consumer == a.Consumer {
		return "consumer " + consumer, true
	}
	if a.Header != "" {
		if token := requestHeader(a.Header); token != "" {
			sum := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(sum[:], a.TokenSHA256[:]) == 1 {
				return "the admin token", true
			}
			return "a wrong admin token in " + a.Header, false
		}
	}
	if consumer != "" {
		return "consumer " + truncateForLog(consumer) + " is not the admin consumer", false
	}
	return "no admin consumer or token", false
}

// bodyChunk takes the admin request's body as it comes: the host buffers
// it while the hook pauses (size is all it holds so far), and at its end
// the request is served.
func (e *endpoint) bodyChunk(size int, end bool) types.Action {
	if size > quota.MaxBodyBytes {
		return answerError(413, "the body is too large for an admin request")
	}
	e.buffered = size
	if !end {
		return types.ActionPause
	}
	if size > 0 {
		e.body, _ = proxywasm.GetHttpRequestBody(0, size)
	}
	return e.serveAdmin()
}

// trailers ends the admin request's body when it ends with trailers: the
// body is what the host buffered by its last chunk (none when the
// trailers follow the headers).
func (e *endpoint) trailers() types.Action {
	return e.bodyChunk(e.buffered, true)
}

// serveQuota answers quota_path: the status of every subject the request
// matches, its model read from ?model= (else from model_source's header
// and path sources).
func (e *endpoint) serveQuota(ctx wrapper.HttpContext) types.Action {
	model, _, _ := config.QueryParam("?"+e.query, "model")
	if model == "" && e.pc.modelLimits {
		var m requestModel
		e.pc.resolveModel(ctx, &m, ctx.Path(), nil, false)
		model = m.name
	}
	e.model = model
	e.matches = e.pc.matchRequest(ctx, model, nil)
	return e.readStatus()
}

// serveAdmin reads the admin request, checks it, and does it: a write
// first, then the status of the subject.
func (e *endpoint) serveAdmin() types.Action {
	req, err := quota.ParseRequest(e.op, e.body, e.query)
	var plan quota.Plan
	if err == nil {
		plan, err = req.Plan(e.pc.rules)
	}
	if err != nil {
		return answerError(400, err.Error())
	}
	e.matches = plan.Matches
	var write scripts.Call
	options := quota.Options(e.pc.rules)
	switch e.op {
	case quota.OpReset:
		write = options.ResetCall([]budget.Subject{plan.Target})
	case quota.OpGrant:
		write = options.GrantCall([]budget.Subject{plan.Target}, req.Tokens)
	case quota.OpSetOverrides:
		write = scripts.OverrideCall(plan.Target.Key, plan.Overrides)
	case quota.OpRemoveOverrides:
		write = scripts.OverrideCall(plan.Target.Key, nil)
	default:
		return e.readStatus()
	}
	log.Infof("admin API: %s of %s by %s", opNames[e.op], describeRequest(e.pc.rules, req), e.who)
	e.pc.metrics.count(metricAdminAction, requestHeader(consumerHeader), "")
	err = e.pc.redis.Run(write, func(v resp.Value, err error) {
		e.actOnItsContext()
		if err != nil {
			log.Warnf("admin API: %s of %s by %s failed: %v", opNames[e.op], describeRequest(e.pc.rules, req), e.who, err)
			answerError(503, "the limiter's Redis did not answer: "+err.Error())
			return
		}
		e.readStatus() // then its status: answered from that call's answer
	})
	if err != nil {
		return answerError(503, "the limiter's Redis is unavailable: "+err.Error())
	}
	return types.ActionPause
}

var opNames = [...]string{quota.OpStatus: "status", quota.OpReset: "reset", quota.OpGrant: "grant",
	quota.OpSetOverrides: "override set", quota.OpRemoveOverrides: "override removal"}

// describeRequest names an admin request's subject and parameters for
// the log, bounded: the value came from a client.
func describeRequest(rules *config.Config, r quota.Request) string {
	return truncateForLog(r.Shown(rules))
}

// readStatus sends one status call per Redis Cluster slot for the
// endpoint's matches and answers once every call has: 200 with the
// document, or 503.
func (e *endpoint) readStatus() types.Action {
	subjects := make([]budget.Subject, len(e.matches))
	for i, m := range e.matches {
		subjects[i] = budget.SubjectOf(e.pc.rules, m)
	}
	e.statuses = make([][]budget.LimitStatus, len(subjects))
	if len(subjects) == 0 {
		return e.answer()
	}
	// Group by slot, keeping each subject's index: the document lists them
	// in match order.
	var slots []uint16
	var groups [][]int
	for i, s := range subjects {
		slot := cachekey.Slot(s.Key)
		j := 0
		for j < len(slots) && slots[j] != slot {
			j++
		}
		if j == len(slots) {
			slots, groups = append(slots, slot), append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	e.pending = len(groups)
	options := quota.Options(e.pc.rules)
	inHook := true
	for _, idx := range groups {
		call := make([]budget.Subject, len(idx))
		for k, i := range idx {
			call[k] = subjects[i]
		}
		err := e.pc.redis.Run(options.StatusCall(call), func(v resp.Value, err error) {
			if err == nil {
				var st [][]budget.LimitStatus
				if st, err = scripts.ParseStatus(v, call); err == nil {
					for k, i := range idx {
						e.statuses[i] = st[k]
					}
				}
			}
			if err != nil && e.failure == nil {
				e.failure = err
			}
			if e.pending--; e.pending == 0 && !inHook {
				e.actOnItsContext()
				e.answer()
			}
		})
		if err != nil {
			e.pending--
			if e.failure == nil {
				e.failure = err
			}
		}
	}
	inHook = false
	if e.pending == 0 {
		return e.answer()
	}
	return types.ActionPause
}

// actOnItsContext points the host at the endpoint request's stream, to
// answer it from a call's answer (see request.actOnItsContext).
func (e *endpoint) actOnItsContext() {
	if e.ctxID != 0 {
		_ = proxywasm.SetEffectiveContext(e.ctxID)
	}
}

// answer sends the status document, or 503 when Redis could not give it.
func (e *endpoint) answer() types.Action {
	if e.failure != nil {
		log.Warnf("quota status: %v", e.failure)
		return answerError(503, "the limiter's Redis did not answer: "+e.failure.Error())
	}
	// The raw value answers the client's own quota request only; the admin
	// API's answers, which proxies may log, show a credential's
	// fingerprint.
	doc := quota.Describe(e.pc.rules, e.matches, e.statuses, e.admin)
	if e.model != "" {
		doc.Price = quota.PriceOf(e.pc.rules, e.model, "") // the quota path addresses no model: priced by its name
	}
	body, err := json.Marshal(doc)
	if err != nil { // not reached: the document holds strings and numbers
		return answerError(500, err.Error())
	}
	_ = proxywasm.SendHttpResponseWithDetail(200, "ai-token-ratelimit.quota", jsonHeaders, body, -1)
	return types.ActionPause
}

var jsonHeaders = [][2]string{{"content-type", contentTypeJSON}, {"cache-control", "no-store"}}

// answerError answers with status and a JSON error message.
func answerError(status uint32, msg string) types.Action {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	_ = proxywasm.SendHttpResponseWithDetail(status, "ai-token-ratelimit.endpoint", jsonHeaders, body, -1)
	return types.ActionPause
}

// methodNotAllowed answers 405 with the methods the path takes.
func methodNotAllowed(allow string) types.Action {
	body := []byte(`{"error":"method not allowed: use ` + allow + `"}`)
	_ = proxywasm.SendHttpResponseWithDetail(405, "ai-token-ratelimit.endpoint",
		append([][2]string{{"allow", allow}}, jsonHeaders...), body, -1)
	return types.ActionPause
}

// truncateForLog bounds what a client sent before it is logged.
func truncateForLog(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}
