#!/usr/bin/env bash
# deploy/local/cluster.sh with broker agents, in a temporary KQ_LOCAL_DIR and private ports:
#   - `up` formats and starts 3 controllers (node ids 3001..3003) and 3 brokers (node ids
#     1..3, the seed articles' numbering), prints the quorum status, `kq cluster describe` and
#     the controllers' and brokers' bootstrap lists; all three brokers are registered and
#     unfenced and observe the metadata log;
#   - the replica manager: a topic with RF 3 makes one broker log "Became leader of ledger-0"
#     and the two others "Became follower of", and /metrics counts one replica on each;
#   - `status` lists every process by node id; `kill 3` (a bare number is a broker) +
#     `start 3` brings broker 3 back with a new broker epoch, unfenced; `shutdown broker-2` is a
#     controlled shutdown (fenced afterwards); `kill 3003` + `start controller-3` restarts a
#     controller;
#   - a node that does not exist (the old ids 101 and 1..5-as-controller included), or `up`
#     with other counts than the directory holds, is refused with a message naming the choices;
#   - `down --purge` stops every process it started and deletes the directory.
# usage: test_broker_local_cluster.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" broker_local_cluster 26100

[[ -x $KT_BIN/kq-broker-agent ]] || kt_fail "$KT_BIN/kq-broker-agent is missing (build the kq-broker-agent target)"
SCRIPT=$(cd "$(dirname "$0")/../.." && pwd)/deploy/local/cluster.sh

# Controllers on BASE+1, +3, +5 (metrics +1), brokers in a second claimed range.
CTL_BASE=$KT_BASE_PORT
FIRST_LOCK=${KT_PORT_LOCK:-}
if [[ -n ${KQ_TEST_BASE_PORT:-} ]]; then
    BROKER_BASE=$((CTL_BASE + 10))
else
    KT_PORT_LOCK="" # keep the first claim: cleanup() below releases it
    kt_claim_ports 26200
    BROKER_BASE=$KT_BASE_PORT
fi
export KQ_LOCAL_DIR=$KT_DIR/local KQ_BASE_PORT=$((CTL_BASE + 1)) KQ_PORT_STEP=2
export KQ_BROKER_BASE_PORT=$((BROKER_BASE + 1)) KQ_NO_BUILD=1 KQ_NO_INSTALL=1 KQ_WAIT_SECS=90
KQ_BUILD_DIR=$(dirname "$KT_BIN")
export KQ_BUILD_DIR
BOOT=127.0.0.1:$((CTL_BASE + 1)),127.0.0.1:$((CTL_BASE + 3)),127.0.0.1:$((CTL_BASE + 5))

# Whatever happens, stop what cluster.sh started (it knows the pids), then kqtest's cleanup.
# shellcheck disable=SC2317 # called by the EXIT trap
lc_cleanup() {
    local rc=$?
    set +e
    [[ -f $KQ_LOCAL_DIR/cluster.env ]] && "$SCRIPT" down >/dev/null 2>&1
    [[ -n $FIRST_LOCK ]] && rm -rf "$FIRST_LOCK"
    (exit "$rc") # kt_cleanup reads the status from $?
    kt_cleanup
}
trap lc_cleanup EXIT

lc_fail() {
    local f
    for f in "$KQ_LOCAL_DIR"/*.log; do
        [[ -s $f ]] || continue
        echo "---- tail of $f ----" >&2
        tail -n 15 "$f" >&2
    done
    kt_fail "$@"
}

# lc_run ARGS...: cluster.sh ARGS, output in LC_OUT, status in LC_RC.
lc_run() {
    LC_RC=0
    LC_OUT=$(timeout 300 "$SCRIPT" "$@" 2>&1) || LC_RC=$?
}

# lc_brokers: "id epoch fenced" rows of `kq cluster describe --json` in LC_ROWS.
lc_brokers() {
    local out
    out=$(timeout 30 "$KT_KQ" cluster --bootstrap-controller "$BOOT" describe --json 2>&1) || return 1
    # shellcheck disable=SC2001 # one object per line, then the fields
    LC_ROWS=$(sed 's/},{/}\n{/g' <<<"$out" |
        sed -n 's/.*"id":\([0-9]*\),"epoch":\([0-9-]*\),"fenced":\([a-z]*\).*/\1 \2 \3/p')
}
lc_col() { # ID COLUMN
    awk -v id="$1" -v c="$2" '$1 == id { print $c }' <<<"$LC_ROWS"
}


