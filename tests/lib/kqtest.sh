# shellcheck shell=bash
# shellcheck disable=SC2034 # the KT_ globals are read by the tests that source this file
# kqtest.sh: helpers for the integration tests (sourced, not run).
#
# A test does:
#     source "$(dirname "$0")/../lib/kqtest.sh"
#     kt_init "$1" election 24100      # bin dir, test name, first port of its range
#     kt_cluster 3                     # write configs for 3 voters, format them
#     kt_start_all
#     kt_wait_for_leader 30
#     kt_assert_eq "leader id" 1 "$KT_LEADER"
#     kt_pass
#
# Node i (1-based) listens on 127.0.0.1:$((KT_BASE_PORT + i)). Everything lives in a fresh
# temporary directory ($KT_DIR): node-i.properties, node-i/ (metadata.log.dir), node-i.log.
# On exit, every process the test started is resumed (if paused) and killed with SIGKILL; the
# directory is removed when the test passed and kept (its path printed) when it failed, or
# always kept with KQ_KEEP=1.
#
# Nothing here decides pass/fail on elapsed time: waits poll a condition until a generous
# timeout and report what they last saw.

set -euo pipefail

KT_NAME=""
KT_DIR=""
KT_BIN=""
KT_KQ=""
KT_CTL=""
KT_BASE_PORT=0
KT_NODES=0
KT_CLUSTER_ID=""
KT_PASSED=0
declare -a KT_PID=()
declare -a KT_BPID=() # fake brokers, by broker id
declare -a KT_BFD=()  # write end of each fake broker's stdin FIFO
# Results of the last successful wait / describe.
KT_LEADER=-1
KT_EPOCH=-1
KT_HW=-1
KT_OUT=""

kt_log() {
    printf '[%s %s] %s\n' "$(date +%H:%M:%S.%3N)" "$KT_NAME" "$*" >&2
}

kt_now_ms() {
    date +%s%3N
}

# kt_http PORT PATH: the whole answer (status line, headers, body) to GET PATH on
# 127.0.0.1:PORT, over bash's /dev/tcp (no curl needed); empty when nothing answers within 10 s.
# shellcheck disable=SC2016 # $1 and $2 expand in the inner bash
kt_http() {
    timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
        printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null || true
}

# kt_metrics PORT: GET /metrics on 127.0.0.1:PORT (see kt_http).
kt_metrics() {
    kt_http "$1" /metrics
}

# kt_readyz PORT: "CODE BODY" of GET /readyz on 127.0.0.1:PORT ("000 " when nothing answers).
kt_readyz() {
    local out code body
    out=$(kt_http "$1" /readyz | tr -d '\r')
    code=$(head -n 1 <<<"$out" | awk '{print $2}')
    body=$(awk 'f { print } /^$/ { f = 1 }' <<<"$out")
    echo "${code:-000} $body"
}

# ---------------------------------------------------------------------------------------
# Setup and teardown

