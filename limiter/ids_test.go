package limiter_test

import (
	"bytes"
	"testing"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// Issue 35, point 5: two gateway VMs whose host gives them the same
// "random" bytes and the same clock (wazero's defaults, the emulator's
// own, asked for here: every other WASM-mode test runs on the machine's)
// draw charge, lease and marker ids no other VM draws, once
// Redis numbered them at their first tick: each VM's charge counts, none is
// taken for a repeat of the other's, nor its admission for a cancelled one.
func TestTwoVMsWithTheSameRandomnessBothCharge(t *testing.T) {
	redis := redistest.Start(t)
	redis.StartOver(t, alertsClock)
	config := plugintest.APIKeyConfig(plugintest.ReservationOn, `"token_per_day": 100000, "max_concurrent_requests": 5`)
	for i := range 2 {
		p := plugintest.StartOn(t, plugintest.FreshVMWith(t, sameHostAsAnyOther()), redis, config)
		p.SendPostponed() // its first tick: Redis numbers the VM
		x := p.SendBody(plugintest.ChatBody(10), plugintest.APIKey).Answer()
		require.True(t, x.Passed(), "VM %d", i)
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 300, 200))...)
		p.Stop()
	}
	assert.Equal(t, int64(1000), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"), "both VMs' charges")
	assert.Zero(t, plugintest.Leases(redis, plugintest.APIKeySubject), "both leases released")
}

// sameHostAsAnyOther is a WASM host whose random_get and clocks give every
// VM the same readings: wazero's defaults, and any host that does not seed
// WASI's randomness.
func sameHostAsAnyOther() wasmhost.Options {
	return wasmhost.Options{Rand: bytes.NewReader(make([]byte, 1<<20)), EmulatorClock: true}
}

// Issue 50, point 2: two gateway replicas on one Redis whose hosts give
// the same random bytes and agree on the time draw ids no other replica
// draws from their very first request, before any tick: 300 tokens a
// request against 1,000 a day, replica A serves two requests, replica B
// two, and Redis holds 1,200 (none of B's charges is taken for a repeat of
// A's), the 100 % alert fires, and the next request is rejected.
func TestReplicasOnWeakHostsChargeFromTheFirstRequest(t *testing.T) {
	redis := redistest.Start(t)
	config := alertsConfig("100", "", `"token_per_day": 1000`)
	for _, mode := range []string{"go", "wasm"} {
		t.Run(mode, func(t *testing.T) {
			redis.StartOver(t, alertsClock)
			replica := func(serve func(p *plugintest.Plugin)) {
				host, stop := plugintest.StartEmulator(t, weakHostReplica(t, mode == "wasm"), config)
				defer stop() // the emulator runs one plugin at a time
				// No tick before its requests (plugintest.Start ticks first).
				serve(&plugintest.Plugin{T: t, Host: host, Redis: redis})
			}
			replica(func(a *plugintest.Plugin) {
				spendTokens(t, a, 300)
				spendTokens(t, a, 300)
			})
			replica(func(b *plugintest.Plugin) {
				spendTokens(t, b, 300)
				spendTokens(t, b, 300)
				assert.Equal(t, int64(1200), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"), "every replica's charges")
				assert.Equal(t, []string{`{"rule_name":"chat","subject":{"rule_item":0,"key":"s...#0f2c10bf","value":"s...#0f2c10bf"},"kind":"tokens",` +
					`"window":"day","limit":1000,"used":1200,"reset_seconds":82800,"threshold":100,` + alertsTime + `}`}, tickAlerts(t, b, 200))
				b.Request(plugintest.APIKey).RequireRejected(429)
			})
		})
	}
}

// weakHostReplica returns the VM of a new gateway replica whose host gives
// it the same random bytes and the same clock as any other replica it
// returns: in WASM mode a VM of its own on such a host (sameHostAsAnyOther:
// fixed random bytes, the emulator's clock); in Go mode the test process's,
// made a new replica whose ids start from a fixed seed.
func weakHostReplica(t *testing.T, wasm bool) types.VMContext {
	if wasm {
		return plugintest.FreshVMWith(t, sameHostAsAnyOther())
	}
	t.Cleanup(limiter.WeakHostReplica())
	return goVM
}

// A replica whose Redis does not answer before its VM has a number decides
// its first request by failure_mode, as when an admission fails; once
// Redis is back, its requests are limited and charged without waiting for
// a tick to number the VM.
func TestFirstRequestWhileRedisIsDownAppliesFailureMode(t *testing.T) {
	redis := redistest.Start(t)
	config := plugintest.APIKeyConfig(`"failure_mode": "deny", `, `"token_per_day": 1000`)
	key := plugintest.APIKey
	for _, mode := range []string{"go", "wasm"} {
		t.Run(mode, func(t *testing.T) {
			redis.StartOver(t, alertsClock)
			host, stop := plugintest.StartEmulator(t, weakHostReplica(t, mode == "wasm"), config)
			defer stop()
			p := &plugintest.Plugin{T: t, Host: host, Redis: redis} // no tick
			redis.Stop()
			p.Request(key).RequireRejected(503)
			redis.Restart()
			x := p.Request(key)
			require.True(t, x.Passed())
			x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 300, 0))...)
			assert.Equal(t, int64(300), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"))
		})
	}
}
