#!/usr/bin/env bash
# Bad input to real broker agents (issue 4): 3 controllers and 3 brokers (ids 4, 5, 6), a topic
# with replication factor 3 and min.insync.replicas=2, one record written with `kq produce`;
#   - an idempotent producer's retried batch gets its original offset and is not written
#     twice; a sequence gap gets OUT_OF_ORDER_SEQUENCE_NUMBER;
#   - malformed Produce and Fetch requests, built by kq-data-probe with protobuf-c (bad acks, no
#     records, an 8-byte topic id, partition -1, fetch_offset -5, max_bytes 0, no partitions,
#     a Produce api key with a Fetch body, a truncated body, an empty message), sent to every
#     broker, are answered INVALID_REQUEST with a message naming the problem; a request for
#     another cluster id is answered INCONSISTENT_CLUSTER_ID and writes nothing; a follower
#     Fetch from an unregistered broker id is answered BROKER_ID_NOT_REGISTERED;
#   - raw garbage on the leader's listener (nng SP framing from python3, 20 rounds);
#   - afterwards every broker runs, counts the invalid requests (/metrics), `kq produce` writes
#     at the next offset and `kq consume --from-beginning` returns exactly the records written;
#   - start-up: broker 6 (it held a replica) re-formatted with another cluster id exits 2 with
#     a message naming the cluster id and the fix; following the fix (re-format with the
#     quorum's id) brings it back into the ISR; a broker whose controller.quorum.voters
#     point at another quorum (a second single-controller cluster) exits 2 likewise.
# usage: test_broker_bad_inputs.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" broker_bad_inputs 26500

BA=$KT_BIN/kq-broker-agent
PROBE=$KT_BIN/kq-data-probe
[[ -x $BA ]] || kt_fail "$BA is missing (build the kq-broker-agent target)"
[[ -x $PROBE ]] || kt_fail "$PROBE is missing (build the kq-data-probe target)"
command -v python3 >/dev/null || kt_fail "python3 is needed for the garbage rounds"

# Ports: controllers BASE+1..3, brokers BASE+4..6, the foreign controller BASE+7, the broker
# pointed at it BASE+8, broker 4's /metrics BASE+9. Broker b keeps its data in broker-b/, logs
# to broker-b.log; its pid is KT_PID[b], so kqtest's cleanup kills it.
FOREIGN=7
LOST=8
TOPIC=ledger

bt_fail() {
    local b
    for b in 4 5 6 $FOREIGN $LOST; do
        for f in "$KT_DIR/broker-$b.log" "$KT_DIR/node-$b.log"; do
            if [[ -s $f ]]; then
                echo "---- tail of $(basename "$f") ----" >&2
                tail -n 25 "$f" >&2
            fi
        done
    done
    kt_fail "$@"
}

bt_config() { # ID VOTERS [key=value...]
    local b=$1 voters=$2
    shift 2
    {
        echo "process.roles=broker"
        echo "node.id=$b"
        echo "controller.quorum.voters=$voters"
        echo "listeners=PLAINTEXT://127.0.0.1:$(kt_port "$b")"
        echo "log.dirs=$KT_DIR/broker-$b"
        local kv
        for kv in "$@"; do
            echo "$kv"
        done
    } >"$KT_DIR/broker-$b.properties"
}

bt_format() { # ID CLUSTER_ID
    local out
    out=$("$KT_KQ" storage format --config "$KT_DIR/broker-$1.properties" --cluster-id "$2" 2>&1) ||
        bt_fail "kq storage format of broker $1: $out"
}

bt_start() { # ID
    local b=$1
    echo "---- start $(date +%T.%3N) ----" >>"$KT_DIR/broker-$b.log"
    "$BA" --config "$KT_DIR/broker-$b.properties" >>"$KT_DIR/broker-$b.log" 2>&1 &
    KT_PID[b]=$!
    kt_log "started broker $b (pid ${KT_PID[$b]})"
}

