package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// estimateRow is what the estimate costs per KiB of a body of one shape and
// size in WASM, with each count of text: bytes ÷ bytes_per_token (the count
// before the calibrated one, still used when bytes_per_token is set) and
// the calibrated count (the default).
type estimateRow struct {
	shape      string
	kib        int
	bytes      []float64 // ns/KiB, one per run
	calibrated []float64
}

// estimateBenchLine reads a line of BenchmarkRequest's output:
// BenchmarkRequest/<shape>/<n>KiB/<count>  <N>  <t> ns/op ... <x> ns/KiB.
var estimateBenchLine = regexp.MustCompile(`^BenchmarkRequest/([a-z-]+)/(\d+)KiB/(bytes|calibrated)\s.*?\s([0-9.]+) ns/KiB`)

// measureEstimate runs the estimate package's BenchmarkRequest compiled to
// WASM under wazero (as make test runs its tests), runs times, and reads
// its ns/KiB.
func measureEstimate(t tb, scale reportScale, runs int) []estimateRow {
	dir := t.TempDir()
	binary := filepath.Join(dir, "estimate.test.wasm")
	cmd := exec.Command("go", "test", "-c", "-o", binary, "github.com/tokenlimit/ai-token-ratelimit/estimate")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling the estimate's tests to WASM: %v\n%s", err, out)
	}
	module, err := os.ReadFile(binary)
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	compiled, err := r.CompileModule(ctx, module)
	if err != nil {
		t.Fatalf("compiling the estimate's test module: %v", err)
	}
	rows := map[string]*estimateRow{}
	var order []string
	for run := range runs {
		var out bytes.Buffer
		config := wazero.NewModuleConfig().WithName(fmt.Sprintf("estimate-%d", run)).
			WithArgs("estimate.test", "-test.run", "^$", "-test.bench", "^BenchmarkRequest$", "-test.benchtime", scale.estimateBenchTime).
			WithStdout(&out).WithStderr(&out).WithSysWalltime().WithSysNanotime()
		mod, err := r.InstantiateModule(ctx, compiled, config)
		var exit *sys.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
			t.Fatalf("running the estimate's benchmark: %v\n%s", err, out.String())
		}
		if mod != nil {
			mod.Close(ctx)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			m := estimateBenchLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			kib, _ := strconv.Atoi(m[2])
			ns, _ := strconv.ParseFloat(m[4], 64)
			key := m[1] + "/" + m[2]
			row, ok := rows[key]
			if !ok {
				row = &estimateRow{shape: m[1], kib: kib}
				rows[key] = row
				order = append(order, key)
			}
			if m[3] == "bytes" {
				row.bytes = append(row.bytes, ns)
			} else {
				row.calibrated = append(row.calibrated, ns)
			}
		}
	}
	var out []estimateRow
	for _, key := range order {
		out = append(out, *rows[key])
	}
	if len(out) == 0 {
		t.Fatalf("the estimate's benchmark printed no BenchmarkRequest line")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].shape < out[j].shape })
	return out
}

// estimateBudgetNsPerKiB is what reading a body may cost per KiB in WASM
// (issue 40: "under ~2 µs per KiB").
const estimateBudgetNsPerKiB = 2000

// writeEstimate writes the estimate's cost per KiB in WASM with each count.
func (r benchReport) writeEstimate(b *strings.Builder) {
	b.WriteString("## The estimate's cost per KiB\n\n")
	b.WriteString("What estimating a request body costs per KiB in WASM (the estimate package's `BenchmarkRequest` " +
		"compiled to WASM and run under wazero, median of the runs): with the calibrated count of text " +
		"([Estimates](docs/estimates.md), the default) and with the byte count it replaced (`bytes_per_token` set). " +
		"*conversation*: long turns of prose; *short-turns*: short turns with escapes and content parts; *dense*: " +
		"tiny messages, all structure; *agent*: twenty tool definitions, tool calls and results. Small bodies cost " +
		"a few µs whatever their size; the larger ones show the cost per KiB.\n\n")
	b.WriteString("| body | bytes ÷ 4 | calibrated count | the count adds |\n|---|--:|--:|--:|\n")
	for _, row := range r.estimate {
		bytesNs, calibratedNs := median(row.bytes), median(row.calibrated)
		fmt.Fprintf(b, "| %s, %d KiB | %s µs/KiB | **%s µs/KiB** | %+.0f %% |\n", row.shape, row.kib,
			microsPerKiB(bytesNs), microsPerKiB(calibratedNs), 100*(calibratedNs/bytesNs-1))
	}
	worst, shape := 0.0, ""
	for _, row := range r.estimate {
		if ns := median(row.calibrated); row.kib >= 16 && ns > worst {
			worst, shape = ns, fmt.Sprintf("%s, %d KiB", row.shape, row.kib)
		}
	}
	fmt.Fprintf(b, "\nThe most a body of 16 KiB or more costs: %s µs/KiB (%s), against a budget of %s µs/KiB.\n\n",
		microsPerKiB(worst), shape, microsPerKiB(estimateBudgetNsPerKiB))
}

func microsPerKiB(ns float64) string { return strconv.FormatFloat(ns/1000, 'f', 2, 64) }
