# shellcheck shell=bash
# shellcheck disable=SC2034 # the KD_ globals are read by the tests that source this file
# kqdata.sh: helpers for the data-plane scenario tests (sourced, after nothing else): a local
# cluster made by deploy/local/cluster.sh (3 controllers, broker agents 1..N, as a user runs
# it), driven with `kq produce`, `kq consume` and `kq topics`, the way the seed articles'
# experiments are (../shared/seeds/002_*.txt, the `ledger` topic).
#
#     source "$(dirname "$0")/../lib/kqdata.sh"
#     kd_init "$1" ledger 26100        # bin dir, test name, first port of its range
#     kd_up                            # cluster.sh up (3 controllers, 3 brokers)
#     kd_create ledger 1:2:3 min.insync.replicas=2
#     kd_produce all 'deposit 100'     # KD_OUT: "written at offset 0"
#
# Ports: the kqtest range BASE+1..BASE+9 is claimed, and BASE+10..BASE+12 are checked free;
# controller i listens on BASE+2i-1 (metrics BASE+2i), broker b on BASE+5+2b (metrics +1).
# On exit every process of the cluster is resumed and killed (SIGKILL), then kqtest's cleanup
# runs (the directory is kept when the test failed).
# shellcheck source=SCRIPTDIR/kqtest.sh
source "$(dirname "${BASH_SOURCE[0]}")/kqtest.sh"

KD_CLUSTER=""
KD_CTL=""
KD_BROKERS=""
KD_OUT=""
KD_LINE=""
# kq's connection options: --command-config admin.properties once the cluster is TLS (kd_up
# --tls, or KQ_TEST_TLS=1 for any data test).
KD_CLIENT=()

kd_init() { # BIN_DIR NAME BASE_PORT
    kt_init "$@"
    KD_CLUSTER=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../deploy/local" && pwd)/cluster.sh
    local p
    for ((p = KT_BASE_PORT + 10; p <= KT_BASE_PORT + 12; p++)); do
        kt_port_in_use "$p" && kt_fail "port $p (needed by the local cluster) is in use"
    done
    export KQ_BUILD_DIR KQ_LOCAL_DIR KQ_BASE_PORT KQ_PORT_STEP KQ_BROKER_BASE_PORT
    KQ_BUILD_DIR=$(dirname "$KT_BIN")
    KQ_LOCAL_DIR=$KT_DIR/cluster
    KQ_BASE_PORT=$((KT_BASE_PORT + 1))
    KQ_PORT_STEP=2
    KQ_BROKER_BASE_PORT=$((KT_BASE_PORT + 7))
    export KQ_NO_BUILD=1 KQ_NO_INSTALL=1 KQ_WAIT_SECS=60
    [[ -x $KT_BIN/kq-broker-agent ]] || kt_fail "$KT_BIN/kq-broker-agent is missing"
    KD_CTL="127.0.0.1:$((KT_BASE_PORT + 1)),127.0.0.1:$((KT_BASE_PORT + 3)),127.0.0.1:$((KT_BASE_PORT + 5))"
    KD_BROKERS="127.0.0.1:$((KT_BASE_PORT + 7)),127.0.0.1:$((KT_BASE_PORT + 9)),127.0.0.1:$((KT_BASE_PORT + 11))"
    trap kd_cleanup EXIT
}

kd_cleanup() {
    local rc=$? f pid
    set +e
    for f in "$KQ_LOCAL_DIR"/*.pid; do
        [[ -f $f ]] || continue
        pid=$(cat "$f" 2>/dev/null)
        [[ $pid =~ ^[0-9]+$ ]] || continue
        kill -CONT "$pid" 2>/dev/null
        kill -KILL "$pid" 2>/dev/null
    done
    if [[ $rc -ne 0 ]]; then
        for f in "$KQ_LOCAL_DIR"/broker-*.log; do
            [[ -s $f ]] || continue
            echo "---- tail of $(basename "$f") ----" >&2
            grep -v 'listener is plaintext' "$f" | tail -n 30 >&2
        done
    fi
    (exit "$rc")
    kt_cleanup
}

# kd_cluster ARGS...: run cluster.sh; its output goes to the test log.
kd_cluster() {
    "$KD_CLUSTER" "$@" >>"$KT_DIR/cluster.out" 2>&1 ||
        kt_fail "cluster.sh $* failed: $(tail -n 20 "$KT_DIR/cluster.out")"
}

kd_up() { # [cluster.sh up options]
    local args=("$@")
    [[ ${KQ_TEST_TLS:-0} == 1 && " $* " != *" --tls "* ]] && args+=(--tls)
    kt_log "starting the local cluster (cluster.sh up ${args[*]})"
    [[ " ${args[*]} " == *" --tls "* ]] && KD_CLIENT=(--command-config "$KQ_LOCAL_DIR/admin.properties")
    kd_cluster up "${args[@]}"
}

# kd_broker_config B KEY=VALUE...: add settings to broker B's properties (takes effect at its
# next start).
kd_broker_config() {
    local b=$1
    shift
    printf '%s\n' "$@" >>"$KQ_LOCAL_DIR/broker-$b.properties"
}

kd_pid() { # B -> pid of broker B
    cat "$KQ_LOCAL_DIR/broker-$1.pid" 2>/dev/null || true
}

kd_kill() { # B: kill -9, as the seed's "stop broker B"
    kt_log "kill -9 broker $1"
    kd_cluster kill "$1"
}
kd_start() { # B: restart on its data; waits until it is registered and unfenced
    kt_log "start broker $1"
    kd_cluster start "$1"
}
kd_shutdown() { # B: SIGTERM (controlled shutdown); waits for the exit
    kt_log "SIGTERM broker $1 (controlled shutdown)"
    kd_cluster shutdown "$1"
}
kd_pause() { kill -STOP "$(kd_pid "$1")" && kt_log "SIGSTOP broker $1"; }
kd_resume() { kill -CONT "$(kd_pid "$1")" && kt_log "SIGCONT broker $1"; }

# kd_kq ARGS...: the kq tool against the controllers; output in KD_OUT.
kd_kq() {
    local rc=0
    KD_OUT=$(timeout 60 "$KT_KQ" "$@" --bootstrap-controller "$KD_CTL" "${KD_CLIENT[@]}" 2>&1) || rc=$?
    return "$rc"
}

kd_create() { # TOPIC ASSIGNMENT [k=v ...]: one partition with replicas as in ASSIGNMENT (1:2:3)
    local t=$1 a=$2 kv args=()
    shift 2
    for kv in "$@"; do
        args+=(--config "$kv")
    done
    kd_kq topics --create --topic "$t" --replica-assignment "$a" "${args[@]}" ||
        kt_fail "creating topic $t: $KD_OUT"
    kt_log "created topic $t (replicas ${a//:/,}${*:+, $*})"
}

# kd_describe TOPIC: KD_LINE = the partition line of `kq topics --describe` (partition 0).
kd_describe() {
    kd_kq topics --describe --topic "$1" || return 1
    KD_LINE=$(grep -m1 'Partition: 0' <<<"$KD_OUT" | sed 's/^[[:space:]]*//')
    [[ -n $KD_LINE ]]
}

