#!/usr/bin/env bash
# A controller whose directory was formatted with another cluster id than its peers (the
# classic mistake: formatting one node with a fresh random-uuid) must not join or disturb the
# quorum: the other two elect a leader and commit, the odd node never replicates their log,
# and it exits 2 with a message naming the cluster ids (as a daemon given a wrong cluster id
# must). Its directory is left untouched for the operator to inspect.
# usage: test_cluster_mismatch.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" cluster_mismatch 24900

kt_cluster 3
other_id=$("$KT_KQ" storage random-uuid)
rm -rf "$KT_DIR/node-3"
kt_format 3 "$other_id"
kt_log "node 3 formatted with cluster $other_id, nodes 1 and 2 with $KT_CLUSTER_ID"
kt_start_all
kt_wait_for_leader 60 1 2
leader=$KT_LEADER
kt_assert_ne "leader" 3 "$leader"
kt_wait_hw_above 30 0 1 2
kt_assert_eq "ClusterId reported by the quorum" "$KT_CLUSTER_ID" "$(kt_field ClusterId <<<"$KT_OUT")"
off=$(kt_write 1 2 -- --count 3)
kt_assert_ge "offset committed by nodes 1 and 2" "$(tail -n 1 <<<"$off")" 0

# Node 3 must give up with exit 2 and say why.
if ! kt_wait_exit 3 60; then
    kt_fail "node 3 (cluster $other_id) still runs 60 s after start among peers of cluster $KT_CLUSTER_ID; expected exit 2"
fi
kt_assert_eq "exit status of the node from another cluster" 2 "$KT_RC"
if ! grep -qF -e "$other_id" -e "$KT_CLUSTER_ID" "$KT_DIR/node-3.log"; then
    kt_fail "node 3's output does not name the cluster ids: $(tail -n 10 "$KT_DIR/node-3.log")"
fi
kt_log "ok: node 3 said: $(grep -F -e "$other_id" -e "$KT_CLUSTER_ID" "$KT_DIR/node-3.log" | tail -n 1)"

# Nodes 1 and 2 are unaffected, and node 3 never received their records.
kt_status 1 2 || kt_fail "describe failed: $KT_OUT"
kt_assert_eq "leader after node 3 left" "$leader" "$KT_LEADER"
kt_wait_hw_above 30 "$KT_HW" 1 2
kt_log_dump 3 "$KT_DIR/dump-3.txt" >/dev/null
if grep -q . "$KT_DIR/dump-3.txt"; then
    kt_fail "node 3 (another cluster) holds records after meeting cluster $KT_CLUSTER_ID: $(head -n 3 "$KT_DIR/dump-3.txt")"
fi
kt_pass
