#!/usr/bin/env bash
# `make run`: the plugin end to end on this machine, without Docker or Envoy.
# Starts a redis-server on a free loopback port (unless REDIS_ADDR is set),
# the mock LLM and the local gateway with main.wasm, prints curl lines to
# try, and stops everything it started on Ctrl-C.
#
# Environment: REDIS_ADDR (use this Redis), LOCALGW_CONFIG (plugin
# configuration, default cmd/localgw/example.yaml), LOCALGW_LOG_LEVEL
# (the plugin's log level, default info), WASM (default main.wasm), GO.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
WASM=${WASM:-main.wasm}
CONFIG=${LOCALGW_CONFIG:-cmd/localgw/example.yaml}
LOG_LEVEL=${LOCALGW_LOG_LEVEL:-info}

fail() { echo "run: $*" >&2; exit 1; }

[ -f "$WASM" ] || fail "$WASM is missing: run \`make build\` first"
[ -f "$CONFIG" ] || fail "the plugin configuration $CONFIG does not exist"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/localgw-run.XXXXXX")
pids=()
cleanup() {
  trap '' INT TERM # finish cleaning up whatever else arrives
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo; echo "stopping"; exit 0' INT TERM

# address_of FILE PID NAME: waits (up to 30 s) for a process to print
# "<name> listening on <url>" in FILE, and prints the URL.
address_of() {
  local file=$1 pid=$2 name=$3
  for _ in $(seq 300); do
    if grep -q "listening on" "$file" 2>/dev/null; then
      sed -n 's/.*listening on //p' "$file" | head -n1
      return
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$file" "$tmp/$name.log" >&2 2>/dev/null; fail "$name exited"; }
    sleep 0.1
  done
  fail "$name did not start within 30 s"
}

# start_redis: a private redis-server, no persistence, on a random loopback
# port; another port is tried when that one is taken.
start_redis() {
  command -v redis-server >/dev/null ||
    fail "redis-server is not installed (apt-get install -y redis-server), or set REDIS_ADDR=host:port"
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local port=$((20000 + RANDOM % 40000))
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$tmp" --loglevel notice >"$tmp/redis.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do
      if grep -q "Ready to accept connections" "$tmp/redis.log"; then
        pids+=("$pid")
        redis_addr="127.0.0.1:$port"
        return
      fi
      kill -0 "$pid" 2>/dev/null || break # the port was taken
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  cat "$tmp/redis.log" >&2
  fail "could not start redis-server"
}

echo "building the mock LLM and the local gateway"
"$GO" build -o "$tmp/mockllm" ./cmd/mockllm
"$GO" build -o "$tmp/localgw" ./cmd/localgw

if [ -n "${REDIS_ADDR:-}" ]; then
  redis_addr=$REDIS_ADDR
else
  start_redis
fi

"$tmp/mockllm" -listen 127.0.0.1:0 >"$tmp/mockllm.out" 2>"$tmp/mockllm.log" &
pids+=($!)
mock=$(address_of "$tmp/mockllm.out" "$!" mockllm)

"$tmp/localgw" -listen 127.0.0.1:0 -wasm "$WASM" -config "$CONFIG" -upstream "$mock" \
  -redis "$redis_addr" -log-level "$LOG_LEVEL" >"$tmp/localgw.out" &
gw_pid=$!
pids+=("$gw_pid")
gw=$(address_of "$tmp/localgw.out" "$gw_pid" localgw)

body='{"model":"mock","messages":[{"role":"user","content":"hi"}]}'
stream='{"model":"mock","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}'
cat <<EOF

local gateway  $gw   (plugin $WASM, configuration $CONFIG)
mock LLM       $mock
Redis          $redis_addr   (counters: redis-cli -h ${redis_addr%:*} -p ${redis_addr##*:} --scan --pattern 'atrl:*')

Each call below costs 30 + 20 tokens (x-mock-usage); the example gives each
x-api-key 100 tokens a minute: 200, 200, then 429 until the minute ends.

  curl -i $gw/v1/chat/completions -H 'x-api-key: demo-1' -H 'content-type: application/json' -H 'x-mock-usage: 30,20' -d '$body'

A stream, one event every 200 ms, its usage (here 16 + 16 tokens) in the last event:

  curl -N $gw/v1/chat/completions -H 'x-api-key: demo-2' -H 'content-type: application/json' -H 'x-mock-usage: 16,16' -H 'x-mock-delay-ms: 200' -d '$stream'

The gateway logs each request and the plugin's logs below (LOCALGW_LOG_LEVEL=debug for more).
Ctrl-C stops everything.

EOF
wait "$gw_pid" || true
fail "the local gateway stopped"
