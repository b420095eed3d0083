#!/usr/bin/env bash
# A cluster where every listener is TLS with client certificates required (cluster.sh up
# --tls: 3 controllers, brokers 1..3):
#   - a client without a certificate, or with one from another CA, gets nothing (not even
#     describe) and the nodes keep serving;
#   - the admin's certificate (--command-config admin.properties) describes, creates a topic
#     with 3 replicas, writes and reads it (the followers replicate over TLS);
#   - every node's certificate is renewed and re-read with SIGHUP, one node at a time, while a
#     producer writes with acks=all: no write fails or is lost, the quorum keeps its leader and
#     epoch, and every broker keeps its registration (epoch) and its place in the ISR;
#   - a SIGHUP with a broken keystore keeps the certificate in use and says so;
#   - kq_tls_certificate_expiry_timestamp_seconds shows the expiry of the certificate loaded;
#   - metrics.listener=https://...: broker 3 serves /metrics over TLS to a client with a
#     certificate from the CA, and nothing to one without, nor over plain HTTP; after its
#     certificate is renewed and SIGHUP sent, the listener presents the new one.
# usage: test_tls.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" tls 26700

kd_up --tls
TLS_DIR=$KQ_LOCAL_DIR/tls
kt_assert_eq "brokers' endpoints" 3 "$(kd_kq cluster describe && grep -c 'Endpoints: SSL://' <<<"$KD_OUT")"

echo "## clients the cluster does not trust get nothing"
rc=0
out=$(timeout 30 "$KT_KQ" metadata-quorum --bootstrap-controller "$KD_CTL" --timeout-ms 3000 \
    describe --status 2>&1) || rc=$?
kt_assert_ne "exit status of describe without a certificate" 0 "$rc"
kt_assert_contains "describe without a certificate" "no controller answered" "$out"
"$(dirname "$0")/../../deploy/tls/make-certs.sh" "$KT_DIR/rogue" admin node-1
printf '%s\n' security.protocol=SSL "ssl.keystore.location=$KT_DIR/rogue/admin.pem" \
    "ssl.truststore.location=$TLS_DIR/ca.pem" >"$KT_DIR/rogue.properties"
rc=0
out=$(timeout 30 "$KT_KQ" topics --bootstrap-controller "$KD_CTL" --timeout-ms 3000 \
    --command-config "$KT_DIR/rogue.properties" --list 2>&1) || rc=$?
kt_assert_ne "exit status of topics --list with another CA's certificate" 0 "$rc"
rc=0
out=$(timeout 30 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic x --value v \
    --request-timeout-ms 3000 --delivery-timeout-ms 3000 2>&1) || rc=$?
kt_assert_ne "exit status of produce without a certificate" 0 "$rc"
rc=0
out=$(timeout 30 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic x --value v \
    --request-timeout-ms 3000 --delivery-timeout-ms 3000 \
    --command-config "$KT_DIR/rogue.properties" 2>&1) || rc=$?
kt_assert_ne "exit status of produce with another CA's certificate" 0 "$rc"
# a client that does not trust the cluster's CA does not talk to it either
printf '%s\n' security.protocol=SSL "ssl.keystore.location=$TLS_DIR/admin.pem" \
    "ssl.truststore.location=$KT_DIR/rogue/ca.pem" >"$KT_DIR/wrong-trust.properties"
rc=0
out=$(timeout 30 "$KT_KQ" metadata-quorum --bootstrap-controller "$KD_CTL" --timeout-ms 3000 \
    --command-config "$KT_DIR/wrong-trust.properties" describe --status 2>&1) || rc=$?
kt_assert_ne "exit status of describe trusting another CA" 0 "$rc"

echo "## the admin's certificate does everything; the nodes kept serving"
kd_kq metadata-quorum describe --status || kt_fail "describe with the admin certificate: $KD_OUT"
leader=$(kt_field LeaderId <<<"$KD_OUT")
epoch=$(kt_field LeaderEpoch <<<"$KD_OUT")
kt_log "leader $leader epoch $epoch"
KD_TOPIC=payments
kd_create payments 1:2:3 min.insync.replicas=2
kd_wait_line payments 30 'Leader: 1.*Isr: 1,2,3'
kd_produce all first || kt_fail "acks=all over TLS: $KD_OUT"
kt_assert_eq "first write" "written at offset 0" "$KD_OUT"
kd_kq cluster describe --json || kt_fail "cluster describe: $KD_OUT"
epochs_before=$(grep -o '"id":[0-9]*,"epoch":[0-9]*' <<<"$KD_OUT" | tr '\n' ' ')

