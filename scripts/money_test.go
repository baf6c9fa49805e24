package scripts

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// Money windows count nanodollars beside the token windows, in the same
// call: reserved at admission, reconciled by a charge, given back in the
// admission's buckets; a money window decides with kind budget.KindUSD.
func TestMoneyWindows(t *testing.T) {
	r := redistest.Start(t)
	subjects := []budget.Subject{{Key: []byte(subject), Windows: []config.Window{
		{Unit: config.UnitTokens, Seconds: 86400, Limit: 1_000_000},
		{Unit: config.UnitUSD, Seconds: 86400, Limit: 20_000_000_000}, // $20
	}}}
	c := &Client{}
	day := func(spec string) int64 {
		return r.Int("GET", subject+":"+spec+":"+strconv.FormatInt(r.Now()/86400, 10))
	}

	// $19.99 reserved, then reconciled to $19.999999999: one nanodollar left.
	v, err := ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 5000, USD: 19_990_000_000}, "", "", true)), nil)
	require.NoError(t, err)
	verdict, err := parseVerdict(v, 1)
	require.NoError(t, err)
	require.True(t, verdict.Allowed)
	assert.Equal(t, int64(19_990_000_000), day("u86400"))
	assert.Equal(t, int64(5000), day("t86400"))
	_, err = ParseReply(r.Forward(c.encodeCharge(subjects, budget.Amounts{Tokens: -1000, USD: 9_999_999}, verdict.At, "", "", "", true)), nil)
	require.NoError(t, err)
	assert.Equal(t, int64(19_999_999_999), day("u86400"))
	assert.Equal(t, int64(4000), day("t86400"))

	// A request checking only passes (a nanodollar left); one reserving two
	// does not, and the money window says so.
	v, _ = ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{}, "", "", true)), nil)
	verdict, err = parseVerdict(v, 1)
	require.NoError(t, err)
	assert.True(t, verdict.Allowed)
	v, _ = ParseReply(r.Forward(c.encodeAdmit(subjects, budget.Amounts{Tokens: 10, USD: 2}, "", "", true)), nil)
	verdict, err = parseVerdict(v, 1)
	require.NoError(t, err)
	assert.False(t, verdict.Allowed)
	assert.Equal(t, budget.KindUSD, verdict.Kind)
	assert.Equal(t, int64(20_000_000_000), verdict.Limit)

	// Tokens alone are sent as before: no money argument.
	assert.NotContains(t, string(c.encodeAdmit(subjects, budget.Amounts{Tokens: 10}, "", "", false)), "10:")
	assert.Contains(t, string(c.encodeCharge(subjects, budget.Amounts{Tokens: -3, USD: -7}, 0, "", "", "", false)), "-3:-7")
}
