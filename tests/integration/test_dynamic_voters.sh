#!/usr/bin/env bash
# Dynamic voters (KIP-853) on real processes: one controller formatted --standalone, two with
# --no-initial-controllers that find the leader through controller.quorum.bootstrap.servers,
# catch up as observers and are added with kq metadata-quorum add-controller; the first one is
# then killed for good and the other two keep committing. Then a voter is removed and killed
# (nothing changes), and a controller whose directory was wiped comes back under the same id
# with a new directory id (remove the old key, format, start, add) while the quorum serves.
# usage: test_dynamic_voters.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" dynamic_voters 28400


# dyn_format NODE OPTION...
dyn_format() {
    local i=$1 out
    shift
    out=$("$KT_KQ" storage format --config "$(kt_config "$i")" --cluster-id "$KT_CLUSTER_ID" "$@" 2>&1) ||
        kt_fail "kq storage format of node $i ($*) failed: $out"
    kt_log "format node $i: $out"
}

# voters NODE...: the ids in CurrentVoters (sorted, comma-separated), asked of these nodes
voters() {
    kt_describe "$@" || kt_fail "describe --status failed: $KT_OUT"
    grep '^CurrentVoters:' <<<"$KT_OUT" | grep -o '"id": [0-9]*' | awk '{print $2}' | sort -n | paste -sd,
}

# dir_of NODE: its directory id, from describe --status asked of ASK...
dir_of() {
    local i=$1
    shift
    kt_describe "$@" || kt_fail "describe --status failed: $KT_OUT"
    grep '^CurrentVoters:' <<<"$KT_OUT" | grep -o "{\"id\": $i, \"directoryId\": \"[A-Za-z0-9_-]*\"" |
        sed 's/.*directoryId": "//; s/"$//'
}

BROKER=101
broker_port() { echo $((KT_BASE_PORT + 8)); }
broker_start() { # a broker agent that knows the controllers from bootstrap servers only
    {
        echo "process.roles=broker"
        echo "node.id=$BROKER"
        echo "controller.quorum.bootstrap.servers=$(kt_bootstrap 1)"
        echo "listeners=PLAINTEXT://127.0.0.1:$(broker_port)"
        echo "log.dirs=$KT_DIR/broker"
        echo "broker.heartbeat.interval.ms=1000"
        echo "broker.session.timeout.ms=4000"
        echo "log.level=${KQ_TEST_LOG_LEVEL:-info}"
    } >"$KT_DIR/broker.properties"
    "$KT_KQ" storage format --config "$KT_DIR/broker.properties" --cluster-id "$KT_CLUSTER_ID" >/dev/null ||
        kt_fail "format of the broker failed"
    "$KT_BIN/kq-broker-agent" --config "$KT_DIR/broker.properties" >>"$KT_DIR/broker.log" 2>&1 &
    KT_BPID[1]=$!
}
# broker_unfenced ASK...: waits until the broker is registered and unfenced, as the active
# controller says
broker_unfenced() {
    local deadline=$(($(date +%s) + 60)) out=""
    while (($(date +%s) < deadline)); do
        out=$(timeout 20 "$KT_KQ" cluster --bootstrap-controller "$(kt_bootstrap "$@")" --timeout-ms 5000             describe 2>&1) || true
        grep -q "^Broker: $BROKER.*Fenced: false" <<<"$out" && return 0
        sleep 0.5
    done
    kt_fail "broker $BROKER is not registered and unfenced: $out"
}

add_controller() { # NODE ASK...
    local i=$1 out
    shift
    out=$(timeout 90 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap "$@")" \
        --command-config "$(kt_config "$i")" --timeout-ms 60000 add-controller 2>&1) ||
        kt_fail "add-controller $i failed: $out"
    kt_log "$out"
    kt_assert_contains "add-controller $i" "Added controller $i with directory id" "$out"
}

remove_controller() { # NODE DIR ASK...
    local i=$1 d=$2 out
    shift 2
    out=$(timeout 90 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap "$@")" \
        --timeout-ms 60000 remove-controller --controller-id "$i" --controller-directory-id "$d" 2>&1) ||
        kt_fail "remove-controller $i failed: $out"
    kt_log "$out"
    kt_assert_contains "remove-controller $i" "Removed controller $i" "$out"
}

KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid) || kt_fail "random-uuid failed"
KT_NODES=3
for i in 1 2 3; do
    kt_dyn_config "$i" "1 2 3" broker.session.timeout.ms=4000
done

# Refusals first: a dynamic controller needs one of the three options, and only one.
out=$("$KT_KQ" storage format --config "$(kt_config 2)" --cluster-id "$KT_CLUSTER_ID" 2>&1) &&
    kt_fail "format without --standalone/--initial-controllers/--no-initial-controllers succeeded"
kt_assert_contains "format with no voter option" "give one of --standalone" "$out"
out=$("$KT_KQ" storage format --config "$(kt_config 2)" --cluster-id "$KT_CLUSTER_ID" --standalone \
    --no-initial-controllers 2>&1) && kt_fail "format with two voter options succeeded"
kt_assert_contains "format with two voter options" "exclude each other" "$out"

