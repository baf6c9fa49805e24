package limiter_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/plugintest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Issue 35, point 9: after a reload, the gateway is done with the replaced
// configuration once its last request has ended, and would drop what its
// tick still had to send. A stream that ends without its last chunk is
// charged from the tick; when the gateway is done with the plugin first,
// the plugin answers "not yet", sends the charge and the body of the alert
// it made from its tick, and only then tells the gateway it is done. A
// plugin with nothing left is done at once.
func TestPluginDoneSendsWhatIsLeft(t *testing.T) {
	redis := redistest.Start(t)
	plugintest.RunTest(t, func(t *testing.T) {
		p := plugintest.StartOnEmptyRedisAt(t, redis, alertsClock, alertsConfig("50", "", `"token_per_day": 1000`))
		x := p.Request(plugintest.APIKey)
		require.True(t, x.Passed())
		x.ResponseHeaders("text/event-stream")
		for _, event := range plugintest.SSEEvents(plugintest.OpenAIStream(1, 500, 100)) {
			p.Host.CallOnResponseBody(x.ID, []byte(event), false)
		}
		x.Done() // reset before its end: charged from the tick
		assert.Zero(t, plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"))

		require.False(t, p.Host.FinishVM(), "a charge left: not done yet")
		infos := func() string { return strings.Join(p.Host.GetInfoLogs(), "\n") }
		assert.Contains(t, infos(), "plugin done: 1 charges, 0 budget alerts' bodies, 0 outboxes to list, the debts of 0 local windows still to send")
		p.SendPostponed()
		assert.Equal(t, int64(600), plugintest.CounterAtClock(redis, plugintest.APIKeySubject, "t86400"), "charged after the gateway was done with the plugin")
		p.SendPostponed() // the alert's body, which the charge made
		assert.NotContains(t, infos(), "everything sent")
		p.SendPostponed()
		assert.Contains(t, infos(), "plugin done: everything sent")
		alerts := redis.Strings("ZRANGE", redis.Keys(plugintest.APIKeySubject + ":!o:*")[0], "0", "-1")
		require.Len(t, alerts, 1)
		assert.Contains(t, alerts[0], `"rule_item":0,`, "the alert waits in Redis with the body its replica gave it")

		p.Stop()
		p = plugintest.Start(t, redis, alertsConfig("50", "", `"token_per_day": 1000`))
		assert.True(t, p.Host.FinishVM(), "nothing left: done at once")
	})
}
