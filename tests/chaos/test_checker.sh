#!/usr/bin/env bash
# tests/chaos/test_checker.sh: the chaos checker (chaos.sh --check) against made-up logs, so a
# passing chaos run means something: a clean history passes, and each kind of violation
# (lost acknowledged write, divergence in the committed prefix, falling epochs, a write
# acknowledged above the committed offset, a node missing committed records, a malformed
# command line) is reported with a message naming it. Needs no root and no controller.
# usage: test_checker.sh
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHAOS=$HERE/chaos.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kq-chaos-checker.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILS=0
CASES=0

# A clean 3-node history: offsets 0..9, epoch 1 then 2, writes of sizes 101..106.
clean() { # DIR
    local d=$1 i
    mkdir -p "$d"
    for i in 1 2 3; do
        cat >"$d/dump-$i.txt" <<'EOF'
offset=0 epoch=1 batch=0 LeaderChange leader=1 voters=1,2,3 granting=1,2
offset=1 epoch=1 batch=1 Opaque bytes=101
offset=2 epoch=1 batch=2 Opaque bytes=102
offset=3 epoch=1 batch=3 NoOp
offset=4 epoch=2 batch=4 LeaderChange leader=2 voters=1,2,3 granting=2,3
offset=5 epoch=2 batch=5 Opaque bytes=103
offset=6 epoch=2 batch=6 Opaque bytes=104
offset=7 epoch=2 batch=6 Opaque bytes=104
offset=8 epoch=2 batch=8 Opaque bytes=106
offset=9 epoch=2 batch=9 NoOp
records=10 batches=9 log_start=0 log_end=10 last_epoch=2 qstate_epoch=2 voted_id=2 leader_id=2
EOF
    done
    cat >"$d/acks-1.txt" <<'EOF'
ack 1 1 101 1 1 1000
ack 1 2 103 5 2 1001
ack 1 3 106 8 2 1002
EOF
    cat >"$d/acks-2.txt" <<'EOF'
ack 2 1 102 2 1 1000
ack 2 2 104 6 2 1001
EOF
}

# expect NAME WANT_RC NEEDLE DIR HW: runs the checker, compares exit status and output.
expect() {
    local name=$1 want=$2 needle=$3 dir=$4 hw=${5:-} out rc=0
    CASES=$((CASES + 1))
    out=$("$CHAOS" --check "$dir" ${hw:+"$hw"} 2>&1) || rc=$?
    if [[ $rc -ne $want || $out != *"$needle"* ]]; then
        echo "FAIL: $name: expected exit $want and output containing '$needle'; got exit $rc:" >&2
        # shellcheck disable=SC2001 # indent every line
        echo "$out" | sed 's/^/    /' >&2
        FAILS=$((FAILS + 1))
    else
        echo "ok: $name"
    fi
}

clean "$WORK/clean"
expect "clean history passes" 0 "result: PASS" "$WORK/clean" 10
expect "clean history, lower committed offset" 0 "5 acknowledged writes" "$WORK/clean" 9

clean "$WORK/lost"
sed -i 's/^offset=5 epoch=2 batch=5 Opaque bytes=103$/offset=5 epoch=2 batch=5 Opaque bytes=999/' \
    "$WORK/lost/dump-2.txt"
expect "acknowledged write replaced on one node" 1 \
    "LOST acknowledged write (writer 1 #2): expected epoch 2 Opaque bytes=103 at offset 5 on node 2, found epoch 2 Opaque bytes=999" \
    "$WORK/lost" 10
expect "... and the committed prefix diverges" 1 "divergence at offset 5" "$WORK/lost" 10

clean "$WORK/epoch"
sed -i 's/^offset=2 epoch=1 /offset=2 epoch=3 /' "$WORK/epoch/dump-3.txt"
expect "epoch going down in one log" 1 "node 3: epoch goes down at offset 3: 3 -> 1" "$WORK/epoch" 10
expect "... is also a lost write (wrong epoch)" 1 "found epoch 3 Opaque bytes=102" "$WORK/epoch" 10

clean "$WORK/diverge"
sed -i 's/^offset=9 epoch=2 batch=9 NoOp$/offset=9 epoch=2 batch=9 Opaque bytes=555/' \
    "$WORK/diverge/dump-1.txt"
expect "divergence of an unacknowledged committed record" 1 \
    "divergence at offset 9: node 1 has epoch 2 Opaque bytes=555, node 2 has epoch 2 NoOp" \
    "$WORK/diverge" 10
expect "the same difference beyond the committed offset is allowed" 0 "result: PASS" \
    "$WORK/diverge" 9

expect "a write acknowledged at or above the committed offset" 1 \
    "acknowledged write (writer 1 #3 size 106) at offset 8 epoch 2 is at or above the final high watermark 8" \
    "$WORK/clean" 8

clean "$WORK/short"
sed -i '/^offset=9 /d; s/log_end=10/log_end=9/' "$WORK/short/dump-2.txt"
expect "a node missing committed records" 1 "node 2: log ends at 9 below the committed offset 10" \
    "$WORK/short" 10

clean "$WORK/gone"
sed -i '/^offset=6 /d' "$WORK/gone/dump-3.txt"
expect "an acknowledged record missing from one log" 1 \
    "expected epoch 2 Opaque bytes=104 at offset 6 on node 3, found nothing" "$WORK/gone" 10

expect "--check of a missing directory is a usage error" 2 "is not a directory" "$WORK/nope" 10
expect "--check without an offset is a usage error" 2 "needs 2 value(s)" "$WORK/clean"
CASES=$((CASES + 1))
out=$("$CHAOS" --controllers 4 2>&1) && rc=0 || rc=$?
if [[ $rc -eq 2 && $out == *"--controllers must be 3 or 5, not '4'"* ]]; then
    echo "ok: --controllers 4 is refused"
else
    echo "FAIL: --controllers 4: exit $rc: $out" >&2
    FAILS=$((FAILS + 1))
fi

if [[ $FAILS -ne 0 ]]; then
    echo "FAIL: $FAILS of $CASES checker cases failed" >&2
    exit 1
fi
echo "PASS: $CASES checker cases"
