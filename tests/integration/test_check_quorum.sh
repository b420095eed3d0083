#!/usr/bin/env bash
# Check-quorum: with both followers paused (SIGSTOP), the leader stops reporting itself as
# leader (it resigns once a majority has not fetched for 1.5 x fetch timeout, 3 s by default;
# the time is printed). After SIGCONT a leader is elected again and commits.
# usage: test_check_quorum.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" check_quorum 24600

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
kt_wait_hw_above 30 0 1 2 3
leader=$KT_LEADER
epoch=$KT_EPOCH
followers=()
for i in 1 2 3; do
    [[ $i -ne $leader ]] && followers+=("$i")
done
kt_log "leader $leader epoch $epoch; pausing followers ${followers[*]}"

t0=$(kt_now_ms)
for i in "${followers[@]}"; do
    kt_pause "$i"
done
# Ask the old leader alone until it no longer claims the leadership.
deadline=$(($(date +%s) + 30))
while :; do
    if ! kt_status "$leader" || ((KT_LEADER != leader)); then
        break
    fi
    (($(date +%s) < deadline)) || kt_fail "node $leader still reports itself leader 30 s after both followers were paused: $KT_OUT"
    sleep 0.1
done
elapsed=$(($(kt_now_ms) - t0))
kt_log "ok: node $leader stopped reporting itself leader ${elapsed} ms after the pause (expected about 3000 ms); describe now says: $(head -c 200 <<<"$KT_OUT")"
kt_alive "$leader" || kt_fail "node $leader exited instead of resigning"
# It must stay that way while the followers are paused.
deadline=$(($(date +%s) + 3))
while (($(date +%s) < deadline)); do
    if kt_status "$leader" && ((KT_LEADER == leader)); then
        kt_fail "node $leader claims the leadership again without a majority: $KT_OUT"
    fi
    sleep 0.3
done

for i in "${followers[@]}"; do
    kt_resume "$i"
done
kt_wait_for_leader 60 --min-epoch "$epoch" 1 2 3
kt_log "after SIGCONT: leader $KT_LEADER epoch $KT_EPOCH"
kt_status 1 2 3 || kt_fail "describe failed: $KT_OUT"
kt_wait_hw_above 30 "$KT_HW" 1 2 3
kt_pass
