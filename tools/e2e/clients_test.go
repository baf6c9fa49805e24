package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkConfig limits each SDK's key where that SDK sends it: OpenAI's
// Authorization: Bearer, Anthropic's x-api-key, Gemini's x-goog-api-key,
// 100 tokens a day each, with OpenAI's and the IETF quota headers, and no
// rejected_msg: rejections speak each API.
const sdkConfig = `{"rule_name": "sdk", "quota_headers": ["openai", "ietf"],
	"rule_items": [
		{"limit_by_per_header": "authorization", "limit_keys": [{"key": "regexp:^Bearer ", "token_per_day": 100}]},
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_day": 100}]},
		{"limit_by_per_header": "x-goog-api-key", "limit_keys": [{"key": "*", "token_per_day": 100}]}],
	"redis": {"service_name": "redis.static", "timeout": 1000}}`

// sdkResult is what tools/e2e/sdk/client_call.mjs prints of one call.
type sdkResult struct {
	OK      bool              `json:"ok"`
	Status  int               `json:"status"`
	Class   string            `json:"class"`
	Code    string            `json:"code"`
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Error   json.RawMessage   `json:"error"`
	Usage   json.RawMessage   `json:"usage"`
	Headers map[string]string `json:"headers"`
	Ms      int64             `json:"ms"` // how long the call took, retries included
}

// callSDK makes one call with an official SDK (openai, anthropic, gemini)
// through the stack's gateway, retries off (env: RETRIES=default for the
// SDK's own).
func (s *stack) callSDK(sdk, key, usage string, env ...string) sdkResult {
	s.t.Helper()
	stdout := s.runNode("client_call.mjs", append(env, "SDK="+sdk, "BASE_URL="+s.url, "KEY="+key, "MOCK_USAGE="+usage)...)
	var r sdkResult
	require.NoError(s.t, json.Unmarshal(bytes.TrimSpace(stdout), &r), string(stdout))
	return r
}

// Issue 27: each official SDK, with its own key header, is limited and
// reads what the gateway says in the form it knows: the quota headers, and
// a rejection in its API's error shape (the Gemini SDK reads only the
// body).
func TestSDKsReadTheQuotaAndTheirErrors(t *testing.T) {
	s := startStack(t, sdkConfig)
	s.avoidDayEdge()

	t.Run("openai", func(t *testing.T) {
		first := s.callSDK("openai", "sk-openai-1", "80,40")
		require.True(t, first.OK, "%+v", first)
		assert.Equal(t, "100", first.Headers["x-ratelimit-limit-tokens"])
		assert.Equal(t, "100", first.Headers["x-ratelimit-remaining-tokens"], "nothing spent yet: its usage is charged when it ends")
		assert.Contains(t, first.Headers["ratelimit-policy"], `;q=100;w=86400;qu="tokens"`)
		s.waitIdle()

		second := s.callSDK("openai", "sk-openai-1", "1,1")
		require.False(t, second.OK)
		assert.Equal(t, 429, second.Status)
		assert.Equal(t, "RateLimitError", second.Class)
		assert.Equal(t, "insufficient_quota", second.Code, "a day spent: longer than max_retry_wait")
		assert.Equal(t, "tokens", second.Type)
		assert.Contains(t, second.Message, "Token rate limit exceeded: the limit of 100 tokens per day is used up")
		assert.Equal(t, "0", second.Headers["x-ratelimit-remaining-tokens"])
		assert.NotEmpty(t, second.Headers["retry-after-ms"])
		assert.Contains(t, second.Headers["ratelimit"], ";r=0;t=")
	})

	t.Run("anthropic", func(t *testing.T) {
		first := s.callSDK("anthropic", "sk-ant-1", "80,40")
		require.True(t, first.OK, "%+v", first)
		assert.Equal(t, "100", first.Headers["x-ratelimit-limit-tokens"])
		s.waitIdle()

		second := s.callSDK("anthropic", "sk-ant-1", "1,1")
		require.False(t, second.OK)
		assert.Equal(t, 429, second.Status)
		assert.Equal(t, "RateLimitError", second.Class)
		var body struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		require.NoError(t, json.Unmarshal(second.Error, &body), string(second.Error))
		assert.Equal(t, "error", body.Type)
		assert.Equal(t, "rate_limit_error", body.Error.Type)
		assert.Contains(t, body.Error.Message, "Token rate limit exceeded")
		assert.NotEmpty(t, second.Headers["retry-after-ms"])
	})

	t.Run("gemini", func(t *testing.T) {
		first := s.callSDK("gemini", "gm-1", "80,40")
		require.True(t, first.OK, "%+v", first)
		s.waitIdle()

		second := s.callSDK("gemini", "gm-1", "1,1")
		require.False(t, second.OK)
		assert.Equal(t, 429, second.Status)
		assert.Contains(t, second.Message, "RESOURCE_EXHAUSTED")
		assert.Contains(t, second.Message, "Token rate limit exceeded: the limit of 100 tokens per day is used up")
		assert.Contains(t, second.Message, "Try again in ", "its users read only the body: it says when")
	})
}

