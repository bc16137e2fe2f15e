#!/bin/bash
# The gateway's instructions per stateless call, under callgrind (wall time is noisy on shared
# cores): run it for 0 and for N calls and divide the difference by N.
#
#   benches/stateless/callgrind.sh GATEWAY N OUT   # DEMO=path/to/mcp-demo-server (default: release)
#
# N sequential 2026-07-28 `tools/call echo` POSTs (after 20 to warm up) by drive.py.
set -euo pipefail
gw=$1 n=$2 out=$3
dir=$(mktemp -d)
printf '{"mcpServers": {"demo": {"command": "%s", "args": ["--era", "dual"]}}}' "$(realpath "${DEMO:-target/release/mcp-demo-server}")" > $dir/mcp.json
valgrind --tool=callgrind --callgrind-out-file=$out $gw --config $dir/mcp.json --listen 127.0.0.1:0 --workers 1 2>$dir/err &
pid=$!
for _ in $(seq 600); do grep -q "listening on" $dir/err && break; kill -0 $pid || { cat $dir/err; exit 1; }; sleep 0.2; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' $dir/err)
python3 $(dirname "$0")/drive.py 127.0.0.1 $port 20 >/dev/null   # warm: the catalogue made
python3 $(dirname "$0")/drive.py 127.0.0.1 $port $n
kill -INT $pid; wait $pid || true
grep -E "^summary|^totals" $out | head -2
