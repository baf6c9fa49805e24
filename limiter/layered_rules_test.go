package limiter_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// Layered rules: every rule item a request matches applies (rule_match_mode
// all, the default, as in Higress 2.2.4), global_threshold together with
// rule_items, and one subject counted once when several matches name it.
// Through the plugin, Go and WASM mode, on a real redis-server.

// Three items of three types (consumer, client IP, a header) match one
// request: each is charged, one used up rejects it and none is charged for
// the rejection, and another client on another IP is unaffected, with and
// without reservation.
func TestLayeredRulesAllApply(t *testing.T) {
	redis := redistest.Start(t)
	layered := func(extra string) string {
		return `{"rule_name": "layers", "rule_match_mode": "all", ` + extra + `"rule_items": [
			{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 100000}]},
			{"limit_by_per_ip": "from-remote-addr", "limit_keys": [{"key": "0.0.0.0/0", "token_per_minute": 1000}]},
			{"limit_by_header": "x-tier", "limit_keys": [{"key": "free", "token_per_day": 50000}]}],
			` + plugintest.RedisSection + `}`
	}
	consumer := "atrl:{layers|limit_by_per_consumer|x-mse-consumer|alice}"
	ip := "atrl:{layers|limit_by_per_ip||192.0.2.1}"
	tier := "atrl:{layers|limit_by_header|x-tier|free}"
	counters := func(p *plugintest.Plugin) [3]int64 {
		return [3]int64{p.DayCounter(consumer), p.MinuteCounter(ip), p.DayCounter(tier)}
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 15)
		for _, mode := range []string{"check", "reserve"} {
			t.Run(mode, func(t *testing.T) {
				redis.Do("FLUSHALL")
				extra := ""
				if mode == "reserve" {
					extra = plugintest.ReservationOn
				}
				p := plugintest.Start(t, redis, layered(extra))
				require.NoError(t, p.Host.SetProperty([]string{"source", "address"}, []byte("192.0.2.1:40000")))
				alice := [][2]string{{"x-mse-consumer", "alice"}, {"x-tier", "free"}}

				x := p.SendBody(plugintest.ChatBody(100), alice...)
				assert.Len(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID), 3, "three subjects, three slots: one call each")
				x.Answer()
				require.True(t, x.Passed())
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 400, 600))...)
				assert.Equal(t, [3]int64{1000, 1000, 1000}, counters(p), "each rule is charged")

				// The IP's minute is used up (by alice herself): alice is held
				// back although her consumer and tier budgets are open.
				y := p.SendBody(plugintest.ChatBody(100), alice...).Answer()
				y.RequireRejected(429)
				y.DoneAndTick()
				assert.Equal(t, [3]int64{1000, 1000, 1000}, counters(p), "a rejected request charges none of them")

				// Another client on another IP is unaffected by that IP's cap.
				require.NoError(t, p.Host.SetProperty([]string{"source", "address"}, []byte("192.0.2.2:40000")))
				z := p.SendBody(plugintest.ChatBody(100), [2]string{"x-mse-consumer", "bob"}).Answer()
				assert.True(t, z.Passed())
				z.Done()
			})
		}
	})
}

// Issue 34: a drop-in for Higress 2.2.4 (PR #4011), whose ai-token-ratelimit
// applies every rule item a request matches, and global_threshold together
// with rule_items; and one subject counted once when several matches name
// it. TestHigress224 runs Higress's own test configurations where they fit
// (their configuration-level cases: config/higress_cases_test.go).

// higressStart is the test clock's second: mid-minute and mid-hour, so
// that the resets below are exact.
const higressStart = 1_767_225_600 + 30*60 + 20 // 2026-01-01 00:30:20 UTC

// respond500 answers a request with 300 prompt and 200 completion tokens.
func respond500(x *plugintest.Exchange) {
	x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(2, 300, 200))...)
}

