package e2e

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// scriptLoaded says whether Redis has the plugin's script in its cache.
func (s *stack) scriptLoaded() bool {
	s.t.Helper()
	return s.redis.Do("SCRIPT", "EXISTS", scripts.Limiter.SHA1).Array()[0].Integer() == 1
}

// redisRestart restarts Redis between two requests: an empty Redis on the
// same port, without counters or scripts, behind connections the gateway
// still holds.
func redisRestart(t *testing.T, s *stack) {
	const key = "big-restart"
	call := request{path: "/v1/chat/completions", body: `{}`, key: key, usage: "60,40"}
	resp, body := s.do(call)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	s.waitIdle()
	require.Equal(t, int64(100), s.counter(key))
	failures := s.gw.Stats().RedisFailures

	s.redis.Restart()
	require.False(t, s.scriptLoaded())

	for i, want := range []int64{100, 200} {
		resp, body := s.do(call)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d after the restart (failure_mode is deny: a failed Redis call would be a 503): %s", i+1, body)
		s.waitIdle()
		assert.Equal(t, want, s.counter(key), "request %d after the restart: the counters started from zero", i+1)
	}
	assert.True(t, s.scriptLoaded(), "the admission's NOSCRIPT fallback reloaded the script")
	assert.Equal(t, failures, s.gw.Stats().RedisFailures, "no Redis call failed across the restart")
}

// redisDownDeny stops Redis, then puts a Redis that never answers in its
// place: with failure_mode deny, limited requests get 503 both ways.
func redisDownDeny(t *testing.T, s *stack) {
	call := request{path: "/v1/chat/completions", body: `{}`, key: "big-down", usage: "1,1"}
	failures := s.gw.Stats().RedisFailures
	s.redis.Stop()

	resp, body := s.do(call)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "Token rate limit unavailable")
	assert.Greater(t, s.gw.Stats().RedisFailures, failures)

	resp, body = s.do(request{path: "/v1/chat/completions", body: `{}`, usage: "1,1"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a request no rule limits needs no Redis: %s", body)

	silent := startSilentServer(t, s.redis.Addr)
	defer silent.close()
	start := time.Now()
	resp, body = s.do(call)
	took := time.Since(start)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
	assert.GreaterOrEqual(t, took, 900*time.Millisecond, "redis.timeout is 1000 ms")
	assert.Less(t, took, 5*time.Second, "the call timed out")
	assert.Positive(t, silent.accepted(), "the gateway did reach the silent Redis")
}

// TestFailureModeAllow: with failure_mode allow, a Redis that is down lets
// limited requests through, unlimited and uncharged, and the limit holds
// again once Redis is back.
func TestFailureModeAllow(t *testing.T) {
	s := startStack(t, testConfig("allow", 1000))
	s.avoidDayEdge()
	const key = "small-allow" // 100 tokens a day
	call := request{path: "/v1/chat/completions", body: `{}`, key: key, usage: "60,60"}

	resp, body := s.do(call)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	s.waitIdle()
	resp, _ = s.do(call)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "over the budget while Redis is up")

	s.redis.Stop()
	failures := s.gw.Stats().RedisFailures
	for i := 0; i < 2; i++ {
		resp, body := s.do(call)
		require.Equal(t, http.StatusOK, resp.StatusCode, "Redis down, failure_mode allow: %s", body)
		assert.Empty(t, resp.Header.Get("X-TokenRateLimit-Remaining"), "not limited")
		assert.Contains(t, body, `"total_tokens":120`, "the upstream's answer")
	}
	s.waitIdle()
	assert.GreaterOrEqual(t, s.gw.Stats().RedisFailures, failures+2)

	s.redis.Restart()
	resp, body = s.do(call)
	require.Equal(t, http.StatusOK, resp.StatusCode, "Redis back, empty: %s", body)
	s.waitIdle()
	assert.Equal(t, int64(120), s.counter(key), "charged again once Redis is back")
	resp, _ = s.do(call)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "limited again once Redis is back")
}

// TestChargesSurviveRedisLosingItsScripts: Envoy ends a stream right after
// its last chunk, before Redis can answer the charge the plugin sends from
// that chunk, and the reply to a finished stream's call is dropped. Were the
// charge answered NOSCRIPT (a fresh Redis, a restart, SCRIPT FLUSH), its EVAL
// fallback could never run and nothing would ever be charged again: this
// test caught that. Admission and charge are one script now, loaded by the
// admission, which always runs on a live stream.
func TestChargesSurviveRedisLosingItsScripts(t *testing.T) {
	s := startStack(t, testConfig("deny", 1000))
	s.avoidDayEdge()
	s.redis.Do("SCRIPT", "FLUSH") // as after a restart
	const key = "big-noscript"
	for i := int64(1); i <= 3; i++ {
		resp, body := s.do(request{path: "/v1/chat/completions", body: `{}`, key: key, usage: "30,20"})
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		s.waitIdle()
		assert.Equal(t, 50*i, s.counter(key), "request %d charged", i)
	}
	assert.True(t, s.scriptLoaded(), "reloaded by the admission's NOSCRIPT fallback")
}

// silentServer accepts connections on an address and never answers: a
// Redis that hangs.
type silentServer struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startSilentServer(t *testing.T, addr string) *silentServer {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err, "taking over the stopped Redis's port")
	s := &silentServer{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				s.mu.Lock()
				s.conns = append(s.conns, c)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *silentServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *silentServer) close() {
	s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}
