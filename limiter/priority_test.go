package limiter_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
)

// priorityConfig shares a 1,000-token minute among every request, the last
// 30 % of it kept for priority high: a request is high when its x-tier is
// prod (a limit key's priority) or its x-priority header says so, else low.
func priorityConfig(extra string) string {
	return `{"rule_name": "prio", ` + extra + `
		"priority": {"levels": ["high", "normal", "low"], "header": "x-priority"},
		"quota_headers": ["tokenratelimit", "ietf"], "quota_path": "/v1/quota",
		"global_threshold": {"token_per_minute": 1000, "reserve": {"high": 30}},
		"rule_items": [{"limit_by_header": "x-tier", "limit_keys": [{"key": "prod", "priority": "high", "token_per_day": 100000000}]}],
		` + plugintest.RedisSection + `}`
}

const prioSubject = "atrl:{prio|global_threshold||}"

var (
	lowPriority  = [2]string{"x-priority", "low"}
	highByHeader = [2]string{"x-priority", "high"}
	highByKey    = [2]string{"x-tier", "prod"}
)

// A 1,000-token minute with reserve {high: 30}: low requests are admitted
// until 700 is used, high ones until 1,000, each told its own limit.
func TestPriorityKeepsTheLastPartForHighTraffic(t *testing.T) {
	redis := redistest.Start(t)
	use := func(x *plugintest.Exchange) [][2]string {
		require.True(t, x.Passed())
		headers := x.ResponseHeaders("text/event-stream")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
		return headers
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, priorityConfig(""))

		for i := 0; i < 7; i++ {
			headers := use(p.SendBody(plugintest.ChatBody(10), lowPriority).Answer())
			assert.Equal(t, "700", plugintest.Header(headers, "X-TokenRateLimit-Limit"), "a low request's own limit")
		}
		assert.Equal(t, int64(700), p.MinuteCounter(prioSubject))
		local := p.SendBody(plugintest.ChatBody(10)).Answer().RequireRejected(429) // no header, no key: the default, low
		assert.Contains(t, string(local.Data), "the limit of 700 tokens per minute is used up (global_threshold); "+
			"70 % of it is open to priority low, the rest kept for higher priorities")
		assert.Contains(t, plugintest.Header(local.Headers, "RateLimit-Policy"), `"global.token_per_minute";q=700;w=60`)

		headers := use(p.SendBody(plugintest.ChatBody(10), highByHeader).Answer())
		assert.Equal(t, "1000", plugintest.Header(headers, "X-TokenRateLimit-Limit"), "a high request's own limit")
		assert.Equal(t, "300", plugintest.Header(headers, "X-TokenRateLimit-Remaining"), "what is left of it when admitted")
		assert.Contains(t, plugintest.Header(headers, "RateLimit-Policy"), `"global.token_per_minute";q=1000;w=60`)
		use(p.SendBody(plugintest.ChatBody(10), highByKey).Answer())
		use(p.SendBody(plugintest.ChatBody(10), highByKey, lowPriority).Answer()) // the key's priority wins
		assert.Equal(t, int64(1000), p.MinuteCounter(prioSubject))
		local = p.SendBody(plugintest.ChatBody(10), highByHeader).Answer().RequireRejected(429)
		assert.NotContains(t, string(local.Data), "open to priority", "all of it is open to high")

		// The quota endpoint gives each level its share and what is left.
		x := p.Call("GET", "/v1/quota", "", lowPriority).Answer()
		d := document(t, x, 200)
		require.Len(t, d.Subjects, 1)
		assert.Equal(t, []quota.LevelShare{{Level: "high", Limit: 1000, Remaining: 0}, {Level: "normal", Limit: 700, Remaining: 0},
			{Level: "low", Limit: 700, Remaining: 0}}, d.Subjects[0].Limits[0].Levels)

		rejected, err := p.Host.GetCounterMetric(metricName("none", "token_ratelimit_priority_low_count"))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), rejected)
		rejected, err = p.Host.GetCounterMetric(metricName("none", "token_ratelimit_priority_high_count"))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), rejected)
	})
}

