#!/usr/bin/env bash
# kq log-dump decodes every record, reads snapshots and a broker's partition logs, and every
# mode honours --json (issue 8, item 10), on a local cluster (cluster.sh: 3 controllers,
# brokers 1, 2, 3) with metadata.log.max.record.bytes.between.snapshots=8192:
#  1. topic ledger on 1,2,3 (min.insync.replicas=2, then altered to 1), three records written
#     with acks=all by one producer;
#  2. --dir on a running controller's metadata.log.dir and on a broker's
#     __cluster_metadata: the batch lines and every record's fields (TOPIC_RECORD ledger,
#     PARTITION_RECORD with leader 1 and replicas 1,2,3, CONFIG_RECORD, REGISTER_BROKER_RECORD,
#     LEADER_CHANGE), nothing "UNKNOWN"; --json (python3 -m json.tool) and --lines;
#  3. --partition-log on the leader's and a follower's log.dirs: offsets 0..2, one producer id,
#     sequences 0..2, leader epoch, sizes; --print-values shows the values; --topic-id and
#     --partition select; --json;
#  4. a 200-partition topic makes the controllers snapshot: --snapshot on the snapshot file
#     holds ledger's topic, partition and config records; --json and --lines;
#  5. kq topics --list --json prints {"topics": [...]};
#  6. a stopped broker's data.mdb files are byte-identical after every kind of dump.
# usage: test_log_dump_decodes_every_record.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" log_dump 27700
export KQ_CONTROLLER_EXTRA_CONFIG="metadata.log.max.record.bytes.between.snapshots=8192"
command -v python3 >/dev/null || kt_fail "python3 is needed to check the JSON"

