#!/usr/bin/env bash
# kq-controller refuses bad input with exit status 2 and a message naming the problem:
# missing config file, unformatted directory (the message points at `kq storage format`),
# a directory formatted for another node id, bad config values (the message
# names the key). An unknown key only gets a warning: the node starts (a single-voter quorum
# elects itself) and exits 0 on SIGTERM.
# usage: test_bad_inputs.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" bad_inputs 24800

# expect_exit2 WHAT NEEDLE CONFIG: runs the daemon in the foreground; it must exit 2 within
# 30 s and its output must contain NEEDLE (case-insensitive).
expect_exit2() {
    local what=$1 needle=$2 cfg=$3 rc=0 out
    out=$(timeout 30 "$KT_CTL" --config "$cfg" 2>&1) || rc=$?
    if [[ $rc -eq 124 ]]; then
        kt_fail "$what: kq-controller did not exit within 30 s (expected exit 2); output: $(tail -n 5 <<<"$out")"
    fi
    kt_assert_eq "$what: exit status" 2 "$rc"
    if ! grep -qiF -- "$needle" <<<"$out"; then
        kt_fail "$what: expected the message to mention '$needle', saw: $out"
    fi
    kt_log "ok: $what: $(grep -iF -- "$needle" <<<"$out" | head -n 1)"
    if [[ $out == *"Sanitizer"* || $out == *"Segmentation"* ]]; then
        kt_fail "$what: crashed: $out"
    fi
}

KT_NODES=1
KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid)

# Missing config file.
expect_exit2 "missing config file" "$KT_DIR/nonexistent.properties" "$KT_DIR/nonexistent.properties"

# Unformatted directory: absent, then present but empty.
kt_write_config 1 1
expect_exit2 "absent metadata.log.dir" "kq storage format" "$(kt_config 1)"
mkdir -p "$KT_DIR/node-1"
expect_exit2 "empty metadata.log.dir" "kq storage format" "$(kt_config 1)"
[[ -z $(ls -A "$KT_DIR/node-1") ]] || kt_fail "the daemon wrote into an unformatted directory: $(ls -A "$KT_DIR/node-1")"
rmdir "$KT_DIR/node-1"

# A directory formatted for node 1, used by a config that says node 2.
kt_format 1
cp "$(kt_config 1)" "$KT_DIR/wrong-node.properties"
kt_set_prop "$KT_DIR/wrong-node.properties" node.id 2
kt_set_prop "$KT_DIR/wrong-node.properties" controller.quorum.voters "2@127.0.0.1:$(kt_port 1)"
expect_exit2 "directory formatted for another node id" "node" "$KT_DIR/wrong-node.properties"

# Bad values: the message names the key.
bad_value() { # KEY VALUE
    cp "$(kt_config 1)" "$KT_DIR/bad.properties"
    kt_set_prop "$KT_DIR/bad.properties" "$1" "$2"
    expect_exit2 "$1=$2" "$1" "$KT_DIR/bad.properties"
}
bad_value controller.quorum.election.timeout.ms abc
bad_value controller.quorum.election.timeout.ms -5
bad_value controller.quorum.fetch.timeout.ms 99999999999999999999
bad_value controller.quorum.request.timeout.ms 1.5
bad_value controller.quorum.voters "1@127.0.0.1"
bad_value controller.quorum.voters "one@127.0.0.1:$(kt_port 1)"
bad_value listeners "CONTROLLER://127.0.0.1:notaport"
bad_value node.id abc
bad_value log.level loud

# An unknown key: a warning that names it, and the node runs (alone, it elects itself).
kt_set_prop "$(kt_config 1)" kq.no.such.key 1
kt_start 1
kt_wait_for_leader 60 1
kt_assert_eq "leader of a single-voter quorum" 1 "$KT_LEADER"
grep -i 'warn' "$KT_DIR/node-1.log" | grep -qF 'kq.no.such.key' ||
    kt_fail "no warning naming kq.no.such.key in the log: $(head -n 20 "$KT_DIR/node-1.log")"
kt_log "ok: unknown key warned: $(grep -F 'kq.no.such.key' "$KT_DIR/node-1.log" | head -n 1)"
kt_wait_hw_above 30 0 1
kt_stop 1
kt_pass
