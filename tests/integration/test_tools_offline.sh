#!/usr/bin/env bash
# The kq tool without a running controller: usage errors (exit 2), kq storage random-uuid and
# format against temporary directories, kq log-dump of a freshly formatted (empty) directory
# and of a missing one, and describe / metadata-write against dead ports (exit 1 with the
# "no controller answered" message once --timeout-ms has passed; a refused connection is
# retried until then, and --verbose says so). Nothing here depends on timing.
# usage: test_tools_offline.sh BIN_DIR
set -uo pipefail

BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
KQ=$BIN/kq
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kq-tools-offline.XXXXXX")
FAILS=0
CHECKS=0
trap 'rm -rf "$TMP"' EXIT

[[ -x $KQ ]] || {
    echo "FAIL: $KQ is missing (build the kq target)" >&2
    exit 1
}

fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}

# run PROG ARGS...: runs with a hang guard; sets RC, OUT (stdout), ERR (stderr).
run() {
    timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
    OUT=$(cat "$TMP/out")
    ERR=$(cat "$TMP/err")
}

# expect RC DESCRIPTION PROG ARGS...
expect() {
    local want=$1 desc=$2
    shift 2
    CHECKS=$((CHECKS + 1))
    run "$@"
    if [[ $RC -ne $want ]]; then
        fail "$desc: exit $RC, expected $want (stdout: ${OUT:0:300}; stderr: ${ERR:0:300})"
        return 1
    fi
    return 0
}

# expect_usage DESCRIPTION ARGS...: exit 2, a message and the usage on stderr, nothing on stdout.
expect_usage() {
    local desc=$1
    shift
    expect 2 "$desc" "$KQ" "$@" || return
    [[ $ERR == *Usage:* ]] || fail "$desc: no usage on stderr: $ERR"
    [[ -z $OUT ]] || fail "$desc: printed on stdout: $OUT"
    [[ $(head -n 1 <<<"$ERR") == kq* ]] || fail "$desc: first stderr line is not a kq message: $ERR"
}

# has TEXT NEEDLE DESCRIPTION
has() {
    CHECKS=$((CHECKS + 1))
    [[ $1 == *"$2"* ]] || fail "$3: '$2' not in: $1"
}

# A TCP port on 127.0.0.1 that nothing listens on.
dead_port() {
    local p
    for ((p = 29000 + RANDOM % 1000; p < 31000; p++)); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    echo 29999
}

# ---- usage errors -------------------------------------------------------------------------
expect_usage "no command"
expect_usage "unknown command" frobnicate
expect_usage "storage without subcommand" storage
expect_usage "unknown storage subcommand" storage frob
expect_usage "random-uuid with an argument" storage random-uuid extra
expect_usage "format without --config" storage format --cluster-id AAAAAAAAAAAAAAAAAAAAAQ
expect_usage "format without --cluster-id" storage format --config "$TMP/x.properties"
expect_usage "format with an unknown option" storage format --bogus
expect_usage "format --config without value" storage format --config
expect_usage "describe without --bootstrap-controller" metadata-quorum describe --status
expect_usage "metadata-quorum without subcommand" metadata-quorum --bootstrap-controller 127.0.0.1:1
expect_usage "metadata-quorum unknown subcommand" metadata-quorum \
    --bootstrap-controller 127.0.0.1:1 frob --status
expect_usage "describe without --status/--replication" metadata-quorum \
    --bootstrap-controller 127.0.0.1:1 describe
has "$ERR" "exactly one of --status or --replication" "describe without mode"
expect_usage "describe with both --status and --replication" metadata-quorum \
    --bootstrap-controller 127.0.0.1:1 describe --status --replication
expect_usage "--human-readable with --status" metadata-quorum \
    --bootstrap-controller 127.0.0.1:1 describe --status --human-readable
has "$ERR" "--human-readable" "--human-readable with --status"
expect_usage "bootstrap without port" metadata-quorum --bootstrap-controller localhost describe --status
expect_usage "bootstrap with a bad port" metadata-quorum --bootstrap-controller localhost:99999 \
    describe --status
expect_usage "bootstrap with an empty entry" metadata-quorum --bootstrap-controller "127.0.0.1:1,," \
    describe --status
expect_usage "--timeout-ms 0" metadata-quorum --bootstrap-controller 127.0.0.1:1 --timeout-ms 0 \
    describe --status
expect_usage "--timeout-ms not a number" metadata-quorum --bootstrap-controller 127.0.0.1:1 \
    --timeout-ms 2s describe --status
expect_usage "kq-metadata-quorum without mode" "$BIN/kq-metadata-quorum" \
    --bootstrap-controller 127.0.0.1:1 describe