# bt_expect_exit ID WHAT TIMEOUT_S NEEDLE...: the broker must exit with status 2 within the
# timeout; its output since its last start (printed) must contain every NEEDLE.
bt_expect_exit() {
    local b=$1 what=$2 timeout=$3 out needle
    shift 3
    kt_wait_exit "$b" "$timeout" || bt_fail "$what: broker $b still runs after $timeout s"
    out=$(awk '/^---- start / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' \
        "$KT_DIR/broker-$b.log")
    kt_log "$what: broker $b exited $KT_RC; its output:"$'\n'"$(grep -v '^---- start' <<<"$out")"
    kt_assert_eq "$what: exit status" 2 "$KT_RC"
    for needle in "$@"; do
        kt_assert_contains "$what: message" "$needle" "$out"
    done
}

BROKERS=127.0.0.1:$(kt_port 4),127.0.0.1:$(kt_port 5),127.0.0.1:$(kt_port 6)

# bt_probe BROKER_ID CASE [ARGS...]: kq-data-probe; its stdout line in PROBE_OUT (fails the test
# when no answer arrived).
PROBE_OUT=""
bt_probe() {
    local b=$1 kase=$2 rc=0
    shift 2
    PROBE_OUT=$(timeout 60 "$PROBE" --broker "127.0.0.1:$(kt_port "$b")" --case "$kase" \
        --cluster-id "$KT_CLUSTER_ID" --topic-id "$TOPIC_ID" "$@" 2>"$KT_DIR/probe.err") || rc=$?
    [[ $rc -eq 0 ]] ||
        bt_fail "kq-data-probe --case $kase to broker $b exited $rc: $PROBE_OUT $(cat "$KT_DIR/probe.err")"
}

