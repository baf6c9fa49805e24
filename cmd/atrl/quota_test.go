package main

import (
	"encoding/json"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// quotaRules has a per-value item with a per_model limit, an item whose
// requests share a counter per limit key (a regexp one), and overrides.
const quotaRules = `rule_name: chat
limit_overrides: true
rule_items:
  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "regexp:^sk-"
        token_per_minute: 1000
        token_per_hour: 5000
        query_per_minute: 100
        max_concurrent_requests: 3
        per_model:
          - model: "gpt-4*"
            token_per_minute: 100
  - limit_by_header: x-tier
    limit_keys:
      - key: "regexp:^gold"
        token_per_day: 9000
`

// subjectKey is the Redis key of a subject of item 0 (x-api-key).
func subjectKey(value string) string {
	return string(cachekey.AppendSubject(nil, "chat", "limit_by_per_header", "x-api-key", value))
}

const (
	sk1      = "atrl:{chat|limit_by_per_header|x-api-key|sk-1}"
	sk1Model = sk1 + ":m:gpt-4o"
	goldKey  = "atrl:{chat|limit_by_header|x-tier|regexp:^gold}"
)

// quotaConfig writes a configuration of rules whose redis service is addr.
func quotaConfig(t *testing.T, addr, rules string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return writeFile(t, "plugin.yaml", rules+"redis:\n  service_name: "+host+"\n  service_port: "+port+"\n")
}

// charge counts tokens and requests in the subject's windows now, as the
// plugin's charge of a response does.
func charge(t *testing.T, b redistest.Backend, key string, tokens, requests int64, windows ...string) {
	t.Helper()
	args := append([]string{"EVAL", scripts.Limiter.Source, "1", key, "charge", "", "", "f",
		strconv.FormatInt(tokens, 10), strconv.FormatInt(requests, 10), strconv.Itoa(len(windows))}, windows...)
	v := b.Do(args...)
	require.NotEqual(t, resp.Error, v.Type(), v.String())
}

// admit runs the plugin's admission of one request costing cost tokens
// with options (e.g. "fo": fixed windows, overrides read) and the
// subject's head and (window, limit) pairs; it returns {allowed, limit}.
func admit(t *testing.T, b redistest.Backend, key string, cost int64, options string, head ...string) []int {
	t.Helper()
	args := append([]string{"EVAL", scripts.Limiter.Source, "1", key, "admit", "", strconv.FormatInt(cost, 10), options}, head...)
	v := b.Do(args...)
	require.Equal(t, resp.Array, v.Type(), v.String())
	return []int{v.Array()[0].Integer(), v.Array()[1].Integer()}
}

// statusDoc runs atrl status -json with args and decodes its document.
func statusDoc(t *testing.T, args ...string) quota.Document {
	t.Helper()
	status, out, errOut := atrl("", append([]string{"status", "-json"}, args...)...)
	require.Equal(t, exitOK, status, errOut)
	var doc quota.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	return doc
}

// used is the used count of each limit of a subject of a document, by
// "kind window": {"tokens minute": 300, "concurrent": 1}.
func used(doc quota.Document, subject int) map[string]int64 {
	out := map[string]int64{}
	for _, l := range doc.Subjects[subject].Limits {
		out[strings.TrimSpace(l.Kind+" "+l.Window)] = l.Used
	}
	return out
}

func TestStatusReadsTheCounters(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, quotaRules)
	charge(t, r, sk1, 300, 1, "t60", "q60", "t3600")
	charge(t, r, sk1Model, 30, 0, "t60")
	assert.Equal(t, []int{1, 3}, admit(t, r, sk1, 0, "f60:lease-1", "0c3"), "a request in progress")
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1"}

	doc := statusDoc(t, append(subject, "-model", "gpt-4o")...)
	require.Len(t, doc.Subjects, 2)
	assert.Equal(t, map[string]int64{"tokens minute": 300, "requests minute": 1, "tokens hour": 300, "concurrent": 1}, used(doc, 0))
	assert.Equal(t, map[string]int64{"tokens minute": 30}, used(doc, 1))
	minute := doc.Subjects[0].Limits[0]
	assert.Equal(t, quota.Limit{Kind: "tokens", Window: "minute", Limit: 1000, Used: 300, Remaining: 700, ResetSeconds: minute.ResetSeconds}, minute)
	assert.True(t, minute.ResetSeconds > 0 && minute.ResetSeconds <= 60, minute.ResetSeconds)
	assert.Equal(t, "gpt-4o", doc.Subjects[1].Model)
	assert.Equal(t, "gpt-4*", doc.Subjects[1].ModelKey)
	assert.Equal(t, int64(70), doc.Subjects[1].Limits[0].Remaining)

	status, out, errOut := atrl("", append([]string{"status"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	assert.Equal(t, []string{"SUBJECT", "KIND", "WINDOW", "LIMIT", "USED", "REMAINING", "RESET"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"item", "0", "sk-1", "tokens", "minute", "1000", "300", "700"}, strings.Fields(lines[1])[:8])
	assert.Equal(t, []string{"item", "0", "sk-1", "concurrent", "-", "3", "1", "2", "-"}, strings.Fields(lines[4]))
}

// A subject two rule items name is one row per window, labelled with both
// items; the other key under merged in the JSON.
func TestStatusOfASharedSubject(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, quotaRules+`  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "*"
        token_per_minute: 800
        token_per_day: 20000
`)
	charge(t, r, sk1, 300, 1, "t60", "q60", "t3600", "t86400")
	status, out, errOut := atrl("", "status", "-config", cfg, "-rule-item", "2", "-value", "sk-1")
	require.Equal(t, exitOK, status, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Equal(t, []string{"items", "2,0", "sk-1", "tokens", "minute", "800", "300", "500"}, strings.Fields(lines[1])[:8], "item 2's 800 holds over item 0's 1,000")
	assert.Equal(t, []string{"items", "2,0", "sk-1", "tokens", "day", "20000", "300", "19700"}, strings.Fields(lines[4])[:8])
	status, out, errOut = atrl("", "status", "-json", "-config", cfg, "-rule-item", "0", "-value", "sk-1")
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, int64(2), gjson.Get(out, "subjects.0.merged.0.rule_item").Int(), out)
	assert.Equal(t, "*", gjson.Get(out, "subjects.0.merged.0.key").Str, out)
}

func TestStatusJSONFieldNames(t *testing.T) {
	r := redistest.Start(t)
	cfg := quotaConfig(t, r.Addr, quotaRules+"unmatched_threshold:\n  query_per_minute: 3\n")
	status, out, errOut := atrl("", "status", "-json", "-config", cfg, "-rule-item", "0", "-value", "sk-1", "-model", "gpt-4o")
	require.Equal(t, exitOK, status, errOut)
	s := gjson.Get(out, "subjects.1")
	for _, field := range []string{"rule_item", "key", "value", "model", "model_key", "limits"} {
		assert.True(t, s.Get(field).Exists(), "subjects[1].%s in %s", field, out)
	}
	for _, field := range []string{"kind", "window", "limit", "used", "remaining", "reset_seconds"} {
		assert.True(t, s.Get("limits.0."+field).Exists(), "limits[0].%s in %s", field, out)
	}
	assert.Equal(t, "concurrent", gjson.Get(out, "subjects.0.limits.3.kind").Str)
	assert.False(t, gjson.Get(out, "subjects.0.limits.3.window").Exists())

	status, out, errOut = atrl("", "status", "-json", "-config", cfg, "-threshold", "unmatched_threshold")
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "unmatched_threshold", gjson.Get(out, "subjects.0.threshold").Str, out)
	assert.False(t, gjson.Get(out, "subjects.0.rule_item").Exists(), out)
}

func TestResetOneWindowOrAll(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, quotaRules)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1"}
	charge(t, r, sk1, 300, 2, "t60", "q60", "t3600")
	admit(t, r, sk1, 0, "f60:lease-1", "0c3")

	status, out, errOut := atrl("", append([]string{"reset", "-window", "minute"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.True(t, strings.HasPrefix(out, "reset the minute token, minute request windows: 2 counters deleted\n"), out)
	assert.Contains(t, out, "SUBJECT", "the status after")
	assert.Equal(t, map[string]int64{"tokens minute": 0, "requests minute": 0, "tokens hour": 300, "concurrent": 1}, used(statusDoc(t, subject...), 0),
		"the hour is left, and so is the request in progress")

	charge(t, r, sk1, 50, 1, "t60", "q60")
	status, out, errOut = atrl("", append([]string{"reset", "-kind", "requests", "-json"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	var doc quota.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc), "-json prints the status document alone")
	assert.Equal(t, map[string]int64{"tokens minute": 50, "requests minute": 0, "tokens hour": 300, "concurrent": 1}, used(doc, 0))

	status, _, errOut = atrl("", append([]string{"reset"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Empty(t, r.Keys(sk1+":[tq]*"), "every window's counter is gone")
	assert.Equal(t, int64(1), r.Int("ZCARD", sk1+":c"))

	// A per_model subject alone.
	charge(t, r, sk1, 10, 0, "t60")
	charge(t, r, sk1Model, 10, 0, "t60")
	status, _, errOut = atrl("", append([]string{"reset", "-model", "gpt-4o"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Empty(t, r.Keys(sk1Model+":t60:*"))
	assert.Len(t, r.Keys(sk1+":t60:*"), 1)

	status, _, errOut = atrl("", append([]string{"reset", "-window", "day"}, subject...)...)
	assert.Equal(t, exitBadArgs, status)
	assert.Equal(t, "atrl reset: the subject has no day window to reset\n", errOut)
}

func TestGrantGivesTokensBack(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, quotaRules)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1"}
	charge(t, r, sk1, 1000, 1, "t60", "q60", "t3600")
	assert.Equal(t, 0, admit(t, r, sk1, 0, "f", "1", "t60", "1000")[0], "used up")

	status, out, errOut := atrl("", append([]string{"grant", "-tokens", "300"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.True(t, strings.HasPrefix(out, "granted up to 300 tokens back in the minute token, hour token windows\n"), out)
	assert.Equal(t, map[string]int64{"tokens minute": 700, "requests minute": 1, "tokens hour": 700, "concurrent": 0}, used(statusDoc(t, subject...), 0))
	assert.Equal(t, 1, admit(t, r, sk1, 0, "f", "1", "t60", "1000")[0], "the grant is usable")

	status, out, errOut = atrl("", append([]string{"grant", "-tokens", "100", "-window", "hour", "-json"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	var doc quota.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, map[string]int64{"tokens minute": 700, "requests minute": 1, "tokens hour": 600, "concurrent": 0}, used(doc, 0))

	status, _, errOut = atrl("", append([]string{"grant"}, subject...)...)
	assert.Equal(t, exitBadArgs, status)
	assert.Equal(t, "atrl grant: -tokens: required (how many tokens to give back)\n", errOut)
	status, _, errOut = atrl("", append([]string{"grant", "-tokens", "0"}, subject...)...)
	assert.Equal(t, exitBadArgs, status)
	assert.Contains(t, errOut, "atrl grant: -tokens: must be an integer between 1 and")
}

func TestOverrideRoundTrip(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, quotaRules)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1"}
	override := func(args ...string) (int, string, string) { return atrl("", append([]string{"override"}, args...)...) }

	// Flags may come after the limits.
	status, out, errOut := override(append([]string{"set", "token_per_minute=5", "max_concurrent_requests=1"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "token_per_minute=5\nmax_concurrent_requests=1\n", out)
	status, out, errOut = override(append([]string{"list", "-json"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.JSONEq(t, `{"token_per_minute":5,"max_concurrent_requests":1}`, out)
	assert.Equal(t, int64(-1), r.Int("TTL", sk1+":o"), "overrides last until removed")

	// The status shows them, and the plugin's admissions apply them.
	doc := statusDoc(t, subject...)
	assert.Equal(t, quota.Limit{Kind: "tokens", Window: "minute", Limit: 5, Used: 0, Remaining: 5, ResetSeconds: doc.Subjects[0].Limits[0].ResetSeconds, Overridden: true}, doc.Subjects[0].Limits[0])
	assert.Equal(t, quota.Limit{Kind: "concurrent", Limit: 1, Remaining: 1, Overridden: true}, doc.Subjects[0].Limits[3])
	status, out, _ = atrl("", append([]string{"status"}, subject...)...)
	require.Equal(t, exitOK, status)
	assert.Contains(t, out, " 5* ")
	assert.Contains(t, out, "\n* an override of the configured limit")
	assert.Equal(t, []int{0, 5}, admit(t, r, sk1, 10, "fo", "1", "t60", "1000"), "10 tokens are over the override")
	assert.Equal(t, []int{1, 1000}, admit(t, r, sk1, 10, "f", "1", "t60", "1000"), "not read without 'o'")

	// A per_model subject's overrides are its own.
	status, out, errOut = override(append([]string{"set", "-model", "gpt-4o", "token_per_minute=7"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "token_per_minute=7\n", out)
	assert.Equal(t, "7", r.Do("HGET", sk1Model+":o", "t60").String())

	status, out, errOut = override(append([]string{"rm"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "no overrides\n", out)
	status, out, _ = override(append([]string{"list", "-json"}, subject...)...)
	require.Equal(t, exitOK, status)
	assert.Equal(t, "{}\n", out)
	assert.Equal(t, []int{1, 1000}, admit(t, r, sk1, 10, "fo", "1", "t60", "1000"), "the configured limit again")
	status, out, _ = override(append([]string{"list", "-model", "gpt-4o"}, subject...)...)
	require.Equal(t, exitOK, status)
	assert.Equal(t, "token_per_minute=7\n", out)

	for _, tc := range []struct{ args, stderr string }{
		{"set", "atrl override set: no limits: give FIELD=LIMIT arguments"},
		{"set token_per_minute", `atrl override set: "token_per_minute": a limit is FIELD=LIMIT`},
		{"set =5", `atrl override set: "=5": a limit is FIELD=LIMIT`},
		{"set token_per_minute=lots", `atrl override set: "token_per_minute=lots": the limit must be an integer, got "lots"`},
		{"set token_per_minute=0", "atrl override set: token_per_minute: must be an integer between 1 and 9007199254740992, got 0"},
		{"set token_per_year=5", "atrl override set: token_per_year: unknown limit"},
		{"set query_per_day=5", `atrl override set: query_per_day: the subject's key "regexp:^sk-" has no query_per_day to override`},
		{"set token_per_minute=5 token_per_minute=6", "atrl override set: token_per_minute: given twice"},
		{"list extra", `atrl override list: unexpected argument "extra"`},
		{"change", `atrl override: unknown operation "change"`},
	} {
		status, out, errOut := override(append(strings.Fields(tc.args), subject...)...)
		assert.Equal(t, exitBadArgs, status, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Contains(t, errOut, tc.stderr, tc.args)
	}
	assert.Empty(t, r.Keys(sk1+":o"), "nothing was set")
}

func TestOverrideNeedsLimitOverrides(t *testing.T) {
	r := redistest.Start(t)
	cfg := quotaConfig(t, r.Addr, strings.Replace(quotaRules, "limit_overrides: true\n", "", 1))
	status, out, errOut := atrl("", "override", "set", "-config", cfg, "-rule-item", "0", "-value", "sk-1", "token_per_minute=5")
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Equal(t, "atrl override set: limit_overrides is off in this configuration: an override would not apply\n", errOut)
	assert.Empty(t, r.Keys("*"))

	// Overrides left from when it was on can still be seen and removed.
	r.Do("HSET", sk1+":o", "t60", "5")
	status, out, errOut = atrl("", "override", "list", "-config", cfg, "-rule-item", "0", "-value", "sk-1")
	assert.Equal(t, exitOK, status)
	assert.Equal(t, "token_per_minute=5\n", out)
	assert.Contains(t, errOut, "limit_overrides is off in this configuration: the plugin does not apply these")
	status, _, _ = atrl("", "override", "rm", "-config", cfg, "-rule-item", "0", "-value", "sk-1")
	assert.Equal(t, exitOK, status)
	assert.Empty(t, r.Keys("*"))
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// Mistakes are reported before anything is sent: Redis is not even
// reachable here.
func TestBadSubjectsAndFlags(t *testing.T) {
	cfg := quotaConfig(t, closedAddr(t), quotaRules)
	static := writeFile(t, "static.yaml", quotaRules+"redis:\n  service_name: redis.static\n")
	for _, tc := range []struct {
		args   string
		stderr string
	}{
		{"status -config CFG -rule-item 7 -value sk-1", "atrl status: rule item 7 does not exist: the rule has 2\n"},
		{"status -config CFG -rule-item 0 -value nope", `atrl status: no key of rule item 0 (limit_by_per_header) matches the value "nope"` + "\n"},
		{"status -config CFG -rule-item 0", "atrl status: -value: required (the value a request of the subject carries)\n"},
		{"status -config CFG -value sk-1", "atrl status: -rule-item: required (the index of the subject's rule item in rule_items), or threshold\n"},
		{"status -config CFG -rule-item 0 -threshold global_threshold", "atrl status: -rule-item and -threshold: name the subject by one of them\n"},
		{"status -config CFG -threshold global_threshold", "atrl status: global_threshold is not configured\n"},
		{"status -config CFG -threshold everyone", `atrl status: -threshold: must be global_threshold or unmatched_threshold, got "everyone"` + "\n"},
		{"status -config CFG -rule-item 0 -value sk-1 -model claude", `atrl status: no per_model entry of the key "regexp:^sk-" matches the model "claude"` + "\n"},
		{"status -config CFG -rule-item x", `invalid value "x" for flag -rule-item`},
		{"status -rule-item 0 -value sk-1", "atrl status: -config is required"},
		{"status -config STATIC -rule-item 0 -value sk-1", `atrl status: redis.service_name "redis.static" names an Envoy static cluster, not a host atrl can reach: give Redis's address with -redis host:port` + "\n"},
		{"status -config CFG -rule-item 0 -value sk-1 extra", `atrl status: unexpected argument "extra"`},
		{"status -config CFG -rule-item 0 -value sk-1 -timeout 0s", "atrl status: -timeout must be positive"},
		{"reset -config CFG -rule-item 0 -value sk-1 -window fortnight", `atrl reset: -window: must be second, minute, hour, day, week or month, got "fortnight"` + "\n"},
		{"reset -config CFG -rule-item 0 -value sk-1 -kind bytes", `atrl reset: -kind: must be tokens, requests or usd, got "bytes"` + "\n"},
		{"reset -config CFG -rule-item 1 -value gold -kind requests", "atrl reset: the subject has no request window to reset\n"},
		{"grant -config CFG -rule-item 1 -value gold -tokens 5 -window minute", "atrl grant: the subject has no minute token window to grant tokens in\n"},
		{"override", "atrl override: set, rm or list?"},
		{"top -config CFG -n 0", "atrl top: -n and -scan-limit must be at least 1"},
		{"top -config CFG extra", `atrl top: unexpected argument "extra"`},
	} {
		args := strings.Fields(strings.NewReplacer("CFG", cfg, "STATIC", static).Replace(tc.args))
		status, out, errOut := atrl("", args...)
		assert.Equal(t, exitBadArgs, status, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Contains(t, errOut, tc.stderr, tc.args)
	}
}

// Redis that cannot be reached, or does not answer, fails the command with
// status 1 and a message naming it, within the timeout.
func TestRedisDown(t *testing.T) {
	closed := closedAddr(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	go func() { // accepts, reads until the client goes, never answers
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			go func() { defer conn.Close(); _, _ = io.Copy(io.Discard, conn) }()
		}
	}()
	http, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer http.Close()
	go func() { // not Redis
		for {
			conn, err := http.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			conn.Close()
		}
	}()

	cfg := quotaConfig(t, closed, quotaRules)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", "sk-1", "-timeout", "300ms"}
	for _, cmd := range []struct {
		name string
		args []string
	}{
		{"status", nil}, {"reset", nil}, {"grant", []string{"-tokens", "5"}},
		{"override list", nil}, {"override set", []string{"token_per_minute=5"}},
	} {
		for addr, stderr := range map[string]string{
			closed:                 "redis " + closed + ": connection refused\n",
			silent.Addr().String(): "redis " + silent.Addr().String() + ": no answer within 300ms (-timeout)\n",
			http.Addr().String():   `redis ` + http.Addr().String() + `: the server does not speak RESP (it answered "HTTP/1.1 400 Bad Request\r"): is it Redis?` + "\n",
		} {
			start := time.Now()
			args := append(append(append(strings.Fields(cmd.name), cmd.args...), subject...), "-redis", addr)
			status, out, errOut := atrl("", args...)
			assert.Equal(t, exitFailed, status, "%v", args)
			assert.Empty(t, out)
			assert.Equal(t, "atrl "+cmd.name+": "+stderr, errOut, "%v", args)
			assert.Less(t, time.Since(start), 2*time.Second, "%v", args)
		}
	}
	start := time.Now()
	status, _, errOut := atrl("", "top", "-config", cfg, "-timeout", "300ms", "-redis", silent.Addr().String())
	assert.Equal(t, exitFailed, status)
	assert.Contains(t, errOut, "no answer within 300ms")
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestRedisLogin(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	charge(t, r, sk1, 42, 0, "t60")
	require.Equal(t, "OK", r.Do("ACL", "SETUSER", "ops", "on", ">opspw", "~*", "+@all").String())
	require.Equal(t, "OK", r.Do("CONFIG", "SET", "requirepass", "s3cret").String())
	write := func(redis string) string {
		return writeFile(t, "plugin.yaml", quotaRules+"redis:\n  service_name: 127.0.0.1\n  service_port: "+r.Addr[strings.LastIndexByte(r.Addr, ':')+1:]+"\n"+redis)
	}
	minute := func(status int, out, errOut string) int64 {
		t.Helper()
		require.Equal(t, exitOK, status, errOut)
		return gjson.Get(out, "subjects.0.limits.0.used").Int()
	}
	subject := []string{"status", "-json", "-rule-item", "0", "-value", "sk-1", "-config"}

	status, _, errOut := atrl("", append(subject, write(""))...)
	assert.Equal(t, exitFailed, status)
	assert.Contains(t, errOut, "NOAUTH")
	assert.Equal(t, int64(42), minute(atrl("", append(subject, write("  password: s3cret\n"))...)))
	status, _, errOut = atrl("", append(subject, write("  password: wrong\n"))...)
	assert.Equal(t, exitFailed, status)
	assert.Contains(t, errOut, "WRONGPASS")
	assert.Contains(t, errOut, "(AUTH as the default user)")
	assert.NotContains(t, errOut, "wrong", "the password is not shown")
	assert.Equal(t, int64(42), minute(atrl("", append(subject, write("  username: ops\n  password: opspw\n"))...)))
	assert.Equal(t, int64(42), minute(atrl("", append(append(subject, write("  password: wrong\n")), "-username", "ops", "-password", "opspw")...)))

	t.Setenv(passwordEnv, "s3cret")
	assert.Equal(t, int64(42), minute(atrl("", append(subject, write("  password: wrong\n"))...)), "$%s replaces the configuration's", passwordEnv)

	// redis.database is selected.
	require.Equal(t, "OK", r.Do("SELECT", "3").String())
	charge(t, r, sk1, 7, 0, "t60")
	assert.Equal(t, int64(7), minute(atrl("", append(subject, write("  database: 3\n"))...)))
}

func TestTopRanksTheSubjectsClosestToTheirLimits(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, quotaRules)
	long := "sk-" + strings.Repeat("x", 80)                                        // hashed in its key
	charge(t, r, subjectKey("sk-a"), 900, 0, "t60", "t3600")                       // 90% of the minute
	charge(t, r, subjectKey("sk-b"), 100, 0, "t60", "t3600")                       // 10%
	charge(t, r, subjectKey("sk-c"), 4000, 0, "t3600")                             // 80% of the hour
	charge(t, r, subjectKey("sk-d"), 95, 0, "t60", "t3600")                        // 9.5%
	charge(t, r, subjectKey("sk-d")+":m:gpt-4o", 95, 0, "t60")                     // 95% of its model's minute
	charge(t, r, goldKey, 4500, 0, "t86400")                                       // 50%
	charge(t, r, subjectKey(long), 50, 0, "t60")                                   // limits unknown
	charge(t, r, subjectKey("zz-1"), 20, 0, "t60")                                 // no longer matches regexp:^sk-
	charge(t, r, "atrl:{other|limit_by_per_header|x-api-key|sk-a}", 999, 0, "t60") // another rule's
	old := r.Now()/60 - 5
	r.Do("SET", subjectKey("sk-e")+":t60:"+strconv.FormatInt(old, 10), "999") // an old window's
	_, err := scripts.ParseOverrides(mustReply(t, r, scripts.OverrideCall([]byte(subjectKey("sk-b")), []scripts.Override{{Name: "t60", Limit: 110}})))
	require.NoError(t, err) // now 91% of its minute

	status, out, errOut := atrl("", "top", "-json", "-config", cfg)
	require.Equal(t, exitOK, status, errOut)
	assert.Empty(t, errOut)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	var order []string
	for _, row := range rows {
		order = append(order, row["redis_key"].(string))
	}
	assert.Equal(t, []string{subjectKey("sk-d") + ":m:gpt-4o", subjectKey("sk-b"), subjectKey("sk-a"), subjectKey("sk-c"), goldKey, subjectKey("sk-d"),
		subjectKey(long), subjectKey("zz-1")}, order)
	first := gjson.Get(out, "0")
	assert.JSONEq(t, `{"rule_item":0,"value":"sk-d","model":"gpt-4o","kind":"tokens","window":"minute","limit":100,"used":95,"remaining":5,"fraction":0.95,"redis_key":"`+
		subjectKey("sk-d")+`:m:gpt-4o"}`, first.Raw)
	assert.Equal(t, true, rows[1]["overridden"])
	assert.Equal(t, "regexp:^gold", rows[4]["value"])
	assert.Equal(t, 1.0, rows[4]["rule_item"])
	hashed := gjson.Get(out, "6")
	assert.Nil(t, rows[6]["limit"])
	assert.Nil(t, rows[6]["fraction"])
	assert.Equal(t, int64(0), hashed.Get("rule_item").Int(), "its rule item is known")
	assert.True(t, strings.HasPrefix(hashed.Get("value").Str, "#"), hashed.Raw)
	assert.Equal(t, int64(50), hashed.Get("used").Int())
	assert.Contains(t, hashed.Get("note").Str, "hashed")
	assert.Equal(t, "no longer limited by the configuration", rows[7]["note"])

	status, out, errOut = atrl("", "top", "-config", cfg, "-n", "2")
	require.Equal(t, exitOK, status, errOut)
	lines := strings.Split(out, "\n")
	assert.Equal(t, []string{"SUBJECT", "KIND", "WINDOW", "LIMIT", "USED", "REMAINING", "USED%"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"item", "0", "sk-d", "model", "gpt-4o", "tokens", "minute", "100", "95", "5", "95.0%"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"item", "0", "sk-b", "tokens", "minute", "110*", "100", "10", "90.9%"}, strings.Fields(lines[2]))
	assert.Equal(t, "", lines[3])
	assert.Equal(t, "Subjects whose limits are unknown:", lines[4])
	assert.Contains(t, out, "no longer limited by the configuration")
	assert.Contains(t, out, "looked at 13 keys on 1 node\n")

	status, out, errOut = atrl("", "top", "-config", cfg, "-scan-limit", "3")
	require.Equal(t, exitOK, status, errOut)
	assert.Contains(t, out, "looked at 3 keys on 1 node, and stopped at -scan-limit 3: subjects in the keys not looked at are missing\n")
	status, out, errOut = atrl("", "top", "-json", "-config", cfg, "-scan-limit", "3")
	require.Equal(t, exitOK, status, errOut)
	assert.True(t, gjson.Valid(out))
	assert.Contains(t, errOut, "stopped at -scan-limit 3")
}

// mustReply sends a script call by source.
func mustReply(t *testing.T, b redistest.Backend, call scripts.Call) resp.Value {
	t.Helper()
	v, err := scripts.ParseReply(b.Forward(call(true)), nil)
	require.NoError(t, err)
	return v
}

func TestTopOfNothing(t *testing.T) {
	r := redistest.Start(t)
	cfg := quotaConfig(t, r.Addr, quotaRules)
	status, out, errOut := atrl("", "top", "-config", cfg)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "no subject counts in the current windows\n\nlooked at 0 keys on 1 node\n", out)
	status, out, _ = atrl("", "top", "-config", cfg, "-json")
	require.Equal(t, exitOK, status)
	assert.Equal(t, "[]\n", out)
}

func TestQuotaOnACluster(t *testing.T) {
	c := redistest.StartCluster(t)
	c.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, c.Addrs[0], quotaRules)
	// Subjects on each node: the commands start from the first and are
	// redirected to the others.
	values := map[string]string{}
	for i := 0; i < 200 && len(values) < len(c.Addrs); i++ {
		v := "sk-" + strconv.Itoa(i)
		if owner := c.Owner(subjectKey(v)); values[owner] == "" {
			values[owner] = v
		}
	}
	require.Len(t, values, len(c.Addrs))
	far := values[c.Addrs[2]]
	key := subjectKey(far)
	subject := []string{"-config", cfg, "-rule-item", "0", "-value", far}
	for i, addr := range c.Addrs {
		charge(t, c, subjectKey(values[addr]), int64(100*(i+1)), 0, "t60")
	}

	assert.Equal(t, int64(300), used(statusDoc(t, subject...), 0)["tokens minute"])
	status, _, errOut := atrl("", append([]string{"grant", "-tokens", "50"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, int64(250), used(statusDoc(t, subject...), 0)["tokens minute"])

	status, out, errOut := atrl("", append([]string{"override", "set", "token_per_minute=500"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "token_per_minute=500\n", out)
	assert.Equal(t, "500", c.Do("HGET", key+":o", "t60").String())
	status, out, _ = atrl("", append([]string{"override", "list"}, subject...)...)
	require.Equal(t, exitOK, status)
	assert.Equal(t, "token_per_minute=500\n", out)

	status, out, errOut = atrl("", "top", "-json", "-config", cfg)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, []string{key, subjectKey(values[c.Addrs[1]]), subjectKey(values[c.Addrs[0]])},
		[]string{gjson.Get(out, "0.redis_key").Str, gjson.Get(out, "1.redis_key").Str, gjson.Get(out, "2.redis_key").Str}, out)
	assert.Equal(t, 0.5, gjson.Get(out, "0.fraction").Float(), "250 of the override's 500")
	status, out, _ = atrl("", "top", "-config", cfg)
	require.Equal(t, exitOK, status)
	assert.Contains(t, out, "looked at 4 keys on 3 nodes\n", "3 counters and an override")

	status, _, errOut = atrl("", append([]string{"override", "rm"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	status, _, errOut = atrl("", append([]string{"reset"}, subject...)...)
	require.Equal(t, exitOK, status, errOut)
	assert.Empty(t, c.Keys(key+"*"))

	// While the slot moves, the old node answers ASK: followed.
	charge(t, c, key, 70, 0, "t60")
	finish := c.MigrateSlot(key, c.Addrs[0])
	assert.Equal(t, int64(0), used(statusDoc(t, subject...), 0)["tokens minute"],
		"asked, the new node runs the script: the counter is still on the old one")
	finish()
	assert.Equal(t, int64(70), used(statusDoc(t, subject...), 0)["tokens minute"], "after the move, MOVED leads to the new node")
}

func TestParseBucketKey(t *testing.T) {
	k, ok := parseBucketKey(sk1Model + ":t60:29533012")
	require.True(t, ok)
	assert.Equal(t, sk1Model, k.subject)
	assert.Equal(t, [4]string{"chat", "limit_by_per_header", "x-api-key", "sk-1"}, k.parts)
	assert.Equal(t, "gpt-4o", k.model)
	assert.Equal(t, int64(60), k.window.Seconds)
	assert.Equal(t, int64(29533012), k.bucket)
	k, ok = parseBucketKey("atrl:{chat|limit_by_per_ip||2001:db8::/64}:q3600:8203")
	require.True(t, ok)
	assert.Equal(t, "2001:db8::/64", k.parts[3])
	assert.Equal(t, "", k.model)
	for _, key := range []string{
		sk1 + ":c", sk1 + ":o", sk1 + ":x:abc", sk1 + ":a:abc", sk1, sk1 + ":t60", sk1 + ":t60:", sk1 + ":t60:x", sk1 + ":t0:5", sk1 + ":z60:5",
		sk1 + ":t60:5:6", sk1 + ":m::t60:5", sk1 + ":m:gpt", "atrl:{a|b|c}:t60:1", "atrl:{a|b|c|d:t60:1", "other:{a|b|c|d}:t60:1", "",
	} {
		_, ok := parseBucketKey(key)
		assert.False(t, ok, key)
	}
}

func TestRulePatternEscapesGlobs(t *testing.T) {
	assert.Equal(t, `atrl:{chat|*`, rulePattern("chat"))
	assert.Equal(t, `atrl:{a\*b\?\[c\]\\|*`, rulePattern(`a*b?[c]\`))
}

func TestFlagMessage(t *testing.T) {
	assert.Equal(t, "-rule-item and -threshold: x", flagMessage("rule_item and threshold: x"))
	assert.Equal(t, "token_per_day: must be", flagMessage("limits.token_per_day: must be"))
	assert.Equal(t, `no key matches the value "a: b"`, flagMessage(`no key matches the value "a: b"`))
}

func TestRedirection(t *testing.T) {
	for msg, want := range map[string][2]string{
		"MOVED 3999 127.0.0.1:6381": {"MOVED", "127.0.0.1:6381"},
		"ASK 3999 10.0.0.2:7000":    {"ASK", "10.0.0.2:7000"},
		"MOVED 3999 :6381":          {"MOVED", "10.0.0.9:6381"},
		"MOVED 3999 ::1:6381":       {"MOVED", "[::1]:6381"},
		"ERR wrong":                 {"", ""},
		"MOVED 3999":                {"", ""},
	} {
		kind, to, _ := redirection(&replyError{msg: msg}, "10.0.0.9:6379")
		assert.Equal(t, want, [2]string{kind, to}, msg)
	}
}

func TestParseClusterNodes(t *testing.T) {
	nodes := "07c3 127.0.0.1:30004@31004 slave e7d1 0 1426238317239 4 connected\n" +
		"67ed 127.0.0.1:30002@31002,host-2 master - 0 1426238316232 2 connected 5461-10922\n" +
		"292f :30003@31003 myself,master - 0 1426238318243 3 connected 10923-16383\n" +
		"6ec2 127.0.0.1:30005@31005 master,fail - 0 1426238316232 5 connected 0-5460\n" +
		"e7d1 127.0.0.1:30001@31001 master - 0 1426238316232 1 connected\n"
	assert.Equal(t, []string{"127.0.0.1:30002", "10.0.0.9:30003"}, parseClusterNodes(nodes, "10.0.0.9:30003"))
}

func TestQuotaHelp(t *testing.T) {
	for _, name := range []string{"status", "reset", "grant", "override", "top"} {
		status, out, _ := atrl("", "help", name)
		assert.Equal(t, exitOK, status)
		assert.True(t, strings.HasPrefix(out, "usage: atrl "+name), out)
		assert.Contains(t, out, "-config FILE")
		status, _, errOut := atrl("", name, "-h")
		assert.Equal(t, exitOK, status, name)
		assert.Contains(t, errOut, "usage: atrl "+name)
	}
	status, _, errOut := atrl("", "override", "set", "-h")
	assert.Equal(t, exitOK, status)
	assert.Contains(t, errOut, "usage: atrl override set")
}

// Issue 52, point 8: a reset more than a day away is shown in days, hours
// and minutes (24d16h42m), where it was hours (592h42m).
func TestResetsAreShownInDays(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0s", 42: "42s", 60: "1m0s", 3599: "59m59s", 3600: "1h0m", 86399: "23h59m",
		86400: "1d0h0m", 90061: "1d1h1m", 2133720: "24d16h42m", 31 * 86400: "31d0h0m",
	} {
		assert.Equal(t, want, seconds(n), "%d s", n)
	}

	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	cfg := quotaConfig(t, r.Addr, `rule_name: chat
rule_items:
  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "*"
        token_per_minute: 1000
        token_per_week: 50000
        token_per_month: 100000
`)
	doc := statusDoc(t, "-config", cfg, "-rule-item", "0", "-value", "sk-1")
	status, out, errOut := atrl("", "status", "-config", cfg, "-rule-item", "0", "-value", "sk-1")
	require.Equal(t, exitOK, status, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	reset := regexp.MustCompile(`^(?:(\d+)d)?(\d+)h(\d+)m$`)
	for i, l := range doc.Subjects[0].Limits[1:] {
		fields := strings.Fields(lines[i+2])
		shown := fields[len(fields)-1]
		m := reset.FindStringSubmatch(shown)
		require.NotNil(t, m, "%s window: reset %q\n%s", l.Window, shown, out)
		hours, _ := strconv.Atoi(m[2])
		assert.Less(t, hours, 24, "%s window: reset %q: whole days are shown as days", l.Window, shown)
		assert.Equal(t, l.ResetSeconds >= 86400, m[1] != "", "%s window: %d s to its reset, shown %q", l.Window, l.ResetSeconds, shown)
	}
}

// The shipped WasmPlugin manifest holds two configurations (two rules):
// top lists the subjects of each under its name, or of the one -rule
// names; a command on one subject needs -rule to say which.
func TestQuotaCommandsOnTheShippedManifest(t *testing.T) {
	const manifest = "../../tools/deploy/wasmplugin.yaml"
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	alice := string(cachekey.AppendSubject(nil, "consumers", "limit_by_per_consumer", "x-mse-consumer", "alice"))
	sk := string(cachekey.AppendSubject(nil, "llm-chat", "limit_by_per_api_key", "", "sk-1"))
	charge(t, r, alice, 9000, 0, "t60", "t86400") // 90% of the minute of "*"
	charge(t, r, sk, 1000, 0, "t60", "t3600")     // 20% of the minute

	status, out, errOut := atrl("", "top", "-config", manifest, "-redis", r.Addr)
	require.Equal(t, exitOK, status, errOut)
	sections := strings.Split(out, "\n\n")
	require.Len(t, sections, 4, out)
	assert.True(t, strings.HasPrefix(sections[0], "defaultConfig: rule \"consumers\":\nSUBJECT"), out)
	assert.Contains(t, sections[0], "alice")
	assert.Contains(t, sections[0], "90.0%")
	assert.Equal(t, "looked at 2 keys on 1 node", sections[1])
	assert.True(t, strings.HasPrefix(sections[2], "matchRules[0] (ingress default/llm-chat): rule \"llm-chat\":\nSUBJECT"), out)
	assert.Contains(t, sections[2], "sk-1")
	assert.Contains(t, sections[2], "20.0%")
	assert.NotContains(t, sections[2], "alice")

	status, out, errOut = atrl("", "top", "-json", "-config", manifest, "-redis", r.Addr)
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, "defaultConfig", gjson.Get(out, "0.config").Str, out)
	assert.Equal(t, "alice", gjson.Get(out, "0.value").Str)
	assert.Equal(t, "matchRules[0] (ingress default/llm-chat)", gjson.Get(out, "1.config").Str)
	assert.Equal(t, "sk-1", gjson.Get(out, "1.value").Str)
	assert.Equal(t, int64(2), gjson.Get(out, "#").Int())

	status, out, errOut = atrl("", "top", "-json", "-config", manifest, "-redis", r.Addr, "-rule", "llm-chat")
	require.Equal(t, exitOK, status, errOut)
	assert.Equal(t, []string{sk}, []string{gjson.Get(out, "0.redis_key").Str}, out)
	assert.Equal(t, int64(1), gjson.Get(out, "#").Int())

	subject := []string{"-config", manifest, "-redis", r.Addr, "-rule-item", "0", "-value", "sk-1"}
	status, _, errOut = atrl("", append([]string{"status"}, subject...)...)
	assert.Equal(t, exitBadArgs, status)
	assert.Equal(t, "atrl status: "+manifest+` holds 2 configurations (defaultConfig: rule "consumers"; `+
		`matchRules[0] (ingress default/llm-chat): rule "llm-chat"): choose one with -rule NAME`+"\n", errOut)
	for _, rule := range []string{"llm-chat", "matchRules[0]", "matchRules[0] (ingress default/llm-chat)"} {
		assert.Equal(t, int64(1000), used(statusDoc(t, append(subject, "-rule", rule)...), 0)["tokens minute"], rule)
	}
	assert.Equal(t, int64(9000), used(statusDoc(t, "-config", manifest, "-redis", r.Addr, "-rule", "defaultConfig",
		"-rule-item", "0", "-value", "alice"), 0)["tokens minute"])
}

// A document with _rules_: its global configuration and each rule are
// configurations to choose from.
func TestQuotaCommandsOnADocumentWithRules(t *testing.T) {
	r := redistest.Start(t)
	cfg := quotaConfig(t, r.Addr, quotaRules+"_rules_:\n  - _match_route_: [batch]\n    rule_name: batch\n    global_threshold: {token_per_day: 10}\n"+
		"    redis: {service_name: redis.static}\n")
	status, _, errOut := atrl("", "status", "-config", cfg, "-rule-item", "0", "-value", "sk-1")
	assert.Equal(t, exitBadArgs, status)
	assert.Contains(t, errOut, `holds 2 configurations (rule "chat"; _rules_[0] (route batch): rule "batch"): choose one with -rule NAME`)
	doc := statusDoc(t, "-config", cfg, "-rule", "chat", "-rule-item", "0", "-value", "sk-1")
	assert.Equal(t, "sk-1", doc.Subjects[0].Value)
	status, _, errOut = atrl("", "status", "-config", cfg, "-rule", "_rules_[0]", "-threshold", "global_threshold")
	assert.Equal(t, exitBadArgs, status, "batch's Redis is an Envoy static cluster")
	assert.Contains(t, errOut, `redis.service_name "redis.static" names an Envoy static cluster`)
}
