package limiter

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// HeaderScope names, on a rejection, the limit that closed: see
// rejectedScope.
const HeaderScope = "X-TokenRateLimit-Scope"

// Content types of a rejection's body: rejected_msg is sent as JSON when
// it is a JSON object or array, else as text.
const (
	contentTypeText = "text/plain; charset=utf-8"
	contentTypeJSON = "application/json"
)

// maxScopeValueBytes bounds each value written into the scope header.
const maxScopeValueBytes = 128

// rejectedContentType is the Content-Type of rejected_msg: JSON when the
// message is a JSON object or array (an API's error body), else text.
func rejectedContentType(msg string) string {
	trimmed := strings.TrimSpace(msg)
	if trimmed != "" && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid([]byte(trimmed)) {
		return contentTypeJSON
	}
	return contentTypeText
}

// headerRetryAfterMs is Retry-After to the millisecond, which the official
// OpenAI and Anthropic SDKs read before Retry-After.
const headerRetryAfterMs = "retry-after-ms"

// headerShouldRetry tells the official OpenAI and Anthropic SDKs whether to
// retry, before they look at the status or Retry-After; the providers send
// "false" for quota that will not come back soon.
const headerShouldRetry = "x-should-retry"

// The "code" of an OpenAI-shaped rejection: a limit that has room again
// soon, or one spent for longer than max_retry_wait (OpenAI's own answer to
// an exhausted billing quota).
const (
	codeRateLimited = "rate_limit_exceeded"
	codeQuotaSpent  = "insufficient_quota"
)

// reject answers rejected_code, telling the client when to come back (to
// the second and to the millisecond), which limit closed (scope), and the
// quota headers configured. The body is rejected_msg when it is set, else
// an error in the shape of the request's API naming the limit and when it
// has room again (see rejectionBody). A limit that has room again only
// after max_retry_wait adds x-should-retry: false, so that an SDK raises
// its error at once rather than sleep for hours with the call held.
func (r *request) reject(v budget.Verdict, scope string) {
	r.phase.enter(phaseRejected)
	rules := r.pc.rules
	log.Debugf("rule %s: a limit of kind %d is used up (limit %d, %s), rejected for %d s", rules.RuleName, v.Kind, v.Limit, scope, v.Reset)
	r.pc.countRejection(v.Kind, r.servedModel())
	r.pc.countByLevel(r.level, r.servedModel(), false)
	r.logRejected(r.rejectedBy, v)
	reset := max(v.Reset, 1)
	waitMs := v.WaitMs
	if waitMs <= 0 { // a concurrency limit: a request may end any time
		waitMs = reset * 1000
	}
	spent := waitMs > rules.MaxRetryWaitSeconds*1000
	body, contentType := r.rejectionBody(v, scope, waitMs, spent)
	detail := "ai-token-ratelimit.rejected"
	if v.Kind == budget.KindConcurrent {
		detail = "ai-token-ratelimit.concurrency"
	}
	headers := make([][2]string, 0, 16)
	headers = append(headers, [2]string{HeaderReset, strconv.FormatInt(reset, 10)}, [2]string{HeaderRetryAfter, strconv.FormatInt(reset, 10)},
		[2]string{headerRetryAfterMs, strconv.FormatInt(waitMs, 10)}, [2]string{"content-type", contentType})
	if scope != "" {
		headers = append(headers, [2]string{HeaderScope, scope})
	}
	if spent {
		headers = append(headers, [2]string{headerShouldRetry, "false"})
	}
	headers = r.admission.appendQuotaHeaders(rules, headers, v, true)
	_ = proxywasm.SendHttpResponseWithDetail(rules.RejectedCode, detail, headers, []byte(body), -1)
}

// api is the API a request speaks, as its path (or headers) say: the shape
// of the error it is answered with.
type api uint8

const (
	apiOther     api = iota // a path of none of the APIs below: rejected_msg's default
	apiOpenAI               // OpenAI and compatible: /chat/completions, /completions, /responses, /embeddings...
	apiAnthropic            // Anthropic Messages: /messages, or an anthropic-version header
	apiGemini               // Gemini and Vertex AI: /models/<model>:<method>
)

// apiOf is the API of a request by its path as routers read it (see
// config.CanonicalPath; estimate.RouteDialect), whether its route names a
// Gemini model (gemini: config.Route.Gemini, as the request's model read
// it, requestModel.routeOf), and its Anthropic version header.
func apiOf(path string, gemini bool) api {
	d := estimate.RouteDialect(path, gemini)
	switch {
	case d == estimate.DialectGemini:
		return apiGemini
	case d == estimate.DialectAnthropic || requestHeader("anthropic-version") != "":
		return apiAnthropic
	case d == estimate.DialectOpenAIChat || d == estimate.DialectOpenAIResponses || d == estimate.DialectOpenAIOther:
		return apiOpenAI
	}
	return apiOther
}

