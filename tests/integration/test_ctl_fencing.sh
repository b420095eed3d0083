#!/usr/bin/env bash
# Broker fencing by session expiry with default settings (broker.session.timeout.ms 9000,
# heartbeats every 2000 ms), against 3 controllers and 3 kq-fake-broker processes:
#   - after `stop-heartbeats` broker 3 is fenced; the time from its last heartbeat to the first
#     `kq cluster describe --json` that shows fenced=true is printed (target 9..11 s). It must
#     never be fenced less than 9 s after that heartbeat was sent (checked always); the 11 s
#     upper bound is checked only with KQ_STRICT_TIMING=1 (shared machines are noisy);
#   - it leaves every ISR, and the partitions it led get new leaders from their ISR;
#   - the four describe filters select exactly the expected partitions before the fencing,
#     after it and after the unfencing (topics with min.insync.replicas=2, RF 1 and 2 topics,
#     an ISR shrunk by AlterPartition);
#   - `start-heartbeats` unfences it; after a second fencing a restarted broker 3 (new
#     incarnation, re-registration) is unfenced with a higher broker epoch.
# usage: test_ctl_fencing.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_fencing 25200

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
for b in 1 2 3; do
    kt_broker_start "$b"
done
for b in 1 2 3; do
    kt_wait_broker_fenced "$b" false 60
done

kt_kq_ok topics --create --topic fa --replica-assignment 3:1:2,1:3:2,2:1:3
kt_kq_ok topics --create --topic fm --replica-assignment 3:1:2,1:2:3 --config min.insync.replicas=2
kt_kq_ok topics --create --topic fr --replica-assignment 3:1,1:2 --config min.insync.replicas=2
kt_kq_ok topics --create --topic fs --replica-assignment 3,1
# fm-1 (led by broker 1) drops broker 3 from its ISR: ISR 1,2 = min.insync.replicas.
fm_id=$(kt_topic_id fm)
kt_broker_alter 1 "$fm_id" 1 0 0 1,2
kt_assert_eq "AlterPartition fm-1 -> ISR 1,2" "NONE NONE" "$KT_ALTER_ERROR $KT_ALTER_PERROR"

# expect_filters WHEN UNDER_REPLICATED UNDER_MIN_ISR AT_MIN_ISR UNAVAILABLE: each list is the
# sorted, space-separated "topic-partition" set that filter must select.
expect_filters() {
    local when=$1 f
    shift
    for f in under-replicated-partitions under-min-isr-partitions at-min-isr-partitions \
        unavailable-partitions; do
        kt_kq_ok topics --describe "--$f"
        kt_assert_eq "$when: --$f" "$1" "$(kt_selected)"
        shift
    done
}

# expect_line WHEN TOPIC PARTITION LEADER REPLICAS ISR ELR LAST_KNOWN_ELR
expect_line() {
    kt_assert_eq "$1: describe line of $2-$3" \
        "$(printf 'Topic: %s\tPartition: %s\tLeader: %s\tReplicas: %s\tIsr: %s\tElr: %s\tLastKnownElr: %s' "$2" "$3" "$4" "$5" "$6" "$7" "$8")" \
        "$(kt_partition_line "$2" "$3")"
}

# not_in_any_isr WHEN BROKER: the broker is in no ISR and leads nothing.
not_in_any_isr() {
    kt_kq_ok topics --describe
    local bad
    bad=$(awk -F'\t' -v b="$2" '$5 ~ /^Isr: / {
        isr = $5; sub(/^Isr: /, "", isr); n = split(isr, a, ",")
        for (i = 1; i <= n; i++) if (a[i] == b) print
        if ($4 == "Leader: " b) print }' <<<"$KT_OUT")
    [[ -z $bad ]] || kt_fail "$1: broker $2 is still in an ISR or leads: $bad"
    kt_log "ok: $1: broker $2 is in no ISR and leads nothing"
}

# fence_broker_3 ROUND: stop its heartbeats and measure when cluster describe shows it fenced.
fence_broker_3() {
    local last sent t0 t1 lo=-1 hi from
    kt_broker_cmd 3 stop-heartbeats '^heartbeats stopped'
    last=$(sed -n 's/.*last_heartbeat_ms=\([0-9]*\).*/\1/p' <<<"$KT_BLINE")
    sent=$(sed -n 's/.*last_heartbeat_sent_ms=\([0-9]*\).*/\1/p' <<<"$KT_BLINE")
    [[ $last =~ ^[0-9]+$ && $last -gt 0 && $sent =~ ^[0-9]+$ && $sent -gt 0 ]] ||
        kt_fail "round $1: no answered heartbeat before stop-heartbeats: $KT_BLINE"
    from=$(kt_now_ms)
    while :; do
        t0=$(kt_now_ms)
        kt_broker_state 3 || kt_fail "round $1: kq cluster describe failed: $KT_OUT"
        t1=$(kt_now_ms)
        [[ $KT_BFENCED == true ]] && break
        [[ $KT_BFENCED == false ]] || kt_fail "round $1: broker 3 not in cluster describe: $KT_OUT"
        lo=$((t0 - last))
        ((t1 - from < 60000)) || kt_fail "round $1: broker 3 still unfenced 60 s after stop-heartbeats"
        sleep 0.05
    done
    hi=$((t1 - last))
    kt_log "round $1: broker 3 fenced $hi ms after its last answered heartbeat (still unfenced at $lo ms; $((t1 - sent)) ms after that heartbeat was sent); target 9000..11000"
    # The controller saw that heartbeat no earlier than it was sent, and must wait 9000 ms.
    if ((t1 - sent < 9000)); then
        kt_fail "round $1: broker 3 fenced only $((t1 - sent)) ms after its last heartbeat was sent (session timeout 9000 ms)"
    fi
    if ((hi > 11000)); then
        kt_log "NOTE: round $1: fencing took $hi ms, above the 11000 ms target"
        [[ ${KQ_STRICT_TIMING:-0} != 1 ]] || kt_fail "round $1: fenced after $hi ms > 11000 ms (KQ_STRICT_TIMING=1)"
    fi
}

