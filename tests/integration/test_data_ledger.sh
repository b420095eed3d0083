#!/usr/bin/env bash
# The seed's `ledger` experiment (../shared/seeds/002_*.txt) on real processes: a local cluster
# (cluster.sh: 3 controllers, brokers 1, 2, 3), topic ledger with replicas 1,2,3 and
# min.insync.replicas=2.
#   acks=all 'deposit 100' -> offset 0; stop (kill -9) broker 3 -> Isr: 1,2;
#   acks=all 'deposit 50' -> offset 1; stop broker 2 -> Isr: 1, Elr: 2;
#   acks=all 'withdraw 30' -> NOT_ENOUGH_REPLICAS until the 8 s delivery timeout;
#   acks=1 'withdraw 20' -> written at offset 2, but not readable (the HW stays at 2);
#   broker 1 crashes, brokers 2 and 3 restart -> broker 2 (from the ELR) leads;
#   broker 1 restarts, truncates offset 2 and follows; a consumer from the beginning sees only
#   'deposit 100' and 'deposit 50'.
# usage: test_data_ledger.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_ledger 26300

kd_up
kd_create ledger 1:2:3 min.insync.replicas=2
kd_wait_line ledger 30 'Leader: 1.*Replicas: 1,2,3.*Isr: 1,2,3'

kd_produce all 'deposit 100' || kt_fail "acks=all write with 3 replicas: $KD_OUT"
kt_assert_eq "result of acks=all 'deposit 100'" "written at offset 0" "$KD_OUT"

echo "## stop broker 3"
t0=$(kt_now_ms)
kd_kill 3
kd_wait_line ledger 40 'Isr: 1,2[[:space:]]'
kt_log "broker 3 left the ISR $(($(kt_now_ms) - t0)) ms after kill -9 (fenced after broker.session.timeout.ms)"

kd_produce all 'deposit 50' || kt_fail "acks=all write with Isr 1,2: $KD_OUT"
kt_assert_eq "result of acks=all 'deposit 50'" "written at offset 1" "$KD_OUT"

echo "## stop broker 2"
kd_kill 2
kd_wait_line ledger 40 'Isr: 1[[:space:]].*Elr: 2'
# The leader (broker 1) applies the shrink from the metadata log a moment after the controller
# committed it; wait for its own view before writing.
kd_wait_metric 1 30 kq_broker_under_min_isr_partitions 1

t0=$(kt_now_ms)
rc=0
kd_produce all 'withdraw 30' || rc=$?
took=$(($(kt_now_ms) - t0))
kt_assert_eq "exit status of the acks=all write with Isr 1" 1 "$rc"
kt_assert_contains "result of acks=all 'withdraw 30'" "NOT_ENOUGH_REPLICAS" "$KD_OUT"
kt_assert_ge "ms the producer retried NOT_ENOUGH_REPLICAS (delivery timeout 8000)" "$took" 7900

kd_produce 1 'withdraw 20' || kt_fail "acks=1 write with Isr 1: $KD_OUT"
kt_assert_eq "result of acks=1 'withdraw 20'" "written at offset 2" "$KD_OUT"
kd_consume
kt_assert_eq "records a consumer reads while the HW is frozen at 2" \
    "$(printf 'deposit 100\ndeposit 50')" "$KD_OUT"

echo "## broker 1 crashes; brokers 2 and 3 restart"
kd_kill 1
kd_start 2
kd_start 3
line=$(kd_wait_line ledger 60 'Leader: 2[[:space:]]')
kt_log "after the restarts: $line"

echo "## broker 1 restarts"
kd_start 1
kd_wait_line ledger 60 'Leader: 2.*Isr: [0-9,]*1'
trunc=$(kd_wait_log 1 30 "Truncating to offset 2")
kt_log "broker 1: $trunc"

kd_consume --print-offsets
echo "consumer from the beginning:"
echo "$KD_OUT"
kt_assert_eq "records after the unclean history" "$(printf '0\tdeposit 100\n1\tdeposit 50')" "$KD_OUT"

# The new leader keeps serving acks=all writes, at offset 2 (the truncated offset reused).
kd_wait_line ledger 60 'Isr: [0-9,]*,[0-9,]*'
kd_produce all 'deposit 10' || kt_fail "acks=all write after recovery: $KD_OUT"
kt_assert_eq "result of acks=all 'deposit 10' after recovery" "written at offset 2" "$KD_OUT"
kt_pass
