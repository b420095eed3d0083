#!/usr/bin/env bash
# Metadata image and controller-decision scale benchmark (kq-image-bench): 100 brokers,
# 1,000,000 partitions RF 3, snapshot write/load, fencing a broker that leads >= 100,000
# partitions, fail-over at 1k/100k/1M partitions, rollback of a 10,000-record suffix.
#
#   tests/bench/run_image.sh [BUILD_DIR] [RUNS] [-- extra kq-image-bench options]
#
# Runs the benchmark RUNS times (default 3; the machine is shared and noisy), prints every
# run's lines, then one "median" line per figure. docs/performance.md records the results.
# Build first with -O2, e.g.:
#   cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
#   ninja -C build/release kq-image-bench
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/release}
runs=${2:-3}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
bin=$build/bin/kq-image-bench
[ -x "$bin" ] || { echo "missing $bin; build it first (see the header of $0)" >&2; exit 2; }
case $runs in '' | *[!0-9]* | 0) echo "RUNS must be a positive integer, got '$runs'" >&2; exit 2 ;; esac

out=$(mktemp /tmp/kq-image-bench.XXXXXX)
trap 'rm -f "$out"' EXIT

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $bin $*"
for r in $(seq 1 "$runs"); do
  start=$(date +%s%N)
  if ! "$bin" "$@" | sed "s/^/run=$r /" | tee -a "$out"; then
    echo "run $r failed" >&2
    exit 1
  fi
  # a failed check makes kq-image-bench exit 1; pipefail reports it above
  ms=$((($(date +%s%N) - start) / 1000000))
  printf 'run=%d # wall %d.%03d s\n' "$r" $((ms / 1000)) $((ms % 1000))
done
# Median of each figure over the runs (figures keep their first-seen order).
awk '
  $2 ~ /^figure=/ {
    name = substr($2, 8); val = substr($3, 7); unit = substr($4, 6)
    if (!(name in n)) { order[++k] = name; units[name] = unit }
    v[name, ++n[name]] = val
  }
  END {
    for (i = 1; i <= k; i++) {
      name = order[i]; m = n[name]
      for (a = 1; a <= m; a++) s[a] = v[name, a] + 0
      for (a = 2; a <= m; a++) { x = s[a]; b = a - 1
        while (b >= 1 && s[b] > x) { s[b + 1] = s[b]; b-- } s[b + 1] = x }
      med = (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
      printf "median figure=%s value=%.6g unit=%s runs=%d\n", name, med, units[name], m
    }
  }' "$out"