// 32 requests in flight at once, low and high in turn, each reserving 50
// tokens of the shared minute: the window ends at its limit, and low
// traffic stops at 70 % of it.
func TestPriorityUnderConcurrentRequests(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, priorityConfig(plugintest.ReservationOn))
		body := plugintest.ChatBody(50 - plugintest.ChatBodyPrompt) // reserves 50
		var xs []*plugintest.Exchange
		for i := 0; i < 32; i++ {
			level := lowPriority
			if i%2 == 1 {
				level = highByHeader
			}
			xs = append(xs, p.SendBody(body, level))
		}
		p.AnswerAll(xs)
		admitted := map[string]int{}
		for i, x := range xs {
			if x.Passed() {
				admitted[[]string{"low", "high"}[i%2]]++
			}
		}
		used := p.MinuteCounter(prioSubject)
		assert.Equal(t, int64(1000), used, "reserved to the limit, and no further")
		assert.Equal(t, 7, admitted["low"], "low: 7 × 50 = 350 of the first 700, alongside high")
		assert.Equal(t, 13, admitted["high"])
		for _, x := range xs {
			if x.Passed() {
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 25, 25))...)
			} else {
				x.RequireRejected(429)
			}
		}
		assert.Equal(t, int64(1000), p.MinuteCounter(prioSubject), "each used what it reserved")
	})
}

// A money window and a concurrency limit keep their reserves too.
func TestPriorityReservesMoneyAndConcurrency(t *testing.T) {
	redis := redistest.Start(t)
	config := `{"rule_name": "prio", "priority": {"levels": ["high", "low"], "header": "x-priority"},
		"pricing": {"*": {"input": 1000, "output": 1000}}, "pricing_catalog": "off",
		"rule_items": [{"limit_by_header": "x-team", "limit_keys": [{"key": "a", "usd_per_day": 1, "max_concurrent_requests": 4,
			"reserve": {"high": 50}}]}],
		` + plugintest.RedisSection + `}`
	team := [2]string{"x-team", "a"}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, config)

		// Concurrency: 2 of 4 slots for low, all 4 for high.
		var open []*plugintest.Exchange
		for range 2 {
			x := p.SendBody(plugintest.ChatBody(10), team).Answer()
			require.True(t, x.Passed())
			open = append(open, x)
		}
		local := p.SendBody(plugintest.ChatBody(10), team).Answer().RequireRejected(429)
		assert.Contains(t, string(local.Data), "at most 2 may be in progress at once")
		assert.Contains(t, string(local.Data), "50 % of it is open to priority low")
		for range 2 {
			x := p.SendBody(plugintest.ChatBody(10), team, highByHeader).Answer()
			require.True(t, x.Passed())
			open = append(open, x)
		}
		p.SendBody(plugintest.ChatBody(10), team, highByHeader).Answer().RequireRejected(429)
		for _, x := range open { // each costs 100 tokens at $1,000 a million: $0.10
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
		}

		// Money: $0.40 spent; low may spend to $0.50, high to $1.
		spend := func(headers ...[2]string) *plugintest.Exchange {
			return p.SendBody(plugintest.ChatBody(10), append(headers, team)...).Answer()
		}
		x := spend()
		require.True(t, x.Passed())
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
		local = spend().RequireRejected(429)
		assert.Contains(t, string(local.Data), "the budget of $0.5 per day is used up")
		for range 5 {
			x := spend(highByHeader)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
		}
		spend(highByHeader).RequireRejected(429)
		assert.Equal(t, int64(1_000_000_000), redis.Int("GET", fmt.Sprintf("atrl:{prio|limit_by_header|x-team|a}:u86400:%d", redis.Now()/86400)))
	})
}

// shadow_mode counts the would-be rejections of each level.
func TestPriorityShadowCountsByLevel(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, priorityConfig(`"shadow_mode": true,`))
		redis.Do("SET", plugintest.Bucket(prioSubject, "t60", redis.Now()), "800")
		x := p.SendBody(plugintest.ChatBody(10), lowPriority).Answer()
		require.True(t, x.Passed(), "shadow_mode rejects nothing")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
		y := p.SendBody(plugintest.ChatBody(10), highByHeader).Answer()
		require.True(t, y.Passed())
		y.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
		low, err := p.Host.GetCounterMetric(metricName("none", "token_ratelimit_priority_low_shadow_reject_count"))
		require.NoError(t, err)
		assert.Equal(t, uint64(1), low, "800 of the 700 open to low: would have been rejected")
		_, err = p.Host.GetCounterMetric(metricName("none", "token_ratelimit_priority_high_shadow_reject_count"))
		assert.Error(t, err, "high had room: never counted")
	})
}

