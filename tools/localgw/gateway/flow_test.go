package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// The request flows the limiter does not exercise (yet), with the test
// plugin in testdata/bodyplugin: headers held until the whole body has been
// read, a decision after a Redis reply, a reply during the body, a pause
// that never ends, responses rewritten by the plugin.

var bodyPlugin struct {
	once sync.Once
	wasm []byte
	err  error
}

// buildBodyPlugin builds testdata/bodyplugin to WASM, once per test run.
func buildBodyPlugin(t *testing.T) []byte {
	t.Helper()
	bodyPlugin.once.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-bodyplugin")
		if err != nil {
			bodyPlugin.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "plugin.wasm")
		build := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./testdata/bodyplugin")
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if msg, err := build.CombinedOutput(); err != nil {
			bodyPlugin.err = &buildError{err: err, out: string(msg)}
			return
		}
		bodyPlugin.wasm, bodyPlugin.err = os.ReadFile(out)
	})
	require.NoError(t, bodyPlugin.err, "building the test plugin")
	return bodyPlugin.wasm
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// echoUpstream answers with what it received: the body's size and digest,
// and the headers the plugin adds, in three flushed parts.
func echoUpstream(t *testing.T, hits *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("Content-Type", "text/plain")
		for _, part := range []string{
			"bytes=" + strconv.Itoa(len(body)) + " sha=" + hex.EncodeToString(sum[:8]) + "\n",
			"body-bytes=" + r.Header.Get("X-Body-Bytes") + " redis=" + r.Header.Get("X-Redis-Said") + "\n",
			"done\n",
		} {
			_, _ = io.WriteString(w, part)
			_ = http.NewResponseController(w).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// testLog writes the gateway's log to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestRequestBodyFlows(t *testing.T) {
	redis := redistest.Start(t)
	var hits atomic.Int32
	up := echoUpstream(t, &hits)
	g, err := New(Options{Wasm: buildBodyPlugin(t), Config: []byte(`{}`), Upstream: up.URL, Redis: redis.Addr,
		Log: testLog{t}, PauseTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()
	client := &http.Client{Timeout: 20 * time.Second}
	post := func(mode string, body []byte) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, front.URL+"/echo", bytes.NewReader(body))
		require.NoError(t, err)
		if mode != "" {
			req.Header.Set("X-Test", mode)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(out)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 100000/16*4) // 400 KB: many chunks, buffered by the plugin
	sum := sha256.Sum256(big)
	digest := hex.EncodeToString(sum[:8])

	t.Run("headers wait for the whole body, then a Redis reply resumes them", func(t *testing.T) {
		resp, body := post("body-decides", big)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, "BYTES=400000 SHA="+strings.ToUpper(digest)+"\nBODY-BYTES=400000 REDIS=+PONG\nDONE\n", body,
			"the upstream got the whole body and the headers the plugin added after it; the plugin rewrote the answer")
		assert.Equal(t, "200", resp.Header.Get("X-Test-Status"))
	})

	t.Run("without a mode the body passes untouched", func(t *testing.T) {
		resp, body := post("", big)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, "bytes=400000 sha="+digest+"\nbody-bytes= redis=\ndone\n", body)
		assert.Empty(t, resp.Header.Get("X-Test-Status"))
	})

	t.Run("a reply during the body never reaches the upstream", func(t *testing.T) {
		before := hits.Load()
		resp, body := post("body-decides", append(bytes.Repeat([]byte("x"), 100000), "deny"...))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Equal(t, "DENIED BY THE BODY", body, "the local reply went through the response hooks, as in Envoy")
		assert.Equal(t, "403", resp.Header.Get("X-Test-Status"))
		assert.Equal(t, before, hits.Load())
	})

	t.Run("a pause that never ends is a 504", func(t *testing.T) {
		before := hits.Load()
		start := time.Now()
		resp, body := post("never-resume", []byte("{}"))
		assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
		assert.Contains(t, strings.ToLower(body), "did not resume it within 300ms", "(upper-cased by the plugin: gateway replies go through its hooks too)")
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.Equal(t, before, hits.Load())
	})

	t.Run("Redis down: the plugin's callback gets a failed call", func(t *testing.T) {
		redis.Stop()
		resp, body := post("body-decides", []byte("{}"))
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Contains(t, body, "REDIS=FAILED")
	})
}
