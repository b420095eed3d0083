#!/usr/bin/env bash
# deploy/local/cluster.sh: a local kq cluster on 127.0.0.1: a controller quorum and broker agents.
#
#   deploy/local/cluster.sh up [--controllers 3|5] [--brokers N] [--tls]   install, build,
#                                    format, start the controllers, wait for a leader, then
#                                    start N brokers (default 3, 0 allowed) and wait until they
#                                    are unfenced. --tls (a new cluster only): a private CA and
#                                    a certificate per node (CN=node-ID) and for an admin
#                                    (CN=admin) under tls/, every listener SSL with client
#                                    certificates required, the authorizer on with the admin
#                                    as its super user, and admin.properties for kq's
#                                    --command-config
#   deploy/local/cluster.sh status   describe --status, cluster describe, which processes live
#   deploy/local/cluster.sh stop NODE       SIGKILL: a crash, as the seeds' "stop broker 3"
#   deploy/local/cluster.sh kill NODE       the same (SIGKILL)
#   deploy/local/cluster.sh shutdown NODE   SIGTERM: controlled shutdown of a broker (leaderships
#                                    move away first, then exit 0) / graceful resignation of
#                                    a controller; waits for the exit
#   deploy/local/cluster.sh start NODE      restart a stopped node on its existing data
#   deploy/local/cluster.sh down [--purge]  stop everything (--purge also deletes the data)
#
# Node ids (node.id, unique across the cluster: a broker is a Raft observer with its id):
# broker B is node 1..N (as in the seed articles: "stop broker 3"), controller i (1..5) is
# node 3000+i (3001, 3002, ...). NODE is broker-B or a bare B for broker B, controller-i or
# its node id 300i for controller i: `cluster.sh stop 3` stops broker 3, `stop 3001` or
# `stop controller-1` the first controller. `up` and `status` print the bootstrap lists
# ("brokers: 127.0.0.1:...," for kq produce/consume --bootstrap-server, "controllers: ..."
# for --bootstrap-controller).
#
# Environment:
#   KQ_LOCAL_DIR   where configs, data, logs and pid files live (default: <repo>/.kq-local)
#   KQ_BASE_PORT   port of controller 1 (default 19093); controller i (node 3000+i) listens on
#                  KQ_BASE_PORT + (i-1) * KQ_PORT_STEP, its /metrics on that port + 1
#   KQ_PORT_STEP   default 10000 (19093, 29093, 39093, 49093, 59093)
#   KQ_BROKER_BASE_PORT  port of broker 1 (default KQ_BASE_PORT + 100); broker B listens on
#                  KQ_BROKER_BASE_PORT + (B-1) * 2, its /metrics on that port + 1
#   KQ_BUILD_DIR   build tree to use (default: <repo>/build/release, the "release" preset)
#   KQ_WAIT_SECS   how long `up` and `start` wait for a leader / unfenced brokers (default 30)
#   KQ_NO_INSTALL  set to 1 to never call apt-get
#   KQ_NO_BUILD    set to 1 to use the binaries in KQ_BUILD_DIR as they are (never rebuild)
#   KQ_CONTROLLER_EXTRA_CONFIG, KQ_BROKER_EXTRA_CONFIG  space-separated key=value settings
#                  added to every controller's / broker's properties when `up` writes them
#
# Layout under $KQ_LOCAL_DIR: cluster.env (counts, ports, id numbering, cluster id); files
# are named by node id: per controller (node id I = 3001, 3002, ...): node-I.properties,
# node-I/ (metadata.log.dir), node-I.log (stderr), node-I.pid; per broker B (1, 2, ...):
# broker-B.properties, broker-B/ (log.dirs), broker-B.log, broker-B.pid. A directory made by
# an older cluster.sh (controllers 1..5, brokers 101, 102, ...) keeps its numbering.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOCAL_DIR=${KQ_LOCAL_DIR:-$ROOT/.kq-local}
[[ $LOCAL_DIR == /* ]] || LOCAL_DIR=$PWD/$LOCAL_DIR
BUILD_DIR=${KQ_BUILD_DIR:-$ROOT/build/release}
BIN=$BUILD_DIR/bin
KQ=$BIN/kq
CTL=$BIN/kq-controller
BA=$BIN/kq-broker-agent
WAIT_SECS=${KQ_WAIT_SECS:-30}
PACKAGES=(cmake ninja-build gcc libc6-dev pkgconf libprotobuf-c-dev protobuf-c-compiler
    libnng-dev libmbedtls-dev liblmdb-dev libcmocka-dev openssl)

say() { printf 'cluster.sh: %s\n' "$*"; }
die() {
    printf 'cluster.sh: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '2,36p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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
    [[ -x $KQ && -x $CTL && -x $BA ]] || return 0
    local newer
    newer=$(find "$ROOT/CMakeLists.txt" "$ROOT/CMakePresets.json" "$ROOT/common" \
        "$ROOT/controller" "$ROOT/tools" "$ROOT/include" "$ROOT/proto" \
        \( -name '*.[ch]' -o -name '*.proto' -o -name CMakeLists.txt -o -name '*.json' \) \
        -newer "$CTL" -print -quit 2>/dev/null || true)
    [[ -n $newer ]] || newer=$(find "$ROOT/common" "$ROOT/tools" "$ROOT/include" "$ROOT/proto" \
        \( -name '*.[ch]' -o -name '*.proto' -o -name CMakeLists.txt \) \
        -newer "$KQ" -print -quit 2>/dev/null || true)
    [[ -n $newer ]] || newer=$(find "$ROOT/common" "$ROOT/broker-agent" "$ROOT/include" "$ROOT/proto" \
        \( -name '*.[ch]' -o -name '*.proto' -o -name CMakeLists.txt \) \
        -newer "$BA" -print -quit 2>/dev/null || true)
    [[ -n $newer ]]
}

ensure_built() {
    if [[ ${KQ_NO_BUILD:-0} == 1 ]]; then
        [[ -x $KQ && -x $CTL && -x $BA ]] || die "KQ_NO_BUILD=1 but $KQ, $CTL or $BA is missing"
        return 0
    fi
    if ! binaries_stale; then
        return 0
    fi
    ensure_packages
    say "building kq, kq-controller and kq-broker-agent in $BUILD_DIR"
    if [[ -z ${KQ_BUILD_DIR:-} ]]; then
        (cd "$ROOT" && cmake --preset release >/dev/null)
    elif [[ ! -f $BUILD_DIR/CMakeCache.txt ]]; then
        cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    fi
    if ! cmake --build "$BUILD_DIR" --target kq kq-controller kq-broker-agent; then
        if [[ -x $KQ && -x $CTL && -x $BA ]]; then
            say "warning: the rebuild failed; using the existing binaries in $BIN"
            return 0
        fi
        die "build failed"
    fi
    [[ -x $KQ && -x $CTL && -x $BA ]] || die "build produced no $KQ / $CTL / $BA"
    touch "$KQ" "$CTL" "$BA" # an up-to-date build must not look stale next time
}

# ---------------------------------------------------------------------------------------
# Cluster state

# Node ids: controller i (1..CONTROLLERS) is node CONTROLLER_ID_BASE + i, broker k
# (1..BROKERS) is node FIRST_BROKER_ID + k - 1. Both are saved in cluster.env.
NEW_CONTROLLER_ID_BASE=3000 # controllers 3001, 3002, ...
NEW_FIRST_BROKER_ID=1       # brokers 1, 2, ... (the seed articles' numbering)

load_env() {
    [[ -f $LOCAL_DIR/cluster.env ]] || die "no local cluster in $LOCAL_DIR (run: $0 up)"
    BROKERS=0 # a cluster.env written before brokers existed has none
    BROKER_BASE_PORT=0
    # A cluster.env without these was written by an older cluster.sh: controllers 1..5,
    # brokers 101, 102, ...; its formatted directories keep those ids.
    CONTROLLER_ID_BASE=0
    FIRST_BROKER_ID=101
    # shellcheck source=/dev/null
    source "$LOCAL_DIR/cluster.env"
    [[ $CONTROLLER_ID_BASE =~ ^[0-9]+$ && $FIRST_BROKER_ID =~ ^[0-9]+$ ]] ||
        die "$LOCAL_DIR/cluster.env: CONTROLLER_ID_BASE and FIRST_BROKER_ID must be numbers"
}

save_env() {
    printf '%s\n' "CONTROLLERS=$CONTROLLERS" "BASE_PORT=$BASE_PORT" "PORT_STEP=$PORT_STEP" \
        "CLUSTER_ID=$CLUSTER_ID" "BROKERS=$BROKERS" "BROKER_BASE_PORT=$BROKER_BASE_PORT" \
        "CONTROLLER_ID_BASE=$CONTROLLER_ID_BASE" "FIRST_BROKER_ID=$FIRST_BROKER_ID" \
        "TLS=$TLS" >"$LOCAL_DIR/cluster.env"
}

# ---- TLS (up --tls) ----
TLS=0
TLS_DIR=$LOCAL_DIR/tls
ADMIN_CONFIG=$LOCAL_DIR/admin.properties

# kq's connection options: --command-config admin.properties on a TLS cluster.
kq_client_args() {
    ((TLS)) && printf '%s\n' --command-config "$ADMIN_CONFIG"
    return 0
}

# make_certs NODE_ID...: the CA, the admin's keystore and one per node (kept when present).
make_certs() {
    local names=(admin) id
    for id in "$@"; do
        names+=("node-$id")
    done
    "$ROOT/deploy/tls/make-certs.sh" "$TLS_DIR" "${names[@]}" || die "making certificates failed"
    [[ -f $ADMIN_CONFIG ]] || printf '%s\n' "# kq client properties for the admin (CN=admin)" \
        "security.protocol=SSL" "ssl.keystore.type=PEM" "ssl.keystore.location=$TLS_DIR/admin.pem" \
        "ssl.truststore.type=PEM" "ssl.truststore.location=$TLS_DIR/ca.pem" >"$ADMIN_CONFIG"
}

# tls_config NODE_ID: the ssl.* and authorizer lines of a node's properties.
tls_config() {
    printf '%s\n' "# TLS: every connection authenticated by certificate (docs/security.md)" \
        "ssl.keystore.type=PEM" "ssl.keystore.location=$TLS_DIR/node-$1.pem" \
        "ssl.truststore.type=PEM" "ssl.truststore.location=$TLS_DIR/ca.pem" \
        "ssl.client.auth=required" \
        "# the authorizer: only the admin may administer, produce and consume" \
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" \
        "super.users=User:CN=admin"
}

ctl_id() { # INDEX (1..CONTROLLERS) -> node id
    echo $((CONTROLLER_ID_BASE + $1))
}

last_broker_id() {
    echo $((FIRST_BROKER_ID + BROKERS - 1))
}

port_of() { # INDEX (controller 1..CONTROLLERS)
    echo $((BASE_PORT + ($1 - 1) * PORT_STEP))
}

broker_port_of() { # BROKER ID (FIRST_BROKER_ID..)
    echo $((BROKER_BASE_PORT + ($1 - FIRST_BROKER_ID) * 2))
}

# A node's name is the prefix of its files, by node id: node-I (the controller with node id
# I) or broker-B (broker B).
name_port() { # NAME
    case $1 in
    node-*) port_of $((${1#node-} - CONTROLLER_ID_BASE)) ;;
    broker-*) broker_port_of "${1#broker-}" ;;
    esac
}

name_label() { # NAME -> "controller I" / "broker B" (node ids)
    case $1 in
    node-*) echo "controller ${1#node-}" ;;
    broker-*) echo "broker ${1#broker-}" ;;
    esac
}

controller_names() {
    local i
    for ((i = 1; i <= CONTROLLERS; i++)); do
        echo "node-$(ctl_id "$i")"
    done
}

broker_names() {
    local b
    for ((b = FIRST_BROKER_ID; b < FIRST_BROKER_ID + BROKERS; b++)); do
        echo "broker-$b"
    done
}

bootstrap() {
    local i s=""
    for ((i = 1; i <= CONTROLLERS; i++)); do
        s+="${s:+,}127.0.0.1:$(port_of "$i")"
    done
    echo "$s"
}

# broker_bootstrap: the brokers' listeners, for kq produce/consume --bootstrap-server.
broker_bootstrap() {
    local b s=""
    for ((b = FIRST_BROKER_ID; b < FIRST_BROKER_ID + BROKERS; b++)); do
        s+="${s:+,}127.0.0.1:$(broker_port_of "$b")"
    done
    echo "$s"
}

# print_bootstrap: the two lists a user passes to kq.
print_bootstrap() {
    echo "controllers: $(bootstrap)"
    if ((BROKERS > 0)); then
        echo "brokers: $(broker_bootstrap)"
    else
        echo "brokers: none (up --brokers N adds some)"
    fi
    ((TLS)) && echo "command-config: $ADMIN_CONFIG"
    return 0
}

voters() {
    local i v=""
    for ((i = 1; i <= CONTROLLERS; i++)); do
        v+="${v:+,}$(ctl_id "$i")@127.0.0.1:$(port_of "$i")"
    done
    echo "$v"
}

pid_of() { # NAME: prints the pid if the process runs
    local f=$LOCAL_DIR/$1.pid pid
    [[ -f $f ]] || return 1
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # A recycled pid belongs to some other program: check the command line names our config.
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "/$1.properties" || return 1
    echo "$pid"
}

# valid_nodes: the NODE arguments this cluster accepts, for error messages.
valid_nodes() {
    local c
    c="a controller (controller-1..controller-$CONTROLLERS, or its node id $(ctl_id 1)..$(ctl_id "$CONTROLLERS"))"
    if ((BROKERS > 0)); then
        echo "a broker (broker-$FIRST_BROKER_ID..broker-$(last_broker_id), or just $FIRST_BROKER_ID..$(last_broker_id)) or $c"
    else
        echo "$c; this cluster has no brokers"
    fi
}

# node_name ARG -> NAME: broker-B or B (a broker's node id) is broker B; controller-i (i in
# 1..CONTROLLERS) or a controller's node id (bare or as controller-I) is that controller.
node_name() {
    local a=$1 id
    case $a in
    controller-*) id=${a#controller-} ;;
    broker-*) id=${a#broker-} ;;
    *) id=$a ;;
    esac
    [[ $id =~ ^[0-9]{1,9}$ ]] || die "no node '$a': NODE must be $(valid_nodes)"
    id=$((10#$id))
    if [[ $a == controller-* ]] && ((id >= 1 && id <= CONTROLLERS)); then
        echo "node-$(ctl_id "$id")"
    elif [[ $a != broker-* ]] && ((id > CONTROLLER_ID_BASE && id <= CONTROLLER_ID_BASE + CONTROLLERS)); then
        echo "node-$id"
    elif [[ $a != controller-* ]] && ((id >= FIRST_BROKER_ID && id <= $(last_broker_id))); then
        echo "broker-$id"
    else
        die "no node '$a': NODE must be $(valid_nodes)"
    fi
}

write_configs() {
    local i id p v
    v=$(voters)
    for ((i = 1; i <= CONTROLLERS; i++)); do
        p=$(port_of "$i")
        id=$(ctl_id "$i")
        cat >"$LOCAL_DIR/node-$id.properties" <<EOT
# kq controller $i (node $id) of a local $CONTROLLERS-controller quorum (written by
# deploy/local/cluster.sh). Every key is described in docs/configuration.md.
process.roles=controller
node.id=$id
controller.quorum.voters=$v
listeners=CONTROLLER://127.0.0.1:$p
advertised.listeners=CONTROLLER://127.0.0.1:$p
metadata.log.dir=$LOCAL_DIR/node-$id
# Prometheus /metrics, /healthz, /readyz (docs/metrics.md)
metrics.listener=127.0.0.1:$((p + 1))
log.level=info
EOT
        if ((TLS)); then
            {
                echo "listener.security.protocol.map=CONTROLLER:SSL"
                tls_config "$id"
            } >>"$LOCAL_DIR/node-$id.properties"
        fi
        if [[ -n ${KQ_CONTROLLER_EXTRA_CONFIG:-} ]]; then
            # shellcheck disable=SC2086 # one setting per word
            printf '%s\n' "# from KQ_CONTROLLER_EXTRA_CONFIG" ${KQ_CONTROLLER_EXTRA_CONFIG} >>"$LOCAL_DIR/node-$id.properties"
        fi
    done
}

write_broker_config() { # BROKER ID
    local b=$1 p listener=PLAINTEXT
    p=$(broker_port_of "$b")
    ((TLS)) && listener=SSL
    cat >"$LOCAL_DIR/broker-$b.properties" <<EOT
# kq broker $b of a local cluster (written by deploy/local/cluster.sh); keys: docs/broker.md
process.roles=broker
node.id=$b
controller.quorum.voters=$(voters)
listeners=$listener://127.0.0.1:$p
log.dirs=$LOCAL_DIR/broker-$b
# Shorter than signal_node's 30 s wait, so \`down\` never needs SIGKILL.
broker.controlled.shutdown.timeout.ms=20000
# Prometheus /metrics, /healthz, /readyz
metrics.listener=127.0.0.1:$((p + 1))
log.level=info
EOT
    if ((TLS)); then
        {
            echo "listener.security.protocol.map=CONTROLLER:SSL,SSL:SSL"
            echo "controller.listener.names=CONTROLLER"
            tls_config "$b"
        } >>"$LOCAL_DIR/broker-$b.properties"
    fi
    if [[ -n ${KQ_BROKER_EXTRA_CONFIG:-} ]]; then
        # shellcheck disable=SC2086 # one setting per word
        printf '%s\n' "# from KQ_BROKER_EXTRA_CONFIG" ${KQ_BROKER_EXTRA_CONFIG} >>"$LOCAL_DIR/broker-$b.properties"
    fi
}

# format_brokers FROM TO: write the configs and format log.dirs of brokers FROM..TO.
format_brokers() {
    local b
    ((TLS)) && make_certs $(seq "$1" "$2")
    for ((b = $1; b <= $2; b++)); do
        write_broker_config "$b"
        "$KQ" storage format --config "$LOCAL_DIR/broker-$b.properties" --cluster-id "$CLUSTER_ID" ||
            die "formatting broker $b failed"
    done
}

check_ports() { # every controller and broker port (and +1) distinct and <= 65535
    local -A seen=()
    local n p q
    while read -r n; do
        p=$(name_port "$n")
        for q in "$p" $((p + 1)); do
            ((q >= 1 && q <= 65535)) || die "port $q of $(name_label "$n") is out of range: change KQ_BASE_PORT / KQ_PORT_STEP / KQ_BROKER_BASE_PORT"
            [[ -z ${seen[$q]:-} ]] || die "port $q is used by both ${seen[$q]} and $(name_label "$n"): change KQ_PORT_STEP / KQ_BROKER_BASE_PORT"
            seen[$q]=$(name_label "$n")
        done
    done < <(controller_names && broker_names)
}

start_node() { # NAME
    local n=$1 pid port bin label
    port=$(name_port "$n")
    label=$(name_label "$n")
    bin=$CTL
    [[ $n == broker-* ]] && bin=$BA
    if pid=$(pid_of "$n"); then
        say "$label already running (pid $pid)"
        return 0
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port for $label is in use by another process (set KQ_BASE_PORT / KQ_BROKER_BASE_PORT)"
    fi
    echo "---- start $(date -Is) ----" >>"$LOCAL_DIR/$n.log"
    # setsid: the daemon gets its own session, so a Ctrl-C in this terminal does not reach it.
    setsid "$bin" --config "$LOCAL_DIR/$n.properties" </dev/null >>"$LOCAL_DIR/$n.log" 2>&1 &
    pid=$!
    echo "$pid" >"$LOCAL_DIR/$n.pid"
    # A config or storage problem makes the daemon exit at once: report it here.
    sleep 0.3
    if ! kill -0 "$pid" 2>/dev/null; then
        local rc=0
        wait "$pid" || rc=$?
        rm -f "$LOCAL_DIR/$n.pid"
        tail -n 5 "$LOCAL_DIR/$n.log" >&2
        die "$label exited at start (status $rc); see $LOCAL_DIR/$n.log"
    fi
    say "started $label (pid $pid, 127.0.0.1:$port, log $LOCAL_DIR/$n.log)"
}

signal_node() { # NAME SIGNAL
    local n=$1 sig=$2 pid deadline label
    label=$(name_label "$n")
    if ! pid=$(pid_of "$n"); then
        say "$label is not running"
        rm -f "$LOCAL_DIR/$n.pid"
        return 0
    fi
    kill -CONT "$pid" 2>/dev/null || true
    kill "-$sig" "$pid"
    deadline=$(($(date +%s) + 30))
    while kill -0 "$pid" 2>/dev/null; do
        if (($(date +%s) >= deadline)); then
            say "$label (pid $pid) still runs 30 s after SIG$sig"
            return 1
        fi
        sleep 0.1
    done
    rm -f "$LOCAL_DIR/$n.pid"
    say "$label (pid $pid) stopped by SIG$sig"
}

# stop_all NAME...: SIGTERM in parallel, then SIGKILL for those still running.
stop_all() {
    local n
    for n in "$@"; do
        signal_node "$n" TERM &
    done
    wait
    for n in "$@"; do
        if pid_of "$n" >/dev/null; then
            say "$(name_label "$n") ignored SIGTERM, sending SIGKILL"
            signal_node "$n" KILL
        fi
    done
}

# kq retries while no controller is active, up to --timeout-ms: 5 s here, so that `status` of a
# stopped cluster answers promptly and the wait loops below keep their own deadlines.
describe() { # extra args
    "$KQ" metadata-quorum --timeout-ms 5000 --bootstrap-controller "$(bootstrap)" \
        $(kq_client_args) describe "$@"
}

cluster_describe() { # extra args
    "$KQ" cluster --timeout-ms 5000 --bootstrap-controller "$(bootstrap)" $(kq_client_args) \
        describe "$@"
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

# broker_epochs: "id epoch fenced" for every broker `kq cluster describe --json` shows.
broker_epochs() {
    local out
    out=$(cluster_describe --json 2>/dev/null) || return 1
    # shellcheck disable=SC2001 # one object per line, then the fields
    sed 's/},{/}\n{/g' <<<"$out" |
        sed -n 's/.*"id":\([0-9]*\),"epoch":\([0-9-]*\),"fenced":\([a-z]*\).*/\1 \2 \3/p'
}

# wait_for_brokers ID:OLD_EPOCH...: wait until each broker is registered and unfenced with an
# epoch other than OLD_EPOCH (the registration of an earlier run, "" for none): a restarted
# broker registers anew, and its killed predecessor's lease may still look unfenced.
wait_for_brokers() {
    local deadline=$(($(date +%s) + WAIT_SECS)) rows p missing
    while :; do
        missing=()
        rows=$(broker_epochs || true)
        for p in "$@"; do
            awk -v id="${p%%:*}" -v old="${p#*:}" \
                '$1 == id && $2 != old && $3 == "false" { found = 1 } END { exit !found }' \
                <<<"$rows" || missing+=("${p%%:*}")
        done
        [[ ${#missing[@]} -eq 0 ]] && return 0
        if (($(date +%s) >= deadline)); then
            say "brokers not registered and unfenced after ${WAIT_SECS} s: ${missing[*]}" >&2
            return 1
        fi
        sleep 0.3
    done
}

# epoch_args ID...: "ID:EPOCH" pairs with each broker's current registration epoch.
epoch_args() {
    local rows b
    rows=$(broker_epochs || true)
    for b in "$@"; do
        echo "$b:$(awk -v id="$b" '$1 == id { print $2 }' <<<"$rows")"
    done
}

start_brokers() {
    local n rows pairs=()
    ((BROKERS > 0)) || return 0
    rows=$(broker_epochs || true)
    while read -r n; do
        if pid_of "$n" >/dev/null; then
            pairs+=("${n#broker-}:") # running: its registration stands, any epoch will do
        else
            # (re)started: wait for a registration newer than the one it may have left
            pairs+=("${n#broker-}:$(awk -v id="${n#broker-}" '$1 == id { print $2 }' <<<"$rows")")
        fi
    done < <(broker_names)
    while read -r n; do
        start_node "$n"
    done < <(broker_names)
    say "waiting up to ${WAIT_SECS} s for brokers $FIRST_BROKER_ID..$(last_broker_id) to register and be unfenced"
    if ! wait_for_brokers "${pairs[@]}"; then
        cmd_pids
        die "brokers not unfenced within ${WAIT_SECS} s; logs are in $LOCAL_DIR/broker-*.log"
    fi
    cluster_describe || true
}

# ---------------------------------------------------------------------------------------
# Commands

cmd_up() {
    local n=3 nb="" c tls=0
    while [[ $# -gt 0 ]]; do
        case $1 in
        --tls) tls=1 && shift ;;
        --controllers) n=${2:-} && shift 2 ;;
        --controllers=*) n=${1#*=} && shift ;;
        --brokers) nb=${2:-} && shift 2 ;;
        --brokers=*) nb=${1#*=} && shift ;;
        -h | --help) usage 0 ;;
        *) die "up: unknown option '$1'" ;;
        esac
    done
    [[ $n == 3 || $n == 5 ]] || die "--controllers must be 3 or 5, got '$n'"
    if [[ -n $nb ]]; then
        if ! [[ $nb =~ ^[0-9]+$ ]] || ((10#$nb > 100)); then
            die "--brokers must be 0..100, got '$nb'"
        fi
        nb=$((10#$nb))
    fi
    if [[ -f $LOCAL_DIR/cluster.env ]]; then
        load_env
        if [[ $CONTROLLERS != "$n" ]]; then
            die "$LOCAL_DIR holds a $CONTROLLERS-controller cluster; run '$0 down --purge' first to create a $n-controller one"
        fi
        if [[ -n $nb ]] && ((nb < BROKERS)); then
            die "$LOCAL_DIR holds $BROKERS brokers; run '$0 down --purge' first to create a cluster with $nb"
        fi
        if ((tls && !TLS)); then
            die "$LOCAL_DIR holds a plaintext cluster; run '$0 down --purge' first to create one with --tls"
        fi
    fi
    ensure_built
    mkdir -p "$LOCAL_DIR"
    if [[ -f $LOCAL_DIR/cluster.env ]]; then
        say "reusing the cluster $CLUSTER_ID in $LOCAL_DIR"
        if ((CONTROLLER_ID_BASE != NEW_CONTROLLER_ID_BASE || FIRST_BROKER_ID != NEW_FIRST_BROKER_ID)); then
            say "note: this older cluster keeps its node ids (controllers $(ctl_id 1)..$(ctl_id "$CONTROLLERS"), brokers from $FIRST_BROKER_ID); '$0 down --purge' and 'up' again for brokers $NEW_FIRST_BROKER_ID..N and controllers $((NEW_CONTROLLER_ID_BASE + 1)).."
        fi
        if [[ -n $nb ]] && ((nb > BROKERS)); then
            # Brokers added to an existing cluster (or to one from before brokers existed).
            local old=$BROKERS
            BROKERS=$nb
            ((BROKER_BASE_PORT > 0)) || BROKER_BASE_PORT=${KQ_BROKER_BASE_PORT:-$((BASE_PORT + 100))}
            check_ports
            format_brokers $((FIRST_BROKER_ID + old)) "$(last_broker_id)"
            save_env
            say "formatted brokers $((FIRST_BROKER_ID + old))..$(last_broker_id)"
        fi
    else
        CONTROLLERS=$n
        BROKERS=${nb:-3}
        BASE_PORT=${KQ_BASE_PORT:-19093}
        PORT_STEP=${KQ_PORT_STEP:-10000}
        BROKER_BASE_PORT=${KQ_BROKER_BASE_PORT:-$((BASE_PORT + 100))}
        CONTROLLER_ID_BASE=$NEW_CONTROLLER_ID_BASE
        FIRST_BROKER_ID=$NEW_FIRST_BROKER_ID
        TLS=$tls
        [[ $BASE_PORT =~ ^[0-9]+$ && $PORT_STEP =~ ^[0-9]+$ && $BROKER_BASE_PORT =~ ^[0-9]+$ ]] ||
            die "KQ_BASE_PORT, KQ_PORT_STEP and KQ_BROKER_BASE_PORT must be numbers"
        check_ports
        CLUSTER_ID=$("$KQ" storage random-uuid) || die "kq storage random-uuid failed"
        ((TLS)) && make_certs $(seq "$((CONTROLLER_ID_BASE + 1))" "$((CONTROLLER_ID_BASE + CONTROLLERS))")
        write_configs
        while read -r c; do
            "$KQ" storage format --config "$LOCAL_DIR/$c.properties" --cluster-id "$CLUSTER_ID" ||
                die "formatting $(name_label "$c") failed"
        done < <(controller_names)
        format_brokers "$FIRST_BROKER_ID" "$(last_broker_id)"
        save_env
        say "formatted $CONTROLLERS controllers and $BROKERS brokers with cluster id $CLUSTER_ID"
    fi
    while read -r c; do
        start_node "$c"
    done < <(controller_names)
    say "waiting up to ${WAIT_SECS} s for a leader"
    if ! wait_for_leader; then
        cmd_pids
        die "no leader within ${WAIT_SECS} s; logs are in $LOCAL_DIR/node-*.log"
    fi
    start_brokers
    print_bootstrap
    say "up: $CONTROLLERS controllers (node ids $(ctl_id 1)..$(ctl_id "$CONTROLLERS")), $(broker_summary); try: $KQ metadata-quorum --bootstrap-controller $(bootstrap) $(kq_client_args | tr '\n' ' ')describe --replication"
    if ((TLS)); then
        say "TLS: every listener is SSL and wants a client certificate; give kq --command-config $ADMIN_CONFIG"
    fi
}

broker_summary() {
    if ((BROKERS > 0)); then
        echo "$BROKERS brokers (node ids $FIRST_BROKER_ID..$(last_broker_id))"
    else
        echo "no brokers"
    fi
}

cmd_pids() {
    local n pid state
    while read -r n; do
        if pid=$(pid_of "$n"); then
            state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo '?')
            if [[ $state == T ]]; then
                echo "$(name_label "$n"): pid $pid paused (SIGSTOP), 127.0.0.1:$(name_port "$n")"
            else
                echo "$(name_label "$n"): pid $pid alive, 127.0.0.1:$(name_port "$n")"
            fi
        else
            echo "$(name_label "$n"): not running"
        fi
    done < <(controller_names && broker_names)
}

cmd_status() {
    load_env
    [[ -x $KQ ]] || die "$KQ is missing: run '$0 up' (it builds)"
    local rc=0
    describe --status || rc=$?
    if ((BROKERS > 0)); then
        cluster_describe || rc=$?
    fi
    cmd_pids
    print_bootstrap
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
    local n running=()
    # Brokers first (a controlled shutdown needs the controllers), then the controllers.
    while read -r n; do
        pid_of "$n" >/dev/null && running+=("$n")
    done < <(broker_names)
    [[ ${#running[@]} -eq 0 ]] || stop_all "${running[@]}"
    running=()
    while read -r n; do
        pid_of "$n" >/dev/null && running+=("$n")
    done < <(controller_names)
    [[ ${#running[@]} -eq 0 ]] || stop_all "${running[@]}"
    if [[ $purge -eq 1 ]]; then
        rm -rf -- "$LOCAL_DIR"
        say "down: data in $LOCAL_DIR deleted"
    else
        say "down: data kept in $LOCAL_DIR ('$0 up' restarts it, 'down --purge' deletes it)"
    fi
}

main() {
    local cmd=${1:-} n
    [[ $# -gt 0 ]] && shift
    case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status ;;
    stop | shutdown | kill | start)
        [[ $# -eq 1 ]] || die "usage: $0 $cmd NODE"
        load_env
        n=$(node_name "$1")
        case $cmd in
        shutdown) signal_node "$n" TERM ;;
        stop | kill) signal_node "$n" KILL ;;
        start)
            ensure_built
            if [[ $n == broker-* ]] && ! pid_of "$n" >/dev/null; then
                local pair
                pair=$(epoch_args "${n#broker-}")
                start_node "$n"
                wait_for_brokers "$pair" || die "broker ${n#broker-} not unfenced within ${WAIT_SECS} s; see $LOCAL_DIR/$n.log"
                say "broker ${n#broker-} registered and unfenced"
            else
                start_node "$n"
            fi
            ;;
        esac
        ;;
    -h | --help | help) usage 0 ;;
    *) usage 1 >&2 ;;
    esac
}

main "$@"