lc_run up
[[ $LC_RC -eq 0 ]] || { echo "$LC_OUT" >&2; lc_fail "cluster.sh up exited $LC_RC"; }
kt_log "cluster.sh up:"$'\n'"$LC_OUT"
kt_assert_contains "up prints the quorum status" "LeaderId:" "$LC_OUT"
leader=$(awk '$1 == "LeaderId:" { print $2 }' <<<"$LC_OUT")
[[ $leader =~ ^300[123]$ ]] || lc_fail "up: LeaderId '$leader' is not a controller node id 3001..3003"
for b in 1 2 3; do
    kt_assert_contains "up prints broker $b" "Broker: $b"$'\t' "$LC_OUT"
done
BROKER_LIST=127.0.0.1:$((BROKER_BASE + 1)),127.0.0.1:$((BROKER_BASE + 3)),127.0.0.1:$((BROKER_BASE + 5))
kt_assert_contains "up prints the brokers' bootstrap list" $'\n'"brokers: $BROKER_LIST"$'\n' "$LC_OUT"
kt_assert_contains "up prints the controllers' bootstrap list" $'\n'"controllers: $BOOT"$'\n' "$LC_OUT"
kt_assert_contains "up names the node ids" "3 controllers (node ids 3001..3003), 3 brokers (node ids 1..3)" "$LC_OUT"
for b in 1 2 3; do
    kt_assert_contains "broker-$b.properties" $'\n'"node.id=$b"$'\n' "$(cat "$KQ_LOCAL_DIR/broker-$b.properties")"
done
kt_assert_contains "node-3002.properties" $'\n'"node.id=3002"$'\n' "$(cat "$KQ_LOCAL_DIR/node-3002.properties")"
lc_brokers || lc_fail "kq cluster describe failed"
for b in 1 2 3; do
    kt_assert_eq "broker $b fenced after up" false "$(lc_col "$b" 3)"
done
kt_assert_eq "registered brokers" 3 "$(wc -l <<<"$LC_ROWS")"
kt_assert_eq "registered broker ids" "1 2 3" "$(awk '{ print $1 }' <<<"$LC_ROWS" | sort -n | xargs)"
out=$("$KT_KQ" metadata-quorum --bootstrap-controller "$BOOT" describe --status) ||
    lc_fail "describe --status failed"
kt_assert_contains "three voters" '{"id": 3003,' "$(grep '^CurrentVoters:' <<<"$out")"
kt_assert_contains "broker 1 observes the metadata log" '{"id": 1}' "$(grep '^CurrentObservers:' <<<"$out")"

# The replica manager: a topic with replication factor 3 gives every broker a replica; the
# leader logs "Became leader of", the others "Became follower of", and /metrics counts them.
out=$("$KT_KQ" topics --bootstrap-controller "$BOOT" --create --topic ledger --partitions 1 \
    --replication-factor 3 --config min.insync.replicas=2 2>&1) || lc_fail "kq topics --create: $out"
deadline=$(($(date +%s) + 60))
until [[ $(cat "$KQ_LOCAL_DIR"/broker-[123].log | grep -c 'msg="Became \(leader\|follower\) of ledger-0 at leader epoch 0') -eq 3 ]]; do
    (($(date +%s) < deadline)) || lc_fail "not every broker logged its role for ledger-0 within 60 s"
    sleep 0.3
done
kt_assert_eq "brokers that became leader of ledger-0" 1 \
    "$(cat "$KQ_LOCAL_DIR"/broker-[123].log | grep -c 'msg="Became leader of ledger-0 at leader epoch 0"')"
leaders=0
for b in 1 2 3; do
    deadline=$(($(date +%s) + 30))
    while :; do # the gauges follow the log line within a loop iteration
        m=$(kt_metrics $((BROKER_BASE + 1 + (b - 1) * 2 + 1)) || true)
        l=$(awk '$1 == "kq_broker_partitions{role=\"leader\"}" { print $2 }' <<<"$m")
        f=$(awk '$1 == "kq_broker_partitions{role=\"follower\"}" { print $2 }' <<<"$m")
        [[ $l =~ ^[0-9]+$ && $f =~ ^[0-9]+$ ]] && (((l + f) == 1)) && break
        (($(date +%s) < deadline)) || lc_fail "broker $b /metrics: leader='$l' follower='$f'"
        sleep 0.3
    done
    kt_assert_eq "broker $b hosts one replica of ledger" 1 "$((l + f))"
    leaders=$((leaders + l))
done
kt_assert_eq "leaders of ledger-0 in /metrics" 1 "$leaders"

lc_run status
kt_assert_eq "status exit" 0 "$LC_RC"
for b in 1 2 3; do
    kt_assert_contains "status lists broker $b" "broker $b: pid" "$LC_OUT"
done
kt_assert_contains "status lists controller 3002" "controller 3002: pid" "$LC_OUT"
kt_assert_contains "status prints the brokers' bootstrap list" "brokers: $BROKER_LIST" "$LC_OUT"

