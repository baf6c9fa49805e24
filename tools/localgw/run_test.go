//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// run.sh is make run: these tests run it as make does, with LISTEN, and
// everything it starts on 127.0.0.1.

// runSh is run.sh started in a process group of its own, so that a failed
// test can stop whatever it started.
type runSh struct {
	cmd    *exec.Cmd
	stdout *lines
	stderr *syncbuf.Buffer
}

func startRunSh(t *testing.T, env ...string) *runSh {
	t.Helper()
	r := &runSh{stdout: newLines(), stderr: &syncbuf.Buffer{}}
	r.cmd = exec.Command("bash", "run.sh")
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.WaitDelay = 10 * time.Second // a child left holding stdout or stderr
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) })
	return r
}

// wait waits up to limit for run.sh to exit.
func (r *runSh) wait(t *testing.T, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("run.sh still running after %v\nstdout:\n%s\nstderr:\n%s", limit, r.stdout, r.stderr)
		return nil
	}
}

// unbuiltWasm is a file where run.sh expects the plugin, for the tests
// where it must stop before loading it: they pass on a fresh clone, where
// main.wasm was never built.
func unbuiltWasm(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "main.wasm")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	return path
}

func TestRunFailsWhenListenIsTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()

	start := time.Now()
	r := startRunSh(t, "LISTEN="+l.Addr().String(), "TMPDIR="+t.TempDir(), "WASM="+unbuiltWasm(t))
	err = r.wait(t, 30*time.Second)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Less(t, time.Since(start), 10*time.Second, "it fails before building anything")
	assert.Contains(t, r.stderr.String(), "run: "+l.Addr().String()+" is already in use")
	assert.Contains(t, r.stderr.String(), "or choose another address: make run LISTEN=", "it says how to pick another address")
	assert.NotContains(t, r.stdout.String(), "building", "no other port is picked instead")
}

func TestRunRejectsAListenWithoutPort(t *testing.T) {
	r := startRunSh(t, "LISTEN=127.0.0.1", "TMPDIR="+t.TempDir(), "WASM="+unbuiltWasm(t))
	require.Error(t, r.wait(t, 30*time.Second))
	assert.Contains(t, r.stderr.String(), "LISTEN=127.0.0.1 is not host:port")
}

// roomInTheMinute waits, when less than need is left of the current
// minute, for the next one: make run's limits count in minute windows of
// its Redis's clock, the machine's, and the checks from the first call on
// read one minute's counters (a minute that ended between a grant and an
// override read 0 tokens used under a loaded machine).
func roomInTheMinute(need time.Duration) {
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < need {
		time.Sleep(left + 200*time.Millisecond)
	}
}

