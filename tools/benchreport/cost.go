package main

import (
	"bytes"
	"flag"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/internal/requestbody"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
	"github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin"
)

// Cost: one request through the plugin, Redis answered with canned replies.

// costCase is one request shape and configuration whose cost is measured.
type costCase struct {
	group   string      // the table it goes in
	name    string      // its row
	config  string      // the plugin configuration
	body    []byte      // the request body (nil: none)
	chunks  int         // the pieces the body comes in (0: one)
	headers [][2]string // request headers besides benchRequestHeaders
	windows int         // windows a charge call settles: the length of charge.lua's reply
	verdict []byte      // the admission's canned reply (nil: benchVerdict)
	calls   int         // Redis calls a request makes (0: none is checked, as for one event)
	play    workload
	// large: a body of hundreds of KiB, timed on fresh WASM VMs each round
	// for a fixed number of requests (see measureWASM).
	large     bool
	noasm     bool     // the plugin built with -tags noasm: the estimate without its WASM assembly
	events    [][]byte // the answer's events, one body chunk each (nil: streamEvents)
	keys      int      // x-api-key values the requests take in turn (0: benchRequestHeaders' one)
	benchTime string   // testing.Benchmark's run length, as -benchtime
}

const (
	groupKinds  = "kinds"
	groupRules  = "rules"
	groupStream = "stream"
)

// tokenWindows are the two token windows of benchConfig, high enough that
// nothing is ever rejected.
const tokenWindows = `"token_per_minute": 100000000, "token_per_day": 1000000000`

// Budgets per model: a limit for each model within each key (per_model),
// or for each model across keys (limit_by_per_model), the model read from
// the header Higress's model router sets, or from the body.
const (
	modelFromHeader = `"model_source": ["header:x-higress-llm-model"],`
	perModel        = `, "per_model": [{"model": "*", "token_per_minute": 100000000}]`
	perModelConfig  = `{"rule_name": "chat", ` + modelFromHeader + ` "rule_items": [{"limit_by_per_model": "",
	"limit_keys": [{"key": "*", ` + tokenWindows + `}]}], "redis": {"service_name": "redis.static"}}`
)

// The quota endpoint and the admin API configured: each request's path is
// compared with theirs.
const (
	firstKindsCase = "two token windows (minute, day)"
	// headlineCase is the request users send most: a chat completion
	// streamed as the official OpenAI SDK sends it (with its Content-Length;
	// stream_usage: inject asks it for its usage), limited by two token
	// windows; headlineChunkedCase is the same as some proxies pass it on.
	headlineCase        = "the default streaming request: a 1 KiB body with its Content-Length, as the OpenAI SDK sends it, the stream asked for its usage (stream_usage: inject, the default), two token windows"
	headlineChunkedCase = "the same sent chunked, without Content-Length (the body in 4 pieces, as some proxies pass it on)"
	headlineChunks      = 4
	// sdkStreamCase is the request of the outside measurement issue 56
	// cites (../shared/measurements/independent-cpu.md): the OpenAI SDK's
	// streamed chat with a one-line prompt, one token window per API key.
	sdkStreamCase = "the OpenAI SDK's streamed chat as an outside measurement sends it: a 93-byte body in one piece without Content-Length, " +
		"50 API keys in turn, one token window each (limit_by_per_header), 50 one-delta events, then the usage and [DONE]"
	sdkStreamConfig = `{"rule_name": "chat", "rule_items": [{"limit_by_per_header": "x-api-key",
	"limit_keys": [{"key": "*", "token_per_minute": 1099511627776}]}], "redis": {"service_name": "redis.static", "service_port": 6379}}`
	sdkStreamKeys = 50
	endpointsCase = "the same + quota_path and admin.path configured (limit_overrides off)"
	endpointsOn   = `"quota_path": "/v1/quota", "admin": {"path": "/atrl", "consumer": "ops"},`
)

var modelHeader = [][2]string{{"x-higress-llm-model", "gpt-4o"}}

// Money: a usd_per_day window beside the token windows, every model at one
// price, or priced by model (the body read for its model).
const (
	moneyCase     = "two token windows + a money window (usd_per_day; pricing \"*\")"
	usdWindow     = `, "usd_per_day": 1000000`
	anyPrice      = `"pricing": {"*": {"input": 2.5, "output": 10}},`
	pricesByModel = `"pricing": {"gpt-4o": {"input": 2.5, "output": 10}, "*": {"input": 1, "output": 4}},`
)

