#!/usr/bin/env bash
# A leader broker paused (SIGSTOP) past its session (issue 4, item 5; ../shared/seeds/): the
# controllers fence it and elect a new leader; when it is resumed, whatever it still does as the
# old leader (appending Produce requests that queued in its socket, an AlterPartition with its
# old leader epoch) is refused or undone: acks=all writes it accepted while cut off are never
# acknowledged, it truncates them, follows the new leader and rejoins the ISR.
#
# Local cluster (cluster.sh: 3 controllers, brokers 1, 2, 3); topic paused, replicas 1,2,3,
# min.insync.replicas=2; broker 1 with replica.lag.time.max.ms=4000; acks=all 'before-0..2' -> offsets 0..2. A background `kq produce
# --acks all` bootstrapped on broker 1 only writes 'warm-up' (offset 3, so it holds metadata
# naming broker 1 as leader, and the brokers' addresses), then, once broker 1 is paused, gets
# 'cut-off-1' and 'cut-off-2': its Produce requests queue in broker 1's socket until it times
# out (3 s), refreshes the metadata from another broker and retries, within its 30 s delivery
# timeout. After the election, acks=all 'via-new-leader' through all brokers; then SIGCONT.
# Every acknowledged record must be read exactly once, at the offset its producer printed.
# usage: test_data_paused_leader.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" data_paused_leader 26700

KD_TOPIC=paused
PROD_PID=""
stop_producer() {
    local rc=$?
    set +e
    [[ -n $PROD_PID ]] && kill "$PROD_PID" 2>/dev/null
    (exit "$rc")
    kd_cleanup
}
trap stop_producer EXIT

# prod_lines: result lines the background producer printed so far.
prod_lines() {
    local n=0
    [[ -f $KT_DIR/prod.out ]] && n=$(wc -l <"$KT_DIR/prod.out")
    echo "$n"
}

# broker_log_since B LINE: broker B's log lines after line LINE (fixed-string greps follow).
broker_log_since() {
    tail -n +"$(($2 + 1))" "$KQ_LOCAL_DIR/broker-$1.log"
}

msg_of() { sed 's/.*msg="\([^"]*\)".*/\1/'; }

kd_up
# Broker 1 gets a short replica.lag.time.max.ms, so that when it resumes, its followers (silent
# in its view for the whole pause) may be overdue: it then shrinks the ISR with its old leader
# epoch and the controller refuses it. Usually the followers' fetches that queued in its socket
# during the pause count as fresh (they are handled before its first timer tick) and the new
# metadata arrives within milliseconds, so it sends none. Either interleaving must end the same
# way.
kd_broker_config 1 "replica.lag.time.max.ms=4000"
kd_kill 1
kd_start 1
kd_create paused 1:2:3 min.insync.replicas=2
kd_wait_line paused 30 'Leader: 1.*Replicas: 1,2,3.*Isr: 1,2,3'
e0_line=$(kd_wait_log 1 30 "Became leader of paused-0 at leader epoch")
E0=$(sed -n 's/.*at leader epoch \([0-9]*\).*/\1/p' <<<"$e0_line")
kt_log "broker 1: $e0_line"

for i in 0 1 2; do
    kd_produce all "before-$i" || kt_fail "acks=all write with Isr 1,2,3: $KD_OUT"
    kt_assert_eq "result of acks=all 'before-$i'" "written at offset $i" "$KD_OUT"
done

echo "## a producer bootstrapped on broker 1 only"
B1=127.0.0.1:$((KQ_BROKER_BASE_PORT))
mkfifo "$KT_DIR/prod.in"
timeout 180 "$KT_KQ" produce --bootstrap-server "$B1" --topic paused --acks all \
    --request-timeout-ms 3000 --delivery-timeout-ms 30000 <"$KT_DIR/prod.in" \
    >"$KT_DIR/prod.out" 2>"$KT_DIR/prod.err" &
PROD_PID=$!
exec {PFD}>"$KT_DIR/prod.in"
echo "warm-up" >&"$PFD"
deadline=$(($(date +%s) + 30))
until (($(prod_lines) >= 1)); do
    (($(date +%s) < deadline)) || kt_fail "the producer printed nothing for 'warm-up' within 30 s: $(cat "$KT_DIR/prod.err")"
    sleep 0.1
done
kt_assert_eq "result of acks=all 'warm-up' (via broker 1)" "written at offset 3" "$(head -n 1 "$KT_DIR/prod.out")"

echo "## SIGSTOP broker 1 (the leader)"
b1_mark=$(wc -l <"$KQ_LOCAL_DIR/broker-1.log")
kd_pause 1
t_pause=$(kt_now_ms)
printf '%s\n' cut-off-1 cut-off-2 >&"$PFD"
line=$(kd_wait_line paused 60 'Leader: [23][[:space:]]')
echo "$line"
kt_log "new leader elected $(($(kt_now_ms) - t_pause)) ms after the pause (broker.session.timeout.ms 9000)"
kt_assert_contains "partition line after the election: broker 1 out of the ISR" "Isr: 2,3" "$line"

