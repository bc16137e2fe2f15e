#!/usr/bin/env bash
# The stateless path under load (issue 33): `wrk` POSTs of `tools/call echo` from many
# connections, to the demo server directly and through the gateway (its own demo server over
# stdio, or UPSTREAM=http: the same one over HTTP), in the 2026-07-28 era (no session) and inside
# one 2025-11-25 session; sequential calls for the latency; with LONG_SECONDS, the gateway's RSS
# after a long stateless run.
#
#   benches/stateless/run.sh GATEWAY DEMO [SECONDS] [CONNECTIONS]
#
# GATEWAY, DEMO: the release binaries (target/release/actix-mcp-gateway, mcp-demo-server).
# Needs wrk (Debian: apt-get install wrk). Prints one line per run.
set -euo pipefail
gateway=$1 demo=$2 seconds=${3:-10} connections=${4:-64}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT

"$demo" --http 127.0.0.1:0 --era dual 2>"$dir/demo.err" &
demo_pid=$!
until grep -q LISTENING "$dir/demo.err"; do sleep 0.1; done
direct="http://127.0.0.1:$(awk '/LISTENING/ {print $2}' "$dir/demo.err")/mcp"

# UPSTREAM=http: the gateway reaches the same demo server over HTTP instead of its own over stdio.
if [ "${UPSTREAM:-stdio}" = http ]; then
  printf '{"mcpServers": {"demo": {"url": "%s"}}}' "$direct" >"$dir/mcp.json"
else
  printf '{"mcpServers": {"demo": {"command": "%s", "args": ["--era", "dual"]}}}' "$demo" >"$dir/mcp.json"
fi
"$gateway" --config "$dir/mcp.json" --listen 127.0.0.1:0 ${GATEWAY_ARGS:-} 2>"$dir/gateway.err" &
gateway_pid=$!
until grep -q "listening on" "$dir/gateway.err"; do sleep 0.1; done
through=$(sed -n 's/.*listening on //p' "$dir/gateway.err")

rss() { awk '/VmRSS/ {print $2}' "/proc/$gateway_pid/status"; }
# PID's CPU time so far, in clock ticks (user and system).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tick_ns=$(( 1000000000 / $(getconf CLK_TCK) ))

# A 2025-11-25 session at URL: its id.
session() {
  curl -s -D - -o /dev/null "$1" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' \
    | awk 'tolower($1) == "mcp-session-id:" {print $2}' | tr -d '\r'
}

# LABEL ERA TOOL URL CONNECTIONS SESSION: one wrk run, its requests/s and p50/p99.
load() {
  local out
  out=$(ERA=$2 TOOL=$3 SESSION=${6:-} wrk -t"$(( $5 < 2 ? $5 : 2 ))" -c"$5" -d"${seconds}s" --latency -s "$here/call.lua" "$4" 2>&1)
  local rate p50 p99
  rate=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  grep -q "unexpected answer" <<<"$out" && { echo "$1: $(grep unexpected <<<"$out" | head -1)"; return 1; }
  printf '%-34s %10s req/s  p50 %8s  p99 %8s\n' "$1" "$rate" "$p50" "$p99"
}

curl -s -o /dev/null -X POST "$through" -H 'content-type: application/json' -d '{}' || true
before=$(rss)
for round in 1 2; do
  load "direct 2026-07-28 c=$connections" modern echo "$direct" "$connections"
  load "gateway 2026-07-28 c=$connections" modern demo__echo "$through" "$connections"
done
# CPU per call: what a call costs the gateway, beside what it costs the server that does the
# work (the one figure that does not depend on how many cores wrk takes from them).
cpu() {
  local before_pid=$(ticks "$1") out calls
  out=$(ERA=modern TOOL=$2 wrk -t2 -c"$connections" -d"${seconds}s" -s "$here/call.lua" "$3" 2>&1)
  calls=$(awk '/requests in/ {print $1}' <<<"$out")
  echo $(( ($(ticks "$1") - before_pid) * tick_ns / calls / 1000 ))
}
echo "CPU per call: demo server $(cpu "$demo_pid" echo "$direct") us, gateway $(cpu "$gateway_pid" demo__echo "$through") us"
load "direct 2026-07-28 c=1" modern echo "$direct" 1
load "gateway 2026-07-28 c=1" modern demo__echo "$through" 1
direct_session=$(session "$direct")
gateway_session=$(session "$through")
load "direct 2025-11-25 c=$connections" legacy echo "$direct" "$connections" "$direct_session"
load "gateway 2025-11-25 c=$connections" legacy demo__echo "$through" "$connections" "$gateway_session"
load "direct 2025-11-25 c=1" legacy echo "$direct" 1 "$direct_session"
load "gateway 2025-11-25 c=1" legacy demo__echo "$through" 1 "$gateway_session"
echo "gateway RSS: $before KiB at the start, $(rss) KiB after these runs"
# The leak check: RSS after a short stateless run, then after a long one (LONG_SECONDS, ~1M calls).
if [ -n "${LONG_SECONDS:-}" ]; then
  fresh_pid=$gateway_pid
  out=$(ERA=modern TOOL=demo__echo wrk -t2 -c64 -d"${LONG_SECONDS}s" -s "$here/call.lua" "$through" 2>&1)
  calls=$(awk '/requests in/ {print $1}' <<<"$out")
  echo "after $calls more stateless calls: $(rss) KiB"
fi
