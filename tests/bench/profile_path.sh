#!/usr/bin/env bash
# Where a write's time goes (issue 10, item 5): a 3-voter quorum on loopback, then
#  1. one writer (kq-bench) under `perf trace` of the controllers' and the client's sendmsg,
#     readv, fdatasync and pwrite64: tests/bench/profile_path.py splits each write's path into
#     segments (client, leader, follower, disk, answer) and prints their medians;
#  2. 128 writers under `perf record -e cpu-clock -a`: the CPU share of each kind of thread
#     (the loops, nng's poller and task threads, the client) and the hottest symbols.
#
#   tests/bench/profile_path.sh [BUILD_DIR] [SECONDS]
#
# Needs perf (Debian linux-perf) and root (or perf_event_paranoid <= -1). Tracing slows each
# traced call by a few microseconds: compare segments with each other, and a change with its
# parent in the same run. docs/performance.md records the results. Never in CI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build/release}
secs=${2:-3}
bin=$build/bin
for b in kq kq-controller kq-bench; do
  [ -x "$bin/$b" ] || { echo "profile_path.sh: missing $bin/$b; build first (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "profile_path.sh: perf is missing (apt-get install linux-perf)" >&2; exit 2; }
work=$(mktemp -d /tmp/kq-profile.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=tests/bench/quorum.sh
source "$here/quorum.sh"
bench_quorum "$bin" "$work" 3 $((24000 + RANDOM % 500 * 10))
boot=$bench_boot
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(uname -r), build $build"
"$bin/kq-bench" --fsync-probe "$work"

# 1. One writer, traced.
"$bin/kq-bench" --bootstrap-controller "$boot" --writers 1 --seconds $((secs + 2)) --warmup 0 \
  >"$work/bench1.txt" &
bench=$!
sleep 1
for p in "${pids[@]}"; do ls "/proc/$p/task" | sed "s/\$/ $p/"; done >"$work/tidmap.txt"
timeout -s INT "$secs" perf trace -o "$work/trace.txt" -p "$(IFS=,; echo "${pids[*]}"),$bench" \
  -e 'sendmsg,readv,fdatasync,pwrite64' 2>/dev/null || true
wait "$bench"
echo "traced: $(cat "$work/bench1.txt")"
grep -v '^ *?' "$work/trace.txt" | sort -k1,1n -s >"$work/sorted.txt"
python3 "$here/profile_path.py" "$work/sorted.txt" "$work/tidmap.txt"

# 2. 128 writers, sampled.
"$bin/kq-bench" --bootstrap-controller "$boot" --writers 128 --seconds $((secs + 2)) --warmup 0 \
  >"$work/bench128.txt" &
bench=$!
sleep 1
perf record -q -e cpu-clock -F 2000 -a -o "$work/perf.data" -- sleep "$secs" 2>/dev/null
wait "$bench"
echo "sampled: $(cat "$work/bench128.txt")"
echo "CPU share by thread kind (all CPUs, whole machine):"
# perf report reads stdin when it is not a terminal it owns (under timeout, say) and then
# prints no samples: give it /dev/null.
perf report -i "$work/perf.data" --no-children --sort comm -g none --stdio </dev/null 2>/dev/null |
  grep -v '^#' | grep -v '^$' | head -6
echo "hottest symbols:"
perf report -i "$work/perf.data" --no-children --sort dso,sym -g none --stdio </dev/null 2>/dev/null |
  grep -v '^#' | grep -v '^$' | head -12
