#!/usr/bin/env bash
# A minority must not elect: with 1 of 3 voters running, no leader is reported for 8 s (the
# node keeps answering describe, or answers that there is no leader). Starting a second
# voter then produces a leader, so the test can tell the two situations apart.
# usage: test_minority.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" minority 24500

kt_cluster 3
kt_start 1
answers=0
deadline=$(($(date +%s) + 8))
while (($(date +%s) < deadline)); do
    if kt_status 1; then
        answers=$((answers + 1))
        if ((KT_LEADER >= 0)); then
            kt_fail "a lone voter of 3 reports a leader: $KT_OUT"
        fi
    fi
    kt_alive 1 || kt_fail "node 1 exited while alone"
    sleep 0.3
done
kt_log "ok: no leader for 8 s with 1 of 3 voters ($answers describe answers without a leader; last: $(head -c 200 <<<"$KT_OUT"))"

# With a second voter there is a majority: a leader appears and commits.
kt_start 2
kt_wait_for_leader 60 1 2
kt_log "with 2 of 3 voters: leader $KT_LEADER epoch $KT_EPOCH"
kt_wait_hw_above 30 0 1 2
kt_pass
