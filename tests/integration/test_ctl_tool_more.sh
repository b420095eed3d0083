#!/usr/bin/env bash
# kq topics --alter (CreatePartitions) and kq features upgrade / downgrade / disable
# (UpdateFeatures) against 3 controllers and 3 kq-fake-broker processes: a topic grows from 2 to
# 4 partitions (silently, as in Kafka) and then to 6 with a --replica-assignment; shrinking it
# or keeping its count fails with INVALID_PARTITIONS; the feature levels the cluster runs at
# are finalized when it first gets an active controller (metadata.version 3.0-IV1,
# eligible.leader.replicas.version 1: ELR is on); eligible.leader.replicas.version is disabled,
# upgraded again (after a --dry-run that changes nothing), shown by `features describe`, then
# disabled; an unknown feature and a level out of range are rejected with exit 1.
# usage: test_ctl_tool_more.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_tool_more 25800

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
for b in 1 2 3; do
    kt_broker_start "$b"
done
for b in 1 2 3; do
    kt_wait_broker_fenced "$b" false 60
done
TAB=$'\t'

# expect_fail WHAT ARGS...: kq ARGS must exit 1.
expect_fail() {
    local what=$1 rc=0
    shift
    kt_kq "$@" || rc=$?
    kt_assert_eq "exit status of $what" 1 "$rc"
}

partition_count() { # TOPIC
    kt_kq_ok topics --describe --topic "$1"
    head -n 1 <<<"$KT_OUT" | awk -F'\t' '{ sub(/^PartitionCount: /, "", $3); print $3 }'
}

# ---- topics --alter ----
kt_kq_ok topics --create --topic grow --partitions 2 --replication-factor 2
kt_assert_eq "partitions after create" 2 "$(partition_count grow)"
kt_kq_ok topics --alter --topic grow --partitions 4
kt_assert_eq "alter output (Kafka prints nothing)" "" "$KT_OUT"
kt_kq_ok topics --describe --topic grow
kt_assert_contains "describe after alter" "${TAB}PartitionCount: 4${TAB}ReplicationFactor: 2${TAB}" "$KT_OUT"
kt_assert_eq "describe line count after alter" 5 "$(wc -l <<<"$KT_OUT")"
for p in 2 3; do
    line=$(kt_partition_line grow "$p")
    [[ $line =~ ^Topic:\ grow${TAB}Partition:\ $p${TAB}Leader:\ [1-3]${TAB}Replicas:\ [1-3],[1-3]${TAB}Isr:\ [1-3],[1-3]${TAB} ]] ||
        kt_fail "new partition grow-$p: expected a leader and 2 replicas, saw '$line'"
done

expect_fail "alter to 3 (fewer)" topics --alter --topic grow --partitions 3
kt_assert_contains "alter to 3 message" "Error while executing topic command : INVALID_PARTITIONS: " "$KT_OUT"
expect_fail "alter to 4 (same)" topics --alter --topic grow --partitions 4
kt_assert_contains "alter to 4 message" "Error while executing topic command : INVALID_PARTITIONS: " "$KT_OUT"
expect_fail "alter of an unknown topic" topics --alter --topic nosuch --partitions 4
kt_assert_contains "unknown topic message" "Error while executing topic command : UNKNOWN_TOPIC_OR_PARTITION: " "$KT_OUT"
kt_assert_eq "partitions after the rejected alters" 4 "$(partition_count grow)"

# With an assignment naming every partition: the first 4 (existing) are skipped.
kt_kq_ok topics --alter --topic grow --partitions 6 --replica-assignment 1:2,2:3,3:1,1:2,3:2,2:1
kt_assert_eq "alter with assignment output" "" "$KT_OUT"
kt_kq_ok topics --describe --topic grow
kt_assert_contains "describe after the assignment alter" "${TAB}PartitionCount: 6${TAB}" "$KT_OUT"
kt_assert_contains "grow-4 replicas" "${TAB}Replicas: 3,2${TAB}" "$(kt_partition_line grow 4)"
kt_assert_contains "grow-5 replicas" "${TAB}Replicas: 2,1${TAB}" "$(kt_partition_line grow 5)"
expect_fail "alter with a short assignment" topics --alter --topic grow --partitions 7 --replica-assignment 1:2
kt_assert_contains "short assignment message" "lists 1 partition(s) but --partitions is 7" "$KT_OUT"
rc=0
kt_kq topics --alter --topic grow || rc=$?
kt_assert_eq "exit status of --alter without --partitions" 2 "$rc"
kt_assert_eq "partitions after the failed alters" 6 "$(partition_count grow)"

