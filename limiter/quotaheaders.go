package limiter

import (
	"strconv"
	"strings"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// The quota headers (quota_headers) a limited request's response carries,
// and its rejection: each form the configuration lists. Each limit, remaining
// and reset a form writes together are one window's (appendQuotaHeaders
// chooses it, here only):
//
//   - tokenratelimit: X-TokenRateLimit-Limit, -Remaining and -Reset (seconds)
//     of the limit that decides: on a success the tightest token window,
//     else request window, else concurrency limit, else money window (as
//     admit.lua's better orders them); on a rejection the closed one that
//     has room last (a money window's values in dollars), whose wait
//     Retry-After and retry-after-ms say too (see reject).
//   - openai: x-ratelimit-{limit,remaining,reset}-tokens of the tightest
//     token window and -requests of the tightest request window, the reset
//     written as OpenAI writes it ("6m0s", "1s", "20ms"); on a rejection
//     the closed window among them shows remaining 0 and its wait. A
//     rejection by a limit the form has no header for (dollars, requests in
//     progress) carries none of it: see openAINames.
//   - ietf: RateLimit-Policy, one item per window (and concurrency limit) of
//     every subject the request matched, and RateLimit, the tightest window
//     of each kind, each item its own window's remaining and reset, and on a
//     rejection by a concurrency limit that limit
//     (draft-ietf-httpapi-ratelimit-headers-11).
//
// Remaining counts what this request took at admission: one request in
// request windows, and its reservation in token and money windows with
// token_reservation (without, its tokens are charged when it ends, after
// these headers left).

// OpenAI's quota headers: a prefix, then "tokens" or "requests".
const (
	headerOpenAILimit     = "x-ratelimit-limit-"
	headerOpenAIRemaining = "x-ratelimit-remaining-"
	headerOpenAIReset     = "x-ratelimit-reset-"
)

// The IETF quota headers, and the quota units of their policies (requests
// are the draft's default unit, left out).
const (
	headerRateLimitPolicy = "RateLimit-Policy"
	headerRateLimit       = "RateLimit"
)

// kindQuota is the tightest window of one kind among every group of a
// request (budget.Verdict.ByKind), and the group it is in (nil: none).
type kindQuota struct {
	budget.Tightest
	g *group
}

// noteByKind merges a group's tightest window of each kind into the
// admission's: the one with the least left, then the later reset.
func (a *admission) noteByKind(g *group, v budget.Verdict) {
	if v.ByKind == nil {
		return
	}
	if a.byKind == nil {
		a.byKind = new([budget.KindUSD + 1]kindQuota)
	}
	for k, t := range v.ByKind {
		cur := &a.byKind[k]
		if t.Limit > 0 && (cur.g == nil || t.Remaining < cur.Remaining || t.Remaining == cur.Remaining && t.ResetMs > cur.ResetMs) {
			*cur = kindQuota{Tightest: t, g: g}
		}
	}
}

// appendQuotaHeaders appends the configured quota headers for v, the
// verdict that decided the request (rejected: the closed limit; a
// rejection carries X-TokenRateLimit-Reset and Retry-After already).
func (a *admission) appendQuotaHeaders(rules *config.Config, dst [][2]string, v budget.Verdict, rejected bool) [][2]string {
	forms := rules.QuotaHeaders
	if forms&config.QuotaHeadersTokenRateLimit != 0 && v.Limit > 0 {
		remaining := v.Remaining
		if rejected {
			remaining = 0
		}
		dst = append(dst, [2]string{HeaderLimit, quotaValue(v.Kind, v.Limit)}, [2]string{HeaderRemaining, quotaValue(v.Kind, remaining)})
		if !rejected {
			dst = append(dst, [2]string{HeaderReset, strconv.FormatInt(v.Reset, 10)})
		}
	}
	if forms&config.QuotaHeadersOpenAI != 0 && a.byKind != nil && (!rejected || openAINames(v.Kind)) {
		for _, k := range [...]budget.Kind{budget.KindTokens, budget.KindRequests} {
			q := &a.byKind[k]
			if q.g == nil {
				continue
			}
			unit := "tokens"
			if k == budget.KindRequests {
				unit = "requests"
			}
			dst = append(dst,
				[2]string{headerOpenAILimit + unit, strconv.FormatInt(q.Limit, 10)},
				[2]string{headerOpenAIRemaining + unit, strconv.FormatInt(q.Remaining, 10)},
				[2]string{headerOpenAIReset + unit, openAIDuration(q.ResetMs)})
		}
	}
	if forms&config.QuotaHeadersIETF != 0 {
		if policy := a.ratelimitPolicy(rules); policy != "" {
			dst = append(dst, [2]string{headerRateLimitPolicy, policy})
		}
		if current := a.ratelimit(rules, v, rejected); current != "" {
			dst = append(dst, [2]string{headerRateLimit, current})
		}
	}
	return dst
}

// openAINames says whether OpenAI's form has headers for a limit of kind
// k: tokens and requests; not dollars, nor requests in progress. A
// rejection by a limit it cannot name leaves the form out: its windows,
// which have room, beside a 429 read as "not limited", and a remaining 0
// with the closed limit's wait beside a token window's limit would mix two
// limits. The SDKs wait by retry-after-ms and Retry-After, and stop at
// x-should-retry, which name the closed limit; so do the X-TokenRateLimit
// form and RateLimit.
func openAINames(k budget.Kind) bool {
	return k == budget.KindTokens || k == budget.KindRequests
}

// openAIDuration writes milliseconds as OpenAI writes a reset: Go's
// duration format ("6m0s", "1.5s", "20ms", "0s").
func openAIDuration(ms int64) string {
	return (time.Duration(min(max(ms, 0), maxResetMs)) * time.Millisecond).String()
}

// maxResetMs bounds a reset from Redis before it becomes a duration: a
// year, far past any window's length.
const maxResetMs = 366 * 86400 * 1000

// ratelimitPolicy is the RateLimit-Policy value: an item per window and
// concurrency limit of each subject the request matched, in the order they
// were matched, e.g. "item0.token_per_minute";q=1000;w=60;qu="tokens".
func (a *admission) ratelimitPolicy(rules *config.Config) string {
	var b strings.Builder
	item := func(g *group, subject, window int, field string, quota, seconds int64, unit string) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		writePolicyID(&b, rules, g, subject, window, field)
		b.WriteString(";q=")
		b.WriteString(strconv.FormatInt(quota, 10))
		if seconds > 0 {
			b.WriteString(";w=")
			b.WriteString(strconv.FormatInt(seconds, 10))
		}
		if unit != "" { // requests are the draft's default unit
			b.WriteString(`;qu="`)
			b.WriteString(unit)
			b.WriteByte('"')
		}
	}
	for gi := range a.groups {
		g := &a.groups[gi]
		for si, s := range g.subjects {
			for j, w := range s.Windows { // each limit as its share open to the request's priority level
				item(g, si, j, w.Field, config.Share(g.limitInForce(si, j, w.Limit), s.Open(j)), w.Seconds, policyUnits[w.Unit])
			}
			if s.Concurrent > 0 {
				item(g, si, -1, concurrencyField, config.Share(g.limitInForce(si, -1, s.Concurrent), s.Open(-1)), 0, "concurrency")
			}
		}
	}
	return b.String()
}

