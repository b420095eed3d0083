#!/usr/bin/env bash
# ACL authorization stored in the metadata log, on a TLS cluster (cluster.sh up --tls: the
# authorizer on, super user User:CN=admin, allow.everyone.if.no.acl.found=false), with a
# client certificate CN=reader from the cluster's CA:
#   - before any ACL the reader gets nothing (describe refused);
#   - the admin grants it Describe (`kq acls --add`): it can describe the cluster and topics
#     and cannot create or delete topics, add ACLs, produce or consume;
#   - `kq acls --list` (text and --json) shows the bindings, and log-dump the records;
#   - a prefixed Write grant reaches the brokers through the metadata log: the reader's
#     produce is accepted there; a DENY wins over it;
#   - the grants survive the loss of the active controller (the log, not memory, holds them);
#   - `kq acls --remove` takes Describe away again.
# usage: test_tls_acls.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" tls_acls 28100

kd_up --tls
TLS_DIR=$KQ_LOCAL_DIR/tls
"$(dirname "$0")/../../deploy/tls/make-certs.sh" "$TLS_DIR" reader >/dev/null ||
    kt_fail "cannot make the reader's certificate"
printf '%s\n' security.protocol=SSL "ssl.keystore.location=$TLS_DIR/reader.pem" \
    "ssl.truststore.location=$TLS_DIR/ca.pem" >"$KT_DIR/reader.properties"

# reader ARGS...: kq against the controllers with the reader's certificate; output in KD_OUT
reader() {
    local rc=0
    KD_OUT=$(timeout 60 "$KT_KQ" "$@" --bootstrap-controller "$KD_CTL" --timeout-ms 10000 \
        --command-config "$KT_DIR/reader.properties" 2>&1) || rc=$?
    return "$rc"
}
# reader_data CMD ARGS...: kq produce/consume against the brokers with the reader's certificate
reader_data() {
    local rc=0 cmd=$1
    shift
    KD_OUT=$(timeout 60 "$KT_KQ" "$cmd" --bootstrap-server "$KD_BROKERS" \
        --command-config "$KT_DIR/reader.properties" "$@" 2>&1) || rc=$?
    return "$rc"
}

KD_TOPIC=acl-t
kd_create acl-t 1:2:3
kd_wait_line acl-t 30 'Leader: 1.*Isr: 1,2,3'

echo "## no ACL: the reader gets nothing"
reader cluster describe && kt_fail "the reader described the cluster without an ACL: $KD_OUT"
kt_assert_contains "cluster describe without an ACL" "CLUSTER_AUTHORIZATION_FAILED" "$KD_OUT"
reader topics --describe --topic acl-t && kt_fail "the reader described a topic without an ACL: $KD_OUT"
kt_assert_contains "topics --describe without an ACL" "TOPIC_AUTHORIZATION_FAILED" "$KD_OUT"

echo "## the admin grants Describe; the reader can describe and nothing more"
reader acls --add --allow-principal User:CN=reader --operation Describe --cluster &&
    kt_fail "the reader granted itself an ACL: $KD_OUT"
kt_assert_contains "acls --add by the reader" "CLUSTER_AUTHORIZATION_FAILED" "$KD_OUT"
kd_kq acls --add --allow-principal User:CN=reader --operation Describe --cluster --topic '*' ||
    kt_fail "acls --add: $KD_OUT"
kt_assert_contains "acls --add prints the binding" \
    "(principal=User:CN=reader, host=*, operation=DESCRIBE, permissionType=ALLOW)" "$KD_OUT"
kt_assert_contains "acls --add prints kafka-acls.sh's header" \
    'Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`: ' "$KD_OUT"
kt_assert_contains "acls --add prints the current ACLs of the resource" \
    'Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=*, patternType=LITERAL)`' "$KD_OUT"
