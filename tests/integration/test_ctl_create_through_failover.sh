#!/usr/bin/env bash
# kq topics --create through controller failovers (issue 8 item 5): 24 creates run one after
# another, each once (no retry by the caller), while the active controller is killed with
# SIGKILL every 4 to 8 creates and then restarted. Kills alternate between "between two
# creates" (the next create runs into the election: standbys still name the dead leader, the
# new leader is not active yet) and "during a create" (its answer may be lost after the topic
# was committed). Checked: every create exits 0 and prints "Created topic T." (the tool retries
# retriable failures itself, and recognises a topic that its own lost attempt created by the
# topic id it sent); afterwards exactly the 24 topics exist, each with the partitions asked
# for. The --verbose lines say how many creates retried and how many found their own topic.
# usage: test_ctl_create_through_failover.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" ctl_create_through_failover 27400

CREATES=24
kt_cluster 3
kt_start_all
kt_wait_for_leader 60
for b in 1 2 3; do
    kt_broker_start "$b"
done
for b in 1 2 3; do
    kt_wait_broker_fenced "$b" false 60
done

# create I: one `kq topics --create` (no retry here), its stderr kept for the summary.
create() {
    local i=$1 rc=0 out t0
    t0=$(kt_now_ms)
    out=$(timeout 120 "$KT_KQ" topics --bootstrap-controller "$(kt_bootstrap 1 2 3)" --verbose \
        --create --topic "t-$i" --partitions 2 --replication-factor 3 2>"$KT_DIR/create-$i.err") ||
        rc=$?
    if [[ $rc -ne 0 || $out != "Created topic t-$i." ]]; then
        kt_fail "create $i exited $rc: stdout: $out; stderr: $(head -c 1500 "$KT_DIR/create-$i.err")"
    fi
    kt_log "create $i ok in $(($(kt_now_ms) - t0)) ms$(grep -q 'kq: retrying' "$KT_DIR/create-$i.err" && echo ', retried')$(grep -q 'an earlier attempt created it' "$KT_DIR/create-$i.err" && echo ', found its own topic')"
}

# wait_caught_up NODE: until the leader reports NODE with lag 0 (as a follower, or as the leader:
# the restarted node may win the next election).
wait_caught_up() {
    local node=$1 deadline=$(($(date +%s) + 60)) row
    while :; do
        kt_wait_for_leader 60
        if kt_describe "$KT_LEADER" -- --replication; then
            row=$(awk -v id="$node" '$1 == id' <<<"$KT_OUT")
            [[ $(awk '{print $4}' <<<"$row") == 0 && $(awk '{print $NF}' <<<"$row") =~ ^(Follower|Leader)$ ]] && return 0
        fi
        (($(date +%s) < deadline)) || kt_fail "node $node did not catch up within 60 s: $KT_OUT"
        sleep 0.2
    done
}

next_kill=$((4 + RANDOM % 5))
kills=0
victim=""
for ((i = 1; i <= CREATES; i++)); do
    if ((i == next_kill)); then
        kt_wait_for_leader 60
        victim=$KT_LEADER
        kills=$((kills + 1))
        if ((kills % 2 == 1)); then
            kt_log "kill -9 of the active controller $victim (epoch $KT_EPOCH) before create $i"
            kt_kill "$victim"
            create "$i"
        else
            kt_log "kill -9 of the active controller $victim (epoch $KT_EPOCH) during create $i"
            create "$i" &
            cpid=$!
            sleep "0.0$((RANDOM % 5))"
            kt_kill "$victim"
            wait "$cpid" || exit 1 # create has reported the failure
        fi
        kt_start "$victim"
        wait_caught_up "$victim"
        next_kill=$((i + 4 + RANDOM % 5))
    else
        create "$i"
    fi
done
kt_assert_ge "kills of the active controller" "$kills" 3

retried=$({ grep -l 'kq: retrying' "$KT_DIR"/create-*.err || true; } | wc -l)
own=$({ grep -l 'an earlier attempt created it' "$KT_DIR"/create-*.err || true; } | wc -l)
kt_log "$CREATES creates succeeded at the first call; $retried retried inside the tool, $own found the topic their lost attempt had created"
kt_assert_ge "creates that retried inside the tool" "$retried" 1

# Exactly the topics asked for, each once, each with its partitions.
kt_kq_ok topics --list
kt_assert_eq "topics" "$(for ((i = 1; i <= CREATES; i++)); do echo "t-$i"; done | sort | xargs)" "$(xargs <<<"$KT_OUT")"
kt_kq_ok topics --describe
kt_assert_eq "topics with 2 partitions" "$CREATES" "$(grep -c $'^Topic: t-[0-9]*\tTopicId: [A-Za-z0-9_-]*\tPartitionCount: 2\t' <<<"$KT_OUT")"
kt_pass
