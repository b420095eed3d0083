#!/usr/bin/env bash
# Controller failover under tool traffic: while a loop runs `kq topics --create`, `--describe`
# and `kq cluster describe` (each retried until it succeeds, at most 60 s) and 3 kq-fake-broker
# processes heartbeat, the active controller is killed with SIGKILL and restarted, twice.
# Checked: every tool command eventually succeeds (the tools follow NOT_CONTROLLER hints), the
# loop makes progress after each failover, no broker is fenced or re-registers (a new active
# controller grants fresh sessions), and after things settle every controller gives the same
# `kq topics --describe` and `kq cluster describe` answer and the three logs (kq log-dump) are
# identical up to the common committed prefix.
# usage: test_ctl_failover.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_failover 25400

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
for b in 1 2 3; do
    kt_broker_start "$b"
done
for b in 1 2 3; do
    kt_wait_broker_fenced "$b" false 60
done
kt_kq_ok cluster describe --json
epochs0=$(kt_json_brokers | awk '{print $1, $2}' | paste -sd'|')
kt_log "broker epochs: $epochs0"

LOOP_LOG=$KT_DIR/loop.log
STOP=$KT_DIR/loop.stop

# loop_cmd WHAT ARGS...: retries `kq ARGS` until it exits 0 (or, for a retried create, says
# the topic already exists: the first attempt was committed but its answer was lost).
loop_cmd() {
    local what=$1 start attempt=0 out rc
    shift
    start=$(kt_now_ms)
    while :; do
        attempt=$((attempt + 1))
        rc=0
        out=$(timeout 60 "$KT_KQ" "$@" --bootstrap-controller "$(kt_bootstrap 1 2 3)" 2>&1) || rc=$?
        if [[ $rc -eq 0 ]] || [[ $attempt -gt 1 && $what == create* && $out == *"already exists"* ]]; then
            echo "$(date +%T.%3N) ok $what attempts=$attempt ms=$(($(kt_now_ms) - start))" >>"$LOOP_LOG"
            return 0
        fi
        if (($(kt_now_ms) - start > 60000)); then
            echo "$(date +%T.%3N) FAIL $what attempts=$attempt exit=$rc: $(head -c 300 <<<"$out" | tr '\n' ' ')" >>"$LOOP_LOG"
            return 1
        fi
        sleep 0.2
    done
}

traffic() {
    local i=0
    while [[ ! -e $STOP ]]; do
        i=$((i + 1))
        loop_cmd "create loop-$i" topics --create --topic "loop-$i" --partitions 2 --replication-factor 3 || return 1
        loop_cmd "describe loop-$i" topics --describe --topic "loop-$i" || return 1
        loop_cmd "cluster describe $i" cluster describe || return 1
    done
}

creates_done() {
    grep -c ' ok create' "$LOOP_LOG" 2>/dev/null || true
}

# wait_progress N: waits until N more topics were created by the loop.
wait_progress() {
    local target=$(($(creates_done) + $1)) deadline=$(($(date +%s) + 60))
    while (($(creates_done) < target)); do
        grep -q ' FAIL ' "$LOOP_LOG" 2>/dev/null && kt_fail "tool traffic failed: $(grep ' FAIL ' "$LOOP_LOG")"
        (($(date +%s) < deadline)) || kt_fail "tool traffic made no progress for 60 s ($(creates_done) creates); last: $(tail -n 3 "$LOOP_LOG")"
        sleep 0.2
    done
}

: >"$LOOP_LOG"
traffic &
TRAFFIC_PID=$!
wait_progress 3

for round in 1 2; do
    kt_wait_for_leader 60
    victim=$KT_LEADER
    epoch=$KT_EPOCH
    kt_log "round $round: kill -9 of the active controller $victim (epoch $epoch) after $(creates_done) creates"
    kt_kill "$victim"
    survivors=()
    for i in 1 2 3; do
        [[ $i -ne $victim ]] && survivors+=("$i")
    done
    kt_wait_for_leader 60 --min-epoch "$epoch" "${survivors[@]}"
    kt_log "round $round: new active controller $KT_LEADER (epoch $KT_EPOCH)"
    wait_progress 2
    kt_start "$victim"
    wait_progress 2