expect_usage "log-dump without --dir" log-dump
expect_usage "log-dump with an extra argument" log-dump --dir "$TMP" extra
expect_usage "log-dump with --dir and --snapshot" log-dump --dir "$TMP" --snapshot "$TMP/x"
expect_usage "log-dump with --snapshot and --partition-log" log-dump --snapshot "$TMP/x" \
    --partition-log "$TMP"
expect_usage "log-dump --json --lines" log-dump --dir "$TMP" --json --lines
has "$ERR" "--json and --lines" "log-dump --json --lines"
expect_usage "log-dump --print-values without --partition-log" log-dump --dir "$TMP" --print-values
has "$ERR" "go with --partition-log" "log-dump --print-values with --dir"
expect_usage "log-dump --partition without --partition-log" log-dump --snapshot "$TMP/x" --partition 0
expect_usage "log-dump --partition-log --lines" log-dump --partition-log "$TMP" --lines
expect_usage "log-dump --topic-id not a uuid" log-dump --partition-log "$TMP" --topic-id nope
expect_usage "log-dump --partition -1" log-dump --partition-log "$TMP" --partition -1
expect_usage "metadata-write without --bootstrap-controller" metadata-write
expect_usage "metadata-write --count 0" metadata-write --bootstrap-controller 127.0.0.1:1 --count 0
expect_usage "metadata-write --size -1" metadata-write --bootstrap-controller 127.0.0.1:1 --size -1

expect 0 "kq --help" "$KQ" --help && has "$OUT" "metadata-quorum" "kq --help"
expect 0 "kq metadata-quorum --help" "$KQ" metadata-quorum --help && has "$OUT" "--replication" \
    "metadata-quorum --help"

# ---- storage random-uuid --------------------------------------------------------------------
expect 0 "random-uuid" "$KQ" storage random-uuid
id1=$OUT
[[ $id1 =~ ^[A-Za-z0-9_]{22}$ ]] || fail "random-uuid printed '$id1', not a 22-character uuid without '-'"
expect 0 "random-uuid again" "$KQ" storage random-uuid
[[ $OUT != "$id1" ]] || fail "random-uuid printed the same id twice: $OUT"
CLUSTER=$id1

# ---- storage format -------------------------------------------------------------------------
DIR1=$TMP/node-1/meta
# A controller config the daemon would accept (format runs the daemon's own validation).
ctl_props() { # NODE_ID
    printf 'process.roles=controller\nnode.id=%s\ncontroller.quorum.voters=%s@127.0.0.1:9\nlisteners=CONTROLLER://127.0.0.1:9\n' "$1" "$1"
}
{
    echo "# a controller"
    ctl_props 1
    echo "metadata.log.dir=$DIR1"
} >"$TMP/node-1.properties"

expect_usage "format with a bad cluster id" storage format --config "$TMP/node-1.properties" \
    --cluster-id not-a-uuid
has "$ERR" "cluster id must be a 22-character base64 uuid, e.g. from kq storage random-uuid" \
    "bad cluster id"
[[ ! -e $DIR1 ]] || fail "format with a bad cluster id created $DIR1"

expect 1 "format with a missing config file" "$KQ" storage format \
    --config "$TMP/missing.properties" --cluster-id "$CLUSTER"
has "$ERR" "missing.properties" "missing config file"

printf 'process.roles=controller\nmetadata.log.dir=%s/x\n' "$TMP" >"$TMP/no-id.properties"
expect 1 "format without node.id" "$KQ" storage format --config "$TMP/no-id.properties" \
    --cluster-id "$CLUSTER"
has "$ERR" "node.id" "config without node.id"

printf 'node.id=abc\nmetadata.log.dir=%s/x\n' "$TMP" >"$TMP/bad-id.properties"
expect 1 "format with node.id=abc" "$KQ" storage format --config "$TMP/bad-id.properties" \
    --cluster-id "$CLUSTER"
has "$ERR" "node.id" "config with a bad node.id"

ctl_props 3 >"$TMP/no-dir.properties"
expect 1 "format without metadata.log.dir" "$KQ" storage format --config "$TMP/no-dir.properties" \
    --cluster-id "$CLUSTER"
has "$ERR" "metadata.log.dir" "config without metadata.log.dir"

if expect 0 "format" "$KQ" storage format --config "$TMP/node-1.properties" --cluster-id "$CLUSTER"; then
    [[ $OUT =~ ^"Formatting metadata directory $DIR1 with cluster id $CLUSTER, node id 1, directory id "[A-Za-z0-9_-]{22}\.$ ]] ||
        fail "format printed: $OUT"