// Fallbacks: a spent gpt-4o minute served by gpt-4o-mini. The admission
// call carries both candidates; its reply says which was served.
const (
	fallbackCase = "model_fallbacks: a consumer's per-model limit with a fallback, the model from a 1 KiB body, served as asked"
	fallbacks    = `"model_fallbacks": {"gpt-4o": ["gpt-4o-mini"]},`
)

// fallbackVerdict is benchVerdict from a call with fallbacks that served
// candidate served.
func fallbackVerdict(served int) []byte {
	v := bytes.Replace(benchVerdict, []byte("*9\r\n"), []byte("*11\r\n"), 1)
	return fmt.Appendf(v, ":%d\r\n:-1\r\n", served)
}

// keyConfig limits every "sk-" x-api-key like benchConfig, with other limits
// and top-level fields.
func keyConfig(topLevel, limits string) string {
	return `{"rule_name": "chat", ` + topLevel + ` "rule_items": [{"limit_by_header": "x-api-key",
	"limit_keys": [{"key": "regexp:^sk-", ` + limits + `}]}], "redis": {"service_name": "redis.static"}}`
}

// costCases lists what the report times: each kind of limit, rule counts,
// and one event of a stream. Cases that bench_test.go also runs use its
// configurations, so the numbers compare.
func costCases(s reportScale) []costCase {
	kinds := []costCase{
		headline(),
		{name: headlineChunkedCase, config: benchConfig, body: []byte(requestbody.Conversation(1 << 10)), chunks: headlineChunks, windows: 2},
		sdkStream(),
		{name: firstKindsCase, config: benchConfig, windows: 2},
		{name: "the same with the circuit breaker off (redis.breaker_failures: 0; on by default, as in every other row)",
			config: withBreakerOff(benchConfig), windows: 2},
		{name: endpointsCase, config: keyConfig(endpointsOn, tokenWindows), windows: 2},
		{name: "the same + limit_overrides: true (the subject's overrides read at admission)",
			config: keyConfig(endpointsOn+`"limit_overrides": true,`, tokenWindows), windows: 2},
		{name: "the same + a request window (query_per_minute)", config: keyConfig("", tokenWindows+`, "query_per_minute": 100000`), windows: 3},
		{name: "the same + a concurrency limit (max_concurrent_requests)", config: keyConfig("", tokenWindows+`, "max_concurrent_requests": 1000`), windows: 2},
		{name: "two sliding token windows (window_type: sliding)", config: keyConfig(`"window_type": "sliding",`, tokenWindows), windows: 2},
		{name: "token_reservation, 1 KiB body", config: benchReservationConfig, body: []byte(requestbody.Conversation(1 << 10)), windows: 2},
		{name: "token_reservation, 16 KiB body", config: benchReservationConfig, body: []byte(requestbody.Conversation(16 << 10)), windows: 2},
		{name: "token_reservation, 16 KiB body, stream_usage: off (the stream not asked for its usage)", config: withStreamUsageOff(benchReservationConfig), body: []byte(requestbody.Conversation(16 << 10)), windows: 2},
		withName(withConfig(headline(), withStreamUsageOff(benchConfig)), "the default streaming request (the first row) with stream_usage: off"),
		{name: "a stream asked for its usage (stream_usage: inject, the default), 16 KiB body", config: benchConfig, body: []byte(requestbody.Conversation(16 << 10)), windows: 2},
		{name: "the same, 16 KiB body, stream_usage: off", config: withStreamUsageOff(benchConfig), body: []byte(requestbody.Conversation(16 << 10)), windows: 2},
		{name: agentBodyCase(64, false), config: benchReservationConfig, body: []byte(requestbody.Agent(64 << 10)), windows: 2, large: true},
		{name: agentBodyCase(64, true), config: benchReservationConfig, body: []byte(requestbody.Agent(64 << 10)), windows: 2, large: true, noasm: true},
		{name: agentBodyCase(256, false), config: benchReservationConfig, body: []byte(requestbody.Agent(256 << 10)), windows: 2, large: true},
		{name: agentBodyCase(256, true), config: benchReservationConfig, body: []byte(requestbody.Agent(256 << 10)), windows: 2, large: true, noasm: true},
		{name: "everything at once (2 sliding token windows, a request window, a concurrency limit)", config: benchAllLimitsConfig, windows: 3},
		{name: "over_limit_action: queue, admitted at once", config: benchQueueConfig, windows: 2},
		{name: "a consumer and its per-model limit (per_model; the model from a header, as behind Higress's model router)",
			config: keyConfig(modelFromHeader, tokenWindows+perModel), headers: modelHeader, windows: 3},
		{name: "a model across consumers (limit_by_per_model; the model from a header)",
			config: perModelConfig, headers: modelHeader, windows: 2},
		{name: "a consumer and its per-model limit, the model from a 1 KiB body",
			config: keyConfig("", tokenWindows+perModel), body: []byte(requestbody.Conversation(1 << 10)), windows: 3},
		{name: fallbackCase, config: keyConfig(fallbacks, tokenWindows+perModel), body: []byte(requestbody.Conversation(1 << 10)), windows: 3,
			verdict: fallbackVerdict(0)},
		{name: "the same, served as the fallback (its body rewritten to name it, X-TokenRateLimit-Fallback)",
			config: keyConfig(fallbacks, tokenWindows+perModel), body: []byte(requestbody.Conversation(1 << 10)), windows: 3,
			verdict: fallbackVerdict(1)},
		{name: "two token windows, the last 30 % of each kept for priority high (priority, reserve): a low request",
			config: keyConfig(`"priority": {"levels": ["high", "low"]},`, tokenWindows+`, "reserve": {"high": 30}`), windows: 2},
		{name: moneyCase, config: keyConfig(anyPrice, tokenWindows+usdWindow), windows: 3},
		{name: "money priced by model (pricing per model: the model read from a 1 KiB body before admission)",
			config: keyConfig(pricesByModel, tokenWindows+usdWindow), body: []byte(requestbody.Conversation(1 << 10)), windows: 3},
		{name: "the same as two token windows + a month (token_per_month, calendar.time_zone Europe/Berlin)",
			config: keyConfig(`"calendar": {"time_zone": "Europe/Berlin"},`, tokenWindows+`, "token_per_month": 1000000000000`), windows: 3},
	}
	var cases []costCase
	for _, c := range kinds {
		c.group, c.calls, c.play = groupKinds, 2, wholeRequests
		cases = append(cases, c)
	}
	cases = append(cases, hierarchyCases()...)
	for _, n := range s.ruleCounts {
		cases = append(cases, firstMatchCase(n))
	}
	for _, n := range s.ruleCounts {
		cases = append(cases, allMatchCase(n))
	}
	cases = append(cases, costCase{group: groupStream, name: "one SSE content event of an admitted stream",
		config: benchConfig, windows: 2, play: contentEvents})
	for i := range cases {
		cases[i].benchTime = s.benchTime
		if cases[i].large {
			cases[i].benchTime = s.largeBenchTime
		}
	}
	return cases
}

