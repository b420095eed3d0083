#!/usr/bin/env bash
# Many partitions over one fetch session per leader, through a leader crash: a local cluster
# (cluster.sh, brokers 1, 2, 3), topic `multi` with 6 partitions (placement rotates: replicas
# 1,2,3 / 2,3,1 / 3,1,2 / ...), RF 3, min.insync.replicas=2. Five records to each partition;
# kill -9 broker 2 (it leads two partitions and follows the others): two more records to each
# partition succeed (the producer retries until the new leaders are elected); broker 2
# restarts and rejoins every ISR; each partition reads back its 7 records in order.
# usage: test_data_partitions.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_partitions 27100
KD_TOPIC=multi
P=6

kd_up
kd_kq topics --create --topic multi --partitions $P --replication-factor 3 \
    --config min.insync.replicas=2 || kt_fail "creating multi: $KD_OUT"
kd_kq topics --describe --topic multi
echo "$KD_OUT"
leaders_of_2=$(grep -c $'Leader: 2\t' <<<"$KD_OUT" || true)
kt_assert_gt "partitions broker 2 leads" "$leaders_of_2" 0

produce_to() { # PARTITION FIRST LAST
    local p=$1 out
    out=$(for ((i = $2; i <= $3; i++)); do echo "p$p-r$i"; done |
        timeout 120 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic multi --partition "$p" \
            --request-timeout-ms 5000 --delivery-timeout-ms 60000 2>&1) ||
        kt_fail "produce to partition $p failed: $out"
    kt_assert_eq "last result for partition $p" "written at offset $(($3 - 1))" "$(tail -n 1 <<<"$out")"
}
for ((p = 0; p < P; p++)); do produce_to "$p" 1 5; done

kd_kill 2
for ((p = 0; p < P; p++)); do produce_to "$p" 6 7; done
kd_kq topics --describe --topic multi
echo "$KD_OUT"
grep -q $'Leader: 2\t' <<<"$KD_OUT" && kt_fail "broker 2 still leads a partition after kill -9"

kd_start 2
deadline=$(($(date +%s) + 60))
while :; do
    kd_kq topics --describe --topic multi
    n=$(grep -cE $'Isr: [123],[123],[123]\t' <<<"$KD_OUT" || true)
    [[ $n -eq $P ]] && break
    (($(date +%s) < deadline)) || kt_fail "broker 2 did not rejoin every ISR within 60 s: $KD_OUT"
    sleep 0.5
done
echo "$KD_OUT"
kt_log "broker 2 is back in all $P ISRs"

for ((p = 0; p < P; p++)); do
    kd_consume --partition "$p"
    kt_assert_eq "records of partition $p" "$(for i in 1 2 3 4 5 6 7; do echo "p$p-r$i"; done)" "$KD_OUT"
done
kt_pass
