package limiter_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
)

// TestSoak sends SOAK_REQUESTS requests (default 2,000; `make proof` sends
// 100,000) with random subjects, bodies, response formats, chunkings and
// outcomes through the plugin compiled to WASM, against a real redis-server,
// and holds Redis to what the README says each request costs:
//
//   - a reported usage is charged exactly, in the configured cost;
//   - a response that ends without usage (the client went away, or a 2xx
//     that reports none) is charged an estimate: its prompt estimate plus
//     the output text it carried, at bytes_per_token; with
//     token_reservation, one cut short pays at least its reservation; a
//     non-2xx without usage costs nothing (gives its reservation back);
//   - a request no rule matches is not touched;
//   - a request whose client resets while its admission is with Redis
//     costs nothing (its admission is cancelled, whether Redis runs it
//     before or after the cancel).
//
// An eighth of the request bodies end with trailers instead of the end of
// the stream. After every request the day bucket of each subject it was charged to must
// hold exactly the sum the test computed from what the requests did; at the
// end every counter in Redis is compared with it. The four configurations
// run side by side in one plugin, one per route (the wrapper's _rules_), so
// one WASM module sees the whole mix. Each stream ends as in Envoy, with
// proxy_on_log. Half the charges sent with a last chunk are answered only
// once the stream is gone: Redis runs them, and their reply is dropped, as a
// gateway drops the reply to a call of a gone stream; SOAK_REPLIES=delivered
// answers them all while the stream lives (calls sent from proxy_on_log, by
// aborted streams, can only be answered after it either way). SOAK_SEED=<n>
// replays a run.
func TestSoak(t *testing.T) {
	n := soakDefaultRequests
	if v := os.Getenv("SOAK_REQUESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			t.Fatalf("SOAK_REQUESTS=%q: want an integer ≥ 10", v)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: want an unsigned integer", v)
		}
	}
	t.Logf("%d requests, seed %d (SOAK_SEED=%d SOAK_REQUESTS=%d go test -run '^TestSoak$' . replays this run)", n, seed, seed, n)

	redis := redistest.Start(t)
	redis.SetClock(soakClock) // every charge of the run lands in the same day bucket
	s := startSoak(t, redis, seed)
	defer s.stop()
	if !s.dropReplies {
		t.Log("SOAK_REPLIES=delivered: every charge's reply arrives while its stream lives")
	}

	began := time.Now()
	for i := 0; i < n; i++ {
		s.play(i)
		if done := i + 1; done%max(n/10, 1) == 0 || done == n {
			elapsed := time.Since(began)
			t.Logf("%7d requests  %6.1f s  %6.0f req/s", done, elapsed.Seconds(), float64(done)/elapsed.Seconds())
		}
	}
	wall := time.Since(began)

	s.checkEveryCounter()
	s.checkNoFailures()

	var total int64
	for _, v := range s.want {
		total += v
	}
	t.Logf("outcomes: %s", s.outcomeSummary())
	t.Logf("subjects: %d; tokens charged in Redis: %d (equal to the sum expected, subject by subject); requests counted: %d",
		len(s.want), total, sumValues(s.wantRequests))
	t.Logf("wall time %.1f s, %.0f requests/s", wall.Seconds(), float64(n)/wall.Seconds())
}

const (
	soakDefaultRequests = 2000
	soakLimit           = 1_000_000_000_000 // every window: nothing is ever rejected
	// soakDay is 2026-01-01; the clock stands at 12:00:00.25 of it, so every
	// charge goes into one day bucket (and one hour bucket) per subject. (Redis
	// still expires keys on its own clock: a bucket lives until its window's
	// end as seen from the test clock, so minute buckets vanish after about a
	// minute of real time and are not checked.)
	soakDay   = 20454
	soakClock = soakDay*86400 + 12*3600 + 0.25
)