DUMP_OUT=""
# dump ARGS...: kq log-dump ARGS; DUMP_OUT = stdout; fails the test on a non-zero exit.
dump() {
    local rc=0
    DUMP_OUT=$(timeout 60 "$KT_KQ" log-dump "$@" 2>"$KT_DIR/dump.err") || rc=$?
    [[ $rc -eq 0 ]] || kt_fail "kq log-dump $* exited $rc: $(tail -n 5 "$KT_DIR/dump.err")"
}
# json_ok WHAT: DUMP_OUT is valid JSON (python3 -m json.tool).
json_ok() {
    python3 -m json.tool <<<"$DUMP_OUT" >/dev/null || kt_fail "$1: not valid JSON: ${DUMP_OUT:0:400}"
}
# py WHAT PROGRAM: runs the python PROGRAM with the JSON of DUMP_OUT as `d`; it prints an error
# message (and the test fails) or nothing.
py() {
    local msg
    msg=$(python3 -c "import json, sys
d = json.load(sys.stdin)
$2" <<<"$DUMP_OUT" 2>&1) || kt_fail "$1: python check failed: $msg"
    [[ -z $msg ]] || kt_fail "$1: $msg"
}
has() { # WHAT NEEDLE: DUMP_OUT contains the fixed string NEEDLE
    grep -qF -- "$2" <<<"$DUMP_OUT" || kt_fail "$1: '$2' not in the output: ${DUMP_OUT:0:600}"
}

CTL_DIR=$KQ_LOCAL_DIR/node-3001
kd_up
kd_create ledger 1:2:3 min.insync.replicas=2
kd_wait_line ledger 30 'Leader: 1.*Isr: 1,2,3' >/dev/null
kd_kq configs --entity-type topics --entity-name ledger --alter --add-config min.insync.replicas=1 ||
    kt_fail "altering ledger's config: $KD_OUT"
out=$(printf 'deposit 100\ndeposit 50\nwithdraw 30\n' | timeout 60 "$KT_KQ" produce \
    --bootstrap-server "$KD_BROKERS" --topic ledger --acks all 2>&1) ||
    kt_fail "kq produce failed: $out"
kt_assert_eq "produce acks=all" "$(printf 'written at offset 0\nwritten at offset 1\nwritten at offset 2')" "$out"
kd_describe ledger || kt_fail "describe ledger: $KD_OUT"
TOPIC_ID=$(grep -m1 '^Topic: ledger' <<<"$KD_OUT" | tr '\t' '\n' | sed -n 's/^TopicId: //p')
[[ $TOPIC_ID =~ ^[A-Za-z0-9_-]{22}$ ]] || kt_fail "no topic id for ledger in: $KD_OUT"
kt_log "ledger has topic id $TOPIC_ID"

echo "## 2. --dir on the running controller $CTL_DIR"
dump --dir "$CTL_DIR"
has "batch line" "baseOffset: 0 lastOffset: 0 count: 1 partitionLeaderEpoch: "
has "control batch" "isControl: true"
has "LeaderChange payload" '"type":"LEADER_CHANGE","data":{"leaderId":'
has "RegisterBroker payload" '"type":"REGISTER_BROKER_RECORD","data":{"brokerId":1,'
has "RegisterBroker endpoint" '"endPoints":[{"name":"PLAINTEXT","host":"127.0.0.1","port":'
has "Topic payload" "\"type\":\"TOPIC_RECORD\",\"data\":{\"name\":\"ledger\",\"topicId\":\"$TOPIC_ID\"}"
has "Partition payload" "\"type\":\"PARTITION_RECORD\",\"data\":{\"partitionId\":0,\"topicId\":\"$TOPIC_ID\",\"replicas\":[1,2,3],\"isr\":[1,2,3],"
has "Partition leader" '"leader":1,"leaderRecoveryState":0,"leaderEpoch":0,'
has "Config payload" '"type":"CONFIG_RECORD","data":{"resourceType":2,"resourceName":"ledger","name":"min.insync.replicas","value":"1"}'
has "record line" "| offset: 0 valueSize: "
if grep -q '"type":"UNKNOWN"' <<<"$DUMP_OUT"; then
    kt_fail "a record decoded as UNKNOWN: $(grep -m1 UNKNOWN <<<"$DUMP_OUT")"
fi
[[ $(tail -n 1 <<<"$DUMP_OUT") =~ ^records=[0-9]+\ batches=[0-9]+\ log_start=0\ log_end=[0-9]+ ]] ||
    kt_fail "last line is not the summary: $(tail -n 1 <<<"$DUMP_OUT")"
kt_log "--dir: $(grep -c '^baseOffset: ' <<<"$DUMP_OUT") batches, $(tail -n 1 <<<"$DUMP_OUT")"

dump --dir "$CTL_DIR" --json
json_ok "--dir --json"
py "--dir --json" "
recs = [r for b in d['batches'] for r in b['records']]
types = {r['type'] for r in recs}
for t in ['LEADER_CHANGE', 'REGISTER_BROKER_RECORD', 'TOPIC_RECORD', 'PARTITION_RECORD', 'CONFIG_RECORD']:
    if t not in types: print('no', t, 'in', sorted(types))
if 'UNKNOWN' in types: print('an UNKNOWN record')
offs = [r['offset'] for r in recs]
if offs != list(range(d['summary']['log_start'], d['summary']['log_end'])): print('offsets not contiguous', offs[:5])
if d['summary']['records'] != len(recs): print('summary counts', d['summary']['records'], 'records, found', len(recs))
t = [r['data'] for r in recs if r['type'] == 'TOPIC_RECORD' and r['data']['name'] == 'ledger']
if t != [{'name': 'ledger', 'topicId': '$TOPIC_ID'}]: print('topic record', t)
p = [r['data'] for r in recs if r['type'] == 'PARTITION_RECORD' and r['data']['topicId'] == '$TOPIC_ID']
if len(p) != 1 or p[0]['leader'] != 1 or p[0]['replicas'] != [1, 2, 3] or p[0]['isr'] != [1, 2, 3]: print('partition record', p)
c = [r['data'] for r in recs if r['type'] == 'CONFIG_RECORD' and r['data']['resourceName'] == 'ledger']
if [x['value'] for x in c] != ['2', '1']: print('config records', c)
b = [r['data'] for r in recs if r['type'] == 'REGISTER_BROKER_RECORD']
if sorted({x['brokerId'] for x in b}) != [1, 2, 3]: print('register broker records', b)
for b in d['batches']:
    if b['lastOffset'] != b['baseOffset'] + b['count'] - 1 or b['count'] != len(b['records']): print('batch', b)
"

dump --dir "$CTL_DIR" --lines
grep -q "^offset=[0-9]* epoch=[0-9]* batch=[0-9]* Topic name=ledger id=$TOPIC_ID\$" <<<"$DUMP_OUT" ||
    kt_fail "--lines has no Topic line for ledger: ${DUMP_OUT:0:600}"
grep -q '^offset=0 epoch=[0-9]* batch=0 LeaderChange leader=' <<<"$DUMP_OUT" ||
    kt_fail "--lines does not start with the LeaderChange: ${DUMP_OUT:0:300}"
[[ $(tail -n 1 <<<"$DUMP_OUT") == records=* ]] || kt_fail "--lines: no summary line"

dump --dir "$KQ_LOCAL_DIR/broker-2/__cluster_metadata"
has "broker's metadata copy" "\"type\":\"TOPIC_RECORD\",\"data\":{\"name\":\"ledger\","
dump --dir "$KQ_LOCAL_DIR/broker-2"
grep -qF -- "--partition-log" "$KT_DIR/dump.err" ||
    kt_fail "--dir on a broker data directory does not point at --partition-log: $(cat "$KT_DIR/dump.err")"

echo "## 3. --partition-log on broker 1 (leader) and broker 2 (follower)"
dump --partition-log "$KQ_LOCAL_DIR/broker-1"
has "partition header" "topicId: $TOPIC_ID partition: 0 topic: ledger logStartOffset: 0 logEndOffset: 3 "
for o in 0 1 2; do
    grep -q "^baseOffset: $o lastOffset: $o count: 1 baseSequence: $o lastSequence: $o producerId: [0-9][0-9]* producerEpoch: 0 partitionLeaderEpoch: 0 size: [0-9]* crc: [0-9]*\$" <<<"$DUMP_OUT" ||
        kt_fail "no batch line for offset $o: $DUMP_OUT"
    grep -q "^| offset: $o valueSize: [0-9]* sequence: $o\$" <<<"$DUMP_OUT" ||
        kt_fail "no record line for offset $o: $DUMP_OUT"
done
n=$(sed -n 's/.*producerId: \([0-9]*\) .*/\1/p' <<<"$DUMP_OUT" | sort -u | wc -l)
kt_assert_eq "producer ids of the three batches" 1 "$n"
if grep -q 'payload:' <<<"$DUMP_OUT"; then kt_fail "values printed without --print-values"; fi
[[ $(tail -n 1 <<<"$DUMP_OUT") == "partitions=1 batches=3 records=3" ]] ||
    kt_fail "partition-log summary: $(tail -n 1 <<<"$DUMP_OUT")"
leader_dump=$(grep -v '^topicId' <<<"$DUMP_OUT")

dump --partition-log "$KQ_LOCAL_DIR/broker-1" --print-values
has "value 0" "| offset: 0 valueSize: 11 sequence: 0 payload: deposit 100"
has "value 1" "| offset: 1 valueSize: 10 sequence: 1 payload: deposit 50"
has "value 2" "| offset: 2 valueSize: 11 sequence: 2 payload: withdraw 30"

dump --partition-log "$KQ_LOCAL_DIR/broker-1" --print-values --json
json_ok "--partition-log --json"
py "--partition-log --json" "
ps = d['partitions']
if len(ps) != 1 or ps[0]['topic'] != 'ledger' or ps[0]['topicId'] != '$TOPIC_ID' or ps[0]['partition'] != 0: print('partitions', ps)
bs = ps[0]['batches']
if [b['baseOffset'] for b in bs] != [0, 1, 2]: print('batch offsets', bs)
if len({b['producerId'] for b in bs}) != 1 or bs[0]['producerId'] < 0: print('producer ids', [b['producerId'] for b in bs])
rs = [r for b in bs for r in b['records']]
if [(r['offset'], r['sequence'], r['value']) for r in rs] != [(0, 0, 'deposit 100'), (1, 1, 'deposit 50'), (2, 2, 'withdraw 30')]: print('records', rs)
if ps[0]['logEndOffset'] != 3 or ps[0]['leaderEpochCache'] != [{'epoch': 0, 'startOffset': 0}]: print('state', ps[0])
if d['summary'] != {'partitions': 1, 'batches': 3, 'records': 3}: print('summary', d['summary'])
"

# The follower holds the same batches (acks=all: every ISR member has them).
dump --partition-log "$KQ_LOCAL_DIR/broker-2"
kt_assert_eq "follower's batches and records" "$leader_dump" "$(grep -v '^topicId' <<<"$DUMP_OUT")"

dump --partition-log "$KQ_LOCAL_DIR/broker-1" --topic-id "$TOPIC_ID" --partition 0 --json
py "--topic-id --partition" "
if len(d['partitions']) != 1: print(d['partitions'])"
dump --partition-log "$KQ_LOCAL_DIR/broker-1" --partition 1
[[ $DUMP_OUT == "partitions=0 batches=0 records=0" ]] || kt_fail "--partition 1 printed: $DUMP_OUT"

echo "## 4. a snapshot"
kd_kq topics --create --topic filler --partitions 200 --replication-factor 3 ||
    kt_fail "creating filler: $KD_OUT"
snap=""
for _ in $(seq 1 120); do
    snap=$(find "$CTL_DIR/snapshots" -name '*.checkpoint' 2>/dev/null | sort | tail -n 1)
    [[ -n $snap ]] && break
    sleep 0.5
done
[[ -n $snap ]] || kt_fail "controller 3001 wrote no snapshot within 60 s"
kt_log "snapshot file $snap"
name=$(basename "$snap" .checkpoint)
end=$((10#${name%-*}))
epoch=$((10#${name#*-}))
dump --snapshot "$snap"
has "snapshot Topic" "\"type\":\"TOPIC_RECORD\",\"data\":{\"name\":\"ledger\",\"topicId\":\"$TOPIC_ID\"}"
has "snapshot Partition" "\"type\":\"PARTITION_RECORD\",\"data\":{\"partitionId\":0,\"topicId\":\"$TOPIC_ID\",\"replicas\":[1,2,3],"
has "snapshot Config" '"type":"CONFIG_RECORD","data":{"resourceType":2,"resourceName":"ledger","name":"min.insync.replicas","value":"1"}'
has "snapshot RegisterBroker" '"type":"REGISTER_BROKER_RECORD","data":{"brokerId":2,'
has "snapshot record line" "| index: 0 valueSize: "
[[ $(tail -n 1 <<<"$DUMP_OUT") =~ ^records=[0-9]+\ end_offset=$end\ epoch=$epoch\ size=$(stat -c %s "$snap")$ ]] ||
    kt_fail "snapshot summary: $(tail -n 1 <<<"$DUMP_OUT") (file $name)"
dump --snapshot "$snap" --json
json_ok "--snapshot --json"
py "--snapshot --json" "
rs = d['records']
if [r['index'] for r in rs] != list(range(len(rs))): print('indexes')
if d['summary']['end_offset'] != $end or d['summary']['records'] != len(rs): print('summary', d['summary'])
if len([r for r in rs if r['type'] == 'PARTITION_RECORD' and r['data']['topicId'] != '$TOPIC_ID']) != 200: print('filler partitions')
if 'UNKNOWN' in {r['type'] for r in rs}: print('UNKNOWN record')
"
dump --snapshot "$snap" --lines
grep -q "^index=[0-9]* Topic name=ledger id=$TOPIC_ID\$" <<<"$DUMP_OUT" ||
    kt_fail "snapshot --lines: ${DUMP_OUT:0:400}"

echo "## 5. kq topics --list --json"
kd_kq topics --list --json || kt_fail "topics --list --json: $KD_OUT"
kt_assert_eq "topics --list --json" '{"topics":["filler","ledger"]}' "$KD_OUT"

echo "## 6. dumps change nothing"
kd_shutdown 3
sums() { md5sum "$KQ_LOCAL_DIR/broker-3/data.mdb" "$KQ_LOCAL_DIR/broker-3/__cluster_metadata/data.mdb"; }
before=$(sums)
dump --partition-log "$KQ_LOCAL_DIR/broker-3" --print-values --json
json_ok "stopped broker --partition-log --json"
dump --dir "$KQ_LOCAL_DIR/broker-3/__cluster_metadata" --json
json_ok "stopped broker --dir --json"
dump --dir "$KQ_LOCAL_DIR/broker-3"
kt_assert_eq "data.mdb checksums after the dumps" "$before" "$(sums)"
kd_consume
kt_assert_eq "records read after the dumps" "$(printf 'deposit 100\ndeposit 50\nwithdraw 30')" "$KD_OUT"
kt_pass
