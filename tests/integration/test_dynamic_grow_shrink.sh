#!/usr/bin/env bash
# Dynamic voters (KIP-853): three controllers formatted with the same --initial-controllers
# list grow to five (add-controller of two nodes formatted --no-initial-controllers) and
# shrink back to three (remove-controller of two of the first ones, the leader among them
# when it is) while a writer appends records through whichever controller leads. Every write
# acknowledged is in the log afterwards.
# usage: test_dynamic_grow_shrink.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" dynamic_grow_shrink 28500


dyn_format() { # NODE OPTION...
    local i=$1 out
    shift
    out=$("$KT_KQ" storage format --config "$(kt_config "$i")" --cluster-id "$KT_CLUSTER_ID" "$@" 2>&1) ||
        kt_fail "kq storage format of node $i failed: $out"
}

voters() { # ASK...
    kt_describe "$@" || kt_fail "describe --status failed: $KT_OUT"
    grep '^CurrentVoters:' <<<"$KT_OUT" | grep -o '"id": [0-9]*' | awk '{print $2}' | sort -n | paste -sd,
}

quorum_cmd() { # WHAT ARGS... (asks every node)
    local what=$1 out
    shift
    out=$(timeout 90 "$KT_KQ" metadata-quorum --bootstrap-controller "$(kt_bootstrap 1 2 3 4 5)" \
        --timeout-ms 60000 "$@" 2>&1) || kt_fail "$what failed: $out"
    kt_log "$out"
}

KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid) || kt_fail "random-uuid failed"
KT_NODES=5
initial=""
declare -A DIR
for i in 1 2 3; do
    DIR[$i]=$("$KT_KQ" storage random-uuid)
    initial+="${initial:+,}$i@127.0.0.1:$(kt_port "$i"):${DIR[$i]}"
done
for i in 1 2 3 4 5; do
    kt_dyn_config "$i" "1 2 3"
done
# the list must name the node being formatted
out=$("$KT_KQ" storage format --config "$(kt_config 4)" --cluster-id "$KT_CLUSTER_ID" \
    --initial-controllers "$initial" 2>&1) && kt_fail "format of a node the list does not name succeeded"
kt_assert_contains "node 4 formatted with a list without it" "does not list this node" "$out"
for i in 1 2 3; do
    dyn_format "$i" --initial-controllers "$initial"
done
dyn_format 4 --no-initial-controllers
dyn_format 5 --no-initial-controllers
kt_start_all
kt_wait_for_leader 60 1 2 3
kt_assert_eq "initial voters" "1,2,3" "$(voters 1 2 3)"
kt_describe 1 2 3
for i in 1 2 3; do # the directory ids of the list
    kt_assert_contains "node $i's directory id" "{\"id\": $i, \"directoryId\": \"${DIR[$i]}\"" "$KT_OUT"
done

# The writer: one record per request, through any controller, until told to stop.
acked=$KT_DIR/acked.txt
: >"$acked"
(
    while [[ ! -e $KT_DIR/stop-writer ]]; do
        "$KT_KQ" metadata-write --bootstrap-controller "$(kt_bootstrap 1 2 3 4 5)" --timeout-ms 20000 \
            --count 1 --size 40 2>/dev/null | sed -n 's/^written at offset \([0-9]*\) .*/\1/p' >>"$acked"
    done
) &
writer=$!

quorum_cmd "add-controller 4" --command-config "$(kt_config 4)" add-controller
quorum_cmd "add-controller 5" --command-config "$(kt_config 5)" add-controller
kt_assert_eq "voters after growing" "1,2,3,4,5" "$(voters 1 2 3 4 5)"
n_grown=$(wc -l <"$acked")
quorum_cmd "remove-controller 1" remove-controller --controller-id 1 --controller-directory-id "${DIR[1]}"
kt_wait_for_leader 30 2 3 4 5
quorum_cmd "remove-controller 2" remove-controller --controller-id 2 --controller-directory-id "${DIR[2]}"
kt_wait_for_leader 30 3 4 5
kt_assert_eq "voters after shrinking" "3,4,5" "$(voters 3 4 5)"
kt_kill 1
kt_kill 2
sleep 2 # the writer goes on against the three that are left
touch "$KT_DIR/stop-writer"
wait "$writer"
n=$(wc -l <"$acked")
kt_log "writes acknowledged: $n ($n_grown while growing)"
kt_assert_gt "writes acknowledged during the changes" "$n" 5
last=$(tail -n 1 "$acked")
kt_wait_hw_above 30 "$last" 3 4 5

# Nothing acknowledged is lost: each offset holds an Opaque record on every voter left.
for i in 3 4 5; do
    kt_log_dump "$i" "$KT_DIR/dump-$i.txt" >/dev/null
    missing=0
    while read -r off; do
        grep -q "^offset=$off .*Opaque" "$KT_DIR/dump-$i.txt" || missing=$((missing + 1))
    done <"$acked"
    kt_assert_eq "acknowledged writes missing on node $i" 0 "$missing"
done
kt_pass