func TestHigress224(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		t.Run("global_threshold and rule_items together: every request in the first, a match in both", func(t *testing.T) {
			higressHybrid(t, redis)
		})
		t.Run("two matching items: either used up rejects, both charged, the order of the items changes nothing", func(t *testing.T) {
			for _, swapped := range []bool{false, true} {
				t.Run("swapped="+strconv.FormatBool(swapped), func(t *testing.T) { higressTwoItems(t, redis, swapped) })
			}
		})
		t.Run("no matching item and no global threshold: no Redis call", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, higressTwoItemsConfig(false))
			x := p.SendTo("/v1/chat/completions?other=1", [2]string{"x-other", "k1"})
			require.Equal(t, types.ActionContinue, x.Action)
			require.Empty(t, p.Host.GetRedisCalloutAttributesFromContext(x.ID))
			x.Done()
			require.Empty(t, redis.Keys("atrl:*"))
		})
		t.Run("rule_match_mode first keeps the first matching item only", func(t *testing.T) {
			higressFirstMode(t, redis)
		})
		t.Run("more than 10 rule items, all matching: one call each way on one Redis", func(t *testing.T) {
			higressManyItems(t, redis)
		})
		t.Run("one subject named by two items is counted once (per-IP caps)", func(t *testing.T) {
			sameSubjectIPCaps(t, redis)
		})
		t.Run("one subject named by two items is counted once (one key, a regexp and *), its quota shown once", func(t *testing.T) {
			sameSubjectKeys(t, redis)
		})
		t.Run("one subject: a reservation is taken and given back once", func(t *testing.T) {
			sameSubjectReservation(t, redis)
		})
	})
}

// Higress's hybridLimitConfig, with limits a few requests use up: every
// request 600 tokens a minute in all, the key vip-key 1,000 of them.
const higressHybridConfig = `{"rule_name": "ai-token-hybrid",
	"global_threshold": {"token_per_minute": 2000},
	"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "vip-key", "token_per_minute": 1000}]}],
	"redis": {"service_name": "redis.static", "timeout": 1000, "cluster": false}}`

const (
	hybridGlobal = "atrl:{ai-token-hybrid|global_threshold||}"
	hybridVIP    = "atrl:{ai-token-hybrid|limit_by_header|x-api-key|vip-key}"
)

func higressHybrid(t *testing.T, redis *redistest.Server) {
	p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, higressHybridConfig)
	vip := [2]string{"x-api-key", "vip-key"}

	// Both match: one admission call about both subjects (on one Redis,
	// redis.cluster false; one per slot on a cluster).
	x := p.Send(vip)
	require.Equal(t, types.HeaderStopAllIterationAndWatermark, x.Action)
	require.Equal(t, []string{"admit/2 keys"}, scriptOps(p.Host, x.ID))
	require.True(t, x.Answer().Passed())
	respond500(x)
	// No item matches: the global threshold still limits it.
	x = p.Send()
	require.Equal(t, []string{"admit/1 keys"}, scriptOps(p.Host, x.ID))
	require.True(t, x.Answer().Passed())
	respond500(x)
	assert.Equal(t, int64(1000), plugintest.CounterAtClock(redis, hybridGlobal, "t60"), "the global threshold: every request")
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, hybridVIP, "t60"), "the item: its own")

	// The key's minute: 1,000 used after its second request.
	x = p.Request(vip)
	require.True(t, x.Passed())
	respond500(x)
	local := p.Request(vip).RequireRejected(429)
	assert.Equal(t, "rule_item=0; key="+config.Fingerprint("vip-key"), plugintest.Header(local.Headers, limiter.HeaderScope))
	assert.Equal(t, "40", plugintest.Header(local.Headers, limiter.HeaderRetryAfter))
	x = p.Request() // others still pass: the global minute has 500 left
	require.True(t, x.Passed())
	respond500(x)
	// 2,000 used: the global threshold rejects everyone.
	for _, h := range [][][2]string{nil, {vip}, {{"x-api-key", "other"}}} {
		local := p.Request(h...).RequireRejected(429)
		assert.Contains(t, []string{"global_threshold", "rule_item=0; key=" + config.Fingerprint("vip-key")}, plugintest.Header(local.Headers, limiter.HeaderScope))
		if len(h) == 0 || h[0][1] != "vip-key" {
			assert.Equal(t, "global_threshold", plugintest.Header(local.Headers, limiter.HeaderScope))
		}
	}
	assert.Equal(t, int64(2000), plugintest.CounterAtClock(redis, hybridGlobal, "t60"))
	assert.Equal(t, int64(1000), plugintest.CounterAtClock(redis, hybridVIP, "t60"))
}

