# The plugin end to end on this machine, without Docker or Envoy
# (tools/localgw: main.wasm in the proxy-wasm host emulator; tools/mockllm: a mock LLM).
#   make run                                  # Redis + mock LLM + local gateway on 127.0.0.1:10000, prints curl lines; Ctrl-C stops
#   make run LISTEN=127.0.0.1:18000           # the gateway on another address (port 0: any free port)
#   make run REDIS_ADDR=127.0.0.1:6379 LOCALGW_CONFIG=my.yaml LOCALGW_LOG_LEVEL=debug
#   make e2e                                  # the end-to-end tests (also part of make test)
#   make redis-server                         # installs redis-server when it is missing
#   make sdks                                 # installs node, npm and the pinned npm packages (tools/e2e/sdk, tools/pricecatalog)
# The gateway's address stays the same from run to run (the port
# docker-compose.yml publishes), so that an SDK's base URL is written down
# once; when it is taken, make run stops and says so.
LISTEN ?= 127.0.0.1:10000
REDIS_ADDR ?=
LOCALGW_CONFIG ?= tools/localgw/example.yaml
LOCALGW_LOG_LEVEL ?= info

.PHONY: run e2e redis-server sdks

# Without REDIS_ADDR, run starts a redis-server of its own.
run: $(if $(REDIS_ADDR),,redis-server)
	$(MAKE) build
	GO="$(GO)" LISTEN="$(LISTEN)" REDIS_ADDR="$(REDIS_ADDR)" LOCALGW_CONFIG="$(LOCALGW_CONFIG)" \
		LOCALGW_LOG_LEVEL="$(LOCALGW_LOG_LEVEL)" bash tools/localgw/run.sh

e2e: redis-server sdks
	cd tools && $(GO) test -count=1 ./e2e/...

# redis-server on the PATH, installed when it is missing (apt-get, Homebrew,
# dnf, yum, apk, pacman or zypper; otherwise it prints the command to run):
# the tests and make run use a real Redis, and a fresh machine should need
# only Go and make.
redis-server:
	@bash tools/mk/redis.sh

# node, npm and the official SDKs pinned in tools/e2e/sdk/package-lock.json,
# installed when missing: the end-to-end suite streams through the gateway
# with them, as an application would. Also the price database pinned in
# tools/pricecatalog/package-lock.json, which make prices and the
# generator's test read.
sdks:
	@bash tools/mk/node.sh
