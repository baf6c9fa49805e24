package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmbuild"
)

// The gateway with the plugin itself (make build's main.wasm): what a user
// of make run sees when it starts, and in its access log.

var limiterPlugin struct {
	once sync.Once
	wasm []byte
	err  error
}

// buildLimiter builds the plugin to WASM, once per test run.
func buildLimiter(t *testing.T) []byte {
	t.Helper()
	limiterPlugin.once.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-limiter")
		if err != nil {
			limiterPlugin.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "main.wasm")
		if limiterPlugin.err = wasmbuild.Build(wasmbuild.Plugin, out); limiterPlugin.err == nil {
			limiterPlugin.wasm, limiterPlugin.err = os.ReadFile(out)
		}
	})
	require.NoError(t, limiterPlugin.err, "building the plugin")
	return limiterPlugin.wasm
}

// limiterConfig limits each x-api-key value to plenty of tokens a day.
const limiterConfig = `{"rule_name": "gw", "rule_items": [{"limit_by_per_header": "x-api-key",
	"limit_keys": [{"key": "*", "token_per_day": 1000000}]}], "redis": {"service_name": "redis.static", "timeout": 1000}}`

// A configuration the plugin refuses is New's error, the plugin's one line
// without its tags, and nothing is logged besides: the error says it.
func TestNewSaysARefusedConfigurationOnce(t *testing.T) {
	wasm := buildLimiter(t)
	var log syncbuf.Buffer
	_, err := New(Options{Wasm: wasm, Upstream: "http://127.0.0.1:9", Redis: "127.0.0.1:9", Log: &log,
		Config: []byte(strings.Replace(limiterConfig, `"token_per_day": 1000000`, `"token_per_day": 0`, 1))})
	var refused *ConfigError
	require.ErrorAs(t, err, &refused)
	const reason = "rule_items[0].limit_keys[0].token_per_day: must be a positive integer, got number 0"
	assert.Equal(t, "configuration refused: "+reason, refused.Reason)
	assert.Equal(t, "the plugin refused its configuration: "+reason, err.Error())
	assert.Empty(t, log.String(), "the plugin's line is the error, not also a log line")

	// A configuration it takes: what the plugin logged while starting is
	// in the log.
	g, err := New(Options{Wasm: wasm, Config: []byte(limiterConfig), Upstream: "http://127.0.0.1:9", Redis: "127.0.0.1:9", Log: &log})
	require.NoError(t, err)
	g.Close()
	assert.Contains(t, log.String(), "plugin start successfully")
}

// The plugin, handed JSON that is not JSON (the gateway hands it JSON),
// says where the mistake is, in the words atrl and make run use for a
// file (config.CheckJSON): before, it said "invalid JSON".
func TestNewSaysWhereTheJSONMistakeIs(t *testing.T) {
	wasm := buildLimiter(t)
	var log syncbuf.Buffer
	bad := strings.Replace(limiterConfig, `"timeout": 1000}`, `"timeout": 1000,}`, 1)
	_, err := New(Options{Wasm: wasm, Upstream: "http://127.0.0.1:9", Redis: "127.0.0.1:9", Log: &log, Config: []byte(bad)})
	var refused *ConfigError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, "configuration refused: invalid JSON at line 2, column 117: a comma after the last member of an object (JSON allows none)", refused.Reason)
	assert.Equal(t, refused.Reason, config.Refusal(config.CheckJSON([]byte(bad))))
}

