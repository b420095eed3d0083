#!/usr/bin/env bash
# kq storage format and the daemons share one validation (issue 8, item 12):
#  - a controller config with log.dirs and no metadata.log.dir is formatted at the first
#    log.dirs entry (Kafka's default) and kq-controller starts on it and elects itself;
#  - a config the daemon refuses (a bad value, a missing key) is refused by format too, naming
#    the same key, and format creates nothing;
#  - the same for a broker agent's config.
# usage: test_format_one_validation.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" format_one_validation 27200

KT_NODES=1
KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid)

# 1. log.dirs only: metadata.log.dir defaults to its first entry.
kt_write_config 1 1 "log.dirs=$KT_DIR/data-a, $KT_DIR/data-b"
sed -i '/^metadata.log.dir=/d' "$(kt_config 1)"
out=$("$KT_KQ" storage format --config "$(kt_config 1)" --cluster-id "$KT_CLUSTER_ID" 2>&1) ||
    kt_fail "format of a controller config with log.dirs only failed: $out"
kt_assert_contains "format with log.dirs only" "Formatting metadata directory $KT_DIR/data-a " "$out"
[[ ! -e $KT_DIR/data-b ]] || kt_fail "format created the second log.dirs entry"
kt_start 1
kt_wait_for_leader 30 1
kt_assert_eq "leader of the single-voter quorum on log.dirs" 1 "$KT_LEADER"
kt_stop 1

# 2. What the daemon refuses, format refuses, naming the same key, and creates nothing.
# refused CASE KEY [key=value...]: a controller config with those lines appended.
refused() {
    local what=$1 key=$2 rc=0 fout dout
    shift 2
    kt_write_config 2 1 "metadata.log.dir=$KT_DIR/refused-$what" "$@"
    fout=$("$KT_KQ" storage format --config "$(kt_config 2)" --cluster-id "$KT_CLUSTER_ID" 2>&1) ||
        rc=$?
    kt_assert_eq "format of a config with $what: exit status" 1 "$rc"
    kt_assert_contains "format of a config with $what names the key" "$key" "$fout"
    [[ ! -e $KT_DIR/refused-$what ]] || kt_fail "format of a config with $what created its directory"
    rc=0
    dout=$(timeout 30 "$KT_CTL" --config "$(kt_config 2)" 2>&1) || rc=$?
    kt_assert_eq "kq-controller on a config with $what: exit status" 2 "$rc"
    kt_assert_contains "kq-controller on a config with $what names the key" "$key" "$dout"
    kt_log "ok: $what: format said: $(tail -n 1 <<<"$fout")"
}
refused bad-election-timeout controller.quorum.election.timeout.ms \
    controller.quorum.election.timeout.ms=soon
refused bad-listener listeners "listeners=CONTROLLER://127.0.0.1:notaport"
refused bad-roles process.roles "process.roles=broker,controller"

# 3. A broker agent's config: format validates it as kq-broker-agent would.
cat >"$KT_DIR/broker-7.properties" <<PROPS
process.roles=broker
node.id=7
controller.quorum.voters=1@127.0.0.1:$(kt_port 1)
listeners=PLAINTEXT://127.0.0.1:$(kt_port 7)
log.dirs=$KT_DIR/broker-7
broker.session.timeout.ms=often
PROPS
rc=0
out=$("$KT_KQ" storage format --config "$KT_DIR/broker-7.properties" --cluster-id "$KT_CLUSTER_ID" 2>&1) ||
    rc=$?
kt_assert_eq "format of a broker config with a bad session timeout: exit status" 1 "$rc"
kt_assert_contains "format of a bad broker config names the key" broker.session.timeout.ms "$out"
[[ ! -e $KT_DIR/broker-7 ]] || kt_fail "format of a refused broker config created its directory"
sed -i '/^broker.session.timeout.ms=/d' "$KT_DIR/broker-7.properties"
out=$("$KT_KQ" storage format --config "$KT_DIR/broker-7.properties" --cluster-id "$KT_CLUSTER_ID" 2>&1) ||
    kt_fail "format of a good broker config failed: $out"
kt_assert_contains "format of a broker config" "Formatting metadata directory $KT_DIR/broker-7 " "$out"

kt_pass
