package limiter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Streams take a usage parser at their first chunk and give it back once
// settled (parsers.go): a parser given back by a stream cut in the middle of
// an event, or in the middle of its usage, and taken by the next stream,
// reads that stream from a clean start, and a stream still open keeps its
// own. Each is charged exactly what it reported.
func TestUsageParsersOfInterleavedStreamsStayApart(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_day": 100000000`))
		key := plugintest.APIKey
		day := func() int64 { return p.DayCounter(plugintest.APIKeySubject) }
		open := func() *plugintest.Exchange {
			x := p.Send(key).Answer()
			require.True(t, x.Passed())
			x.ResponseHeaders("text/event-stream")
			return x
		}
		send := func(x *plugintest.Exchange, chunks ...string) {
			for _, c := range chunks {
				p.Host.CallOnResponseBody(x.ID, []byte(c), false)
			}
		}

		a := plugintest.SSEEvents(plugintest.OpenAIStream(4, 100, 50))
		first := open()
		send(first, a[:2]...) // stays open

		// A stream cut inside its usage event: the parser it gives back was
		// in the middle of an object, after "prompt_tokens":7000.
		b := plugintest.OpenAIStream(2, 7000, 3)
		cut := open()
		send(cut, b[:strings.Index(b, `"completion_tokens"`)])
		before := day()
		cut.DoneAndTick() // the client went away: charged at least its estimate, from the next tick
		require.Positive(t, day()-before, "the cut stream is charged")

		for _, c := range []struct{ prompt, completion int }{{1000, 1}, {20, 30}} {
			before := day()
			x := open()
			send(x, plugintest.SSEEvents(plugintest.OpenAIStream(3, c.prompt, c.completion))...)
			p.Host.CallOnResponseBody(x.ID, nil, true)
			x.Done()
			require.EqualValues(t, c.prompt+c.completion, day()-before, "a stream on a reused parser is charged what it reported")
		}

		before = day()
		send(first, a[2:]...)
		p.Host.CallOnResponseBody(first.ID, nil, true)
		first.Done()
		require.EqualValues(t, 150, day()-before, "the stream open throughout keeps its own parser")
	})
}
