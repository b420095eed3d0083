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
for b in kq kq-controller kq-broker-agent kq-bench kq-produce-bench; do
    [[ -x $bin/$b ]] || {
        echo "run_produce.sh: missing $bin/$b; build it first (ninja -C $build $b)" >&2
        exit 2
    }
done

work=$(mktemp -d /tmp/kq-pbench.XXXXXX)
cluster=$root/deploy/local/cluster.sh
export KQ_BUILD_DIR=$build KQ_LOCAL_DIR=$work/cluster KQ_NO_BUILD=1 KQ_NO_INSTALL=1

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    "$cluster" down --purge >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port range below the kernel's ephemeral ports (so no outgoing connection holds one):
# controllers at BASE, BASE+10, BASE+20, brokers at BASE+100, +102, +104 (each port +1 for
# /metrics). `up` is tried with up to 3 ranges: a port taken between the check and the start
# only costs a retry.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base() {
    local cand ok p
    for _ in $(seq 1 40); do
        cand=$((21000 + RANDOM % 500 * 20)) # 21000..30980, ports up to 31085
        ok=1
        for p in $cand $((cand + 10)) $((cand + 20)) $((cand + 100)) $((cand + 102)) $((cand + 104)); do
            port_free "$p" && port_free $((p + 1)) || ok=0
        done
        if ((ok)); then
            echo "$cand"
            return 0
        fi
    done
    return 1
}
up_ok=0
for attempt in 1 2 3; do
    base=$(pick_base) || { echo "run_produce.sh: no free port range found in 21000..31085" >&2; exit 1; }
    export KQ_BASE_PORT=$base KQ_PORT_STEP=10 KQ_BROKER_BASE_PORT=$((base + 100))
    if "$cluster" up --brokers 3 >"$work/up.log" 2>&1; then
        up_ok=1
        break
    fi
    echo "run_produce.sh: cluster.sh up failed (attempt $attempt, ports from $base):" >&2
    tail -n 3 "$work/up.log" >&2
    "$cluster" down --purge >/dev/null 2>&1 || true
done
((up_ok)) || { echo "run_produce.sh: cluster.sh up failed 3 times" >&2; exit 1; }
status=$("$cluster" status 2>&1) || true
brokers=$(awk '$1 == "brokers:" {print $2}' <<<"$status")
controllers=$(awk '$1 == "controllers:" {print $2}' <<<"$status")
[[ -n $brokers && -n $controllers ]] || {
    echo "$status" >&2
    echo "run_produce.sh: cluster.sh status printed no bootstrap lists" >&2
    exit 1
}

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