// Higress's multiRuleItemsConfig (a header and a URL parameter), swapped
// or not: a request carrying both is limited by both.
func higressTwoItemsConfig(swapped bool) string {
	header := `{"limit_by_header": "x-api-key", "limit_keys": [{"key": "k1", "token_per_minute": 1000}]}`
	param := `{"limit_by_param": "apikey", "limit_keys": [{"key": "k2", "token_per_hour": 1500}]}`
	items := header + ", " + param
	if swapped {
		items = param + ", " + header
	}
	return `{"rule_name": "ai-token-multi-items", "rule_items": [` + items + `], ` + plugintest.RedisSection + `}`
}

const (
	twoItemsHeader = "atrl:{ai-token-multi-items|limit_by_header|x-api-key|k1}"
	twoItemsParam  = "atrl:{ai-token-multi-items|limit_by_param|apikey|k2}"
)

func higressTwoItems(t *testing.T, redis *redistest.Server, swapped bool) {
	p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, higressTwoItemsConfig(swapped))
	headerItem, paramItem := "0", "1"
	if swapped {
		headerItem, paramItem = "1", "0"
	}
	both := func() *plugintest.Exchange {
		return p.SendTo("/v1/chat/completions?apikey=k2", [2]string{"x-api-key", "k1"}).Answer()
	}

	// Usage is charged to both.
	x := both()
	require.True(t, x.Passed())
	respond500(x)
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, twoItemsHeader, "t60"))
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, twoItemsParam, "t3600"))

	// The header's minute used up by its own requests: a request with both
	// is rejected, though the parameter's hour has room.
	x = p.Request([2]string{"x-api-key", "k1"})
	require.True(t, x.Passed())
	respond500(x)
	local := both().RequireRejected(429)
	assert.Equal(t, "rule_item="+headerItem+"; key="+config.Fingerprint("k1"), plugintest.Header(local.Headers, limiter.HeaderScope))
	assert.Equal(t, "40", plugintest.Header(local.Headers, limiter.HeaderRetryAfter))
	x = p.SendTo("/v1/chat/completions?apikey=k2").Answer() // the parameter alone passes
	require.True(t, x.Passed())
	respond500(x)
	assert.Equal(t, int64(1000), plugintest.CounterAtClock(redis, twoItemsParam, "t3600"), "a rejected request is not charged")

	// The next minute, the header has room again; the parameter's hour
	// closes after one more request, and then rejects a request with both,
	// naming it and its reset (the latest of those closed).
	redis.SetClock(higressStart + 60)
	x = both()
	require.True(t, x.Passed())
	respond500(x)
	assert.Equal(t, int64(1500), plugintest.CounterAtClock(redis, twoItemsParam, "t3600"))
	local = both().RequireRejected(429)
	assert.Equal(t, "rule_item="+paramItem+"; key="+config.Fingerprint("k2"), plugintest.Header(local.Headers, limiter.HeaderScope))
	assert.Equal(t, strconv.Itoa(3600-30*60-20-60), plugintest.Header(local.Headers, limiter.HeaderRetryAfter))
	// Both closed: the reset is the later one, when the request can pass.
	x = p.Request([2]string{"x-api-key", "k1"})
	require.True(t, x.Passed())
	respond500(x)
	local = both().RequireRejected(429)
	assert.Equal(t, "rule_item="+paramItem+"; key="+config.Fingerprint("k2"), plugintest.Header(local.Headers, limiter.HeaderScope))
	assert.Equal(t, strconv.Itoa(3600-30*60-20-60), plugintest.Header(local.Headers, limiter.HeaderRetryAfter))
}

// rule_match_mode: first, Higress's behaviour before 2.2.4: the first
// matching item alone limits and is charged.
func higressFirstMode(t *testing.T, redis *redistest.Server) {
	p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, strings.Replace(higressTwoItemsConfig(false), `"rule_items"`, `"rule_match_mode": "first", "rule_items"`, 1))
	x := p.SendTo("/v1/chat/completions?apikey=k2", [2]string{"x-api-key", "k1"}).Answer()
	require.True(t, x.Passed())
	respond500(x)
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, twoItemsHeader, "t60"))
	assert.Empty(t, redis.Keys(twoItemsParam+"*"), "the second item is not charged")
}

