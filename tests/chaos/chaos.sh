#!/usr/bin/env bash
# tests/chaos/chaos.sh: a kq controller quorum in network namespaces under a seeded fault
# schedule, with writers recording every acknowledged write and a checker over the logs.
#
#   tests/chaos/chaos.sh [--bin DIR] [--seed N] [--duration S] [--controllers 3|5]
#                        [--writers N] [--keep]
#
#   --bin DIR         directory holding kq and kq-controller (default: $KQ_BIN, else
#                     <repo>/build/release/bin)
#   --seed N          seed of the fault schedule (default: random, printed)
#   --duration S      seconds of faults (default 60)
#   --controllers N   3 or 5 voters (default 3)
#   --writers N       concurrent writer loops (default 2)
#   --keep            keep the work directory even when the run passes (also KQ_KEEP=1)
#   --check DIR HW    only run the checker on DIR (dump-<i>.txt from kq log-dump --lines, acks-*.txt)
#                     with committed offset HW; no root needed
#
# Exit status: 0 = pass, 1 = a safety or liveness violation (or a setup failure), 2 = bad
# command line, 77 = skipped (not root, no network namespaces). See docs/chaos-testing.md.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=SCRIPTDIR/netns.sh
source "$HERE/netns.sh"

BIN=${KQ_BIN:-$ROOT/build/release/bin}
SEED=""
DURATION=60
NODES=3
WRITERS=2
KEEP=${KQ_KEEP:-0}
CHECK_DIR=""
COMMITTED_ARG=""
PORT=9093

usage() {
    sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}
bad_usage() {
    echo "chaos.sh: $*" >&2
    usage 2 >&2
}
need() { # OPTION COUNT ARGC: the option needs COUNT values
    (($3 > $2)) || bad_usage "$1 needs $2 value(s)"
}
while [[ $# -gt 0 ]]; do
    case $1 in
    --bin | --seed | --duration | --controllers | --writers) need "$1" 1 $# ;;&
    --check) need "$1" 2 $# ;;&
    --bin) BIN=${2:-} && shift 2 ;;
    --seed) SEED=${2:-} && shift 2 ;;
    --duration) DURATION=${2:-} && shift 2 ;;
    --controllers) NODES=${2:-} && shift 2 ;;
    --writers) WRITERS=${2:-} && shift 2 ;;
    --keep) KEEP=1 && shift ;;
    --check) CHECK_DIR=${2:-} && COMMITTED_ARG=${3:-} && shift 3 ;;
    -h | --help) usage 0 ;;
    *) bad_usage "unknown option '$1'" ;;
    esac
done
[[ -z $SEED ]] && SEED=$(((RANDOM << 15) | RANDOM))
[[ $SEED =~ ^[0-9]+$ ]] || bad_usage "--seed must be a non-negative integer, not '$SEED'"
[[ $DURATION =~ ^[0-9]+$ && $DURATION -ge 5 ]] || bad_usage "--duration must be an integer >= 5"
[[ $NODES == 3 || $NODES == 5 ]] || bad_usage "--controllers must be 3 or 5, not '$NODES'"
[[ $WRITERS =~ ^[1-8]$ ]] || bad_usage "--writers must be 1..8"
if [[ -n $CHECK_DIR ]]; then
    [[ -d $CHECK_DIR ]] || bad_usage "--check: '$CHECK_DIR' is not a directory"
    [[ $COMMITTED_ARG =~ ^[0-9]+$ ]] || bad_usage "--check DIR HW: HW must be an offset"
    BIN=$HERE
fi
[[ -d $BIN ]] || bad_usage "--bin: '$BIN' is not a directory (build kq and kq-controller first)"
BIN=$(cd "$BIN" && pwd)
KQ=$BIN/kq
CTL=$BIN/kq-controller
for b in "$KQ" "$CTL"; do
    [[ -n $CHECK_DIR || -x $b ]] || {
        echo "FAIL: $b is missing or not executable (build the kq and kq-controller targets)" >&2
        exit 1
    }
