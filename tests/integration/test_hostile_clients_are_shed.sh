#!/usr/bin/env bash
# Hostile clients cost a controller little and never its leadership (issue 10, item 3). On a
# 3-voter quorum, against the leader:
#  - eight clients at once each send a 14 MB Write of 7,000,000 empty records (protobuf-c would
#    need ~380 MB to unpack one): every one is answered INVALID_REQUEST "decoding it would
#    take more than ..." before anything is unpacked;
#  - two send a Write whose body repeats 200,000 times: INVALID_REQUEST "field write of
#    kq.Request occurs more than once" (a repeated singular message is refused before
#    unpacking; outside a oneof protobuf-c would merge repeats in quadratic time);
#  - the same leader, in the same epoch, then commits a write;
#  - 60 connections from 127.0.0.2 with max.connections.per.ip=40: 20 are closed at once,
#    kq_rpc_connections_refused_total counts them, and the quorum (on 127.0.0.1) is unharmed;
#  - 70 slowloris connections on the metrics port: those past its 64 slots are closed at once,
#    the rest once the 10 s head timeout passes, and /readyz answers again.
# usage: test_hostile_clients_are_shed.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" hostile_clients_are_shed 27900
FLOOD=$KT_BIN/kq-flood
[[ -x $FLOOD ]] || kt_fail "$FLOOD is missing (build the kq-flood target)"

mport() { echo $((KT_BASE_PORT + 3 + $1)); } # metrics of node i: BASE+4..BASE+6
kt_cluster 3 max.connections.per.ip=40
for i in 1 2 3; do
    kt_set_prop "$(kt_config "$i")" metrics.listener "127.0.0.1:$(mport "$i")"
done
kt_start_all
kt_wait_for_leader 30
leader=$KT_LEADER epoch=$KT_EPOCH
target=127.0.0.1:$(kt_port "$leader")

count() { grep -c -- "$1" <<<"$2" || true; }

out=$("$FLOOD" --server "$target" --case dense-write --parallel 8) ||
    kt_fail "dense writes were not all answered: $out"
kt_log "$(head -n 2 <<<"$out")"
kt_assert_eq "dense writes refused before unpacking" 8 \
    "$(count "answer error=INVALID_REQUEST message=decoding it would take more than" "$out")"

out=$("$FLOOD" --server "$target" --case merge-write --parallel 2) ||
    kt_fail "merge writes were not all answered: $out"
kt_log "$(head -n 2 <<<"$out")"
kt_assert_eq "repeated bodies refused" 2 \
    "$(count "answer error=INVALID_REQUEST message=field write of kq.Request occurs more than once" "$out")"

kt_status "$leader" || kt_fail "the leader does not answer DescribeQuorum after the writes"
kt_assert_eq "leader after the hostile writes" "$leader/$epoch" "$KT_LEADER/$KT_EPOCH"
offset=$(kt_write 1 2 3 -- --count 1)
kt_assert_ge "offset of a write after them" "${offset:-0}" 1

out=$("$FLOOD" --server "$target" --case hold --connections 60 --source 127.0.0.2 --hold-ms 2000)
kt_log "held connections: $out"
kt_assert_contains "connections past max.connections.per.ip closed" "opened=60 held=40 closed=20" "$out"
refused=$(kt_metrics "$(mport "$leader")" | sed -n 's/^kq_rpc_connections_refused_total \([0-9]*\).*/\1/p')
kt_assert_ge "kq_rpc_connections_refused_total" "${refused:-0}" 20
kt_assert_contains "the refusal is logged with the peer" "peer=127.0.0.2 limit=max.connections.per.ip value=40" \
    "$(cat "$KT_DIR/node-$leader.log")"
kt_status "$leader" || kt_fail "the leader does not answer after the held connections"
kt_assert_eq "leader after the held connections" "$leader/$epoch" "$KT_LEADER/$KT_EPOCH"

out=$("$FLOOD" --server "127.0.0.1:$(mport "$leader")" --case http-slow --connections 70 \
    --source 127.0.0.1 --hold-ms 15000)
kt_log "slowloris: $out"
kt_assert_contains "slowloris connections shed" "opened=70 closed_at_once=6 closed_in_time=64 still_open=0" "$out"
kt_assert_eq "/readyz after the slowloris" "200 ready" "$(kt_readyz "$(mport "$leader")")"
shed=$(kt_metrics "$(mport "$leader")" | sed -n 's/^kq_http_connections_shed_total{reason="timeout"} \([0-9]*\).*/\1/p')
kt_assert_eq "kq_http_connections_shed_total{reason=\"timeout\"}" 64 "${shed:-none}"
kt_pass
