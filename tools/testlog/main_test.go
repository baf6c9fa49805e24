package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A passing run shows the package lines and the slow tests; a failing one
// the failed test's output, whole, and exits 1; a line that is not go
// test's JSON is shown and fails the run.
func TestTestlog(t *testing.T) {
	const pkg = `"Package":"github.com/tokenlimit/ai-token-ratelimit/limiter"`
	var out strings.Builder
	status := run(strings.NewReader(strings.Join([]string{
		`{"Action":"run",` + pkg + `,"Test":"TestA"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestA","Output":"=== RUN TestA\n"}`,
		`{"Action":"pass",` + pkg + `,"Test":"TestA","Elapsed":12.34}`,
		`{"Action":"pass",` + pkg + `,"Test":"TestQuick","Elapsed":0.2}`,
		`{"Action":"output",` + pkg + `,"Output":"PASS\n"}`,
		`{"Action":"output",` + pkg + `,"Output":"ok  \tlimiter\t12.5s\n"}`,
		`{"Action":"pass",` + pkg + `,"Elapsed":12.5}`,
	}, "\n")), &out)
	assert.Equal(t, 0, status)
	assert.Equal(t, "    limiter TestA passed in 12.3s\nok  \tlimiter\t12.5s\n", out.String())

	out.Reset()
	status = run(strings.NewReader(strings.Join([]string{
		`{"Action":"output",` + pkg + `,"Test":"TestB","Output":"=== RUN TestB\n"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestB/sub","Output":"    b_test.go:9: broke\n"}`,
		`{"Action":"output",` + pkg + `,"Test":"TestB/sub","Output":"    --- FAIL: TestB/sub (0.1s)\n"}`,
		`{"Action":"fail",` + pkg + `,"Test":"TestB/sub","Elapsed":0.1}`,
		`{"Action":"output",` + pkg + `,"Test":"TestB","Output":"--- FAIL: TestB (0.1s)\n"}`,
		`{"Action":"fail",` + pkg + `,"Test":"TestB","Elapsed":0.1}`,
		`{"Action":"output",` + pkg + `,"Output":"FAIL\tlimiter\t0.2s\n"}`,
	}, "\n")), &out)
	assert.Equal(t, 1, status)
	assert.Equal(t, "=== RUN TestB\n    b_test.go:9: broke\n    --- FAIL: TestB/sub (0.1s)\n--- FAIL: TestB (0.1s)\nFAIL\tlimiter\t0.2s\n",
		out.String(), "the failed test's lines, its subtests' with them")

	out.Reset()
	assert.Equal(t, 1, run(strings.NewReader("go: no packages\n"), &out))
	assert.Equal(t, "go: no packages\n", out.String())
}
