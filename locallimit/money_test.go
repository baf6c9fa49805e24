package locallimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Money windows count nanodollars locally as the scripts do: a
// reservation in them, a charge of what the usage cost, a debt in
// nanodollars for the catch-up.
func TestMoneyWindowsLocally(t *testing.T) {
	dollar := config.Window{Field: "usd_per_day", Unit: config.UnitUSD, Seconds: 86400, Limit: 1_000_000_000}
	l := newLimiter(1, 10)
	s := []budget.Subject{subjectOf("k", 0, minute1000, dollar)}
	v := l.Admit(s, budget.Amounts{Tokens: 100, USD: 600_000_000}, t0)
	require.True(t, v.Allowed)
	v = l.Admit(s, budget.Amounts{Tokens: 100, USD: 600_000_000}, t0)
	require.False(t, v.Allowed, "$0.60 reserved of $1: no room for $0.60 more")
	assert.Equal(t, budget.KindUSD, v.Kind)
	l.Charge(s, budget.Amounts{Tokens: -50, USD: -550_000_000}, t0, t0, true) // it cost $0.05
	require.True(t, l.Admit(s, budget.Amounts{USD: 900_000_000}, t0).Allowed, "$0.05 used: $0.90 fits")
	var usd int64
	for _, d := range l.TakeDebts(10, t0) {
		if d.Window.Unit == config.UnitUSD {
			usd += d.Amount
			assert.Equal(t, budget.Amounts{USD: d.Amount}, AmountsOf(d.Window.Unit, d.Amount))
		}
	}
	assert.Equal(t, int64(950_000_000), usd, "owed to Redis in nanodollars")
}
