package limiter_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// TestStreamUsageDuplicateKeys: a streaming request whose body repeats its
// stream or include_usage keys (or spells them in another case) still goes
// upstream asking for its usage, in a body with one "stream":true and one
// include_usage, and the usage the stream reports is charged exactly. The
// upstream here behaves as a real one: it sends the usage chunk only when
// the body it gets asks for it, read as encoding/json reads it (the last
// duplicate wins, keys match without case).
func TestStreamUsageDuplicateKeys(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		key := [2]string{"x-api-key", "sk-1"}
		withUsage, withoutUsage := readStream(t)
		const messages = `"messages":[{"role":"user","content":"Say hello."}]`
		cases := []struct {
			name, contentType, body string
		}{
			{"stream false then true", "application/json", `{"model":"gpt-4o","stream":false,"stream":true,` + messages + `}`},
			{"include_usage true then false", "application/json", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true,"include_usage":false},` + messages + `}`},
			{"a JSON media type with a suffix", "application/vnd.api+json; charset=utf-8", streamBody},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				redis.Do("FLUSHALL")
				p := plugintest.Start(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000`))
				x := &plugintest.Exchange{P: p, ID: p.Host.InitializeHttpContext()}
				p.Host.CallOnRequestHeaders(x.ID, [][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
					{":path", "/v1/chat/completions"}, {"content-type", c.contentType}, key,
					{"content-length", strconv.Itoa(len(c.body))}}, false)
				x.Action = p.Host.CallOnRequestBody(x.ID, []byte(c.body), true)
				x.Answer()
				require.True(t, x.Passed())

				body, _ := upstreamSees(x)
				stream, includeUsage := upstreamReads(t, body)
				assert.True(t, stream, "the upstream streams: %s", body)
				assert.True(t, includeUsage, "the upstream is asked for the usage: %s", body)
				assert.Equal(t, 1, strings.Count(body, `"stream":`), "one stream member: %s", body)
				assert.Equal(t, 1, strings.Count(body, `"include_usage":`), "one include_usage member: %s", body)

				sent := withoutUsage
				if stream && includeUsage {
					sent = withUsage
				}
				got, _, _ := clientGets(t, x, sse, plugintest.SSEEvents(sent))
				assert.Equal(t, withoutUsage, got, "the client gets the stream without the usage chunk")
				assert.Equal(t, int64(29), p.DayCounter(plugintest.APIKeySubject), "charged exactly the usage")
				assert.Equal(t, uint64(1), injectedCount(p))
				assert.Zero(t, counted(p, "none", estimated))
			})
		}
	})
}

// upstreamReads reads a request body as a Go upstream does (encoding/json
// into a struct: the last duplicate wins, keys match without case) and
// tells whether it streams and asks for the usage.
func upstreamReads(t *testing.T, body string) (stream, includeUsage bool) {
	t.Helper()
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	d := json.NewDecoder(bytes.NewReader([]byte(body)))
	require.NoError(t, d.Decode(&req), "the body goes upstream as JSON: %s", body)
	return req.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage
}
