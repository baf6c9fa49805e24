// Package plugintest drives the plugin through the proxy-wasm host emulator
// (github.com/higress-group/wasm-go/pkg/test), in Go mode and WASM mode, with
// its Redis calls answered by a real redis-server or Redis Cluster: the
// harness of the plugin's behaviour suites, its soak and its benchmarks.
package plugintest

import (
	"encoding/json"
	"sync"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/test"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Plugin is one started plugin (in Go or WASM mode, as test.RunTest chose)
// whose Redis calls go to a real redis-server or Redis Cluster.
type Plugin struct {
	T     redistest.TB
	Host  proxytest.HostEmulator
	Redis redistest.Backend
	reset func()
	stop  sync.Once
}

// Start starts the plugin with a configuration; it stops at the end of
// the (sub)test.
func Start(t redistest.TB, redis redistest.Backend, config string) *Plugin {
	t.Helper()
	require.True(t, json.Valid([]byte(config)), "test config is not JSON: %s", config)
	host, status := NewTestHost(json.RawMessage(config))
	p := &Plugin{T: t, Host: host, Redis: redis, reset: host.Reset}
	t.Cleanup(p.Stop)
	require.Equal(t, types.OnPluginStartStatusOK, status, "plugin refused the configuration")
	p.SendPostponed() // the first tick numbers the VM: the test's own ticks then send only what it expects
	return p
}

// StartOnEmptyRedis empties Redis (FLUSHALL) and starts the plugin with a
// configuration, as Start: a (sub)test that counts from nothing.
func StartOnEmptyRedis(t redistest.TB, redis redistest.Backend, config string) *Plugin {
	t.Helper()
	redis.Do("FLUSHALL")
	return Start(t, redis, config)
}

// StartOnEmptyRedisWithScript empties Redis, loads the limiter's script
// into it, as the requests of a gateway running for a while would have (no
// NOSCRIPT round trip), and starts the plugin with a configuration, as
// Start.
func StartOnEmptyRedisWithScript(t redistest.TB, redis redistest.Backend, config string) *Plugin {
	t.Helper()
	redis.Do("FLUSHALL")
	redis.Do("SCRIPT", "LOAD", scripts.Limiter.Source)
	return Start(t, redis, config)
}

// StartOnEmptyRedisAt empties Redis, runs the scripts' calls at a given
// second until the test ends (redistest.Server.StartOver), and starts the
// plugin with a configuration, as Start: a (sub)test whose windows and
// resets are exact.
func StartOnEmptyRedisAt(t redistest.TB, redis *redistest.Server, seconds float64, config string) *Plugin {
	t.Helper()
	redis.StartOver(t, seconds)
	return Start(t, redis, config)
}

// AnHourAhead is the start of a window (its length in seconds) an hour
// after Redis's clock: a test clock set there (SetClock) runs the test's
// windows from a known point, whatever the time of the run.
func AnHourAhead(r redistest.Backend, window int64) float64 {
	return float64((r.Now()/window + 3600/window) * window)
}

// Stop stops the plugin (a gateway replica going away), so another can
// start in the same test: the host emulator runs one plugin at a time.
func (p *Plugin) Stop() { p.stop.Do(p.reset) }

// Exchange is one HTTP request going through the plugin.
type Exchange struct {
	P      *Plugin
	ID     uint32
	Action types.Action // what the request-headers hook returned
}

// Send sends a chat completion request's headers (plus extra ones) through
// the plugin, without answering its Redis call yet.
func (p *Plugin) Send(extra ...[2]string) *Exchange {
	p.T.Helper()
	return p.SendTo("/v1/chat/completions", extra...)
}

// Request sends a request and lets Redis answer.
func (p *Plugin) Request(extra ...[2]string) *Exchange {
	p.T.Helper()
	return p.Send(extra...).Answer()
}

// Answer forwards the exchange's pending Redis calls to the real Redis.
func (x *Exchange) Answer() *Exchange {
	x.P.Redis.Answer(x.P.Host, x.ID)
	return x
}

// Local is the response the plugin answered in the gateway's place, or nil.
func (x *Exchange) Local() *proxytest.LocalHttpResponse {
	return x.P.Host.GetSentLocalResponse(x.ID)
}

// Passed reports whether the request went on to the upstream.
func (x *Exchange) Passed() bool {
	return x.Local() == nil && x.P.Host.GetCurrentHttpStreamAction(x.ID) == types.ActionContinue
}

// RequireRejected asserts a local reply with the status and returns it.
func (x *Exchange) RequireRejected(status uint32) *proxytest.LocalHttpResponse {
	x.P.T.Helper()
	local := x.Local()
	require.NotNil(x.P.T, local, "the request was not answered locally")
	require.Equal(x.P.T, status, local.StatusCode, "body: %s", local.Data)
	return local
}

// Respond plays the upstream's response: headers, then the body in the given
// chunks, then the end of the stream; Redis answers whatever the plugin asks.
func (x *Exchange) Respond(contentType string, chunks ...string) *Exchange {
	x.P.T.Helper()
	x.ResponseHeaders(contentType)
	for i, c := range chunks {
		last := i == len(chunks)-1
		got := x.P.Host.CallOnResponseBody(x.ID, []byte(c), last)
		if last && got == types.ActionPause {
			// The end is held until the charges are answered.
			x.Answer()
			got = x.P.Host.GetCurrentHttpStreamAction(x.ID)
			require.Equal(x.P.T, types.ActionContinue, got, "the end of the response stayed held after Redis answered")
		}
		require.Equal(x.P.T, types.ActionContinue, got, "a response chunk was held back")
		require.Equal(x.P.T, c, string(x.P.Host.GetCurrentResponseBody(x.ID)), "a response chunk was changed")
	}
	return x.Done()
}

// ResponseHeaders plays the upstream's response headers (status 200) and
// returns the headers the client gets.
func (x *Exchange) ResponseHeaders(contentType string) [][2]string {
	x.P.T.Helper()
	action := x.P.Host.CallOnResponseHeaders(x.ID, [][2]string{{":status", "200"}, {"content-type", contentType}}, false)
	require.Equal(x.P.T, types.ActionContinue, action)
	return x.P.Host.GetCurrentResponseHeaders(x.ID)
}

// Done ends the stream (as after the last byte, or a reset) and lets Redis
// answer the calls made at the end. A stream that ended without its last
// chunk is charged from the plugin's next tick (see SendPostponed).
func (x *Exchange) Done() *Exchange {
	x.Answer()
	x.P.Host.CompleteHttpContext(x.ID)
	x.Answer()
	return x
}

// DoneAndTick ends the stream like Done, then ticks the plugin like
// SendPostponed: what a stream that ended without its last chunk (reset by
// the client, or answered by the plugin) costs is charged by then.
func (x *Exchange) DoneAndTick() *Exchange {
	x.Done()
	x.P.SendPostponed()
	return x
}

// SendPostponed ticks the plugin once, as the gateway does every 100 ms,
// without moving Redis's clock, and answers what it sends from its own
// context: the charges of streams that ended without a last chunk, and
// retries of failed charges.
func (p *Plugin) SendPostponed() {
	p.Host.Tick()
	for p.Redis.Answer(p.Host, proxytest.PluginContextID) > 0 {
	}
}

// Header returns a header's value from a header list ("" when absent).
func Header(headers [][2]string, name string) string {
	v, _ := test.GetHeaderValue(headers, name)
	return v
}

// SendBody sends a request with a JSON body through the plugin, without
// answering its Redis calls yet.
func (p *Plugin) SendBody(body string, extra ...[2]string) *Exchange {
	p.T.Helper()
	x := p.Send(extra...)
	x.Action = p.Host.CallOnRequestBody(x.ID, []byte(body), true)
	return x
}

// SendTo sends a request's headers like Send, to another path (and query).
func (p *Plugin) SendTo(path string, extra ...[2]string) *Exchange {
	p.T.Helper()
	headers := [][2]string{{":authority", "llm.example.com"}, {":method", "POST"},
		{":path", path}, {"content-type", "application/json"}}
	x := &Exchange{P: p, ID: p.Host.InitializeHttpContext()}
	x.Action = p.Host.CallOnRequestHeaders(x.ID, append(headers, extra...), false)
	return x
}

// Tick moves Redis's clock and the gateway's tick on by 100 ms, then answers
// every Redis call the waiting requests made.
func (p *Plugin) Tick(waiting []*Exchange) {
	p.Redis.SetClock(p.Redis.Clock() + 0.1)
	p.Host.Tick()
	p.AnswerAll(waiting)
}

// AnswerAll answers the pending Redis calls of every exchange and of the
// plugin's own context (where retries go out from the tick), including the
// calls answering one makes (the next in a queue), until none is left.
func (p *Plugin) AnswerAll(xs []*Exchange) {
	for answered := true; answered; {
		answered = p.Redis.Answer(p.Host, proxytest.PluginContextID) > 0
		for _, x := range xs {
			if p.Redis.Answer(p.Host, x.ID) > 0 {
				answered = true
			}
		}
	}
}

// RetriesPending counts the Redis calls the plugin sent from its own context.
func (p *Plugin) RetriesPending() int {
	return len(p.Host.GetRedisCalloutAttributesFromContext(proxytest.PluginContextID))
}

// StartOn starts the plugin of a given VM context (a Go-mode one, which a
// Register function installed, or a WASM module's) with a configuration,
// outside test.RunTest, logging at info level; it stops at the end of the
// test.
func StartOn(t redistest.TB, vm types.VMContext, redis redistest.Backend, config string) *Plugin {
	t.Helper()
	host, stop := StartEmulator(t, vm, config)
	p := &Plugin{T: t, Host: host, Redis: redis, reset: stop}
	t.Cleanup(p.Stop)
	p.SendPostponed() // as Start
	return p
}

// Call sends a request with a method, a path (and query) and a body ("":
// none, the headers end the stream), plus extra headers, without answering
// its Redis calls yet.
func (p *Plugin) Call(method, path, body string, extra ...[2]string) *Exchange {
	p.T.Helper()
	headers := [][2]string{{":authority", "llm.example.com"}, {":method", method}, {":path", path}}
	if body != "" {
		headers = append(headers, [2]string{"content-type", "application/json"})
	}
	x := &Exchange{P: p, ID: p.Host.InitializeHttpContext()}
	x.Action = p.Host.CallOnRequestHeaders(x.ID, append(headers, extra...), body == "")
	if body != "" && x.Local() == nil {
		x.Action = p.Host.CallOnRequestBody(x.ID, []byte(body), true)
	}
	return x
}
