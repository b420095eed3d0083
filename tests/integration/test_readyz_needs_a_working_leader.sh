#!/usr/bin/env bash
# A controller's /readyz says ready only while it is part of a working quorum (issue 8, item 8):
# the leader, or a follower whose leader answered a Fetch within
# controller.quorum.fetch.timeout.ms. 3 voters; the leader and one follower are killed (kill -9):
# the survivor cannot win an election (it stays prospective), and must answer 503 with one reason (one "not ready: " prefix) within a few fetch timeouts, with
# kq_raft_leader_fetch_age_seconds -1 or above the fetch timeout. A killed node restarts: a
# leader is elected and the survivor is ready again.
# usage: test_readyz_needs_a_working_leader.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" readyz_needs_a_working_leader 27500

mport() { echo $((KT_BASE_PORT + 3 + $1)); } # metrics of node i: BASE+4..BASE+6
kt_cluster 3
for i in 1 2 3; do
    kt_set_prop "$(kt_config "$i")" metrics.listener "127.0.0.1:$(mport "$i")"
done
kt_start_all
kt_wait_for_leader 30
leader=$KT_LEADER

# wait_ready NODE TIMEOUT_S WANT_CODE: poll /readyz until it answers WANT_CODE; R = "CODE BODY".
wait_ready() {
    local deadline=$(($(date +%s) + $2))
    while :; do
        R=$(kt_readyz "$(mport "$1")")
        [[ ${R%% *} == "$3" ]] && return 0
        (($(date +%s) < deadline)) || kt_fail "node $1: /readyz did not answer $3 within $2 s (last: $R)"
        sleep 0.2
    done
}
for i in 1 2 3; do
    wait_ready "$i" 30 200
    kt_assert_eq "node $i /readyz with a working quorum" "200 ready" "$R"
done

others=()
for i in 1 2 3; do
    [[ $i == "$leader" ]] || others+=("$i")
done
survivor=${others[0]}
peer=${others[1]}
kt_log "leader $leader; killing it and node $peer; node $survivor stays"
t0=$(kt_now_ms)
kt_kill "$leader"
kt_kill "$peer"
wait_ready "$survivor" 20 503
kt_log "node $survivor not ready $(($(kt_now_ms) - t0)) ms after the kills: $R"
body=${R#* }
kt_assert_eq "'not ready: ' prefixes in the body" 1 "$(grep -o 'not ready: ' <<<"$body" | wc -l)"
[[ $body =~ ^not\ ready:\ (no\ leader\ known\ \(state\ [a-z]+,\ epoch\ [0-9]+\)|leader\ [0-9]+\ has\ not\ answered\ a\ Fetch) ]] ||
    kt_fail "node $survivor: unexpected /readyz reason: $body"
m=$(kt_metrics "$(mport "$survivor")")
age=$(awk '$1 == "kq_raft_leader_fetch_age_seconds" { print $2 }' <<<"$m")
lid=$(awk '$1 == "kq_raft_leader_id" { print $2 }' <<<"$m")
kt_log "node $survivor: kq_raft_leader_id $lid, kq_raft_leader_fetch_age_seconds $age"
awk -v a="$age" 'BEGIN { exit !(a == -1 || a > 2) }' ||
    kt_fail "node $survivor: kq_raft_leader_fetch_age_seconds is '$age' with no working leader (want -1 or > 2)"
# It stays not ready: sample it for 10 s more.
for ((k = 0; k < 20; k++)); do
    R=$(kt_readyz "$(mport "$survivor")")
    [[ ${R%% *} == 503 ]] || kt_fail "node $survivor: /readyz said '$R' with no working quorum"
    sleep 0.5
done

kt_start "$peer"
kt_wait_for_leader 60 "$survivor" "$peer"
wait_ready "$survivor" 30 200
kt_assert_eq "node $survivor /readyz after the quorum is back" "200 ready" "$R"
kt_pass
