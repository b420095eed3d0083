#!/usr/bin/env bash
# Snapshots: with a small metadata.log.max.record.bytes.between.snapshots every controller
# writes snapshots and removes the log prefix below them; a controller whose directory is wiped
# (and re-formatted with the same cluster id and node id) rejoins through FetchSnapshot and
# ends with the same metadata image (kq_metadata_image_hash on /metrics) as the others; a
# restart of every node loads the snapshot plus the log and keeps that image.
# usage: test_ctl_snapshot.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_snapshot 25700

FAKE=$KT_BIN/kq-fake-broker
[[ -x $FAKE ]] || kt_fail "$FAKE is missing (build the kq-fake-broker target)"

metrics_port() { echo $((KT_BASE_PORT + 5 + $1)); }

# image_hash NODE: kq_metadata_image_hash from the node's /metrics ("" if unreachable).
image_hash() {
    python3 - "$(metrics_port "$1")" <<'PY' 2>/dev/null || true
import sys, urllib.request
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=2).read()
for line in body.decode().splitlines():
    if line.startswith("kq_metadata_image_hash "):
        print(line.split()[1])
PY
}

# wait_same_hash TIMEOUT_S NODES...: until every node reports one non-empty hash.
wait_same_hash() {
    local deadline=$(($(date +%s) + $1)) h first ok
    shift
    while :; do
        ok=1
        first=""
        for n in "$@"; do
            h=$(image_hash "$n")
            [[ -n $h ]] || ok=0
            [[ -z $first ]] && first=$h
            [[ $h == "$first" ]] || ok=0
        done
        if [[ $ok -eq 1 ]]; then
            KT_HASH=$first
            return 0
        fi
        (($(date +%s) < deadline)) || kt_fail "image hashes differ or are missing: $(for n in "$@"; do printf 'node %s=%s ' "$n" "$(image_hash "$n")"; done)"
        sleep 0.5
    done
}

kt_cluster 3 "metadata.log.max.record.bytes.between.snapshots=20000"
for i in 1 2 3; do
    kt_set_prop "$(kt_config "$i")" metrics.listener "127.0.0.1:$(metrics_port "$i")"
done
kt_start_all
kt_wait_for_leader 60

# Three fake brokers so that topics can be placed; their fifos stay open for the whole test.
BS=$(kt_bootstrap 1 2 3)
FAKE_PIDS=()
for b in 1 2 3; do
    mkfifo "$KT_DIR/broker-$b.in"
    "$FAKE" --bootstrap-controller "$BS" --cluster-id "$KT_CLUSTER_ID" --broker-id "$b" \
        <"$KT_DIR/broker-$b.in" >"$KT_DIR/broker-$b.out" 2>&1 &
    FAKE_PIDS+=($!)
    exec {fd}>"$KT_DIR/broker-$b.in"
done
trap 'for p in "${FAKE_PIDS[@]}"; do kill "$p" 2>/dev/null; done; kt_cleanup' EXIT
for b in 1 2 3; do
    for _ in $(seq 1 100); do
        grep -q "fenced=false" "$KT_DIR/broker-$b.out" 2>/dev/null && break
        sleep 0.2
    done
    grep -q "fenced=false" "$KT_DIR/broker-$b.out" ||
        kt_fail "fake broker $b was not unfenced: $(tail -n 3 "$KT_DIR/broker-$b.out")"
done
kt_log "3 fake brokers registered and unfenced"

for t in 1 2 3 4 5 6; do
    kt_kq_retry 30 topics --create --topic "snap-$t" --partitions 20 --replication-factor 3
done
for _ in 1 2 3 4 5; do
    kt_write 1 2 3 -- --count 20 --size 200 >/dev/null
done

# Every node writes a snapshot and removes the log prefix below it.
for i in 1 2 3; do
    for _ in $(seq 1 60); do
        grep -q 'msg="wrote snapshot"' "$KT_DIR/node-$i.log" && break
        sleep 0.5
    done
    line=$(grep 'msg="wrote snapshot"' "$KT_DIR/node-$i.log" | tail -n 1)
    [[ -n $line ]] || kt_fail "node $i wrote no snapshot"
    kt_log "node $i: ${line#*msg=}"
    grep -q 'msg="log prefix removed"' "$KT_DIR/node-$i.log" || kt_fail "node $i kept its log prefix"
done
wait_same_hash 30 1 2 3
hash_before=$KT_HASH
kt_log "image hash on all three nodes: $hash_before"

# Wipe a follower's directory: it rejoins through FetchSnapshot.
kt_status 1 2 3 || kt_fail "describe failed: $KT_OUT"
victim=3
[[ $KT_LEADER == 3 ]] && victim=2
kt_stop "$victim"
out=$("$KT_KQ" log-dump --dir "$KT_DIR/node-$victim" 2>&1 | tail -n 1)
start=$(sed -n 's/.*log_start=\([0-9]*\).*/\1/p' <<<"$out")
kt_assert_gt "log start of node $victim before the wipe (prefix removed)" "${start:-0}" 0
rm -rf "$KT_DIR/node-$victim"
kt_format "$victim"
kt_start "$victim"
for _ in $(seq 1 60); do
    grep -q 'installed a snapshot fetched from the leader' "$KT_DIR/node-$victim.log" && break
    sleep 0.5
done
line=$(grep 'installed a snapshot fetched from the leader' "$KT_DIR/node-$victim.log" | tail -n 1)
[[ -n $line ]] || kt_fail "node $victim did not install a snapshot: $(tail -n 5 "$KT_DIR/node-$victim.log")"
kt_log "node $victim: ${line#*msg=}"
wait_same_hash 30 1 2 3
kt_assert_eq "image hash of the wiped node after FetchSnapshot" "$hash_before" "$KT_HASH"

# Restart everything: each node loads its latest snapshot plus the log.
for i in 1 2 3; do
    kt_stop "$i"
done
kt_start_all
kt_wait_for_leader 60
for i in 1 2 3; do
    grep -q 'msg="loaded snapshot"' "$KT_DIR/node-$i.log" || kt_fail "node $i did not load a snapshot at start"
done
wait_same_hash 30 1 2 3
kt_assert_eq "image hash after restarting every node" "$hash_before" "$KT_HASH"
kt_kq_retry 30 topics --describe --topic snap-6
kt_assert_contains "describe after restart" "PartitionCount: 20" "$KT_OUT"
kt_pass
