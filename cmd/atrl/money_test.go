package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// moneyRules limits sk- keys by tokens a minute and $20 a day, with
// overrides, every model at $1/$2 per million tokens.
const moneyRules = `rule_name: chat
limit_overrides: true
pricing:
  "*":
    input: 1
    output: 2
rule_items:
  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "regexp:^sk-"
        token_per_minute: 1000
        usd_per_day: 20
`

// chargeUSD counts tokens, and nanodollars in money windows, in the
// subject's windows now, as the plugin's charge of a priced response does.
func chargeUSD(t *testing.T, b redistest.Backend, key string, tokens, nano int64, windows ...string) {
	t.Helper()
	args := append([]string{"EVAL", scripts.Limiter.Source, "1", key, "charge", "", "", "f",
		strconv.FormatInt(tokens, 10) + ":" + strconv.FormatInt(nano, 10), "0", strconv.Itoa(len(windows))}, windows...)
	v := b.Do(args...)
	require.NotEqual(t, resp.Error, v.Type(), v.String())
}

// withoutReset is a status document's JSON with its reset seconds, which
// move, taken out.
func withoutReset(t *testing.T, out string) string {
	t.Helper()
	var doc quota.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	for i := range doc.Subjects {
		for j := range doc.Subjects[i].Limits {
			doc.Subjects[i].Limits[j].ResetSeconds = 0
		}
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return string(b)
}

// Status shows the money window in US dollars, exactly, in the table and
// in the document; a reset of kind usd clears it alone.
func TestStatusAndResetOfMoney(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, moneyRules)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1"}
	chargeUSD(t, r, sk1, 300, 9_870_000, "t60", "u86400") // $0.00987

	status, out, errOut := atrl("", append([]string{"status", "-json"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	reset := gjson.Get(out, "subjects.0.limits.1.reset_seconds").Int()
	assert.True(t, reset > 0 && reset <= 86400, out)
	assert.Equal(t, `{"kind":"usd","window":"day","limit":20,"used":0.00987,"remaining":19.99013,"reset_seconds":`+strconv.FormatInt(reset, 10)+`}`,
		gjson.Get(out, "subjects.0.limits.1").Raw)
	assert.Equal(t, `{"subjects":[{"rule_item":0,"key":"regexp:^sk-","value":"sk-1","limits":[`+
		`{"kind":"tokens","window":"minute","limit":1000,"used":300,"remaining":700},`+
		`{"kind":"usd","window":"day","limit":20,"used":0.00987,"remaining":19.99013}]}]}`, withoutReset(t, out))
	doc := statusDoc(t, subject...)
	assert.Equal(t, int64(9_870_000), doc.Subjects[0].Limits[1].Used, "read back in nanodollars")

	status, out, errOut = atrl("", append([]string{"status"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Equal(t, []string{"item", "0", "sk-1", "usd", "day", "20", "0.00987", "19.99013"}, strings.Fields(lines[2])[:8])

	status, out, errOut = atrl("", append([]string{"reset", "-kind", "usd"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.True(t, strings.HasPrefix(out, "reset the day money window: 1 counter deleted\n"), out)
	assert.Equal(t, map[string]int64{"tokens minute": 300, "usd day": 0}, used(statusDoc(t, subject...), 0))
	assert.Empty(t, r.Keys(sk1+":u*"))

	// A grant gives tokens; the money window is left alone.
	chargeUSD(t, r, sk1, 0, 5_000_000_000, "u86400")
	status, out, errOut = atrl("", append([]string{"grant", "-tokens", "100"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.True(t, strings.HasPrefix(out, "granted up to 100 tokens back in the minute token window\n"), out)
	assert.Equal(t, map[string]int64{"tokens minute": 200, "usd day": 5_000_000_000}, used(statusDoc(t, subject...), 0))

	cfgTokens := quotaConfig(t, r.Addr, quotaRules)
	status, _, errOut = atrl("", "reset", "-kind", "usd", "-config", cfgTokens, "-rule-item", "1", "-value", "gold")
	assert.Equal(t, exitBadArgs, status)
	assert.Equal(t, "atrl reset: the subject has no money window to reset\n", errOut)
}

// Overrides of money windows are written in US dollars and kept in
// nanodollars under the window's spec.
func TestOverrideOfMoney(t *testing.T) {
	r := redistest.Start(t)
	cfg := quotaConfig(t, r.Addr, moneyRules)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1"}
	override := func(args ...string) (int, string, string) { return atrl("", append([]string{"override"}, args...)...) }

	status, out, errOut := override(append([]string{"set", "usd_per_day=0.5", "token_per_minute=7"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "usd_per_day=0.5\ntoken_per_minute=7\n", out)
	assert.Equal(t, "500000000", r.Do("HGET", sk1+":o", "u86400").String())
	status, out, errOut = override(append([]string{"list", "-json"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, `{"usd_per_day":0.5,"token_per_minute":7}`+"\n", out)
	doc := statusDoc(t, subject...)
	assert.Equal(t, quota.Limit{Kind: "usd", Window: "day", Limit: 500_000_000, Remaining: 500_000_000, ResetSeconds: doc.Subjects[0].Limits[1].ResetSeconds, Overridden: true},
		doc.Subjects[0].Limits[1])
	status, out, _ = atrl("", append([]string{"status"}, subject...)...)
	require.Equal(t, exitOK, status)
	assert.Contains(t, out, " 0.5* ")

	status, out, errOut = override(append([]string{"set", "usd_per_day=1e-3"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "usd_per_day=0.001\n", out)

	for _, tc := range []struct{ args, stderr string }{
		{"set usd_per_day=lots", `atrl override set: "usd_per_day=lots": the limit must be a number of US dollars, got "lots"`},
		{"set usd_per_day=.5", `atrl override set: "usd_per_day=.5": the limit must be a number of US dollars, got ".5"`},
		{`set usd_per_day="5"`, `the limit must be a number of US dollars`},
		{"set usd_per_day=NaN", `the limit must be a number of US dollars`},
		{"set usd_per_day=0", "atrl override set: usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got 0\n"},
		{"set usd_per_day=9000001", "atrl override set: usd_per_day: must be a number of US dollars, more than 0 and at most 9000000, got 9000001\n"},
		{"set usd_per_hour=5", `atrl override set: usd_per_hour: the subject's key "regexp:^sk-" has no usd_per_hour to override`},
		{"set token_per_minute=0.5", `atrl override set: "token_per_minute=0.5": the limit must be an integer, got "0.5"`},
	} {
		status, out, errOut := override(append(strings.Fields(tc.args), subject...)...)
		assert.Equal(t, exitBadArgs, status, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Contains(t, errOut, tc.stderr, tc.args)
	}
	assert.Equal(t, "1000000", r.Do("HGET", sk1+":o", "u86400").String(), "nothing refused was set")
}

// top finds subjects by their money counters too, and ranks and shows a
// money window in US dollars.
func TestTopOfMoney(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, moneyRules)
	long := "sk-" + strings.Repeat("x", 80)                          // hashed in its key: limits unknown
	chargeUSD(t, r, subjectKey("sk-a"), 0, 19_000_000_000, "u86400") // 95% of $20, and only money
	chargeUSD(t, r, subjectKey("sk-b"), 500, 1_000_000, "t60", "u86400")
	chargeUSD(t, r, subjectKey(long), 0, 2_500_000, "u86400")
	// Limits unknown, tokens and money: its tokens are shown, and it comes
	// before the subjects whose only counts are nanodollars.
	both := "sk-" + strings.Repeat("y", 80)
	chargeUSD(t, r, subjectKey(both), 50, 3_000_000, "t60", "u86400")

	status, out, errOut := atrl("", "top", "-json", "-config", cfg)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, `{"rule_item":0,"value":"sk-a","kind":"usd","window":"day","limit":20,"used":19,"remaining":1,"fraction":0.95,"redis_key":"`+
		subjectKey("sk-a")+`"}`, gjson.Get(out, "0").Raw)
	assert.Equal(t, "sk-b", gjson.Get(out, "1.value").Str)
	assert.Equal(t, "tokens", gjson.Get(out, "1.kind").Str, "half its tokens, a twentieth of a percent of its dollars")
	assert.Equal(t, subjectKey(both), gjson.Get(out, "2.redis_key").Str)
	assert.Equal(t, "tokens", gjson.Get(out, "2.kind").Str)
	assert.Equal(t, "50", gjson.Get(out, "2.used").Raw)
	unknown := gjson.Get(out, "3")
	assert.Equal(t, "usd", unknown.Get("kind").Str, unknown.Raw)
	assert.Equal(t, "day", unknown.Get("window").Str)
	assert.Equal(t, "0.0025", unknown.Get("used").Raw)
	assert.Equal(t, "null", unknown.Get("limit").Raw)

	status, out, errOut = atrl("", "top", "-config", cfg)
	require.Equal(t, exitOK, status, errOut)
	lines := strings.Split(out, "\n")
	assert.Equal(t, []string{"item", "0", "sk-a", "usd", "day", "20", "19", "1", "95.0%"}, strings.Fields(lines[1]))
	assert.Equal(t, "tokens", strings.Fields(lines[6])[3], out)
	assert.Equal(t, "usd", strings.Fields(lines[7])[3], out)
	assert.Equal(t, "0.0025", strings.Fields(lines[7])[5], out)
}

func TestParseBucketKeyOfMoney(t *testing.T) {
	k, ok := parseBucketKey(sk1Model + ":u86400:20512")
	require.True(t, ok)
	assert.Equal(t, sk1Model, k.subject)
	assert.Equal(t, "gpt-4o", k.model)
	assert.Equal(t, int64(86400), k.window.Seconds)
	assert.Equal(t, "usd", k.window.Unit.String())
	assert.Equal(t, int64(20512), k.bucket)
	for _, key := range []string{sk1 + ":u", sk1 + ":u0:5", sk1 + ":ux:5", sk1 + ":U60:5"} {
		_, ok := parseBucketKey(key)
		assert.False(t, ok, key)
	}
}

// pricingYAML prices gpt-4o* and claude-sonnet-4* as their providers do,
// and every other model at a price that makes a fraction of a nanodollar.
const pricingYAML = `rule_name: billed
global_threshold:
  token_per_day: 50000000
pricing:
  "gpt-4o*":
    input: 2.5
    output: 10
    cache_read: 1.25
  "claude-sonnet-4*":
    input: 3
    output: 15
    cache_read: 0.3
    cache_write: 3.75
  "*":
    input: 0.0015
    output: 0.0015
redis:
  service_name: redis.static
`

// usage prints what pricing charges beside the tokens, in US dollars,
// rounded up to the nanodollar; without pricing, or a price for the model,
// nothing.
func TestUsagePricedInDollars(t *testing.T) {
	openAI, anthropic, gemini, noUsage, _ := fixtures(t)
	cfg := writeFile(t, "plugin.yaml", pricingYAML)
	withUSD := func(line, usd, price string) string {
		return strings.TrimSuffix(line, "}") + `,"cost_usd":` + usd + `,"price":` + strconv.Quote(price) + `}`
	}

	status, out, errOut := atrl("", "usage", "-config", cfg, openAI, anthropic, gemini, noUsage)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(
		// gpt-4o-2024-08-06: 12 uncached × $2.50 + 7 × $10 + 8 cache reads
		// × $1.25, per million: $0.00011.
		withUSD(usageLineOf(openAI, openAIUsage, 27), "0.00011", `pricing: "gpt-4o*"`),
		// claude-sonnet-4-20250514: 12 × $3 + 30 × $15 + 50 × $0.30 + 100 ×
		// $3.75: $0.000876.
		withUSD(usageLineOf(anthropic, anthropicUsage, 192), "0.000876", `pricing: "claude-sonnet-4*"`),
		// No model: "*", 55 tokens × 1.5 nanodollars = 82.5, rounded up.
		withUSD(usageLineOf(gemini, geminiUsage, 55), "0.000000083", `pricing: "*"`),
		// 9 estimated output tokens of gpt-4o × $10.
		withUSD(estimatedLine(noUsage, 9), "0.00009", `pricing: "gpt-4o*"`),
	), out)

	// -model prices as that model.
	status, out, errOut = atrl("", "usage", "-config", cfg, "-model", "claude-sonnet-4-5", openAI)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(withUSD(usageLineOf(openAI, openAIUsage, 27), "0.0001434", `pricing: "claude-sonnet-4*"`)), out, "12 × $3 + 7 × $15 + 8 × $0.30")

	// No "*": a model no entry prices is priced from the catalog, and one
	// the catalog does not list either at its provider's dearest; with the
	// catalog off, it has no cost in dollars.
	noAny := strings.Replace(pricingYAML, "  \"*\":\n    input: 0.0015\n    output: 0.0015\n", "", 1)
	status, out, errOut = atrl("", "usage", "-config", writeFile(t, "plugin.yaml", noAny), "-model", "gemini-2.5-flash", gemini)
	assert.Equal(t, exitOK, status, errOut)
	// 24 uncached × $0.30 + 15 × $2.50 + 16 cache reads × $0.03 per million.
	assert.Equal(t, lines(withUSD(usageLineOf(gemini, geminiUsage, 55), "0.00004518", "the catalog: google's gemini-2.5-flash ("+pricing.Source+")")), out)
	status, out, errOut = atrl("", "usage", "-config", writeFile(t, "plugin.yaml", noAny), "-model", "my-finetune", gemini)
	assert.Equal(t, exitOK, status, errOut)
	assert.Contains(t, out, `"price":"not listed: the dearest price of openai in the catalog`)
	status, out, errOut = atrl("", "usage", "-config", writeFile(t, "plugin.yaml", "pricing_catalog: off\n"+noAny), gemini)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(usageLineOf(gemini, geminiUsage, 55)), out)
}
