#!/usr/bin/env bash
# Node identities bound to certificates, on a TLS cluster (cluster.sh up --tls: controllers
# 3001..3003 with certificates CN=node-300N, brokers 1..3 with CN=node-N, an admin CN=admin).
# kq-forge claims to be another node:
#   - broker 1's certificate cannot register or heartbeat as broker 2, nor fetch as follower
#     replica 2 from a leader; broker 2's own certificate can (positive controls);
#   - with the authorizer on (super user User:CN=admin), broker 1's certificate cannot delete or
#     create a topic, unregister a broker, write to the metadata log or produce; the admin can;
#   - a broker's or the admin's certificate sending Raft Fetch or Vote as voter 3002 is
#     refused with CLUSTER_AUTHORIZATION_FAILED, counted and logged;
#   - with both followers paused (SIGSTOP) and forged voter Fetches from those certificates
#     arriving all the while, no write is acknowledged; once the followers resume, writes are;
#   - the control: voter 3002's own certificate (a stolen voter key, outside what kq can
#     stop) does get a write acknowledged the same way, so the forger is a faithful follower;
#   - a dialer checks whom it reached: with the leader killed and a TLS server holding broker
#     1's certificate (from the cluster's CA) on its address, the other voters close every
#     connection to it before sending anything, say so, and elect a leader among themselves.
# usage: test_tls_identity.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqdata.sh
source "$(dirname "$0")/../lib/kqdata.sh"
kd_init "${1:?usage: $0 BIN_DIR}" tls_identity 26800

kd_up --tls
TLS_DIR=$KQ_LOCAL_DIR/tls
FORGE=$KT_BIN/kq-forge
for who in node-1 node-2 node-3002 admin; do
    printf '%s\n' security.protocol=SSL "ssl.keystore.location=$TLS_DIR/$who.pem" \
        "ssl.truststore.location=$TLS_DIR/ca.pem" >"$KT_DIR/$who.properties"
done
ctl_port() { echo $((KQ_BASE_PORT + ($1 - 3001) * KQ_PORT_STEP)); }
broker_port() { echo $((KQ_BROKER_BASE_PORT + ($1 - 1) * 2)); }

# forge WHO PORT ARGS...: kq-forge with WHO's certificate; its answers in FORGED
forge() {
    local who=$1 port=$2
    shift 2
    FORGED=$(timeout 60 "$FORGE" --server "127.0.0.1:$port" --command-config "$KT_DIR/$who.properties" "$@" 2>&1) ||
        kt_fail "kq-forge $* failed: $FORGED"
}

# find_leader: sets leader and followers (the other two controllers)
find_leader() {
    local id
    kd_kq metadata-quorum describe --status || kt_fail "describe: $KD_OUT"
    leader=$(kt_field LeaderId <<<"$KD_OUT")
    followers=()
    for id in 3001 3002 3003; do
        [[ $id == "$leader" ]] || followers+=("$id")
    done
    kt_log "leader: $leader, followers: ${followers[*]}"
}
find_leader

echo "## broker 1's certificate cannot speak for broker 2"
forge node-1 "$(ctl_port "$leader")" --as 2 register
kt_assert_contains "registration as broker 2 with broker 1's certificate" "error=CLUSTER_AUTHORIZATION_FAILED" "$FORGED"
forge node-1 "$(ctl_port "$leader")" --as 2 heartbeat
kt_assert_contains "heartbeat as broker 2 with broker 1's certificate" "error=CLUSTER_AUTHORIZATION_FAILED" "$FORGED"
forge node-1 "$(ctl_port "$leader")" --as 1 heartbeat
kt_assert_contains "heartbeat as broker 1 with its own certificate (epoch 0: stale, not refused)" "error=STALE_BROKER_EPOCH" "$FORGED"
kd_kq cluster describe --json || kt_fail "cluster describe: $KD_OUT"
kt_assert_contains "broker 2 kept its registration" '"id":2,' "$KD_OUT"

