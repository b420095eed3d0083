#!/usr/bin/env bash
# The seeds' "kill -9 one follower broker" experiment on real processes: a local cluster
# (cluster.sh: 3 controllers, brokers 1, 2, 3), topic `orders` with replicas 1,2,3 and
# min.insync.replicas=2.
#   - kill -9 broker 3 (a follower): it leaves the ISR once its session expires and the
#     controller fences it (broker.session.timeout.ms, 9 s), not after replica.lag.time.max.ms
#     (30 s); acks=all writes keep succeeding with Isr: 1,2;
#   - restarted, broker 3 catches up (the records written while it was down) and rejoins the
#     ISR within a few seconds; the leader logs "Expanding ISR from 1,2 to 1,2,3";
#   - every acknowledged record is readable, in order, once.
# usage: test_data_kill_follower.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_kill_follower 26400
KD_TOPIC=orders

kd_up
kd_create orders 1:2:3 min.insync.replicas=2
kd_wait_line orders 30 'Leader: 1.*Isr: 1,2,3'
for i in 1 2 3; do
    kd_produce all "order $i" || kt_fail "acks=all write: $KD_OUT"
    kt_assert_eq "result of order $i" "written at offset $((i - 1))" "$KD_OUT"
done

echo "## kill -9 broker 3"
t0=$(kt_now_ms)
kd_kill 3
kd_wait_line orders 60 'Isr: 1,2[[:space:]]'
left=$(($(kt_now_ms) - t0))
kt_log "broker 3 left the ISR $left ms after kill -9"
# Fenced by its session (9 s), long before replica.lag.time.max.ms (30 s) would remove it.
kt_assert_ge "ms until broker 3 left the ISR (session timeout 9000, heartbeats every 2000)" "$left" 6000
kt_assert_gt "ms before replica.lag.time.max.ms (30000) would have removed it" 30000 "$left"
kd_kq cluster describe
kt_assert_contains "broker 3 after its session expired" "$(printf 'Broker: 3\tEpoch:')" "$KD_OUT"
grep -q "$(printf 'Broker: 3\t.*Fenced: true')" <<<"$KD_OUT" || kt_fail "broker 3 is not fenced: $KD_OUT"

for i in 4 5 6; do
    kd_produce all "order $i" || kt_fail "acks=all write with Isr 1,2: $KD_OUT"
    kt_assert_eq "result of order $i (Isr 1,2)" "written at offset $((i - 1))" "$KD_OUT"
done

echo "## restart broker 3"
t0=$(kt_now_ms)
kd_start 3
kd_wait_line orders 60 'Isr: 1,2,3[[:space:]]'
kt_log "broker 3 rejoined the ISR $(($(kt_now_ms) - t0)) ms after its restart"
line=$(kd_wait_log 1 10 "Expanding ISR from 1,2 to 1,2,3")
kt_log "leader: $line"
# The expansion is the leader's (the shrink was the controller's, by fencing): its counter.
kd_wait_metric 1 10 kq_broker_isr_expands_total 1
kd_wait_metric 1 10 kq_broker_under_replicated_partitions 0

kd_produce all "order 7" || kt_fail "acks=all write after the rejoin: $KD_OUT"
kt_assert_eq "result of order 7" "written at offset 6" "$KD_OUT"
kd_consume --print-offsets
expected=$(for i in $(seq 1 7); do printf '%d\torder %d\n' $((i - 1)) "$i"; done)
kt_assert_eq "records read from the beginning" "$expected" "$KD_OUT"
kt_pass
