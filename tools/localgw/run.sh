#!/usr/bin/env bash
# `make run`: the plugin end to end on this machine, without Docker or Envoy.
# Starts a redis-server on a free loopback port (unless REDIS_ADDR is set),
# its data kept in bin/run-redis from run to run (REDIS_DATA),
# the mock LLM on another, and the local gateway with main.wasm on LISTEN
# (127.0.0.1:10000, the port docker-compose.yml publishes, so that an SDK's
# base URL can be written down once); builds bin/atrl and starts its budget
# exporter (atrl exporter) on a free port; prints curl and atrl lines to
# try and the URLs of the plugin's metrics (the gateway serves them at
# /stats/prometheus) and of the exporter's, and stops everything it started
# on Ctrl-C. A configuration
# that is not YAML or JSON, or that the plugin refuses, stops it with the
# gateway's message, as atrl check words it (exit status 2).
#
# Environment: LISTEN (the gateway's host:port; port 0 picks a free one),
# REDIS_ADDR (use this Redis), REDIS_DATA (where make run's own Redis keeps
# its data across runs, default bin/run-redis; off: nothing kept), LOCALGW_CONFIG (plugin configuration, default
# tools/localgw/example.yaml), LOCALGW_LOG_LEVEL (the plugin's log level,
# default info), ALERTS_URL (where budget alerts are POSTed; default: the
# gateway prints them), WASM (default main.wasm), GO.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
WASM=${WASM:-main.wasm}
EXAMPLE=tools/localgw/example.yaml
CONFIG=${LOCALGW_CONFIG:-$EXAMPLE}
ALERTS_URL=${ALERTS_URL:-}
LOG_LEVEL=${LOCALGW_LOG_LEVEL:-info}
LISTEN=${LISTEN:-127.0.0.1:10000}
REDIS_DATA=${REDIS_DATA:-bin/run-redis}

fail() { echo "run: $*" >&2; exit 1; }

listen_host=${LISTEN%:*}
listen_port=${LISTEN##*:}
case $listen_port in
'' | *[!0-9]*) fail "LISTEN=$LISTEN is not host:port (e.g. LISTEN=127.0.0.1:10000)" ;;
esac

[ -f "$WASM" ] || fail "$WASM is missing: run \`make build\` first"
[ -f "$CONFIG" ] || fail "the plugin configuration $CONFIG does not exist"

# listen_taken: whether something already accepts connections on LISTEN
# (bash's /dev/tcp connects; on a local address, the only kind the gateway
# can listen on, the answer is immediate). A wildcard host is checked on
# loopback, which a server on the wildcard address also answers.
listen_taken() {
  local host=${listen_host#[}
  host=${host%]}
  case $host in
  '' | 0.0.0.0) host=127.0.0.1 ;;
  ::) host=::1 ;;
  esac
  [ "$listen_port" != 0 ] && (: <>"/dev/tcp/$host/$listen_port") 2>/dev/null
}

# The gateway never moves to another port by itself: a base URL written down
# in an SDK's configuration would silently point at nothing.
fail_listen_taken() {
  local other=18000
  [ "$listen_port" = 18000 ] && other=18001
  fail "$LISTEN is already in use (another \`make run\`? \`docker compose up\` publishes port 10000 too).
     Stop what listens on port $listen_port, or choose another address: make run LISTEN=$listen_host:$other
     (LISTEN=$listen_host:0 picks a free port)"
}

