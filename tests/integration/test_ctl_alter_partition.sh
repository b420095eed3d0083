#!/usr/bin/env bash
# AlterPartition end to end (kraft-semantics.md §3.6), sent by kq-fake-broker processes against
# 3 real controllers; the answer and `kq topics --describe` are checked after every request:
#   - the leader shrinks the ISR with the current epochs: NONE, partition epoch + 1, leader
#     epoch unchanged;
#   - the same request again (old partition epoch): INVALID_UPDATE_VERSION, nothing changes;
#   - adding a fenced broker to the ISR: INELIGIBLE_REPLICA;
#   - a broker that is not the leader: INVALID_REQUEST;
#   - an unknown topic id: UNKNOWN_TOPIC_ID;
#   - after the fenced broker catches up it can be added, a preferred election makes it the
#     leader (leader epoch + 1), and the old leader's request with the old leader epoch gets
#     FENCED_LEADER_EPOCH.
# usage: test_ctl_alter_partition.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_alter_partition 25100

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
for b in 1 2 3; do
    kt_broker_start "$b"
done
# Broker 4 registers but reports a metadata offset below its registration: it stays fenced.
kt_broker_start 4 --start-fenced
for b in 1 2 3; do
    kt_wait_broker_fenced "$b" false 60
done
kt_wait_broker_fenced 4 true 60
kt_log "brokers 1-3 unfenced, broker 4 registered and fenced"

# Replicas 4,1,2: the fenced broker 4 is left out of the initial ISR, so broker 1 leads.
kt_kq_ok topics --create --topic ap --replica-assignment 4:1:2
kt_assert_eq "create output" "Created topic ap." "$KT_OUT"
tid=$(kt_topic_id ap)
kt_assert_eq "topic id length" 22 "${#tid}"

# expect_partition LEADER ISR LEADER_EPOCH PARTITION_EPOCH: describe line and JSON epochs.
expect_partition() {
    kt_kq_ok topics --describe --topic ap
    kt_assert_eq "describe line of ap-0" \
        "$(printf 'Topic: ap\tPartition: 0\tLeader: %s\tReplicas: 4,1,2\tIsr: %s\tElr: \tLastKnownElr: ' "$1" "$2")" \
        "$(kt_partition_line ap 0)"
    kt_kq_ok topics --describe --topic ap --json
    kt_assert_contains "JSON epochs of ap-0" "\"leaderEpoch\":$3,\"partitionEpoch\":$4," "$KT_OUT"
}

# expect_alter WHAT PARTITION_ERROR: the top-level error is NONE, the partition's is given.
expect_alter() {
    kt_assert_eq "$1: top-level error" NONE "$KT_ALTER_ERROR"
    kt_assert_eq "$1: partition error" "$2" "$KT_ALTER_PERROR"
}

expect_partition 1 1,2 0 0

# 1. Shrink 1,2 -> 1 with the current epochs.
kt_broker_alter 1 "$tid" 0 0 0 1
expect_alter "shrink" NONE
kt_assert_eq "shrink: leader" 1 "$KT_ALTER_LEADER"
kt_assert_eq "shrink: leader epoch (unchanged)" 0 "$KT_ALTER_LE"
kt_assert_eq "shrink: partition epoch (+1)" 1 "$KT_ALTER_PE"
kt_assert_eq "shrink: ISR" 1 "$KT_ALTER_ISR"
expect_partition 1 1 0 1

# 2. The same request again: its partition epoch 0 is now stale.
kt_broker_alter 1 "$tid" 0 0 0 1
expect_alter "repeated shrink with partition epoch 0" INVALID_UPDATE_VERSION
expect_partition 1 1 0 1

# 3. Adding the fenced broker 4.
kt_broker_alter 1 "$tid" 0 0 1 1,4
expect_alter "ISR with fenced broker 4" INELIGIBLE_REPLICA
expect_partition 1 1 0 1

# 4. Broker 2 is a replica but not the leader.
kt_broker_alter 2 "$tid" 0 0 1 1,2
expect_alter "request from non-leader broker 2" INVALID_REQUEST
expect_partition 1 1 0 1

# 5. A topic id nobody created.
unknown=$("$KT_KQ" storage random-uuid)
kt_broker_alter 1 "$unknown" 0 0 1 1,2
expect_alter "unknown topic id $unknown" UNKNOWN_TOPIC_ID
expect_partition 1 1 0 1

# 6. Expand back to 1,2.
kt_broker_alter 1 "$tid" 0 0 1 1,2
expect_alter "expand to 1,2" NONE
kt_assert_eq "expand: leader epoch (unchanged)" 0 "$KT_ALTER_LE"
kt_assert_eq "expand: partition epoch (+1)" 2 "$KT_ALTER_PE"
kt_assert_eq "expand: ISR" 1,2 "$KT_ALTER_ISR"
expect_partition 1 1,2 0 2

# 7. Broker 4 catches up and is unfenced; now it may join the ISR.
kt_broker_cmd 4 catch-up '^ok catch-up'
kt_wait_broker_fenced 4 false 60
kt_log "broker 4 unfenced ${KT_WAITED_MS} ms after catch-up"
kt_broker_alter 1 "$tid" 0 0 2 1,2,4
expect_alter "expand with the unfenced broker 4" NONE
kt_assert_eq "expand with 4: partition epoch" 3 "$KT_ALTER_PE"
kt_assert_eq "expand with 4: leader epoch (unchanged)" 0 "$KT_ALTER_LE"
expect_partition 1 "$KT_ALTER_ISR" 0 3
kt_assert_eq "ISR members after adding 4" "1 2 4" "$(tr ',' '\n' <<<"$KT_ALTER_ISR" | sort -n | xargs)"
isr=$KT_ALTER_ISR

# 8. The preferred replica 4 takes the leadership: the leader epoch goes to 1.
kt_kq_ok leader-election --election-type PREFERRED --topic ap --partition 0
kt_assert_contains "preferred election output" "Successfully completed leader election (PREFERRED) for partitions ap-0" "$KT_OUT"
expect_partition 4 "$isr" 1 4

# 9. The old leader 1 with leader epoch 0: fenced.
kt_broker_alter 1 "$tid" 0 0 4 1,2,4
expect_alter "request with stale leader epoch 0" FENCED_LEADER_EPOCH
expect_partition 4 "$isr" 1 4

# 10. The new leader shrinks with leader epoch 1: accepted, leader epoch stays 1.
kt_broker_alter 4 "$tid" 0 1 4 4,1
expect_alter "shrink by the new leader" NONE
kt_assert_eq "new leader shrink: leader epoch" 1 "$KT_ALTER_LE"
kt_assert_eq "new leader shrink: partition epoch" 5 "$KT_ALTER_PE"
expect_partition 4 4,1 1 5
kt_pass
