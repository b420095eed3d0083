#!/usr/bin/env bash
# Quorum commit benchmark: one writer's latency and throughput with 1, 16 and 128 writers, on a
# 3-voter and a 5-voter quorum on loopback, fsync on (LMDB sync commits, as in production).
#
#   tests/bench/run.sh [BUILD_DIR] [SECONDS]
#
# Prints one line per run; docs/performance.md records the results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/release}
secs=${2:-5}
bin=$build/bin
for b in kq kq-controller kq-bench; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b; build first (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/kq-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
# shellcheck source=tests/bench/quorum.sh
source "$here/quorum.sh"

run_quorum() {
  local n=$1 base=$2 boot
  pids=()
  bench_quorum "$bin" "$work/q$n" "$n" "$base"
  boot=$bench_boot
  for w in 1 16 128; do
    printf 'voters=%d ' "$n"
    "$bin/kq-bench" --bootstrap-controller "$boot" --writers "$w" --seconds "$secs"
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(uname -r), build $build"
"$bin/kq-bench" --fsync-probe "$work"
run_quorum 3 $((20000 + RANDOM % 1000 * 10))
run_quorum 5 $((30000 + RANDOM % 1000 * 10))