done

DIR=""
PASSED=0
declare -a PID=()     # controller pids, "" when not running
declare -a EXPECT=()  # 1 while we expect node i to be running
declare -a BG=()      # writer and monitor pids
CRASHES=()
FAULTS=0
declare -A FAULT_KINDS=()

log() {
    printf '[%s chaos] %s\n' "$(date +%H:%M:%S.%3N)" "$*" | tee -a "$DIR/chaos.log" >&2
}

# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup() {
    local rc=$? i
    set +e
    touch "$DIR/stop"
    for i in "${BG[@]}"; do
        kill "$i" 2>/dev/null
    done
    for ((i = 1; i <= NODES; i++)); do
        if [[ -n ${PID[$i]:-} ]]; then
            kill -CONT "${PID[$i]}" 2>/dev/null
            kill -KILL "${PID[$i]}" 2>/dev/null
            wait "${PID[$i]}" 2>/dev/null
        fi
    done
    wait 2>/dev/null
    cn_teardown
    if [[ $PASSED -eq 1 && $rc -eq 0 && $KEEP != 1 ]]; then
        rm -rf "$DIR"
    else
        echo "chaos.sh: kept $DIR (node-*.log, dump-*.txt, acks-*.txt, faults.log, leaders.txt)" >&2
    fi
    exit "$rc"
}

REPRO="tests/chaos/chaos.sh --bin $BIN --seed $SEED --duration $DURATION --controllers $NODES --writers $WRITERS"

fail() {
    local i
    echo "FAIL: $*" >&2
    echo "reproduce with: $REPRO" >&2
    for ((i = 1; i <= NODES; i++)); do
        if [[ -s $DIR/node-$i.log ]]; then
            echo "---- tail of node-$i.log ----" >&2
            tail -n 20 "$DIR/node-$i.log" >&2
        fi
    done
    exit 1
}

now_ms() { date +%s%3N; }

bootstrap() { # [FIRST]: every controller address, starting at FIRST (1-based)
    local first=${1:-1} i k s=""
    for ((k = 0; k < NODES; k++)); do
        i=$(((first - 1 + k) % NODES + 1))
        s+="${s:+,}$(cn_addr "$i"):$PORT"
    done
    echo "$s"
}

# ---------------------------------------------------------------------------------------
# Cluster

write_config() { # NODE
    local i=$1 j voters=""
    for ((j = 1; j <= NODES; j++)); do
        voters+="${voters:+,}$j@$(cn_addr "$j"):$PORT"
    done
    cat >"$DIR/node-$i.properties" <<EOF
# kq chaos test, seed $SEED, node $i
process.roles=controller
node.id=$i
controller.quorum.voters=$voters
listeners=CONTROLLER://$(cn_addr "$i"):$PORT
advertised.listeners=CONTROLLER://$(cn_addr "$i"):$PORT
metadata.log.dir=$DIR/node-$i
log.level=${KQ_TEST_LOG_LEVEL:-info}
EOF
}