// headline is the first row: the default streaming request.
func headline() costCase {
	body := []byte(requestbody.Conversation(1 << 10))
	return costCase{name: headlineCase, config: benchConfig, body: body, windows: 2,
		headers: [][2]string{{"content-length", strconv.Itoa(len(body))}}}
}

// sdkStream is the outside measurement's request (sdkStreamCase).
func sdkStream() costCase {
	return costCase{name: sdkStreamCase, config: sdkStreamConfig, body: []byte(sdkStreamBody), windows: 1,
		events: sdkStreamEvents(), keys: sdkStreamKeys}
}

// withConfig is a case with another configuration.
func withConfig(c costCase, config string) costCase {
	c.config = config
	return c
}

// withName is a case under another name.
func withName(c costCase, name string) costCase {
	c.name = name
	return c
}

// hierarchyCases are an org > team > key hierarchy (rule_match_mode all,
// each level from its own header, a token window each): on a Redis Cluster
// (the default, one call per slot: three each way) and on one Redis
// (redis.cluster false: one call each way).
func hierarchyCases() []costCase {
	config := func(redis string) string {
		level := func(header string) string {
			return `{"limit_by_per_header": "` + header + `", "limit_keys": [{"key": "*", "token_per_day": 1000000000}]}`
		}
		return `{"rule_name": "chat", "rule_match_mode": "all", "rule_items": [` + level("x-org-id") + `, ` + level("x-team-id") + `, ` +
			level("x-api-key") + `], "redis": {"service_name": "redis.static"` + redis + `}}`
	}
	headers := [][2]string{{"x-org-id", "org-1"}, {"x-team-id", "team-1"}}
	return []costCase{
		{group: groupKinds, play: wholeRequests, name: "org > team > key, a token window each (rule_match_mode all), on a Redis Cluster: a call per level each way",
			config: config(""), headers: headers, windows: 1, calls: 6},
		{group: groupKinds, play: wholeRequests, name: "the same on one Redis (redis.cluster: false): one call each way",
			config: config(`, "cluster": false`), headers: headers, windows: 3, calls: 2},
	}
}

