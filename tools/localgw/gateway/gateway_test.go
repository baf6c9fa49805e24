package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRefusesBadOptionsBeforeLoadingThePlugin(t *testing.T) {
	good := Options{Wasm: []byte("\x00asm"), Config: []byte(`{}`), Upstream: "http://llm.invalid:8081", Redis: "redis.invalid:6380"}
	cases := []struct {
		change func(*Options)
		msg    string
	}{
		{func(o *Options) { o.Wasm = nil }, "the WASM module is empty"},
		{func(o *Options) { o.Upstream = "llm.invalid:8081" }, `upstream "llm.invalid:8081": want a base URL`},
		{func(o *Options) { o.Upstream = "ftp://host" }, "want a base URL"},
		{func(o *Options) { o.Redis = "localhost" }, `redis "localhost": want host:port`},
		{func(o *Options) { o.LogLevel = "verbose" }, `unknown log level "verbose"`},
		{func(o *Options) {}, "loading the plugin"}, // the options are fine, the module is not
	}
	for _, c := range cases {
		o := good
		c.change(&o)
		_, err := New(o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.msg)
	}
}

func TestPluginLogLinesAreKeptAndHostTracesDropped(t *testing.T) {
	var out bytes.Buffer
	w := &logWriter{out: &out}
	w.Write([]byte("2026/01/01 10:00:00 proxy_warn_log: [ai-token-ratelimit] [nil] [r1] charge failed\n"))
	w.Write([]byte("[redis callout to outbound|80||redis.static] query: [42 49]\n"))
	w.Write([]byte("proxy_debug_log: matched\n"))
	// The plugin's note of a budget alert: the gateway's line when it
	// sends it says it (webhook.go); other lines about alerts are kept.
	w.Write([]byte(`proxy_info_log: [ai-token-ratelimit] [nil] [r2] budget alert: {"id":"a1"}` + "\n"))
	w.Write([]byte("proxy_warn_log: [ai-token-ratelimit] [nil] [nil] budget alert to outbound|80||hooks not delivered in 3600 s, given up: {}\n"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[2], "plugin warn: [ai-token-ratelimit] [nil] [nil] budget alert to outbound|80||hooks not delivered")
	assert.Regexp(t, regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} plugin warn: \[ai-token-ratelimit\] \[nil\] \[r1\] charge failed$`), lines[0])
	assert.True(t, strings.HasSuffix(lines[1], " plugin debug: matched"), lines[1])

	out.Reset()
	w.trace = true
	w.Write([]byte("[foreign call] funcname: get_log_level\n"))
	assert.Contains(t, out.String(), "host: [foreign call] funcname: get_log_level")
}

func TestLogLevels(t *testing.T) {
	for name, want := range map[string]uint32{"": 2, "trace": 0, "DEBUG": 1, "info": 2, "warn": 3, "error": 4, "critical": 5} {
		got, err := parseLogLevel(name)
		require.NoError(t, err, name)
		assert.Equal(t, want, got, name)
	}
}

func TestStripLogTags(t *testing.T) {
	assert.Equal(t, "parse failed: x", stripLogTags("[ai-token-ratelimit] [nil] [nil] parse failed: x"))
	assert.Equal(t, "no tags", stripLogTags("no tags"))
	assert.Equal(t, "[one] tag only", stripLogTags("[one] tag only"))
}

func TestRequestHeadersAreWhatEnvoyShowsAPlugin(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://llm.example.com/v1/chat/completions?x=1", strings.NewReader("{}"))
	r.Header.Set("X-Api-Key", "k")
	r.Header.Add("Accept", "a")
	r.Header.Add("Accept", "b")
	r.Header.Set("Connection", "keep-alive, X-Hop")
	r.Header.Set("X-Hop", "per-connection")
	r.Header.Set("Transfer-Encoding", "chunked")
	h := requestHeaders(r, "req-1")

	assert.Equal(t, [][2]string{{":authority", "llm.example.com"}, {":path", "/v1/chat/completions?x=1"},
		{":method", "POST"}, {":scheme", "http"}}, h[:4], "pseudo-headers first")
	assert.Equal(t, "k", header(h, "x-api-key"))
	assert.Equal(t, "req-1", header(h, "x-request-id"), "made up when the client sent none")
	var accepts []string
	for _, kv := range h {
		assert.NotContains(t, []string{"connection", "x-hop", "transfer-encoding"}, kv[0], "hop-by-hop")
		if kv[0] == "accept" {
			accepts = append(accepts, kv[1])
		}
	}
	assert.Equal(t, []string{"a", "b"}, accepts, "one entry per value")

	r.Header.Set("X-Request-Id", "client-id")
	assert.Equal(t, "client-id", header(requestHeaders(r, "req-2"), "x-request-id"))
}

func TestHeadersBackToHTTP(t *testing.T) {
	h := toHTTP([][2]string{{":status", "200"}, {"content-type", "text/event-stream"}, {"x-tokenratelimit-limit", "100"},
		{"set-cookie", "a=1"}, {"set-cookie", "b=2"}, {"transfer-encoding", "chunked"}, {"content-length", "5"}}, "content-length")
	assert.Equal(t, http.Header{"Content-Type": {"text/event-stream"}, "X-Tokenratelimit-Limit": {"100"},
		"Set-Cookie": {"a=1", "b=2"}}, h)
}

func TestRequestIDsAreUUIDs(t *testing.T) {
	id := newRequestID()
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`), id)
	assert.NotEqual(t, id, newRequestID())
}
