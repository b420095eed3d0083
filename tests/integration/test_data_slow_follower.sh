#!/usr/bin/env bash
# A follower alive but slow (issue 4, item 5; ../shared/seeds/): it stays in the ISR for
# replica.lag.time.max.ms, the HW crawls at its pace, then the leader removes it ("Shrinking ISR
# from 1,2,3 to 1,2") and the HW jumps to the leader's LEO. It is not fenced: it keeps
# heartbeating and stays registered and unfenced all along.
#
# Local cluster (cluster.sh: 3 controllers, brokers 1, 2, 3), replica.lag.time.max.ms=8000 on
# every broker; broker 3 throttled with kq.test.replica.fetch.delay.ms=250 and
# replica.fetch.max.bytes=1 (one batch, i.e. one record of `kq produce`, per fetch: at most ~4
# records/s). Topic slow, replicas 1,2,3, min.insync.replicas=2. A background `kq produce
# --acks 1` writes ~40 records/s for ~24 s; every second the test samples the LEO (records the
# producer saw written), the HW (records a consumer from the beginning reads) and the ISR.
# Then broker 3 restarts without the throttle and rejoins the ISR; a consumer reads every
# record written, once, in order.
# usage: test_data_slow_follower.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_slow_follower 26600

# The load generator and its producer are ours: stopped before the cluster is torn down.
LOAD_PID=""
GEN_PID=""
stop_load() {
    local rc=$?
    set +e
    [[ -n $GEN_PID ]] && kill "$GEN_PID" 2>/dev/null
    [[ -n $LOAD_PID ]] && kill "$LOAD_PID" 2>/dev/null
    (exit "$rc")
    kd_cleanup
}
trap stop_load EXIT

LAG_MS=8000
DELAY_MS=250
LOAD_RECORDS=700 # ~18 s at 40/s; ~30 s at the pace a loaded machine keeps
KD_TOPIC=slow

# Samples: parallel arrays, one entry per second of load.
S_T=()   # ms since the load started
S_LEO=() # records written (acks=1 answers), read right after the HW
S_HW=()  # records a consumer reads (below the HW)
S_ISR=() # Isr of the partition line

leo_now() { # records the load producer saw written so far
    local n=0
    [[ -f $KT_DIR/load.out ]] && n=$(grep -c 'written at offset' "$KT_DIR/load.out" || true)
    echo "${n:-0}"
}

# hw_now: HW = the records a consumer from the beginning reads (offsets start at 0). A consumer
# only stops by itself after a quiet --timeout-ms, and records keep arriving under load (one per
# throttled fetch, or at the producer's pace), so it is stopped (SIGTERM, it exits cleanly) after
# 1.2 s: it has read everything below the HW by then, and counts the HW of that moment.
HW=0
hw_now() {
    local rc=0
    timeout -s TERM 1.2 "$KT_KQ" consume --bootstrap-server "$KD_BROKERS" --topic "$KD_TOPIC" \
        --from-beginning --timeout-ms 700 >"$KT_DIR/consume.out" 2>"$KT_DIR/consume.err" || rc=$?
    [[ $rc -eq 0 || $rc -eq 124 ]] ||
        kt_fail "kq consume (sampling the HW) failed with status $rc: $(tail -n 3 "$KT_DIR/consume.err")"
    HW=$(wc -l <"$KT_DIR/consume.out")
}

isr_has_3() { [[ $1 =~ (^|,)3(,|$) ]]; }

# sample: one row; prints it the way the seed's table is read (t, LEO, HW, ISR).
sample() {
    local t leo hw isr=""
    hw_now
    hw=$HW
    leo=$(leo_now)
    kd_describe "$KD_TOPIC" && isr=$(kd_field Isr)
    t=$(($(kt_now_ms) - LOAD_T0))
    S_T+=("$t")
    S_LEO+=("$leo")
    S_HW+=("$hw")
    S_ISR+=("$isr")
    printf 't=%6d ms  LEO=%4d  HW=%4d  Isr: %s\n' "$t" "$leo" "$hw" "$isr"
}

ms_of_log_ts() { # a log line -> its ts= as epoch ms
    local ts
    ts=$(sed -n 's/^ts=\([^ ]*\) .*/\1/p' <<<"$1")
    date -d "$ts" +%s%3N
}

kd_up

echo "## replica.lag.time.max.ms=$LAG_MS on every broker; broker 3 fetches slowly"
kd_broker_config 3 "kq.test.replica.fetch.delay.ms=$DELAY_MS" "replica.fetch.max.bytes=1"
for b in 1 2 3; do
    kd_broker_config "$b" "replica.lag.time.max.ms=$LAG_MS"
    kd_kill "$b"
    kd_start "$b"
done

kd_create slow 1:2:3 min.insync.replicas=2
kd_wait_line slow 30 'Leader: 1.*Replicas: 1,2,3.*Isr: 1,2,3'

kd_kq cluster describe --json || kt_fail "kq cluster describe: $KD_OUT"
KT_OUT=$KD_OUT
b3_before=$(kt_json_brokers | awk '$1 == 3 { print $2, $3 }')
kt_assert_eq "broker 3 fenced before the load" false "${b3_before#* }"

echo "## load: $LOAD_RECORDS acks=1 records at ~40/s"
LOAD_T0=$(kt_now_ms)
mkfifo "$KT_DIR/load.in"
timeout 240 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic slow --acks 1 \
    --request-timeout-ms 5000 --delivery-timeout-ms 30000 <"$KT_DIR/load.in" \
    >"$KT_DIR/load.out" 2>"$KT_DIR/load.err" &