// TestRun is make run from start to Ctrl-C: the gateway on LISTEN, the curl
// lines it prints, 200, 200 then 429 for one key, and nothing left running.
func TestRun(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is missing: make redis-server installs it")
	}
	wasm := filepath.Join(t.TempDir(), "main.wasm")
	require.NoError(t, wasmbuild.Build(wasmbuild.Plugin, wasm))
	tmp := t.TempDir()

	// Port 0: run.sh has the gateway pick a free port (a port the test
	// picked could be taken by another suite before the gateway binds it).
	data := t.TempDir() // make run's bin/run-redis
	r := startRunSh(t, "LISTEN=127.0.0.1:0", "WASM="+wasm, "TMPDIR="+tmp, "REDIS_ADDR=", "REDIS_DATA="+data)
	// Building the tools takes most of it, from a cold cache.
	require.True(t, r.stdout.waitFor("Ctrl-C stops everything.", 3*time.Minute),
		"run.sh did not start\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)

	out := r.stdout.String()
	gateway := regexp.MustCompile(`local gateway +http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(out)
	require.Len(t, gateway, 2, out)
	listen := gateway[1]
	gw := "http://" + listen
	assert.Contains(t, out, "local gateway  "+gw+" ")
	assert.Contains(t, out, "  curl -i "+gw+"/v1/chat/completions -H 'x-api-key: demo-1'")
	assert.Contains(t, out, "export OPENAI_BASE_URL="+gw+"/v1 ")
	assert.Contains(t, out, "export ANTHROPIC_BASE_URL="+gw+" ")
	assert.Contains(t, out, `budget alerts  printed below, a "gateway: budget alert → ..." line each`)
	assert.Contains(t, out, "Redis's data   kept in "+data+" across runs: budgets spent stay spent after a restart")
	mock := regexp.MustCompile(`mock LLM +http://(\S+)`).FindStringSubmatch(out)
	redis := regexp.MustCompile(`Redis +(\S+)`).FindStringSubmatch(out)
	require.Len(t, mock, 2, out)
	require.Len(t, redis, 2, out)
	// Issue 53, point 3: the budget exporter's /metrics, on a line of its own.
	exporter := regexp.MustCompile(`(?m)^budget metrics (http://(127\.0\.0\.1:\d+)/metrics) `).FindStringSubmatch(out)
	require.Len(t, exporter, 3, out)

	// The printed curl line, three times.
	client := &http.Client{Timeout: 10 * time.Second}
	chat := func(key, model string) (*http.Response, []byte) {
		req, err := http.NewRequest("POST", gw+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		req.Header.Set("x-api-key", key)
		req.Header.Set("content-type", "application/json")
		req.Header.Set("x-mock-usage", "30,20")
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, body
	}
	var codes []int
	var last *http.Response
	var lastBody []byte
	roomInTheMinute(40 * time.Second)
	for range 3 {
		last, lastBody = chat("demo-1", "mock")
		codes = append(codes, last.StatusCode)
	}
	assert.Equal(t, []int{200, 200, 429}, codes)
	// The second call took demo-1's minute to 80 % and 100 %: two alerts,
	// printed by the gateway (the webhook make run gives the example), one
	// line each (issue 52, point 5): not also the plugin's info line.
	deadline := time.Now().Add(10 * time.Second)
	const printed = "gateway: budget alert → printed here, not sent (no -webhook; the plugin POSTs it to /budget-alerts on outbound|80||alerts.static): {"
	for strings.Count(r.stderr.String(), printed) < 2 {
		require.True(t, time.Now().Before(deadline), "two budget alerts printed:\n%s", r.stderr)
		time.Sleep(50 * time.Millisecond)
	}
	assert.Contains(t, r.stderr.String(), `"window":"minute","limit":100,"used":100`)
	assert.Equal(t, 2, strings.Count(r.stderr.String(), "budget alert"), "one line per alert:\n%s", r.stderr)
	// The example's 429: OpenAI's error for a chat completion, and the quota headers of every form.
	// Issue 53, point 2: the plugin's metrics, on a line of their own, as
	// a Higress gateway serves them: the 429 under its model.
	metricsURL := regexp.MustCompile(`(?m)^plugin metrics (http://\S+) `).FindStringSubmatch(out)
	require.Len(t, metricsURL, 2, out)
	assert.Equal(t, gw+"/stats/prometheus", metricsURL[1])
	metrics, err := client.Get(metricsURL[1])
	require.NoError(t, err)
	page, _ := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	assert.Equal(t, 200, metrics.StatusCode, string(page))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	_, err = parser.TextToMetricFamilies(bytes.NewReader(page))
	assert.NoError(t, err, "the Prometheus text parser reads it:\n%s", page)
	assert.Contains(t, string(page), "\nroute_upstream_model_consumer_metric_token_ratelimit_count"+
		`{ai_route="none",ai_cluster="none",ai_model="mock",ai_consumer="none"} 1`+"\n")
	assert.Contains(t, string(lastBody), `"code":"rate_limit_exceeded"`)
	assert.Equal(t, "0", last.Header.Get("x-ratelimit-remaining-tokens"))
	assert.NotEmpty(t, last.Header.Get("retry-after-ms"))
	assert.Contains(t, last.Header.Get("RateLimit-Policy"), `"item0.token_per_minute";q=100;w=60;qu="tokens"`)

	// The printed atrl line, as it is, from the repository's root (where
	// make run runs): what demo-1 used, read from the Redis run.sh started.
	status := regexp.MustCompile(`(?m)^  (bin/atrl status -redis (\S+) .*)$`).FindStringSubmatch(out)
	require.Len(t, status, 3, out)
	assert.Equal(t, redis[1], status[2], "the Redis run.sh started")
	assert.Contains(t, out, "  bin/atrl top -redis "+redis[1]+" -config tools/localgw/example.yaml\n")
	atrl := exec.Command("bash", "-c", status[1])
	atrl.Dir = "../.."
	got, err := atrl.CombinedOutput()
	require.NoError(t, err, "%s\n%s", status[1], got)
	assert.Regexp(t, `(?m)^item 0 demo-1 +tokens +minute +100 +100 +0 `, string(got))

	// The exporter reads what demo-1 and all keys spent from the Redis
	// run.sh started, the key by its fingerprint.
	resp, err := client.Get(exporter[1])
	require.NoError(t, err)
	exported, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(exported), `atrl_budget_used_tokens{rule="local-demo",subject="item 0 `+config.Fingerprint("demo-1")+`",window="minute"} 100`+"\n")
	assert.Contains(t, string(exported), `atrl_budget_used_usd{rule="local-demo",subject="global_threshold",window="day"} 0.00055`+"\n")
	assert.Contains(t, string(exported), `atrl_redis_up{rule="local-demo"} 1`+"\n")
	assert.NotContains(t, string(exported), "demo-1")

	// The printed quota and admin lines: what demo-1 has left, 50 tokens
	// back, then a limit of its own.
	call := func(method, path, body string, header [2]string) (int, string) {
		req, err := http.NewRequest(method, gw+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(header[0], header[1])
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	admin := [2]string{"x-admin-token", "local-admin"}
	assert.Contains(t, out, "  curl -s "+gw+"/v1/quota -H 'x-api-key: demo-1'")
	code, body := call("GET", "/v1/quota", "", [2]string{"x-api-key", "demo-1"})
	assert.Equal(t, 200, code, body)
	assert.Regexp(t, `^\{"subjects":\[\{"threshold":"global_threshold","key":"\*","value":"","limits":\[\{"kind":"usd","window":"day","limit":20,"used":0.00055,"remaining":19.99945,"reset_seconds":\d+,"levels":\[\{"level":"high","limit":20,"remaining":19.99945\},\{"level":"low","limit":15,"remaining":14.99945\}\]\}\]\},\{"rule_item":0,"key":"\*","value":"demo-1","limits":\[\{"kind":"tokens","window":"minute","limit":100,"used":100,"remaining":0,"reset_seconds":\d+\},\{"kind":"usd","window":"day","limit":1,"used":0.00055,"remaining":0.99945,"reset_seconds":\d+\}\]\}\]\}$`, body)
	code, body = call("POST", "/atrl/grant", `{"rule_item":0,"value":"demo-1","tokens":50}`, admin)
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, `"used":50,"remaining":50`)
	code, body = call("POST", "/atrl/grant", `{"rule_item":0,"value":"demo-1","tokens":50}`, [2]string{"x-admin-token", "guess"})
	assert.Equal(t, 403, code, body)
	code, body = call("PUT", "/atrl/overrides", `{"rule_item":0,"value":"demo-1","limits":{"token_per_minute":1000}}`, admin)
	assert.Equal(t, 200, code, body)
	assert.Contains(t, body, `"limit":1000,"used":50,"remaining":950`)
	assert.Contains(t, body, `"overridden":true`)

	// The printed fallback line, three times: mock-large, then served as
	// mock, then the key's minute is spent.
	assert.Contains(t, out, "  curl -i "+gw+"/v1/chat/completions -H 'x-api-key: demo-6'")
	var fallbacks []string
	codes = nil
	for range 3 {
		resp, _ := chat("demo-6", "mock-large")
		codes = append(codes, resp.StatusCode)
		fallbacks = append(fallbacks, resp.Header.Get("X-TokenRateLimit-Fallback"))
	}
	assert.Equal(t, []int{200, 200, 429}, codes)
	assert.Equal(t, []string{"", "mock", ""}, fallbacks)

	// Ctrl-C, as make run's terminal sends it to run.sh.
	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, r.wait(t, 30*time.Second), "a clean stop, status 0; stderr:\n%s", r.stderr)
	assert.Contains(t, r.stdout.String(), "\nstopped\n")
	for _, addr := range []string{listen, mock[1], redis[1], exporter[2]} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		assert.Error(t, err, "%s still answers after Ctrl-C", addr)
	}
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "run.sh's temporary directory is removed")

	// Issue 50, point 4: make run again, and Redis has what the first run
	// spent: demo-1's dollars of the day, and the limit the admin API set.
	r = startRunSh(t, "LISTEN=127.0.0.1:0", "WASM="+wasm, "TMPDIR="+tmp, "REDIS_ADDR=", "REDIS_DATA="+data)
	require.True(t, r.stdout.waitFor("Ctrl-C stops everything.", 3*time.Minute), "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	gateway = regexp.MustCompile(`local gateway +http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(r.stdout.String())
	require.Len(t, gateway, 2, r.stdout.String())
	gw = "http://" + gateway[1]
	code, body = call("GET", "/v1/quota", "", [2]string{"x-api-key", "demo-1"})
	assert.Equal(t, 200, code, body)
	assert.Regexp(t, `"value":"demo-1","limits":\[\{"kind":"tokens","window":"minute","limit":1000,.*\{"kind":"usd","window":"day","limit":1,"used":0.00055,`, body,
		"the first run's spending and override, after a restart")
	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, r.wait(t, 30*time.Second))
}

