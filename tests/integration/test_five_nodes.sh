#!/usr/bin/env bash
# A 5-voter quorum keeps electing and committing with 2 nodes down (the leader among them),
# and commits nothing with 3 down. Restarting the missing nodes brings progress back.
# usage: test_five_nodes.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" five_nodes 24400

kt_cluster 5
kt_start_all
kt_wait_for_leader 60
kt_wait_hw_above 30 0 1 2 3 4 5
leader=$KT_LEADER
epoch=$KT_EPOCH
kt_log "5 voters: leader $leader epoch $epoch"

# Lose two: the leader and one follower.
other=1
[[ $leader -eq 1 ]] && other=2
kt_kill "$leader"
kt_kill "$other"
alive=()
for i in 1 2 3 4 5; do
    kt_alive "$i" && alive+=("$i")
done
kt_assert_eq "nodes still running" 3 "${#alive[@]}"
kt_wait_for_leader 60 --min-epoch "$epoch" "${alive[@]}"
leader2=$KT_LEADER
epoch2=$KT_EPOCH
kt_log "with nodes $leader and $other down: leader $leader2 epoch $epoch2"
kt_status "${alive[@]}" || kt_fail "describe failed: $KT_OUT"
kt_wait_hw_above 30 "$KT_HW" "${alive[@]}"
off=$(kt_write "${alive[@]}" -- --count 3)
kt_assert_ge "offset committed with 3 of 5 voters" "$(tail -n 1 <<<"$off")" 0

# Lose a third: no majority. Let in-flight fetches settle, then the HighWatermark must not
# move and a write must not be acknowledged.
third=${alive[0]}
[[ $third -eq $leader2 ]] && third=${alive[1]}
kt_kill "$third"
alive2=()
for i in "${alive[@]}"; do
    [[ $i -ne $third ]] && alive2+=("$i")
done
sleep 1
hw_max=-1
if kt_status "${alive2[@]}"; then
    hw_max=$KT_HW
fi
kt_log "with 3 of 5 down: HighWatermark $hw_max; a write must not commit"
wout=$(timeout 30 "$KT_KQ" metadata-write --timeout-ms 5000 --bootstrap-controller "$(kt_bootstrap "${alive2[@]}")" 2>&1) &&
    kt_fail "metadata-write was acknowledged with only 2 of 5 voters running: $wout"
kt_log "ok: metadata-write refused with 2 of 5 voters: $(head -c 200 <<<"$wout")"
deadline=$(($(date +%s) + 6))
while (($(date +%s) < deadline)); do
    for i in "${alive2[@]}"; do
        if kt_status "$i" && ((KT_HW > hw_max && hw_max >= 0)); then
            kt_fail "node $i reports HighWatermark $KT_HW > $hw_max with only 2 of 5 voters"
        fi
    done
    sleep 0.3
done
kt_log "ok: HighWatermark did not move past $hw_max in 6 s without a majority"

# Bring the three back: a leader again, committing.
for i in "$leader" "$other" "$third"; do
    kt_start "$i"
done
kt_wait_for_leader 60 --min-epoch "$epoch" 1 2 3 4 5
kt_log "all five back: leader $KT_LEADER epoch $KT_EPOCH"
off2=$(kt_write 1 2 3 4 5)
kt_assert_gt "offset committed after the nodes returned" "$(tail -n 1 <<<"$off2")" "$(tail -n 1 <<<"$off")"
kt_pass