// withBreakerOff is config with the circuit breaker off, so that its cost
// with Redis healthy shows beside the default.
func withBreakerOff(config string) string {
	const redis = `"service_name": "redis.static"`
	if !strings.Contains(config, redis) {
		panic("withBreakerOff: unexpected configuration " + config)
	}
	return strings.Replace(config, redis, redis+`, "breaker_failures": 0`, 1)
}

// withStreamUsageOff is config with stream_usage: off, so that the cost of
// asking streams for their usage shows beside the default.
func withStreamUsageOff(config string) string {
	if !strings.HasPrefix(config, `{"rule_name": "chat",`) {
		panic("withStreamUsageOff: unexpected configuration " + config)
	}
	return strings.Replace(config, `{"rule_name": "chat",`, `{"rule_name": "chat", "stream_usage": "off",`, 1)
}

// agentBodyCase names a row of a reservation with an agent's body of kib
// KiB, the estimate with or without its WASM assembly.
func agentBodyCase(kib int, noasm bool) string {
	if noasm {
		return fmt.Sprintf("token_reservation, %d KiB agent body, estimate without its assembly (-tags noasm)", kib)
	}
	return fmt.Sprintf("token_reservation, %d KiB agent body", kib)
}

// firstMatchCase has n rule items on x-api-key, the first n-1 naming other
// tenants' exact keys and the last every "sk-" key: the request is matched
// against all n before one decides (rule_match_mode first).
func firstMatchCase(n int) costCase {
	items := make([]string, n)
	for i := range n - 1 {
		items[i] = fmt.Sprintf(`{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-tenant-%04d", %s}]}`, i, tokenWindows)
	}
	items[n-1] = `{"limit_by_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-", ` + tokenWindows + `}]}`
	return costCase{group: groupRules, name: fmt.Sprintf("%s, the last matches (first)", ruleItems(n)),
		config: rulesConfig(`"rule_match_mode": "first",`, items), windows: 2, calls: 2, play: wholeRequests}
}

// allMatchCase has n rule items, each on a header of its own that the
// request carries, all applying (rule_match_mode all): n subjects. The
// plugin sends one call per Redis Cluster slot, so the headers are chosen
// with subjects in n different slots, as n subjects spread over a cluster
// are: n calls at admission and n at the end (a canned reply also has to
// fit the subjects of its call).
func allMatchCase(n int) costCase {
	const value = "tier-1"
	var items []string
	var headers [][2]string
	slots := map[uint16]bool{}
	for i := 0; len(headers) < n; i++ {
		name := fmt.Sprintf("x-layer-%d", i)
		slot := cachekey.Slot(cachekey.AppendSubject(nil, "chat", "limit_by_header", name, value))
		if slots[slot] {
			continue
		}
		slots[slot] = true
		headers = append(headers, [2]string{name, value})
		items = append(items, fmt.Sprintf(`{"limit_by_header": %q, "limit_keys": [{"key": "*", %s}]}`, name, tokenWindows))
	}
	return costCase{group: groupRules, name: fmt.Sprintf("%s, all match (all)", ruleItems(n)),
		config: rulesConfig(`"rule_match_mode": "all",`, items), headers: headers, windows: 2, calls: 2 * n, play: wholeRequests}
}

func ruleItems(n int) string {
	if n == 1 {
		return "1 rule item"
	}
	return fmt.Sprintf("%d rule items", n)
}

func rulesConfig(topLevel string, items []string) string {
	return `{"rule_name": "chat", ` + topLevel + ` "rule_items": [` + strings.Join(items, ",\n") +
		`], "redis": {"service_name": "redis.static"}}`
}