fi
[[ -d $DIR1 ]] || fail "format did not create $DIR1"

expect 1 "format of a formatted directory" "$KQ" storage format --config "$TMP/node-1.properties" \
    --cluster-id "$CLUSTER"
has "$ERR" "Log directory $DIR1 is already formatted. Use --ignore-formatted to ignore this directory and format the others." \
    "reformat refusal"
expect 1 "format of a formatted directory with another cluster id" "$KQ" storage format \
    --config "$TMP/node-1.properties" --cluster-id "$(
        "$KQ" storage random-uuid
    )"
has "$ERR" "already formatted" "reformat with another cluster id"
expect 0 "format --ignore-formatted" "$KQ" storage format --config "$TMP/node-1.properties" \
    --cluster-id "$CLUSTER" --ignore-formatted
has "$OUT" "All of the log directories are already formatted." "--ignore-formatted"

# Short options, and log.dirs when metadata.log.dir is absent.
DIR2=$TMP/logs-a
{
    ctl_props 2
    printf 'log.dirs=%s,%s/logs-b\n' "$DIR2" "$TMP"
} >"$TMP/node-2.properties"
expect 0 "format -c -t with log.dirs" "$KQ" storage format -c "$TMP/node-2.properties" -t "$CLUSTER" &&
    has "$OUT" "Formatting metadata directory $DIR2 with cluster id $CLUSTER, node id 2," "format -c -t"
[[ ! -e $TMP/logs-b ]] || fail "format created the second log.dirs entry"

# ---- log-dump -------------------------------------------------------------------------------
SUMMARY="records=0 batches=0 log_start=0 log_end=0 last_epoch=0 qstate_epoch=0 voted_id=-1 leader_id=-1"
if expect 0 "log-dump of a fresh directory" "$KQ" log-dump --dir "$DIR1"; then
    [[ $OUT == "$SUMMARY" ]] || fail "log-dump of a fresh directory printed: $OUT"
fi
if expect 0 "log-dump --lines of a fresh directory" "$KQ" log-dump --dir "$DIR1" --lines; then
    [[ $OUT == "$SUMMARY" ]] || fail "log-dump --lines of a fresh directory printed: $OUT"
fi
if expect 0 "log-dump --json of a fresh directory" "$KQ" log-dump --dir "$DIR1" --json; then
    [[ $OUT == '{"batches":[],"summary":{"records":0,"batches":0,"log_start":0,"log_end":0,"last_epoch":0,"qstate_epoch":0,"voted_id":-1,"leader_id":-1}}' ]] ||
        fail "log-dump --json printed: $OUT"
    if command -v python3 >/dev/null; then
        python3 -c 'import json,sys; json.load(sys.stdin)' <<<"$OUT" || fail "log-dump --json is not JSON"
    fi
fi
expect 1 "log-dump of a missing directory" "$KQ" log-dump --dir "$TMP/nope"
has "$ERR" "kq storage format" "log-dump of a missing directory"
[[ ! -e $TMP/nope ]] || fail "log-dump created $TMP/nope"
mkdir "$TMP/empty"
expect 1 "log-dump of an unformatted directory" "$KQ" log-dump --dir "$TMP/empty"
has "$ERR" "$TMP/empty" "log-dump of an unformatted directory"
# A formatted directory that no broker has opened has no partitions; nothing is created in it.
before=$(cd "$DIR1" && md5sum data.mdb)
if expect 0 "log-dump --partition-log of a fresh directory" "$KQ" log-dump --partition-log "$DIR1"; then
    [[ $OUT == "partitions=0 batches=0 records=0" ]] || fail "log-dump --partition-log printed: $OUT"
fi
if expect 0 "log-dump --partition-log --json of a fresh directory" "$KQ" log-dump \
    --partition-log "$DIR1" --json --print-values; then
    [[ $OUT == '{"partitions":[],"summary":{"partitions":0,"batches":0,"records":0}}' ]] ||
        fail "log-dump --partition-log --json printed: $OUT"
fi
[[ $(cd "$DIR1" && md5sum data.mdb) == "$before" ]] || fail "log-dump --partition-log changed $DIR1/data.mdb"
expect 1 "log-dump --partition-log of a missing directory" "$KQ" log-dump --partition-log "$TMP/nope"
has "$ERR" "kq storage format" "log-dump --partition-log of a missing directory"
[[ ! -e $TMP/nope ]] || fail "log-dump --partition-log created $TMP/nope"
expect 1 "log-dump --snapshot of a missing file" "$KQ" log-dump --snapshot "$TMP/nope.checkpoint"
has "$ERR" "snapshot $TMP/nope.checkpoint does not exist" "log-dump --snapshot of a missing file"
printf 'KQSNAP01 but not a snapshot at all.....' >"$TMP/bad.checkpoint"
expect 1 "log-dump --snapshot of a damaged file" "$KQ" log-dump --snapshot "$TMP/bad.checkpoint"
has "$ERR" "damaged header" "log-dump --snapshot of a damaged file"

