#!/usr/bin/env bash
# A broker that was down while the controllers snapshotted and removed the metadata log prefix
# catches up through FetchSnapshot: local cluster (cluster.sh) with
# metadata.log.max.record.bytes.between.snapshots=1024 on the controllers; broker 3 is killed,
# 40 topics are created (the controllers write snapshots and drop the log below them), a topic
# `late` is created with replicas 1,2,3 and written to; broker 3 restarts, installs the
# snapshot ("installed a metadata snapshot fetched from the leader"), is unfenced, joins the ISR
# of `late`, restarts on the installed snapshot (killed and started again), sees every topic and
# holds its records (a consumer reads them through it once it leads).
# usage: test_broker_metadata_snapshot.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" broker_metadata_snapshot 26900
export KQ_CONTROLLER_EXTRA_CONFIG="metadata.log.max.record.bytes.between.snapshots=1024"
KD_TOPIC=late

kd_up
kd_kill 3
for i in $(seq 1 40); do
    kd_kq topics --create --topic "filler-$i" --partitions 2 --replication-factor 2 ||
        kt_fail "creating filler-$i: $KD_OUT"
done
kd_create late 1:2:3 min.insync.replicas=2
kd_wait_line late 30 'Leader: 1'
for i in 1 2 3; do
    kd_produce all "late $i" || kt_fail "write to late: $KD_OUT"
done
# The controllers' log must now start above broker 3's position (it fetched ~10 records).
start=$(kt_metrics $((KT_BASE_PORT + 2)) | awk '$1 == "kq_metadata_snapshot_end_offset" { print $2 }')
kt_log "controller 3001: latest snapshot ends at ${start:-?}"
kt_assert_gt "end offset of the controllers' latest snapshot" "${start:-0}" 20

kd_start 3
line=$(kd_wait_log 3 30 "installed a metadata snapshot fetched from the leader")
kt_log "broker 3: $line"
kd_wait_line late 60 'Isr: 1,2,3' >/dev/null
kt_log "broker 3 joined the ISR of late"
# Its metadata log now starts at the snapshot: it must start on it again (killed, restarted).
kd_kill 3
kd_start 3
kt_log "broker 3 restarted on the snapshot it installed"
kd_wait_line late 60 'Isr: 1,2,3' >/dev/null
kd_kq topics --list
n=$(grep -c '^filler-' <<<"$KD_OUT" || true)
kt_assert_eq "filler topics the cluster lists" 40 "$n"

# Broker 3 holds the records: shut 1 and 2 down (controlled), so 3, in the ISR, leads and
# serves them.
kd_shutdown 1
kd_shutdown 2
kd_wait_line late 60 'Leader: 3' >/dev/null
kd_consume --print-offsets
kt_assert_eq "records read through broker 3" "$(printf '0\tlate 1\n1\tlate 2\n2\tlate 3')" "$KD_OUT"
kt_pass
