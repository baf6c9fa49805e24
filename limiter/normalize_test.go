package limiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Values every upstream reads as one credential are one subject, one
// budget (issue 25, point 4), and a value a client repeats cannot buy a
// budget other than the one its upstream charges (issue 14, point 8).
// Through the plugin (Go and WASM mode) on a real Redis.

// A cookie's value is read without its surrounding double quotes, as Go's
// net/http and Python's http.cookies read it: `session="abc"` and
// `session=abc` are one session, which quoting cannot give a second budget.
func TestNormalizedQuotedCookie(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{c|limit_by_per_cookie|session|" + v + "}" }
	cookie := func(v string) [2]string { return [2]string{"cookie", v} }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "c", "rule_items": [{"limit_by_per_cookie": "session",
			"limit_keys": [{"key": "*", "token_per_minute": 100}]}], `+plugintest.RedisSection+`}`)
		require.True(t, spendOn(p, "/v1/chat/completions", cookie(`session="abc"`)).Passed())
		assert.Equal(t, int64(100), p.MinuteCounter(subject("abc")))
		assert.Equal(t, int64(0), p.MinuteCounter(subject(`"abc"`)), "no subject of its own")

		spendOn(p, "/v1/chat/completions", cookie("session=abc")).RequireRejected(429)
		spendOn(p, "/v1/chat/completions", cookie(`theme=dark; session="abc"`)).RequireRejected(429)
		spendOn(p, "/v1/chat/completions", cookie(`session="abc"; session=abc`)).RequireRejected(429)

		// An empty quoted value is an absent one: no rule item matches it.
		require.True(t, spendOn(p, "/v1/chat/completions", cookie(`session=""`)).Passed())
		assert.Equal(t, int64(0), p.MinuteCounter(subject(`""`)))
		assert.Equal(t, int64(0), p.MinuteCounter(subject("")))
	})
}

// An Authorization header's scheme is case-insensitive and any whitespace
// may follow it: `Bearer x` and `bearer  x` are one credential, one budget.
// The credentials themselves are case-sensitive.
func TestNormalizedAuthorizationScheme(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{a|limit_by_per_header|authorization|" + v + "}" }
	auth := func(v string) [2]string { return [2]string{"authorization", v} }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "a", "rule_items": [{"limit_by_per_header": "authorization",
			"limit_keys": [{"key": "*", "token_per_minute": 100}]}], `+plugintest.RedisSection+`}`)
		require.True(t, spendOn(p, "/v1/chat/completions", auth("Bearer x")).Passed())
		assert.Equal(t, int64(100), p.MinuteCounter(subject("Bearer x")))

		for _, v := range []string{"bearer  x", "BEARER x", "Bearer\tx", " Bearer x "} {
			spendOn(p, "/v1/chat/completions", auth(v)).RequireRejected(429)
		}
		assert.Equal(t, int64(0), p.MinuteCounter(subject("bearer  x")), "no subject of its own")

		require.True(t, spendOn(p, "/v1/chat/completions", auth("bearer  X")).Passed(), "another credential")
		assert.Equal(t, int64(100), p.MinuteCounter(subject("Bearer X")))
	})
}

// A query parameter given twice is limited by each of its values, so
// whichever one the upstream takes, a used-up value is rejected, and both
// are charged. Issue 14, point 8: "(8, config parts) (a) Query parameters
// and cookies take the first of duplicate values (config.QueryParam,
// config.CookieValue) while many frameworks take the last: … a client
// sending `?key=a&key=b` must not get a budget other than the one the
// upstream/auth sees".
func TestHardening8RepeatedQueryParameter(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{q|limit_by_per_param|apikey|" + v + "}" }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "q", "rule_items": [{"limit_by_per_param": "apikey",
			"limit_keys": [{"key": "*", "token_per_day": 100}]}], `+plugintest.RedisSection+`}`)
		require.True(t, spendOn(p, "/v1/chat/completions?apikey=mine").Passed())
		assert.Equal(t, int64(100), p.DayCounter(subject("mine")))

		// Whichever value the upstream takes, "mine" is used up.
		spendOn(p, "/v1/chat/completions?apikey=fresh&apikey=mine").RequireRejected(429)
		spendOn(p, "/v1/chat/completions?apikey=mine&apikey=fresh").RequireRejected(429)
		spendOn(p, "/v1/chat/completions?apikey=mine&apikey=x&apikey=fresh").RequireRejected(429)

		// Both readings are charged.
		require.True(t, spendOn(p, "/v1/chat/completions?apikey=a&apikey=b").Passed())
		assert.Equal(t, int64(100), p.DayCounter(subject("a")))
		assert.Equal(t, int64(100), p.DayCounter(subject("b")))
		assert.Equal(t, int64(0), p.DayCounter(subject("fresh")), "rejected: charged nothing")
	})
}

// A cookie given twice, likewise: each of its values is limited and
// charged. Issue 14, point 8: "(8, config parts) (a) Query parameters and
// cookies take the first of duplicate values …".
func TestHardening8RepeatedCookie(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{c|limit_by_per_cookie|session|" + v + "}" }
	cookie := func(v string) [2]string { return [2]string{"cookie", v} }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "c", "rule_items": [{"limit_by_per_cookie": "session",
			"limit_keys": [{"key": "*", "token_per_day": 100}]}], `+plugintest.RedisSection+`}`)
		require.True(t, spendOn(p, "/v1/chat/completions", cookie("session=mine")).Passed())
		spendOn(p, "/v1/chat/completions", cookie("session=fresh; theme=dark; session=mine")).RequireRejected(429)
		spendOn(p, "/v1/chat/completions", cookie("session=mine; session=fresh")).RequireRejected(429)
		require.True(t, spendOn(p, "/v1/chat/completions", cookie("session=a; session=b")).Passed())
		assert.Equal(t, int64(100), p.DayCounter(subject("a")))
		assert.Equal(t, int64(100), p.DayCounter(subject("b")))
	})
}