# bt_expect BROKER_ID CASE ERROR KEYWORD: the answer's error is ERROR and its message has KEYWORD.
bt_expect() {
    local b=$1 kase=$2 want=$3 key=$4 msg
    bt_probe "$b" "$kase"
    kt_assert_eq "broker $b, $kase: error" "$want" "$(sed -n 's/^error=\([A-Z_]*\) .*/\1/p' <<<"$PROBE_OUT")"
    msg=${PROBE_OUT#* message=}
    kt_assert_contains "broker $b, $kase: message '$msg'" "$key" "$msg"
}

bt_produce() { # VALUE: writes one record, prints its offset
    local out rc=0
    out=$(timeout 180 "$KT_KQ" produce --bootstrap-server "$BROKERS" --topic "$TOPIC" \
        --value "$1" 2>&1) || rc=$?
    [[ $rc -eq 0 ]] || bt_fail "kq produce --value $1 exited $rc: $out"
    sed -n 's/^written at offset \([0-9]*\)$/\1/p' <<<"$out"
}

bt_field() { # NAME LINE: the value of "NAME: value" in a `kq topics --describe` partition line
    awk -F'\t' -v k="$1: " '{ for (i = 1; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }' <<<"$2"
}

bt_metric() { # PORT NAME: the value of metric NAME on /metrics at PORT ("" if absent)
    # shellcheck disable=SC2016 # $1 expands in the inner bash
    timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
        printf "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3 && cat <&3' _ "$1" |
        awk -v n="$2" '$1 == n { print $2 }' || true
}

# ---- the cluster ----------------------------------------------------------------------------
kt_cluster 3
kt_start_all
kt_wait_for_leader 60
for b in 4 5 6; do
    extra=()
    [[ $b -eq 4 ]] && extra=("metrics.listener=127.0.0.1:$(kt_port 9)")
    bt_config "$b" "$(kt_voters 3)" "${extra[@]}"
    bt_format "$b" "$KT_CLUSTER_ID"
    bt_start "$b"
done
for b in 4 5 6; do
    kt_wait_broker_fenced "$b" false 60
done
kt_log "brokers 4, 5, 6 registered and unfenced"

kt_kq_ok topics --create --topic "$TOPIC" --partitions 1 --replication-factor 3 \
    --config min.insync.replicas=2
TOPIC_ID=$(kt_topic_id "$TOPIC")
deadline=$(($(date +%s) + 60))
while :; do
    kt_kq topics --describe --topic "$TOPIC" || true
    line=$(kt_partition_line "$TOPIC" 0)
    leader=$(bt_field Leader "$line")
    isr=$(bt_field Isr "$line")
    [[ $leader =~ ^[456]$ && $(tr ',' '\n' <<<"$isr" | sort | xargs) == "4 5 6" ]] && break
    (($(date +%s) < deadline)) || bt_fail "$TOPIC-0 has no leader and full ISR within 60 s: $line"
    sleep 0.3
done
kt_log "$TOPIC ($TOPIC_ID) partition 0: leader $leader, isr $isr"
kt_assert_eq "offset of the first record" 0 "$(bt_produce first)"
follower=4
[[ $leader -eq 4 ]] && follower=5

# ---- malformed requests -----------------------------------------------------------------------
for b in 4 5 6; do
    bt_expect "$b" produce-bad-acks INVALID_REQUEST "acks 2"
    bt_expect "$b" produce-no-records INVALID_REQUEST "ProduceRequest.records has no entries"
    bt_expect "$b" produce-short-topic-id INVALID_REQUEST "ProduceRequest.topic_id has 8 bytes, not 16"
    bt_expect "$b" produce-negative-partition INVALID_REQUEST "partition -1"
    bt_expect "$b" fetch-negative-offset INVALID_REQUEST "fetch_offset -5"
    bt_expect "$b" fetch-zero-max-bytes INVALID_REQUEST "max_bytes 0"
    bt_expect "$b" fetch-no-partitions INVALID_REQUEST "DataFetchRequest.partitions has no entries"
    bt_expect "$b" body-mismatch INVALID_REQUEST "no Produce body"
    bt_expect "$b" truncated-body INVALID_REQUEST "parse"
    bt_expect "$b" empty-request INVALID_REQUEST "parse"
    bt_expect "$b" wrong-cluster-id INCONSISTENT_CLUSTER_ID "kq-probe-wrong-cluster"
    bt_expect "$b" fetch-follower-unregistered BROKER_ID_NOT_REGISTERED "99"
done
# A registered broker id with a wrong epoch is refused too, and well-formed requests still work.
bt_probe "$leader" fetch-follower-unregistered --replica-id "$follower"
kt_assert_eq "follower Fetch from broker $follower with broker epoch 0: error" STALE_BROKER_EPOCH \
    "$(sed -n 's/^error=\([A-Z_]*\) .*/\1/p' <<<"$PROBE_OUT")"
bt_expect "$follower" produce-ok NOT_LEADER_OR_FOLLOWER "not the leader"
bt_expect "$leader" produce-ok NONE "base_offset 1"
bt_expect "$leader" fetch-ok NONE "records 2"
grep -q 'msg="invalid data-plane request"' "$KT_DIR/broker-$leader.log" ||
    bt_fail "broker $leader did not log the invalid data-plane requests"

# ---- garbage on the leader's listener ---------------------------------------------------------
cat >"$KT_DIR/garbage.py" <<'PY'
import random, socket, struct, sys

port = int(sys.argv[1]); rounds = int(sys.argv[2])
rng = random.Random(int(sys.argv[3]))
# nng SP-over-TCP header: 0x00 'S' 'P' 0x00, 16-bit protocol (REQ0 0x30, REP0 0x31), 2 zero bytes.
# A frame is a 64-bit big-endian length and the body; a REQ body starts with a request id.
REQ0 = 0x30
def sp(proto):
    return b"\x00SP\x00" + struct.pack(">HH", proto, 0)

def frame(body):
    return struct.pack(">Q", len(body)) + body

def junk(n):
    return bytes(rng.getrandbits(8) for _ in range(n))

def varint(v):
    out = b""
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])