// soakConfig is one plugin configuration with one rule per route.
//
//	soak-a: rule_match_mode first, no reservation; exact, regexp and "*"
//	        keys on a header, a shared counter and counters per value.
//	soak-b: every matching item (the default) with token_reservation: a
//	        tenant (with a request window), the client IP behind one
//	        trusted proxy, a tier (with a concurrency limit), and 10.0.0.0/8
//	        again in an item of its own (with a request window), which
//	        names the same subject as the IP item: counted once; small
//	        bodies_per_token and max_body_bytes so that some bodies are
//	        estimated by size.
//	soak-c: weighted cost with a per-model override, and token_reservation.
//	soak-d: a global threshold, weighted cost with a per-model override,
//	        no reservation (the body is read for its model only).
var soakConfig = strings.NewReplacer("LIMIT", strconv.FormatInt(soakLimit, 10)).Replace(`{"_rules_": [
	{"_match_route_": ["soak-a"], "rule_name": "soak-a", "rule_match_mode": "first",
	 "rule_items": [
		{"limit_by_header": "x-api-key", "limit_keys": [
			{"key": "sk-gold", "token_per_hour": LIMIT, "token_per_day": LIMIT},
			{"key": "regexp:^sk-team-[a-c]$", "token_per_day": LIMIT}]},
		{"limit_by_per_header": "x-api-key", "limit_keys": [
			{"key": "regexp:^sk-user-", "token_per_minute": LIMIT, "token_per_day": LIMIT, "query_per_day": LIMIT},
			{"key": "*", "token_per_day": LIMIT}]}],
	 "redis": {"service_name": "redis.static", "timeout": 1000}},
	{"_match_route_": ["soak-b"], "rule_name": "soak-b", "xff_num_trusted_hops": 1,
	 "token_reservation": {"enabled": true, "bytes_per_token": 3, "default_completion_tokens": 300, "max_body_bytes": 16384},
	 "rule_items": [
		{"limit_by_per_header": "x-tenant", "limit_keys": [{"key": "*", "token_per_day": LIMIT, "query_per_day": LIMIT}]},
		{"limit_by_per_ip": "from-header-x-forwarded-for", "limit_keys": [
			{"key": "10.0.0.0/8", "token_per_hour": LIMIT, "token_per_day": LIMIT},
			{"key": "0.0.0.0/0", "token_per_day": LIMIT},
			{"key": "::/0", "token_per_day": LIMIT}]},
		{"limit_by_header": "x-tier", "limit_keys": [
			{"key": "free", "token_per_day": LIMIT},
			{"key": "pro", "token_per_day": LIMIT, "max_concurrent_requests": 1000}]},
		{"limit_by_per_ip": "from-header-x-forwarded-for", "limit_keys": [
			{"key": "10.0.0.0/8", "token_per_day": LIMIT, "query_per_day": LIMIT}]}],
	 "redis": {"service_name": "redis.static", "timeout": 1000}},
	{"_match_route_": ["soak-c"], "rule_name": "soak-c",
	 "token_reservation": {"enabled": true, "max_body_bytes": 20000},
	 "token_count_strategy": "weighted",
	 "token_weights": {"input": 1, "output": 4, "cache_read": 0.1, "cache_creation": 1.25,
		"models": {"claude-opus-4": {"input": 5, "output": 25, "cache_read": 0.5}}},
	 "rule_items": [
		{"limit_by_per_consumer": "", "limit_keys": [
			{"key": "regexp:^team-", "token_per_day": LIMIT},
			{"key": "*", "token_per_day": LIMIT}]}],
	 "redis": {"service_name": "redis.static", "timeout": 1000}},
	{"_match_route_": ["soak-d"], "rule_name": "soak-d",
	 "token_count_strategy": "weighted",
	 "token_weights": {"input": 2, "output": 8, "cache_read": 0.25, "cache_creation": 2.5,
		"models": {"gpt-4o-mini": {"input": 0.15, "output": 0.6, "cache_read": 0.075}}},
	 "global_threshold": {"token_per_day": LIMIT},
	 "redis": {"service_name": "redis.static", "timeout": 1000}}]}`)

// soakWeights are token weights in thousandths: input (uncached), output,
// cache read, cache creation. The test computes weighted costs in integers.
type soakWeights [4]int64

// soakRoute is what the test knows of one route's configuration, written
// out by hand from soakConfig.
type soakRoute struct {
	name    string
	share   int                    // percent of the requests
	reserve *estimate.Options      // token_reservation (nil: off)
	weights map[string]soakWeights // weighted cost by model, "" the defaults (nil: total_tokens)
	pick    func(r *rand.Rand) soakMatch
	models  []string // what the request bodies name ("" for no model)
}

// soakMatch is a request's headers and the subjects the README says they match.
type soakMatch struct {
	headers  [][2]string
	subjects []string // the subjects charged (none: no rule applies)
	counted  []string // those of them with a request window
}

var soakRoutes = []soakRoute{
	{name: "soak-a", share: 35, pick: pickSoakA, models: []string{"gpt-4o"}},
	{name: "soak-b", share: 25, pick: pickSoakB, models: []string{"gpt-4o"},
		reserve: &estimate.Options{BytesPerToken: 3, DefaultCompletionTokens: 300, MaxBodyBytes: 16384}},
	{name: "soak-c", share: 20, pick: pickSoakC, models: []string{"claude-sonnet-4", "claude-opus-4", ""},
		reserve: &estimate.Options{DefaultCompletionTokens: 1024, MaxBodyBytes: 20000, ModelOfLargeBodies: true}, // the calibrated count
		weights: map[string]soakWeights{"": {1000, 4000, 100, 1250}, "claude-opus-4": {5000, 25000, 500, 1250}}},
	{name: "soak-d", share: 20, pick: pickSoakD, models: []string{"gpt-4o", "gpt-4o-mini"},
		weights: map[string]soakWeights{"": {2000, 8000, 250, 2500}, "gpt-4o-mini": {150, 600, 75, 2500}}},
}

// soakSubject is the Redis key of a subject as the README describes it:
// atrl:{<rule>|<limit type>|<source>|<value>}, a part that is longer than 64
// bytes, not printable ASCII, holds '{', '}' or '|', or starts with '#'
// replaced by '#' and 32 hex digits of its SHA-256.
func soakSubject(rule, limitType, source, value string) string {
	part := func(s string) string {
		plain := len(s) <= 64 && !strings.HasPrefix(s, "#")
		for i := 0; i < len(s) && plain; i++ {
			plain = s[i] >= 0x20 && s[i] <= 0x7e && s[i] != '{' && s[i] != '}' && s[i] != '|'
		}
		if plain {
			return s
		}
		sum := sha256.Sum256([]byte(s))
		return "#" + hex.EncodeToString(sum[:])[:32]
	}
	return "atrl:{" + part(rule) + "|" + part(limitType) + "|" + part(source) + "|" + part(value) + "}"
}

// soakOddKeys are x-api-key values whose subject key is hashed.
var soakOddKeys = []string{strings.Repeat("sk-long-", 10), "sk|pipe", "sk-{brace}", "#sk-hash", "sk-caf\xc3\xa9"}

