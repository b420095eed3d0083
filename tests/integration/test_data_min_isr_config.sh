#!/usr/bin/env bash
# min.insync.replicas reaches the partition leader as soon as it changes, at every level, and
# one rule decides it everywhere (issue 8, items 1, 2 and 9), on a local cluster (cluster.sh:
# 3 controllers, brokers 1, 2, 3), topic ledger on 1,2,3 created with min.insync.replicas=1:
#  1. brokers 2 and 3 killed -> Isr: 1; acks=all works (min 1);
#     topic min.insync.replicas=2 -> the leader counts it under min ISR, refuses acks=all
#     (NOT_ENOUGH_REPLICAS), an acks=1 record stays unreadable (HW frozen); config deleted ->
#     the HW moves and the record is read;
#  2. the same through the cluster default (--entity-default); broker 1's own value is refused;
#  3. min.insync.replicas=5 (above the replication factor 3, accepted as in Kafka 4.x): with
#     Isr 1,2,3 acks=all works and the partition is at min ISR (broker metric
#     kq_broker_at_min_isr_partitions and --at-min-isr-partitions), with Isr 1,2 it is under
#     (metric, --under-min-isr-partitions and the producer's NOT_ENOUGH_REPLICAS agree);
#  4. the leader's ISR expand counter moved with the rejoins; its shrink counter did not (the
#     controller removed the fenced brokers).
# usage: test_data_min_isr_config.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_min_isr_config 27300

# refused: acks=all is answered NOT_ENOUGH_REPLICAS (short delivery timeout: it is retriable).
refused() { # WHAT
    local rc=0
    kd_produce all "$1" --request-timeout-ms 1000 --delivery-timeout-ms 1500 || rc=$?
    kt_assert_eq "exit status of acks=all '$1'" 1 "$rc"
    kt_assert_contains "result of acks=all '$1'" "NOT_ENOUGH_REPLICAS" "$KD_OUT"
}
alter() { # ENTITY-ARGS... -- CONFIG-ARGS...
    kd_kq configs "$@" || kt_fail "kq configs $*: $KD_OUT"
    kt_log "kq configs $*: $KD_OUT"
}
metric() { # B NAME -> value on broker B's /metrics
    kt_metrics $((KQ_BROKER_BASE_PORT + ($1 - 1) * 2 + 1)) | awk -v n="$2" '$1 == n { print $2 }'
}

kd_up
kd_create ledger 1:2:3 min.insync.replicas=1
kd_wait_line ledger 30 'Leader: 1.*Isr: 1,2,3'
kd_kill 2
kd_kill 3
kd_wait_line ledger 40 'Leader: 1.*Isr: 1[[:space:]]'
# The broker's gauges are recomputed every second: wait for its view of Isr 1.
kd_wait_metric 1 30 kq_broker_at_min_isr_partitions 1
kt_assert_eq "under min ISR with min 1" 0 "$(metric 1 kq_broker_under_min_isr_partitions)"
kd_produce all 'a' || kt_fail "acks=all with Isr 1 and min.insync.replicas=1: $KD_OUT"
kt_assert_eq "acks=all 'a' (min 1)" "written at offset 0" "$KD_OUT"

echo "## 1. topic min.insync.replicas=2"
alter --entity-type topics --entity-name ledger --alter --add-config min.insync.replicas=2
kd_wait_metric 1 10 kq_broker_under_min_isr_partitions 1
kd_wait_log 1 10 "min.insync.replicas changed from 1 to 2" >/dev/null
refused 'b'
kd_produce 1 'c' || kt_fail "acks=1 under min ISR: $KD_OUT"
kt_assert_eq "acks=1 'c'" "written at offset 1" "$KD_OUT"
kd_consume
kt_assert_eq "readable while the HW is frozen" "a" "$KD_OUT"
alter --entity-type topics --entity-name ledger --alter --delete-config min.insync.replicas
kd_wait_metric 1 10 kq_broker_under_min_isr_partitions 0
kd_consume
kt_assert_eq "readable after the config was deleted" "$(printf 'a\nc')" "$KD_OUT"

echo "## 2. cluster default, then broker 1's own config"
alter --entity-type brokers --entity-default --alter --add-config min.insync.replicas=2
kd_wait_metric 1 10 kq_broker_under_min_isr_partitions 1
refused 'd'
alter --entity-type brokers --entity-default --alter --delete-config min.insync.replicas
kd_wait_metric 1 10 kq_broker_under_min_isr_partitions 0
# One broker's own minimum is refused: the describe filters and the controller could not
# agree with it (one rule everywhere).
rc=0
kd_kq configs --entity-type brokers --entity-name 1 --alter --add-config min.insync.replicas=3 || rc=$?
kt_assert_eq "exit status of a per-broker min.insync.replicas" 1 "$rc"
kt_assert_contains "per-broker min.insync.replicas" "broker config min.insync.replicas is not supported yet" "$KD_OUT"
kd_produce all 'f' || kt_fail "acks=all after the broker config was deleted: $KD_OUT"
kt_assert_eq "acks=all 'f'" "written at offset 2" "$KD_OUT"

echo "## 3. min.insync.replicas=5 on replication factor 3"
alter --entity-type topics --entity-name ledger --alter --add-config min.insync.replicas=5
kd_wait_metric 1 10 kq_broker_under_min_isr_partitions 1
refused 'g'
shrinks=$(metric 1 kq_broker_isr_shrinks_total)
expands=$(metric 1 kq_broker_isr_expands_total)
kd_start 2
kd_start 3
kd_wait_line ledger 60 'Leader: 1.*Isr: [123],[123],[123][[:space:]]' # any order: rejoin order
kd_wait_metric 1 30 kq_broker_under_min_isr_partitions 0
kd_wait_metric 1 10 kq_broker_at_min_isr_partitions 1
kd_produce all 'h' || kt_fail "acks=all with every replica in the ISR and min 5 on RF 3: $KD_OUT"
kt_assert_eq "acks=all 'h' (effective min 3)" "written at offset 3" "$KD_OUT"
kd_kq topics --describe --under-min-isr-partitions || kt_fail "describe: $KD_OUT"
kt_assert_eq "--under-min-isr-partitions with Isr 1,2,3" "" "$KD_OUT"
kd_kq topics --describe --at-min-isr-partitions || kt_fail "describe: $KD_OUT"
kt_assert_contains "--at-min-isr-partitions with Isr 1,2,3" "Partition: 0" "$KD_OUT"
kt_assert_ge "ISR expansions the leader counted" "$(metric 1 kq_broker_isr_expands_total)" $((${expands%.*} + 1))
kd_kill 3
kd_wait_line ledger 40 'Isr: 1,2[[:space:]]'
kd_wait_metric 1 10 kq_broker_under_min_isr_partitions 1
kd_wait_metric 1 10 kq_broker_at_min_isr_partitions 0
refused 'i'
kd_kq topics --describe --under-min-isr-partitions || kt_fail "describe: $KD_OUT"
kt_assert_contains "--under-min-isr-partitions with Isr 1,2" "Partition: 0" "$KD_OUT"
# The killed brokers left the ISR through fencing (the controller's change), not a shrink the
# leader asked for: the leader's counter stays where it was.
kt_assert_eq "ISR shrinks the leader counted (none asked)" "$shrinks" "$(metric 1 kq_broker_isr_shrinks_total)"
kt_pass