alive() { # NODE: running or stopped, not exited
    local pid=${PID[$1]:-} state
    [[ -n $pid ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

start_node() { # NODE
    local i=$1
    echo "---- start $(date +%T.%3N) ----" >>"$DIR/node-$i.log"
    ip netns exec "$(cn_ns "$i")" "$CTL" --config "$DIR/node-$i.properties" \
        >>"$DIR/node-$i.log" 2>&1 &
    PID[i]=$!
    EXPECT[i]=1
}

# reap NODE: waits for an exited node; sets RC. Returns 1 if it still runs after 30 s.
RC=0
reap() {
    local i=$1 deadline=$(($(date +%s) + 30))
    while alive "$i"; do
        (($(date +%s) < deadline)) || return 1
        sleep 0.05
    done
    RC=0
    wait "${PID[$i]}" 2>/dev/null || RC=$?
    PID[i]=""
    return 0
}

kill_node() { # NODE
    local i=$1
    EXPECT[i]=0
    kill -CONT "${PID[$i]}" 2>/dev/null
    kill -KILL "${PID[$i]}" 2>/dev/null
    # Waiting at once (stderr silenced) keeps bash from printing a "Killed" job notice.
    { wait "${PID[$i]}"; } 2>/dev/null
    PID[i]=""
}

# check_crashes: a node we expect to run has exited: that is a crash (a bug). Returns 1.
check_crashes() {
    local i bad=0
    for ((i = 1; i <= NODES; i++)); do
        [[ ${EXPECT[$i]:-0} -eq 1 ]] || continue
        if ! alive "$i"; then
            reap "$i"
            EXPECT[i]=0
            CRASHES+=("node $i exited on its own with status $RC at $(date +%T)")
            log "CRASH: node $i exited with status $RC"
            bad=1
        fi
    done
    return $bad
}

# describe ARGS...: kq metadata-quorum describe from the client namespace; output in OUT.
OUT=""
describe() {
    OUT=$(cn_exec c timeout 20 "$KQ" metadata-quorum --timeout-ms 1000 \
        --bootstrap-controller "$(bootstrap "$((SECONDS % NODES + 1))")" describe "$@" 2>&1)
}

field() { # NAME (of describe --status on stdin)
    awk -v f="$1:" '$1 == f { print $2; exit }'
}

LEADER=-1
EPOCH=-1
HW=-1
status() {
    LEADER=-1 EPOCH=-1 HW=-1
    describe --status || return 1
    local l e h
    l=$(field LeaderId <<<"$OUT")
    e=$(field LeaderEpoch <<<"$OUT")
    h=$(field HighWatermark <<<"$OUT")
    [[ $l =~ ^-?[0-9]+$ ]] && LEADER=$l
    [[ $e =~ ^-?[0-9]+$ ]] && EPOCH=$e
    [[ $h =~ ^-?[0-9]+$ ]] && HW=$h
    ((LEADER >= 1))
}

wait_for_leader() { # TIMEOUT_S
    local deadline=$(($(date +%s) + $1))
    while (($(date +%s) < deadline)); do
        status && return 0
        sleep 0.2
    done
    return 1
}

# ---------------------------------------------------------------------------------------
# Writers and monitor (background loops; stop when $DIR/stop exists)

# writer W: write k has size 64 + k*WRITERS + W, so a size names one attempt of one writer.
# acks-W.txt: "ack <writer> <k> <size> <offset> <epoch> <ms>"; failures go to writer-W.log.
writer() {
    local w=$1 k=0 size out rc
    while [[ ! -e $DIR/stop ]]; do
        k=$((k + 1))
        size=$((64 + k * WRITERS + w))
        rc=0
        out=$(cn_exec c timeout 30 "$KQ" metadata-write --timeout-ms 1500 \
            --bootstrap-controller "$(bootstrap "$(((k + w) % NODES + 1))")" --size "$size" 2>&1) ||
            rc=$?
        if [[ $rc -eq 0 && $out =~ written\ at\ offset\ ([0-9]+)\ epoch\ ([0-9]+) ]]; then
            echo "ack $w $k $size ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} $(now_ms)" >>"$DIR/acks-$w.txt"
        else
            echo "$(date +%T.%3N) k=$k size=$size exit=$rc: $(head -n 2 <<<"$out" | tr '\n' ' ')" \
                >>"$DIR/writer-$w.log"
            sleep 0.1
        fi
    done
}

# monitor: asks every controller on its own once a second; leaders.txt gets
# "<ms> <asked node> <leader> <epoch> <hw>" for each answer naming a leader.
monitor() {
    local i out l e h
    while [[ ! -e $DIR/stop ]]; do
        for ((i = 1; i <= NODES; i++)); do
            out=$(cn_exec c timeout 10 "$KQ" metadata-quorum --timeout-ms 800 \
                --bootstrap-controller "$(cn_addr "$i"):$PORT" describe --status 2>/dev/null) || continue
            l=$(field LeaderId <<<"$out")
            e=$(field LeaderEpoch <<<"$out")
            h=$(field HighWatermark <<<"$out")
            [[ $l =~ ^[0-9]+$ && $e =~ ^[0-9]+$ ]] && echo "$(now_ms) $i $l $e $h" >>"$DIR/leaders.txt"
        done
        sleep 1
    done
}

# ---------------------------------------------------------------------------------------
# Faults (one at a time; each is healed before the next)

# The draws set globals instead of printing: bash (>= 5.1) re-seeds RANDOM in every subshell,
# so a draw inside $(...) would ignore --seed and the schedule would not replay.
R=0
PICK=0
rnd() { # N -> R in 0..N-1 from the seeded bash PRNG
    R=$((RANDOM % $1))
}
pick_node() { # -> PICK, a node 1..NODES
    rnd "$NODES"
    PICK=$((R + 1))
}
pick_other() { # NODE -> PICK, another node
    while :; do
        pick_node
        [[ $PICK -ne $1 ]] && return
    done
}
current_leader() { # -> PICK: the leader, or a random node when none is known
    if status; then PICK=$LEADER; else pick_node; fi
}

fault_log() {
    FAULTS=$((FAULTS + 1))
    local kind=${1%%:*}
    FAULT_KINDS[$kind]=$((${FAULT_KINDS[$kind]:-0} + 1))
    echo "$(date +%T.%3N) #$FAULTS $*" >>"$DIR/faults.log"
    log "fault #$FAULTS: $*"
}

hold() { # MIN MAX seconds (seeded), polling for crashes
    local ms end
    rnd $(($2 - $1 + 1))
    ms=$((($1 + R) * 1000))
    end=$(($(now_ms) + ms))
    while (($(now_ms) < end)); do
        sleep 0.2
    done
}

one_fault() {
    local kinds=(kill kill-leader pause pause-leader link-down) k a b
    if [[ -n $CN_IPTABLES ]]; then
        kinds+=(partition partition oneway oneway isolate-leader isolate-leader)
    fi
    [[ $NODES -eq 5 ]] && kinds+=(kill-two)
    rnd ${#kinds[@]}
    k=${kinds[$R]}
    # Every choice below draws from the PRNG in the same order whatever the cluster does.
    pick_node
    a=$PICK
    pick_other "$a"
    b=$PICK
    case $k in
    kill | kill-leader)
        [[ $k == kill-leader ]] && current_leader && a=$PICK
        fault_log "$k: kill -9 node $a"
        kill_node "$a"
        hold 0 5
        start_node "$a"
        log "restarted node $a (pid ${PID[$a]})"
        ;;
    kill-two)
        fault_log "$k: kill -9 nodes $a and $b"
        kill_node "$a"
        kill_node "$b"
        hold 1 5
        start_node "$a"
        start_node "$b"
        ;;
    pause | pause-leader)
        [[ $k == pause-leader ]] && current_leader && a=$PICK
        fault_log "$k: SIGSTOP node $a"
        kill -STOP "${PID[$a]}"
        hold 1 6
        kill -CONT "${PID[$a]}"
        ;;
    link-down)
        fault_log "$k: bridge port of node $a down"
        cn_link_down "$a"
        hold 1 6
        cn_heal_all
        ;;
    partition)
        fault_log "$k: nodes $a and $b cannot talk"
        cn_block "$a" "$b"
        hold 1 6
        cn_heal_all
        ;;
    oneway)
        fault_log "$k: node $a cannot reach node $b (node $b can reach node $a)"
        cn_block_oneway "$a" "$b" "$PORT"
        hold 1 6
        cn_heal_all
        ;;
    isolate-leader)
        current_leader
        a=$PICK
        fault_log "$k: node $a cut from every other controller (clients still reach it)"
        cn_isolate "$a"
        hold 2 8
        cn_heal_all
        ;;
    esac
}