// Issue 36: with a configuration of your own, make run says what it limits
// (as atrl check reads it) and how to call it, not the example's demo keys,
// prices and admin token; budget alerts go where ALERTS_URL says.
func TestRunShowsYourConfiguration(t *testing.T) {
	wasm := filepath.Join(t.TempDir(), "main.wasm")
	require.NoError(t, wasmbuild.Build(wasmbuild.Plugin, wasm))
	mine := filepath.Join(t.TempDir(), "mine.yaml")
	require.NoError(t, os.WriteFile(mine, []byte("rule_name: mine\nrule_items:\n  - limit_by_per_header: x-team\n    limit_keys:\n"+
		"      - key: \"*\"\n        token_per_hour: 5000\nredis:\n  service_name: redis.static\n"), 0o644))
	r := startRunSh(t, "LISTEN=127.0.0.1:0", "WASM="+wasm, "TMPDIR="+t.TempDir(), "REDIS_ADDR=", "REDIS_DATA=off", "LOCALGW_CONFIG="+mine,
		"ALERTS_URL=http://127.0.0.1:9/hooks")
	require.True(t, r.stdout.waitFor("Ctrl-C stops everything.", 3*time.Minute), "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	out := r.stdout.String()
	assert.Contains(t, out, "  "+mine+`: ok: rule "mine" limits limit_by_per_header x-team (1 key); Redis redis.static (may be a Redis Cluster, `)
	// Issue 52, point 8: what runs here is one redis-server, not "a Redis Cluster".
	assert.NotContains(t, out, "(a Redis Cluster")
	assert.Regexp(t, `\nHere every Redis call of the plugin goes to make run's own redis-server, one server at 127\.0\.0\.1:\d+,\n`+
		`whatever its redis section names \(in a gateway: that service\)\.\n`, out)
	assert.Contains(t, out, "budget alerts  POSTed to http://127.0.0.1:9/hooks")
	assert.Contains(t, out, "Redis's data   not kept (REDIS_DATA=off)")
	for _, demo := range []string{"demo-1", "local-admin", "$0.000275", "/v1/quota"} {
		assert.NotContains(t, out, demo, "the example's, not this configuration's")
	}
	require.NoError(t, r.cmd.Process.Signal(os.Interrupt))
	require.NoError(t, r.wait(t, 30*time.Second))
}

// A configuration the plugin refuses, or that is not YAML or JSON, stops
// make run with exit status 2 and what atrl check says of it, word for
// word (issue 52: the file, the mistake at its line and column, the line
// shown): not a word about the port or a timeout, nothing left running.
func TestRunStopsOnABadConfiguration(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is missing: make redis-server installs it")
	}
	wasm := filepath.Join(t.TempDir(), "main.wasm")
	require.NoError(t, wasmbuild.Build(wasmbuild.Plugin, wasm))
	example, err := os.ReadFile("example.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}
	refused := write("refused.yaml", strings.Replace(string(example), "token_per_minute: 100", "token_per_minute: 0", 1))
	notYAML := write("broken.yaml", "rule_name: [local-demo\n")
	indented := write("indented.yaml", indentedYAML)
	comma := write("comma.json", trailingCommaJSON)

	for _, tc := range []struct{ config, first string }{
		{refused, refused + ": configuration refused: rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number 0\n"},
		{notYAML, notYAML + ": invalid YAML at line 1, column 12: "},
		{indented, indented + ": invalid YAML at line 6, column 8: value is not allowed in this context\n    6 |        token_per_minute: 100\n"},
		{comma, comma + ": invalid JSON at line 4, column 43: a comma after the last member of an object (JSON allows none)\n"},
	} {
		tmp := t.TempDir()
		start := time.Now()
		r := startRunSh(t, "LISTEN=127.0.0.1:0", "WASM="+wasm, "TMPDIR="+tmp, "REDIS_ADDR=", "REDIS_DATA=off", "LOCALGW_CONFIG="+tc.config)
		err := r.wait(t, 3*time.Minute)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		assert.Equal(t, 2, exit.ExitCode())
		t.Logf("%s: stopped in %v", filepath.Base(tc.config), time.Since(start).Round(time.Millisecond))

		stderr := r.stderr.String()
		assert.True(t, strings.HasPrefix(stderr, tc.first), "the mistake first:\n%s", stderr)
		assert.Equal(t, 3, strings.Count(stderr, "\n"), "the line and the file's line with a caret, nothing else:\n%s", stderr)
		// run.sh built bin/atrl before it started the gateway.
		check := exec.Command("../../bin/atrl", "check", "-config", tc.config)
		var atrlErr strings.Builder
		check.Stderr = &atrlErr
		require.Error(t, check.Run())
		assert.Equal(t, atrlErr.String(), stderr, "make run and atrl check say it in the same words")

		assert.NotContains(t, r.stdout.String(), "Ctrl-C stops everything.")
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, left, "run.sh's temporary directory is removed")
		// Redis, the mock and the gateway are in run.sh's process group.
		assert.ErrorIs(t, syscall.Kill(-r.cmd.Process.Pid, 0), syscall.ESRCH, "something run.sh started still runs")
	}
}

// lines is an io.Writer that tells when something has been written.
type lines struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func newLines() *lines { return &lines{changed: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits up to limit for s to be written.
func (l *lines) waitFor(s string, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		if strings.Contains(l.String(), s) {
			return true
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			return false
		}
	}
}
