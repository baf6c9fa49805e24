# The plugin end to end on this machine, without Docker or Envoy
# (cmd/localgw: main.wasm in the proxy-wasm host emulator; cmd/mockllm: a mock LLM).
#   make run                                  # Redis + mock LLM + local gateway, prints curl lines; Ctrl-C stops
#   make run REDIS_ADDR=127.0.0.1:6379 LOCALGW_CONFIG=my.yaml LOCALGW_LOG_LEVEL=debug
#   make e2e                                  # the end-to-end tests (also part of make test)
REDIS_ADDR ?=
LOCALGW_CONFIG ?= tools/localgw/example.yaml
LOCALGW_LOG_LEVEL ?= info

.PHONY: run e2e

run:
	$(MAKE) build
	GO="$(GO)" REDIS_ADDR="$(REDIS_ADDR)" LOCALGW_CONFIG="$(LOCALGW_CONFIG)" \
		LOCALGW_LOG_LEVEL="$(LOCALGW_LOG_LEVEL)" bash tools/localgw/run.sh

e2e:
	cd tools && $(GO) test -count=1 ./e2e/...