// apiKeyConfig limits every API key, wherever its client sends it, to 100
// tokens a day: one rule for every SDK.
const apiKeyConfig = `{"rule_name": "keys", "quota_headers": ["openai", "ietf"],
	"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_day": 100}]}],
	"redis": {"service_name": "redis.static", "timeout": 1000}}`

// sdkKeyPlaces is where each official SDK pinned in tools/e2e/sdk, built
// with its API key only, puts it (docs/clients.md's table, which this test
// keeps true): @anthropic-ai/sdk 1.x sends Authorization: Bearer, not the
// x-api-key of Anthropic's API reference and of its 0.x versions.
var sdkKeyPlaces = map[string]string{
	"openai":    "authorization: Bearer",
	"anthropic": "authorization: Bearer",
	"gemini":    "x-goog-api-key",
}

// Issue 36: one limit_by_per_api_key rule counts each official SDK's
// calls under its key, wherever the SDK puts it, and the SDK then gets its
// own rejection; the places are checked against the table.
func TestEverySDKsKeyUnderOneRule(t *testing.T) {
	s := startStack(t, apiKeyConfig)
	s.avoidDayEdge()
	for _, sdk := range []string{"openai", "anthropic", "gemini"} {
		t.Run(sdk, func(t *testing.T) {
			key := "key-" + sdk + "-1"
			first := s.callSDK(sdk, key, "80,40")
			require.True(t, first.OK, "%+v", first)
			s.waitIdle()
			assert.Equal(t, int64(120), s.redis.Int("GET", fmt.Sprintf("atrl:{keys|limit_by_per_api_key||%s}:t86400:%d", key, s.redis.Now()/86400)),
				"counted under the key")
			assert.Equal(t, sdkKeyPlaces[sdk], s.upstream.keyPlace(key), "where the SDK put its key")
			second := s.callSDK(sdk, key, "1,1")
			require.False(t, second.OK)
			assert.Equal(t, 429, second.Status)
		})
	}
}

// Issue 36: with their default retries, the OpenAI and Anthropic SDKs get
// their RateLimitError at once on a spent day (x-should-retry: false),
// where they slept for hours on Retry-After before; on a second's limit
// they still wait as told, and their retry goes through.
func TestSDKsGiveUpOnASpentDayAndWaitForASecond(t *testing.T) {
	s := startStack(t, `{"rule_name": "retries", "rule_items": [{"limit_by_per_api_key": "", "limit_keys": [
			{"key": "regexp:^day-", "token_per_day": 100},
			{"key": "regexp:^second-", "query_per_second": 1}]}],
		"redis": {"service_name": "redis.static", "timeout": 1000}}`)
	s.avoidDayEdge()
	for _, sdk := range []string{"openai", "anthropic"} {
		t.Run(sdk, func(t *testing.T) {
			key := "day-" + sdk
			require.True(t, s.callSDK(sdk, key, "80,40").OK)
			s.waitIdle()
			spent := s.callSDK(sdk, key, "1,1", "RETRIES=default")
			require.False(t, spent.OK)
			assert.Equal(t, "RateLimitError", spent.Class)
			assert.Less(t, spent.Ms, int64(10_000), "no sleep on a spent day")
			if sdk == "openai" {
				assert.Equal(t, "insufficient_quota", spent.Code)
			}

			key = "second-" + sdk
			require.True(t, s.callSDK(sdk, key, "1,1").OK)
			waited := s.callSDK(sdk, key, "1,1", "RETRIES=default")
			assert.True(t, waited.OK, "retried after the second: %+v", waited)
			assert.Less(t, waited.Ms, int64(10_000))
		})
	}
}