done

touch "$STOP"
rc=0
wait "$TRAFFIC_PID" || rc=$?
grep ' FAIL ' "$LOOP_LOG" && kt_fail "tool traffic failed: $(grep ' FAIL ' "$LOOP_LOG")"
kt_assert_eq "exit status of the traffic loop" 0 "$rc"
n_ok=$(grep -c ' ok ' "$LOOP_LOG")
retried=$(grep -c 'attempts=[2-9]' "$LOOP_LOG" || true)
slowest=$(sed -n 's/.* ms=\([0-9]*\)$/\1/p' "$LOOP_LOG" | sort -n | tail -n 1)
awk '{ split($NF, a, "="); if (a[2] + 0 > 3000) print "  slow (not a failure): " $0 }' "$LOOP_LOG" >&2
kt_log "tool traffic: $n_ok commands succeeded ($(creates_done) creates), $retried needed retries, slowest took ${slowest} ms"

# No broker was fenced or re-registered.
kt_kq_ok cluster describe --json
kt_assert_eq "broker epochs after two failovers" "$epochs0" "$(kt_json_brokers | awk '{print $1, $2}' | paste -sd'|')"
kt_assert_eq "fenced flags after two failovers" "false false false" "$(kt_json_brokers | awk '{print $3}' | xargs)"
for b in 1 2 3; do
    changes=$(grep -E 'fenced=true|registering again|^registered' "$(kt_broker_out "$b")" | tail -n +2 || true)
    ! grep -qE 'fenced=true|registering again' <<<"$changes" ||
        kt_fail "broker $b was fenced or re-registered during the failovers: $changes"
done
kt_log "ok: no broker was fenced or re-registered"

# Every controller gives the same answer once the restarted one has caught up.
kt_wait_for_leader 60
kt_wait_hw_above 60 0 1 2 3
leader=$KT_LEADER
for i in 1 2 3; do
    deadline=$(($(date +%s) + 60))
    while :; do
        if kt_describe "$leader" -- --replication; then
            lag=$(awk -v id="$i" '$1 == id {print $4}' <<<"$KT_OUT")
            [[ $lag == 0 ]] && break
        fi
        (($(date +%s) < deadline)) || kt_fail "node $i did not catch up within 60 s: $KT_OUT"
        sleep 0.2
    done
done
kt_kq_ok topics --describe
ref=$KT_OUT
kt_assert_eq "topics in the image" "$(creates_done)" "$(grep -c '^Topic: loop-' <<<"$ref")"
for i in 1 2 3; do
    KT_KQ_BOOTSTRAP=$(kt_bootstrap "$i") kt_kq_ok topics --describe
    kt_assert_eq "topics --describe asked at node $i (lines)" "$(wc -l <<<"$ref")" "$(wc -l <<<"$KT_OUT")"
    [[ $KT_OUT == "$ref" ]] || kt_fail "topics --describe asked at node $i differs: $(diff <(echo "$ref") <(echo "$KT_OUT") | head -n 10)"
done

# The logs agree up to the common committed prefix.
kt_status "$leader" || kt_fail "describe --status failed: $KT_OUT"
bound=$KT_HW
for i in 1 2 3; do
    end=$(kt_log_dump "$i" "$KT_DIR/dump-$i.txt")
    ((end < bound)) && bound=$end
done
kt_assert_gt "common committed prefix" "$bound" 10
kt_records_below "$KT_DIR/dump-1.txt" "$bound" >"$KT_DIR/prefix-1.txt"
for i in 2 3; do
    kt_records_below "$KT_DIR/dump-$i.txt" "$bound" >"$KT_DIR/prefix-$i.txt"
    if ! cmp -s "$KT_DIR/prefix-1.txt" "$KT_DIR/prefix-$i.txt"; then
        kt_fail "log of node $i differs from node 1 below offset $bound: $(diff "$KT_DIR/prefix-1.txt" "$KT_DIR/prefix-$i.txt" | head -n 10)"
    fi
done
kt_log "ok: the three logs are identical below offset $bound ($(wc -l <"$KT_DIR/prefix-1.txt") records)"
kt_pass