func pickSoakA(r *rand.Rand) soakMatch {
	const rule = "soak-a"
	var v string
	switch n := r.IntN(100); {
	case n < 10:
		v = "sk-gold"
	case n < 25:
		v = "sk-team-" + string(rune('a'+r.IntN(4))) // a to c share one counter; d has its own
	case n < 65:
		v = fmt.Sprintf("sk-user-%d", r.IntN(40))
	case n < 82:
		v = fmt.Sprintf("anon-%d", r.IntN(25))
	case n < 88:
		v = soakOddKeys[r.IntN(len(soakOddKeys))]
	default:
		return soakMatch{} // no x-api-key: no rule applies
	}
	m := soakMatch{headers: [][2]string{{"x-api-key", v}}}
	switch {
	case v == "sk-gold":
		m.subjects = []string{soakSubject(rule, "limit_by_header", "x-api-key", "sk-gold")}
	case v >= "sk-team-a" && v <= "sk-team-c":
		m.subjects = []string{soakSubject(rule, "limit_by_header", "x-api-key", "regexp:^sk-team-[a-c]$")}
	default:
		s := soakSubject(rule, "limit_by_per_header", "x-api-key", v)
		m.subjects = []string{s}
		if strings.HasPrefix(v, "sk-user-") {
			m.counted = []string{s}
		}
	}
	return m
}

// soakClients are client addresses as a proxy writes them into
// X-Forwarded-For, and the subject the README says counts (an IPv6
// client's /64).
var soakClients = [][2]string{
	{"10.1.2.3", "10.1.2.3"}, {"10.200.0.9:5123", "10.200.0.9"}, {"::ffff:10.9.8.7", "10.9.8.7"},
	{"203.0.113.7", "203.0.113.7"}, {"198.51.100.20", "198.51.100.20"},
	{"2001:db8::5", "2001:db8::/64"}, {"[2001:db8::a]:443", "2001:db8::/64"},
}

// soakPeer is the connection's peer, which counts when X-Forwarded-For has
// fewer entries than xff_num_trusted_hops + 1.
const soakPeer = "192.0.2.1"

func pickSoakB(r *rand.Rand) soakMatch {
	const rule = "soak-b"
	var m soakMatch
	if r.IntN(10) < 8 {
		tenant := fmt.Sprintf("tenant-%d", r.IntN(12))
		m.headers = append(m.headers, [2]string{"x-tenant", tenant})
		s := soakSubject(rule, "limit_by_per_header", "x-tenant", tenant)
		m.subjects = append(m.subjects, s)
		m.counted = append(m.counted, s)
	}
	c := soakClients[r.IntN(len(soakClients))]
	ip := c[1]
	switch r.IntN(4) {
	case 0: // the client wrote an entry of its own; the trusted proxy appended the client and itself
		m.headers = append(m.headers, [2]string{"x-forwarded-for", fmt.Sprintf("198.18.%d.%d, %s, 172.16.0.1", r.IntN(256), r.IntN(256), c[0])})
	case 1:
		m.headers = append(m.headers, [2]string{"x-forwarded-for", c[0] + ",172.16.0.1"})
	case 2: // only the proxy: too few entries, the peer counts
		m.headers = append(m.headers, [2]string{"x-forwarded-for", "172.16.0.1"})
		ip = soakPeer
	default:
		ip = soakPeer
	}
	ipSubject := soakSubject(rule, "limit_by_per_ip", "x-forwarded-for", ip)
	m.subjects = append(m.subjects, ipSubject)
	if strings.HasPrefix(ip, "10.") { // the last item's too: the same subject, counted once
		m.counted = append(m.counted, ipSubject)
	}
	switch n := r.IntN(10); {
	case n < 4:
		m.headers = append(m.headers, [2]string{"x-tier", "free"})
		m.subjects = append(m.subjects, soakSubject(rule, "limit_by_header", "x-tier", "free"))
	case n < 7:
		m.headers = append(m.headers, [2]string{"x-tier", "pro"})
		m.subjects = append(m.subjects, soakSubject(rule, "limit_by_header", "x-tier", "pro"))
	case n < 8:
		m.headers = append(m.headers, [2]string{"x-tier", "enterprise"}) // no key matches: the item does not apply
	}
	return m
}

func pickSoakC(r *rand.Rand) soakMatch {
	var v string
	switch n := r.IntN(10); {
	case n < 6:
		v = fmt.Sprintf("team-%d", r.IntN(6))
	case n < 9:
		v = []string{"alice", "bob", "carol"}[r.IntN(3)]
	default:
		return soakMatch{}
	}
	return soakMatch{headers: [][2]string{{"x-mse-consumer", v}},
		subjects: []string{soakSubject("soak-c", "limit_by_per_consumer", "x-mse-consumer", v)}}
}

func pickSoakD(*rand.Rand) soakMatch {
	return soakMatch{subjects: []string{soakSubject("soak-d", "global_threshold", "", "")}}
}

// soakUsage is a usage as the README normalises it: input includes cache
// reads and writes.
type soakUsage struct{ input, output, cacheRead, cacheCreation int64 }

// cost is what a usage costs on a route, by the README's rules: input +
// output, or, weighted, uncached input × input + output × output + cache
// reads × cache_read + cache writes × cache_creation, rounded up.
func (rt *soakRoute) cost(u soakUsage, model string) int64 {
	if rt.weights == nil {
		return u.input + u.output
	}
	w := rt.weightsFor(model)
	uncached := max(u.input-u.cacheRead-u.cacheCreation, 0)
	return ceilDiv1000(uncached*w[0] + u.output*w[1] + u.cacheRead*w[2] + u.cacheCreation*w[3])
}