echo "## renew every certificate with SIGHUP, one node at a time, under a writer"
(
    # until the stop file appears; then kq produce reads the end of its input and exits
    for ((i = 1; i <= 100000; i++)); do
        [[ -f $KT_DIR/stop ]] && break
        echo "pay-$i"
        sleep 0.02
    done
) | timeout 300 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic payments --acks all \
    --request-timeout-ms 5000 --delivery-timeout-ms 10000 "${KD_CLIENT[@]}" \
    >"$KT_DIR/writer.out" 2>"$KT_DIR/writer.err" &
writer=$!
sleep 1
for node in node-3001 node-3002 node-3003 broker-1 broker-2 broker-3; do
    id=${node#*-}
    before=$(grep -c 'TLS certificates re-read' "$KQ_LOCAL_DIR/$node.log" || true)
    old_serial=$(openssl x509 -in "$TLS_DIR/node-$id.pem" -noout -serial)
    mv "$TLS_DIR/node-$id.pem" "$TLS_DIR/node-$id.pem.old"
    "$(dirname "$0")/../../deploy/tls/make-certs.sh" "$TLS_DIR" "node-$id"
    kt_assert_ne "serial of node $id's renewed certificate" "$old_serial" \
        "$(openssl x509 -in "$TLS_DIR/node-$id.pem" -noout -serial)"
    kill -HUP "$(cat "$KQ_LOCAL_DIR/$node.pid")"
    deadline=$(($(date +%s) + 10))
    until (($(grep -c 'TLS certificates re-read' "$KQ_LOCAL_DIR/$node.log" || true) > before)); do
        (($(date +%s) < deadline)) || kt_fail "$node did not log 'TLS certificates re-read' after SIGHUP"
        sleep 0.1
    done
    kt_log "$node re-read its renewed certificate"
    if [[ $node == node-3001 ]]; then
        # its expiry gauge follows the certificate it loaded
        want=$(date -d "$(openssl x509 -in "$TLS_DIR/node-$id.pem" -noout -enddate | cut -d= -f2)" +%s)
        seen=$(kt_metrics $((KQ_BASE_PORT + 1)) |
            awk '$1 == "kq_tls_certificate_expiry_timestamp_seconds{store=\"keystore\"}" { print $2 }')
        kt_assert_eq "node 3001's kq_tls_certificate_expiry_timestamp_seconds{store=\"keystore\"}" "$want" "$seen"
    fi
    sleep 1
done
echo "## a broken keystore keeps the certificate in use"
cp "$TLS_DIR/node-3001.pem" "$TLS_DIR/node-3001.pem.good"
echo garbage >"$TLS_DIR/node-3001.pem"
kill -HUP "$(cat "$KQ_LOCAL_DIR/node-3001.pid")"
deadline=$(($(date +%s) + 10))
until grep -q 'TLS certificates not re-read; the ones in use stay' "$KQ_LOCAL_DIR/node-3001.log"; do
    (($(date +%s) < deadline)) || kt_fail "node-3001 did not report the broken keystore"
    sleep 0.1
done
mv "$TLS_DIR/node-3001.pem.good" "$TLS_DIR/node-3001.pem"
sleep 1
touch "$KT_DIR/stop"
rc=0
wait "$writer" || rc=$?
kt_assert_eq "exit status of the writer" 0 "$rc"

acked=$(grep -c '^written at offset' "$KT_DIR/writer.out" || true)
kt_log "the writer had $acked writes acknowledged during the rotation"
kt_assert_gt "writes acknowledged during the rotation" "$acked" 50
kt_assert_eq "failed writes" 0 "$(grep -vc '^written at offset' "$KT_DIR/writer.out" || true)"
kt_assert_eq "distinct acknowledged offsets" "$acked" \
    "$(sed -n 's/^written at offset \([0-9]*\).*/\1/p' "$KT_DIR/writer.out" | sort -u | wc -l)"

kd_kq metadata-quorum describe --status || kt_fail "describe after the rotation: $KD_OUT"
kt_assert_eq "leader after the rotation" "$leader" "$(kt_field LeaderId <<<"$KD_OUT")"
kt_assert_eq "leader epoch after the rotation" "$epoch" "$(kt_field LeaderEpoch <<<"$KD_OUT")"
kd_kq cluster describe --json || kt_fail "cluster describe: $KD_OUT"
kt_assert_eq "broker registrations (id, epoch) after the rotation" "$epochs_before" \
    "$(grep -o '"id":[0-9]*,"epoch":[0-9]*' <<<"$KD_OUT" | tr '\n' ' ')"
kd_wait_line payments 30 'Leader: 1.*Isr: 1,2,3'

kd_consume
kt_assert_eq "records read back (the first, then every acknowledged one)" $((acked + 1)) \
    "$(wc -l <<<"$KD_OUT")"
for ((i = 1; i <= acked; i++)); do
    grep -qx "pay-$i" <<<"$KD_OUT" || kt_fail "acknowledged write pay-$i is not in the log"
done
echo "## the metrics listener over HTTPS"
mport=$(sed -n 's/^metrics.listener=127.0.0.1:\([0-9]*\)$/\1/p' "$KQ_LOCAL_DIR/broker-3.properties" | tail -n 1)
[[ -n $mport ]] || kt_fail "no metrics.listener in broker-3.properties"
kd_cluster kill broker-3
kd_broker_config 3 "metrics.listener=https://127.0.0.1:$mport"
kd_cluster start broker-3
# https_get [openssl s_client options]: GET /metrics over TLS; the answer in HTTPS_OUT
https_get() {
    HTTPS_OUT=$(printf 'GET /metrics HTTP/1.0\r\n\r\n' | timeout 10 openssl s_client -quiet \
        -connect "127.0.0.1:$mport" -CAfile "$TLS_DIR/ca.pem" "$@" 2>/dev/null) || true
}
deadline=$(($(date +%s) + 30))
until https_get -cert "$TLS_DIR/admin.pem" -key "$TLS_DIR/admin.pem" && [[ $HTTPS_OUT == *"200 OK"* ]]; do
    (($(date +%s) < deadline)) || kt_fail "no /metrics over HTTPS from broker 3: $(tail -n 5 "$KQ_LOCAL_DIR/broker-3.log")"
    sleep 0.5
done
kt_assert_contains "/metrics over HTTPS with the admin's certificate" "kq_tls_certificate_expiry_timestamp_seconds" "$HTTPS_OUT"
https_get
kt_assert_eq "/metrics over HTTPS without a client certificate" "" "$(grep '200 OK' <<<"$HTTPS_OUT" || true)"
kt_assert_eq "/metrics over plain HTTP on the HTTPS port" "" "$(kt_metrics "$mport")"
https_get -cert "$TLS_DIR/admin.pem" -key "$TLS_DIR/admin.pem"
kt_assert_contains "the HTTPS listener still answers a client with a certificate" "200 OK" "$HTTPS_OUT"
# served_serial: the serial of the certificate the HTTPS listener presents
served_serial() {
    timeout 10 openssl s_client -connect "127.0.0.1:$mport" -CAfile "$TLS_DIR/ca.pem" \
        -cert "$TLS_DIR/admin.pem" -key "$TLS_DIR/admin.pem" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null
}
old_serial=$(served_serial)
[[ -n $old_serial ]] || kt_fail "no certificate served on the HTTPS metrics listener"
mv "$TLS_DIR/node-3.pem" "$TLS_DIR/node-3.pem.https-old"
"$(dirname "$0")/../../deploy/tls/make-certs.sh" "$TLS_DIR" node-3
kill -HUP "$(cat "$KQ_LOCAL_DIR/broker-3.pid")"
deadline=$(($(date +%s) + 20))
until new_serial=$(served_serial) && [[ -n $new_serial && $new_serial != "$old_serial" ]]; do
    (($(date +%s) < deadline)) || kt_fail "the HTTPS metrics listener still serves $old_serial after SIGHUP"
    sleep 0.5
done
kt_assert_eq "the renewed certificate is the one served" \
    "$(openssl x509 -in "$TLS_DIR/node-3.pem" -noout -serial)" "$new_serial"
kt_pass
