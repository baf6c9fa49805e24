package limiter_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
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
		x := p.SendBody(plugintest.ChatBody(10), [2]string{"x-api-key", "sk-1"}).Answer()
		require.True(t, x.Passed(), "VM %d", i)
		x.Respond("text/event-stream", plugintest.SSEEvents(plugintest.OpenAIStream(1, 300, 200))...)
		p.Stop()
	}
	assert.Equal(t, int64(1000), tokensAt(redis, plugintest.APIKeySubject, 86400), "both VMs' charges")
	assert.Zero(t, redis.Int("ZCARD", plugintest.APIKeySubject+":c"), "both leases released")
}

// sameHostAsAnyOther is a WASM host whose random_get and clocks give every
// VM the same readings: wazero's defaults, and any host that does not seed
// WASI's randomness.
func sameHostAsAnyOther() wasmhost.Options {
	return wasmhost.Options{Rand: bytes.NewReader(make([]byte, 1<<20)), EmulatorClock: true}
}
