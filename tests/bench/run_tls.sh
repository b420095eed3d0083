#!/usr/bin/env bash
# TLS against plaintext: one writer's commit latency and the saturated rate at 128 writers
# (kq-bench, the Write API) on a 3-voter quorum on loopback, fsync on, plaintext and TLS
# (client certificates required, the authorizer on) alternating ROUNDS times in one run.
#
#   tests/bench/run_tls.sh [BUILD_DIR] [SECONDS] [ROUNDS]
#
# Prints one line per run; docs/performance.md records the results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/release}
secs=${2:-5}
rounds=${3:-2}
bin=$build/bin
for b in kq kq-controller kq-bench; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b; build first (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/kq-bench-tls.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# shellcheck source=tests/bench/quorum.sh
source "$here/quorum.sh"

run() { # LABEL TLS BASE_PORT
  local label=$1 w
  pids=()
  BENCH_TLS=$2 bench_quorum "$bin" "$work/$label-$3" 3 "$3"
  for w in 1 128; do
    printf '%s voters=3 ' "$label"
    "$bin/kq-bench" --bootstrap-controller "$bench_boot" "${bench_client[@]}" --writers "$w" \
      --seconds "$secs"
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(uname -r), build $build"
for ((r = 0; r < rounds; r++)); do
  run plaintext 0 $((20000 + RANDOM % 1000 * 10))
  run tls 1 $((20000 + RANDOM % 1000 * 10))
done
