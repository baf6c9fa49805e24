package scripts

import (
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// alertSubjects are a key with a token minute, a request hour and 5
// requests in progress, and within it a model's money day.
func alertSubjects() []budget.Subject {
	return []budget.Subject{
		{Key: []byte(subject), Windows: []config.Window{tokens(60, 1000), {Unit: config.UnitRequests, Seconds: 3600, Limit: 100}}, Concurrent: 5},
		{Key: []byte(subject + ":m:gpt-4o"), Suffix: len(":m:gpt-4o"), Windows: []config.Window{{Unit: config.UnitUSD, Seconds: 86400, Limit: 20 * config.NanoPerDollar}}},
	}
}

// Without budget_alerts, admissions and charges are encoded byte for byte
// as before alerts existed (the calls below, as the previous version
// encoded them; only the script's digest moves with its source, and the
// admission marker's lifetime with AdmissionMarkerSeconds: 35 s here).
func TestCallsWithoutAlertsAreUnchanged(t *testing.T) {
	c := &Client{options: Options{LeaseSeconds: 60, Overrides: true}}
	subjects := alertSubjects()
	head := "$7\r\nEVALSHA\r\n$40\r\n" + Limiter.SHA1 + "\r\n$1\r\n1\r\n$42\r\natrl:{chat|limit_by_header|x-api-key|sk-1}\r\n"
	admit := "*16\r\n" + head + "$5\r\nadmit\r\n$0\r\n\r\n$12\r\n1200:3250000\r\n$24\r\nfo60:lease.1!35/marker.2\r\n$3\r\n2c5\r\n" +
		"$3\r\nt60\r\n$4\r\n1000\r\n$5\r\nq3600\r\n$3\r\n100\r\n$10\r\n1:m:gpt-4o\r\n$6\r\nu86400\r\n$11\r\n20000000000\r\n"
	charge := "*15\r\n" + head + "$6\r\ncharge\r\n$0\r\n\r\n$10\r\n1767229200\r\n$21\r\nf:lease.1/60/charge.3\r\n$10\r\n300:975000\r\n" +
		"$1\r\n0\r\n$2\r\n2c\r\n$3\r\nt60\r\n$5\r\nq3600\r\n$10\r\n1:m:gpt-4o\r\n$6\r\nu86400\r\n"
	cancel := "*15\r\n" + head + "$6\r\ncharge\r\n$0\r\n\r\n$0\r\n\r\n$21\r\nf:lease.1!35/marker.2\r\n$4\r\n-300\r\n$2\r\n-1\r\n" +
		"$2\r\n2c\r\n$3\r\nt60\r\n$5\r\nq3600\r\n$10\r\n1:m:gpt-4o\r\n$6\r\nu86400\r\n"
	assert.Equal(t, admit, string(c.encodeAdmit(subjects, budget.Amounts{Tokens: 1200, USD: 3250000}, "lease.1", "marker.2", false)))
	assert.Equal(t, charge, string(c.encodeCharge(subjects, budget.Amounts{Tokens: 300, USD: 975000}, 1767229200, "lease.1", "charge.3", "", false)))
	assert.Equal(t, charge, string(c.encodeChargeCall(subjects, budget.Amounts{Tokens: 300, USD: 975000}, nil, 1767229200, "lease.1", "charge.3", "", true, false)),
		"a charge that may alert, without thresholds")
	assert.Equal(t, cancel, string(c.encodeCharge(subjects, budget.Amounts{Tokens: -300, Requests: -1}, 0, "lease.1", "", "marker.2", false)))

	// With thresholds, an admission adds them to its options, a soft
	// window an 's' to its limit; a charge that may alert adds them (and
	// 'o' for overrides) and each window's limit. A cancel alerts nothing.
	// The suffix names the alerts' owner and, on a Redis Cluster, the
	// slot's tag: "#1a2b3c4dDBNE50,80,100".
	c.options.Thresholds, c.options.AlertOwner = []int64{50, 80, 100}, "1a2b3c4d"
	tag := string(cachekey.AppendSlotTag(nil, cachekey.Slot([]byte(subject))))
	subjects[0].SoftWindows = budget.AllSoft
	admitAlerting := strings.NewReplacer("$24\r\nfo60:lease.1!35/marker.2", "$46\r\nfo60:lease.1!35/marker.2#1a2b3c4d"+tag+"50,80,100",
		"$4\r\n1000\r\n", "$5\r\n1000s\r\n", "$3\r\n100\r\n", "$4\r\n100s\r\n").Replace(admit)
	assert.Equal(t, admitAlerting, string(c.encodeAdmit(subjects, budget.Amounts{Tokens: 1200, USD: 3250000}, "lease.1", "marker.2", false)))
	assert.Equal(t, len(admit)+22+2, len(admitAlerting), "22 bytes of thresholds, owner and slot, 1 per soft window")
	c.options.OneServer = true
	assert.Equal(t, strings.Replace(admitAlerting, "$46\r\nfo60:lease.1!35/marker.2#1a2b3c4d"+tag, "$43\r\nfo60:lease.1!35/marker.2#i1a2b3c4d", 1),
		string(c.encodeAdmit(subjects, budget.Amounts{Tokens: 1200, USD: 3250000}, "lease.1", "marker.2", false)), "one server: 'i', no slot")
	c.options.OneServer = false
	chargeAlerting := strings.NewReplacer("*15\r\n", "*18\r\n", "$21\r\nf:lease.1/60/charge.3", "$44\r\nf:lease.1/60/charge.3#o1a2b3c4d"+tag+"50,80,100",
		"$3\r\nt60\r\n", "$3\r\nt60\r\n$4\r\n1000\r\n", "$5\r\nq3600\r\n", "$5\r\nq3600\r\n$3\r\n100\r\n",
		"$6\r\nu86400\r\n", "$6\r\nu86400\r\n$11\r\n20000000000\r\n").Replace(charge)
	assert.Equal(t, chargeAlerting, string(c.encodeChargeCall(subjects, budget.Amounts{Tokens: 300, USD: 975000}, nil, 1767229200, "lease.1", "charge.3", "", true, false)))
	assert.Equal(t, charge, string(c.encodeCharge(subjects, budget.Amounts{Tokens: 300, USD: 975000}, 1767229200, "lease.1", "charge.3", "", false)),
		"Charge (the local windows' catch-up) does not alert")
	assert.Equal(t, cancel, string(c.encodeCharge(subjects, budget.Amounts{Tokens: -300, Requests: -1}, 0, "lease.1", "", "marker.2", false)))
}

// run sends an encoded call by source to Redis and returns its reply.
func runReply(t *testing.T, r *redistest.Server, q []byte) resp.Value {
	t.Helper()
	v, err := ParseReply(r.Forward(q), nil)
	require.NoError(t, err)
	return v
}

// A bucket taken past a threshold by an admission (requests) or a charge
// (tokens, money) is reported once, with its subject, window, limit (an
// override's when there is one) and what it holds; a give-back reports
// nothing.
func TestCrossingsReportedOnce(t *testing.T) {
	r := redistest.Start(t)
	r.SetClock(1767229210) // 10 s into an hour
	subjects := alertSubjects()
	c := &Client{options: Options{LeaseSeconds: 60, Overrides: true, Thresholds: []int64{50, 100}, AlertOwner: "1a2b3c4d"}}
	admit := func() budget.Verdict {
		v, err := c.parseAdmit(runReply(t, r, c.encodeAdmit(subjects, budget.Amounts{}, "lease.1", "", true)), subjects)
		require.NoError(t, err)
		return v
	}
	charge := func(a budget.Amounts, id string) []budget.Crossing {
		crossed, err := c.parseCharge(runReply(t, r, c.encodeChargeCall(subjects, a, nil, 0, "", id, "", true, true)), subjects, true, true)
		require.NoError(t, err)
		return crossed
	}
	_, err := ParseOverrides(run(t, r, OverrideCall([]byte(subject), []Override{{"q3600", 4}})))
	require.NoError(t, err)

	assert.Nil(t, admit().Crossings, "1 of 4 requests")
	v := admit()
	require.Len(t, v.Crossings, 1, "2 of 4 requests: 50 %")
	assert.Equal(t, budget.Crossing{Subject: 0, Window: 1, Threshold: 50, Used: 2, Limit: 4, Reset: 3590, Bucket: 1767229210 / 3600, At: 1767229210}, v.Crossings[0])

	// 1,500 tokens of 1,000 pass 50 and 100 % at once; $12 of $20 passes 50 %.
	crossed := charge(budget.Amounts{Tokens: 1500, USD: 12 * config.NanoPerDollar}, "c1")
	require.Len(t, crossed, 3)
	assert.Equal(t, []int64{50, 100, 50}, []int64{crossed[0].Threshold, crossed[1].Threshold, crossed[2].Threshold})
	assert.Equal(t, budget.Crossing{Subject: 0, Window: 0, Threshold: 100, Used: 1500, Limit: 1000, Reset: 50, Bucket: 1767229210 / 60, At: 1767229210}, crossed[1])
	assert.Equal(t, budget.Crossing{Subject: 1, Window: 0, Threshold: 50, Used: 12 * config.NanoPerDollar, Limit: 20 * config.NanoPerDollar,
		Reset: 82790, Bucket: 1767229210 / 86400, At: 1767229210}, crossed[2])
	assert.Equal(t, crossed, charge(budget.Amounts{Tokens: 1500, USD: 12 * config.NanoPerDollar}, "c1"),
		"a retried charge (its first answer lost): applied once, and telling what its first try crossed")
	assert.Equal(t, int64(1500), r.Int("GET", subject+":t60:29453820"), "applied once")

	// Given back under 50 % and taken past it again in the same bucket: no
	// second alert.
	assert.Nil(t, charge(budget.Amounts{Tokens: -1400}, "c2"))
	assert.Nil(t, charge(budget.Amounts{Tokens: 1400}, "c3"))
	assert.Equal(t, 4, len(r.Keys(subject+"*:![0-9]*")), "one marker per bucket and threshold")
	assert.Equal(t, []string{
		"q3600:490897:!50|2|4|3590|1767229210", "t60:29453820:!100|1500|1000|50|1767229210", "t60:29453820:!50|1500|1000|50|1767229210",
	}, r.Strings("ZRANGE", subject+":!o:1a2b3c4d", "0", "-1"), "each alert in its subject's outbox of its owner")
	assert.Equal(t, []string{"u86400:20454:!50|12000000000|20000000000|82790|1767229210"}, r.Strings("ZRANGE", subject+":m:gpt-4o:!o:1a2b3c4d", "0", "-1"))
	assert.Equal(t, int64(1767229220), r.Int("ZSCORE", subject+":!o:1a2b3c4d", "q3600:490897:!50|2|4|3590|1767229210"), "due after 10 s")
	assert.Equal(t, 0, len(r.Keys("atrl:alerts:*")), "listed by the caller, on a Redis Cluster")
	unlisted := string(cachekey.Unlisted(cachekey.Slot([]byte(subject)), "chat"))
	assert.Equal(t, []string{unlisted}, r.Keys("atrl:unlisted:*"), "noted in the subjects' slot, for the sweep")
	assert.Equal(t, []string{subject + ":!o:1a2b3c4d", subject + ":m:gpt-4o:!o:1a2b3c4d"}, r.Strings("ZRANGE", unlisted, "0", "-1"))
	assert.Equal(t, int64(1767229210), r.Int("ZSCORE", unlisted, subject+":!o:1a2b3c4d"), "by when it was first noted")

	// Soft: over its limit, an admission still goes, and counts.
	subjects[0].SoftWindows = budget.AllSoft
	v = admit()
	assert.True(t, v.Allowed, "the token minute is used up, but soft")
	assert.Equal(t, int64(0), v.Remaining)
	v = admit()
	assert.True(t, v.Allowed)
	assert.Equal(t, []int64{100}, []int64{v.Crossings[0].Threshold}, "4 of 4 requests")
	subjects[0].SoftWindows = 0
	v = admit()
	assert.False(t, v.Allowed, "the same windows, hard")
}

// Replies are checked strictly in both shapes: a verdict or totals alone,
// or followed by well-formed crossings only when alerting.
func TestCrossingRepliesAreChecked(t *testing.T) {
	subjects := alertSubjects()
	alerting := &Client{options: Options{Thresholds: []int64{50, 100}}}
	reply := func(ns ...int) resp.Value {
		vs := make([]resp.Value, len(ns))
		for i, n := range ns {
			vs[i] = resp.IntegerValue(n)
		}
		return resp.ArrayValue(vs)
	}
	verdict := []int{1, 1000, 10, 30, 1767229200, 0, 0, 1, 1}
	good := []int{1, 2, 50, 2, 4, 3000, 490896}
	v, err := alerting.parseAdmit(reply(append(verdict, good...)...), subjects)
	require.NoError(t, err)
	assert.Equal(t, []budget.Crossing{{Subject: 0, Window: 1, Threshold: 50, Used: 2, Limit: 4, Reset: 3000, Bucket: 490896, At: 1767229200}}, v.Crossings)
	_, err = (&Client{}).parseAdmit(reply(append(verdict, good...)...), subjects)
	assert.ErrorIs(t, err, ErrMalformed, "crossings from a call that sent no thresholds")
	for name, bad := range map[string][]int{
		"short":             {1, 2, 50, 2, 4, 3000},
		"subject 0":         {0, 2, 50, 2, 4, 3000, 1},
		"subject 3":         {3, 1, 50, 2, 4, 3000, 1},
		"window 3":          {1, 3, 50, 2, 4, 3000, 1},
		"unknown threshold": {1, 2, 80, 2, 4, 3000, 1},
		"limit 0":           {1, 2, 50, 2, 0, 3000, 1},
		"negative":          {1, 2, 50, -2, 4, 3000, 1},
		"negative bucket":   {1, 2, 50, 2, 4, 3000, -1},
	} {
		_, err := alerting.parseAdmit(reply(append(verdict, bad...)...), subjects)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}

	totals := []int{100, 1, 5}
	crossed, err := alerting.parseCharge(reply(append(append(totals, 1767229200), good...)...), subjects, false, true)
	require.NoError(t, err)
	assert.Equal(t, int64(1767229200), crossed[0].At)
	for name, c := range map[string]struct {
		client     *Client
		ns         []int
		maybeEmpty bool
	}{
		"totals missing":    {alerting, []int{100, 1}, false},
		"empty":             {alerting, nil, false},
		"no crossing":       {alerting, append(totals, 1767229200), false},
		"no time":           {alerting, append(totals, good...), false},
		"not alerting":      {&Client{options: alerting.options}, append(append(totals, 1767229200), good...), false},
		"bad crossing":      {alerting, append(append(totals, 1767229200), 1, 2, 80, 2, 4, 3000, 1), false},
		"no thresholds set": {&Client{}, append(append(totals, 1767229200), good...), false},
	} {
		alert := c.client == alerting
		_, err := c.client.parseCharge(reply(c.ns...), subjects, c.maybeEmpty, alert)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err = alerting.parseCharge(reply(), subjects, true, true)
	assert.NoError(t, err, "a charge applied before")
	crossed, err = alerting.parseCharge(reply(append([]int{-1, 1767229200}, good...)...), subjects, true, true)
	require.NoError(t, err, "a charge applied before, which crossed")
	assert.Equal(t, int64(490896), crossed[0].Bucket)
	for name, ns := range map[string][]int{
		"not a retry":   append([]int{-1, 1767229200}, good...),
		"no time":       append([]int{-1, 0}, good...),
		"bad crossing":  {-1, 1767229200, 1, 2, 80, 2, 4, 3000, 1},
		"no crossing":   {-1, 1767229200},
		"another first": append([]int{-2, 1767229200}, good...),
	} {
		_, err := alerting.parseCharge(reply(ns...), subjects, name != "not a retry", true)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	_, err = alerting.parseCharge(reply(totals...), subjects, false, false)
	assert.NoError(t, err)
}

// The point a threshold is reached at is exact for every limit up to 2^53
// (money windows in nanodollars): the script's arithmetic, through Redis.
func TestThresholdPointsAreExact(t *testing.T) {
	r := redistest.Start(t)
	for _, c := range []struct{ pct, limit int64 }{
		{50, 1000}, {80, 1000}, {100, 1000}, {33, 10}, {1, 1}, {99, 1 << 53}, {50, config.MaxLimit - 1},
		{80, 9_000_000 * config.NanoPerDollar}, {30, 999_999_999_999_999}, {67, 1<<53 - 3},
	} {
		// ceil(pct × limit / 100), in integers
		want := new(big.Int).Mul(big.NewInt(c.pct), big.NewInt(c.limit))
		want.Add(want, big.NewInt(99)).Quo(want, big.NewInt(100))
		got := r.Int("EVAL", alertsSource+"\nreturn point(tonumber(ARGV[1]), tonumber(ARGV[2]))", "0",
			strconv.FormatInt(c.pct, 10), strconv.FormatInt(c.limit, 10))
		assert.Equal(t, want.Int64(), got, "%d%% of %d", c.pct, c.limit)
	}
}