// reservation is what the route reserves for a request so estimated: the
// prompt and completion estimates, weighted as input and output.
func (rt *soakRoute) reservation(e estimate.Estimate, model string) int64 {
	if rt.weights == nil {
		return e.Prompt + e.Completion
	}
	w := rt.weightsFor(model)
	return ceilDiv1000(e.Prompt*w[0] + e.Completion*w[1])
}

// bytesPerToken is the route's token_reservation.bytes_per_token, 4 when
// it sets none: what output text costs.
func (rt *soakRoute) bytesPerToken() int64 {
	if rt.reserve != nil && rt.reserve.BytesPerToken > 0 {
		return rt.reserve.BytesPerToken
	}
	return 4
}

// promptEstimate is the prompt estimate the README says a response without
// usage pays: from the body where the plugin estimates it
// (token_reservation); else by its size (docs/estimates.md, "When a body
// is read": per-model weights read the body for its model alone), which
// the plugin knows from the body, read for its model or to ask for the
// stream's usage (every soak request with a body is a POST of JSON to
// /v1/chat/completions).
func (rt *soakRoute) promptEstimate(body []byte) int64 {
	if rt.reserve != nil {
		return estimate.Request(body, estimate.DialectOpenAIChat, *rt.reserve).Prompt
	}
	return (int64(len(body)) + 3) / 4
}

func (rt *soakRoute) weightsFor(model string) soakWeights {
	if w, ok := rt.weights[model]; ok {
		return w
	}
	return rt.weights[""]
}

func ceilDiv1000(n int64) int64 { return (n + 999) / 1000 }

// soakResponse is an upstream response body and where its usage objects end.
type soakResponse struct {
	status      int
	contentType string
	body        string
	usageEnds   []int       // offset just past the closing brace of the JSON value holding each usage object (a usage counts once that value is whole)
	usages      []soakUsage // the usage known once each of them has arrived
	texts       []soakText  // the output text it carries (string values of content and text)
	usageOnly   [2]int      // where its usage-only chunk (OpenAI, include_usage) starts and ends, if any
}

// soakText is a piece of output text in a response body: the raw bytes of
// (a part of) a JSON string value of a text key, and where they start.
type soakText struct {
	start int
	raw   string
}

// addText writes a piece of output text into b, noting where it is.
func (r *soakResponse) addText(b *strings.Builder, raw string) {
	r.texts = append(r.texts, soakText{start: b.Len(), raw: raw})
	b.WriteString(raw)
}

// textAt is how many bytes of output text a client has received with the
// first n bytes, as the README counts them: an escape counts one byte (the
// soak's text has only \" escapes), once its second byte has arrived.
func (r *soakResponse) textAt(n int) int64 {
	var text int64
	for _, t := range r.texts {
		raw := t.raw[:max(0, min(n-t.start, len(t.raw)))]
		for i := 0; i < len(raw); i++ {
			if raw[i] == '\\' {
				if i+1 == len(raw) {
					break
				}
				i++
			}
			text++
		}
	}
	return text
}

// usageAt is the usage a client has received with the first n bytes.
func (r *soakResponse) usageAt(n int) (soakUsage, bool) {
	var u soakUsage
	ok := false
	for i, end := range r.usageEnds {
		if n >= end {
			u, ok = r.usages[i], true
		}
	}
	return u, ok
}

// soakContent is a piece of generated text; now and then it quotes a usage
// object, which must not count.
func soakContent(r *rand.Rand, i int) string {
	if r.IntN(40) == 0 {
		return fmt.Sprintf(`quoted \"usage\": {\"prompt_tokens\": 999999, \"output_tokens\": %d} `, i)
	}
	return fmt.Sprintf("tok%d ", i)
}

func randomUsage(r *rand.Rand) (input, output, cached int64) {
	input = int64(math.Exp(r.Float64() * math.Log(200000)))
	if r.IntN(50) == 0 {
		input = 0
	}
	output = int64(r.IntN(8000))
	if r.IntN(3) == 0 {
		cached = r.Int64N(input + 1)
	}
	return input, output, cached
}

