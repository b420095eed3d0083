#!/usr/bin/env bash
# Hostile-request benchmark (issue 10, item 3): what eight clients sending at once a 14 MB
# Write of 7,000,000 empty records (kq-flood --case dense-write) cost the leader of a fresh
# 3-voter quorum: its peak resident memory (VmHWM) before and after, how long the eight answers
# took, the answers, and whether it is still the leader in the same epoch 3 s later.
#
#   tests/bench/run_hostile.sh [BIN_DIR] [PARALLEL]
#
# BIN_DIR defaults to build/release/bin (build kq, kq-controller and kq-flood there first);
# PARALLEL defaults to 8. Prints one result line; docs/performance.md records the results.
# Exit status 1 if the quorum did not come up or a request went unanswered.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../../build/release/bin}
parallel=${2:-8}
# shellcheck source=tests/lib/kqtest.sh
source "$here/../lib/kqtest.sh"
kt_init "$bin" bench_hostile 29600
[[ -x $KT_BIN/kq-flood ]] || kt_fail "$KT_BIN/kq-flood is missing (build the kq-flood target)"
kt_cluster 3
kt_start_all
kt_wait_for_leader 30
leader=$KT_LEADER epoch=$KT_EPOCH
pid=${KT_PID[$leader]}
hwm() { awk '/^VmHWM/ { print $2 }' "/proc/$pid/status"; }
before=$(hwm)
t0=$(kt_now_ms)
out=$("$KT_BIN/kq-flood" --server "127.0.0.1:$(kt_port "$leader")" --case dense-write \
    --parallel "$parallel") || kt_fail "not every request was answered: $out"
took=$(($(kt_now_ms) - t0))
after=$(hwm)
answers=$(grep '^answer' <<<"$out" | sed 's/ message=.*//' | sort | uniq -c | awk '{ printf "%s%s x%s", s, $3, $1; s = ", " }')
sleep 3
kt_status 1 2 3 || true
kept=no
[[ $KT_LEADER == "$leader" && $KT_EPOCH == "$epoch" ]] && kept=yes
echo "hostile: $parallel x $(sed -n 's/^message bytes=\([0-9]*\).*/\1/p' <<<"$out") B dense writes:" \
    "leader VmHWM ${before} kB -> ${after} kB, answers in ${took} ms ($answers)," \
    "leader kept: $kept (now $KT_LEADER/$KT_EPOCH, was $leader/$epoch)"
kt_pass >/dev/null