# ---------------------------------------------------------------------------------------
# Checker

# check_logs HW: dump-*.txt against the acks; prints the violations, returns 1 if any.
check_logs() {
    local hw=$1 files=() i
    for ((i = 1; i <= NODES; i++)); do
        files+=("$DIR/dump-$i.txt")
    done
    cat "$DIR"/acks-*.txt 2>/dev/null >"$DIR/acks.txt"
    awk -v hw="$hw" -v n="$NODES" '
        function val(s) { sub(/^[a-z_]+=/, "", s); return s }
        FILENAME != cur {
            cur = FILENAME
            if (match(FILENAME, /dump-[0-9]+\.txt$/)) f = substr(FILENAME, RSTART + 5, RLENGTH - 9) + 0
        }
        FILENAME ~ /acks\.txt$/ { na++; aw[na] = $2; ak[na] = $3; as[na] = $4; ao[na] = $5; ae[na] = $6; next }
        /^records=/ {
            for (j = 1; j <= NF; j++) { split($j, kv, "="); sum[f, kv[1]] = kv[2] }
            next
        }
        /^offset=/ {
            o = val($1); e = val($2); d = $4
            for (j = 5; j <= NF; j++) d = d " " $j
            if ((f, o) in ep) { bad++; print "node " f ": offset " o " appears twice" }
            ep[f, o] = e; desc[f, o] = d
            if (f in last && e + 0 < last[f] + 0) {
                bad++; print "node " f ": epoch goes down at offset " o ": " last[f] " -> " e
            }
            last[f] = e
            if (!(f in lo) || o + 0 < lo[f]) lo[f] = o + 0
            if (!(f in hi) || o + 0 > hi[f]) hi[f] = o + 0
            if (d ~ /^LeaderChange/) { split($5, lv, "="); lead[e] = lv[2] }
            next
        }
        END {
            for (i = 1; i <= n; i++) {
                if (sum[i, "log_end"] == "") { bad++; print "node " i ": no summary line in its dump"; continue }
                if (sum[i, "log_end"] + 0 < hw + 0) {
                    bad++; print "node " i ": log ends at " sum[i, "log_end"] " below the committed offset " hw
                }
            }
            # (2) the committed prefix [max log_start, hw) is the same everywhere
            start = 0
            for (i = 1; i <= n; i++) if (sum[i, "log_start"] + 0 > start) start = sum[i, "log_start"] + 0
            for (o = start; o < hw; o++) {
                for (i = 1; i <= n; i++) {
                    if (!((i, o) in ep)) { if (miss[i]++ < 3) { bad++; print "node " i ": committed offset " o " missing" } continue }
                    if (i > 1 && ((1, o) in ep) && (ep[i, o] != ep[1, o] || desc[i, o] != desc[1, o])) {
                        bad++
                        if (div++ < 10)
                            print "divergence at offset " o ": node 1 has epoch " ep[1, o] " " desc[1, o] ", node " i " has epoch " ep[i, o] " " desc[i, o]
                    }
                }
            }
            # (1) every acknowledged write is committed, at its offset, with its epoch and size
            lost = 0
            for (a = 1; a <= na; a++) {
                if (ao[a] + 0 >= hw + 0) {
                    bad++; lost++
                    if (lost <= 10) print "acknowledged write (writer " aw[a] " #" ak[a] " size " as[a] ") at offset " ao[a] " epoch " ae[a] " is at or above the final high watermark " hw
                    continue
                }
                want = "Opaque bytes=" as[a]
                for (i = 1; i <= n; i++) {
                    if (ao[a] + 0 < sum[i, "log_start"] + 0) continue
                    if (!((i, ao[a]) in ep) || ep[i, ao[a]] != ae[a] || desc[i, ao[a]] != want) {
                        bad++; lost++
                        if (lost <= 10) {
                            got = ((i, ao[a]) in ep) ? "epoch " ep[i, ao[a]] " " desc[i, ao[a]] : "nothing"
                            print "LOST acknowledged write (writer " aw[a] " #" ak[a] "): expected epoch " ae[a] " " want " at offset " ao[a] " on node " i ", found " got
                        }
                    }
                }
            }
            nl = 0; s = ""
            for (e in lead) nl++
            printf "checker: %d acknowledged writes, committed offset %d, %d leader elections in the log", na, hw, nl > "/dev/stderr"
            printf "\n" > "/dev/stderr"
            exit (bad > 0)
        }' "$DIR/acks.txt" "${files[@]}"
}