// workload plays a case on a host: it prepares before the clock starts (and
// reports what one request sends to Redis), and returns the operation timed.
type workload func(b *testing.B, h *cannedHost, c costCase) (probe redisTraffic, step func())

// redisTraffic is what one request sends to Redis.
type redisTraffic struct {
	calls int // round trips
	bytes int // query bytes
}

// wholeRequests times bench_test.go's full request: headers (and body),
// admission, a 50-event stream, the charge, the end.
func wholeRequests(b *testing.B, h *cannedHost, c costCase) (redisTraffic, func()) {
	events := c.events
	if events == nil {
		events = streamEvents()
	}
	body := pieces(c.body, c.chunks)
	before := h.calls
	sent := fullRequestWithChunks(b, h, body, events) // also the warm-up
	probe := redisTraffic{calls: h.calls - before, bytes: sent}
	return probe, func() { fullRequestWithChunks(b, h, body, events) }
}

// contentEvents opens an admitted stream, as BenchmarkContentEventWASM does,
// and times one content event of it.
func contentEvents(b *testing.B, h *cannedHost, _ costCase) (redisTraffic, func()) {
	id := h.InitializeHttpContext()
	h.CallOnRequestHeaders(id, benchRequestHeaders, false)
	answerCanned(h, id, benchVerdict)
	if h.GetCurrentHttpStreamAction(id) != types.ActionContinue {
		b.Fatal("stream not admitted")
	}
	h.CallOnResponseHeaders(id, benchResponseHeaders, false)
	return redisTraffic{}, func() { h.CallOnResponseBody(id, benchContentEvent, false) }
}

// cannedHost is the emulator as bench_test.go's helpers drive it, fitted to
// a case: requests carry the case's extra headers, a charge gets a canned
// reply with one total per window of the case (the helpers answer every
// charge with benchCharged, which has two), Redis calls are counted, and
// the pending calls of a context are listed in a copy (see
// GetRedisCalloutAttributesFromContext).
type cannedHost struct {
	proxytest.HostEmulator
	requestHeaders [][2]string // sent instead of benchRequestHeaders
	// keyHeaders, when set, are sent in turn instead of requestHeaders: the
	// same headers with each x-api-key value of the case.
	keyHeaders   [][][2]string
	requests     int
	verdictReply []byte // sent instead of benchVerdict (nil: it)
	chargeReply  []byte
	calls        int
}

func newCannedHost(host proxytest.HostEmulator, c costCase) *cannedHost {
	reply := fmt.Appendf(nil, "*%d\r\n", c.windows)
	for range c.windows {
		reply = append(reply, ":1801\r\n"...)
	}
	h := &cannedHost{HostEmulator: host, chargeReply: reply, verdictReply: c.verdict,
		requestHeaders: append(slices.Clip(benchRequestHeaders), c.headers...)}
	for i := range c.keys {
		headers := slices.Clone(h.requestHeaders)
		for j := range headers {
			if headers[j][0] == "x-api-key" {
				headers[j][1] = fmt.Sprintf("cpu-%d", i)
			}
		}
		h.keyHeaders = append(h.keyHeaders, headers)
	}
	return h
}

func (h *cannedHost) CallOnRequestHeaders(id uint32, _ [][2]string, endOfStream bool) types.Action {
	headers := h.requestHeaders
	if len(h.keyHeaders) > 0 {
		headers = h.keyHeaders[h.requests%len(h.keyHeaders)]
	}
	h.requests++
	return h.HostEmulator.CallOnRequestHeaders(id, headers, endOfStream)
}

func (h *cannedHost) CallOnRedisCallResponse(id uint32, status int32, reply []byte) {
	h.calls++
	if bytes.Equal(reply, benchCharged) {
		reply = h.chargeReply
	}
	if h.verdictReply != nil && bytes.Equal(reply, benchVerdict) {
		reply = h.verdictReply
	}
	h.HostEmulator.CallOnRedisCallResponse(id, status, reply)
}

// complaints are the plugin's warnings and errors: a canned reply that does
// not fit, a failed charge. A measured request must have none.
func (h *cannedHost) complaints() []string {
	return slices.Concat(h.GetWarnLogs(), h.GetErrorLogs(), h.GetCriticalLogs())
}

