package limiter

import (
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/tokenusage"
)

// The access log (access_log, on by default). Each limited request's usage,
// cost, limit decision and subject are written once, where the gateway's
// access log reads them: the property ai_log, which Envoy's Wasm filter
// keeps as the filter state wasm.ai_log (an access log reads it with
// %FILTER_STATE(wasm.ai_log:PLAIN)%, which Higress's default format
// carries). It is Higress's convention (wasm-go's wrapper.AILogKey, which
// its ai-statistics plugin fills): one JSON object, written string-escaped
// (the format puts it between quotes), to which each plugin adds its keys,
// keeping the others'. Keys are OpenTelemetry's GenAI semantic
// conventions' where a name exists there (gen_ai.*), this plugin's
// (ratelimit.*) otherwise.
//
// It is written when the request is decided for good: a rejection (or a
// 503 of failure_mode deny, or a request failure_mode allow lets through
// unlimited) at once; an admitted request when it is charged, at its
// response's end or when its stream ends, its usage known. A request whose
// stream ends before its admission is decided has none. One property read
// (to keep what other plugins wrote) and one write per request; the object
// is built in a buffer the VM reuses.

// Keys of the access log object.
const (
	logModel         = "gen_ai.request.model"
	logInput         = "gen_ai.usage.input_tokens"
	logOutput        = "gen_ai.usage.output_tokens"
	logCacheRead     = "gen_ai.usage.cache_read.input_tokens"
	logCacheCreation = "gen_ai.usage.cache_creation.input_tokens"
	logReasoning     = "gen_ai.usage.reasoning.output_tokens"
	logDecision      = "ratelimit.decision"
	logRule          = "ratelimit.rule"
	logRuleItem      = "ratelimit.rule_item"
	logThreshold     = "ratelimit.threshold"
	logKey           = "ratelimit.key"
	logSubject       = "ratelimit.subject"
	logLimitKind     = "ratelimit.limit_kind"
	logWindow        = "ratelimit.window"
	logCostTokens    = "ratelimit.cost_tokens"
	logCostNanoUSD   = "ratelimit.cost_nanodollars"
	logEstimated     = "ratelimit.estimated"
	logFallbackFrom  = "ratelimit.fallback_from"
)

// accessLogKeys are every key the plugin writes: an earlier value of one
// (its own write on a gateway that reuses the property, none on Envoy) is
// replaced, never doubled.
var accessLogKeys = [...]string{logModel, logInput, logOutput, logCacheRead, logCacheCreation, logReasoning,
	logDecision, logRule, logRuleItem, logThreshold, logKey, logSubject, logLimitKind, logWindow,
	logCostTokens, logCostNanoUSD, logEstimated, logFallbackFrom}

// aiLogKey is the property written: Higress's ai_log.
const aiLogKey = wrapper.AILogKey

// aiLogPath is aiLogKey as the property's path: one segment, itself.
var aiLogPath = []byte(aiLogKey)

// maxLoggedValueBytes bounds each string the access log takes from a
// request (a header value that names a subject, a model): longer ones are
// cut.
const maxLoggedValueBytes = 256

// decision is what the limits made of a request, as the access log names it.
type decision uint8

const (
	decisionAllowed        decision = iota // every limit had room
	decisionRejected                       // a limit had none: answered rejected_code
	decisionShadowRejected                 // a limit had none, and shadow_mode let it through
	decisionFallback                       // served as a fallback of the model it asked for
	decisionShadowFallback                 // shadow_mode served it as asked where a fallback would have served it
	decisionFailureAllowed                 // Redis could not decide: failure_mode allow let it through, unlimited
	decisionFailureDenied                  // Redis could not decide: failure_mode deny answered 503
	decisionLocalAllowed                   // Redis could not decide: the worker's own windows admitted it (failure_mode local)
	decisionLocalRejected                  // Redis could not decide: the worker's own windows rejected it
)

var decisionNames = [...]string{"allowed", "rejected", "shadow_rejected", "fallback", "shadow_fallback",
	"failure_allowed", "failure_denied", "local_allowed", "local_rejected"}

