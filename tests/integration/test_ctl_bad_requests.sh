#!/usr/bin/env bash
# Bad controller requests get an error and never take a controller down: a broker config for
# a resource name that is not a broker id ("-0", "00000000001"), and a topic creation that
# would write more than 10,000 records (the per-operation limit). All three controllers stay
# up and keep answering.
# usage: test_ctl_bad_requests.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_bad_requests 25800

kt_cluster 3
kt_start_all
kt_wait_for_leader 60

for name in -0 00000000001; do
    rc=0
    kt_kq configs --entity-type brokers --entity-name "$name" --alter \
        --add-config log.retention.ms=1000 || rc=$?
    kt_assert_eq "exit status of kq configs for broker '$name'" 1 "$rc"
    kt_assert_contains "error for broker '$name'" "broker resource name $name is not \"\" or a broker id" "$KT_OUT"
done
rc=0
kt_kq topics --create --topic huge --partitions 2000000 --replication-factor 1 || rc=$?
kt_assert_eq "exit status of a 2,000,000-partition create" 1 "$rc"
kt_assert_contains "error for a 2,000,000-partition create" "POLICY_VIOLATION" "$KT_OUT"

for i in 1 2 3; do
    kt_alive "$i" || kt_fail "node $i exited after the bad requests: $(tail -n 5 "$KT_DIR/node-$i.log")"
done
kt_log "all three controllers are still running"
kt_kq_ok cluster describe
kt_kq_ok features describe
kt_pass