kd_field() { # NAME: value of "NAME: v" in KD_LINE (tab separated)
    tr '\t' '\n' <<<"$KD_LINE" | sed -n "s/^$1: *//p" | head -n 1
}

# kd_wait_line TOPIC TIMEOUT_S PATTERN: poll the partition line until it matches the extended
# regular expression; prints the line as the seeds do. Returns after the match (fails the
# test at the timeout).
kd_wait_line() {
    local t=$1 deadline=$(($(date +%s) + $2)) pat=$3
    while :; do
        if kd_describe "$t" && [[ $KD_LINE =~ $pat ]]; then
            echo "$KD_LINE"
            return 0
        fi
        (($(date +%s) < deadline)) || kt_fail "topic $t: no partition line matching /$pat/ within $2 s (last: ${KD_LINE:-$KD_OUT})"
        sleep 0.25
    done
}

# kd_produce ACKS VALUE [kq produce options]: one record; KD_OUT = the tool's result line.
# Returns the tool's exit status.
kd_produce() {
    local acks=$1 v=$2 rc=0
    shift 2
    KD_OUT=$(timeout 120 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic "${KD_TOPIC:-ledger}" \
        --acks "$acks" --request-timeout-ms 5000 --delivery-timeout-ms 8000 --value "$v" \
        "${KD_CLIENT[@]}" "$@" 2>&1) || rc=$?
    echo "acks=$acks '$v': $KD_OUT"
    return "$rc"
}

# kd_consume [kq consume options]: every readable record from the beginning, one value per
# line in KD_OUT.
kd_consume() {
    KD_OUT=$(timeout 60 "$KT_KQ" consume --bootstrap-server "$KD_BROKERS" --topic "${KD_TOPIC:-ledger}" \
        --from-beginning --timeout-ms 2000 "${KD_CLIENT[@]}" "$@" 2>/dev/null) ||
        kt_fail "kq consume failed: $KD_OUT"
}

# kd_log_has B PATTERN: broker B's log has a line matching the fixed string.
kd_log_has() {
    grep -qF -- "$2" "$KQ_LOCAL_DIR/broker-$1.log"
}
kd_wait_log() { # B TIMEOUT_S STRING
    local deadline=$(($(date +%s) + $2))
    until kd_log_has "$1" "$3"; do
        (($(date +%s) < deadline)) || kt_fail "broker $1 did not log '$3' within $2 s"
        sleep 0.25
    done
    grep -F -- "$3" "$KQ_LOCAL_DIR/broker-$1.log" | tail -n 1 | sed 's/.*msg="\([^"]*\)".*/\1/'
}

# kd_wait_metric B TIMEOUT_S NAME VALUE: broker B's /metrics shows "NAME VALUE" (the broker's
# own view, e.g. its replica applied an ISR change the controller already committed).
kd_wait_metric() {
    local b=$1 deadline=$(($(date +%s) + $2)) port seen
    port=$((KQ_BROKER_BASE_PORT + ($1 - 1) * 2 + 1))
    while :; do
        seen=$(kt_metrics "$port" | awk -v n="$3" '$1 == n { print $2 }')
        [[ $seen == "$4" ]] && return 0
        (($(date +%s) < deadline)) || kt_fail "broker $b: $3 = '${seen}', expected $4 within $2 s"
        sleep 0.25
    done
}