expect_filters "before fencing" "fm-1" "" "fm-1 fr-0 fr-1 fs-0 fs-1" ""

# Round 1: fenced by session expiry, unfenced by heartbeating again.
kt_broker_state 3
epoch1=$KT_BEPOCH
fence_broker_3 1
not_in_any_isr "after fencing" 3
kt_kq_ok topics --describe
expect_line "after fencing" fa 0 1 3,1,2 1,2 "" ""
expect_line "after fencing" fa 1 1 1,3,2 1,2 "" ""
expect_line "after fencing" fa 2 2 2,1,3 2,1 "" ""
expect_line "after fencing" fm 0 1 3,1,2 1,2 "" ""
expect_line "after fencing" fm 1 1 1,2,3 1,2 "" ""
expect_line "after fencing" fr 0 1 3,1 1 3 ""
expect_line "after fencing" fr 1 1 1,2 1,2 "" ""
kt_assert_contains "after fencing: fs-0 (led by 3 alone)" "$(printf 'Leader: none\tReplicas: 3\tIsr: \t')" "$(kt_partition_line fs 0)"
expect_filters "after fencing" "fa-0 fa-1 fa-2 fm-0 fm-1 fr-0 fs-0" "fr-0 fs-0" "fm-0 fm-1 fr-1 fs-1" "fs-0"

kt_broker_cmd 3 start-heartbeats '^ok start-heartbeats'
kt_wait_broker_fenced 3 false 60
kt_assert_eq "broker 3 epoch after unfencing (same incarnation)" "$epoch1" "$KT_BEPOCH"
kt_log "broker 3 unfenced ${KT_WAITED_MS} ms after start-heartbeats"
# Unfencing does not put it back in ISRs, but the leaderless fs-0 whose ELR holds it elects it.
kt_kq_ok topics --describe
expect_line "after unfencing" fa 0 1 3,1,2 1,2 "" ""
expect_line "after unfencing" fr 0 1 3,1 1 3 ""
expect_line "after unfencing" fs 0 3 3 3 "" ""
expect_filters "after unfencing" "fa-0 fa-1 fa-2 fm-0 fm-1 fr-0" "fr-0" "fm-0 fm-1 fr-1 fs-0 fs-1" ""

# Broker 3 rejoins fa-0's ISR through its leader's AlterPartition.
fa_id=$(kt_topic_id fa)
read -r le pe <<<"$(kt_partition_epochs fa 0)"
kt_broker_alter 1 "$fa_id" 0 "$le" "$pe" 1,2,3
kt_assert_eq "AlterPartition fa-0 -> ISR 1,2,3" "NONE NONE" "$KT_ALTER_ERROR $KT_ALTER_PERROR"

# Round 2: fenced again, then the broker restarts (new incarnation) and re-registers.
fence_broker_3 2
not_in_any_isr "after the second fencing" 3
kt_broker_kill 3
from=$(kt_broker_lines 3)
kt_broker_start 3
# The fake broker reports its broker epoch as its metadata offset: that is the offset of its
# RegisterBroker record when, as in Kafka, that record is the first of the registration batch.
kt_broker_wait 3 "$from" '^state broker=3 ' 60
if [[ $KT_BLINE == *caught_up=false* ]]; then
    kt_broker_state 3
    dump=$(timeout 60 "$KT_KQ" log-dump --dir "$KT_DIR/node-1" --lines 2>&1 |
        awk -v e="$KT_BEPOCH" '/^offset=/ { split($1, a, "="); if (a[2] + 0 >= e + 0 && a[2] + 0 < e + 8) print }')
    kt_fail "re-registered broker 3 (epoch $KT_BEPOCH) reported metadata offset $KT_BEPOCH and is not caught up ($KT_BLINE): its RegisterBroker record is not at the offset of its broker epoch; log from the epoch on: $dump"
fi
kt_wait_broker_fenced 3 false 60
kt_log "restarted broker 3 unfenced ${KT_WAITED_MS} ms after its restart, epoch $KT_BEPOCH"
kt_assert_gt "broker 3 epoch after re-registration" "$KT_BEPOCH" "$epoch1"
kt_kq_ok topics --describe
expect_line "after re-registration" fa 0 1 3,1,2 1,2 "" ""
kt_log "fs-0 after re-registration: $(kt_partition_line fs 0)"
kt_pass