// rejectionBody is the body of a rejection and its Content-Type:
// rejected_msg when it is set (a concurrency limit keeps its own text, as
// before), else the error of the request's API, as its SDK reads it, with
// a message naming the limit and when it has room again (with spent, an
// OpenAI code saying the quota is spent); a path of no API known gets the
// default text.
func (r *request) rejectionBody(v budget.Verdict, scope string, waitMs int64, spent bool) (string, string) {
	rules := r.pc.rules
	switch {
	case rules.RejectedMsgSet && v.Kind == budget.KindConcurrent:
		return concurrencyMsg + strconv.FormatInt(v.Limit, 10), contentTypeText
	case rules.RejectedMsgSet:
		return rules.RejectedMsg, r.pc.rejectedType
	}
	path := r.routedPath
	if path == "" {
		path = config.CanonicalPath(r.path)
	}
	which := apiOf(path, r.model.routeOf(rules, r.path).Gemini)
	if which == apiOther {
		if v.Kind == budget.KindConcurrent {
			return concurrencyMsg + strconv.FormatInt(v.Limit, 10), contentTypeText
		}
		return rules.RejectedMsg, contentTypeText
	}
	msg := rejectionMessage(r.pc.rules.Priority, r.rejectedBy, v, readableScope(scope), waitMs)
	var body any
	switch which {
	case apiAnthropic:
		body = anthropicError{Type: "error", Error: anthropicErrorDetail{Type: "rate_limit_error", Message: msg}}
	case apiGemini:
		body = geminiError{Error: geminiErrorDetail{Code: rules.RejectedCode, Message: msg, Status: "RESOURCE_EXHAUSTED"}}
	default:
		code := codeRateLimited
		if spent {
			code = codeQuotaSpent
		}
		body = openAIError{Error: openAIErrorDetail{Message: msg, Type: openAIErrorType[v.Kind], Code: code}}
	}
	out, _ := json.Marshal(body) // plain structs of strings and numbers: never fails
	return string(out), contentTypeJSON
}

