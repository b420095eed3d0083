#!/usr/bin/env bash
# AlterPartition benchmark: round trips of AlterPartition (ISR shrink/expand with the current
# epochs, sent as the partition leader) with 1, 16 and 128 concurrent clients against a
# 3-voter quorum on loopback, fsync on. Each client count gets a fresh quorum with 3 in-process
# brokers (kq-bench --alter-partition) and a topic with one partition per client (RF 3). The
# fsync floor of the same disk is measured first (kq-bench --fsync-probe).
#
#   tests/bench/run_alter.sh [BUILD_DIR] [SECONDS]
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
work=$(mktemp -d /tmp/kq-bench-alter.XXXXXX)
pids=()
stop_quorum() {
  local p
  for p in "${pids[@]:-}"; do
    if [ -n "$p" ]; then kill -9 "$p" 2>/dev/null || true; fi
  done
  for p in "${pids[@]:-}"; do
    if [ -n "$p" ]; then wait "$p" 2>/dev/null || true; fi
  done
  pids=()
}
cleanup() { stop_quorum; rm -rf "$work"; }
trap cleanup EXIT
# shellcheck source=tests/bench/quorum.sh
source "$here/quorum.sh"

# run_one CLIENTS BASE_PORT: a fresh 3-voter quorum, then one kq-bench --alter-partition run.
run_one() {
  local clients=$1 base=$2 boot cid
  bench_quorum "$bin" "$work/c$clients" 3 "$base"
  boot=$bench_boot cid=$bench_cid
  printf 'voters=3 '
  "$bin/kq-bench" --alter-partition --bootstrap-controller "$boot" --cluster-id "$cid" \
    --writers "$clients" --brokers 3 --partitions "$clients" --seconds "$secs" || true
  stop_quorum
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(uname -r), build $build"
"$bin/kq-bench" --fsync-probe "$work"
for c in 1 16 128; do
  run_one "$c" $((21000 + RANDOM % 800 * 10))
done