# Before building anything: the port is the one thing the user must fix.
if listen_taken; then fail_listen_taken; fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/localgw-run.XXXXXX")
case $tmp in /*) ;; *) tmp=$PWD/$tmp ;; esac # the tools are built from tools/
pids=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  trap '' INT TERM # finish cleaning up whatever else arrives
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo; echo "stopped"; exit 0' INT TERM

# address_of FILE PID NAME: waits (up to 30 s) for a process to print
# "<name> listening on <url>" in FILE, and sets address to the URL. When the
# process exits instead, it shows what it printed and returns 1, with the
# process's exit status in exited. (Not run in a subshell: the status can
# only be waited for here.)
address_of() {
  local file=$1 pid=$2 name=$3
  for _ in $(seq 300); do
    if grep -q "listening on" "$file" 2>/dev/null; then
      address=$(sed -n 's/.*listening on //p' "$file" | head -n1)
      return
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      cat "$file" "$tmp/$name.log" >&2 2>/dev/null || true
      exited=0
      wait "$pid" || exited=$?
      return 1
    fi
    sleep 0.1
  done
  fail "$name did not start within 30 s"
}

# start_redis: a private redis-server on a random loopback port (another
# port is tried when that one is taken). Its data is kept in REDIS_DATA
# (an append-only file, written every second and on Ctrl-C), so that a
# restart of make run keeps every budget spent, as a gateway's Redis does;
# REDIS_DATA=off keeps nothing. One make run at a time uses a directory.
start_redis() {
  command -v redis-server >/dev/null ||
    fail "redis-server is not installed: \`bash tools/mk/redis.sh\` installs it (make run does), or set REDIS_ADDR=host:port"
  local dir=$tmp persist=(--appendonly no)
  if [ "$REDIS_DATA" != off ]; then
    mkdir -p "$REDIS_DATA" || fail "cannot create REDIS_DATA=$REDIS_DATA"
    dir=$(cd "$REDIS_DATA" && pwd)
    local other
    other=$(cat "$dir/run.pid" 2>/dev/null || true)
    if [ -n "$other" ] && kill -0 "$other" 2>/dev/null; then
      fail "another make run's Redis (pid $other) keeps its data in $REDIS_DATA; stop it, or choose another directory: make run REDIS_DATA=bin/run-redis-2"
    fi
    persist=(--appendonly yes --appendfsync everysec)
  fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local port=$((20000 + RANDOM % 40000))
    redis-server --port "$port" --bind 127.0.0.1 --save '' "${persist[@]}" \
      --dir "$dir" --loglevel notice >"$tmp/redis.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do
      if grep -q "Ready to accept connections" "$tmp/redis.log"; then
        pids+=("$pid")
        redis_addr="127.0.0.1:$port"
        if [ "$REDIS_DATA" != off ]; then echo "$pid" >"$dir/run.pid"; fi
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

echo "building the mock LLM, the local gateway and bin/atrl"
# The mock and the gateway are in the tools module (tools/go.mod); -o a
# directory builds each into it under its own name. atrl is built where
# `make atrl` puts it, so that the atrl lines printed below work as they are.
(cd tools && "$GO" build -o "$tmp/" ./mockllm ./localgw)
"$GO" build -o bin/atrl ./cmd/atrl

if [ -n "${REDIS_ADDR:-}" ]; then
  redis_addr=$REDIS_ADDR
  redis_data="that Redis's own (REDIS_ADDR)"
  redis_runs="the Redis at $redis_addr (REDIS_ADDR)"
else
  start_redis
  redis_runs="make run's own redis-server, one server at $redis_addr"
  redis_data="kept in $REDIS_DATA across runs: budgets spent stay spent after a restart (rm -rf $REDIS_DATA for fresh ones)"
  if [ "$REDIS_DATA" = off ]; then redis_data="not kept (REDIS_DATA=off): a restart gives every key a fresh budget"; fi
fi

"$tmp/mockllm" -listen 127.0.0.1:0 >"$tmp/mockllm.out" 2>"$tmp/mockllm.log" &
pids+=($!)
address_of "$tmp/mockllm.out" "$!" mockllm || fail "mockllm exited"
mock=$address

"$tmp/localgw" -listen "$LISTEN" -wasm "$WASM" -config "$CONFIG" -upstream "$mock" \
  -redis "$redis_addr" -log-level "$LOG_LEVEL" ${ALERTS_URL:+-webhook "$ALERTS_URL"} >"$tmp/localgw.out" &
gw_pid=$!
pids+=("$gw_pid")
if ! address_of "$tmp/localgw.out" "$gw_pid" localgw; then
  # 2: the configuration cannot be read or the plugin refuses it; the
  # gateway's message above says where and what, and nothing else is wrong.
  [ "$exited" = 2 ] && exit 2
  # Taken while the tools were building, or not an address of this machine.
  if listen_taken; then fail_listen_taken; fi
  fail "the local gateway could not start on $LISTEN (its error is above); another address: make run LISTEN=127.0.0.1:18000"
fi
gw=$address

# The budget exporter (atrl exporter) beside it, on the same Redis and
# configuration; its log (a Redis it cannot read) goes to the terminal.
bin/atrl exporter -config "$CONFIG" -redis "$redis_addr" -listen 127.0.0.1:0 >"$tmp/exporter.out" &
exporter_pid=$!
pids+=("$exporter_pid")
address_of "$tmp/exporter.out" "$exporter_pid" exporter || fail "atrl exporter exited (exit status $exited)"
exporter=$address

body='{"model":"mock","messages":[{"role":"user","content":"hi"}]}'
large='{"model":"mock-large","messages":[{"role":"user","content":"hi"}]}'
stream='{"model":"mock","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}'
alerts='printed below, a "gateway: budget alert → ..." line each (ALERTS_URL=http://host:port POSTs them to a receiver instead)'
[ -n "$ALERTS_URL" ] && alerts="POSTed to $ALERTS_URL (path and body as the plugin sends them), a line each below with the answer"
cat <<EOF

local gateway  $gw   (plugin $WASM, configuration $CONFIG)
plugin metrics $gw/stats/prometheus   (Prometheus text, named and labelled as a Higress gateway's)
mock LLM       $mock
Redis          $redis_addr   (counters: redis-cli -h ${redis_addr%:*} -p ${redis_addr##*:} --scan --pattern 'atrl:*')
Redis's data   $redis_data
budget alerts  $alerts
budget metrics $exporter   (atrl exporter: each subject's budgets, read from Redis at each scrape)
EOF

if [ "$CONFIG" != "$EXAMPLE" ]; then
  # Your configuration: what it limits, as the plugin reads it, and a call
  # to try; the example's demo keys, prices and admin token are not in it.
  cat <<EOF

What your configuration limits, as the plugin reads it (bin/atrl check):

$(bin/atrl check -config "$CONFIG" 2>&1 | sed 's/^/  /')

Here every Redis call of the plugin goes to $redis_runs,
whatever its redis section names (in a gateway: that service).

A call through it (the mock LLM reports 30 + 20 tokens; send the headers
your rules read):

  curl -i $gw/v1/chat/completions -H 'Authorization: Bearer my-key' -H 'content-type: application/json' -H 'x-mock-usage: 30,20' -d '$body'

What Redis holds, the subjects closest to their limits:

  bin/atrl top -redis $redis_addr -config $CONFIG

The gateway logs each request and the plugin's logs below (LOCALGW_LOG_LEVEL=debug for more).
Ctrl-C stops everything.

EOF
else
  cat <<EOF

Each call below costs 30 + 20 tokens (x-mock-usage), \$0.000275 at the
example's prices; it gives each API key 100 tokens a minute and \$1 a day,
and all keys together \$20 a day (the last \$5 of it kept for requests with
x-priority: high): 200, 200, then 429 until the minute ends.
The second call takes the key's minute past 80 % and to 100 %: two budget
alerts. /v1/quota shows the three limits.

  curl -i $gw/v1/chat/completions -H 'x-api-key: demo-1' -H 'content-type: application/json' -H 'x-mock-usage: 30,20' -d '$body'

What a key has left, without spending any (the plugin answers, nothing is forwarded):

  curl -s $gw/v1/quota -H 'x-api-key: demo-1'

The admin API, with the example's demo token: give demo-1 50 tokens back,
then give it 1,000 a minute from now on (every replica, no reload):

  curl -s $gw/atrl/grant -H 'x-admin-token: local-admin' -d '{"rule_item":0,"value":"demo-1","tokens":50}'
  curl -s -X PUT $gw/atrl/overrides -H 'x-admin-token: local-admin' -d '{"rule_item":0,"value":"demo-1","limits":{"token_per_minute":1000}}'

A model's own budget, and what serves it once spent: each key has 50 tokens a
minute on mock-large; its second call below is served as mock, the response
saying X-TokenRateLimit-Fallback: mock (model_fallbacks), and the third is
429 when the key's 100 tokens are spent:

  curl -i $gw/v1/chat/completions -H 'x-api-key: demo-6' -H 'content-type: application/json' -H 'x-mock-usage: 30,20' -d '$large'

A stream, one event every 200 ms, its usage (here 16 + 16 tokens) in the last event:

  curl -N $gw/v1/chat/completions -H 'x-api-key: demo-2' -H 'content-type: application/json' -H 'x-mock-usage: 16,16' -H 'x-mock-delay-ms: 200' -d '$stream'

An SDK: point its base URL at the gateway; the example limits each key
wherever its SDK sends it (the mock LLM checks no key):

  export OPENAI_BASE_URL=$gw/v1 OPENAI_API_KEY=demo-3        # OpenAI: Authorization: Bearer demo-3
  export ANTHROPIC_BASE_URL=$gw ANTHROPIC_API_KEY=demo-4     # Anthropic 1.x: Authorization: Bearer demo-4
  # Gemini: new GoogleGenAI({apiKey: "demo-5", httpOptions: {baseUrl: "$gw"}})   # x-goog-api-key: demo-5

What Redis holds for demo-1, and the keys closest to their limits, with
atrl, the operators' command (bin/atrl; \`bin/atrl help\` for the others):

  bin/atrl status -redis $redis_addr -config $CONFIG -rule-item 0 -value demo-1
  bin/atrl top -redis $redis_addr -config $CONFIG

The gateway logs each request and the plugin's logs below (LOCALGW_LOG_LEVEL=debug for more).
Ctrl-C stops everything.

EOF
fi

# Ctrl-C reaches the gateway too: it stops cleanly (status 0), and so does
# this script, whichever of the two saw the signal first.
status=0
wait "$gw_pid" || status=$?
if [ "$status" = 0 ] || [ "$status" -gt 128 ]; then
  echo
  echo "stopped"
  exit 0
fi
fail "the local gateway stopped (exit status $status); its last lines are above"