// The error bodies of the APIs, as their SDKs read them.
type (
	openAIError struct {
		Error openAIErrorDetail `json:"error"`
	}
	openAIErrorDetail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
	anthropicError struct {
		Type  string               `json:"type"`
		Error anthropicErrorDetail `json:"error"`
	}
	anthropicErrorDetail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	geminiError struct {
		Error geminiErrorDetail `json:"error"`
	}
	geminiErrorDetail struct {
		Code    uint32 `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
)

// openAIErrorType is the "type" of an OpenAI-shaped rejection, by the kind
// of limit that closed: what it counts, as OpenAI's own 429s say "tokens"
// or "requests".
var openAIErrorType = [...]string{
	budget.KindTokens:     "tokens",
	budget.KindRequests:   "requests",
	budget.KindConcurrent: "concurrent_requests",
	budget.KindUSD:        "usd",
}

// rejectionMessage says which limit closed (v, the verdict of group g)
// and when it has room again: "Token rate limit exceeded: the limit of 1000
// tokens per minute is used up (rule_item=0; key=alice). Try again in 12s."
func rejectionMessage(p *config.Priority, g *group, v budget.Verdict, scope string, waitMs int64) string {
	var b strings.Builder
	per := ""
	if g != nil && v.Subject < len(g.subjects) && v.Window >= 0 && v.Window < len(g.subjects[v.Subject].Windows) {
		if _, unit, ok := strings.Cut(g.subjects[v.Subject].Windows[v.Window].Field, "_per_"); ok {
			per = " per " + unit
		}
	}
	switch v.Kind {
	case budget.KindConcurrent:
		b.WriteString("Too many concurrent requests: at most ")
		b.WriteString(strconv.FormatInt(v.Limit, 10))
		b.WriteString(" may be in progress at once")
	case budget.KindUSD:
		b.WriteString("Spending limit exceeded: the budget of $")
		b.WriteString(config.FormatUSD(v.Limit))
		b.WriteString(per)
		b.WriteString(" is used up")
	case budget.KindRequests:
		b.WriteString("Request rate limit exceeded: the limit of ")
		b.WriteString(strconv.FormatInt(v.Limit, 10))
		b.WriteString(" requests")
		b.WriteString(per)
		b.WriteString(" is reached")
	default:
		b.WriteString("Token rate limit exceeded: the limit of ")
		b.WriteString(strconv.FormatInt(v.Limit, 10))
		b.WriteString(" tokens")
		b.WriteString(per)
		b.WriteString(" is used up")
	}
	if scope != "" {
		b.WriteString(" (")
		b.WriteString(scope)
		b.WriteString(")")
	}
	if level, open := openShare(p, g, v); open < 100 {
		b.WriteString("; ")
		b.WriteString(strconv.FormatInt(open, 10))
		b.WriteString(" % of it is open to priority ")
		b.WriteString(level)
		b.WriteString(", the rest kept for higher priorities")
	}
	b.WriteString(". Try again in ")
	b.WriteString(waitText(waitMs))
	b.WriteString(".")
	return b.String()
}

// openShare is the name of the request's priority level and the percent of
// the limit that decided v open to it (100: all of it, or no priority).
func openShare(p *config.Priority, g *group, v budget.Verdict) (level string, open int64) {
	if p == nil || g == nil || v.Subject < 0 || v.Subject >= len(g.subjects) {
		return "", 100
	}
	s := &g.subjects[v.Subject]
	switch {
	case v.Window >= 0 && v.Window < len(s.Windows):
		open = s.Open(v.Window)
	case v.Kind == budget.KindConcurrent:
		open = s.Open(-1)
	default:
		open = 100
	}
	return p.Levels[s.Level], open
}

// waitText writes a wait for a person: milliseconds under a second, else
// whole seconds (rounded up) in Go's duration format ("12s", "3h20m0s").
func waitText(ms int64) string {
	ms = min(max(ms, 0), maxResetMs)
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return (time.Duration((ms+999)/1000) * time.Second).String()
}

// scopeOf names the limit of v, the verdict of group g, for the
// X-TokenRateLimit-Scope header: "rule_item=<index>; key=<key>" for a rule
// item's limit key (its index in rule_items, from 0, and the key as
// configured), "global_threshold", or "unmatched_threshold", followed by
// "; model=<model>" for a model limit (a per_model entry, whose key is the
// limit key it is under, or a limit_by_model item's key). Bytes a
// header value cannot carry (controls, non-ASCII, and the ';' and '%'
// the format uses) are percent-encoded, and each value is cut at
// maxScopeValueBytes.
func scopeOf(rules *config.Config, g *group, v *budget.Verdict) string {
	if g == nil || v == nil || v.Subject < 0 || v.Subject >= len(g.matches) {
		return ""
	}
	m := limitFrom(&g.matches[v.Subject], v.Window)
	var b strings.Builder
	switch {
	case m.Unmatched:
		b.WriteString("unmatched_threshold")
	case m.Item == nil:
		b.WriteString("global_threshold")
	default:
		index := itemIndex(rules, m.Item)
		key := m.Key
		if m.Parent != nil {
			key = m.Parent // the limit key the per_model entry is under
		}
		b.WriteString("rule_item=")
		b.WriteString(strconv.Itoa(index))
		b.WriteString("; key=")
		appendScopeValue(&b, m.ShownKey(key)) // a key that is a credential: its fingerprint
	}
	if m.Model != "" { // a model limit: per_model, limit_by_model, limit_by_per_model
		b.WriteString("; model=")
		appendScopeValue(&b, m.Model)
	}
	return b.String()
}

// limitFrom is the match that window j of a match's subject is from (-1:
// its concurrency limit): the match itself, unless other matches of the
// request were merged into it (see config.Shared).
func limitFrom(m *config.Match, window int) config.Match {
	if window < 0 {
		return m.ConcurrencyFrom()
	}
	return m.WindowFrom(window)
}

// readableScope is a scope header's value as a message shows it: without
// its percent-encoding (a message's JSON carries any byte; the key a
// client reads there is the key as configured, "regexp:^Bearer ").
func readableScope(scope string) string {
	if !strings.Contains(scope, "%") {
		return scope
	}
	s, err := url.PathUnescape(scope)
	if err != nil {
		return scope // never: appendScopeValue writes whole escapes
	}
	return s
}

// appendScopeValue writes a value into a scope header, percent-encoding
// what a header value cannot carry and what the format reserves. A space
// within the value stays (a header value may hold one, and a key such as
// "regexp:^Bearer " reads as written); one at either end, which a header
// would lose, is encoded.
func appendScopeValue(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	n := min(len(s), maxScopeValueBytes)
	for i := 0; i < n; i++ {
		c := s[i]
		if c == ' ' && i > 0 && i < n-1 {
			b.WriteByte(c)
			continue
		}
		if c <= ' ' || c >= 0x7f || c == ';' || c == '%' || c == ',' || c == '"' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}
