package limiter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// A rejection names the limit that closed in X-TokenRateLimit-Scope (its
// rule item's index and key, or the threshold), and carries rejected_msg
// as JSON when it is a JSON object or array.
func TestRejectionNamesTheLimitThatClosed(t *testing.T) {
	redis := redistest.Start(t)
	scope := func(x *plugintest.Exchange) string {
		return plugintest.Header(x.RequireRejected(429).Headers, "X-TokenRateLimit-Scope")
	}
	contentType := func(x *plugintest.Exchange) string {
		return plugintest.Header(x.Local().Headers, "content-type")
	}
	items := func(mode, msg string) string {
		return `{"rule_name": "chat", "rule_match_mode": "` + mode + `", "rejected_msg": ` + msg + `, "rule_items": [
			{"limit_by_header": "x-tenant", "limit_keys": [{"key": "acme", "query_per_day": 100}]},
			{"limit_by_per_header": "x-api-key", "limit_keys": [
				{"key": "regexp:^sk-a b;c", "query_per_day": 1},
				{"key": "*", "query_per_day": 1}]}],
			` + plugintest.RedisSection + `}`
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)

		t.Run("the first matching item's key, encoded for a header", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, items("first", `"Too many requests"`))
			key := [2]string{"x-api-key", "sk-a b;c-1"}
			p.Request(key)
			x := p.Request(key)
			assert.Equal(t, "rule_item=1; key=regexp:^sk-a b%3Bc", scope(x), "a space within stays")
			assert.Equal(t, "text/plain; charset=utf-8", contentType(x))
		})

		t.Run("layered: the item whose window closed, not the first", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, items("all", `"{\"error\": {\"message\": \"quota exceeded\", \"type\": \"rate_limit\"}}"`))
			headers := [][2]string{{"x-tenant", "acme"}, {"x-api-key", "sk-2"}}
			p.Request(headers...)
			x := p.Request(headers...)
			assert.Equal(t, "rule_item=1; key=*", scope(x))
			assert.Equal(t, "application/json", contentType(x), "a JSON rejected_msg goes out as JSON")
			assert.JSONEq(t, `{"error": {"message": "quota exceeded", "type": "rate_limit"}}`, string(x.Local().Data))
		})

		t.Run("a key ending in a space: encoded in the header, as configured in the message", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "chat", "rule_items": [
				{"limit_by_per_header": "authorization", "limit_keys": [{"key": "regexp:^Bearer ", "query_per_day": 1}]}],
				`+plugintest.RedisSection+`}`)
			key := [2]string{"authorization", "Bearer sk-1"}
			p.Request(key)
			x := p.Request(key)
			assert.Equal(t, "rule_item=0; key=regexp:^Bearer%20", scope(x), "a header would lose a trailing space")
			assert.Contains(t, string(x.Local().Data), "(rule_item=0; key=regexp:^Bearer )")
		})

		t.Run("the unmatched threshold", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"unmatched_threshold": {"query_per_day": 1},`, `"query_per_day": 100`))
			p.Request()
			assert.Equal(t, "unmatched_threshold", scope(p.Request()))
		})

		t.Run("the global threshold", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, `{"rule_name": "all", "rejected_msg": "[1, 2", "global_threshold": {"query_per_day": 1}, `+plugintest.RedisSection+`}`)
			p.Request()
			x := p.Request()
			assert.Equal(t, "global_threshold", scope(x))
			assert.Equal(t, "text/plain; charset=utf-8", contentType(x), "not valid JSON: text")
		})
	})
}

// Issue 36: a limit that has room again only after max_retry_wait (60 s by
// default) tells the SDKs not to retry (x-should-retry: false) and, on an
// OpenAI path, says the quota is spent (insufficient_quota); a minute's
// limit keeps its Retry-After for the SDK to wait through. Redis's clock is
// 2026-01-01 01:00:00: a day reopens in 82,800 s, a minute in 60 s.
func TestLongWaitsTellClientsNotToRetry(t *testing.T) {
	redis := redistest.Start(t)
	config := func(extra, limits string) string {
		return plugintest.APIKeyConfig(extra, limits)
	}
	reject := func(p *plugintest.Plugin, path string) (headers [][2]string, body string) {
		key := plugintest.APIKey
		p.SendTo(path, key).Answer()
		local := p.SendTo(path, key).Answer().RequireRejected(429)
		return local.Headers, string(local.Data)
	}
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, config("", `"query_per_day": 1`))
		headers, body := reject(p, "/v1/chat/completions")
		assert.Equal(t, "false", plugintest.Header(headers, "x-should-retry"), "a day: do not retry")
		assert.Equal(t, "82800", plugintest.Header(headers, "retry-after"), "still said")
		assert.Contains(t, body, `"code":"insufficient_quota"`)
		headers, body = reject(p, "/v1/messages")
		assert.Equal(t, "false", plugintest.Header(headers, "x-should-retry"))
		assert.Contains(t, body, `"type":"rate_limit_error"`)

		redis.StartOver(t, alertsClock)
		p.Stop()
		p = plugintest.Start(t, redis, config("", `"query_per_minute": 1`))
		headers, body = reject(p, "/v1/chat/completions")
		assert.Empty(t, plugintest.Header(headers, "x-should-retry"), "a minute: worth the wait")
		assert.Equal(t, "60", plugintest.Header(headers, "retry-after"))
		assert.Contains(t, body, `"code":"rate_limit_exceeded"`)

		// max_retry_wait: 0: no rejection is worth a retry.
		redis.StartOver(t, alertsClock)
		p.Stop()
		p = plugintest.Start(t, redis, config(`"max_retry_wait": 0,`, `"query_per_minute": 1`))
		headers, _ = reject(p, "/v1/chat/completions")
		assert.Equal(t, "false", plugintest.Header(headers, "x-should-retry"))
	})
}