# kt_init BIN_DIR NAME BASE_PORT
kt_init() {
    if [[ $# -ne 3 ]]; then
        echo "usage: kt_init BIN_DIR NAME BASE_PORT" >&2
        exit 2
    fi
    KT_BIN=$(cd "$1" && pwd)
    KT_NAME=$2
    KT_KQ=$KT_BIN/kq
    KT_CTL=$KT_BIN/kq-controller
    local b
    for b in "$KT_KQ" "$KT_CTL"; do
        if [[ ! -x $b ]]; then
            echo "FAIL: $b is missing or not executable (build the kq and kq-controller targets)" >&2
            exit 1
        fi
    done
    KT_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kq-it-$KT_NAME.XXXXXX")
    trap kt_cleanup EXIT
    trap 'kt_log "interrupted"; exit 130' INT TERM
    kt_claim_ports "$3"
    kt_log "bin=$KT_BIN dir=$KT_DIR ports=$((KT_BASE_PORT + 1))..$((KT_BASE_PORT + 9))"
}

# kt_claim_ports BASE: several test runs may share a machine (two build trees, two people), so
# a test claims its range BASE+1..BASE+9 with an atomic mkdir under /tmp/kq-it-ports and moves
# up by 1000 (at most 7 times, staying below the ephemeral range) when the range is claimed by
# a live process or a port in it is busy. KQ_TEST_BASE_PORT forces a range.
KT_PORT_LOCK=""
kt_claim_ports() {
    local base=$1 b try p pid busy root=${TMPDIR:-/tmp}/kq-it-ports
    if [[ -n ${KQ_TEST_BASE_PORT:-} ]]; then
        KT_BASE_PORT=$KQ_TEST_BASE_PORT
        return 0
    fi
    mkdir -p "$root"
    for ((try = 0; try < 8; try++)); do
        b=$((base + try * 1000))
        if ! mkdir "$root/$b" 2>/dev/null; then
            pid=$(cat "$root/$b/pid" 2>/dev/null || true)
            if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
                rm -rf "${root:?}/$b" # left behind by a test that was killed
                mkdir "$root/$b" 2>/dev/null || continue
            else
                continue
            fi
        fi
        echo $$ >"$root/$b/pid"
        busy=0
        for ((p = b + 1; p <= b + 9; p++)); do
            if kt_port_in_use "$p"; then
                busy=1
                break
            fi
        done
        if [[ $busy -eq 1 ]]; then
            rm -rf "${root:?}/$b"
            continue
        fi
        KT_BASE_PORT=$b
        KT_PORT_LOCK=$root/$b
        return 0
    done
    kt_fail "no free port range among $base, $((base + 1000)) .. $((base + 7000)) (+1..+9)"
}

kt_cleanup() {
    local rc=$? i pid
    set +e
    for i in "${!KT_BPID[@]}"; do
        pid=${KT_BPID[$i]}
        [[ -n $pid ]] || continue
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    for i in "${!KT_PID[@]}"; do
        pid=${KT_PID[$i]}
        [[ -n $pid ]] || continue
        kill -CONT "$pid" 2>/dev/null
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    [[ -n $KT_PORT_LOCK ]] && rm -rf "$KT_PORT_LOCK"
    if [[ $KT_PASSED -eq 1 && $rc -eq 0 && ${KQ_KEEP:-0} != 1 ]]; then
        rm -rf "$KT_DIR"
    elif [[ -n $KT_DIR ]]; then
        kt_log "kept $KT_DIR for inspection"
    fi
    exit "$rc"
}

kt_pass() {
    KT_PASSED=1
    kt_log "PASS"
    exit 0
}

# kt_fail MESSAGE...: print the message and the tail of every node log, then exit 1.
kt_fail() {
    local i
    echo "FAIL: [$KT_NAME] $*" >&2
    for ((i = 1; i <= KT_NODES; i++)); do
        if [[ -s $KT_DIR/node-$i.log ]]; then
            echo "---- tail of node-$i.log ----" >&2
            tail -n 25 "$KT_DIR/node-$i.log" >&2
        fi
    done
    exit 1
}

# ---------------------------------------------------------------------------------------
# Assertions: each prints what was expected and what was seen.

kt_assert_eq() { # WHAT EXPECTED SEEN
    if [[ "$2" != "$3" ]]; then
        kt_fail "$1: expected '$2', saw '$3'"
    fi
    kt_log "ok: $1 = '$3'"
}

kt_assert_ne() { # WHAT UNEXPECTED SEEN
    if [[ "$2" == "$3" ]]; then
        kt_fail "$1: expected anything but '$2', saw '$3'"
    fi
    kt_log "ok: $1 = '$3' (not '$2')"
}

kt_assert_gt() { # WHAT SEEN BOUND  (integers: SEEN > BOUND)
    if ! [[ $2 =~ ^-?[0-9]+$ ]] || ((${2} <= ${3})); then
        kt_fail "$1: expected a value greater than $3, saw '$2'"
    fi
    kt_log "ok: $1 = $2 (> $3)"
}

kt_assert_ge() { # WHAT SEEN BOUND
    if ! [[ $2 =~ ^-?[0-9]+$ ]] || ((${2} < ${3})); then
        kt_fail "$1: expected a value >= $3, saw '$2'"
    fi
    kt_log "ok: $1 = $2 (>= $3)"
}

kt_assert_contains() { # WHAT NEEDLE HAYSTACK
    if [[ "$3" != *"$2"* ]]; then
        kt_fail "$1: expected to contain '$2', saw: $3"
    fi
    kt_log "ok: $1 contains '$2'"
}

# ---------------------------------------------------------------------------------------
# Configuration and processes

kt_port() { # NODE
    echo $((KT_BASE_PORT + $1))
}

# kt_voters N: "1@127.0.0.1:p1,2@127.0.0.1:p2,..."
kt_voters() {
    local i s=""
    for ((i = 1; i <= $1; i++)); do
        s+="${s:+,}$i@127.0.0.1:$(kt_port "$i")"
    done
    echo "$s"
}

# kt_bootstrap NODE...: "127.0.0.1:p,127.0.0.1:q"
kt_bootstrap() {
    local i s=""
    for i in "$@"; do
        s+="${s:+,}127.0.0.1:$(kt_port "$i")"
    done
    echo "$s"
}

# kt_write_config NODE VOTER_COUNT [key=value...]: extra lines are appended (later wins).
kt_write_config() {
    local i=$1 n=$2
    shift 2
    {
        echo "# kq integration test $KT_NAME, node $i"
        echo "process.roles=controller"
        echo "node.id=$i"
        echo "controller.quorum.voters=$(kt_voters "$n")"
        echo "listeners=CONTROLLER://127.0.0.1:$(kt_port "$i")"
        echo "advertised.listeners=CONTROLLER://127.0.0.1:$(kt_port "$i")"
        echo "metadata.log.dir=$KT_DIR/node-$i"
        echo "log.level=${KQ_TEST_LOG_LEVEL:-info}"
        local kv
        for kv in "$@"; do
            echo "$kv"
        done
    } >"$KT_DIR/node-$i.properties"
}

# kt_dyn_config NODE "BOOT_NODE..." [key=value...]: a controller of a dynamic quorum (KIP-853)
# that finds it through controller.quorum.bootstrap.servers of the nodes listed (no voters).
kt_dyn_config() {
    local i=$1 boot=$2 kv
    shift 2
    {
        echo "# kq integration test $KT_NAME, node $i (dynamic voters)"
        echo "process.roles=controller"
        echo "node.id=$i"
        # shellcheck disable=SC2086 # the node list is split on purpose
        echo "controller.quorum.bootstrap.servers=$(kt_bootstrap $boot)"
        echo "listeners=CONTROLLER://127.0.0.1:$(kt_port "$i")"
        echo "metadata.log.dir=$KT_DIR/node-$i"
        echo "log.level=${KQ_TEST_LOG_LEVEL:-info}"
        for kv in "$@"; do
            echo "$kv"
        done
    } >"$(kt_config "$i")"
}

kt_config() { # NODE -> path of its config
    echo "$KT_DIR/node-$1.properties"
}

# kt_format NODE [CLUSTER_ID]
kt_format() {
    local i=$1 id=${2:-$KT_CLUSTER_ID} out
    if ! out=$("$KT_KQ" storage format --config "$(kt_config "$i")" --cluster-id "$id" 2>&1); then
        kt_fail "kq storage format of node $i failed: $out"
    fi
}

# kt_cluster N [key=value...]: configs for N voters, one random cluster id, all formatted.
kt_cluster() {
    local n=$1 i
    shift
    KT_NODES=$n
    if ! KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid); then
        kt_fail "kq storage random-uuid failed"
    fi
    kt_assert_eq "random-uuid length" 22 "${#KT_CLUSTER_ID}"
    for ((i = 1; i <= n; i++)); do
        kt_write_config "$i" "$n" "$@"
        kt_format "$i"
    done
    kt_log "cluster $KT_CLUSTER_ID with $n voters formatted"
}

kt_port_in_use() { # PORT
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

kt_alive() { # NODE: running or stopped, not exited (a zombie counts as dead)
    local pid=${KT_PID[$1]:-} state
    [[ -n $pid ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

kt_start() { # NODE
    local i=$1
    if kt_alive "$i"; then
        kt_fail "kt_start: node $i is already running (pid ${KT_PID[$i]})"
    fi
    if kt_port_in_use "$(kt_port "$i")"; then
        kt_fail "port $(kt_port "$i") for node $i is already in use by another process"
    fi
    echo "---- start $(date +%T.%3N) ----" >>"$KT_DIR/node-$i.log"
    "$KT_CTL" --config "$(kt_config "$i")" >>"$KT_DIR/node-$i.log" 2>&1 &
    KT_PID[i]=$!
    kt_log "started node $i (pid ${KT_PID[$i]}, port $(kt_port "$i"))"
}

kt_start_all() {
    local i
    for ((i = 1; i <= KT_NODES; i++)); do
        kt_start "$i"
    done
}

# kt_wait_exit NODE TIMEOUT_S: 0 if the process exited within the timeout; sets KT_RC.
KT_RC=-1
kt_wait_exit() {
    local i=$1 deadline=$(($(date +%s) + $2)) pid=${KT_PID[$1]:-}
    [[ -n $pid ]] || return 0
    while kt_alive "$i"; do
        if (($(date +%s) >= deadline)); then
            return 1
        fi
        sleep 0.1
    done
    KT_RC=0
    { wait "$pid"; } 2>/dev/null || KT_RC=$?
    KT_PID[i]=""
    return 0
}

kt_stop() { # NODE: SIGTERM (graceful resignation), expects exit 0
    local i=$1
    kt_alive "$i" || kt_fail "kt_stop: node $i is not running"
    kill -TERM "${KT_PID[$i]}"
    if ! kt_wait_exit "$i" 30; then
        kt_fail "node $i did not exit within 30 s of SIGTERM"
    fi
    kt_assert_eq "exit status of node $i after SIGTERM" 0 "$KT_RC"
}

kt_kill() { # NODE: SIGKILL
    local i=$1
    kt_alive "$i" || kt_fail "kt_kill: node $i is not running"
    kill -CONT "${KT_PID[$i]}" 2>/dev/null || true
    kill -KILL "${KT_PID[$i]}"
    kt_wait_exit "$i" 30 || kt_fail "node $i survived SIGKILL for 30 s"
    kt_log "killed node $i"
}

kt_pause() { # NODE: SIGSTOP
    kill -STOP "${KT_PID[$1]}"
    kt_log "paused node $1 (SIGSTOP)"
}

kt_resume() { # NODE: SIGCONT
    kill -CONT "${KT_PID[$1]}"
    kt_log "resumed node $1 (SIGCONT)"
}

# ---------------------------------------------------------------------------------------
# Describe helpers

# kt_describe NODE... [-- EXTRA ARGS]: runs describe --status against those nodes; output in
# KT_OUT (stdout and stderr); returns the tool's exit status (124 if it hung for 20 s). The
# tool retries "no leader" and refused connections until --timeout-ms: polls want a prompt
# answer, so the bound is KT_DESCRIBE_TIMEOUT_MS (default 2000, the per-request timeout of
# metadata-quorum); EXTRA ARGS may override it.
kt_describe() {
    local nodes=() extra=(--status) rc=0
    while [[ $# -gt 0 ]]; do
        if [[ $1 == -- ]]; then
            shift
            extra=("$@")
            break
        fi
        nodes+=("$1")
        shift
    done
    KT_OUT=$(timeout 20 "$KT_KQ" metadata-quorum --timeout-ms "${KT_DESCRIBE_TIMEOUT_MS:-2000}" \
        --bootstrap-controller "$(kt_bootstrap "${nodes[@]}")" describe "${extra[@]}" 2>&1) || rc=$?
    return "$rc"
}

# kt_field NAME: value of "NAME:" in describe --status output on stdin ("" if absent).
kt_field() {
    awk -v f="$1:" '$1 == f { sub(/^[^:]*:[ \t]*/, ""); print; exit }'
}

# kt_status NODE...: describe --status; on success sets KT_LEADER, KT_EPOCH, KT_HW from the
# answer (LeaderId -1 or absent means no leader). Returns non-zero when nobody answered.
kt_status() {
    KT_LEADER=-1
    KT_EPOCH=-1
    KT_HW=-1
    kt_describe "$@" || return 1
    local l e h
    l=$(kt_field LeaderId <<<"$KT_OUT")
    e=$(kt_field LeaderEpoch <<<"$KT_OUT")
    h=$(kt_field HighWatermark <<<"$KT_OUT")
    [[ $l =~ ^-?[0-9]+$ ]] && KT_LEADER=$l
    [[ $e =~ ^-?[0-9]+$ ]] && KT_EPOCH=$e
    [[ $h =~ ^-?[0-9]+$ ]] && KT_HW=$h
    return 0
}

# kt_wait_for_leader TIMEOUT_S [--min-epoch E] [--not ID] [NODE...]
# Polls each listed node (default: all running nodes) alone until one reports a leader that
# is among the listed nodes, with an epoch > E and an id != ID. Sets KT_LEADER, KT_EPOCH,
# KT_HW and KT_WAITED_MS.
KT_WAITED_MS=0
kt_wait_for_leader() {
    local timeout=$1 min_epoch=-1 not=-999 nodes=() i start deadline last="nothing"
    shift
    while [[ $# -gt 0 ]]; do
        case $1 in
        --min-epoch) min_epoch=$2 && shift 2 ;;
        --not) not=$2 && shift 2 ;;
        *) nodes+=("$1") && shift ;;
        esac
    done
    if [[ ${#nodes[@]} -eq 0 ]]; then
        for ((i = 1; i <= KT_NODES; i++)); do
            kt_alive "$i" && nodes+=("$i")
        done
    fi
    start=$(kt_now_ms)
    deadline=$((start + timeout * 1000))
    while (($(kt_now_ms) < deadline)); do
        for i in "${nodes[@]}"; do
            if kt_status "$i"; then
                last="node $i: LeaderId=$KT_LEADER LeaderEpoch=$KT_EPOCH"
                if ((KT_LEADER >= 0 && KT_EPOCH > min_epoch && KT_LEADER != not)) &&
                    [[ " ${nodes[*]} " == *" $KT_LEADER "* ]]; then
                    KT_WAITED_MS=$(($(kt_now_ms) - start))
                    return 0
                fi
            else
                last="node $i: no answer: $(head -c 300 <<<"$KT_OUT")"
            fi
        done
        sleep 0.1
    done
    kt_fail "no leader (epoch > $min_epoch, not $not) among nodes ${nodes[*]} within ${timeout} s; last seen: $last"
}

# kt_wait_hw_above TIMEOUT_S BOUND NODE...: waits until describe reports HighWatermark > BOUND.
kt_wait_hw_above() {
    local timeout=$1 bound=$2 deadline last=-1
    shift 2
    deadline=$(($(date +%s) + timeout))
    while (($(date +%s) < deadline)); do
        if kt_status "$@" && ((KT_HW > bound)); then
            return 0
        fi
        ((KT_HW > last)) && last=$KT_HW
        sleep 0.2
    done
    kt_fail "HighWatermark did not rise above $bound within ${timeout} s (highest seen: $last)"
}

# kt_write NODE... [-- ARGS]: kq metadata-write; prints the offsets written, one per line.
kt_write() {
    local nodes=() extra=() out rc=0
    while [[ $# -gt 0 ]]; do
        if [[ $1 == -- ]]; then
            shift
            extra=("$@")
            break
        fi
        nodes+=("$1")
        shift
    done
    out=$(timeout 60 "$KT_KQ" metadata-write --bootstrap-controller "$(kt_bootstrap "${nodes[@]}")" \
        "${extra[@]}" 2>&1) || rc=$?
    if [[ $rc -ne 0 ]]; then
        kt_fail "kq metadata-write ${extra[*]} failed (exit $rc): $out"
    fi
    sed -n 's/.*written at offset \([0-9][0-9]*\) epoch \([0-9][0-9]*\).*/\1/p' <<<"$out"
}

# kt_log_dump NODE OUTFILE: the record lines (offset=...) of kq log-dump --lines of the node's
# directory (the node must not be running); returns the log_end from the summary line.
kt_log_dump() {
    local i=$1 file=$2 out n
    if ! out=$(timeout 60 "$KT_KQ" log-dump --dir "$KT_DIR/node-$i" --lines 2>&1); then
        kt_fail "kq log-dump --dir $KT_DIR/node-$i --lines failed: $(tail -n 5 <<<"$out")"
    fi
    grep '^offset=' <<<"$out" >"$file" || true
    n=$(sed -n 's/^records=\([0-9][0-9]*\) .*/\1/p' <<<"$out" | tail -n 1)
    [[ $(wc -l <"$file") -eq ${n:--1} ]] ||
        kt_fail "kq log-dump --lines of node $i: $(wc -l <"$file") record lines, summary says ${n:-nothing}"
    sed -n 's/.*log_end=\([0-9][0-9]*\).*/\1/p' <<<"$out" | tail -n 1
}

# kt_records_below FILE BOUND: record lines with offset < BOUND.
kt_records_below() {
    awk -v b="$2" '{ split($1, kv, "="); if (kv[1] == "offset" && kv[2] + 0 < b + 0) print }' "$1"
}

# kt_set_prop FILE KEY VALUE: replaces KEY's line in a .properties file, or appends it.
kt_set_prop() {
    local file=$1 key=$2 value=$3 tmp
    tmp=$(mktemp "$KT_DIR/prop.XXXXXX")
    awk -v k="$key" -v v="$value" '
        { split($0, a, "="); if (a[1] == k) { if (!done) print k "=" v; done = 1; next } print }
        END { if (!done) print k "=" v }' "$file" >"$tmp"
    mv "$tmp" "$file"
}

# ---------------------------------------------------------------------------------------
# Controller metadata tools and fake brokers (kq-fake-broker, tests/integration/fake_broker.c)

# kt_kq ARGS...: runs `kq ARGS --bootstrap-controller <all nodes>` (60 s cap); stdout and stderr
# in KT_OUT; returns the tool's exit status. The bootstrap list can be overridden with
# KT_KQ_BOOTSTRAP (e.g. a single node). The tool itself retries while no controller is active
# (up to its default --timeout-ms of 60 s).
kt_kq() {
    local rc=0 bs=${KT_KQ_BOOTSTRAP:-}
    [[ -n $bs ]] || bs=$(kt_bootstrap $(seq 1 "$KT_NODES"))
    KT_OUT=$(timeout 60 "$KT_KQ" "$@" --bootstrap-controller "$bs" 2>&1) || rc=$?
    return "$rc"
}

# kt_kq_ok ARGS...: kt_kq, failing the test when the tool exits non-zero.
kt_kq_ok() {
    kt_kq "$@" || kt_fail "kq $* failed (exit $?): $KT_OUT"
}

# kt_kq_retry TIMEOUT_S ARGS...: kt_kq until it exits 0 (e.g. while a controller is elected).
kt_kq_retry() {
    local deadline=$(($(date +%s) + $1)) rc
    shift
    while :; do
        rc=0
        kt_kq "$@" || rc=$?
        [[ $rc -eq 0 ]] && return 0
        (($(date +%s) < deadline)) || kt_fail "kq $* kept failing for $1 s (last exit $rc): $KT_OUT"
        sleep 0.3
    done
}

kt_broker_out() { # ID -> path of the fake broker's output
    echo "$KT_DIR/broker-$1.out"
}

# kt_broker_start ID [ARGS...]: starts kq-fake-broker --broker-id ID against all controllers,
# stdin from a FIFO kept open in KT_BFD[ID], output appended to broker-ID.out.
kt_broker_start() {
    local id=$1 fifo fd
    shift
    [[ -x $KT_BIN/kq-fake-broker ]] || kt_fail "$KT_BIN/kq-fake-broker is missing (build kq-fake-broker)"
    if [[ -n ${KT_BPID[$id]:-} ]] && kill -0 "${KT_BPID[$id]}" 2>/dev/null; then
        kt_fail "kt_broker_start: broker $id is already running (pid ${KT_BPID[$id]})"
    fi
    fifo=$KT_DIR/broker-$id.in
    rm -f "$fifo"
    mkfifo "$fifo"
    echo "---- start $(date +%T.%3N) ----" >>"$(kt_broker_out "$id")"
    "$KT_BIN/kq-fake-broker" --bootstrap-controller "$(kt_bootstrap $(seq 1 "$KT_NODES"))" \
        --cluster-id "$KT_CLUSTER_ID" --broker-id "$id" --port $((9000 + id)) "$@" \
        <"$fifo" >>"$(kt_broker_out "$id")" 2>&1 &
    KT_BPID[id]=$!
    exec {fd}>"$fifo"
    KT_BFD[id]=$fd
    kt_log "started fake broker $id (pid ${KT_BPID[$id]}) $*"
}

# kt_broker_kill ID: SIGKILL the fake broker (its registration stays until the session expires).
kt_broker_kill() {
    local id=$1 fd=${KT_BFD[$1]:-}
    [[ -n ${KT_BPID[$id]:-} ]] || kt_fail "kt_broker_kill: broker $id is not running"
    kill -KILL "${KT_BPID[$id]}" 2>/dev/null || true
    wait "${KT_BPID[$id]}" 2>/dev/null || true
    KT_BPID[id]=""
    if [[ -n $fd ]]; then
        exec {fd}>&-
        KT_BFD[id]=""
    fi
    kt_log "killed fake broker $id"
}

kt_broker_lines() { # ID: number of output lines so far
    local f
    f=$(kt_broker_out "$1")
    [[ -f $f ]] || {
        echo 0
        return
    }
    wc -l <"$f"
}

# kt_broker_wait ID FROM_LINE REGEX TIMEOUT_S: waits for an output line after FROM_LINE matching
# the extended REGEX; the line goes to KT_BLINE.
KT_BLINE=""
kt_broker_wait() {
    local id=$1 from=$2 re=$3 deadline=$(($(date +%s) + $4)) f
    f=$(kt_broker_out "$id")
    while :; do
        KT_BLINE=$(tail -n +"$((from + 1))" "$f" 2>/dev/null | grep -E -m1 -- "$re" || true)
        [[ -n $KT_BLINE ]] && return 0
        if (($(date +%s) >= deadline)); then
            kt_fail "fake broker $id printed no line matching /$re/ within $4 s; its output after line $from: $(tail -n +"$((from + 1))" "$f" | tail -n 10)"
        fi
        sleep 0.05
    done
}

# kt_broker_cmd ID LINE REGEX [TIMEOUT_S]: sends LINE to the broker's stdin and waits for its
# answer (a new line matching REGEX) in KT_BLINE.
kt_broker_cmd() {
    local id=$1 from fd=${KT_BFD[$1]:-}
    [[ -n $fd ]] || kt_fail "kt_broker_cmd: broker $id has no stdin"
    from=$(kt_broker_lines "$id")
    printf '%s\n' "$2" >&"$fd"
    kt_broker_wait "$id" "$from" "$3" "${4:-30}"
}

# kt_broker_alter ID TOPIC_ID PARTITION LEADER_EPOCH PARTITION_EPOCH ISR: an AlterPartition from
# broker ID; sets KT_ALTER_ERROR (top-level), KT_ALTER_PERROR (the partition's), and
# KT_ALTER_LEADER, KT_ALTER_LE, KT_ALTER_PE, KT_ALTER_ISR from the answer.
kt_broker_alter() {
    local id=$1
    shift
    kt_broker_cmd "$id" "alter $*" '^alter '
    KT_ALTER_ERROR=$(sed -n 's/.*alter error=\([A-Z_]*\).*/\1/p' <<<"$KT_BLINE")
    KT_ALTER_PERROR=$(sed -n 's/.* partition_error=\([A-Z_]*\).*/\1/p' <<<"$KT_BLINE")
    KT_ALTER_LEADER=$(sed -n 's/.* leader=\(-*[0-9]*\).*/\1/p' <<<"$KT_BLINE")
    KT_ALTER_LE=$(sed -n 's/.* leader_epoch=\(-*[0-9]*\).*/\1/p' <<<"$KT_BLINE")
    KT_ALTER_PE=$(sed -n 's/.* partition_epoch=\(-*[0-9]*\).*/\1/p' <<<"$KT_BLINE")
    KT_ALTER_ISR=$(sed -n 's/.* isr=\([0-9,]*\).*/\1/p' <<<"$KT_BLINE")
    kt_log "broker $id: $KT_BLINE"
}

# kt_json_brokers: the `kq cluster describe --json` answer in KT_OUT as lines
# "id epoch fenced inControlledShutdown" (python3 is not required: plain text processing of
# the tool's compact JSON).
kt_json_brokers() {
    sed 's/},{/}\n{/g' <<<"$KT_OUT" |
        sed -n 's/.*"id":\([0-9]*\),"epoch":\([0-9-]*\),"fenced":\([a-z]*\),"inControlledShutdown":\([a-z]*\).*/\1 \2 \3 \4/p'
}

# kt_broker_state ID: "fenced epoch" of broker ID from `kq cluster describe --json` (sets
# KT_BFENCED, KT_BEPOCH; "" when the broker is not registered). Returns non-zero when the tool
# failed.
kt_broker_state() {
    KT_BFENCED=""
    KT_BEPOCH=""
    kt_kq cluster describe --json || return 1
    local row
    row=$(kt_json_brokers | awk -v id="$1" '$1 == id')
    KT_BEPOCH=$(awk '{print $2}' <<<"$row")
    KT_BFENCED=$(awk '{print $3}' <<<"$row")
    return 0
}

# kt_wait_broker_fenced ID true|false TIMEOUT_S: polls cluster describe until the broker's
# fenced flag is the wanted one; KT_WAITED_MS is when it was first seen.
kt_wait_broker_fenced() {
    local id=$1 want=$2 start deadline last="nothing"
    start=$(kt_now_ms)
    deadline=$((start + $3 * 1000))
    while (($(kt_now_ms) < deadline)); do
        if kt_broker_state "$id"; then
            last="fenced=$KT_BFENCED epoch=$KT_BEPOCH"
            if [[ $KT_BFENCED == "$want" ]]; then
                KT_WAITED_MS=$(($(kt_now_ms) - start))
                return 0
            fi
        else
            last="cluster describe failed: $KT_OUT"
        fi
        sleep 0.1
    done
    kt_fail "broker $id: expected fenced=$want within $3 s, last seen: $last"
}

# kt_partition_line TOPIC PARTITION: the partition's describe line (from KT_OUT of a
# `topics --describe` run), without the leading TAB.
kt_partition_line() {
    awk -F'\t' -v t="Topic: $1" -v p="Partition: $2" '$2 == t && $3 == p { sub(/^\t/, ""); print }' <<<"$KT_OUT"
}

# kt_topic_id TOPIC: the topic's id from `kq topics --describe --topic TOPIC`.
kt_topic_id() {
    kt_kq_ok topics --describe --topic "$1"
    awk -F'\t' 'NR == 1 { sub(/^TopicId: /, "", $2); print $2 }' <<<"$KT_OUT"
}

# kt_selected: the partitions of a `kq topics --describe` output in KT_OUT as sorted
# "topic-partition" words on one line.
kt_selected() {
    awk -F'\t' '$2 ~ /^Topic: / && $3 ~ /^Partition: / {
        t = $2; sub(/^Topic: /, "", t); p = $3; sub(/^Partition: /, "", p); print t "-" p }' \
        <<<"$KT_OUT" | sort | xargs
}

# kt_partition_epochs TOPIC PARTITION: "LEADER_EPOCH PARTITION_EPOCH" from the JSON describe.
kt_partition_epochs() {
    kt_kq_ok topics --describe --topic "$1" --json
    sed 's/{"partition":/\n{"partition":/g' <<<"$KT_OUT" | grep "^{\"partition\":$2," |
        sed -n 's/.*"leaderEpoch":\([0-9-]*\),"partitionEpoch":\([0-9-]*\),.*/\1 \2/p'
}