// kindNames name the kinds of limit, as the admin API's status does.
var kindNames = [...]string{budget.KindTokens: "tokens", budget.KindRequests: "requests",
	budget.KindConcurrent: "concurrent", budget.KindUSD: "usd"}

// accessLog is what a request keeps for its access log until it is
// written: the limit that decided it, noted where its verdict is taken.
type accessLog struct {
	// decidedBy is the match of the subject whose limit the log names (nil:
	// none noted), subjectBy that subject, and window the index of the
	// limit among its windows (-1: its concurrency limit): the tightest open
	// window of an admitted request (the one its quota headers show), or
	// the limit shadow_mode let it pass. The matches and subjects of a
	// request are not moved once it is admitted, so the pointers hold.
	decidedBy *config.Match
	subjectBy *budget.Subject
	window    int
	kind      budget.Kind
	shadow    bool     // shadow_mode let it through a closed limit
	shadowAs  decision // which: shadow_rejected or shadow_fallback
}

// noteLimit notes the limit of v, group g's verdict, as the one the access
// log names (noted with access_log off too: nothing reads it then).
func (l *accessLog) noteLimit(g *group, v budget.Verdict) {
	if g == nil || v.Subject < 0 || v.Subject >= len(g.matches) || v.Subject >= len(g.subjects) {
		return
	}
	l.decidedBy, l.subjectBy, l.window, l.kind = &g.matches[v.Subject], &g.subjects[v.Subject], v.Window, v.Kind
}

// noteShadow notes that shadow_mode let the request through a limit of
// group g that would have decided otherwise (d: shadow_rejected or
// shadow_fallback).
func (l *accessLog) noteShadow(d decision, g *group) {
	if g == nil {
		return
	}
	l.noteLimit(g, g.verdict)
	l.shadow, l.shadowAs = true, d
}

// logRejected writes the access log of a request rejected by the verdict
// v of group g (nil: not known, as for a request that gave up waiting
// behind others in a queue).
func (r *request) logRejected(g *group, v budget.Verdict) {
	if !r.pc.rules.AccessLog {
		return
	}
	if g == nil && len(r.groups) == 1 { // a request waiting in a line: its one group's subjects are the line's
		g = &r.groups[0]
	}
	r.decidedBy, r.subjectBy = nil, nil
	r.noteLimit(g, v)
	r.kind = v.Kind
	d := decisionRejected
	if r.failure != nil {
		d = decisionLocalRejected
	}
	b := r.beginLog(d)
	writeLog(r.appendLimit(b, true))
}

// logFailed writes the access log of a request Redis could not decide,
// which failure_mode let through unlimited (allow) or answered 503 (deny).
func (r *request) logFailed(denied bool) {
	if !r.pc.rules.AccessLog {
		return
	}
	d := decisionFailureAllowed
	if denied {
		d = decisionFailureDenied
	}
	r.decidedBy = nil
	writeLog(r.beginLog(d))
}

// logSettled writes the access log of an admitted request as it is
// charged: the usage its response reported (ok), or none (estimated: it
// was charged an estimate; otherwise an upstream error, given back), and
// what it cost.
func (r *request) logSettled(u tokenusage.Usage, ok, estimated bool, cost budget.Amounts) {
	if !r.pc.rules.AccessLog {
		return
	}
	d := decisionAllowed
	switch {
	case r.shadow:
		d = r.shadowAs
	case r.servedAs != "":
		d = decisionFallback
	case r.chargedLocally:
		d = decisionLocalAllowed
	}
	b := r.beginLog(d)
	b = r.appendLimit(b, r.decidedBy != nil)
	if ok {
		b = appendIntMember(b, logInput, u.Input)
		b = appendIntMember(b, logOutput, u.Output)
		b = appendNonZero(b, logCacheRead, u.CacheRead)
		b = appendNonZero(b, logCacheCreation, u.CacheCreation)
		b = appendNonZero(b, logReasoning, u.Reasoning)
	}
	b = appendIntMember(b, logCostTokens, cost.Tokens)
	if r.pc.rules.Pricing.Priced() {
		b = appendIntMember(b, logCostNanoUSD, cost.USD)
	}
	if estimated {
		b = appendMember(b, logEstimated)
		b = append(b, "true"...)
	}
	writeLog(b)
}

