#!/usr/bin/env bash
# Three controllers elect exactly one leader; every node reports the same LeaderId and
# LeaderEpoch; describe --replication lists the leader first; --json output parses.
# usage: test_election.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" election 24100

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
kt_log "leader $KT_LEADER epoch $KT_EPOCH after ${KT_WAITED_MS} ms"

# Every node, asked alone, must report the same leader and epoch (followers may need a moment
# to learn the leader, so wait for agreement rather than sampling once).
deadline=$(($(date +%s) + 30))
while :; do
    seen=()
    for i in 1 2 3; do
        if kt_status "$i"; then
            seen+=("$KT_LEADER/$KT_EPOCH")
        else
            seen+=("none")
        fi
    done
    if [[ ${seen[0]} != none && ${seen[0]} == "${seen[1]}" && ${seen[0]} == "${seen[2]}" &&
        ${seen[0]%/*} -ge 1 ]]; then
        break
    fi
    (($(date +%s) < deadline)) || kt_fail "nodes 1,2,3 never agreed on leader/epoch; last: ${seen[*]}"
    sleep 0.2
done
leader=${seen[0]%/*}
epoch=${seen[0]#*/}
kt_log "all three report leader $leader epoch $epoch"
kt_assert_gt "LeaderEpoch" "$epoch" 0

# Exactly one leader: the --replication table has one Leader row, and it is the first row.
kt_describe 1 2 3 -- --replication || kt_fail "describe --replication failed: $KT_OUT"
echo "$KT_OUT" >&2
header=$(head -n 1 <<<"$KT_OUT")
for col in NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status; do
    kt_assert_contains "replication header" "$col" "$header"
done
rows=$(tail -n +2 <<<"$KT_OUT" | grep -E '^[[:space:]]*[0-9]' || true)
kt_assert_eq "replication rows" 3 "$(grep -c . <<<"$rows")"
kt_assert_eq "rows with Status Leader" 1 "$(awk '$NF == "Leader"' <<<"$rows" | grep -c . || true)"
kt_assert_eq "rows with Status Follower" 2 "$(awk '$NF == "Follower"' <<<"$rows" | grep -c . || true)"
first=$(head -n 1 <<<"$rows")
kt_assert_eq "first row NodeId" "$leader" "$(awk '{print $1}' <<<"$first")"
kt_assert_eq "first row Status" Leader "$(awk '{print $NF}' <<<"$first")"
kt_assert_eq "NodeIds in table" "1 2 3" "$(awk '{print $1}' <<<"$rows" | sort -n | tr '\n' ' ' | sed 's/ $//')"

# --status has the eight Kafka fields.
kt_describe 1 2 3 || kt_fail "describe --status failed: $KT_OUT"
echo "$KT_OUT" >&2
for f in ClusterId LeaderId LeaderEpoch HighWatermark MaxFollowerLag MaxFollowerLagTimeMs \
    CurrentVoters CurrentObservers; do
    v=$(kt_field "$f" <<<"$KT_OUT")
    [[ -n $v ]] || kt_fail "describe --status has no '$f:' line: $KT_OUT"
done
kt_assert_eq "ClusterId" "$KT_CLUSTER_ID" "$(kt_field ClusterId <<<"$KT_OUT")"
kt_assert_contains "CurrentVoters" "CONTROLLER://127.0.0.1:$(kt_port 2)" \
    "$(kt_field CurrentVoters <<<"$KT_OUT")"
# Labels are padded to a 24-character column as in Kafka.
kt_assert_eq "value column of LeaderId line" "LeaderId:               " \
    "$(grep '^LeaderId:' <<<"$KT_OUT" | cut -c1-24)"

# --json parses and carries the same leader; --replication --json too.
kt_describe 1 2 3 -- --status --json || kt_fail "describe --status --json failed: $KT_OUT"
json_leader=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
def find(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k.lower() in ("leaderid", "leader_id"):
                return v
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    return None
print(find(d))
' <<<"$KT_OUT") || kt_fail "describe --status --json is not valid JSON: $KT_OUT"
kt_assert_eq "leader id in --json output" "$leader" "$json_leader"
kt_describe 1 2 3 -- --replication --json || kt_fail "describe --replication --json failed: $KT_OUT"
python3 -c 'import json, sys; json.load(sys.stdin)' <<<"$KT_OUT" ||
    kt_fail "describe --replication --json is not valid JSON: $KT_OUT"
kt_log "ok: --json output parses"

# All processes are still alive and a graceful stop of the leader exits 0.
for i in 1 2 3; do
    kt_alive "$i" || kt_fail "node $i exited unexpectedly"
done
kt_stop "$leader"
kt_pass