reader cluster describe || kt_fail "the reader cannot describe the cluster with Describe: $KD_OUT"
reader topics --describe --topic acl-t || kt_fail "the reader cannot describe acl-t with Describe: $KD_OUT"
kt_assert_contains "the reader's describe" "Topic: acl-t" "$KD_OUT"
reader topics --create --topic acl-new --partitions 1 --replication-factor 1 &&
    kt_fail "the reader created a topic with Describe only: $KD_OUT"
kt_assert_contains "topics --create by the reader" "principal User:CN=reader is not allowed to Create" "$KD_OUT"
reader topics --delete --topic acl-t && kt_fail "the reader deleted a topic with Describe only: $KD_OUT"
kt_assert_contains "topics --delete by the reader" "TOPIC_AUTHORIZATION_FAILED" "$KD_OUT"
kd_describe acl-t || kt_fail "acl-t is gone: $KD_OUT"
reader_data produce --topic acl-t --value x --request-timeout-ms 3000 --delivery-timeout-ms 3000 &&
    kt_fail "the reader produced with Describe only: $KD_OUT"
kt_assert_contains "produce by the reader" "TOPIC_AUTHORIZATION_FAILED" "$KD_OUT"
reader_data consume --topic acl-t --from-beginning --timeout-ms 2000 &&
    kt_fail "the reader consumed with Describe only: $KD_OUT"
kt_assert_contains "consume by the reader" "TOPIC_AUTHORIZATION_FAILED" "$KD_OUT"

echo "## answered per topic: a topic it may not describe is left out of lists, refused by name"
kd_create acl-hidden 1:2:3
kd_kq acls --add --deny-principal User:CN=reader --operation Describe --topic acl-hidden ||
    kt_fail "acls --add deny Describe: $KD_OUT"
reader topics --list || kt_fail "the reader cannot list topics: $KD_OUT"
kt_assert_contains "topics --list by the reader" "acl-t" "$KD_OUT"
kt_assert_eq "acl-hidden in the reader's list" "" "$(grep -x acl-hidden <<<"$KD_OUT" || true)"
reader topics --describe --topic acl-hidden && kt_fail "the reader described acl-hidden: $KD_OUT"
kt_assert_contains "topics --describe acl-hidden by the reader" "TOPIC_AUTHORIZATION_FAILED" "$KD_OUT"
kd_kq topics --list || kt_fail "topics --list: $KD_OUT"
kt_assert_contains "the admin's list" "acl-hidden" "$KD_OUT"
deadline=$(($(date +%s) + 30))
until ! reader_data consume --topic acl-hidden --from-beginning --timeout-ms 2000 &&
    [[ $KD_OUT == *TOPIC_AUTHORIZATION_FAILED* ]]; do
    (($(date +%s) < deadline)) || kt_fail "the reader's consume of acl-hidden was not refused: $KD_OUT"
    sleep 0.5
done
kt_log "the reader's consume of acl-hidden: $KD_OUT"

echo "## list: text and JSON, and the records in the log"
reader acls --list || kt_fail "the reader (Describe on the cluster) cannot list ACLs: $KD_OUT"
kd_kq acls --list || kt_fail "acls --list: $KD_OUT"
kt_assert_contains "acls --list" \
    'Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`' "$KD_OUT"
kd_kq acls --list --json || kt_fail "acls --list --json: $KD_OUT"
kt_assert_eq "ACLs listed as JSON (Describe on the cluster and on *, the DENY on acl-hidden)" 3 "$(grep -o '"principal":"User:CN=reader"' <<<"$KD_OUT" | wc -l)"
kt_assert_contains "JSON names Kafka's enums" '"operation":"DESCRIBE","permissionType":"ALLOW"' "$KD_OUT"
kd_kq acls --add --allow-principal User:CN=reader --operation Frobnicate --cluster &&
    kt_fail "an unknown operation was accepted: $KD_OUT"
kt_assert_contains "unknown operation" "unknown operation 'Frobnicate'" "$KD_OUT"