// openAIStreamResponse is an OpenAI chat completion stream, with the usage
// event (include_usage) or without.
func openAIStreamResponse(r *rand.Rand, withUsage bool) soakResponse {
	resp := soakResponse{status: 200, contentType: "text/event-stream"}
	var b strings.Builder
	for i := range r.IntN(40) {
		b.WriteString(`data: {"id":"chatcmpl-soak","object":"chat.completion.chunk","created":1767268800,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"`)
		resp.addText(&b, soakContent(r, i))
		b.WriteString(`"},"finish_reason":null}],"usage":null}` + "\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-soak","object":"chat.completion.chunk","created":1767268800,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n")
	if withUsage {
		p, c, cached := randomUsage(r)
		resp.usageOnly[0] = b.Len()
		b.WriteString(`data: {"id":"chatcmpl-soak","object":"chat.completion.chunk","created":1767268800,"model":"gpt-4o","choices":[],"usage":`)
		if cached > 0 {
			fmt.Fprintf(&b, `{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}`, p, c, p+c, cached)
		} else {
			fmt.Fprintf(&b, `{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, p, c, p+c)
		}
		b.WriteString("}")
		resp.usageEnds = append(resp.usageEnds, b.Len())
		resp.usages = append(resp.usages, soakUsage{input: p, output: c, cacheRead: cached})
		b.WriteString("\n\n")
		resp.usageOnly[1] = b.Len()
	}
	b.WriteString("data: [DONE]\n\n")
	resp.body = b.String()
	return resp
}

// anthropicStreamResponse is an Anthropic Messages stream: input and cache
// tokens (and output_tokens 1) in message_start, the output in message_delta.
func anthropicStreamResponse(r *rand.Rand) soakResponse {
	resp := soakResponse{status: 200, contentType: "text/event-stream"}
	in, out, _ := randomUsage(r)
	var cacheRead, cacheCreation int64
	if r.IntN(2) == 0 {
		cacheRead = r.Int64N(50000)
	}
	if r.IntN(3) == 0 {
		cacheCreation = r.Int64N(20000)
	}
	var b strings.Builder
	b.WriteString(`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_soak","type":"message","role":"assistant","model":"claude-sonnet-4","content":[],"stop_reason":null,"usage":`)
	fmt.Fprintf(&b, `{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}`, in, cacheCreation, cacheRead)
	total := in + cacheCreation + cacheRead
	b.WriteString("}}")
	resp.usageEnds = append(resp.usageEnds, b.Len())
	resp.usages = append(resp.usages, soakUsage{input: total, output: 1, cacheRead: cacheRead, cacheCreation: cacheCreation})
	b.WriteString("\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range r.IntN(30) {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"")
		resp.addText(&b, soakContent(r, i))
		b.WriteString("\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":")
	fmt.Fprintf(&b, `{"output_tokens":%d}}`, out)
	resp.usageEnds = append(resp.usageEnds, b.Len())
	resp.usages = append(resp.usages, soakUsage{input: total, output: out, cacheRead: cacheRead, cacheCreation: cacheCreation})
	b.WriteString("\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	resp.body = b.String()
	return resp
}

// openAIJSONResponse is a whole OpenAI chat completion, with usage or without.
func openAIJSONResponse(r *rand.Rand, withUsage bool) soakResponse {
	resp := soakResponse{status: 200, contentType: "application/json"}
	var b strings.Builder
	b.WriteString(`{"id":"chatcmpl-soak","object":"chat.completion","created":1767268800,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	for i := range r.IntN(60) {
		resp.addText(&b, soakContent(r, i))
	}
	b.WriteString(`"},"finish_reason":"stop"}]`)
	if withUsage {
		p, c, cached := randomUsage(r)
		b.WriteString(`,"usage":`)
		fmt.Fprintf(&b, `{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0}}`, p, c, p+c, cached)
		resp.usages = append(resp.usages, soakUsage{input: p, output: c, cacheRead: cached})
	}
	b.WriteString(`,"system_fingerprint":"fp_soak"}`)
	if withUsage {
		resp.usageEnds = append(resp.usageEnds, b.Len())
	}
	resp.body = b.String()
	return resp
}

func errorResponse(r *rand.Rand) soakResponse {
	status := []int{400, 429, 500, 502, 503}[r.IntN(5)]
	return soakResponse{status: status, contentType: "application/json",
		body: fmt.Sprintf(`{"error":{"message":"upstream failed","type":"server_error","code":%d}}`, status)}
}

// Outcomes of a request.
const (
	outCompleted       = iota // the response ended normally with its usage
	outNoUsage                // a 2xx that reported no usage
	outUpstreamError          // a non-2xx without usage
	outAbortedHeaders         // the client went away before the response headers
	outAbortedStream          // the client went away before the (last) usage object
	outNotLimited             // no rule applied (any response)
	outResetUnanswered        // the client reset before Redis answered the admission: cancelled, nothing charged
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"completed", "2xx without usage", "upstream non-2xx", "aborted before response headers", "aborted mid-stream", "no rule applied", "reset before the admission's answer"}

// soakRun is the plugin, Redis and what the test expects of them.
type soakRun struct {
	t     *testing.T
	redis *redistest.Server
	host  proxytest.HostEmulator
	stop  func()
	rng   *rand.Rand
	// dropReplies: half the charges sent with a response's last chunk get
	// their reply after the stream is gone (the default), rather than none.
	dropReplies bool

	want         map[string]int64 // tokens in each subject's day bucket
	wantRequests map[string]int64 // requests in each counted subject's day bucket
	leased       []string         // subjects with a concurrency limit
	outcomes     [numOutcomes]int
	partial      int // aborted Anthropic streams that had sent message_start's usage
	byRoute      map[string]int
	unmatched    int // requests that matched no rule item, which the plugin warns of
}

// startSoak starts the plugin compiled to WASM (TestMain built it) in the
// host emulator, logging at info level, as a gateway runs it.
func startSoak(t *testing.T, redis *redistest.Server, seed uint64) *soakRun {
	t.Helper()
	wasm, err := os.ReadFile(os.Getenv("WASM_FILE_PATH"))
	if err != nil {
		t.Fatalf("reading the module TestMain built: %v", err)
	}
	log.SetOutput(io.Discard) // the emulator prints every Redis call
	vm, err := wasmhost.NewVM(wasm, wasmhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, stopEmulator := plugintest.StartEmulator(t, vm, soakConfig)
	s := &soakRun{t: t, redis: redis, host: host,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), want: map[string]int64{},
		wantRequests: map[string]int64{}, byRoute: map[string]int{},
		leased:      []string{soakSubject("soak-b", "limit_by_header", "x-tier", "pro")},
		dropReplies: os.Getenv("SOAK_REPLIES") != "delivered"}
	s.stop = func() {
		stopEmulator()
		vm.Close()
		log.SetOutput(os.Stderr)
	}
	if err := host.SetProperty([]string{"source", "address"}, []byte(soakPeer+":40000")); err != nil {
		s.stop()
		t.Fatal(err)
	}
	return s
}

// dayKey is the day bucket of a subject's token window.
func dayKey(subject string) string { return fmt.Sprintf("%s:t86400:%d", subject, soakDay) }

// check compares a subject's day bucket with what it should hold.
func (s *soakRun) check(subject string, want int64, when string, i int, what string) {
	if got := s.redis.Int("GET", dayKey(subject)); got != want {
		s.t.Fatalf("request %d (%s), %s: subject %s holds %d tokens in its day bucket, expected %d",
			i, what, when, subject, got, want)
	}
}

// play sends one random request through the plugin and checks every subject
// it was charged to.
func (s *soakRun) play(i int) {
	r := s.rng
	rt := pickRoute(r)
	m := rt.pick(r)
	s.byRoute[rt.name]++
	if len(m.subjects) == 0 {
		s.unmatched++ // the plugin may warn of it (rate-limited)
	}
	model := rt.models[r.IntN(len(rt.models))]
	body := soakRequestBody(r, model)

	// The cost the README predicts. The model of a JSON body counts for
	// weights, however large the body: with per-model weights, one larger
	// than max_body_bytes is still read for its model.
	weightsModel := ""
	if len(body) > 0 && body[0] == '{' {
		weightsModel = model
	}
	var reserved int64
	if rt.reserve != nil {
		reserved = rt.reservation(estimate.Request(body, estimate.DialectOpenAIChat, *rt.reserve), weightsModel)
	}

	outcome, resp, delivered := soakOutcome(r)
	what := fmt.Sprintf("route %s, headers %q, %d-byte body, model %q, %s, status %d, %d of %d response bytes",
		rt.name, m.headers, len(body), model, outcomeNames[outcome], resp.status, delivered, len(resp.body))

	if err := s.host.SetProperty([]string{"route_name"}, []byte(rt.name)); err != nil {
		s.t.Fatal(err)
	}
	id := s.host.InitializeHttpContext()
	headers := append([][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
		{":path", "/v1/chat/completions"}, {"content-type", "application/json"}}, m.headers...)
	// Now and then the client resets while the admission is with Redis.
	resetUnanswered := r.IntN(40) == 0
	action := s.host.CallOnRequestHeaders(id, headers, body == nil)
	if action == types.HeaderStopAllIterationAndWatermark { // paused for Redis: no body reaches it before the answer
		if resetUnanswered {
			s.resetUnanswered(i, what, id, m)
			return
		}
		s.redis.Answer(s.host, id)
	}
	// The body, in chunks; now and then it ends with trailers, not with
	// the end of the stream.
	trailers := len(body) > 0 && r.IntN(8) == 0
	prev := 0
	for _, end := range cutRandomly(r, string(body), 3) {
		s.host.CallOnRequestBody(id, body[prev:end], end == len(body) && !trailers)
		prev = end
	}
	if trailers {
		s.host.CallOnRequestTrailers(id, [][2]string{{"x-request-checksum", "soak"}})
	}
	if resetUnanswered && len(s.host.GetRedisCalloutAttributesFromContext(id)) > 0 {
		s.resetUnanswered(i, what, id, m)
		return
	}
	s.redis.Answer(s.host, id)
	if s.host.GetSentLocalResponse(id) != nil || s.host.GetCurrentHttpStreamAction(id) != types.ActionContinue {
		s.t.Fatalf("request %d (%s) was not let through: %+v", i, what, s.host.GetSentLocalResponse(id))
	}
	for _, subject := range m.subjects {
		s.check(subject, s.want[subject]+reserved, "after admission", i, what)
	}

	// The response, as far as the client gets it.
	status := resp.status
	if outcome == outAbortedHeaders {
		status = 0
	} else {
		s.host.CallOnResponseHeaders(id, [][2]string{{":status", strconv.Itoa(resp.status)}, {"content-type", resp.contentType}}, false)
		complete := delivered == len(resp.body)
		chunks := cutRandomly(r, resp.body[:delivered], 12)
		if complete && r.IntN(4) == 0 {
			chunks = append(chunks, -1) // the end of the stream comes as an empty chunk
		}
		prev = 0
		var got strings.Builder
		for j, end := range chunks {
			last := complete && j == len(chunks)-1
			var chunk []byte
			if end >= 0 {
				chunk = []byte(resp.body[prev:end])
				prev = end
			}
			s.host.CallOnResponseBody(id, chunk, last)
			got.Write(s.host.GetCurrentResponseBody(id))
		}
		// The client gets the body as the upstream sent it, but for the
		// usage-only chunk of a stream the plugin asked for its usage (a
		// limited request with a JSON body: every such soak body streams
		// without asking).
		want := resp.body
		if len(m.subjects) > 0 && len(body) > 0 && body[0] == '{' && resp.usageOnly[1] > 0 {
			want = want[:resp.usageOnly[0]] + want[resp.usageOnly[1]:]
		}
		if complete && got.String() != want {
			s.t.Fatalf("request %d (%s): the client got\n%q\nnot\n%q", i, what, got.String(), want)
		}
	}
	// The end of the stream. A charge sent with the last chunk is answered
	// while the stream lives, or, at random (never with
	// SOAK_REPLIES=delivered), only after the gateway has destroyed the
	// stream: Redis runs the call and the gateway drops its reply, as the
	// README says. A call sent from on_log (an aborted stream) can only be
	// answered then.
	dropped := s.dropReplies && r.IntN(2) == 0
	if !dropped {
		s.redis.Answer(s.host, id)
	}
	s.host.CompleteHttpContext(id)
	s.redis.Answer(s.host, id)
	// A stream that ended without its last chunk is charged from the next
	// tick, from the plugin's own context.
	s.host.Tick()
	for s.redis.Answer(s.host, proxytest.PluginContextID) > 0 {
	}

	// What it cost, by the README. Whatever usage arrived counts, also
	// from a stream cut short, which pays at least its reservation: an
	// Anthropic stream cut after message_start pays the larger of what
	// message_start reported and its estimate. Without usage, a response
	// pays its estimate: the prompt's and the output text received, and
	// cut short, at least its reservation.
	var cost int64
	failed := status >= 300 || status != 0 && status < 200
	aborted := outcome == outAbortedHeaders || outcome == outAbortedStream
	if u, ok := resp.usageAt(delivered); ok && outcome != outAbortedHeaders {
		cost = rt.cost(u, weightsModel)
		if aborted && !failed {
			cost = max(cost, reserved)
		}
	} else if !failed {
		var text int64
		if outcome != outAbortedHeaders {
			text = resp.textAt(delivered)
		}
		bytesPerToken := rt.bytesPerToken()
		output := (text + bytesPerToken - 1) / bytesPerToken
		cost = rt.cost(soakUsage{input: rt.promptEstimate(body), output: output}, weightsModel)
		if aborted {
			cost = max(cost, reserved)
		}
	}
	if outcome == outAbortedStream && len(resp.usages) > 1 && delivered >= resp.usageEnds[0] {
		s.partial++
	}
	if len(m.subjects) == 0 {
		outcome = outNotLimited
	}
	s.outcomes[outcome]++
	for _, subject := range m.subjects {
		s.want[subject] += cost
		s.check(subject, s.want[subject], "after the stream ended", i, what)
	}
	for _, subject := range m.counted {
		s.wantRequests[subject]++
	}
}

// resetUnanswered plays a client that resets while its admission is with
// Redis: the gateway drops Redis's answer, and the plugin cancels the
// admission from its next tick, which reaches Redis before or after the
// admission itself. Either way the request costs nothing: no tokens, no
// request count, no lease.
func (s *soakRun) resetUnanswered(i int, what string, id uint32, m soakMatch) {
	cancelFirst := s.rng.IntN(2) == 0
	s.host.CompleteHttpContext(id)
	if cancelFirst {
		s.tickAndAnswer()
	}
	s.redis.Answer(s.host, id) // Redis runs the admission; its answer goes nowhere
	s.tickAndAnswer()
	s.outcomes[outResetUnanswered]++
	for _, subject := range m.subjects {
		s.check(subject, s.want[subject], "after a reset before the admission's answer", i, what+", reset before Redis answered")
	}
}

// tickAndAnswer ticks the plugin and answers what it sends from its own
// context.
func (s *soakRun) tickAndAnswer() {
	s.host.Tick()
	for s.redis.Answer(s.host, proxytest.PluginContextID) > 0 {
	}
}

func pickRoute(r *rand.Rand) *soakRoute {
	n := r.IntN(100)
	for i := range soakRoutes {
		if n -= soakRoutes[i].share; n < 0 {
			return &soakRoutes[i]
		}
	}
	return &soakRoutes[len(soakRoutes)-1]
}

// soakOutcome draws what happens to a request: its response, and how many
// bytes of it the client gets before the stream ends.
func soakOutcome(r *rand.Rand) (outcome int, resp soakResponse, delivered int) {
	streamWithUsage := func() soakResponse {
		switch r.IntN(3) {
		case 0:
			return openAIStreamResponse(r, true)
		case 1:
			return anthropicStreamResponse(r)
		}
		return openAIJSONResponse(r, true)
	}
	switch n := r.IntN(100); {
	case n < 68:
		resp = streamWithUsage()
		return outCompleted, resp, len(resp.body)
	case n < 74:
		if r.IntN(2) == 0 {
			resp = openAIStreamResponse(r, false)
		} else {
			resp = openAIJSONResponse(r, false)
		}
		return outNoUsage, resp, len(resp.body)
	case n < 82:
		resp = errorResponse(r)
		return outUpstreamError, resp, len(resp.body)
	case n < 84:
		return outAbortedHeaders, streamWithUsage(), 0
	default:
		// Cut anywhere before the last usage object has fully arrived.
		resp = streamWithUsage()
		return outAbortedStream, resp, r.IntN(resp.usageEnds[len(resp.usageEnds)-1])
	}
}

// soakRequestBody is a request body: none, not JSON, or a chat completion of
// one of internal/requestbody's shapes, with a random size, model and
// output cap (or none).
func soakRequestBody(r *rand.Rand, model string) []byte {
	switch n := r.IntN(100); {
	case n < 8:
		return nil
	case n < 11:
		return []byte(strings.Repeat("not json; ", 1+r.IntN(300)))
	}
	size := int(math.Exp(math.Log(40) + r.Float64()*(math.Log(24<<10)-math.Log(40))))
	var body string
	switch r.IntN(3) {
	case 0:
		body = requestbody.Conversation(size)
	case 1:
		body = requestbody.ShortTurns(size)
	default:
		body = requestbody.Dense(size)
	}
	modelField := ""
	if model != "" {
		modelField = `"model":"` + model + `",`
	}
	capField := ""
	if r.IntN(4) > 0 {
		capField = fmt.Sprintf(`"max_tokens":%d,`, 1+r.IntN(8192))
	}
	body = strings.Replace(body, `"model":"gpt-4o",`, modelField, 1)
	body = strings.Replace(body, `"max_tokens":1024,`, capField, 1)
	return []byte(body)
}

// cutRandomly returns the ends of up to maxChunks random chunks of s, the
// last being len(s); none for an empty s.
func cutRandomly(r *rand.Rand, s string, maxChunks int) []int {
	if len(s) == 0 {
		return nil
	}
	k := 1 + r.IntN(min(maxChunks, len(s)))
	if r.IntN(200) == 0 {
		k = min(len(s), 200) // now and then, very many small chunks
	}
	ends := make([]int, 0, k)
	for range k - 1 {
		ends = append(ends, 1+r.IntN(len(s)-1))
	}
	slices.Sort(ends)
	ends = slices.Compact(append(ends, len(s)))
	return ends
}

var (
	soakKeyPattern    = regexp.MustCompile(`^(atrl:\{[^}]*\}):(t\d+|q\d+|c)(?::(\d+))?$`)
	soakMarkerPattern = regexp.MustCompile(`^atrl:\{[^}]*\}:[xa]:[A-Za-z0-9_.-]+$`) // charge and admission markers (charge.lua, admit.lua)
)

// checkEveryCounter compares every counter in Redis with the expected sums:
// day and hour token buckets, day request buckets, and empty lease sets.
func (s *soakRun) checkEveryCounter() {
	t := s.t
	for _, key := range s.redis.Keys("*") {
		if key == "atrl:vms" { // the VMs' numbers (lease.go)
			continue
		}
		if soakMarkerPattern.MatchString(key) {
			if ttl := s.redis.Int("TTL", key); ttl == -1 { // 0: under half a second left; -2: expired since KEYS
				t.Fatalf("marker %s does not expire (TTL %d)", key, ttl)
			}
			continue
		}
		p := soakKeyPattern.FindStringSubmatch(key)
		if p == nil {
			t.Fatalf("unexpected key in Redis: %s", key)
		}
		subject, window, bucket := p[1], p[2], p[3]
		_, known := s.want[subject]
		if !known {
			t.Fatalf("key %s: no request was charged to subject %s", key, subject)
		}
		switch window {
		case "t86400", "t3600":
			if bucket != strconv.Itoa(soakDay*86400/windowSeconds(window)+12*3600/windowSeconds(window)) {
				t.Fatalf("key %s: a bucket other than the test clock's", key)
			}
			if got := s.redis.Int("GET", key); got != s.want[subject] {
				t.Fatalf("subject %s: %s holds %d tokens, expected %d", subject, key, got, s.want[subject])
			}
		case "q86400":
			if got := s.redis.Int("GET", key); got != s.wantRequests[subject] {
				t.Fatalf("subject %s: %s counted %d requests, expected %d", subject, key, got, s.wantRequests[subject])
			}
		case "c":
			if !slices.Contains(s.leased, subject) {
				t.Fatalf("key %s: a lease set of a subject without a concurrency limit", key)
			}
			if n := s.redis.Int("ZCARD", key); n != 0 {
				t.Fatalf("subject %s: %d leases still held after every request ended", subject, n)
			}
		}
	}
	for subject, want := range s.want {
		if got := s.redis.Int("GET", dayKey(subject)); got != want {
			t.Fatalf("subject %s: its day bucket holds %d tokens, expected %d", subject, got, want)
		}
	}
	for subject, want := range s.wantRequests {
		if got := s.redis.Int("GET", fmt.Sprintf("%s:q86400:%d", subject, soakDay)); got != want {
			t.Fatalf("subject %s: its request day bucket holds %d, expected %d", subject, got, want)
		}
	}
}

func windowSeconds(window string) int {
	n, _ := strconv.Atoi(window[1:])
	return n
}

// checkNoFailures asserts that no Redis call failed: the plugin warns of
// every failed admission or charge. It also warns, at most once every 10 s
// per route, of requests no rule item matched, which the soak sends on
// purpose: those lines are allowed, by number, at most one per such
// request. (Neither their text nor the 10 s can be relied on here: the host
// emulator keeps a WASM module's log lines as views of its memory, which
// the module reuses, and 10 s of the machine's clock may or may not pass.)
// Failed charges and admissions also show in the exact counters
// (checkEveryCounter).
func (s *soakRun) checkNoFailures() {
	if w := s.host.GetWarnLogs(); len(w) > s.unmatched {
		s.t.Fatalf("the plugin warned %d times (%d requests matched no rule item), first: %q", len(w), s.unmatched, w[0])
	}
	if e := s.host.GetErrorLogs(); len(e) > 0 {
		s.t.Fatalf("the plugin logged %d errors, first: %s", len(e), e[0])
	}
}

func (s *soakRun) outcomeSummary() string {
	var parts []string
	for o, n := range s.outcomes {
		part := fmt.Sprintf("%s %d", outcomeNames[o], n)
		if o == outAbortedStream {
			part += fmt.Sprintf(" (%d of them Anthropic streams cut after message_start's usage)", s.partial)
		}
		parts = append(parts, part)
	}
	routes := make([]string, 0, len(soakRoutes))
	for _, rt := range soakRoutes {
		routes = append(routes, fmt.Sprintf("%s %d", rt.name, s.byRoute[rt.name]))
	}
	return strings.Join(parts, ", ") + "; by route: " + strings.Join(routes, ", ")
}

func sumValues(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
