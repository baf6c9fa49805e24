# The plugin builds with the standard Go toolchain to a proxy-wasm module.
GO ?= go
SOURCES := $(shell git ls-files '*.go' '*.lua' 2>/dev/null | grep -v '_test.go$$') go.mod go.sum
FUZZTIME ?= 60s
# wazero's command runs code compiled to WASM (wasip1) outside the plugin.
WAZERO := $(CURDIR)/bin/wazero

.PHONY: build test vet bench fuzz clean

build: main.wasm

main.wasm: $(SOURCES)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $@ .

# Unit, script and plugin tests (Go and WASM mode) against a private
# redis-server; then the estimate package again compiled to WASM (wasip1,
# under wazero's command), where its hand-written WASM assembly runs.
test: vet $(WAZERO)
	$(GO) test -count=1 ./...
	GOOS=wasip1 GOARCH=wasm $(GO) test -count=1 -exec '$(WAZERO) run -mount /:/ -env-inherit' ./estimate/

vet:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./estimate/

$(WAZERO): go.mod go.sum
	$(GO) build -o $@ github.com/tetratelabs/wazero/cmd/wazero

# BENCHMARKS.md and its plots (docs/bench/), regenerated: the cost of every
# limiter kind and rule count against the do-nothing plugin (Go and WASM
# mode), and the accuracy of each limiter with requests in flight.
# wazero's command runs the estimate benchmark compiled to WASM (wasip1),
# to show what reading a request body costs per KiB inside a gateway; so
# does Node's V8 (Envoy's default runtime), when node is installed.
bench: $(WAZERO)
	BENCH_REPORT=$(CURDIR) $(GO) test -run '^TestBenchmarkReport$$' -count=1 -timeout 60m -v .
	GOOS=wasip1 GOARCH=wasm $(GO) test -exec '$(WAZERO) run' -run '^$$' -bench . -benchmem -count 5 ./estimate/
	if command -v node >/dev/null; then \
		GOOS=wasip1 GOARCH=wasm $(GO) test -c -o bin/estimate.test.wasm ./estimate/ && \
		node --no-warnings mk/v8run.mjs bin/estimate.test.wasm -test.run '^$$' -test.bench . -test.benchmem -test.count 5; fi
	$(GO) test -run '^$$' -bench . -benchmem ./tokenusage/ ./config/

# Each fuzz target for FUZZTIME.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzChunkCuts$$' -fuzztime $(FUZZTIME) ./tokenusage/
	$(GO) test -run '^$$' -fuzz '^FuzzSubjectKeys$$' -fuzztime $(FUZZTIME) ./cachekey/
	$(GO) test -run '^$$' -fuzz '^FuzzReply$$' -fuzztime $(FUZZTIME) ./scripts/
	$(GO) test -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME) ./estimate/
	for f in FuzzParse FuzzCookieValue FuzzClientIP FuzzQueryParam; do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./config/ || exit 1; done

# The long suites: the soak test with 100,000 random requests through the
# plugin in WASM mode against a real redis-server (exact charges per subject,
# the module's memory at 10 % and 100 %), then each fuzz target for 10 minutes.
.PHONY: proof
proof:
	SOAK_REQUESTS=100000 $(GO) test -count=1 -v -timeout 60m -run '^TestSoak$$' .
	$(MAKE) fuzz FUZZTIME=10m

clean:
	rm -f main.wasm wasm-unit-test.wasm
	rm -rf bin

# Targets of the deployment pieces (local gateway, images) live in mk/.
-include mk/*.mk