echo "## a prefixed Write grant reaches the brokers; a DENY wins"
kd_kq acls --add --allow-principal User:CN=reader --operation Write --topic acl- \
    --resource-pattern-type prefixed || kt_fail "acls --add Write: $KD_OUT"
deadline=$(($(date +%s) + 30))
until reader_data produce --topic acl-t --value from-reader --request-timeout-ms 3000 --delivery-timeout-ms 3000; do
    (($(date +%s) < deadline)) || kt_fail "the reader cannot produce with a prefixed Write grant: $KD_OUT"
    sleep 0.5
done
kd_consume
kt_assert_contains "the reader's record" "from-reader" "$KD_OUT"
kd_kq acls --add --deny-principal User:CN=reader --operation Write --topic acl-t || kt_fail "acls --add deny: $KD_OUT"
deadline=$(($(date +%s) + 30))
while reader_data produce --topic acl-t --value denied --request-timeout-ms 3000 --delivery-timeout-ms 3000; do
    (($(date +%s) < deadline)) || kt_fail "a DENY did not stop the reader's produce"
    sleep 0.5
done
kt_assert_contains "produce against a DENY" "an ACL denies it" "$KD_OUT"

echo "## the grants live in the log: they survive the active controller"
kd_kq metadata-quorum describe --status || kt_fail "describe: $KD_OUT"
leader=$(kt_field LeaderId <<<"$KD_OUT")
kill -9 "$(cat "$KQ_LOCAL_DIR/node-$leader.pid")"
kt_log "killed the active controller $leader"
deadline=$(($(date +%s) + 60))
until reader cluster describe; do
    (($(date +%s) < deadline)) || kt_fail "the reader's Describe was lost with controller $leader: $KD_OUT"
    sleep 1
done
reader topics --create --topic acl-new --partitions 1 --replication-factor 1 &&
    kt_fail "the reader created a topic on the new controller: $KD_OUT"
"$KT_KQ" log-dump --dir "$KQ_LOCAL_DIR/node-$leader" >"$KT_DIR/dump.txt" 2>&1 ||
    kt_fail "log-dump: $(tail -3 "$KT_DIR/dump.txt")"
kt_assert_contains "log-dump shows the ACL records" "\"type\":\"ACCESS_CONTROL_ENTRY_RECORD\"" "$(cat "$KT_DIR/dump.txt")"
kd_cluster start "$leader" >/dev/null 2>&1 || true

echo "## remove: Describe taken back"
kd_kq acls --add --allow-principal User:CN=reader --operation Read --topic acl-t ||
    kt_fail "acls --add Read: $KD_OUT"
kd_kq acls --remove --allow-principal User:CN=reader --topic acl-t --force ||
    kt_fail "acls --remove without --operation: $KD_OUT"
kt_assert_contains "--remove with a principal and no --operation removes only All (kafka-acls.sh): the ALLOW Read stays" \
    "(principal=User:CN=reader, host=*, operation=READ, permissionType=ALLOW)" "$KD_OUT"
kd_kq acls --remove --allow-principal User:CN=reader --operation Describe --cluster --force ||
    kt_fail "acls --remove: $KD_OUT"
kt_assert_eq "the cluster's ACLs left after --remove" "" "$(grep 'resourceType=CLUSTER' <<<"$KD_OUT" || true)"
kd_kq acls --list --principal User:CN=reader || kt_fail "acls --list --principal: $KD_OUT"
kt_assert_contains "acls --list --principal" 'ACLs for principal `User:CN=reader`' "$KD_OUT"
reader cluster describe && kt_fail "the reader still describes the cluster after --remove: $KD_OUT"
kt_assert_contains "cluster describe after --remove" "CLUSTER_AUTHORIZATION_FAILED" "$KD_OUT"
reader topics --describe --topic acl-t || kt_fail "the topic grant went with the cluster one: $KD_OUT"
kt_pass
