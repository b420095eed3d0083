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
for b in kq kq-controller kq-broker-agent kq-bench; do
    [[ -x $bin/$b ]] || {
        echo "run_metadata_lag.sh: missing $bin/$b; build it first (ninja -C $build $b)" >&2
        exit 2
    }
done

work=$(mktemp -d /tmp/kq-mlbench.XXXXXX)
cluster=$root/deploy/local/cluster.sh
export KQ_BUILD_DIR=$build KQ_LOCAL_DIR=$work/cluster KQ_NO_BUILD=1 KQ_NO_INSTALL=1

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    "$cluster" down --purge >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Ports in 29000..31885: below the kernel's ephemeral ports (so no outgoing connection holds
# one) and above the integration tests' 24100..28000. Controllers at BASE, BASE+10, BASE+20,
# brokers at BASE+100, +102, +104 (each port +1 for /metrics). `up` is tried with up to 3
# ranges: a port taken between the check and the start only costs a retry.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base() {
    local cand ok p
    for _ in $(seq 1 40); do
        cand=$((29000 + RANDOM % 140 * 20)) # 29000..31780
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
    base=$(pick_base) || { echo "run_metadata_lag.sh: no free port range found in 29000..31885" >&2; exit 1; }
    export KQ_BASE_PORT=$base KQ_PORT_STEP=10 KQ_BROKER_BASE_PORT=$((base + 100))
    if "$cluster" up --brokers 3 >"$work/up.log" 2>&1; then
        up_ok=1
        break
    fi
    echo "run_metadata_lag.sh: cluster.sh up failed (attempt $attempt, ports from $base):" >&2
    tail -n 3 "$work/up.log" >&2
    "$cluster" down --purge >/dev/null 2>&1 || true
done
((up_ok)) || { echo "run_metadata_lag.sh: cluster.sh up failed 3 times" >&2; exit 1; }
status=$("$cluster" status 2>&1) || true
controllers=$(awk '$1 == "controllers:" {print $2}' <<<"$status")
[[ -n $controllers ]] || {
    echo "$status" >&2
    echo "run_metadata_lag.sh: cluster.sh status printed no controller list" >&2
    exit 1
}
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
