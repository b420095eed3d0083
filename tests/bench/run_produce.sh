#!/usr/bin/env bash
# Data-plane produce benchmark: acks=all produce latency and throughput with replication factor
# 3 on loopback (1, 16, 32 and 64 producers, one record of 100 bytes per request), batches of 100
# records, an acks=1 comparison, the end-to-end latency from a produce to a waiting consumer,
# and the fsync floor of the same disk, all in one run on a fresh local cluster
# (deploy/local/cluster.sh: 3 controllers, 3 broker agents), deleted afterwards.
#
#   tests/bench/run_produce.sh [BUILD_DIR] [SECONDS]
#
# BUILD_DIR defaults to build/release (build kq, kq-controller, kq-broker-agent, kq-bench and
# kq-produce-bench there first); SECONDS (default 5) is the measured time of each run (after a
# 0.5 s warm-up). Every Produce carries a 10 s timeout (--timeout-ms 10000, below the brokers'
# replica.lag.time.max.ms of 30 s, so a stalled run cannot shrink the ISR under the next one).
# Prints one line per run; docs/performance.md records the results. Exit status 1 if any run
# failed or reported errors (the other runs still run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/release}
secs=${2:-5}
[[ $build == /* ]] || build=$PWD/$build
bin=$build/bin
[[ $secs =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "run_produce.sh: SECONDS '$secs' is not a number" >&2; exit 2; }
# shellcheck source=tests/bench/bench_cluster.sh
source "$here/bench_cluster.sh"
bench_need run_produce.sh "$bin" kq kq-controller kq-broker-agent kq-bench kq-produce-bench
# Ports 21000..31085.
bench_cluster_up run_produce.sh "$build" 21000 500

"$bin/kq" topics --bootstrap-controller "$controllers" --create --topic bench --partitions 1 \
    --replication-factor 3 --config min.insync.replicas=2 >/dev/null
# Wait until all three replicas are in the ISR, so that acks=all waits for real followers.
desc=""
for _ in $(seq 1 150); do
    desc=$("$bin/kq" topics --bootstrap-controller "$controllers" --describe --topic bench 2>&1) || true
    grep -Eq 'Isr: *[0-9]+,[0-9]+,[0-9]+' <<<"$desc" && break
    sleep 0.2
done
grep -Eq 'Isr: *[0-9]+,[0-9]+,[0-9]+' <<<"$desc" || {
    echo "$desc" >&2
    echo "run_produce.sh: topic bench never had 3 in-sync replicas" >&2
    exit 1
}

# The leader may serve Produce a moment after Metadata names it: one acks=all record through
# `kq produce` (which retries) makes sure the partition takes writes before anything is timed.
if ! "$bin/kq" produce --bootstrap-server "$brokers" --topic bench --acks all \
    --delivery-timeout-ms 30000 --value warm-up >"$work/warm.log" 2>&1; then
    cat "$work/warm.log" >&2
    echo "run_produce.sh: the warm-up record was not written" >&2
    exit 1
fi

disk=$(df -P "$work" | awk 'NR == 2 {print $1 " (" $6 ")"}')
fstype=$(df -PT "$work" | awk 'NR == 2 {print $2}')
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores, $(uname -r), data on $disk $fstype, load $(cut -d' ' -f1-3 /proc/loadavg), build $build"
echo "# brokers $brokers, controllers $controllers"
grep -E 'Partition|Isr' <<<"$desc" | sed 's/^/# /'
"$bin/kq-bench" --fsync-probe "$work"

failed=0
run() { # kq-produce-bench arguments
    local out
    if ! out=$("$bin/kq-produce-bench" --bootstrap-server "$brokers" --topic bench \
        --seconds "$secs" --timeout-ms 10000 "$@" 2>"$work/err.log"); then
        failed=1
    fi
    [[ -n $out ]] && echo "$out"
    # Error kinds and leader lines go to stderr: keep the errors visible.
    grep -v ' leader [0-9-]* (epoch ' "$work/err.log" >&2 || true
    grep -Eq 'errors=[1-9]|missing=[1-9]' <<<"$out" && failed=1
    return 0
}
for n in 1 16 32 64; do
    run --producers "$n" --acks all --batch 1 --record-bytes 100
done
run --producers 1 --acks all --batch 100 --record-bytes 100
run --producers 16 --acks all --batch 100 --record-bytes 100
run --producers 1 --acks 1 --batch 1 --record-bytes 100
run --producers 16 --acks 1 --batch 1 --record-bytes 100
run --e2e --record-bytes 100

# The ISR after the runs (a shrink during the runs would mean acks=all waited on fewer copies).
desc=$("$bin/kq" topics --bootstrap-controller "$controllers" --describe --topic bench 2>&1) || true
grep -E 'Isr' <<<"$desc" | sed 's/^/# after: /'
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
if grep -h 'Shrinking ISR' "$KQ_LOCAL_DIR"/broker-*.log >/dev/null 2>&1; then
    echo "# ISR changes during the run:"
    grep -h -E 'Shrinking ISR|Expanding ISR' "$KQ_LOCAL_DIR"/broker-*.log | sed 's/^/#   /'
fi
exit "$failed"
