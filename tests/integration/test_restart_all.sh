#!/usr/bin/env bash
# Restart of every node: records written with kq metadata-write (and everything committed
# before the crash) survive kill -9 of all three controllers. Compares kq log-dump of every
# directory: the committed prefix seen before the crash is still there, identical, on every
# node after the restart, and all nodes agree on every record below the final HighWatermark.
# usage: test_restart_all.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" restart_all 24300

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
kt_wait_hw_above 30 0 1 2 3

# Write records; each write returns once committed and prints its offset.
offsets=$(
    kt_write 1 2 3 -- --count 5 --size 64
    kt_write 1 2 3 -- --count 20 --size 200
    kt_write 1 2 3
)
n_written=$(grep -c . <<<"$offsets" || true)
kt_assert_ge "writes acknowledged with an offset" "$n_written" 1
max_off=$(sort -n <<<"$offsets" | tail -n 1)
kt_log "metadata-write offsets: $(tr '\n' ' ' <<<"$offsets")"

# Wait until every written offset is below the leader's HighWatermark, then crash everything.
kt_wait_hw_above 30 "$max_off" 1 2 3
kt_status 1 2 3 || kt_fail "describe failed: $KT_OUT"
leader=$KT_LEADER
hw_before=$KT_HW
kt_log "leader $leader, HighWatermark $hw_before; kill -9 of all nodes"
for i in 1 2 3; do
    kill -KILL "${KT_PID[$i]}"
done
for i in 1 2 3; do
    kt_wait_exit "$i" 30 || kt_fail "node $i survived SIGKILL"
done

# Committed records before the restart: the leader's log below the HighWatermark it reported.
for i in 1 2 3; do
    kt_log_dump "$i" "$KT_DIR/pre-$i.txt" >/dev/null
done
kt_records_below "$KT_DIR/pre-$leader.txt" "$hw_before" >"$KT_DIR/committed.txt"
kt_assert_eq "committed records on the leader before the restart" "$hw_before" \
    "$(grep -c . "$KT_DIR/committed.txt" || true)"
while read -r off; do
    grep -q "^offset=$off " "$KT_DIR/committed.txt" ||
        kt_fail "written offset $off is not in the leader's log below HighWatermark $hw_before"
done <<<"$offsets"

kt_start_all
kt_wait_for_leader 60
kt_log "after restart: leader $KT_LEADER epoch $KT_EPOCH"
kt_wait_hw_above 60 "$hw_before" 1 2 3
# New records are accepted after the restart.
after=$(kt_write 1 2 3)
kt_assert_gt "offset written after the restart" "$(tail -n 1 <<<"$after")" "$max_off"

# Wait until every follower has caught up, then stop everything gracefully and compare.
deadline=$(($(date +%s) + 60))
while :; do
    if kt_describe 1 2 3 -- --replication; then
        lags=$(tail -n +2 <<<"$KT_OUT" | awk '$1 ~ /^[0-9]+$/ {print $4}' | sort -u | tr '\n' ' ')
        [[ $lags == "0 " ]] && break
    fi
    (($(date +%s) < deadline)) || kt_fail "followers did not catch up after the restart: $KT_OUT"
    sleep 0.3
done
kt_status 1 2 3 || kt_fail "describe failed: $KT_OUT"
hw_final=$KT_HW
for i in 1 2 3; do
    kt_stop "$i"
done
for i in 1 2 3; do
    kt_log_dump "$i" "$KT_DIR/post-$i.txt" >/dev/null
    kt_records_below "$KT_DIR/post-$i.txt" "$hw_before" >"$KT_DIR/post-$i-committed.txt"
    if ! diff -u "$KT_DIR/committed.txt" "$KT_DIR/post-$i-committed.txt" >"$KT_DIR/diff-$i.txt"; then
        head -n 40 "$KT_DIR/diff-$i.txt" >&2
        kt_fail "node $i: records below offset $hw_before differ from those committed before the crash"
    fi
    kt_log "ok: node $i holds all $hw_before records committed before the crash, unchanged"
    while read -r off; do
        grep -q "^offset=$off " "$KT_DIR/post-$i.txt" || kt_fail "node $i lost written offset $off"
    done <<<"$offsets"
    kt_records_below "$KT_DIR/post-$i.txt" "$hw_final" >"$KT_DIR/final-$i.txt"
done
for i in 2 3; do
    if ! diff -u "$KT_DIR/final-1.txt" "$KT_DIR/final-$i.txt" >"$KT_DIR/diff-final-$i.txt"; then
        head -n 40 "$KT_DIR/diff-final-$i.txt" >&2
        kt_fail "nodes 1 and $i disagree below the final HighWatermark $hw_final"
    fi
done
kt_assert_eq "records below the final HighWatermark on node 1" "$hw_final" \
    "$(grep -c . "$KT_DIR/final-1.txt" || true)"
kt_log "all three logs are identical below HighWatermark $hw_final"
kt_pass