KD_TOPIC=idt
kd_create idt 1:2:3
kd_wait_line idt 30 'Leader: 1.*Isr: 1,2,3'
kd_produce all v0 || kt_fail "write: $KD_OUT"
topic_id=$(kd_kq topics --describe --topic idt && sed -n 's/.*TopicId: \([^[:space:]]*\).*/\1/p' <<<"$KD_OUT" | head -n 1)
[[ -n $topic_id ]] || kt_fail "no topic id in: $KD_OUT"
forge node-1 "$(broker_port 1)" --as 2 data-fetch --topic-id "$topic_id"
kt_assert_contains "follower fetch as replica 2 with broker 1's certificate" "error=CLUSTER_AUTHORIZATION_FAILED" "$FORGED"
forge node-2 "$(broker_port 1)" --as 2 data-fetch --topic-id "$topic_id"
kt_assert_eq "follower fetch as replica 2 with its own certificate" "" "$(grep CLUSTER_AUTHORIZATION_FAILED <<<"$FORGED" || true)"
kd_wait_metric 1 30 kq_authorization_failures_total 1

echo "## the authorizer: a broker's certificate is no admin; the admin (a super user) is"
# kqa WHO ARGS...: kq against the controllers with WHO's certificate; output in KD_OUT
kqa() {
    local who=$1 rc=0
    shift
    KD_OUT=$(timeout 60 "$KT_KQ" "$@" --bootstrap-controller "$KD_CTL" \
        --command-config "$KT_DIR/$who.properties" 2>&1) || rc=$?
    return "$rc"
}
kqa node-1 topics --delete --topic idt && kt_fail "broker 1's certificate deleted a topic: $KD_OUT"
kt_assert_contains "topics --delete with broker 1's certificate" "TOPIC_AUTHORIZATION_FAILED" "$KD_OUT"
kt_assert_contains "the refusal names principal, operation and resource" \
    "principal User:CN=node-1 is not allowed to Delete on Topic idt" "$KD_OUT"
kqa node-1 cluster unregister --id 2 && kt_fail "broker 1's certificate unregistered broker 2: $KD_OUT"
kt_assert_contains "cluster unregister with broker 1's certificate" "CLUSTER_AUTHORIZATION_FAILED" "$KD_OUT"
kqa node-1 topics --create --topic evil --partitions 1 --replication-factor 1 &&
    kt_fail "broker 1's certificate created a topic: $KD_OUT"
kqa node-1 metadata-write --timeout-ms 3000 && kt_fail "broker 1's certificate wrote to the metadata log: $KD_OUT"
kt_assert_contains "metadata-write with broker 1's certificate" "super users only" "$KD_OUT"
rc=0
out=$(timeout 60 "$KT_KQ" produce --bootstrap-server "$KD_BROKERS" --topic idt --value x \
    --request-timeout-ms 3000 --delivery-timeout-ms 3000 --command-config "$KT_DIR/node-1.properties" 2>&1) || rc=$?
kt_assert_ne "exit status of produce with broker 1's certificate" 0 "$rc"
kt_assert_contains "produce with broker 1's certificate" "TOPIC_AUTHORIZATION_FAILED" "$out"
kd_describe idt || kt_fail "the admin cannot describe: $KD_OUT"
kd_kq topics --create --topic scratch --partitions 1 --replication-factor 3 ||
    kt_fail "the admin cannot create a topic: $KD_OUT"
kd_kq topics --delete --topic scratch || kt_fail "the admin cannot delete a topic: $KD_OUT"

echo "## certificates that are not voter 3002's cannot act as voter 3002"
for who in node-1 admin; do
    forge "$who" "$(ctl_port "$leader")" --as "${followers[0]}" raft-fetch --count 2
    kt_assert_eq "Raft Fetches as voter ${followers[0]} with $who's certificate refused" 2 \
        "$(grep -c '^error=CLUSTER_AUTHORIZATION_FAILED' <<<"$FORGED")"
    forge "$who" "$(ctl_port "$leader")" --as "${followers[0]}" vote
    kt_assert_contains "Vote as ${followers[0]} with $who's certificate" "error=CLUSTER_AUTHORIZATION_FAILED" "$FORGED"
done
grep -q 'refused a request: its sender may not do that.*principal="User:CN=node-1"' "$KQ_LOCAL_DIR/node-$leader.log" ||
    kt_fail "the leader did not log the refusal of User:CN=node-1"

echo "## both followers paused: forged voter fetches get no write acknowledged"
signal_followers() { # STOP|CONT
    local id
    for id in "${followers[@]}"; do
        kill "-$1" "$(cat "$KQ_LOCAL_DIR/node-$id.pid")"
    done
    kt_log "SIG$1 controllers ${followers[*]}"
}
signal_followers STOP
"$FORGE" --server "127.0.0.1:$(ctl_port "$leader")" --command-config "$KT_DIR/node-1.properties" \
    --as "${followers[0]}" raft-fetch --count 60 >"$KT_DIR/forge-a.out" 2>&1 &
