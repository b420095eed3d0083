#!/usr/bin/env bash
# kraft.version 0 -> 1 on a running cluster (KIP-853): three controllers with static
# controller.quorum.voters report their directory ids and endpoints to the leader
# (UpdateRaftVoter); `kq features upgrade --feature kraft.version=1` then writes the first
# VotersRecord, after which a fourth and a fifth controller (formatted
# --no-initial-controllers, found through controller.quorum.bootstrap.servers) are added.
# A downgrade is refused.
# usage: test_kraft_upgrade.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" kraft_upgrade 28700

features() { # ARGS...: sets OUT, returns the exit status
    local rc=0
    OUT=$(timeout 60 "$KT_KQ" features --bootstrap-controller "$(kt_bootstrap 1 2 3)" "$@" 2>&1) || rc=$?
    return "$rc"
}

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
off=$(kt_write 1 2 3 -- --count 5)
features describe || kt_fail "features describe failed: $OUT"
kt_assert_contains "kraft.version before the upgrade" "Feature: kraft.version	SupportedMinVersion: 0	SupportedMaxVersion: 1	FinalizedVersionLevel: 0" "$OUT"

# Each static voter reports itself every 3 fetch timeouts (6 s): retry until all have.
deadline=$(($(date +%s) + 60))
until features upgrade --feature kraft.version=1; do
    kt_log "upgrade not yet: $OUT"
    (($(date +%s) < deadline)) || kt_fail "kraft.version upgrade never succeeded: $OUT"
    sleep 2
done
kt_log "upgrade: $OUT"
# The first VotersRecord: every voter with its directory id (read from its store).
deadline=$(($(date +%s) + 30))
while :; do
    kt_describe 1 2 3 || kt_fail "describe failed: $KT_OUT"
    n=$(grep '^CurrentVoters:' <<<"$KT_OUT" | grep -o '"directoryId"' | wc -l)
    ((n == 3)) && break
    (($(date +%s) < deadline)) || kt_fail "voters without directory ids after the upgrade: $KT_OUT"
    sleep 0.5
done
for i in 1 2 3; do
    d=$(sed -n 's/^directory.id=//p' "$KT_DIR/node-$i/meta.properties")
    kt_assert_contains "node $i's directory id in the VotersRecord" "{\"id\": $i, \"directoryId\": \"$d\"" "$KT_OUT"
done
features describe || kt_fail "features describe failed: $OUT"
kt_assert_contains "kraft.version in features describe" "Feature: kraft.version	SupportedMinVersion: 0	SupportedMaxVersion: 1	FinalizedVersionLevel: 1" "$OUT"
features downgrade --feature kraft.version=0 && kt_fail "a kraft.version downgrade succeeded"
kt_log "downgrade refused: $OUT"

# Two more controllers join the upgraded quorum.
KT_NODES=5
for i in 4 5; do
    kt_dyn_config "$i" "1 2 3"
    "$KT_KQ" storage format --config "$(kt_config "$i")" --cluster-id "$KT_CLUSTER_ID" \
        --no-initial-controllers >/dev/null || kt_fail "format of node $i failed"
    kt_start "$i"
    out=$(timeout 90 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap 1 2 3)" \
        --command-config "$(kt_config "$i")" add-controller 2>&1) || kt_fail "add-controller $i failed: $out"
    kt_log "$out"
done
kt_describe 1 2 3 || kt_fail "describe failed: $KT_OUT"
voters=$(grep '^CurrentVoters:' <<<"$KT_OUT" | grep -o '"id": [0-9]*' | awk '{print $2}' | sort -n | paste -sd,)
kt_assert_eq "voters after the upgrade and two add-controller" "1,2,3,4,5" "$voters"
off2=$(kt_write 1 2 3 4 5 -- --count 5)
kt_assert_gt "a write with five voters" "$off2" "$off"
kt_wait_hw_above 30 "$off2" 1 2 3 4 5
kt_pass