# ---------------------------------------------------------------------------------------
# The run

if [[ -n $CHECK_DIR ]]; then
    # Offline checker: dump-<i>.txt and acks-*.txt of a kept run (or made up by a test).
    DIR=$CHECK_DIR
    NODES=$(find "$DIR" -maxdepth 1 -name 'dump-*.txt' | wc -l)
    ((NODES > 0)) || bad_usage "--check: no dump-<i>.txt in $DIR"
    check_logs "$COMMITTED_ARG" && echo "result: PASS" && exit 0
    echo "result: FAIL"
    exit 1
fi

cn_check_privs
DIR=$(mktemp -d "${TMPDIR:-/tmp}/kq-chaos.XXXXXX")
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM
log "seed $SEED, $NODES controllers, $WRITERS writers, ${DURATION} s of faults, dir $DIR"
log "reproduce with: $REPRO"
RANDOM=$SEED
cn_setup "$NODES" || fail "could not create the network namespaces"

CLUSTER_ID=$("$KQ" storage random-uuid) || fail "kq storage random-uuid failed"
for ((i = 1; i <= NODES; i++)); do
    write_config "$i"
    out=$("$KQ" storage format --config "$DIR/node-$i.properties" --cluster-id "$CLUSTER_ID" 2>&1) ||
        fail "kq storage format of node $i failed: $out"
