#!/usr/bin/env bash
# deploy/local/cluster.sh: a local kq controller quorum on 127.0.0.1.
#
#   deploy/local/cluster.sh up [--controllers 3|5]   install, build, format, start, wait for a leader
#   deploy/local/cluster.sh status                   describe --status and which processes live
#   deploy/local/cluster.sh stop NODE                SIGTERM: graceful resignation
#   deploy/local/cluster.sh kill NODE                SIGKILL: a crash
#   deploy/local/cluster.sh start NODE               restart a stopped node on its existing data
#   deploy/local/cluster.sh down [--purge]           stop everything (--purge also deletes the data)
#
# Environment:
#   KQ_LOCAL_DIR   where configs, data, logs and pid files live (default: <repo>/.kq-local)
#   KQ_BASE_PORT   port of node 1 (default 19093); node N listens on
#                  KQ_BASE_PORT + (N-1) * KQ_PORT_STEP
#   KQ_PORT_STEP   default 10000 (19093, 29093, 39093, 49093, 59093)
#   KQ_BUILD_DIR   build tree to use (default: <repo>/build/release, the "release" preset)
#   KQ_WAIT_SECS   how long `up` and `start` wait for a leader (default 30)
#   KQ_NO_INSTALL  set to 1 to never call apt-get
#
# Layout under $KQ_LOCAL_DIR: cluster.env (controller count, ports, cluster id), and per node
# N: node-N.properties, node-N/ (metadata.log.dir), node-N.log (stderr), node-N.pid.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL_DIR=${KQ_LOCAL_DIR:-$ROOT/.kq-local}
[[ $LOCAL_DIR == /* ]] || LOCAL_DIR=$PWD/$LOCAL_DIR
BUILD_DIR=${KQ_BUILD_DIR:-$ROOT/build/release}
BIN=$BUILD_DIR/bin
KQ=$BIN/kq
CTL=$BIN/kq-controller
WAIT_SECS=${KQ_WAIT_SECS:-30}
PACKAGES=(cmake ninja-build gcc libc6-dev pkgconf libprotobuf-c-dev protobuf-c-compiler
    libnng-dev liblmdb-dev libcmocka-dev)

say() { printf 'cluster.sh: %s\n' "$*"; }
die() {
    printf 'cluster.sh: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

# ---------------------------------------------------------------------------------------
# Packages and build

ensure_packages() {
    local missing=() p
    if ! command -v dpkg-query >/dev/null; then
        say "not a Debian system: make sure these are installed: ${PACKAGES[*]}"
        return 0
    fi
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$p")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    [[ ${KQ_NO_INSTALL:-0} == 1 ]] && die "missing packages: ${missing[*]} (KQ_NO_INSTALL=1)"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || die "missing packages ${missing[*]} and no sudo: install them as root"
        sudo=(sudo)
    fi
    say "installing missing packages: ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}"
}

# True when a binary is missing or older than any source, header, proto or CMake file.
binaries_stale() {
    [[ -x $KQ && -x $CTL ]] || return 0
    local newer
    newer=$(find "$ROOT/CMakeLists.txt" "$ROOT/CMakePresets.json" "$ROOT/common" \
        "$ROOT/controller" "$ROOT/tools" "$ROOT/include" "$ROOT/proto" \
        \( -name '*.[ch]' -o -name '*.proto' -o -name CMakeLists.txt -o -name '*.json' \) \
        -newer "$CTL" -print -quit 2>/dev/null || true)
    [[ -n $newer ]] || newer=$(find "$ROOT/common" "$ROOT/tools" "$ROOT/include" "$ROOT/proto" \
        \( -name '*.[ch]' -o -name '*.proto' -o -name CMakeLists.txt \) \
        -newer "$KQ" -print -quit 2>/dev/null || true)
    [[ -n $newer ]]
}

ensure_built() {
    if ! binaries_stale; then
        return 0
    fi
    ensure_packages
    say "building kq and kq-controller in $BUILD_DIR"
    if [[ -z ${KQ_BUILD_DIR:-} ]]; then
        (cd "$ROOT" && cmake --preset release >/dev/null)
    elif [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
        cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    fi
    if ! cmake --build "$BUILD_DIR" --target kq kq-controller; then
        if [[ -x $KQ && -x $CTL ]]; then
            say "warning: the rebuild failed; using the existing binaries in $BIN"
            return 0
        fi
        die "build failed"
    fi
    [[ -x $KQ && -x $CTL ]] || die "build produced no $KQ / $CTL"
    touch "$KQ" "$CTL" # an up-to-date build must not look stale next time
}

# ---------------------------------------------------------------------------------------
# Cluster state

load_env() {
    [[ -f $LOCAL_DIR/cluster.env ]] || die "no local cluster in $LOCAL_DIR (run: $0 up)"
    # shellcheck source=/dev/null
    source "$LOCAL_DIR/cluster.env"
}

port_of() { # NODE
    echo $((BASE_PORT + ($1 - 1) * PORT_STEP))
}

bootstrap() {
    local i s=""
    for ((i = 1; i <= CONTROLLERS; i++)); do
        s+="${s:+,}127.0.0.1:$(port_of "$i")"
    done
    echo "$s"
}

pid_of() { # NODE: prints the pid if the process runs
    local f=$LOCAL_DIR/node-$1.pid pid
    [[ -f $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid belongs to some other program: check the command line names our config.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "node-$1.properties" || return 1
    echo "$pid"
}

check_node() { # NODE
    if ! [[ $1 =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > CONTROLLERS)); then
        die "node must be 1..$CONTROLLERS, got '$1'"
    fi
}

write_configs() {
    local i v="" p
    for ((i = 1; i <= CONTROLLERS; i++)); do
        v+="${v:+,}$i@127.0.0.1:$(port_of "$i")"
    done
    for ((i = 1; i <= CONTROLLERS; i++)); do
        p=$(port_of "$i")
        cat >"$LOCAL_DIR/node-$i.properties" <<EOF
# kq controller $i of a local $CONTROLLERS-controller quorum (written by deploy/local/cluster.sh)
# Every key is described in docs/configuration.md.
process.roles=controller
node.id=$i
controller.quorum.voters=$v
listeners=CONTROLLER://127.0.0.1:$p
advertised.listeners=CONTROLLER://127.0.0.1:$p
metadata.log.dir=$LOCAL_DIR/node-$i
# Prometheus /metrics, /healthz, /readyz (docs/metrics.md)
metrics.listener=127.0.0.1:$((p + 1))
log.level=info
EOF
    done
}

start_node() { # NODE
    local i=$1 pid
    if pid=$(pid_of "$i"); then
        say "node $i already running (pid $pid)"
        return 0
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$(port_of "$i")") 2>/dev/null; then
        die "port $(port_of "$i") for node $i is in use by another process (set KQ_BASE_PORT)"
    fi
    echo "---- start $(date -Is) ----" >>"$LOCAL_DIR/node-$i.log"
    # setsid: the daemon gets its own session, so a Ctrl-C in this terminal does not reach it.
    setsid "$CTL" --config "$LOCAL_DIR/node-$i.properties" </dev/null >>"$LOCAL_DIR/node-$i.log" 2>&1 &
    pid=$!
    echo "$pid" >"$LOCAL_DIR/node-$i.pid"
    # A config or storage problem makes the daemon exit at once: report it here.
    sleep 0.3
    if ! kill -0 "$pid" 2>/dev/null; then
        local rc=0
        wait "$pid" || rc=$?
        rm -f "$LOCAL_DIR/node-$i.pid"
        tail -n 5 "$LOCAL_DIR/node-$i.log" >&2
        die "node $i exited at start (status $rc); see $LOCAL_DIR/node-$i.log"
    fi
    say "started node $i (pid $pid, 127.0.0.1:$(port_of "$i"), log $LOCAL_DIR/node-$i.log)"
}

signal_node() { # NODE SIGNAL
    local i=$1 sig=$2 pid deadline
    if ! pid=$(pid_of "$i"); then
        say "node $i is not running"
        rm -f "$LOCAL_DIR/node-$i.pid"
        return 0
    fi
    kill -CONT "$pid" 2>/dev/null || true
    kill "-$sig" "$pid"
    deadline=$(($(date +%s) + 30))
    while kill -0 "$pid" 2>/dev/null; do
        if (($(date +%s) >= deadline)); then
            say "node $i (pid $pid) still runs 30 s after SIG$sig"
            return 1
        fi
        sleep 0.1
    done
    rm -f "$LOCAL_DIR/node-$i.pid"
    say "node $i (pid $pid) stopped by SIG$sig"
}

describe() { # extra args
    "$KQ" metadata-quorum --bootstrap-controller "$(bootstrap)" describe "$@"
}

wait_for_leader() {
    local deadline=$(($(date +%s) + WAIT_SECS)) out leader
    while :; do
        if out=$(describe --status 2>&1); then
            leader=$(awk '$1 == "LeaderId:" {print $2}' <<<"$out")
            if [[ $leader =~ ^[0-9]+$ ]]; then
                echo "$out"
                return 0
            fi
        fi
        if (($(date +%s) >= deadline)); then
            echo "$out" >&2
            return 1
        fi
        sleep 0.3
    done
}

# ---------------------------------------------------------------------------------------
# Broker agents: kq-broker-agent joins the local cluster in a later issue. It will get
# broker-N.properties / broker-N/ / broker-N.log / broker-N.pid next to the controllers
# (ports KQ_BROKER_BASE_PORT + ...), be started after the controllers have a leader in `up`,
# and be stopped before them in `down`. Nothing to do yet.
start_brokers() { :; }
stop_brokers() { :; }

# ---------------------------------------------------------------------------------------
# Commands

cmd_up() {
    local n=3
    while [[ $# -gt 0 ]]; do
        case $1 in
        --controllers) n=${2:-} && shift 2 ;;
        --controllers=*) n=${1#*=} && shift ;;
        -h | --help) usage 0 ;;
        *) die "up: unknown option '$1'" ;;
        esac
    done
    [[ $n == 3 || $n == 5 ]] || die "--controllers must be 3 or 5, got '$n'"
    if [[ -f $LOCAL_DIR/cluster.env ]]; then
        load_env
        if [[ $CONTROLLERS != "$n" ]]; then
            die "$LOCAL_DIR holds a $CONTROLLERS-controller cluster; run '$0 down --purge' first to create a $n-controller one"
        fi
    fi
    ensure_built
    mkdir -p "$LOCAL_DIR"
    if [[ -f $LOCAL_DIR/cluster.env ]]; then
        say "reusing the cluster $CLUSTER_ID in $LOCAL_DIR"
    else
        CONTROLLERS=$n
        BASE_PORT=${KQ_BASE_PORT:-19093}
        PORT_STEP=${KQ_PORT_STEP:-10000}
        [[ $BASE_PORT =~ ^[0-9]+$ && $PORT_STEP =~ ^[0-9]+$ ]] ||
            die "KQ_BASE_PORT and KQ_PORT_STEP must be numbers"
        (($(port_of "$n") <= 65535 && BASE_PORT >= 1)) ||
            die "ports $BASE_PORT + (N-1) * $PORT_STEP exceed 65535: lower KQ_BASE_PORT or KQ_PORT_STEP"
        CLUSTER_ID=$("$KQ" storage random-uuid) || die "kq storage random-uuid failed"
        write_configs
        local i
        for ((i = 1; i <= CONTROLLERS; i++)); do
            "$KQ" storage format --config "$LOCAL_DIR/node-$i.properties" --cluster-id "$CLUSTER_ID" ||
                die "formatting node $i failed"
        done
        printf 'CONTROLLERS=%s\nBASE_PORT=%s\nPORT_STEP=%s\nCLUSTER_ID=%s\n' \
            "$CONTROLLERS" "$BASE_PORT" "$PORT_STEP" "$CLUSTER_ID" >"$LOCAL_DIR/cluster.env"
        say "formatted $CONTROLLERS controllers with cluster id $CLUSTER_ID"
    fi
    local i
    for ((i = 1; i <= CONTROLLERS; i++)); do
        start_node "$i"
    done
    say "waiting up to ${WAIT_SECS} s for a leader"
    if ! wait_for_leader; then
        cmd_pids
        die "no leader within ${WAIT_SECS} s; logs are in $LOCAL_DIR/node-*.log"
    fi
    start_brokers
    say "up: $CONTROLLERS controllers; try: $KQ metadata-quorum --bootstrap-controller $(bootstrap) describe --replication"
}

cmd_pids() {
    local i pid
    for ((i = 1; i <= CONTROLLERS; i++)); do
        if pid=$(pid_of "$i"); then
            local state
            state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo '?')
            if [[ $state == T ]]; then
                echo "node $i: pid $pid paused (SIGSTOP), 127.0.0.1:$(port_of "$i")"
            else
                echo "node $i: pid $pid alive, 127.0.0.1:$(port_of "$i")"
            fi
        else
            echo "node $i: not running"
        fi
    done
}

cmd_status() {
    load_env
    [[ -x $KQ ]] || die "$KQ is missing: run '$0 up' (it builds)"
    local rc=0
    describe --status || rc=$?
    cmd_pids
    return "$rc"
}

cmd_down() {
    local purge=0
    [[ ${1:-} == --purge ]] && purge=1
    [[ $# -le $purge ]] || die "down: unknown option '$1'"
    if [[ ! -f $LOCAL_DIR/cluster.env ]]; then
        say "no local cluster in $LOCAL_DIR"
        return 0
    fi
    load_env
    stop_brokers
    local i pids=()
    for ((i = 1; i <= CONTROLLERS; i++)); do
        if pid_of "$i" >/dev/null; then
            pids+=("$i")
        fi
    done
    for i in "${pids[@]}"; do
        signal_node "$i" TERM &
    done
    wait
    for i in "${pids[@]}"; do
        if pid_of "$i" >/dev/null; then
            say "node $i ignored SIGTERM, sending SIGKILL"
            signal_node "$i" KILL
        fi
    done
    if [[ $purge -eq 1 ]]; then
        rm -rf -- "$LOCAL_DIR"
        say "down: data in $LOCAL_DIR deleted"
    else
        say "down: data kept in $LOCAL_DIR ('$0 up' restarts it, 'down --purge' deletes it)"
    fi
}

main() {
    local cmd=${1:-}
    [[ $# -gt 0 ]] && shift
    case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status ;;
    stop | kill | start)
        [[ $# -eq 1 ]] || die "usage: $0 $cmd NODE"
        load_env
        check_node "$1"
        case $cmd in
        stop) signal_node "$1" TERM ;;
        kill) signal_node "$1" KILL ;;
        start)
            ensure_built
            start_node "$1"
            ;;
        esac
        ;;
    -h | --help | help) usage 0 ;;
    *) usage 1 >&2 ;;
    esac
}

main "$@"
