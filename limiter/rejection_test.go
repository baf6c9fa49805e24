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
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, items("first", `"Too many requests"`))
			key := [2]string{"x-api-key", "sk-a b;c-1"}
			p.Request(key)
			x := p.Request(key)
			assert.Equal(t, "rule_item=1; key=regexp:^sk-a%20b%3Bc", scope(x))
			assert.Equal(t, "text/plain; charset=utf-8", contentType(x))
		})

		t.Run("layered: the item whose window closed, not the first", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, items("all", `"{\"error\": {\"message\": \"quota exceeded\", \"type\": \"rate_limit\"}}"`))
			headers := [][2]string{{"x-tenant", "acme"}, {"x-api-key", "sk-2"}}
			p.Request(headers...)
			x := p.Request(headers...)
			assert.Equal(t, "rule_item=1; key=*", scope(x))
			assert.Equal(t, "application/json", contentType(x), "a JSON rejected_msg goes out as JSON")
			assert.JSONEq(t, `{"error": {"message": "quota exceeded", "type": "rate_limit"}}`, string(x.Local().Data))
		})

		t.Run("the unmatched threshold", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"unmatched_threshold": {"query_per_day": 1},`, `"query_per_day": 100`))
			p.Request()
			assert.Equal(t, "unmatched_threshold", scope(p.Request()))
		})

		t.Run("the global threshold", func(t *testing.T) {
			redis.Do("FLUSHALL")
			p := plugintest.Start(t, redis, `{"rule_name": "all", "rejected_msg": "[1, 2", "global_threshold": {"query_per_day": 1}, `+plugintest.RedisSection+`}`)
			p.Request()
			x := p.Request()
			assert.Equal(t, "global_threshold", scope(x))
			assert.Equal(t, "text/plain; charset=utf-8", contentType(x), "not valid JSON: text")
		})
	})
}
