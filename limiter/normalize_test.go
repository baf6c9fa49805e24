package limiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 25, point 4: values every upstream reads as one credential are one
// subject, one budget. Through the plugin (Go and WASM mode) on a real
// Redis.

// A cookie's value is read without its surrounding double quotes, as Go's
// net/http and Python's http.cookies read it: `session="abc"` and
// `session=abc` are one session, which quoting cannot give a second budget.
func TestNormalizedQuotedCookie(t *testing.T) {
	redis := redistest.Start(t)
	subject := func(v string) string { return "atrl:{c|limit_by_per_cookie|session|" + v + "}" }
	cookie := func(v string) [2]string { return [2]string{"cookie", v} }
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(60, 10)
		redis.Do("FLUSHALL")
		p := plugintest.Start(t, redis, `{"rule_name": "c", "rule_items": [{"limit_by_per_cookie": "session",
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
		redis.Do("FLUSHALL")
		p := plugintest.Start(t, redis, `{"rule_name": "a", "rule_items": [{"limit_by_per_header": "authorization",
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
