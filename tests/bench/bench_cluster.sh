# shellcheck shell=bash
# bench_cluster.sh: the set-up the cluster benchmarks share (sourced, after `set -euo
# pipefail`): a check that the programs are built, and a fresh local cluster
# (deploy/local/cluster.sh: 3 controllers, 3 broker agents) in a temporary directory on a free
# port range, deleted on exit.
#
#   source "$here/bench_cluster.sh"
#   bench_need NAME BIN_DIR PROG...        # exit 2 naming the first program not built
#   bench_cluster_up NAME BUILD_DIR LOW SLOTS
#
# bench_cluster_up sets work (the temporary directory), cluster (cluster.sh), controllers and
# brokers (the bootstrap lists), and KQ_LOCAL_DIR (the cluster's directory). Ports: a base
# LOW + 20*k (k < SLOTS) with controllers at BASE, +10, +20 and brokers at BASE+100, +102, +104
# (each port +1 for /metrics), all below the kernel's ephemeral ports so that no outgoing
# connection holds one. `up` is tried with up to 3 ranges: a port taken between the check and
# the start only costs a retry. NAME prefixes every message.

bench_need() {
    local name=$1 bin=$2 b
    shift 2
    for b in "$@"; do
        [[ -x $bin/$b ]] || {
            echo "$name: missing $bin/$b; build it first (ninja -C $(dirname "$bin") $b)" >&2
            exit 2
        }
    done
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
bench_cleanup() {
    "$cluster" down --purge >/dev/null 2>&1 || true
    rm -rf "$work"
}

bench_port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

bench_pick_base() { # LOW SLOTS
    local cand ok p
    for _ in $(seq 1 40); do
        cand=$(($1 + RANDOM % $2 * 20))
        ok=1
        for p in $cand $((cand + 10)) $((cand + 20)) $((cand + 100)) $((cand + 102)) $((cand + 104)); do
            bench_port_free "$p" && bench_port_free $((p + 1)) || ok=0
        done
        if ((ok)); then
            echo "$cand"
            return 0
        fi
    done
    return 1
}

bench_cluster_up() { # NAME BUILD_DIR LOW SLOTS
    local name=$1 root attempt base up_ok=0 status
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    work=$(mktemp -d "/tmp/kq-bench-$name.XXXXXX")
    cluster=$root/deploy/local/cluster.sh
    export KQ_BUILD_DIR=$2 KQ_LOCAL_DIR=$work/cluster KQ_NO_BUILD=1 KQ_NO_INSTALL=1
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    for attempt in 1 2 3; do
        base=$(bench_pick_base "$3" "$4") || {
            echo "$name: no free port range found from $3 ($4 ranges)" >&2
            exit 1
        }
        export KQ_BASE_PORT=$base KQ_PORT_STEP=10 KQ_BROKER_BASE_PORT=$((base + 100))
        if "$cluster" up --brokers 3 >"$work/up.log" 2>&1; then
            up_ok=1
            break
        fi
        echo "$name: cluster.sh up failed (attempt $attempt, ports from $base):" >&2
        tail -n 3 "$work/up.log" >&2
        "$cluster" down --purge >/dev/null 2>&1 || true
    done
    ((up_ok)) || { echo "$name: cluster.sh up failed 3 times" >&2; exit 1; }
    status=$("$cluster" status 2>&1) || true
    brokers=$(awk '$1 == "brokers:" {print $2}' <<<"$status")
    controllers=$(awk '$1 == "controllers:" {print $2}' <<<"$status")
    [[ -n $brokers && -n $controllers ]] || {
        echo "$status" >&2
        echo "$name: cluster.sh status printed no bootstrap lists" >&2
        exit 1
    }
}