// Twelve items, each reading a header of its own; redis.cluster false:
// one call at admission, one at the end, each about the twelve subjects.
func higressManyItems(t *testing.T, redis *redistest.Server) {
	redis.StartOver(t, higressStart)
	var items []string
	var headers [][2]string
	for i := range 12 {
		items = append(items, fmt.Sprintf(`{"limit_by_per_header": "x-h%d", "limit_keys": [{"key": "*", "token_per_minute": %d}]}`, i, 600+100*i))
		headers = append(headers, [2]string{fmt.Sprintf("x-h%d", i), "v"})
	}
	p := plugintest.Start(t, redis, `{"rule_name": "many", "rule_items": [`+strings.Join(items, ", ")+`],
		"redis": {"service_name": "redis.static", "timeout": 1000, "cluster": false}}`)
	x := p.Send(headers...)
	require.Equal(t, []string{"admit/12 keys"}, scriptOps(p.Host, x.ID))
	require.True(t, x.Answer().Passed())
	x.ResponseHeaders("text/event-stream")
	require.Equal(t, types.ActionPause, p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, 300, 200)), true))
	require.Equal(t, []string{"charge/12 keys"}, scriptOps(p.Host, x.ID))
	x.Done()
	for i := range 12 {
		assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, fmt.Sprintf("atrl:{many|limit_by_per_header|x-h%d|v}", i), "t60"))
	}
	x = p.Request(headers...) // 500 of x-h0's 600 used: room for one more
	require.True(t, x.Passed())
	respond500(x)
	local := p.Request(headers...).RequireRejected(429) // 1,000 of 600: the first item closed
	assert.Equal(t, "rule_item=0; key=*", plugintest.Header(local.Headers, limiter.HeaderScope))
}

// Layered per-IP caps (the example): everyone 1,000 tokens a
// minute, 10.0.0.0/8 also 600. An internal client is one subject with a cap
// of 600: it is rejected after 600 real tokens, not 300 counted twice.
func sameSubjectIPCaps(t *testing.T, redis *redistest.Server) {
	p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, `{"rule_name": "ips", "show_limit_quota_header": true, "rule_items": [
		{"limit_by_per_ip": "from-remote-addr", "limit_keys": [{"key": "0.0.0.0/0", "token_per_minute": 1000}]},
		{"limit_by_per_ip": "from-remote-addr", "limit_keys": [{"key": "10.0.0.0/8", "token_per_minute": 600}]}],
		`+plugintest.RedisSection+`}`)
	for _, c := range []struct {
		ip       string
		admitted int // requests of 200 tokens admitted in the minute
		limit    string
		scope    string
	}{
		{"10.1.2.3", 3, "600", "rule_item=1; key=10.0.0.0/8"},
		{"203.0.113.7", 5, "1000", "rule_item=0; key=0.0.0.0/0"},
	} {
		require.NoError(t, p.Host.SetProperty([]string{"source", "address"}, []byte(c.ip+":40000")))
		for i := range c.admitted {
			x := p.Send().Answer()
			require.True(t, x.Passed(), "%s: request %d", c.ip, i)
			headers := x.ResponseHeaders("text/event-stream")
			assert.Equal(t, c.limit, plugintest.Header(headers, limiter.HeaderLimit), c.ip)
			require.Equal(t, types.ActionPause, p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, 150, 50)), true))
			x.Done()
		}
		local := p.Request().RequireRejected(429)
		assert.Equal(t, c.scope, plugintest.Header(local.Headers, limiter.HeaderScope), c.ip)
		assert.Equal(t, int64(200*c.admitted), plugintest.CounterAtClock(redis, "atrl:{ips|limit_by_per_ip||"+c.ip+"}", "t60"), "%s: each request counted once", c.ip)
	}
}

