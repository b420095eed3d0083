#!/usr/bin/env bash
# Metadata propagation benchmark: time from "committed on the active controller" (its answer to
# a Write) to "applied by every broker" (kq_metadata_last_applied_offset on each broker's
# /metrics), on a fresh local cluster (deploy/local/cluster.sh: 3 controllers, 3 broker
# agents, default settings), deleted afterwards. One change at a time, each from an idle
# cluster (kq-bench --metadata-lag, tests/bench/kq_bench.c).
#
#   tests/bench/run_metadata_lag.sh [BUILD_DIR] [REQUESTS] [kq-bench options...]
#
# BUILD_DIR defaults to build/release (build kq, kq-controller, kq-broker-agent and kq-bench
# there first); REQUESTS (default 200) is the number of measured changes; further arguments go
# to kq-bench (e.g. --interval-ms 50 --poll-us 1000). Prints one result line; docs/performance.md
# records the results. Exit status 1 if the run failed or reported errors.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/release}
requests=${2:-200}
shift $(($# < 2 ? $# : 2))
[[ $build == /* ]] || build=$PWD/$build
bin=$build/bin
[[ $requests =~ ^[1-9][0-9]*$ ]] || {
    echo "run_metadata_lag.sh: REQUESTS '$requests' is not a positive whole number" >&2
    exit 2
}
# shellcheck source=tests/bench/bench_cluster.sh
source "$here/bench_cluster.sh"
bench_need run_metadata_lag.sh "$bin" kq kq-controller kq-broker-agent kq-bench
# Ports 29000..31885: above the integration tests' 24100..28000.
bench_cluster_up run_metadata_lag.sh "$build" 29000 140
# Each broker's /metrics address, from the configs cluster.sh wrote.
metrics=""
for f in "$KQ_LOCAL_DIR"/broker-*.properties; do
    m=$(sed -n 's/^metrics\.listener=//p' "$f")
    [[ -n $m ]] || { echo "run_metadata_lag.sh: $f has no metrics.listener" >&2; exit 1; }
    metrics=${metrics:+$metrics,}$m
done

rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || rev="$rev+changes"
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), tree $rev, build $build"
echo "# controllers $controllers, broker metrics $metrics"
failed=0
if ! out=$("$bin/kq-bench" --metadata-lag --bootstrap-controller "$controllers" \
    --broker-metrics "$metrics" --requests "$requests" "$@" 2>"$work/err.log"); then
    failed=1
fi
[[ -n ${out:-} ]] && echo "$out"
cat "$work/err.log" >&2
grep -Eq 'errors=[1-9]' <<<"${out:-}" && failed=1
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