// A queued low request whose reservation is larger than the share open to
// it can never fit: rejected at once, not after waiting in vain; a high one
// of the same size fits the whole limit.
func TestPriorityQueueRejectsWhatCanNeverFitItsShare(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, priorityConfig(plugintest.ReservationOn+`"over_limit_action": "queue",`))
		body := plugintest.ChatBody(800 - plugintest.ChatBodyPrompt) // 800: more than low's 700
		p.SendBody(body, lowPriority).Answer().RequireRejected(429)
		x := p.SendBody(body, highByHeader).Answer()
		assert.True(t, x.Passed())
	})
}

// Issue 50, point 5: a request's level was the highest of the limit keys
// it matched. Under limit_by_per_api_key every key a request carries is a
// subject, so a client on a plain key added a made-up one matching the
// high key's pattern, in a header its upstream ignores, and was admitted
// into the part kept for high. The least privileged reading wins: the
// made-up key lowers nothing and lifts nothing, in either rule_match_mode.
func TestPriorityMadeUpKeyLiftsNoLevel(t *testing.T) {
	redis := redistest.Start(t)
	config := func(mode string) string {
		return `{"rule_name": "prio", "rule_match_mode": "` + mode + `",
		"priority": {"levels": ["high", "low"]},
		"global_threshold": {"token_per_minute": 1000, "reserve": {"high": 30}},
		"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [
			{"key": "regexp:^sk-vip-", "priority": "high", "token_per_day": 100000000},
			{"key": "*", "token_per_day": 100000000}]}],
		` + plugintest.RedisSection + `}`
	}
	plain := [2]string{"authorization", "Bearer sk-plain"}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		for _, mode := range []string{"all", "first"} {
			t.Run(mode, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, config(mode))
				for i := 0; i < 7; i++ {
					x := p.SendBody(plugintest.ChatBody(10), plain).Answer()
					require.True(t, x.Passed())
					x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
				}
				assert.Equal(t, int64(700), p.MinuteCounter(prioSubject), "the part open to low is used up")

				local := p.SendBody(plugintest.ChatBody(10), plain, [2]string{"x-goog-api-key", "sk-vip-made-up"}).Answer().RequireRejected(429)
				assert.Contains(t, string(local.Data), "70 % of it is open to priority low", "the made-up key lifts nothing")
				p.SendBody(plugintest.ChatBody(10), [2]string{"x-api-key", "sk-vip-made-up"}, [2]string{"api-key", "sk-other"}).Answer().RequireRejected(429)

				x := p.SendBody(plugintest.ChatBody(10), [2]string{"x-api-key", "sk-vip-1"}).Answer()
				require.True(t, x.Passed(), "a request carrying only a high key is high")
				x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
				assert.Equal(t, int64(800), p.MinuteCounter(prioSubject))
			})
		}
	})
}

// Issue 50, point 5: the priority header sent twice, or with several
// values, takes its lowest level, whichever comes first: the plugin read
// only the first line.
func TestPriorityRepeatedHeaderTakesTheLowestLevel(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 5)
		p := plugintest.StartOnEmptyRedis(t, redis, priorityConfig(""))
		for i := 0; i < 7; i++ {
			x := p.SendBody(plugintest.ChatBody(10), lowPriority).Answer()
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
		}
		for _, headers := range [][][2]string{
			{highByHeader, lowPriority},
			{lowPriority, highByHeader},
			{{"x-priority", "high, low"}},
			{{"x-priority", "high,urgent"}}, // a value that names no level: the default, low
			{highByHeader, {"x-priority", ""}},
		} {
			local := p.SendBody(plugintest.ChatBody(10), headers...).Answer().RequireRejected(429)
			assert.Contains(t, string(local.Data), "70 % of it is open to priority low", "%v", headers)
		}
		x := p.SendBody(plugintest.ChatBody(10), highByHeader, [2]string{"x-priority", " high "}).Answer()
		require.True(t, x.Passed(), "high twice is high")
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 50, 50))...)
		assert.Equal(t, int64(800), p.MinuteCounter(prioSubject))
	})
}