// The access log says a client went away only when it left before the end
// of its response: not when it closes its connection as soon as it has
// read a whole response of known length (as curl does), while the plugin
// still holds the end of the stream until Redis has its charge.
func TestAccessLogSaysClientWentAwayOnlyWhenItDid(t *testing.T) {
	redis := redistest.Start(t)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
			_ = http.NewResponseController(w).Flush()
			select { // the rest never comes before the client leaves
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	}))
	defer up.Close()
	defer close(release)
	var log syncbuf.Buffer
	g, err := New(Options{Wasm: buildLimiter(t), Config: []byte(limiterConfig), Upstream: up.URL, Redis: redis.Addr,
		Log: &log, AccessLog: true})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()

	// send writes a request on a connection of its own and reads the
	// response's headers.
	send := func(path string) (net.Conn, *http.Response) {
		conn, err := net.Dial("tcp", front.Listener.Addr().String())
		require.NoError(t, err)
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: llm\r\nX-Api-Key: k\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		return conn, resp
	}
	idle := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, g.WaitIdle(ctx))
	}

	for range 5 {
		conn, resp := send("/v1/chat/completions")
		assert.Equal(t, 200, resp.StatusCode)
		require.Positive(t, resp.ContentLength)
		_, err := io.ReadAll(resp.Body) // all of it: the length says where it ends
		require.NoError(t, err)
		conn.Close()
	}
	idle()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	finished := regexp.MustCompile(`gateway: 127\.0\.0\.1:\d+ POST /v1/chat/completions → 200 \(upstream\) in \d+ms$`)
	n := 0
	for _, l := range lines {
		if strings.Contains(l, "POST /v1/chat/completions") {
			n++
			assert.Regexp(t, finished, l)
		}
	}
	assert.Equal(t, 5, n, "one line per request:\n%s", log.String())

	// A client that leaves in the middle of a stream did go away.
	conn, resp := send("/v1/stream")
	assert.Equal(t, 200, resp.StatusCode)
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	conn.Close()
	idle()
	assert.Regexp(t, `gateway: 127\.0\.0\.1:\d+ POST /v1/stream → 200 \(upstream\), client went away in \d+ms\n$`, log.String())
}

// Issue 36: the plugin's budget alerts reach a receiver. Without a webhook
// the gateway prints each (what make run shows); with one, the alert is
// POSTed there, path and body as the plugin sent them, and a refusal is
// tried again. Issue 52, point 5: each is one line, at make run's log level,
// saying the alert and where it went (and the answer, or the failure): the
// plugin's own line about it ("budget alert: {...}") is not printed too.
func TestBudgetAlertsArePrintedOrPostedInOneLine(t *testing.T) {
	redis := redistest.Start(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":20,"total_tokens":50}}`)
	}))
	defer up.Close()
	config := `{"rule_name": "gw", "budget_alerts": {"thresholds": [50], "webhook": {"service_name": "alerts.static", "path": "/budget-alerts"}},
		"rule_items": [{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_day": 100}]}],
		"redis": {"service_name": "redis.static", "timeout": 1000}}`
	var log syncbuf.Buffer
	start := func(webhook string) *Gateway {
		g, err := New(Options{Wasm: buildLimiter(t), Config: []byte(config), Upstream: up.URL, Redis: redis.Addr, Log: &log, Webhook: webhook})
		require.NoError(t, err)
		t.Cleanup(func() { g.Close() })
		return g
	}
	// spend spends half of key's day through g (one alert), and returns
	// the lines logged about alerts since, once one says outcome and a tick
	// or two more have passed.
	spend := func(g *Gateway, key, outcome string) []string {
		t.Helper()
		log.Reset()
		front := httptest.NewServer(g)
		defer front.Close()
		req, err := http.NewRequest("POST", front.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(log.String(), outcome) {
			require.True(t, time.Now().Before(deadline), "%q; the log:\n%s", outcome, log.String())
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(1500 * time.Millisecond) // the plugin's tick: an alert sent twice would show
		var lines []string
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, "budget alert") {
				lines = append(lines, line)
			}
		}
		return lines
	}

	// make run's default: printed, one line, saying it was not sent and
	// where the plugin sends it.
	printing := start("")
	lines := spend(printing, "k-printed", "printed here")
	printing.Close()
	require.Len(t, lines, 1, "one line per alert; the log:\n%s", log.String())
	assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3} gateway: budget alert → printed here, not sent \(no -webhook; the plugin POSTs it to /budget-alerts on outbound\|80\|\|alerts\.static\): \{"id":"[^"]+",.*"threshold":50`, lines[0])

	// A receiver: it takes an alert, refuses the first try of one, or
	// hangs up.
	var mu sync.Mutex
	var got []string
	refusals, hangUp := 0, false
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(body))
		switch {
		case hangUp:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case refusals > 0:
			refusals--
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer receiver.Close()
	g := start(receiver.URL)
	hook := "gateway: budget alert → POST " + receiver.URL + "/budget-alerts: "

	// Taken: one line, the receiver's URL and its answer, and the body sent.
	lines = spend(g, "k-posted", "204 No Content")
	require.Len(t, lines, 1, "one line per alert; the log:\n%s", log.String())
	assert.Regexp(t, regexp.QuoteMeta(hook)+`204 No Content: \{"id":"[^"]+",.*"threshold":50`, lines[0])
	mu.Lock()
	require.Len(t, got, 1)
	sent, ok := strings.CutPrefix(got[0], "POST /budget-alerts application/json ")
	assert.True(t, ok, got[0])
	assert.True(t, strings.HasSuffix(lines[0], ": "+sent), "the line shows the body sent")

	// Refused once, then taken: a line per try, each with its answer.
	got, refusals = nil, 1
	mu.Unlock()
	lines = spend(g, "k-refused", "204 No Content")
	require.Len(t, lines, 2, "the log:\n%s", log.String())
	assert.Contains(t, lines[0], hook+"503 Service Unavailable, the plugin tries it again: {")
	assert.Contains(t, lines[1], hook+"204 No Content: {")
	mu.Lock()
	assert.Len(t, got, 2)
	assert.Equal(t, got[0], got[1], "the same alert, id and all")

	// No answer: the failure, in the line.
	hangUp = true
	mu.Unlock()
	lines = spend(g, "k-hung-up", "the plugin tries it again")
	require.NotEmpty(t, lines)
	assert.Regexp(t, regexp.QuoteMeta(hook)+`failed \(.*EOF\), the plugin tries it again: \{"id":"[^"]+",.*"threshold":50`, lines[0])
}