// limitInForce is the limit of window j (-1: the concurrency limit) of
// the group's subject si: the override its admission found
// (limit_overrides), else the configured one.
func (g *group) limitInForce(si, j int, configured int64) int64 {
	for _, o := range g.verdict.Overridden {
		if o.Subject == si && o.Window == j {
			return o.Limit
		}
	}
	return configured
}

// policyUnits are the quota units of the policies of windows, by unit.
var policyUnits = [...]string{config.UnitTokens: "tokens", config.UnitRequests: "", config.UnitUSD: "nanodollars"}

// concurrencyField names a concurrency limit in a policy id.
const concurrencyField = "max_concurrent_requests"

// ratelimit is the RateLimit value: the tightest window of each kind, as
// "<policy id>";r=<remaining>;t=<seconds to its reset>, and on a
// rejection by a concurrency limit, that limit (r=0;t=1).
func (a *admission) ratelimit(rules *config.Config, v budget.Verdict, rejected bool) string {
	var b strings.Builder
	item := func(g *group, subject, window int, field string, remaining, seconds int64) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		writePolicyID(&b, rules, g, subject, window, field)
		b.WriteString(";r=")
		b.WriteString(strconv.FormatInt(remaining, 10))
		b.WriteString(";t=")
		b.WriteString(strconv.FormatInt(seconds, 10))
	}
	if a.byKind != nil {
		for _, k := range [...]budget.Kind{budget.KindTokens, budget.KindRequests, budget.KindUSD} {
			if q := &a.byKind[k]; q.g != nil {
				item(q.g, q.Subject, q.Window, q.g.subjects[q.Subject].Windows[q.Window].Field, q.Remaining, (q.ResetMs+999)/1000)
			}
		}
	}
	if rejected && v.Kind == budget.KindConcurrent && a.rejectedBy != nil {
		item(a.rejectedBy, v.Subject, -1, concurrencyField, 0, 1)
	}
	return b.String()
}

// writePolicyID writes the id of a policy (a structured-field string): what
// the limit's match limits by ("global", "unmatched", or "item<i>" for
// the rule item at index i of rule_items), its model for a model limit,
// then the limit's field ("token_per_minute"). The limit is window j of
// the subject (-1: its concurrency limit), whose match is the one it is
// from where the subject is shared (see config.Shared).
func writePolicyID(b *strings.Builder, rules *config.Config, g *group, subject, window int, field string) {
	m := limitFrom(&g.matches[subject], window)
	b.WriteByte('"')
	switch {
	case m.Unmatched:
		b.WriteString("unmatched")
	case m.Item == nil:
		b.WriteString("global")
	default:
		b.WriteString("item")
		b.WriteString(strconv.Itoa(itemIndex(rules, m.Item)))
	}
	if m.Model != "" {
		b.WriteByte('.')
		writeSFStringChars(b, m.Model)
	}
	b.WriteByte('.')
	b.WriteString(field)
	b.WriteByte('"')
}

// writeSFStringChars writes what a structured-field string may hold of s
// (printable ASCII but '"' and '\'; anything else as '_'), at most
// maxScopeValueBytes bytes: a model name comes from the client.
func writeSFStringChars(b *strings.Builder, s string) {
	for i := 0; i < len(s) && i < maxScopeValueBytes; i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == '"' || c == '\\' {
			c = '_'
		}
		b.WriteByte(c)
	}
}

// itemIndex is the index of a rule item in rule_items (-1: not one).
func itemIndex(rules *config.Config, item *config.RuleItem) int {
	for i := range rules.Items {
		if &rules.Items[i] == item {
			return i
		}
	}
	return -1
}
