#!/usr/bin/env bash
# The footprint of a tiny program with the reach compared (stdio, Streamable HTTP, OAuth):
# a cold release build of each, one after the other; CPU (user + system) and wall time, the
# crate count, the binary's size. Each is a workspace of its own, outside the project's.
#   benches/footprint/run.sh            # actix-mcp (default features), the same reach as rmcp, rmcp
set -euo pipefail
cd "$(dirname "$0")"
for d in ${DIRS:-ours lean rmcp}; do
  rm -rf "$d/target"
  ( cd "$d" && /usr/bin/time -f "$d cpu_user=%U cpu_sys=%S wall=%e" cargo build --release -q )
  crates=$(cd "$d" && cargo tree -e normal,build --prefix none | sed 's/ (\*)//; s/ (proc-macro)//' | sort -u | wc -l)
  binary=$(find "$d/target/release" -maxdepth 1 -type f -name 'footprint-*' ! -name '*.d')
  echo "$d crates=$crates binary_bytes=$(stat -c %s "$binary")"
done