// Issue 50, point 4: make run's gateway keeps nothing of a stream that is
// done, in the module (its context deleted, as Envoy deletes it) or in the
// host emulator (its headers, bodies and log lines): after 3,000 streamed
// requests through the plugin the heap is where it was after 300. It once
// grew 65–300 KB per stream.
func TestMemoryStaysFlatOverThousandsOfStreams(t *testing.T) {
	redis := redistest.Start(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 20 {
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"some words of an answer"}}]}`+"\n\n")
		}
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":90,"total_tokens":100}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	var log syncbuf.Buffer
	// A Redis timeout no loaded machine reaches: a call that timed out
	// would let its request through uncharged (failure_mode allow).
	config := strings.Replace(limiterConfig, `"timeout": 1000`, `"timeout": 10000`, 1)
	g, err := New(Options{Wasm: buildLimiter(t), Config: []byte(config), Upstream: up.URL, Redis: redis.Addr, Log: &log, LogLevel: "info"})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	transport := &http.Transport{MaxIdleConnsPerHost: 8}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	prompt := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("a question ", 400) + `"}]}`

	// serve sends n requests from 4 clients, and returns the heap after.
	deadline := time.Now().Add(3 * time.Minute)
	serve := func(n int) uint64 {
		var wg sync.WaitGroup
		var next atomic.Int64
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(n) && time.Now().Before(deadline); i = next.Add(1) {
					req, _ := http.NewRequest("POST", front.URL+"/v1/chat/completions", strings.NewReader(prompt))
					req.Header.Set("X-Api-Key", fmt.Sprintf("k-%d-%d", c, i%50))
					resp, err := client.Do(req)
					if !assert.NoError(t, err) {
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					assert.Equal(t, 200, resp.StatusCode)
				}
			}()
		}
		wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, g.WaitIdle(ctx))
		require.True(t, time.Now().Before(deadline), "3,300 requests took over 3 minutes")
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := serve(300)
	after := serve(3000)
	t.Logf("heap after 300 streams %d KiB, after 3,000 more %d KiB", before>>10, after>>10)
	assert.Less(t, after, before+16<<20, "the heap grew %d KiB over 3,000 streams", (int64(after)-int64(before))>>10)
	defer func() {
		if t.Failed() {
			t.Logf("the gateway's warnings:\n%s", warnings(log.String()))
		}
	}()
	assert.Equal(t, int64(3300*100), redis.Int("EVAL", `local n = 0 for _, k in ipairs(redis.call('KEYS', 'atrl:*:t86400:*')) do n = n + redis.call('GET', k) end return n`, "0"),
		"every stream charged")
}

// warnings are the lines of a gateway log at warn level and above.
func warnings(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "plugin warn") || strings.Contains(l, "plugin error") || strings.Contains(l, "gateway: Redis") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