// beginLog starts the access log of the request with its decision, rule,
// subject and model.
func (r *request) beginLog(d decision) []byte {
	b := logBuf[:0]
	b = appendStringMember(b, logDecision, decisionNames[d])
	b = appendStringMember(b, logRule, r.pc.rules.RuleName)
	if m := r.decidedBy; m != nil {
		from := limitFrom(m, r.window) // of the subject's limits, merged from several matches, the one that decided
		b = appendSubject(b, r.pc.rules, &from)
	} else if len(r.groups) > 0 && len(r.groups[0].matches) > 0 {
		first := r.groups[0].matches[0].WindowFrom(0) // no limit noted: the request's first subject
		b = appendSubject(b, r.pc.rules, &first)
	}
	if model := r.servedModel(); model != "" {
		b = appendStringMember(b, logModel, model)
	}
	if r.servedAs != "" {
		b = appendStringMember(b, logFallbackFrom, r.model.name)
	}
	return b
}

// appendSubject writes the subject of a match as the admin API names it:
// its rule item (or threshold), its limit key and, for a limit_by_per_*
// item, the value that names it, a credential as its fingerprint
// (config.Match.ShownKey, ShownValue).
func appendSubject(b []byte, rules *config.Config, m *config.Match) []byte {
	key := m.Key
	if m.Parent != nil {
		key = m.Parent // a per_model entry: the limit key it is under
	}
	switch {
	case m.Unmatched:
		b = appendStringMember(b, logThreshold, config.UnmatchedThreshold)
	case m.Item == nil:
		b = appendStringMember(b, logThreshold, config.GlobalThreshold)
	default:
		b = appendIntMember(b, logRuleItem, int64(itemIndex(rules, m.Item)))
	}
	if key != nil {
		b = appendStringMember(b, logKey, m.ShownKey(key))
	}
	switch {
	case m.Value == "" || m.Item == nil || !m.Item.Type.PerValue():
		// The key names the subject: every request it matches shares it.
	case m.Secret(): // as m.ShownValue(), without its string
		var fp [32]byte
		f := config.AppendFingerprint(fp[:0], m.Value)
		b = appendStringMember(b, logSubject, unsafe.String(unsafe.SliceData(f), len(f)))
	default:
		b = appendStringMember(b, logSubject, m.Value)
	}
	return b
}

// appendLimit writes the kind and window of the limit noted (with known:
// one was), if any.
func (l *accessLog) appendLimit(b []byte, known bool) []byte {
	if !known {
		return b
	}
	if int(l.kind) < len(kindNames) {
		b = appendStringMember(b, logLimitKind, kindNames[l.kind])
	}
	switch s := l.subjectBy; {
	case l.window < 0 && l.kind == budget.KindConcurrent:
		b = appendStringMember(b, logWindow, "max_concurrent_requests")
	case s != nil && l.window >= 0 && l.window < len(s.Windows):
		b = appendStringMember(b, logWindow, s.Windows[l.window].Field)
	}
	return b
}

// writeLog adds the members b to the ai_log property, keeping what other
// plugins put there, and makes b the VM's buffer again.
func writeLog(b []byte) {
	logBuf = keptBuffer(b)
	out, ok := mergeAILog(logOut[:0], hostProperty(aiLogPath), b)
	logOut = keptBuffer(out)
	if !ok {
		if debugEnabled() {
			log.Debugf("access log: %s holds no string-escaped JSON object; left as it is, without this request's", aiLogKey)
		}
		return
	}
	if !setHostProperty(aiLogPath, out) && debugEnabled() {
		log.Debugf("access log: the host refused to set %s", aiLogKey)
	}
}

// The VM's buffers of the access log, reused by every request (a VM runs
// one hook at a time): the members of ours (logBuf), another plugin's
// value as a JSON string (logTheirs) and the members of it kept (logKept), and
// the value written (logOut), which the host copies.
var logBuf, logTheirs, logKept, logOut []byte