# kill -9 and restart a broker by its bare id, as in the seed ("stop broker 3"): a new
# registration (epoch) that gets unfenced.
old=$(lc_col 3 2)
lc_run kill 3
kt_assert_contains "kill 3" "broker 3 (pid" "$LC_OUT"
kt_assert_contains "kill 3" "stopped by SIGKILL" "$LC_OUT"
lc_run status
kt_assert_contains "status after kill" "broker 3: not running" "$LC_OUT"
kt_assert_contains "controllers untouched by kill 3" "controller 3003: pid" "$LC_OUT"
lc_run start 3
[[ $LC_RC -eq 0 ]] || { echo "$LC_OUT" >&2; lc_fail "cluster.sh start 3 exited $LC_RC"; }
kt_assert_contains "start 3" "broker 3 registered and unfenced" "$LC_OUT"
lc_brokers || lc_fail "kq cluster describe failed"
kt_assert_gt "broker 3 epoch after restart (was $old)" "$(lc_col 3 2)" "$old"
kt_assert_eq "broker 3 fenced after restart" false "$(lc_col 3 3)"

# Controlled shutdown: the broker exits by itself and the controller fences it.
lc_run shutdown broker-2
kt_assert_eq "shutdown broker-2 exit" 0 "$LC_RC"
kt_assert_contains "shutdown broker-2" "broker 2 (pid" "$LC_OUT"
kt_assert_contains "shutdown broker-2" "stopped by SIGTERM" "$LC_OUT"
kt_assert_contains "broker 2 log" "SHUTTING_DOWN" "$(cat "$KQ_LOCAL_DIR/broker-2.log")"
deadline=$(($(date +%s) + 60))
until lc_brokers && [[ $(lc_col 2 3) == true ]]; do
    (($(date +%s) < deadline)) || lc_fail "broker 2 not fenced 60 s after its controlled shutdown: $LC_ROWS"
    sleep 0.3
done
kt_log "ok: broker 2 fenced after its controlled shutdown"

# A controller by its node id, restarted by its index.
lc_run kill 3003
kt_assert_contains "kill 3003" "controller 3003 (pid" "$LC_OUT"
kt_assert_contains "kill 3003" "stopped by SIGKILL" "$LC_OUT"
lc_run start controller-3
kt_assert_eq "start controller-3 exit" 0 "$LC_RC"
kt_assert_contains "start controller-3" "started controller 3003" "$LC_OUT"

# Unknown nodes (the old numbering included) are refused with a message naming the valid
# choices, nothing is signalled.
for bad in 4 0 101 3004 controller-4 controller-3004 broker-3001 broker-4 x ""; do
    lc_run stop "$bad"
    kt_assert_eq "stop '$bad' exit" 1 "$LC_RC"
    kt_assert_contains "stop '$bad' message" "no node '$bad'" "$LC_OUT"
    kt_assert_contains "stop '$bad' names the choices" \
        "a broker (broker-1..broker-3, or just 1..3) or a controller (controller-1..controller-3, or its node id 3001..3003)" \
        "$LC_OUT"
done
# `up` on the existing directory with other counts is refused (the data would not match).
lc_run up --controllers 5
kt_assert_eq "up --controllers 5 on a 3-controller cluster: exit" 1 "$LC_RC"
kt_assert_contains "up --controllers 5 message" "holds a 3-controller cluster" "$LC_OUT"
lc_run up --brokers 2
kt_assert_eq "up --brokers 2 on a 3-broker cluster: exit" 1 "$LC_RC"
kt_assert_contains "up --brokers 2 message" "holds 3 brokers" "$LC_OUT"
lc_run up --brokers many
kt_assert_contains "up --brokers many message" "--brokers must be 0..100" "$LC_OUT"

lc_run status
for c in 3001 3002 3003; do
    kt_assert_contains "controller $c alive" "controller $c: pid" "$LC_OUT"
done
kt_assert_contains "broker 1 still alive" "broker 1: pid" "$LC_OUT"

# down --purge: every process gone, the directory deleted.
pids=$(cat "$KQ_LOCAL_DIR"/*.pid)
lc_run down --purge
kt_assert_eq "down --purge exit" 0 "$LC_RC"
for pid in $pids; do
    if kill -0 "$pid" 2>/dev/null; then
        lc_fail "pid $pid still runs after down --purge"
    fi
done
[[ ! -e $KQ_LOCAL_DIR ]] || lc_fail "$KQ_LOCAL_DIR still exists after down --purge"
kt_log "ok: down --purge stopped $(wc -w <<<"$pids") processes and deleted the directory"
kt_pass