kd_produce all 'via-new-leader' || kt_fail "acks=all write through the new leader: $KD_OUT"
via_offset=$(sed -n 's/^written at offset \([0-9]*\)$/\1/p' <<<"$KD_OUT")
[[ -n $via_offset ]] || kt_fail "acks=all 'via-new-leader': unexpected result '$KD_OUT'"
kt_log "records the background producer finished while broker 1 was paused: $(($(prod_lines) - 1))"

echo "## SIGCONT broker 1"
kd_resume 1
exec {PFD}>&- # end of the producer's input: it exits once its records are done
rc=0
wait "$PROD_PID" || rc=$?
PROD_PID=""
echo "background producer (cut-off-1, cut-off-2 sent while broker 1 was paused):"
sed 's/^/  /' "$KT_DIR/prod.out"
[[ -s $KT_DIR/prod.err ]] && sed 's/^/  stderr: /' "$KT_DIR/prod.err"
kt_assert_eq "exit status of the background producer" 0 "$rc"
kt_assert_eq "result lines of the background producer" 3 "$(prod_lines)"

# The old leader learns the new leader from the metadata and follows at a higher leader epoch.
fol=$(kd_wait_log 1 60 "Became follower of paused-0 at leader epoch")
echo "broker 1: $fol"
E1=$(sed -n 's/.*at leader epoch \([0-9]*\).*/\1/p' <<<"$fol")
kt_assert_gt "leader epoch broker 1 follows at (it led at $E0)" "$E1" "$E0"

kd_wait_line paused 90 'Isr: ([0-9]+,)*1(,|[[:space:]]|$)'

echo "## what broker 1 did after SIGCONT"
after=$(broker_log_since 1 "$b1_mark")
grep -F -e 'Partition paused-0' -e 'AlterPartition' -e 'Became' <<<"$after" | msg_of | sed 's/^/  broker 1: /' || true
if trunc=$(grep -F 'Truncating to offset' <<<"$after" | msg_of | tail -n 1) && [[ -n $trunc ]]; then
    kt_log "broker 1 had appended records while cut off and truncated them: $trunc"
    t_off=$(sed -n 's/.*Truncating to offset \([0-9]*\).*/\1/p' <<<"$trunc")
    # It must keep everything acknowledged before the pause (offsets 0..3).
    kt_assert_ge "offset broker 1 truncated to" "$t_off" 4
else
    kt_log "broker 1 appended nothing while cut off (the metadata reached it first): no truncation"
fi
if alt=$(grep -F 'AlterPartition refused by the controller' <<<"$after" | tail -n 1) && [[ -n $alt ]]; then
    kt_log "broker 1's AlterPartition with its old leader epoch was refused: $(msg_of <<<"$alt") $(sed -n 's/.*\(error=[A-Z_]*\).*/\1/p' <<<"$alt")"
else
    kt_log "broker 1 sent no AlterPartition after SIGCONT (the metadata naming the new leader came first)"
fi
# The stale leader must never have its shrink or expand accepted.
if grep -F 'ISR updated to' <<<"$after" | grep -qF 'paused-0 broker=1'; then
    kt_fail "broker 1 got an ISR change accepted after SIGCONT: $(grep -F 'ISR updated to' <<<"$after" | msg_of)"
fi

echo "## a consumer from the beginning"
kd_consume --print-offsets
echo "$KD_OUT"
# Every acknowledged record exactly once, at the offset its producer printed.
declare -A want=([before-0]=0 [before-1]=1 [before-2]=2 [via-new-leader]=$via_offset)
values=(warm-up cut-off-1 cut-off-2)
for i in 0 1 2; do
    res=$(sed -n "$((i + 1))p" "$KT_DIR/prod.out")
    off=$(sed -n 's/^written at offset \([0-9]*\)$/\1/p' <<<"$res")
    [[ -n $off ]] || kt_fail "acks=all '${values[$i]}' was not acknowledged: '$res'"
    want[${values[$i]}]=$off
done
for v in "${!want[@]}"; do
    n=$(awk -F'\t' -v v="$v" '$2 == v' <<<"$KD_OUT" | wc -l)
    kt_assert_eq "times '$v' is read" 1 "$n"
    kt_assert_eq "offset of '$v' (as its producer printed)" "${want[$v]}" \
        "$(awk -F'\t' -v v="$v" '$2 == v { print $1 }' <<<"$KD_OUT")"
done
kt_assert_eq "records read (offsets 0..6, nothing else)" "$(seq 0 6 | xargs)" \
    "$(cut -f1 <<<"$KD_OUT" | xargs)"

echo "## broker 1's own copy: the new leader shuts down, broker 1 (first replica in the ISR) leads"
all=$KD_OUT
kd_shutdown 2
kd_wait_line paused 60 'Leader: 1[[:space:]]'
# broker 1's own view (it serves consumers once it applied the leadership): its second
# "Became leader" line.
deadline=$(($(date +%s) + 30))
until (($(grep -cF "Became leader of paused-0" "$KQ_LOCAL_DIR/broker-1.log") >= 2)); do
    (($(date +%s) < deadline)) || kt_fail "broker 1 did not log its new leadership of paused-0 within 30 s"
    sleep 0.25
done
echo "broker 1: $(grep -F "Became leader of paused-0" "$KQ_LOCAL_DIR/broker-1.log" | tail -n 1 | msg_of)"
kd_consume --print-offsets
kt_assert_eq "records read from broker 1 as the leader" "$all" "$KD_OUT"
kt_pass