// timeRun starts an emulator with the case on a VM and times the case's
// operation with testing.Benchmark for the case's bench time; it returns the
// time per operation and what one request sent to Redis.
func timeRun(t tb, vm types.VMContext, c costCase) (nsPerOp float64, traffic redisTraffic) {
	t.Helper()
	if err := flag.Set("test.benchtime", c.benchTime); err != nil {
		t.Fatalf("bench time %q: %v", c.benchTime, err)
	}
	host, stop := startCanned(t, vm, c.config)
	defer stop()
	h := newCannedHost(host, c)
	result := testing.Benchmark(func(b *testing.B) {
		var step func()
		traffic, step = c.play(b, h, c)
		b.ResetTimer()
		for range b.N {
			step()
		}
	})
	if result.N == 0 { // testing.Benchmark discards the failure's message
		t.Fatalf("%s: the request failed inside the benchmark (not resumed, or admitted without a charge); the plugin logged %q",
			c.name, h.complaints())
	}
	if complaints := h.complaints(); len(complaints) > 0 {
		t.Fatalf("%s: the plugin complained (a canned reply that does not fit?): %q", c.name, complaints)
	}
	return float64(result.T.Nanoseconds()) / float64(result.N), traffic
}

// costSamples are the timed runs of one case in one mode, in ns/op; the
// i-th of each was timed in the same round, one right after the other.
type costSamples struct {
	baseline []float64 // the do-nothing plugin
	plugin   []float64
}

// ratio is the median, over rounds, of the plugin's time over the
// do-nothing plugin's in the same round. Paired so, a round in which the
// machine was slower for both counts as one ratio, not as a slow baseline
// set against another round's plugin: the median of the times of each
// plugin can come from rounds far apart.
func (s costSamples) ratio() float64 {
	return median(paired(s, func(plugin, baseline float64) float64 { return plugin / baseline }))
}

// added is the median, over rounds, of the plugin's time less the
// do-nothing plugin's in the same round.
func (s costSamples) added() float64 {
	return median(paired(s, func(plugin, baseline float64) float64 { return plugin - baseline }))
}

// paired applies f to the plugin's and the do-nothing plugin's time of
// each round.
func paired(s costSamples, f func(plugin, baseline float64) float64) []float64 {
	out := make([]float64, min(len(s.plugin), len(s.baseline)))
	for i := range out {
		out[i] = f(s.plugin[i], s.baseline[i])
	}
	return out
}

// vmPair is the do-nothing plugin's VM and the plugin's, for one round.
type vmPair struct{ baseline, plugin types.VMContext }

// measureRuns times a case rounds times on the plugin and on the baseline,
// alternating (ABBA: which goes first swaps every round) so that the
// machine's drift hits both alike; vmsFor gives the VMs of each round.
func measureRuns(t tb, rounds int, c costCase, vmsFor func(round int) vmPair) (costSamples, redisTraffic) {
	t.Helper()
	var s costSamples
	var traffic redisTraffic
	for round := range rounds {
		vms := vmsFor(round)
		timeBaseline := func() {
			ns, _ := timeRun(t, vms.baseline, c)
			s.baseline = append(s.baseline, ns)
		}
		pluginFirst := round%2 == 1
		if !pluginFirst {
			timeBaseline()
		}
		ns, probe := timeRun(t, vms.plugin, c)
		s.plugin, traffic = append(s.plugin, ns), probe
		if pluginFirst {
			timeBaseline()
		}
	}
	if c.calls > 0 && traffic.calls != c.calls {
		t.Fatalf("%s: %d Redis calls per request, want %d", c.name, traffic.calls, c.calls)
	}
	return s, traffic
}

// costRow is one case's results.
type costRow struct {
	c       costCase
	wasm    costSamples
	native  costSamples
	traffic redisTraffic
	allocs  [2]float64 // allocations per request (or event): the do-nothing plugin's, the plugin's (see allocs.go)
}