dyn_format 1 --standalone
dyn_format 2 --no-initial-controllers
dyn_format 3 --no-initial-controllers
kt_start_all
kt_wait_for_leader 60 1
kt_assert_eq "the standalone quorum" "1" "$(voters 1)"
broker_start
broker_unfenced 1
kt_log "broker $BROKER registered and unfenced (it knows controller 1 only as a bootstrap server)"
kt_write 1 -- --count 5 >/dev/null

# Nodes 2 and 3 fetch as observers: describe --replication shows them with the directory ids
# their format made (what add-controller sends); the broker's observer has none.
meta_dir() { sed -n 's/^directory.id=//p' "$KT_DIR/node-$1/meta.properties"; }
deadline=$(($(date +%s) + 30))
while :; do
    out=$(timeout 20 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap 1)" \
        --timeout-ms 5000 describe --replication 2>&1) || true
    obs2=$(awk '$1 == 2 && /Observer/ {print $2}' <<<"$out")
    obs3=$(awk '$1 == 3 && /Observer/ {print $2}' <<<"$out")
    [[ -n $obs2 && -n $obs3 ]] && break
    (($(date +%s) < deadline)) || kt_fail "nodes 2 and 3 are not observers of node 1: $out"
    sleep 0.5
done
kt_log "$out"
kt_assert_eq "observer 2's directory id in describe --replication" "$(meta_dir 2)" "$obs2"
kt_assert_eq "observer 3's directory id in describe --replication" "$(meta_dir 3)" "$obs3"
kt_assert_eq "the broker's directory id in describe --replication" "AAAAAAAAAAAAAAAAAAAAAA" \
    "$(awk -v b="$BROKER" '$1 == b {print $2}' <<<"$out")"
out=$(timeout 20 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap 1)" \
    --timeout-ms 5000 describe --replication --json 2>&1) || kt_fail "describe --replication --json: $out"
kt_assert_contains "observer 2 as a candidate voter (--json)" \
    "\"nodeId\":2,\"directoryId\":\"$(meta_dir 2)\"" "$out"
kt_assert_eq "candidate voters among the observers (--json)" "2" \
    "$(grep -o '"candidateVoter":true' <<<"$out" | wc -l)"
kt_assert_contains "the broker is no candidate voter (--json)" "\"candidateVoter\":false" "$out"

# add-controller waits until each has caught up.
add_controller 2 1
add_controller 3 1
kt_assert_eq "voters after two add-controller" "1,2,3" "$(voters 1)"
d1=$(dir_of 1 1)
d2=$(dir_of 2 1)
d3=$(dir_of 3 1)
kt_log "directory ids: 1=$d1 2=$d2 3=$d3"
[[ ${#d1} -eq 22 && ${#d2} -eq 22 && ${#d3} -eq 22 ]] || kt_fail "describe --status lacks directory ids: $KT_OUT"
off=$(kt_write 1 -- --count 5)
kt_wait_hw_above 30 "$off" 2 3

# The first controller dies for good: the other two elect a leader and keep committing.
kt_kill 1
kt_wait_for_leader 60 --not 1 2 3
off2=$(kt_write 2 3 -- --count 5)
kt_assert_gt "offset written after node 1 died" "$off2" "$off"
kt_wait_hw_above 30 "$off2" 2 3
# the broker follows the new leader (learnt from the voter set in the log) and stays unfenced
# past a session timeout (4 s) of the new active controller
sleep 6
broker_unfenced 2 3
grep -q "controllers from the voter set in force" "$KT_DIR/broker.log" ||
    kt_fail "the broker never took the controllers from the voter set"

# Node 1 comes back as a voter, then is removed and killed: nothing changes for the others.
kt_start 1
kt_wait_hw_above 60 "$off2" 1
remove_controller 1 "$d1" 2 3
kt_wait_for_leader 30 2 3
kt_assert_eq "voters after remove-controller 1" "2,3" "$(voters 2 3)"
kt_kill 1
off3=$(kt_write 2 3 -- --count 5)
kt_wait_hw_above 30 "$off3" 2 3

# Replace node 3 after its directory was wiped: remove its old key (the quorum is then 2
# alone), format a new directory (same id, new directory id), start it, add it back.
kt_status 2 && kt_log "node $KT_LEADER leads before node 3 is removed (3: it removes itself and hands over)"
remove_controller 3 "$d3" 2
kt_wait_for_leader 30 2 # node 3 led and removed itself: it handed over to node 2
kt_assert_eq "voters after remove-controller 3" "2" "$(voters 2)"
kt_kill 3
rm -rf "$KT_DIR/node-3"
dyn_format 3 --no-initial-controllers
kt_start 3
off4=$(kt_write 2 -- --count 5)
add_controller 3 2
kt_assert_eq "voters after the replacement" "2,3" "$(voters 2)"
d3b=$(dir_of 3 2)
kt_assert_ne "node 3's new directory id" "$d3" "$d3b"
off5=$(kt_write 2 3 -- --count 5)
kt_assert_gt "offset written after the replacement" "$off5" "$off4"
kt_wait_hw_above 30 "$off5" 2 3
kt_pass
