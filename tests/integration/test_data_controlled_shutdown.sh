#!/usr/bin/env bash
# Controlled shutdown of a partition leader under a steady acks=all producer (the seeds'
# rolling-restart story) on real processes: cluster.sh, brokers 1, 2, 3, topic `payments`
# with replicas 1,2,3 and min.insync.replicas=2.
#   - a `kq produce --acks all` writes 400 records, one every ~10 ms;
#   - meanwhile broker 1 (the leader) gets SIGTERM: it asks the controller to move its
#     leaderships away, waits until it leads nothing, then exits 0;
#   - the producer sees only retriable errors (it retries them, idempotently) and every one
#     of the 400 records is written exactly once, in order, at offsets 0..399;
#   - broker 1 restarted rejoins the ISR.
# usage: test_data_controlled_shutdown.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_controlled_shutdown 26800
KD_TOPIC=payments
N=400

kd_up
kd_create payments 1:2:3 min.insync.replicas=2
kd_wait_line payments 30 'Leader: 1.*Isr: 1,2,3'

out=$KT_DIR/producer.out
(for i in $(seq 1 $N); do
    echo "payment $i"
    sleep 0.01
done) | timeout 300 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic payments \
    --acks all --request-timeout-ms 5000 --delivery-timeout-ms 60000 >"$out" 2>"$KT_DIR/producer.err" &
ppid=$!
# Let the producer get going, then shut the leader down in the middle of the stream.
deadline=$(($(date +%s) + 60))
until [[ $(grep -c 'written at offset' "$out" 2>/dev/null || true) -ge 50 ]]; do
    (($(date +%s) < deadline)) || kt_fail "the producer wrote fewer than 50 records in 60 s: $(cat "$KT_DIR/producer.err")"
    sleep 0.1
done
kt_log "producer running ($(grep -c 'written at offset' "$out") records written); SIGTERM broker 1"
kd_shutdown 1
kt_log "broker 1 exited after its controlled shutdown"
line=$(kd_wait_line payments 30 'Leader: [23][[:space:]]')
echo "$line"
rc=0
wait "$ppid" || rc=$?
kt_assert_eq "exit status of the producer" 0 "$rc"

written=$(grep -c '^written at offset' "$out" || true)
kt_assert_eq "records the producer reported written" "$N" "$written"
if grep -v '^written at offset' "$out" | grep -q .; then
    kt_fail "the producer reported failures: $(grep -v '^written at offset' "$out" | head -5)"
fi
expected=$(for i in $(seq 0 $((N - 1))); do echo "written at offset $i"; done)
[[ $expected == "$(cat "$out")" ]] ||
    kt_fail "producer results are not offsets 0..$((N - 1)) in order: $(diff <(echo "$expected") "$out" | head -5)"
kt_log "ok: the producer printed 'written at offset 0' .. 'written at offset $((N - 1))', in order"
# Retriable errors seen on the way (printed by the tool on stderr while retrying), if any.
kt_log "producer stderr: $(sort "$KT_DIR/producer.err" | uniq -c | head -5 | tr '\n' ';')"

kd_consume --print-offsets
expected=$(for i in $(seq 1 $N); do printf '%d\tpayment %d\n' $((i - 1)) "$i"; done)
[[ $expected == "$KD_OUT" ]] ||
    kt_fail "a consumer from the beginning does not read payment 1..$N at 0..$((N - 1)): $(diff <(echo "$expected") <(echo "$KD_OUT") | head -5)"
kt_log "ok: a consumer from the beginning reads 'payment 1' .. 'payment $N' at offsets 0..$((N - 1)), each once"

kd_start 1
kd_wait_line payments 60 'Isr: [0-9,]*1' >/dev/null
kd_wait_line payments 60 'Isr: [1-3],[1-3],[1-3][[:space:]]'
kt_pass
