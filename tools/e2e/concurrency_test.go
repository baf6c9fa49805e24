package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/tools/mockllm/llm"
)

// concurrentClients sends 50 clients × 2 streaming requests at one limit
// (2000 tokens a day) and checks what the plugin guarantees: every request
// is answered 200 or 429, none hangs, and the counter is exactly the usage
// of the admitted ones. (Requests in flight are not held back by each
// other, so more than 2000 tokens may be admitted.)
func concurrentClients(t *testing.T, s *stack) {
	const clients, perClient, key = 50, 2, "shared-1"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type result struct {
		status int
		usage  int64
		err    error
	}
	results := make(chan result, clients*perClient)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				usage := int64(40 + (c*perClient+i)%20) // 40..59 tokens, so the sum tells admitted requests apart
				req := s.newRequest(ctx, request{path: "/v1/chat/completions", key: key,
					usage:   fmt.Sprintf("%d,%d", usage/2, usage-usage/2),
					body:    `{"stream":true,"stream_options":{"include_usage":true}}`,
					headers: []string{llm.HeaderEvents, "4", llm.HeaderDelay, "20"}})
				resp, err := s.client.Do(req)
				if err != nil {
					results <- result{err: err}
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				results <- result{status: resp.StatusCode, usage: usage, err: err}
			}
		}(c)
	}
	wg.Wait()
	close(results)

	var admitted, rejected int
	var charged int64
	for r := range results {
		require.NoError(t, r.err, "every request gets an answer within the deadline")
		switch r.status {
		case http.StatusOK:
			admitted++
			charged += r.usage
		case http.StatusTooManyRequests:
			rejected++
		default:
			t.Errorf("unexpected status %d", r.status)
		}
	}
	s.waitIdle()
	t.Logf("%d admitted, %d rejected, %d tokens charged against a limit of 2000", admitted, rejected, charged)
	assert.Equal(t, clients*perClient, admitted+rejected)
	assert.Equal(t, charged, s.counter(key), "the counter is the usage of exactly the admitted requests")
	assert.GreaterOrEqual(t, charged, int64(2000), "a rejection happens only once the limit is used up")

	resp, _ := s.do(request{path: "/v1/chat/completions", key: key, usage: "1,1", body: `{}`})
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the budget is used up")
}
