package limiter_test

import (
	"bytes"
	"compress/flate"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// compress encodes s in a content coding: gzip (see gzipped) or raw
// deflate, as some clients send it.
func compress(t *testing.T, coding, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	switch coding {
	case "gzip":
		return []byte(gzipped(t, s))
	case "deflate":
		w, err := flate.NewWriter(&b, flate.BestCompression)
		require.NoError(t, err)
		_, err = w.Write([]byte(s))
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	return b.Bytes()
}

// Issue 35, point 2: a compressed prompt is charged at its decompressed
// size, whatever the configuration (here the default: no reservation, no
// prices): a 240 KB streaming chat prompt sent as a few hundred bytes of
// gzip or deflate, whose stream reports no usage (it cannot be asked), pays
// its 60,000 tokens. A coding the plugin does not decode is estimated at
// the bound of what it reads, or refused (compressed_body: reject). A body
// that inflates past the bound is not inflated further: estimated at the
// rate it inflated.
func TestCompressedPromptsPayTheirSize(t *testing.T) {
	redis := redistest.Start(t)
	key := plugintest.APIKey
	prompt := strings.Repeat("tell me more about it ", 240_000/22)
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	events, textBytes := contentEvents(10)
	output := int64((textBytes + 3) / 4)
	send := func(p *plugintest.Plugin, coding string, raw []byte) *plugintest.Exchange {
		x := p.SendTo("/v1/chat/completions", key, [2]string{"content-encoding", coding}, [2]string{"content-length", strconv.Itoa(len(raw))})
		x.Action = p.Host.CallOnRequestBody(x.ID, raw, true)
		return x.Answer()
	}
	plugintest.RunTest(t, func(t *testing.T) {
		redis.AvoidWindowEdge(86400, 10)
		for _, coding := range []string{"gzip", "deflate"} {
			t.Run(coding, func(t *testing.T) {
				p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 10000000`))
				raw := compress(t, coding, body)
				require.Less(t, len(raw), 2000, "a few hundred bytes on the wire")
				x := send(p, coding, raw)
				require.True(t, x.Passed())
				sent, _ := upstreamSees(x)
				assert.Equal(t, string(raw), sent, "the body goes on as it came")
				x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
				charged := p.DayCounter(plugintest.APIKeySubject)
				assert.GreaterOrEqual(t, charged, int64(60_000))
				assert.Equal(t, int64(len(body)+3)/4+output, charged, "the decompressed body by its size (no reservation: not estimated), and the output")
			})
		}

		t.Run("br: at the bound, or refused", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 10000000`))
			x := send(p, "br", []byte("\x1b\x00\x00not really brotli"))
			require.True(t, x.Passed())
			x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
			assert.Equal(t, int64(1<<20)/4+output, p.DayCounter(plugintest.APIKeySubject), "max_body_bytes' worth of prompt")
			p.Stop()

			p = plugintest.Start(t, redis, plugintest.APIKeyConfig(`"compressed_body": "reject",`, `"token_per_day": 10000000`))
			local := send(p, "zstd", []byte("\x28\xb5\x2f\xfd...")).RequireRejected(415)
			assert.Contains(t, string(local.Data), "it reads gzip and deflate")
			assert.Equal(t, "gzip, deflate", plugintest.Header(local.Headers, "accept-encoding"))
			x = send(p, "gzip", compress(t, "gzip", body)) // a coding it reads still passes
			require.True(t, x.Passed())
			x.Done()
		})

		t.Run("a bomb: 16 MiB from a few KB, inflated to the bound only", func(t *testing.T) {
			p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100000000000`))
			huge := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("a", 16<<20) + `"}]}`
			raw := compress(t, "gzip", huge)
			start := time.Now()
			x := send(p, "gzip", raw)
			took := time.Since(start)
			require.True(t, x.Passed())
			t.Logf("%d bytes of gzip, %d decompressed: admitted in %v", len(raw), len(huge), took)
			x.Respond("text/event-stream", append(events, "data: [DONE]\n\n")...)
			charged := p.DayCounter(plugintest.APIKeySubject)
			assert.InEpsilon(t, float64(len(huge)/4), float64(charged), 0.15, "the whole, at the rate the first MiB inflated")
		})
	})
}
