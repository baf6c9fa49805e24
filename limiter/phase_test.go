package limiter_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// The phase table: every path a request can take (admitted, rejected,
// queued, decided locally, shadowed, served a fallback, reset at each step,
// Redis failing at each step) moves requests only along the table's
// transitions (any other move panics in the tests: see export_test.go), and
// together they take every transition of it. Go mode: the plugin runs in
// the test process, where its moves can be recorded.
func TestPhaseTable(t *testing.T) {
	redis := redistest.Start(t)
	stop := limiter.RecordTransitions()
	key := plugintest.APIKey
	stream := func(x *plugintest.Exchange) {
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 5, 5))...)
	}
	redis.AvoidWindowEdge(60, 10)

	t.Run("admitted at the headers, streamed, settled", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 1000`))
		x := p.Request(key)
		require.True(t, x.Passed())
		stream(x)
	})
	t.Run("read before admission, rejected, reset while reading", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_minute": 100`))
		x := p.SendBody(plugintest.ChatBody(50), key).Answer()
		require.True(t, x.Passed())
		stream(x)
		p.SendBody(plugintest.ChatBody(200), key).Answer().RequireRejected(429).Data = nil
		y := p.Send(key) // headers only: its body never comes
		p.Host.CompleteHttpContext(y.ID)
	})
	t.Run("matched at the body, reset while matching", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, modelBudgets("", 300000))
		alice := [2]string{"x-mse-consumer", "alice"}
		x := p.SendBody(chatNaming("gpt-4o"), alice).Answer()
		require.True(t, x.Passed())
		stream(x)
		y := p.Send(alice)
		p.Host.CompleteHttpContext(y.ID)
	})
	t.Run("reset before Redis answers, and mid-stream", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig("", `"token_per_minute": 1000`))
		x := p.Send(key)
		p.Host.CompleteHttpContext(x.ID)
		x.Answer()
		p.SendPostponed()
		y := p.Request(key)
		require.True(t, y.Passed())
		y.ResponseHeaders("text/event-stream")
		y.DoneAndTick()
	})
	t.Run("queued: retried, given up, left, and behind another", func(t *testing.T) {
		minute := plugintest.AnHourAhead(redis, 60)
		p := plugintest.StartOnEmptyRedisAt(t, redis, minute+59.85, plugintest.APIKeyConfig(`"over_limit_action": "queue", "max_queue_wait_ms": 250, `, `"query_per_minute": 1`))
		first := p.Request(key)
		require.True(t, first.Passed())
		waiting := p.Request(key)
		require.Nil(t, waiting.Local(), "it waits")
		behind := p.Request(key) // the same subjects: it waits behind, without asking
		gone := p.Request(key)
		p.Host.CompleteHttpContext(gone.ID)
		p.Tick([]*plugintest.Exchange{waiting, behind})
		p.Tick([]*plugintest.Exchange{waiting, behind})
		p.Tick([]*plugintest.Exchange{waiting, behind})
		for range 5 {
			p.Tick([]*plugintest.Exchange{waiting, behind})
		}
		first.Done()
		waiting.Done()
		behind.Done()
	})
	t.Run("queued until it gives up", func(t *testing.T) {
		freshRedisAt(t, redis, 0) // the ticks move a clock of their own
		p := plugintest.Start(t, redis, plugintest.APIKeyConfig(`"over_limit_action": "queue", "max_queue_wait_ms": 250, `, `"max_concurrent_requests": 1`))
		first := p.Request(key)
		require.True(t, first.Passed())
		second, third := p.Request(key), p.Request(key) // the third waits behind the second
		for i := 0; third.Local() == nil; i++ {         // the second's retry slow to come back: the third gives up behind it
			require.Less(t, i, 20, "it never gave up")
			p.Host.Tick()
		}
		third.RequireRejected(429)
		p.AnswerAll([]*plugintest.Exchange{second})
		first.Done()
		second.Done()
		third.Done()
	})
	t.Run("Redis fails: allow, deny, local, at once and later", func(t *testing.T) {
		for _, mode := range []string{"allow", "deny", "local"} {
			redis.Restart()
			redis.Do("FLUSHALL")
			config := failureModeConfig(mode)
			p := plugintest.Start(t, redis, config)
			redis.Stop()
			x := p.Request(key) // the call fails: decided when it does
			y := p.Request(key) // the breaker is open: decided at once
			for _, z := range []*plugintest.Exchange{x, y} {
				if z.Passed() {
					stream(z)
				} else {
					z.Done()
				}
			}
			p.Stop() // one plugin at a time in the emulator
		}
		redis.Restart()
	})
	t.Run("shadowed, and a fallback across slots", func(t *testing.T) {
		p := plugintest.StartOnEmptyRedis(t, redis, plugintest.APIKeyConfig(`"shadow_mode": true, `, `"token_per_minute": 1`))
		stream(p.Request(key))
		stream(p.Request(key))
		p.Stop()
		redis.Do("FLUSHALL")
		config := `{"rule_name": "fb", "rule_match_mode": "all", "model_fallbacks": {"gpt-4o": ["gpt-4o-mini"]}, "rule_items": [
			{"limit_by_per_consumer": "", "limit_keys": [{"key": "*", "token_per_day": 100000}]},
			{"limit_by_per_model": "", "limit_keys": [{"key": "regexp:^gpt-4o$", "token_per_minute": 100}, {"key": "gpt-4o-mini*", "token_per_minute": 1000}]}],
			` + plugintest.RedisSection + `}`
		p = plugintest.Start(t, redis, config)
		redis.Do("SET", fmt.Sprintf("atrl:{fb|limit_by_per_model||gpt-4o}:t60:%d", redis.Now()/60), "100")
		x := p.SendBody(chatNaming("gpt-4o"), [2]string{"x-mse-consumer", "bob"})
		p.AnswerAll([]*plugintest.Exchange{x})
		require.True(t, x.Passed())
		stream(x)
	})
	t.Run("before the VM's number: numbered, reset while waiting, Redis failing", func(t *testing.T) {
		// Started without the first tick, on a VM with no number yet: a
		// request's ids wait for the one it asks for.
		unnumbered := func(config string) (*plugintest.Plugin, func()) {
			restore := limiter.ForgetIDs()
			host, stop := plugintest.StartEmulator(t, goVM, config)
			return &plugintest.Plugin{T: t, Host: host, Redis: redis}, func() { stop(); restore() }
		}
		redis.Do("FLUSHALL")
		p, stopPlugin := unnumbered(plugintest.APIKeyConfig("", `"token_per_minute": 1000`))
		gone := p.Send(key) // asks for the number; its stream ends first
		p.Host.CompleteHttpContext(gone.ID)
		x := p.Request(key)
		require.True(t, x.Passed())
		stream(x)
		stopPlugin()
		for _, mode := range []string{"allow", "deny", "local"} {
			redis.Restart()
			redis.Do("FLUSHALL")
			config := failureModeConfig(mode)
			p, stopPlugin := unnumbered(config)
			redis.Stop()
			x := p.Request(key) // the call for the number fails
			if x.Passed() {
				stream(x)
			} else {
				x.Done()
			}
			stopPlugin()
		}
		redis.Restart()
	})

	moves := stop()
	seen := map[limiter.Transition]bool{}
	for _, m := range moves {
		seen[m] = true
	}
	var untaken []string
	for _, m := range limiter.PhaseTable() {
		if !seen[m] {
			untaken = append(untaken, m.From+" → "+m.To)
		}
	}
	assert.Empty(t, untaken, "transitions of the table no path took")
	for m := range seen {
		assert.True(t, slices.Contains(limiter.PhaseTable(), m), "%s → %s is not in the table", m.From, m.To)
	}
}

// docs/how-it-works.md draws the phase table as it is.
func TestPhaseDiagramIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/how-it-works.md")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(doc), "```mermaid\n"+limiter.PhaseDiagram()+"```"),
		"docs/how-it-works.md must hold the diagram limiter.PhaseDiagram draws:\n```mermaid\n%s```", limiter.PhaseDiagram())
}

// failureModeConfig limits sk-1 to 1,000 tokens a minute under a
// failure_mode, with a breaker that opens at the first failure and probes
// only after 30 s.
func failureModeConfig(mode string) string {
	return fmt.Sprintf(`{"rule_name": "chat", "failure_mode": %q, %s
		"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", "token_per_minute": 1000}]}],
		"redis": {"service_name": "redis.static", "timeout": 1000, "breaker_failures": 1, "breaker_probe_ms": 30000}}`,
		mode, map[bool]string{true: `"local_share": 1,`}[mode == "local"])
}
