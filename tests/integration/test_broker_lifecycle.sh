#!/usr/bin/env bash
# kq-broker-agent lifecycle against 3 real controllers, with 3 real broker agents (ids 4, 5, 6):
#   - all register and are unfenced (kq cluster describe --json), and are listed as observers
#     of the metadata quorum (kq metadata-quorum describe --status, CurrentObservers);
#   - kill -9 of broker 6: it is fenced once its session expires (broker.session.timeout.ms
#     9000; the time is printed); restarted (new incarnation), it is unfenced again;
#   - SIGTERM of broker 5: controlled shutdown, exit status 0, fenced afterwards;
#   - start-up errors exit 2 with a message: a directory formatted with another cluster id, a
#     directory of another node id, an unformatted directory.
# usage: test_broker_lifecycle.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" broker_lifecycle 25700

BA=$KT_BIN/kq-broker-agent
[[ -x $BA ]] || kt_fail "$BA is missing (build the kq-broker-agent target)"

# Broker b (4..6) listens on port BASE + b, keeps its data in broker-b/ and logs to
# broker-b.log; its pid is KT_PID[b], so kqtest's cleanup kills it.
bt_fail() {
    local b
    for b in 4 5 6 7; do
        if [[ -s $KT_DIR/broker-$b.log ]]; then
            echo "---- tail of broker-$b.log ----" >&2
            tail -n 25 "$KT_DIR/broker-$b.log" >&2
        fi
    done
    kt_fail "$@"
}

bt_config() { # ID [key=value...]
    local b=$1
    shift
    {
        echo "process.roles=broker"
        echo "node.id=$b"
        echo "controller.quorum.voters=$(kt_voters 3)"
        echo "listeners=PLAINTEXT://127.0.0.1:$(kt_port "$b")"
        echo "log.dirs=$KT_DIR/broker-$b"
        echo "broker.rack=rack-$b"
        local kv
        for kv in "$@"; do
            echo "$kv"
        done
    } >"$KT_DIR/broker-$b.properties"
}

bt_format() { # ID [CLUSTER_ID]
    local out
    out=$("$KT_KQ" storage format --config "$KT_DIR/broker-$1.properties" \
        --cluster-id "${2:-$KT_CLUSTER_ID}" 2>&1) || bt_fail "kq storage format of broker $1: $out"
}

bt_start() { # ID
    local b=$1
    echo "---- start $(date +%T.%3N) ----" >>"$KT_DIR/broker-$b.log"
    "$BA" --config "$KT_DIR/broker-$b.properties" >>"$KT_DIR/broker-$b.log" 2>&1 &
    KT_PID[b]=$!
    kt_log "started broker $b (pid ${KT_PID[$b]})"
}

# bt_brokers: `kq cluster describe --json` as lines "id epoch fenced" in BT_ROWS.
BT_ROWS=""
bt_brokers() {
    local out
    out=$(timeout 30 "$KT_KQ" cluster --bootstrap-controller "$(kt_bootstrap 1 2 3)" \
        describe --json 2>&1) || return 1
    BT_ROWS=$(sed 's/},{/}\n{/g' <<<"$out" |
        sed -n 's/.*"id":\([0-9]*\),"epoch":\([0-9-]*\),"fenced":\([a-z]*\).*/\1 \2 \3/p')
}

bt_fenced() { # ID -> true|false|"" (not registered)
    awk -v id="$1" '$1 == id { print $3 }' <<<"$BT_ROWS"
}

bt_epoch() { # ID
    awk -v id="$1" '$1 == id { print $2 }' <<<"$BT_ROWS"
}

# bt_wait_fenced ID true|false TIMEOUT_S: sets BT_WAITED_MS.
BT_WAITED_MS=0
bt_wait_fenced() {
    local start deadline last="nothing"
    start=$(kt_now_ms)
    deadline=$((start + $3 * 1000))
    while (($(kt_now_ms) < deadline)); do
        if bt_brokers; then
            last="fenced=$(bt_fenced "$1") epoch=$(bt_epoch "$1")"
            if [[ $(bt_fenced "$1") == "$2" ]]; then
                BT_WAITED_MS=$(($(kt_now_ms) - start))
                return 0
            fi
        fi
        sleep 0.1
    done
    bt_fail "broker $1: expected fenced=$2 within $3 s; last seen: $last"
}

# bt_expect_exit ID WHAT NEEDLE: the broker must exit with status 2 and say NEEDLE.
bt_expect_exit() {
    local b=$1
    kt_wait_exit "$b" 60 || bt_fail "$2: broker $b still runs after 60 s"
    kt_assert_eq "$2: exit status" 2 "$KT_RC"
    kt_assert_contains "$2: message" "$3" "$(cat "$KT_DIR/broker-$b.log")"
}

kt_cluster 3
kt_start_all
kt_wait_for_leader 60

for b in 4 5 6; do
    bt_config "$b"
    bt_format "$b"
    bt_start "$b"
done
for b in 4 5 6; do
    bt_wait_fenced "$b" false 60
done
kt_log "all three brokers registered and unfenced: $(tr '\n' ';' <<<"$BT_ROWS")"

# Observers of the metadata quorum.
deadline=$(($(date +%s) + 30))
while :; do
    kt_describe 1 2 3 || true
    obs=$(kt_field CurrentObservers <<<"$KT_OUT")
    [[ $obs == *'"id": 4'* && $obs == *'"id": 5'* && $obs == *'"id": 6'* ]] && break
    (($(date +%s) < deadline)) || bt_fail "brokers 4, 5, 6 not all in CurrentObservers: $obs"
    sleep 0.3
done
kt_log "ok: CurrentObservers = $obs"
grep -q 'msg="registered with the controller"' "$KT_DIR/broker-4.log" ||
    bt_fail "broker 4 did not log its registration"

# kill -9 broker 6: fenced when its session expires, not before its last heartbeat's lease.
bt_brokers
epoch6=$(bt_epoch 6)
kt_kill 6
bt_wait_fenced 6 true 40
kt_log "broker 6 fenced ${BT_WAITED_MS} ms after kill -9 (session timeout 9000 ms, heartbeats every 2000 ms)"
kt_assert_ge "ms from kill -9 to fenced" "$BT_WAITED_MS" 5000
bt_start 6
bt_wait_fenced 6 false 60
bt_brokers
kt_assert_gt "broker 6 epoch after restart (was $epoch6)" "$(bt_epoch 6)" "$epoch6"
kt_assert_eq "broker 4 still unfenced" false "$(bt_fenced 4)"

# SIGTERM broker 5: controlled shutdown, exit 0.
kill -TERM "${KT_PID[5]}"
kt_wait_exit 5 60 || bt_fail "broker 5 still runs 60 s after SIGTERM"
kt_assert_eq "broker 5 exit status after SIGTERM" 0 "$KT_RC"
kt_assert_contains "broker 5 log" 'reason="controlled shutdown complete"' \
    "$(cat "$KT_DIR/broker-5.log")"
bt_wait_fenced 5 true 30

# Start-up errors.
other=$("$KT_KQ" storage random-uuid)
bt_config 7
bt_format 7 "$other"
bt_start 7
bt_expect_exit 7 "wrong cluster id" "does not match"
# broker 5's directory (formatted for node 5) under node.id 7
bt_config 7 "log.dirs=$KT_DIR/broker-5"
bt_start 7
bt_expect_exit 7 "wrong node id" "does not match configured node.id"
bt_config 7 "log.dirs=$KT_DIR/never-formatted"
bt_start 7
bt_expect_exit 7 "unformatted directory" "kq storage format"
kt_pass
