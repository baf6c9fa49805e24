// Command testlog prints `go test -json` as `go test` does, and a line for
// each test that took long as it ends, so that a suite running for minutes
// (the limiter's Go and WASM runs, the end-to-end suite, the benchmark
// report's checks) shows it is moving:
//
//	go test -json ./... | testlog
//
// A failed test's output is printed whole, as go test prints it; a package
// that fails to build too. The exit status is 1 when a test or a package
// failed, or when a line is not go test's JSON (printed as it is).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// slow is how long a test runs before its end is worth a line.
const slow = 5 * time.Second

// event is a line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

// run reads events from in and writes what a reader wants to out; it
// returns the exit status.
func run(in io.Reader, out io.Writer) int {
	failed := false
	pending := map[string]*strings.Builder{} // a running test's output, by package and test
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text()) // not go test's: shown as it is
			failed = true
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" { // the package's own lines: "ok ...", "FAIL ...", a panic
				if e.Output != "PASS\n" { // go test shows it only with -v
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			b := pending[key]
			if b == nil {
				b = &strings.Builder{}
				pending[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "skip":
			delete(pending, key)
			if e.Action == "pass" && e.Test != "" && !strings.Contains(e.Test, "/") && time.Duration(e.Elapsed*float64(time.Second)) >= slow {
				fmt.Fprintf(out, "    %s %s passed in %.1fs\n", strings.TrimPrefix(e.Package, "github.com/tokenlimit/ai-token-ratelimit/"), e.Test, e.Elapsed)
			}
		case "fail":
			failed = true
			b := pending[key]
			delete(pending, key)
			if b == nil {
				continue
			}
			if i := strings.LastIndexByte(e.Test, '/'); i > 0 { // a subtest's lines go with its parent's, as go test prints them
				parent := e.Package + " " + e.Test[:i]
				if pending[parent] == nil {
					pending[parent] = &strings.Builder{}
				}
				pending[parent].WriteString(b.String())
				continue
			}
			fmt.Fprint(out, b.String())
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testlog: reading go test's output: %v\n", err)
		return 1
	}
	if failed {
		return 1
	}
	return 0
}