// One API key matched by a regexp in one item and by "*" in another: one
// subject, its minute at the regexp's 1,000, its day at the other's
// 3,000; a 500-token request counts 500. The quota endpoint shows it once.
func sameSubjectKeys(t *testing.T, redis *redistest.Server) {
	p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, `{"rule_name": "keys", "quota_path": "/v1/quota", "quota_headers": ["ietf"], "rule_items": [
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-free-", "token_per_minute": 1000}]},
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_minute": 5000, "token_per_day": 3000}]}],
		`+plugintest.RedisSection+`}`)
	const subject = "atrl:{keys|limit_by_per_header|x-api-key|sk-free-1}"
	free := [2]string{"x-api-key", "sk-free-1"}
	x := p.Send(free)
	require.Equal(t, []string{"admit/1 keys"}, scriptOps(p.Host, x.ID), "one subject")
	require.True(t, x.Answer().Passed())
	headers := x.ResponseHeaders("text/event-stream")
	assert.Equal(t, `"item0.token_per_minute";q=1000;w=60;qu="tokens", "item1.token_per_day";q=3000;w=86400;qu="tokens"`,
		plugintest.Header(headers, "RateLimit-Policy"), "each window once, named by the item it is from")
	require.Equal(t, types.ActionPause, p.Host.CallOnResponseBody(x.ID, []byte(plugintest.OpenAIStream(2, 300, 200)), true))
	x.Done()
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, subject, "t60"))
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, subject, "t86400"))
	x = p.Request(free)
	require.True(t, x.Passed())
	respond500(x)
	local := p.Request(free).RequireRejected(429)
	assert.Equal(t, "rule_item=0; key=regexp:^sk-free-", plugintest.Header(local.Headers, limiter.HeaderScope))

	q := p.Call("GET", "/v1/quota", "", free).Answer()
	local = q.Local()
	require.NotNil(t, local)
	require.Equal(t, uint32(200), local.StatusCode, "%s", local.Data)
	var doc struct {
		Subjects []struct {
			RuleItem *int `json:"rule_item"`
			Key      string
			Merged   []struct {
				RuleItem *int `json:"rule_item"`
				Key      string
			}
			Limits []struct {
				Window      string
				Limit, Used int64
			}
		}
	}
	require.NoError(t, json.Unmarshal(local.Data, &doc), "%s", local.Data)
	require.Len(t, doc.Subjects, 1, "%s", local.Data)
	s := doc.Subjects[0]
	assert.Equal(t, 0, *s.RuleItem)
	assert.Equal(t, "regexp:^sk-free-", s.Key)
	require.Len(t, s.Merged, 1)
	assert.Equal(t, 1, *s.Merged[0].RuleItem)
	assert.Equal(t, "*", s.Merged[0].Key)
	require.Len(t, s.Limits, 2)
	assert.Equal(t, "minute", s.Limits[0].Window)
	assert.Equal(t, int64(1000), s.Limits[0].Limit)
	assert.Equal(t, int64(1000), s.Limits[0].Used)
	assert.Equal(t, "day", s.Limits[1].Window)
	assert.Equal(t, int64(3000), s.Limits[1].Limit)
}

// With token_reservation, the estimate is reserved in a shared subject's
// windows once, and given back once.
func sameSubjectReservation(t *testing.T, redis *redistest.Server) {
	p := plugintest.StartOnEmptyRedisAt(t, redis, higressStart, `{"rule_name": "res", `+plugintest.ReservationOn+` "rule_items": [
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "regexp:^sk-", "token_per_minute": 100000}]},
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_minute": 200000}]}],
		`+plugintest.RedisSection+`}`)
	const subject = "atrl:{res|limit_by_per_header|x-api-key|sk-1}"
	x := p.SendBody(plugintest.ChatBody(1000), plugintest.APIKey)
	require.Equal(t, []string{"admit/1 keys"}, scriptOps(p.Host, x.ID))
	require.True(t, x.Answer().Passed())
	reserved := plugintest.CounterAtClock(redis, subject, "t60")
	require.Greater(t, reserved, int64(1000), "the completion cap and the prompt, reserved")
	require.Less(t, reserved, int64(1200), "once")
	respond500(x)
	assert.Equal(t, int64(500), plugintest.CounterAtClock(redis, subject, "t60"), "the reservation given back once, the usage charged once")
}
