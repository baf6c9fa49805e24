package limiter

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/scripts"
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

// reject answers rejected_code, telling the client when to come back and
// which limit closed (scope). A request over a concurrency limit is told
// so, and to retry in a second.
func (r *request) reject(v scripts.Verdict, scope string) {
	rules := r.pc.rules
	log.Debugf("rule %s: a limit of kind %d is used up (limit %d, %s), rejected for %d s", rules.RuleName, v.Kind, v.Limit, scope, v.Reset)
	r.pc.metrics.count(metricRejected, requestHeader(consumerHeader), r.model)
	reset := strconv.FormatInt(max(v.Reset, 1), 10)
	body, detail, contentType := rules.RejectedMsg, "ai-token-ratelimit.rejected", r.pc.rejectedType
	if v.Kind == scripts.KindConcurrent {
		body, detail, contentType = concurrencyMsg+strconv.FormatInt(v.Limit, 10), "ai-token-ratelimit.concurrency", contentTypeText
	}
	headers := [][2]string{{HeaderReset, reset}, {HeaderRetryAfter, reset}, {"content-type", contentType}}
	if scope != "" {
		headers = append(headers, [2]string{HeaderScope, scope})
	}
	if rules.ShowLimitQuotaHeader {
		headers = append(headers, [2]string{HeaderLimit, quotaValue(v.Kind, v.Limit)}, [2]string{HeaderRemaining, "0"})
	}
	_ = proxywasm.SendHttpResponseWithDetail(rules.RejectedCode, detail, headers, []byte(body), -1)
}

// rejectedScope names the limit that rejected the request, for the
// X-TokenRateLimit-Scope header: "rule_item=<index>; key=<key>" for a rule
// item's limit key (its index in rule_items, from 0, and the key as
// configured), "global_threshold", or "unmatched_threshold", followed by
// "; model=<model>" for a model limit (a per_model entry, whose key is the
// limit key it is under, or a limit_by_model item's key). Bytes a
// header value cannot carry (controls, non-ASCII, and the ';' and '%'
// the format uses) are percent-encoded, and each value is cut at
// maxScopeValueBytes.
func (r *request) rejectedScope() string {
	g, v := r.rejectedBy, r.rejected
	if g == nil || v == nil || v.Subject < 0 || v.Subject >= len(g.matches) {
		return ""
	}
	m := g.matches[v.Subject]
	var b strings.Builder
	switch {
	case m.Unmatched:
		b.WriteString("unmatched_threshold")
	case m.Item == nil:
		b.WriteString("global_threshold")
	default:
		index := -1
		for i := range r.pc.rules.Items {
			if &r.pc.rules.Items[i] == m.Item {
				index = i
			}
		}
		key := m.Key
		if m.Parent != nil {
			key = m.Parent // the limit key the per_model entry is under
		}
		b.WriteString("rule_item=")
		b.WriteString(strconv.Itoa(index))
		b.WriteString("; key=")
		appendScopeValue(&b, key.Key)
	}
	if m.Model != "" { // a model limit: per_model, limit_by_model, limit_by_per_model
		b.WriteString("; model=")
		appendScopeValue(&b, m.Model)
	}
	return b.String()
}

// appendScopeValue writes a value into a scope header, percent-encoding
// what a header value cannot carry and what the format reserves.
func appendScopeValue(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s) && i < maxScopeValueBytes; i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == ';' || c == '%' || c == ',' || c == '"' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}
