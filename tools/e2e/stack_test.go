package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
	"github.com/tokenlimit/ai-token-ratelimit/internal/syncbuf"
	"github.com/tokenlimit/ai-token-ratelimit/tools/localgw/gateway"
	"github.com/tokenlimit/ai-token-ratelimit/tools/mockllm/llm"
)

// rule is the rule name of every test configuration; counters are
// atrl:{e2e|limit_by_per_header|x-api-key|<key>}:t<window>:<bucket>.
const rule = "e2e"

// testConfig limits each x-api-key value on its own, with a budget chosen by
// its prefix: big- keys are practically unlimited (for exact charges),
// small- keys have 100 tokens a day, shared- keys 2000. Only day windows:
// a test never straddles two buckets (see avoidDayEdge).
func testConfig(failureMode string, redisTimeoutMs int) string {
	return fmt.Sprintf(`{
		"rule_name": %q,
		"rule_items": [{"limit_by_per_header": "x-api-key", "limit_keys": [
			{"key": "regexp:^big-", "token_per_day": 1000000000},
			{"key": "regexp:^small-", "token_per_day": 100},
			{"key": "regexp:^shared-", "token_per_day": 2000}]}],
		"rejected_msg": %q,
		"show_limit_quota_header": true,
		"failure_mode": %q,
		"redis": {"service_name": "redis.static", "timeout": %d}}`,
		rule, rejectedMsg, failureMode, redisTimeoutMs)
}

const rejectedMsg = `{"error":{"code":"rate_limited","message":"token budget used up"}}`

// stack is one end-to-end setup: a redis-server, the mock LLM, and the
// gateway with the plugin in front of it, on loopback ports chosen at run
// time. Everything stops when the test ends.
type stack struct {
	t        *testing.T
	redis    *redistest.Server
	gw       *gateway.Gateway
	url      string // the gateway's base URL
	client   *http.Client
	upstream *upstreamLog
	logs     *syncbuf.Buffer
}

// startStack starts a stack whose gateway runs the plugin with config.
func startStack(t *testing.T, config string) *stack {
	t.Helper()
	require.True(t, json.Valid([]byte(config)), "test config is not JSON: %s", config)
	s := &stack{t: t, redis: redistest.Start(t), upstream: &upstreamLog{}, logs: &syncbuf.Buffer{}}
	mock := httptest.NewServer(s.upstream.wrap(llm.New(llm.Options{})))
	t.Cleanup(mock.Close)

	gw, err := gateway.New(gateway.Options{Wasm: pluginWasm, Config: []byte(config), Upstream: mock.URL,
		Redis: s.redis.Addr, Log: s.logs, AccessLog: true})
	require.NoError(t, err)
	s.gw = gw
	front := httptest.NewServer(gw)
	s.url = front.URL
	transport := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 100}
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: transport}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		front.Close()
		gw.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", s.logs.String())
		}
	})
	return s
}

// counter reads the current day counter of an x-api-key value.
func (s *stack) counter(key string) int64 {
	s.t.Helper()
	return s.redis.Int("GET", fmt.Sprintf("atrl:{%s|limit_by_per_header|x-api-key|%s}:t86400:%d", rule, key, s.redis.Now()/86400))
}

// avoidDayEdge makes sure the test's requests all land in today's bucket.
func (s *stack) avoidDayEdge() { s.redis.AvoidWindowEdge(86400, 60) }

// waitIdle waits until every request has ended and every Redis call (the
// charges sent at the end of streams) has been answered.
func (s *stack) waitIdle() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(s.t, s.gw.WaitIdle(ctx))
}

// request is one call through the gateway.
type request struct {
	path    string
	body    string
	key     string // x-api-key, "" for none
	usage   string // x-mock-usage
	headers []string
}

func (s *stack) newRequest(ctx context.Context, r request) *http.Request {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+r.path, strings.NewReader(r.body))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		req.Header.Set("X-Api-Key", r.key)
	}
	if r.usage != "" {
		req.Header.Set(llm.HeaderUsage, r.usage)
	}
	for i := 0; i+1 < len(r.headers); i += 2 {
		req.Header.Set(r.headers[i], r.headers[i+1])
	}
	return req
}

// do sends a request and reads the whole response.
func (s *stack) do(r request) (*http.Response, string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := s.client.Do(s.newRequest(ctx, r))
	require.NoError(s.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err, "reading the response")
	return resp, string(body)
}

// upstreamLog records what reached the mock LLM.
type upstreamLog struct {
	mu   sync.Mutex
	seen []upstreamRequest
}

type upstreamRequest struct {
	path      string
	header    http.Header
	cancelled bool      // the gateway went away before the mock had answered
	ended     time.Time // when the mock's handler returned
}

// wrap records each request and how its answer ended.
func (u *upstreamLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Clone()
		h.ServeHTTP(w, r)
		u.mu.Lock()
		defer u.mu.Unlock()
		u.seen = append(u.seen, upstreamRequest{path: r.URL.RequestURI(), header: header,
			cancelled: r.Context().Err() != nil, ended: time.Now()})
	})
}

// keyPlace says where the requests that reached the mock carried key: the
// headers holding it ("authorization: Bearer" when as a Bearer token), or
// "?key=", joined by ", ".
func (u *upstreamLog) keyPlace(key string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var places []string
	for _, r := range u.seen {
		for name, values := range r.header {
			for _, v := range values {
				switch {
				case v == "Bearer "+key:
					places = append(places, strings.ToLower(name)+": Bearer")
				case v == key:
					places = append(places, strings.ToLower(name))
				}
			}
		}
		if strings.Contains(r.path, "key="+key) {
			places = append(places, "?key=")
		}
	}
	slices.Sort(places)
	return strings.Join(slices.Compact(places), ", ")
}

// withKey returns the requests that reached the mock with an x-api-key.
func (u *upstreamLog) withKey(key string) []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamRequest
	for _, r := range u.seen {
		if r.header.Get("X-Api-Key") == key {
			out = append(out, r)
		}
	}
	return out
}