done
for ((i = 1; i <= NODES; i++)); do
    start_node "$i"
done
wait_for_leader 60 || fail "no leader within 60 s of starting the quorum: $OUT"
log "leader $LEADER epoch $EPOCH"

for ((w = 1; w <= WRITERS; w++)); do
    writer "$w" &
    BG+=($!)
done
monitor &
BG+=($!)

# Faults. RANDOM is re-seeded per fault so a slow machine (more PRNG draws elsewhere) still
# gets the same sequence of fault kinds and targets for a given seed.
END=$(($(date +%s) + DURATION))
round=0
while (($(date +%s) < END)); do
    round=$((round + 1))
    RANDOM=$((SEED * 7919 + round))
    one_fault
    check_crashes || break
    hold 1 3 # quiet period
    check_crashes || break
done

# Heal, stop writing, and let the quorum settle.
touch "$DIR/stop"
cn_heal_all
for ((i = 1; i <= NODES; i++)); do
    [[ -n ${PID[$i]:-} ]] && kill -CONT "${PID[$i]}" 2>/dev/null
done
for pid in "${BG[@]}"; do
    wait "$pid" 2>/dev/null
done
BG=()
check_crashes
for ((i = 1; i <= NODES; i++)); do
    alive "$i" || start_node "$i" # a crashed node gets its chance to recover
done
log "healed; $FAULTS faults injected; waiting for a leader"
wait_for_leader 120 || fail "no leader within 120 s after healing every fault: $OUT"
log "leader $LEADER epoch $EPOCH after healing"

# Liveness: a write goes through, and every voter catches up with the leader.
out=$(cn_exec c timeout 120 "$KQ" metadata-write --timeout-ms 60000 --bootstrap-controller "$(bootstrap)" \
    --size 63 2>&1) || fail "a write after healing failed: $out"