# ---- every command that prints data honours --json or refuses it (usage error) -----------
# (Honoured, with a controller: metadata-quorum describe, topics --describe and --list,
# cluster describe, configs --describe, features describe, log-dump; see the unit tests and
# test_log_dump_decodes_every_record.sh.)
C="--bootstrap-controller 127.0.0.1:1"
expect_usage "--json with storage random-uuid" storage random-uuid --json
expect_usage "--json with storage format" storage format --config "$TMP/x.properties" \
    --cluster-id "$CLUSTER" --json
expect_usage "--json with metadata-write" metadata-write $C --json
expect_usage "--json with topics --create" topics $C --create --topic t --partitions 1 \
    --replication-factor 1 --json
has "$ERR" "--json goes with --describe and --list" "--json with topics --create"
expect_usage "--json with topics --alter" topics $C --alter --topic t --partitions 2 --json
expect_usage "--json with topics --delete" topics $C --delete --topic t --json
expect_usage "--json with cluster unregister" cluster $C unregister --id 1 --json
expect_usage "--json with leader-election" leader-election $C --election-type PREFERRED \
    --all-topic-partitions --json
expect_usage "--json with configs --alter" configs $C --entity-type topics --entity-name t \
    --alter --add-config min.insync.replicas=1 --json
expect_usage "--json with features upgrade" features $C upgrade --feature kraft.version=0 --json
expect_usage "--json with produce" produce --bootstrap-server 127.0.0.1:1 --topic t --value v --json
expect_usage "--json with consume" consume --bootstrap-server 127.0.0.1:1 --topic t --json

# ---- no controller --------------------------------------------------------------------------
P1=$(dead_port)
P2=$(dead_port)
expect 1 "describe --status against a dead port" "$KQ" metadata-quorum \
    --bootstrap-controller "127.0.0.1:$P1" --timeout-ms 2000 describe --status
[[ $(head -n 1 <<<"$ERR") == "Error: no controller answered within 2000 ms (tried 127.0.0.1:$P1)" ]] ||
    fail "describe against a dead port said: $ERR"
[[ -z $OUT ]] || fail "describe against a dead port printed on stdout: $OUT"

# --verbose: the refused connection is retried (stderr only); the final error is the same.
expect 1 "describe --status --verbose against a dead port" "$KQ" metadata-quorum \
    --bootstrap-controller "127.0.0.1:$P1" --timeout-ms 2000 --verbose describe --status
has "$ERR" "kq: retrying in " "describe --verbose against a dead port"
has "$ERR" "after pass 1: 127.0.0.1:$P1: NETWORK_EXCEPTION (cannot connect: " "describe --verbose against a dead port"
[[ $(tail -n 1 <<<"$ERR") == "Error: no controller answered within 2000 ms (tried 127.0.0.1:$P1)" ]] ||
    fail "describe --verbose against a dead port ended with: $ERR"
[[ -z $OUT ]] || fail "describe --verbose against a dead port printed on stdout: $OUT"
expect 1 "topics --list against a dead port" "$KQ" topics --list \
    --bootstrap-controller "127.0.0.1:$P1" --timeout-ms 1000
[[ $ERR == "Error: no controller answered within 1000 ms (tried 127.0.0.1:$P1)" ]] ||
    fail "topics --list against a dead port said (no retry lines without --verbose): $ERR"

expect 1 "describe --replication against two dead ports" "$BIN/kq-metadata-quorum" \
    --bootstrap-controller "127.0.0.1:$P1,localhost:$P2" --timeout-ms 300 describe --replication \
    --human-readable
[[ $(head -n 1 <<<"$ERR") == "Error: no controller answered within 300 ms (tried 127.0.0.1:$P1, localhost:$P2)" ]] ||
    fail "describe against two dead ports said: $ERR"

expect 1 "metadata-write against a dead port" "$KQ" metadata-write \
    --bootstrap-controller "127.0.0.1:$P1" --timeout-ms 300 --count 3 --size 10
has "$ERR" "no controller answered within 300 ms (tried 127.0.0.1:$P1)" "metadata-write to a dead port"

if [[ $FAILS -ne 0 ]]; then
    echo "FAIL: $FAILS of $CHECKS checks failed" >&2
    exit 1
fi
echo "PASS: tools_offline ($CHECKS checks)"