# ---- features ----
elr_level() {
    kt_kq_ok features describe
    grep "^Feature: eligible.leader.replicas.version${TAB}" <<<"$KT_OUT" |
        awk -F'\t' '{ sub(/^FinalizedVersionLevel: /, "", $4); print $4 }'
}
# Finalized at the levels the cluster runs at (issue 8, item 4), not 0.
kt_assert_eq "eligible.leader.replicas.version of a new cluster" 1 "$(elr_level)"
kt_kq_ok features describe
line=$(grep "^Feature: metadata.version${TAB}" <<<"$KT_OUT")
[[ $line =~ ^Feature:\ metadata\.version${TAB}SupportedMinVersion:\ 3\.0-IV1${TAB}SupportedMaxVersion:\ 3\.0-IV1${TAB}FinalizedVersionLevel:\ 3\.0-IV1${TAB}Epoch:\ [0-9]+$ ]] ||
    kt_fail "metadata.version of a new cluster: expected FinalizedVersionLevel: 3.0-IV1, saw '$line'"
kt_kq_ok features disable --feature eligible.leader.replicas.version
kt_assert_eq "eligible.leader.replicas.version after disable" 0 "$(elr_level)"
kt_kq_ok features upgrade --feature eligible.leader.replicas.version=1 --dry-run
kt_assert_eq "dry-run output" "eligible.leader.replicas.version can be upgraded to 1." "$KT_OUT"
kt_assert_eq "eligible.leader.replicas.version after the dry run" 0 "$(elr_level)"
kt_kq_ok features upgrade --feature eligible.leader.replicas.version=1
kt_assert_eq "upgrade output" "eligible.leader.replicas.version was upgraded to 1." "$KT_OUT"
kt_kq_ok features describe
line=$(grep "^Feature: eligible.leader.replicas.version${TAB}" <<<"$KT_OUT")
[[ $line =~ ^Feature:\ eligible\.leader\.replicas\.version${TAB}SupportedMinVersion:\ 0${TAB}SupportedMaxVersion:\ 1${TAB}FinalizedVersionLevel:\ 1${TAB}Epoch:\ [0-9]+$ ]] ||
    kt_fail "features describe after the upgrade: expected FinalizedVersionLevel: 1, saw '$line'"

expect_fail "upgrade of an unknown feature" features upgrade --feature no.such.feature=1
kt_assert_contains "unknown feature message" "Could not upgrade no.such.feature to 1. " "$KT_OUT"
kt_assert_contains "unknown feature message" "unknown feature no.such.feature" "$KT_OUT"
kt_assert_contains "failure summary" "1 out of 1 operation(s) failed." "$KT_OUT"
expect_fail "upgrade above the supported range" features upgrade --feature kraft.version=2
kt_assert_contains "out of range message" "Could not upgrade kraft.version to 2. " "$KT_OUT"
expect_fail "upgrade to a lower level" features upgrade --feature eligible.leader.replicas.version=0
kt_assert_contains "lowering by upgrade message" "Could not upgrade eligible.leader.replicas.version to 0. " "$KT_OUT"
rc=0
kt_kq features upgrade --feature eligible.leader.replicas.version || rc=$?
kt_assert_eq "exit status of --feature without a level" 2 "$rc"
kt_assert_contains "missing level message" "NAME=LEVEL" "$KT_OUT"
kt_assert_eq "eligible.leader.replicas.version after the failures" 1 "$(elr_level)"

kt_kq_ok features disable --feature eligible.leader.replicas.version
kt_assert_eq "disable output" "eligible.leader.replicas.version was disabled." "$KT_OUT"
kt_assert_eq "eligible.leader.replicas.version after disable" 0 "$(elr_level)"
kt_kq_ok features downgrade --feature eligible.leader.replicas.version=0
kt_assert_eq "downgrade output" "eligible.leader.replicas.version was downgraded to 0." "$KT_OUT"

kt_pass