// measureCosts times every case in WASM mode, then in Go mode, each plugin
// against the do-nothing plugin compiled the same way.
func measureCosts(t tb, s reportScale, native goVMs) []costRow {
	if reflect.TypeOf(native.plugin) == reflect.TypeOf(native.noop) {
		t.Fatalf("the Go-mode plugin and do-nothing VM contexts are both a %T: Go mode would time one plugin against itself", native.plugin)
	}
	cases := costCases(s)
	rows := make([]costRow, len(cases))
	for i, c := range cases {
		rows[i].c = c
	}
	measureWASM(t, s, rows)
	for i := range rows {
		var traffic redisTraffic
		rows[i].native, traffic = measureRuns(t, s.rounds, rows[i].c, func(int) vmPair { return vmPair{native.noop, native.plugin} })
		// The bytes may differ by a few characters a call: lease and
		// admission marker ids (up to two in a call) end in a base-36 counter
		// of the ids a VM has drawn, and in Go mode that counter is the
		// process's, millions by the last cases (4 or 5 digits), where a
		// fresh WASM VM's has 2 or 3.
		if wasm := rows[i].traffic; traffic.calls != wasm.calls || abs(traffic.bytes-wasm.bytes) > 8*wasm.calls {
			t.Errorf("%s: Go mode sends %+v to Redis, WASM mode %+v", rows[i].c.name, traffic, wasm)
		}
		rows[i].allocs = [2]float64{guestAllocs(t, native.noop, rows[i].c), guestAllocs(t, native.plugin, rows[i].c)}
	}
	return rows
}

// measureWASM times every case with the plugin and the do-nothing plugin
// compiled to WASM, each HTTP context deleted at its end as a gateway does
// (newVM). At full scale each case gets fresh VMs, and a case with
// large bodies fresh VMs for each round and a fixed number of requests per
// run: a module's memory keeps the size its largest body made it.
func measureWASM(t tb, s reportScale, rows []costRow) {
	noopModule := buildWasm(t, noopplugin.WASM)
	pluginModule := buildWasm(t, wasmbuild.Plugin)
	noasmModule := buildWasm(t, wasmbuild.Plugin, "noasm")
	var vms []proxytest.WasmVMContext
	closeVMs := func() {
		for _, vm := range vms {
			vm.Close()
		}
		vms = nil
	}
	defer closeVMs()
	fresh := func(c costCase) vmPair {
		closeVMs()
		if c.noasm {
			vms = compileVMs(t, noopModule, noasmModule)
		} else {
			vms = compileVMs(t, noopModule, pluginModule)
		}
		if !c.large {
			warmUp(t, c, vms[0], vms[1])
		}
		return vmPair{vms[0], vms[1]}
	}
	stale := true // no VMs yet, or those of a large case
	for i := range rows {
		c := rows[i].c
		var current vmPair
		if stale || s.vmPerCase || c.large {
			current = fresh(c)
		} else {
			current = vmPair{vms[0], vms[1]}
		}
		stale = c.large
		rounds := s.rounds
		if c.name == headlineCase || c.name == headlineChunkedCase || c.name == sdkStreamCase {
			rounds = s.headlineRounds // the figures held to a target: more runs, a steadier median
		}
		rows[i].wasm, rows[i].traffic = measureRuns(t, rounds, c, func(round int) vmPair {
			if c.large && round > 0 && s.vmPerCase {
				current = fresh(c)
			}
			return current
		})
		t.Logf("WASM, %s: %s, do-nothing %s", c.name, micros(median(rows[i].wasm.plugin)), micros(median(rows[i].wasm.baseline)))
	}
}

// warmUpRequests are run on freshly compiled VMs before a case is timed.
const warmUpRequests = "300x"

// warmUp runs a case untimed on each VM, so that the first timed run does
// not pay for what a module does once (its heap growing to the size the
// case keeps it at, each growth a copy of its memory in wazero), and
// collects the host's own garbage (compiling a module leaves hundreds of
// MB), whose collection would otherwise run beside the first runs.
func warmUp(t tb, c costCase, vms ...types.VMContext) {
	t.Helper()
	c.benchTime = warmUpRequests
	for _, vm := range vms {
		timeRun(t, vm, c)
	}
	runtime.GC()
}

// compileVMs compiles modules side by side: each takes seconds on one core.
func compileVMs(t tb, modules ...[]byte) []proxytest.WasmVMContext {
	vms := make([]proxytest.WasmVMContext, len(modules))
	errs := make([]error, len(modules))
	var wg sync.WaitGroup
	for i, m := range modules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vms[i], errs[i] = newVM(m)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("compiling a WASM module: %v", err)
		}
	}
	return vms
}
