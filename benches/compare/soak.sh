#!/usr/bin/env bash
# The soak scenario over every transport in both protocol eras: stdio, HTTP/1.1 and HTTP/2 (h2c)
# × 2025-11-25 (legacy) and 2026-07-28 (modern). Exits non-zero if any run fails a check.
#
#   benches/compare/soak.sh            # full size: 1,000,000 requests per combination
#   benches/compare/soak.sh --smoke    # 20,000 requests per combination
#
# Extra arguments go to every run (e.g. --server "CMD ARGS"; the server must take --era).
# SOAK_PROFILE=test runs the unoptimized build the tests already made (CI: the checks, not speed).
set -uo pipefail
cd "$(dirname "$0")/../.."
status=0
bench=(cargo bench --bench compare --)
if [ "${SOAK_PROFILE:-release}" = test ]; then
  bench=(cargo test --workspace --all-features --bench compare --)
fi
for era in legacy modern; do
  "${bench[@]}" --scenarios soak --runs 1 --era "$era" \
    --clients actix-mcp "$@" || status=1
  "${bench[@]}" --scenarios soak --runs 1 --era "$era" --http \
    --clients actix-mcp-http,actix-mcp-h2 "$@" || status=1
done
exit "$status"
