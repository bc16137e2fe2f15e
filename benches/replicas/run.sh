#!/usr/bin/env bash
# Replicas on Redis (issue 36): what the shared store adds to a request, and requests/s through
# HAProxy before 1 and before 3 replicas, all inside one 2025-11-25 session (wrk, `tools/call
# echo`, each replica with its own demo server over stdio); then what a session costs a replica
# and Redis (MEMORY_SESSIONS sessions opened at one replica, default 2000).
#
#   benches/replicas/run.sh GATEWAY DEMO [SECONDS] [CONNECTIONS]
#
# GATEWAY, DEMO: the release binaries (target/release/actix-mcp-gateway, mcp-demo-server).
# Needs wrk, redis-server and haproxy (Debian). Prints one line per run.
set -euo pipefail
gateway=$1 demo=$2 seconds=${3:-10} connections=${4:-64}
here=$(cd "$(dirname "$0")" && pwd)
calls="$here/../stateless/call.lua"
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
export ACTIX_MCP_CREDENTIALS_KEY=5f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null &
until redis-cli -p "$redis_port" ping >/dev/null 2>&1; do sleep 0.1; done
redis="redis://127.0.0.1:$redis_port/0"
printf '{"mcpServers": {"demo": {"command": "%s"}}}' "$(realpath "$demo")" >"$dir/mcp.json"

# NAME ARGS...: a gateway, its port in the variable NAME (started here, not in a subshell,
# so that it is this script's job and ends with it).
start_gateway() {
  local name=$1; shift
  "$gateway" --config "$dir/mcp.json" --listen 127.0.0.1:0 "$@" 2>"$dir/$name.err" &
  echo $! >"$dir/$name.pid"
  until grep -qs "listening on" "$dir/$name.err"; do sleep 0.1; done
  printf -v "$name" '%s' "$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\)\/mcp.*/\1/p' "$dir/$name.err")"
}

# PORT GATEWAY_PORTS...: HAProxy on PORT, each request to the next gateway.
start_haproxy() {
  local port=$1; shift
  { printf 'global\n  maxconn 4000\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n'
    printf 'frontend mcp\n  bind 127.0.0.1:%s\n  default_backend gateways\nbackend gateways\n  balance roundrobin\n' "$port"
    local n=0; for p in "$@"; do printf '  server g%s 127.0.0.1:%s\n' "$n" "$p"; n=$((n+1)); done
  } >"$dir/haproxy-$port.cfg"
  haproxy -db -f "$dir/haproxy-$port.cfg" >/dev/null 2>&1 &
  until curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; do sleep 0.1; done
}

session() {
  curl -s -D - -o /dev/null "$1" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' \
    | awk 'tolower($1) == "mcp-session-id:" {print $2}' | tr -d '\r'
}

# LABEL URL CONNECTIONS: one wrk run in a new session at URL: its requests/s and p50/p99.
load() {
  local id out rate p50 p99
  id=$(session "$2")
  out=$(ERA=legacy TOOL=demo__echo SESSION=$id wrk -t"$(( $3 < 2 ? $3 : 2 ))" -c"$3" -d"${seconds}s" --latency -s "$calls" "$2" 2>&1)
  rate=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  grep -q "unexpected answer" <<<"$out" && { echo "$1: $(grep unexpected <<<"$out" | head -1)"; return 1; }
  printf '%-40s %10s req/s  p50 %8s  p99 %8s\n' "$1" "$rate" "$p50" "$p99"
}

start_gateway alone
start_gateway shared --replicas "$redis"
start_gateway r0 --replicas "$redis" --workers 1
start_gateway r1 --replicas "$redis" --workers 1
start_gateway r2 --replicas "$redis" --workers 1
one=$(free_port); three=$(free_port)
start_haproxy "$one" "$r0"
start_haproxy "$three" "$r0" "$r1" "$r2"
for round in 1 2; do
  load "one gateway, no Redis, c=1" "http://127.0.0.1:$alone/mcp" 1
  load "one gateway, --replicas, c=1" "http://127.0.0.1:$shared/mcp" 1
done
load "one gateway, no Redis, c=$connections" "http://127.0.0.1:$alone/mcp" "$connections"
load "one gateway, --replicas, c=$connections" "http://127.0.0.1:$shared/mcp" "$connections"
load "HAProxy, 1 replica (1 worker), c=$connections" "http://127.0.0.1:$one/mcp" "$connections"
load "HAProxy, 3 replicas (1 worker each), c=$connections" "http://127.0.0.1:$three/mcp" "$connections"

# What the store adds: sessions opened at r0, then a tools/list at r1, which has no copy yet
# (it reads the record and makes one), then one more there (served from its copy).
python3 - "$r0" "$r1" <<'PY'
import http.client, json, sys, time
opened_at, served_at = (http.client.HTTPConnection("127.0.0.1", int(p)) for p in sys.argv[1:3])
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
def post(conn, body, session=None):
    h = dict(headers, **({"mcp-session-id": session} if session else {}))
    conn.request("POST", "/mcp", json.dumps(body), h)
    response = conn.getresponse(); response.read()
    assert response.status in (200, 202), response.status
    return response.getheader("mcp-session-id")
init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "m", "version": "1"}}}
listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
first, later = [], []
for _ in range(500):
    session = post(opened_at, init)
    for times in (first, later):
        start = time.perf_counter(); post(served_at, listing, session); times.append(time.perf_counter() - start)
def pct(times, p): return sorted(times)[int(len(times) * p / 100)] * 1e6
print(f"tools/list at a replica without a copy (record read): p50 {pct(first, 50):.0f} us  p99 {pct(first, 99):.0f} us")
print(f"tools/list at a replica with a copy:                  p50 {pct(later, 50):.0f} us  p99 {pct(later, 99):.0f} us")
PY

# What a session costs: MEMORY_SESSIONS sessions opened at replica r1, its RSS and Redis's memory
# before and after.
count=${MEMORY_SESSIONS:-2000}
rss() { awk '/VmRSS/ {print $2}' "/proc/$(cat "$dir/$1.pid")/status"; }
used() { redis-cli -p "$redis_port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r'; }
before_rss=$(rss r1) before_used=$(used)
python3 - "http://127.0.0.1:$r1/mcp" "$count" <<'PY'
import http.client, json, sys, urllib.parse
url, count = urllib.parse.urlparse(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "m", "version": "1"}}})
conn = http.client.HTTPConnection(url.hostname, url.port)
for _ in range(count):
    conn.request("POST", url.path, body, {"content-type": "application/json",
                 "accept": "application/json, text/event-stream"})
    response = conn.getresponse(); response.read()
    assert response.status == 200, response.status
PY
after_rss=$(rss r1) after_used=$(used)
echo "$count sessions at one replica: RSS +$(( (after_rss - before_rss) * 1024 / count )) B/session, Redis +$(( (after_used - before_used) / count )) B/session"