def envelope(api, field, body):
    # kq.Request: api_key, api_version 0, cluster_id "", sender_id -1, then a body field
    head = b"\x08" + varint(api) + b"\x10\x00" + b"\x1a\x00" + b"\x20" + varint(-1)
    return head + varint(field << 3 | 2) + varint(len(body)) + body

def send(data, read=True, half_close=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(0.3)
    try:
        if data:
            s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        if read:
            try:
                s.recv(65536)
            except (socket.timeout, OSError):
                pass
    except OSError:
        pass  # the server may close on us: that is the point
    finally:
        s.close()

rid = 0
def req(body):
    global rid
    rid += 1
    return sp(REQ0) + frame(struct.pack(">I", 0x80000000 | rid) + body)

kinds = [
    lambda: send(junk(rng.randint(1, 4096))),                                   # random bytes
    lambda: send(b"\x00SP\x00" + junk(4)),                                      # bad header
    lambda: send(sp(REQ0) + struct.pack(">Q", 0xFFFFFFFFFFFFFFF0)),              # huge length
    lambda: send(sp(REQ0) + struct.pack(">Q", 1 << 31) + junk(100)),             # 2 GiB claim
    lambda: send(req(junk(rng.randint(0, 512)))),                               # junk body
    lambda: send(req(b"")),                                                     # empty body
    lambda: send(req(envelope(1101, 50, junk(rng.randint(0, 200))))),            # Produce, junk
    lambda: send(req(envelope(1100, 51, junk(rng.randint(0, 200))))),            # Fetch, junk
    lambda: send(req(envelope(1101, 50, b"\x0a\x10" + junk(16) + b"\x40\xff"))), # cut varint
    lambda: send(sp(REQ0) + struct.pack(">Q", 1000) + junk(10), half_close=True),  # half frame
    lambda: send(b"", read=False),                                             # connect+close
    lambda: send(sp(0x31) + frame(junk(64))),                                  # wrong peer proto
]
for r in range(rounds):
    for k in kinds:
        k()
print("sent %d garbage connections" % (rounds * len(kinds)))
PY
kt_log "sending garbage to broker $leader (port $(kt_port "$leader"))"
timeout 300 python3 "$KT_DIR/garbage.py" "$(kt_port "$leader")" 20 "$leader" >&2 ||
    bt_fail "the garbage sender failed or hung"

# ---- still serving ------------------------------------------------------------------------------
for b in 4 5 6; do
    kt_alive "$b" || bt_fail "broker $b exited after the bad requests"
done
bt_expect "$leader" fetch-ok NONE "records 2"
kt_assert_eq "offset of the record written after the bad input" 2 "$(bt_produce last)"
out=$(timeout 120 "$KT_KQ" consume --bootstrap-server "$BROKERS" --topic "$TOPIC" \
    --from-beginning --print-offsets --timeout-ms 5000 2>"$KT_DIR/consume.err") ||
    bt_fail "kq consume exited non-zero: $out $(cat "$KT_DIR/consume.err")"
kt_assert_eq "records read back" $'0\tfirst\n1\tprobe-ok\n2\tlast' "$out"
# ---- idempotent producer: a retried batch is not written twice, a gap is refused ----------------
idem() { # SEQUENCE EXPECTED_LINE_PART
    bt_probe "$leader" produce-ok --producer-id 4242 --producer-epoch 0 --sequence "$1"
    kt_assert_contains "idempotent Produce, producer 4242 sequence $1" "$2" "$PROBE_OUT"
}
idem 0 "error=NONE message=written at base_offset 3"
idem 0 "error=NONE message=written at base_offset 3" # the retry: same offset, not written again
idem 2 "error=OUT_OF_ORDER_SEQUENCE_NUMBER"
idem 1 "error=NONE message=written at base_offset 4"
out=$(timeout 120 "$KT_KQ" consume --bootstrap-server "$BROKERS" --topic "$TOPIC" \
    --from-beginning --print-offsets --timeout-ms 5000 2>"$KT_DIR/consume.err") ||
    bt_fail "kq consume exited non-zero: $out $(cat "$KT_DIR/consume.err")"
kt_assert_eq "records after the idempotent writes" \
    $'0\tfirst\n1\tprobe-ok\n2\tlast\n3\tprobe-ok\n4\tprobe-ok' "$out"

# Broker 4 got the 10 requests above that are answered INVALID_REQUEST (more if it led).
invalid=$(bt_metric "$(kt_port 9)" kq_broker_invalid_requests_total)
kt_assert_ge "broker 4 kq_broker_invalid_requests_total" "${invalid%.*}" 10
for b in 4 5 6; do
    kt_alive "$b" || bt_fail "broker $b exited"
done

# ---- start-up: a broker that held a replica, re-formatted with another cluster id -------------
other=$("$KT_KQ" storage random-uuid)
kill -TERM "${KT_PID[6]}"
kt_wait_exit 6 60 || bt_fail "broker 6 still runs 60 s after SIGTERM"
kt_assert_eq "broker 6 exit status after SIGTERM" 0 "$KT_RC"
rm -rf "$KT_DIR/broker-6"
bt_format 6 "$other"
bt_start 6
bt_expect_exit 6 "broker 6 re-formatted with cluster id $other" 60 "cluster id $other" \
    "does not match" "kq storage format --cluster-id"
# The fix the message names: re-format with the quorum's cluster id; broker 6 rejoins the ISR
# (it copies the partition again from the leader).
rm -rf "$KT_DIR/broker-6"
bt_format 6 "$KT_CLUSTER_ID"
bt_start 6
kt_wait_broker_fenced 6 false 60
deadline=$(($(date +%s) + 90))
while :; do
    kt_kq topics --describe --topic "$TOPIC" || true
    line=$(kt_partition_line "$TOPIC" 0)
    isr=$(bt_field Isr "$line")
    [[ $(tr ',' '\n' <<<"$isr" | sort | xargs) == "4 5 6" ]] && break
    (($(date +%s) < deadline)) || bt_fail "re-formatted broker 6 is not back in the ISR within 90 s: $line"
    sleep 0.3
done
kt_log "broker 6, re-formatted with the right cluster id, is back in the ISR: $line"

# ---- start-up: a broker pointed at another quorum ----------------------------------------------
foreign_id=$("$KT_KQ" storage random-uuid)
{
    echo "process.roles=controller"
    echo "node.id=$FOREIGN"
    echo "controller.quorum.voters=$FOREIGN@127.0.0.1:$(kt_port $FOREIGN)"
    echo "listeners=CONTROLLER://127.0.0.1:$(kt_port $FOREIGN)"
    echo "metadata.log.dir=$KT_DIR/node-$FOREIGN"
} >"$KT_DIR/node-$FOREIGN.properties"
kt_format "$FOREIGN" "$foreign_id"
kt_start "$FOREIGN"
kt_wait_for_leader 60 "$FOREIGN"
bt_config "$LOST" "$FOREIGN@127.0.0.1:$(kt_port $FOREIGN)"
bt_format "$LOST" "$KT_CLUSTER_ID"
bt_start "$LOST"
bt_expect_exit "$LOST" "broker $LOST pointed at the quorum of cluster $foreign_id" 30 \
    "cluster id $KT_CLUSTER_ID" "$foreign_id" "controller.quorum.voters"
kt_alive "$FOREIGN" || bt_fail "the foreign controller exited"
for b in 4 5 6; do
    kt_alive "$b" || bt_fail "broker $b exited"
done
kt_pass
