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
)

// TestQueueEndToEnd: over real HTTP, with the gateway's real 100 ms tick and
// Redis's real clock, 10 requests at once against 5 a second with
// over_limit_action: queue: all are answered 200, none 429; the late five
// wait for the next second (the gateway wakes them from the plugin's tick,
// not from a call of their own).
func TestQueueEndToEnd(t *testing.T) {
	s := startStack(t, fmt.Sprintf(`{"rule_name": %q, "over_limit_action": "queue", "max_queue_wait_ms": 3000,
		"rule_items": [{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "query_per_second": 5}]}],
		"redis": {"service_name": "redis.static"}}`, rule))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const n = 10
	statuses := make([]int, n)
	took := make([]time.Duration, n)
	// Start 50 ms into a second, so that the five the second admits leave
	// 950 ms before the next second lets the others go (a burst near the
	// end of a second made the wait too short to tell from none).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := s.client.Do(s.newRequest(ctx, request{path: "/v1/chat/completions", body: `{}`, key: "queued-1", usage: "5,5"}))
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i], took[i] = resp.StatusCode, time.Since(start)
		}(i)
	}
	wg.Wait()
	s.waitIdle()
	t.Logf("answered after %v", took)
	for i, status := range statuses {
		assert.Equal(t, http.StatusOK, status, "request %d", i)
	}
	var late int
	for _, d := range took {
		if d > 500*time.Millisecond {
			late++
		}
	}
	require.GreaterOrEqual(t, late, n-5, "at most 5 go in one second: the others waited")
	for _, d := range took {
		assert.Less(t, d, 3*time.Second, "none waited past the next second by much")
	}
}