fa=$!
"$FORGE" --server "127.0.0.1:$(ctl_port "$leader")" --command-config "$KT_DIR/admin.properties" \
    --as "${followers[1]}" raft-fetch --count 60 >"$KT_DIR/forge-b.out" 2>&1 &
fb=$!
rc=0
out=$(timeout 60 "$KT_KQ" metadata-write --bootstrap-controller "127.0.0.1:$(ctl_port "$leader")" \
    --command-config "$KQ_LOCAL_DIR/admin.properties" --timeout-ms 4000 2>&1) || rc=$?
kt_assert_ne "exit status of a write with both followers paused and forged fetches" 0 "$rc"
wait "$fa" "$fb" || true
for f in forge-a forge-b; do
    kt_assert_eq "$f: answers other than CLUSTER_AUTHORIZATION_FAILED" 0 \
        "$(grep '^error=' "$KT_DIR/$f.out" | grep -vc 'CLUSTER_AUTHORIZATION_FAILED' || true)"
    kt_assert_gt "$f: forged fetches answered" "$(grep -c '^error=' "$KT_DIR/$f.out")" 10
done
signal_followers CONT
deadline=$(($(date +%s) + 60))
until out=$(timeout 60 "$KT_KQ" metadata-write --bootstrap-controller "$KD_CTL" \
    --command-config "$KQ_LOCAL_DIR/admin.properties" --timeout-ms 10000 2>&1); do
    (($(date +%s) < deadline)) || kt_fail "no write acknowledged after the followers resumed: $out"
done
kt_log "after the followers resumed: $out"

echo "## the control: voter ${followers[0]}'s own certificate is trusted as that voter"
find_leader
printf '%s\n' security.protocol=SSL "ssl.keystore.location=$TLS_DIR/node-${followers[0]}.pem" \
    "ssl.truststore.location=$TLS_DIR/ca.pem" >"$KT_DIR/voter.properties"
signal_followers STOP
"$FORGE" --server "127.0.0.1:$(ctl_port "$leader")" --command-config "$KT_DIR/voter.properties" \
    --as "${followers[0]}" raft-fetch --count 100 >"$KT_DIR/forge-c.out" 2>&1 &
fc=$!
rc=0
out=$(timeout 60 "$KT_KQ" metadata-write --bootstrap-controller "127.0.0.1:$(ctl_port "$leader")" \
    --command-config "$KQ_LOCAL_DIR/admin.properties" --timeout-ms 8000 2>&1) || rc=$?
kill "$fc" 2>/dev/null || true
wait "$fc" 2>/dev/null || true
signal_followers CONT
kt_assert_eq "exit status of a write acknowledged by the leader and a fetcher with voter ${followers[0]}'s key" 0 "$rc"

echo "## a node dialing another checks that node answered"
find_leader
victim=$leader
kd_cluster kill "$victim"
# The victim comes back with broker 1's keystore: a certificate of the cluster's CA that is
# not its own (a stolen or misplaced key) answers on its address.
sed -i "s|^ssl.keystore.location=.*|ssl.keystore.location=$TLS_DIR/node-1.pem|" "$KQ_LOCAL_DIR/node-$victim.properties"
kd_cluster start "$victim"
kt_log "restarted $victim with broker 1's certificate"
deadline=$(($(date +%s) + 60))
until grep -q "closed a connection: the node dialed was answered by another certificate.*principal=\"User:CN=node-1\".*is not node $victim" \
    "$KQ_LOCAL_DIR"/node-30*.log; do
    (($(date +%s) < deadline)) || kt_fail "no voter refused the impostor at $victim's address"
    sleep 0.5
done
kt_log "a voter refused it: $(grep -h 'closed a connection' "$KQ_LOCAL_DIR"/node-30*.log | head -n 1)"
deadline=$(($(date +%s) + 60))
until kd_kq metadata-quorum describe --status && new=$(kt_field LeaderId <<<"$KD_OUT") &&
    [[ -n $new && $new != "$victim" && $new != -1 ]]; do
    (($(date +%s) < deadline)) || kt_fail "no leader but $victim: $KD_OUT"
    sleep 0.5
done
kt_log "leader $new; $victim with the wrong certificate is no voter anyone talks to"
kd_kq metadata-write --timeout-ms 10000 || kt_fail "no write acknowledged with $victim isolated: $KD_OUT"
kt_pass
