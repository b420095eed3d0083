#!/usr/bin/env bash
# Killing the active controller, or losing the quorum for a while, never fences a broker that
# is alive (issue 8, item 6), on a local cluster (cluster.sh: 3 controllers, brokers 1, 2, 3):
#  A. kill -9 the active controller; the two live voters elect a leader within a few election
#     timeouts; 10 s after the first kill, kill -9 the new active controller; the last one is
#     alone (no quorum) for 35 s; both restart; 25 s of watching;
#  B. kill -9 two controllers together, 30 s without a quorum, restart both; 25 s of watching.
# Throughout: no controller logs "fencing broker: session expired", no broker logs "fenced by
# the controller", and every broker is unfenced at the end, still leading what it led.
# usage: test_data_controller_outage_fences_no_live_broker.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_controller_outage 27600

# active: the node id of the active controller (3001..3003) asked of the listed controllers.
active() { # [i...] (default 1 2 3)
    local i l ids=("$@") port
    [[ ${#ids[@]} -gt 0 ]] || ids=(1 2 3)
    for i in "${ids[@]}"; do
        port=$((KT_BASE_PORT + 2 * i - 1))
        l=$(timeout 10 "$KT_KQ" metadata-quorum --bootstrap-controller "127.0.0.1:$port" \
            describe --status 2>/dev/null | awk '$1 == "LeaderId:" { print $2 }') || true
        if [[ $l =~ ^300[1-3]$ ]]; then
            echo "$l"
            return 0
        fi
    done
    return 1
}
# wait_active TIMEOUT_S NOT_ID I...: a leader other than NOT_ID among controllers I...; prints it
wait_active() {
    local deadline=$(($(date +%s) + $1)) not=$2 l
    shift 2
    while :; do
        l=$(active "$@") && [[ $l != "$not" ]] && echo "$l" && return 0
        (($(date +%s) < deadline)) || kt_fail "no new active controller among $* within the wait"
        sleep 0.2
    done
}
fenced_events() { # count of fencing log lines so far, controllers and brokers
    cat "$KQ_LOCAL_DIR"/node-*.log "$KQ_LOCAL_DIR"/broker-*.log 2>/dev/null |
        grep -cE 'fencing broker: session expired|msg="fenced by the controller' || true
}
ctl_index() { echo $(($1 - 3000)); } # node id -> controller i
check_no_fencing() { # WHAT
    local n
    n=$(fenced_events)
    if [[ $n != 0 ]]; then
        grep -hE 'fencing broker: session expired|msg="fenced by the controller' \
            "$KQ_LOCAL_DIR"/node-*.log "$KQ_LOCAL_DIR"/broker-*.log >&2
        kt_fail "$1: a live broker was fenced ($n log lines above)"
    fi
    kt_log "ok: $1: no broker fenced"
}
watch_for() { # SECONDS WHAT: no fencing at any time during it
    local end=$(($(date +%s) + $1))
    while (($(date +%s) < end)); do
        [[ $(fenced_events) == 0 ]] || check_no_fencing "$2"
        sleep 1
    done
    check_no_fencing "$2"
}
all_unfenced() {
    kd_kq cluster describe --json || kt_fail "cluster describe: $KD_OUT"
    local n
    n=$(grep -o '"fenced":false' <<<"$KD_OUT" | wc -l)
    kt_assert_eq "unfenced brokers ($1)" 3 "$n"
}

kd_up
kd_create ledger 1:2:3 min.insync.replicas=2
kd_wait_line ledger 30 'Leader: 1.*Isr: 1,2,3'
kd_produce all 'before' || kt_fail "acks=all before the outage: $KD_OUT"
check_no_fencing "start"

echo "## A. kill the active controller, 10 s later the next one, 35 s alone, restart both"
first=$(wait_active 30 none 1 2 3)
kd_cluster kill "$first"
t0=$(kt_now_ms)
rest=()
for i in 1 2 3; do
    [[ $((3000 + i)) == "$first" ]] || rest+=("$i")
done
second=$(wait_active 30 "$first" "${rest[@]}")
took=$(($(kt_now_ms) - t0))
kt_log "controller $first killed; $second active $took ms later"
((took < 10000)) || kt_fail "two live voters took $took ms to elect a leader (want < 10 s)"
sleep $((10 - ($(kt_now_ms) - t0) / 1000 > 0 ? 10 - ($(kt_now_ms) - t0) / 1000 : 0))
kd_cluster kill "$second"
kt_log "controller $second killed; the last controller is alone for 35 s"
watch_for 35 "35 s with one controller of three"
kd_cluster start "$first"
kd_cluster start "$second"
t1=$(kt_now_ms)
wait_active 60 none 1 2 3 >/dev/null
kt_log "quorum back $(($(kt_now_ms) - t1)) ms after the restarts"
watch_for 25 "25 s after the quorum came back"
all_unfenced "after A"

echo "## B. two controllers killed together for 30 s"
lead=$(wait_active 30 none 1 2 3)
other=""
for i in 1 2 3; do
    [[ $((3000 + i)) == "$lead" ]] || { other=$((3000 + i)); break; }
done
kd_cluster kill "$lead"
kd_cluster kill "$other"
watch_for 30 "30 s without a quorum"
kd_cluster start "$lead"
kd_cluster start "$other"
wait_active 60 none 1 2 3 >/dev/null
watch_for 25 "25 s after the quorum came back (B)"
all_unfenced "after B"
kd_wait_line ledger 30 'Leader: 1.*Isr: [123],[123],[123][[:space:]]' # any order
kd_produce all 'after' || kt_fail "acks=all after the outages: $KD_OUT"
kd_consume
kt_assert_eq "records after the outages" "$(printf 'before\nafter')" "$KD_OUT"
kt_pass