// maxKeptLogBytes bounds a buffer the VM keeps for the next request:
// another plugin's object may be large (the text of a conversation), and
// one such request should not hold its size for the VM's life.
const maxKeptLogBytes = 16 << 10

// keptBuffer is b emptied, to be kept for the next request, or nil when it
// has grown past maxKeptLogBytes.
func keptBuffer(b []byte) []byte {
	if cap(b) > maxKeptLogBytes {
		return nil
	}
	return b[:0]
}

// mergeAILog appends to dst the new value of the ai_log property: the
// object in existing (its value, string-escaped, as Higress's plugins write
// it; empty: none) with its members but for those of the keys this plugin
// writes, then ours (the members of an object, without braces), the whole
// string-escaped. It is false, with nothing to write, when existing is not
// a string-escaped JSON object: another plugin's value is not overwritten.
func mergeAILog(dst, existing, ours []byte) ([]byte, bool) {
	if len(existing) == 0 {
		return appendObject(dst, nil, ours), true
	}
	quoted := append(append(append(logTheirs[:0], '"'), existing...), '"') // the JSON string it is the contents of
	logTheirs = keptBuffer(quoted)
	if !gjson.ValidBytes(quoted) {
		return dst, false
	}
	object := gjson.ParseBytes(quoted).Str // the text it stands for
	if !gjson.Valid(object) {
		return dst, false
	}
	parsed := gjson.Parse(object)
	if !parsed.IsObject() {
		return dst, false
	}
	kept := logKept[:0]
	parsed.ForEach(func(key, value gjson.Result) bool {
		if !isAccessLogKey(key.Str) {
			if len(kept) > 0 {
				kept = append(kept, ',')
			}
			kept = append(append(append(kept, key.Raw...), ':'), value.Raw...)
		}
		return true
	})
	logKept = keptBuffer(kept)
	return appendObject(dst, kept, ours), true
}

// isAccessLogKey says whether key is one this plugin writes.
func isAccessLogKey(key string) bool {
	for _, k := range accessLogKeys {
		if k == key {
			return true
		}
	}
	return false
}

// appendObject appends the object of the members theirs then ours (each
// a list of members without braces, either empty) as the contents of a
// JSON string.
func appendObject(b, theirs, ours []byte) []byte {
	b = append(b, '{')
	b = appendEscaped(b, theirs)
	if len(theirs) > 0 && len(ours) > 0 {
		b = append(b, ',')
	}
	b = appendEscaped(b, ours)
	return append(b, '}')
}

// appendEscaped appends s as the contents of a JSON string.
func appendEscaped(b, s []byte) []byte {
	for _, c := range s {
		if e := stringEscape(c); e != "" {
			b = append(b, e...)
		} else {
			b = append(b, c)
		}
	}
	return b
}

// stringEscape is how a byte of UTF-8 text is written in a JSON string
// ("": as it is). Another plugin's members may hold whitespace between
// their tokens, ours none.
func stringEscape(c byte) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if c < 0x20 {
		return controlEscapes[c]
	}
	return ""
}

// controlEscapes are the escapes of the control bytes: \u0000 to \u001f.
var controlEscapes = func() (e [0x20]string) {
	const hex = "0123456789abcdef"
	for c := range e {
		e[c] = `\u00` + hex[c>>4:c>>4+1] + hex[c&15:c&15+1]
	}
	return e
}()

// appendMember starts a member of key (a constant without anything to
// escape), after a comma if it is not the first.
func appendMember(b []byte, key string) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendIntMember(b []byte, key string, n int64) []byte {
	return strconv.AppendInt(appendMember(b, key), n, 10)
}

func appendNonZero(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return appendIntMember(b, key, n)
}

func appendStringMember(b []byte, key, s string) []byte {
	return appendJSONString(appendMember(b, key), s)
}

// appendJSONString appends s, cut at maxLoggedValueBytes (before a
// character that would straddle the cut), as a JSON string: quotes,
// backslashes and control bytes escaped, bytes that are not UTF-8 written
// as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	if len(s) > maxLoggedValueBytes {
		cut := maxLoggedValueBytes
		for cut > maxLoggedValueBytes-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if e := stringEscape(c); e != "" {
				b = append(b, e...)
			} else {
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
