package scripts

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// commandsRun is the calls of every command since the last CONFIG
// RESETSTAT, but the scripts themselves and the test's own INFO and CONFIG.
func commandsRun(r *redistest.Server) map[string]int64 {
	run := map[string]int64{}
	for cmd, stat := range r.CommandStats() {
		if cmd != "eval" && cmd != "evalsha" && cmd != "info" && !strings.HasPrefix(cmd, "config") {
			run[cmd] = stat.Calls
		}
	}
	return run
}

// The common path (a token window, Redis's own clock, a charge that may be
// retried, no alerts, no overrides) runs only the commands it needs: the
// admission reads the clock, writes nothing where a full Redis would refuse
// a write (so that it refuses the admission, not its charge later) and
// reads the bucket; the charge reads the clock, marks itself done (a retry
// must not count twice) and adds the usage in one command, the bucket's
// expiry set only when it is new.
func TestTheCommonPathRunsOnlyWhatItNeeds(t *testing.T) {
	r := redistest.Start(t)
	r.AvoidWindowEdge(60, 5)
	request := func(id string) {
		admit := r.Do("EVAL", Limiter.Source, "1", subject, opAdmit, "", "0", "f", "1", "t60", "100000")
		assert.Equal(t, int64(1), ints(admit)[0], "admitted")
		charged := r.Do("EVAL", Limiter.Source, "1", subject, opCharge, "", "", "f/62/"+id, "150", "0", "1", "t60")
		assert.NotEmpty(t, ints(charged), "charged")
	}
	r.Do("CONFIG", "RESETSTAT")
	request("first")
	assert.Equal(t, map[string]int64{"time": 2, "set": 2, "get": 1, "incrby": 1, "expire": 1}, commandsRun(r),
		"the first request makes the bucket, with its expiry")
	r.Do("CONFIG", "RESETSTAT")
	request("second")
	assert.Equal(t, map[string]int64{"time": 2, "set": 2, "get": 1, "incrby": 1}, commandsRun(r),
		"the next reads it and adds to it")
}
