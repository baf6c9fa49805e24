package gateway

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/tools/mockllm/llm"
)

// Issue 52, point 4: compression can be tried in make run. Through make
// run's stack (its example configuration, the plugin, the mock LLM, a
// Redis), a request whose body is gzip or deflate is answered 200 and
// charged in Redis as the same body sent plain: every counter of its key
// (tokens of the minute, dollars of the day) holds what the plain one's
// does. Without x-mock-usage the mock reports the decoded body's size, so a
// mock that read the compressed bytes would charge less; one that did not
// decode them answered 400.
func TestCompressedRequestsThroughMakeRunsStack(t *testing.T) {
	redis := redistest.Start(t)
	redis.AvoidWindowEdge(60, 10)
	mock := httptest.NewServer(llm.New(llm.Options{}))
	defer mock.Close()
	configs, err := configfile.Load("../example.yaml")
	require.NoError(t, err)
	require.Len(t, configs, 1)
	config := configs[0].JSON
	var log syncbuf.Buffer
	g, err := New(Options{Wasm: buildLimiter(t), Config: config, Upstream: mock.URL, Redis: redis.Addr, Log: &log})
	require.NoError(t, err)
	defer g.Close()
	front := httptest.NewServer(g)
	defer front.Close()

	plain := []byte(`{"model":"mock","messages":[{"role":"user","content":"` + strings.Repeat("hi ", 40) + `"}]}`)
	var gz, deflated bytes.Buffer
	for _, w := range []io.WriteCloser{gzip.NewWriter(&gz), zlib.NewWriter(&deflated)} {
		_, err := w.Write(plain)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	for _, c := range []struct {
		key, coding string
		body        []byte
	}{{"zip-plain", "", plain}, {"zip-gzip", "gzip", gz.Bytes()}, {"zip-deflate", "deflate", deflated.Bytes()}} {
		req, err := http.NewRequest("POST", front.URL+"/v1/chat/completions", bytes.NewReader(c.body))
		require.NoError(t, err)
		req.Header.Set("x-api-key", c.key)
		req.Header.Set("content-type", "application/json")
		if c.coding != "" {
			req.Header.Set("content-encoding", c.coding)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "%s: %s\n%s", c.key, body, log.String())
		assert.Contains(t, string(body), `"prompt_tokens":`+strconv.Itoa(len(plain)/4)+`,`, "%s: the mock read the decoded body", c.key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, g.WaitIdle(ctx))

	// The counters of a subject in Redis (its windows' keys; not the
	// markers of each request's charge), with the subject's key replaced by
	// "KEY".
	counter := regexp.MustCompile(`\}:[tqu]\d+:\d+$`)
	counters := func(key string) map[string]string {
		out := map[string]string{}
		for _, k := range redis.Keys("*|" + key + "}*") {
			if counter.MatchString(k) {
				out[strings.Replace(k, key, "KEY", 1)] = redis.Do("GET", k).String()
			}
		}
		return out
	}
	want := counters("zip-plain")
	subject := "atrl:{local-demo|limit_by_per_api_key||KEY}"
	// The key's minute: the prompt (the decoded body / 4) and the mock's 16
	// tokens of output; and its day's dollars.
	assert.Equal(t, strconv.Itoa(len(plain)/4+llm.DefaultOutputTokens), want[subject+":t60:"+strconv.FormatInt(redis.Now()/60, 10)], "%v", want)
	assert.Contains(t, want, subject+":u86400:"+strconv.FormatInt(redis.Now()/86400, 10))
	assert.Len(t, want, 2)
	for _, key := range []string{"zip-gzip", "zip-deflate"} {
		assert.Equal(t, want, counters(key), "%s is charged as the plain body", key)
	}
}