LOAD_PID=$!
(
    for ((i = 0; i < LOAD_RECORDS; i++)); do
        echo "load-$i"
        sleep 0.025
    done
) >"$KT_DIR/load.in" &
GEN_PID=$!

# Phase 1: sample until the ISR no longer has broker 3 (generous bound: 90 s of load).
while :; do
    sample
    if [[ -n ${S_ISR[-1]} ]] && ! isr_has_3 "${S_ISR[-1]}"; then
        break
    fi
    ((${S_T[-1]} < 90000)) || kt_fail "broker 3 never left the ISR (lag time ${LAG_MS} ms) within 90 s of load"
    sleep 0.3
done
n_before=$((${#S_T[@]} - 1)) # samples taken while broker 3 was in the ISR
LEO_AT_SHRINK=${S_LEO[-1]}

shrink=$(kd_wait_log 1 30 "Shrinking ISR from 1,2,3 to 1,2")
shrink_line=$(grep -F "Shrinking ISR from 1,2,3 to 1,2" "$KQ_LOCAL_DIR/broker-1.log" | tail -n 1)
echo "leader: $shrink"
shrink_after=$(($(ms_of_log_ts "$shrink_line") - LOAD_T0))
kt_log "the leader shrank the ISR $shrink_after ms after the load started (lag time $LAG_MS ms)"

# (b) not through fencing: broker 3 kept its registration and stayed unfenced.
kd_kq cluster describe --json || kt_fail "kq cluster describe: $KD_OUT"
KT_OUT=$KD_OUT
b3_after=$(kt_json_brokers | awk '$1 == 3 { print $2, $3 }')
kt_assert_eq "broker 3 (epoch, fenced) after the shrink, as before the load" "$b3_before" "$b3_after"
kd_describe slow || kt_fail "describe: $KD_OUT"
echo "$KD_LINE"
kt_assert_eq "Isr after the shrink" "1,2" "$(kd_field Isr)"

# Phase 2: after the shrink the HW catches up with what was written (generous: 30 s).
deadline=$(($(kt_now_ms) + 30000))
while :; do
    sample
    ((${S_HW[-1]} >= LEO_AT_SHRINK)) && break
    (($(kt_now_ms) < deadline)) || kt_fail "HW ${S_HW[-1]} did not reach the LEO at the shrink ($LEO_AT_SHRINK) within 30 s"
    sleep 0.3
done
# Two more rows so the series shows the HW riding the LEO once broker 3 is out.
sample
sample

# (a) broker 3 stayed in the ISR at least lag/2 after the load started, while the HW crawled
# well below the LEO.
kt_assert_ge "samples taken with broker 3 in the ISR" "$n_before" 2
last=$((n_before - 1))
kt_assert_ge "ms since the load started, last sample with broker 3 still in the ISR" \
    "${S_T[$last]}" $((LAG_MS / 2))
kt_assert_ge "ms from the load start to the ISR shrink (not before lag/2)" "$shrink_after" $((LAG_MS / 2))
kt_assert_gt "HW growth while broker 3 was in the ISR (it crawls: ${S_HW[0]} -> ${S_HW[$last]})" \
    $((S_HW[last] - S_HW[0])) 0
kt_assert_ge "LEO - HW at the last sample with broker 3 in the ISR (well below: LEO ${S_LEO[$last]})" \
    $((S_LEO[last] - S_HW[last])) $((S_LEO[last] / 2))
# (c) the jump: from the crawl to the LEO the leader had when the shrink was seen.
kt_log "HW jumped from ${S_HW[$last]} (LEO ${S_LEO[$last]}, last sample with broker 3 in the ISR) to ${S_HW[$n_before]} (LEO ${S_LEO[$n_before]}, first sample with Isr 1,2)"

echo "## end of the load"
wait "$GEN_PID"
GEN_PID=""
rc=0
wait "$LOAD_PID" || rc=$?
LOAD_PID=""
kt_assert_eq "exit status of the load producer" 0 "$rc"
total=$(leo_now)
kt_assert_eq "acks=1 records written" "$LOAD_RECORDS" "$total"
deadline=$(($(kt_now_ms) + 30000))
while :; do
    sample
    ((${S_HW[-1]} == total)) && break
    (($(kt_now_ms) < deadline)) || kt_fail "with Isr 1,2 the HW (${S_HW[-1]}) did not reach the LEO $total within 30 s"
    sleep 0.3
done

echo "## broker 3 restarts without the throttle"
kt_set_prop "$KQ_LOCAL_DIR/broker-3.properties" kq.test.replica.fetch.delay.ms 0
kt_set_prop "$KQ_LOCAL_DIR/broker-3.properties" replica.fetch.max.bytes 1048576
kd_kill 3
kd_start 3
kd_wait_line slow 90 'Leader: 1.*Isr: 1,2,3([[:space:]]|$)'
echo "leader: $(kd_wait_log 1 30 "Expanding ISR from 1,2 to 1,2,3")"

kd_consume
expected=$(for ((i = 0; i < LOAD_RECORDS; i++)); do echo "load-$i"; done)
if [[ $KD_OUT != "$expected" ]]; then
    kt_fail "records a consumer reads after the rejoin differ from load-0..load-$((LOAD_RECORDS - 1)): $(diff <(echo "$expected") <(echo "$KD_OUT") | head -n 10)"
fi
kt_log "ok: a consumer reads load-0 .. load-$((LOAD_RECORDS - 1)), each once, in order"
kt_pass