if [[ $out =~ written\ at\ offset\ ([0-9]+)\ epoch\ ([0-9]+) ]]; then
    echo "ack 0 0 63 ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} $(now_ms)" >>"$DIR/acks-0.txt"
else
    fail "unexpected answer to the write after healing: $out"
fi
deadline=$(($(date +%s) + 120))
while :; do
    if describe --replication; then
        rows=$(awk '$NF == "Leader" || $NF == "Follower"' <<<"$OUT")
        nrows=$(wc -l <<<"$rows")
        lagging=$(awk '$4 != 0' <<<"$rows" | wc -l)
        [[ $nrows -eq $NODES && $lagging -eq 0 ]] && break
    fi
    (($(date +%s) < deadline)) || fail "the voters did not all catch up within 120 s: $OUT"
    sleep 0.3
done
status || fail "no leader after catching up: $OUT"
COMMITTED=$HW
log "all $NODES voters caught up; leader $LEADER epoch $EPOCH high watermark $COMMITTED"

# Stop everything (graceful), then dump every log.
for ((i = 1; i <= NODES; i++)); do
    EXPECT[i]=0
    kill -TERM "${PID[$i]}" 2>/dev/null
done
for ((i = 1; i <= NODES; i++)); do
    reap "$i" || fail "node $i did not exit within 30 s of SIGTERM"
    [[ $RC -eq 0 ]] || CRASHES+=("node $i exited with status $RC after SIGTERM")
done
for ((i = 1; i <= NODES; i++)); do
    "$KQ" log-dump --dir "$DIR/node-$i" --lines >"$DIR/dump-$i.txt" 2>"$DIR/dump-$i.err" ||
        fail "kq log-dump --dir $DIR/node-$i --lines failed: $(tail -n 3 "$DIR/dump-$i.err")"
done

ACKS=$(cat "$DIR"/acks-*.txt 2>/dev/null | wc -l)
FAILED_WRITES=$(cat "$DIR"/writer-*.log 2>/dev/null | wc -l)
LEADERS=$(awk '{print $4 ":" $3}' "$DIR/leaders.txt" 2>/dev/null | sort -t: -k1,1n -u | tr '\n' ' ')
# Election safety as observed: one leader per epoch.
TWO=$(awk '{ if (($4 in l) && l[$4] != $3) print "epoch " $4 ": leaders " l[$4] " and " $3; l[$4] = $3 }' \
    "$DIR/leaders.txt" 2>/dev/null | sort -u)
KIND_SUMMARY=""
for k in "${!FAULT_KINDS[@]}"; do
    KIND_SUMMARY+="$k=${FAULT_KINDS[$k]} "
done

result=PASS
VIOL=$(check_logs "$COMMITTED") || result=FAIL
[[ -n $TWO ]] && result=FAIL
[[ ${#CRASHES[@]} -gt 0 ]] && result=FAIL

echo "==== chaos summary (seed $SEED, $NODES controllers, ${DURATION} s) ===="
echo "faults injected:    $FAULTS (${KIND_SUMMARY% })"
echo "writes acknowledged: $ACKS (failed or timed-out attempts: $FAILED_WRITES)"
echo "leaders seen:       ${LEADERS:-none} (epoch:leader)"
echo "committed offset:   $COMMITTED"
[[ -n $VIOL ]] && echo "$VIOL"
[[ -n $TWO ]] && echo "two leaders in one epoch: $TWO"
for c in "${CRASHES[@]}"; do
    echo "crash: $c"
done
echo "result:             $result"
if [[ $result != PASS ]]; then
    fail "chaos run found violations (see above); logs in $DIR"
fi
if ((ACKS < 2)); then
    fail "only $ACKS writes were acknowledged: the run exercised nothing"
fi
PASSED=1
exit 0
