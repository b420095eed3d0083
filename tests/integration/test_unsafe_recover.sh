#!/usr/bin/env bash
# kq metadata-quorum unsafe-recover (docs/operations.md): a 3-voter dynamic quorum loses two
# controllers for good. The command refuses while the node runs, and while it and another
# voter could still form a quorum; with both others gone (and 'yes' not typed) it changes
# nothing; with --yes it makes the survivor the only voter under a new directory id. Started, the
# survivor leads, keeps every record it had (all the committed ones: it held the high
# watermark) and takes a new controller with add-controller.
# usage: test_unsafe_recover.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" unsafe_recover 28600


recover() { # NODE ARGS... -> sets OUT, returns the exit status
    local i=$1 rc=0
    shift
    OUT=$(timeout 60 "$KT_KQ" metadata-quorum unsafe-recover --config "$(kt_config "$i")" "$@" </dev/null 2>&1) || rc=$?
    kt_log "unsafe-recover on node $i $*: exit $rc: $OUT"
    return "$rc"
}

KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid) || kt_fail "random-uuid failed"
KT_NODES=3
initial=""
for i in 1 2 3; do
    initial+="${initial:+,}$i@127.0.0.1:$(kt_port "$i"):$("$KT_KQ" storage random-uuid)"
done
for i in 1 2 3 4; do
    kt_dyn_config "$i" "1 2 3"
done
for i in 1 2 3; do
    "$KT_KQ" storage format --config "$(kt_config "$i")" --cluster-id "$KT_CLUSTER_ID" \
        --initial-controllers "$initial" >/dev/null || kt_fail "format of node $i failed"
done
kt_start_all
kt_wait_for_leader 60
off=$(kt_write 1 2 3 -- --count 20)
kt_wait_hw_above 30 "$off" 1 2 3
hw=$KT_HW

# Refused while the node itself runs.
recover 1 --yes && kt_fail "unsafe-recover on a running node succeeded"
kt_assert_contains "unsafe-recover on a running node" "stop it first" "$OUT"
# Node 1 stopped, node 2 still up: the two of them are a quorum: refused.
kt_stop 1
kt_kill 3
recover 1 --yes && kt_fail "unsafe-recover while a quorum can form succeeded"
kt_assert_contains "unsafe-recover with node 2 up" "the quorum is not lost" "$OUT"
# Both others lost for good. Without --yes and without 'yes' typed: nothing changes.
kt_kill 2
recover 1 && kt_fail "unsafe-recover without confirmation succeeded"
kt_assert_contains "unsafe-recover without confirmation" "Nothing was changed" "$OUT"
kt_assert_contains "what survives" "This node keeps every record of its log" "$OUT"
recover 1 --yes || kt_fail "unsafe-recover failed: $OUT"
kt_assert_contains "unsafe-recover" "Recovered: node 1 is the only voter" "$OUT"

kt_start 1
kt_wait_for_leader 60 1
kt_describe 1 || kt_fail "describe failed: $KT_OUT"
voters=$(grep '^CurrentVoters:' <<<"$KT_OUT" | grep -o '"id": [0-9]*' | awk '{print $2}' | paste -sd,)
kt_assert_eq "voters after the recovery" "1" "$voters"
off2=$(kt_write 1 -- --count 5)
kt_assert_gt "a write after the recovery" "$off2" "$off"
# Every committed record survived: the survivor's log up to the old high watermark holds the
# 20 records written before (offsets off..off+19).
kt_stop 1
kt_log_dump 1 "$KT_DIR/dump.txt" >/dev/null
missing=0
for ((o = off; o < off + 20; o++)); do
    grep -q "^offset=$o .*Opaque" "$KT_DIR/dump.txt" || missing=$((missing + 1))
done
kt_assert_eq "committed records missing after the recovery (high watermark was $hw)" 0 "$missing"
grep -q "unsafe_recovery=true" "$KT_DIR/dump.txt" || kt_fail "no unsafe-recovery Voters record in the log"

# A new controller joins the recovered quorum.
kt_start 1
kt_wait_for_leader 60 1
"$KT_KQ" storage format --config "$(kt_config 4)" --cluster-id "$KT_CLUSTER_ID" --no-initial-controllers >/dev/null ||
    kt_fail "format of node 4 failed"
kt_start 4
out=$(timeout 90 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap 1)" \
    --command-config "$(kt_config 4)" add-controller 2>&1) || kt_fail "add-controller 4 failed: $out"
kt_assert_contains "add-controller 4" "Added controller 4" "$out"
off3=$(kt_write 1 4 -- --count 5)
kt_wait_hw_above 30 "$off3" 1 4
kt_pass
