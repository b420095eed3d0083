#!/usr/bin/env bash
# tests/chaos/data_chaos.sh: the data plane under chaos. 3 kq-controller processes and 3
# kq-broker-agent processes, each in its own network namespace; topic `chaos` (2 partitions,
# replication factor 3, min.insync.replicas=2); one writer loop per partition running
# `kq produce --acks all`; a seeded schedule of faults against the brokers (and now and then a
# controller); then everything is healed and every acknowledged record is read back.
#
#   tests/chaos/data_chaos.sh [--bin DIR] [--seed N] [--duration S] [--producer stream|once]
#                             [--keep]
#
#   --bin DIR         directory holding kq, kq-controller and kq-broker-agent (default:
#                     $KQ_BIN, else <repo>/build/release/bin)
#   --seed N          seed of the fault schedule (default: random, printed)
#   --duration S      seconds of faults (default 60)
#   --producer MODE   stream: one long-running `kq produce` per partition fed one record at a
#                     time (default); once: one `kq produce --value` invocation per record
#   --keep            keep the work directory even when the run passes (also KQ_KEEP=1)
#   --selftest-checker  only run the record checker against made-up histories (no root, no
#                     binaries needed): it must pass the good ones and catch every bad one
#
# Exit status: 0 = pass, 1 = a lost or misplaced acknowledged record, a duplicate, a crash, no
# progress after healing (or a setup failure), 2 = bad command line, 77 = skipped (not root, no
# network namespaces). See docs/chaos-testing.md, section "Data-plane chaos test".
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=SCRIPTDIR/netns.sh
source "$HERE/netns.sh"

BIN=${KQ_BIN:-$ROOT/build/release/bin}
SEED=""
DURATION=60
KEEP=${KQ_KEEP:-0}
PRODUCER=stream
SELFTEST=0
CTL_PORT=9093
BRK_PORT=9092
NCTL=3       # controllers: namespaces 1..3, node ids 3001..3003
NBRK=3       # brokers: ids 1..3 in namespaces 4..6
PARTS=2      # partitions of topic chaos, one writer each
TOPIC=chaos
SESSION_MS=6000 # broker.session.timeout.ms (controllers and brokers)
LAG_MS=6000     # replica.lag.time.max.ms

usage() {
    sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}
bad_usage() {
    echo "data_chaos.sh: $*" >&2
    usage 2 >&2
}
while [[ $# -gt 0 ]]; do
    case $1 in
    --bin | --seed | --duration | --producer) (($# > 1)) || bad_usage "$1 needs a value" ;;&
    --bin) BIN=$2 && shift 2 ;;
    --seed) SEED=$2 && shift 2 ;;
    --duration) DURATION=$2 && shift 2 ;;
    --producer) PRODUCER=$2 && shift 2 ;;
    --keep) KEEP=1 && shift ;;
    --selftest-checker) SELFTEST=1 && shift ;;
    -h | --help) usage 0 ;;
    *) bad_usage "unknown option '$1'" ;;
    esac
done
[[ -z $SEED ]] && SEED=$(((RANDOM << 15) | RANDOM))
[[ $SEED =~ ^[0-9]+$ ]] || bad_usage "--seed must be a non-negative integer, not '$SEED'"
[[ $DURATION =~ ^[0-9]+$ && $DURATION -ge 5 ]] || bad_usage "--duration must be an integer >= 5"
[[ $PRODUCER == stream || $PRODUCER == once ]] || bad_usage "--producer must be stream or once, not '$PRODUCER'"
[[ $SELFTEST -eq 1 ]] && BIN=$HERE
[[ -d $BIN ]] || bad_usage "--bin: '$BIN' is not a directory (build kq, kq-controller and kq-broker-agent first)"
BIN=$(cd "$BIN" && pwd)
KQ=$BIN/kq
CTL=$BIN/kq-controller
BRK=$BIN/kq-broker-agent
for b in "$KQ" "$CTL" "$BRK"; do
    [[ $SELFTEST -eq 1 || -x $b ]] || {
        echo "FAIL: $b is missing or not executable (build kq, kq-controller and kq-broker-agent)" >&2
        exit 1
    }
done

DIR=""
PASSED=0
# Processes are named c1..c3 (controllers) and b1..b3 (brokers).
declare -A PID=()    # pid, "" when not running
declare -A EXPECT=() # 1 while we expect the process to run
declare -a BG=()     # writer pids
CRASHES=()
FAULTS=0
declare -A FAULT_KINDS=()

log() {
    printf '[%s dchaos] %s\n' "$(date +%H:%M:%S.%3N)" "$*" | tee -a "$DIR/chaos.log" >&2
}

# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup() {
    local rc=$? p
    set +e
    [[ -n $DIR ]] && touch "$DIR/stop"
    for p in "${BG[@]}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${!PID[@]}"; do
        if [[ -n ${PID[$p]} ]]; then
            kill -CONT "${PID[$p]}" 2>/dev/null
            kill -KILL "${PID[$p]}" 2>/dev/null
        fi
    done
    wait 2>/dev/null
    cn_teardown
    if [[ -n $DIR ]]; then
        if [[ $PASSED -eq 1 && $rc -eq 0 && $KEEP != 1 ]]; then
            rm -rf "$DIR"
        else
            echo "data_chaos.sh: kept $DIR (c*.log, b*.log, acks-*.txt, read-*.txt, writer-*.log, faults.log)" >&2
        fi
    fi
    exit "$rc"
}

REPRO="tests/chaos/data_chaos.sh --bin $BIN --seed $SEED --duration $DURATION --producer $PRODUCER"

fail() {
    local p
    echo "FAIL: $*" >&2
    echo "reproduce with: $REPRO" >&2
    for p in c1 c2 c3 b1 b2 b3; do
        if [[ -s $DIR/$p.log ]]; then
            echo "---- tail of $p.log ----" >&2
            grep -v 'listener is plaintext' "$DIR/$p.log" | tail -n 15 >&2
        fi
    done
    exit 1
}

now_ms() { date +%s%3N; }

ns_of() { # c<i> | b<i> -> namespace node number
    case $1 in
    c*) echo "${1#c}" ;;
    b*) echo $((${1#b} + NCTL)) ;;
    esac
}
brk_addr() { cn_addr $(($1 + NCTL)); } # broker id -> address

CONTROLLERS=""
BROKERS=""
VOTERS=""
for ((i = 1; i <= NCTL; i++)); do
    CONTROLLERS+="${CONTROLLERS:+,}$(cn_addr "$i"):$CTL_PORT"
    VOTERS+="${VOTERS:+,}$((3000 + i))@$(cn_addr "$i"):$CTL_PORT"
done
for ((i = 1; i <= NBRK; i++)); do
    BROKERS+="${BROKERS:+,}$(brk_addr "$i"):$BRK_PORT"
done

# ---------------------------------------------------------------------------------------
# Processes

write_configs() {
    local i
    for ((i = 1; i <= NCTL; i++)); do
        cat >"$DIR/c$i.properties" <<EOF
# kq data chaos test, seed $SEED, controller $i
process.roles=controller
node.id=$((3000 + i))
controller.quorum.voters=$VOTERS
listeners=CONTROLLER://$(cn_addr "$i"):$CTL_PORT
advertised.listeners=CONTROLLER://$(cn_addr "$i"):$CTL_PORT
metadata.log.dir=$DIR/c$i
broker.session.timeout.ms=$SESSION_MS
log.level=${KQ_TEST_LOG_LEVEL:-info}
EOF
    done
    for ((i = 1; i <= NBRK; i++)); do
        cat >"$DIR/b$i.properties" <<EOF
# kq data chaos test, seed $SEED, broker $i
process.roles=broker
node.id=$i
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://$(brk_addr "$i"):$BRK_PORT
log.dirs=$DIR/b$i
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=$SESSION_MS
replica.lag.time.max.ms=$LAG_MS
broker.controlled.shutdown.timeout.ms=15000
log.level=${KQ_TEST_LOG_LEVEL:-info}
EOF
    done
}

alive() { # PROC: running or stopped, not exited
    local pid=${PID[$1]:-} state
    [[ -n $pid ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

start_proc() { # PROC
    local p=$1 exe=$CTL
    [[ $p == b* ]] && exe=$BRK
    echo "---- start $(date +%T.%3N) ----" >>"$DIR/$p.log"
    ip netns exec "$(cn_ns "$(ns_of "$p")")" "$exe" --config "$DIR/$p.properties" \
        >>"$DIR/$p.log" 2>&1 &
    PID[$p]=$!
    EXPECT[$p]=1
}

kill_proc() { # PROC
    local p=$1
    EXPECT[$p]=0
    [[ -n ${PID[$p]:-} ]] || return 0
    kill -CONT "${PID[$p]}" 2>/dev/null
    kill -KILL "${PID[$p]}" 2>/dev/null
    { wait "${PID[$p]}"; } 2>/dev/null
    PID[$p]=""
}

RC=0
reap() { # PROC: waits (30 s) for an exited process; sets RC
    local p=$1 deadline=$(($(date +%s) + 30))
    while alive "$p"; do
        (($(date +%s) < deadline)) || return 1
        sleep 0.05
    done
    RC=0
    wait "${PID[$p]}" 2>/dev/null || RC=$?
    PID[$p]=""
    return 0
}

# check_crashes: a process we expect to run has exited on its own: a crash. Returns 1.
check_crashes() {
    local p bad=0
    for p in c1 c2 c3 b1 b2 b3; do
        [[ ${EXPECT[$p]:-0} -eq 1 ]] || continue
        if ! alive "$p"; then
            reap "$p"
            EXPECT[$p]=0
            CRASHES+=("$p exited on its own with status $RC at $(date +%T)")
            log "CRASH: $p exited with status $RC"
            bad=1
        fi
    done
    return $bad
}

# ---------------------------------------------------------------------------------------
# Cluster state through the client namespace

OUT=""
kqc() { # ARGS...: kq in the client namespace; output in OUT
    OUT=$(cn_exec c timeout 20 "$KQ" "$@" 2>&1)
}

declare -A LEADER=() # partition -> leader broker id (-1 none)
declare -A ISR=()    # partition -> ISR list
describe_topic() {
    local p
    kqc topics --bootstrap-controller "$CONTROLLERS" --timeout-ms 2000 --describe --topic "$TOPIC" ||
        return 1
    for ((p = 0; p < PARTS; p++)); do
        LEADER[$p]=$(awk -F'\t' -v p="Partition: $p" '$3 == p { sub(/^Leader: /, "", $4); print $4; exit }' <<<"$OUT")
        ISR[$p]=$(awk -F'\t' -v p="Partition: $p" '$3 == p { sub(/^Isr: /, "", $6); print $6; exit }' <<<"$OUT")
        [[ ${LEADER[$p]} =~ ^[0-9]+$ ]] || LEADER[$p]=-1
    done
}

full_isr() { # 0 when every partition has a leader and all 3 replicas in its ISR
    local p n
    describe_topic || return 1
    for ((p = 0; p < PARTS; p++)); do
        ((LEADER[$p] >= 1)) || return 1
        n=$(tr ',' '\n' <<<"${ISR[$p]}" | grep -c '^[0-9]')
        ((n == NBRK)) || return 1
    done
}

wait_full_isr() { # TIMEOUT_S
    local deadline=$(($(date +%s) + $1))
    while (($(date +%s) < deadline)); do
        full_isr && return 0
        sleep 0.3
    done
    return 1
}

broker_epoch() { # BROKER: its registered broker epoch from `kq cluster describe`, "" if unknown
    kqc cluster describe --bootstrap-controller "$CONTROLLERS" --timeout-ms 2000 || return 0
    awk -F'\t' -v b="Broker: $1" '$1 == b { sub(/^Epoch: /, "", $2); print $2; exit }' <<<"$OUT"
}

# wait_recovered TIMEOUT_S [BROKER OLD_EPOCH]: every broker registered and unfenced (BROKER
# with an epoch other than OLD_EPOCH: its new registration, after a restart) and every ISR
# full. Returns 1 on timeout.
wait_recovered() {
    local deadline=$(($(date +%s) + $1)) b=${2:-} old=${3:-} e
    while (($(date +%s) < deadline)); do
        if kqc cluster describe --bootstrap-controller "$CONTROLLERS" --timeout-ms 2000 &&
            [[ $(grep -c $'Fenced: false' <<<"$OUT") -eq $NBRK ]]; then
            e=""
            [[ -n $b ]] && e=$(awk -F'\t' -v b="Broker: $b" '$1 == b { sub(/^Epoch: /, "", $2); print $2; exit }' <<<"$OUT")
            if [[ -z $b || (-n $e && $e != "$old") ]] && full_isr; then
                return 0
            fi
        fi
        sleep 0.3
    done
    return 1
}

# ---------------------------------------------------------------------------------------
# Writers: writer P produces to partition P. acks-P.txt: "<value> <offset> <ms>" for each
# acknowledged record; tries-P.txt: every value sent; writer-P.log: every record that failed
# (error line, or no answer) and every producer restart.
#
# --producer stream (default): one long-running `kq produce` fed through a FIFO, one record at
# a time (write a value, read its result line), so its idempotent retries cross leader changes;
# a producer that gives no result line within HANG_S seconds counts as hung (a liveness bug)
# and is replaced. --producer once: one `kq produce --value` invocation per record.
HANG_S=45

# shellcheck disable=SC2317 # called as "writer_$PRODUCER"
writer_once() {
    local p=$1 k=0 v out rc
    while [[ ! -e $DIR/stop ]]; do
        k=$((k + 1))
        v="p$p-r$k"
        echo "$v" >>"$DIR/tries-$p.txt"
        rc=0
        out=$(cn_exec c timeout "$HANG_S" "$KQ" produce --bootstrap-server "$BROKERS" --topic "$TOPIC" \
            --partition "$p" --acks all --request-timeout-ms 3000 --delivery-timeout-ms 15000 \
            --value "$v" 2>>"$DIR/produce-$p.err") || rc=$?
        if [[ $rc -eq 0 && $out =~ ^written\ at\ offset\ ([0-9]+)$ ]]; then
            echo "$v ${BASH_REMATCH[1]} $(now_ms)" >>"$DIR/acks-$p.txt"
        else
            [[ $rc -eq 124 ]] && echo "$(date +%T.%3N) HUNG: kq produce gave no answer in $HANG_S s" >>"$DIR/writer-$p.log"
            echo "$(date +%T.%3N) $v exit=$rc: $(head -n 2 <<<"$out" | tr '\n' ' ')" >>"$DIR/writer-$p.log"
            sleep 0.1
        fi
    done
}

# shellcheck disable=SC2317 # called as "writer_$PRODUCER"
writer_stream() {
    local p=$1 k=0 v line ppid="" wfd rfd
    trap '' PIPE # a producer that exited makes the write fail, not kill the writer
    mkfifo "$DIR/w$p.in" "$DIR/w$p.out" || return 1
    while [[ ! -e $DIR/stop ]]; do
        if [[ -z $ppid ]]; then
            ip netns exec "$(cn_ns c)" "$KQ" produce --bootstrap-server "$BROKERS" --topic "$TOPIC" --partition "$p" \
                --acks all --request-timeout-ms 3000 --delivery-timeout-ms 15000 \
                <"$DIR/w$p.in" >"$DIR/w$p.out" 2>>"$DIR/produce-$p.err" &
            ppid=$!
            exec {wfd}>"$DIR/w$p.in" {rfd}<"$DIR/w$p.out"
            echo "$(date +%T.%3N) producer started (pid $ppid)" >>"$DIR/writer-$p.log"
        fi
        k=$((k + 1))
        v="p$p-r$k"
        echo "$v" >>"$DIR/tries-$p.txt"
        line=""
        if { printf '%s\n' "$v" >&"$wfd"; } 2>/dev/null && IFS= read -r -t "$HANG_S" line <&"$rfd"; then
            if [[ $line =~ ^written\ at\ offset\ ([0-9]+)$ ]]; then
                echo "$v ${BASH_REMATCH[1]} $(now_ms)" >>"$DIR/acks-$p.txt"
            else
                echo "$(date +%T.%3N) $v: $line" >>"$DIR/writer-$p.log"
            fi
            continue
        fi
        # No result line: the producer exited (no metadata within its request timeout) or hung.
        if kill -0 "$ppid" 2>/dev/null; then
            echo "$(date +%T.%3N) HUNG: $v: no result line from kq produce in $HANG_S s" >>"$DIR/writer-$p.log"
        else
            echo "$(date +%T.%3N) $v: the producer exited" >>"$DIR/writer-$p.log"
        fi
        exec {wfd}>&- {rfd}<&-
        kill -KILL "$ppid" 2>/dev/null
        wait "$ppid" 2>/dev/null
        ppid=""
        sleep 0.2
    done
    if [[ -n $ppid ]]; then
        exec {wfd}>&- {rfd}<&- # EOF: the producer exits
        wait "$ppid" 2>/dev/null
    fi
}

# ---------------------------------------------------------------------------------------
# Faults: one at a time, healed before the next; at most one broker faulty at a time.

# rnd N: R = 0..N-1 from the seeded bash PRNG. Never draw inside $(...): bash re-seeds RANDOM
# in every subshell, so such draws would not follow the seed.
R=0
rnd() { R=$((RANDOM % $1)); }
leader_or() { # PARTITION FALLBACK: the partition's current leader, else FALLBACK
    if describe_topic && ((LEADER[$1] >= 1)); then echo "${LEADER[$1]}"; else echo "$2"; fi
}

fault_log() {
    FAULTS=$((FAULTS + 1))
    local kind=${1%%:*}
    FAULT_KINDS[$kind]=$((${FAULT_KINDS[$kind]:-0} + 1))
    echo "$(date +%T.%3N) #$FAULTS $*" >>"$DIR/faults.log"
    log "fault #$FAULTS: $*"
}

hold() { # MIN MAX seconds (seeded)
    local ms end
    rnd $(($2 - $1 + 1))
    ms=$((($1 + R) * 1000))
    end=$(($(now_ms) + ms))
    while (($(now_ms) < end)); do
        sleep 0.2
    done
}

block_from() { # BROKER WHAT(brokers|controllers): symmetric DROP between it and those nodes
    local a=$(($1 + NCTL)) i lo hi
    if [[ $2 == brokers ]]; then lo=$((NCTL + 1)) hi=$((NCTL + NBRK)); else lo=1 hi=$NCTL; fi
    for ((i = lo; i <= hi; i++)); do
        [[ $i -ne $a ]] && cn_block "$a" "$i"
    done
}

one_fault() {
    local kinds=(kill kill-leader kill-leader pause pause-leader pause-leader link-down ctl-kill ctl-pause)
    local k b o part c
    RESTARTED=""
    OLD_EPOCH=""
    if [[ -n $CN_IPTABLES ]]; then
        kinds+=(cut-brokers cut-brokers-leader cut-controllers cut-controllers-leader oneway)
    fi
    # Every choice draws from the PRNG in the same order whatever the cluster does.
    rnd ${#kinds[@]}
    k=${kinds[R]}
    rnd "$NBRK"
    b=$((R + 1))
    o=$(((b % NBRK) + 1))
    rnd "$PARTS"
    part=$R
    rnd "$NCTL"
    c=$((R + 1))
    case $k in
    *-leader) b=$(leader_or "$part" "$b") ;;
    esac
    case $k in
    kill | kill-leader)
        RESTARTED=$b
        OLD_EPOCH=$(broker_epoch "$b")
        fault_log "$k: kill -9 broker $b"
        kill_proc "b$b"
        hold 0 5
        start_proc "b$b"
        ;;
    pause | pause-leader)
        fault_log "$k: SIGSTOP broker $b (session ${SESSION_MS} ms)"
        kill -STOP "${PID[b$b]}"
        hold 1 9
        kill -CONT "${PID[b$b]}"
        ;;
    link-down)
        fault_log "$k: bridge port of broker $b down (cut from everything)"
        cn_link_down $((b + NCTL))
        hold 1 8
        cn_heal_all
        ;;
    cut-brokers | cut-brokers-leader)
        fault_log "$k: broker $b cut from the other brokers (controllers and clients reach it)"
        block_from "$b" brokers
        hold 2 9
        cn_heal_all
        ;;
    cut-controllers | cut-controllers-leader)
        fault_log "$k: broker $b cut from the controllers (brokers and clients reach it)"
        block_from "$b" controllers
        hold 2 10
        cn_heal_all
        ;;
    oneway)
        fault_log "$k: broker $b cannot reach broker $o's listener (broker $o reaches broker $b)"
        cn_block_oneway $((b + NCTL)) $((o + NCTL)) "$BRK_PORT"
        hold 2 9
        cn_heal_all
        ;;
    ctl-kill)
        fault_log "$k: kill -9 controller $c"
        kill_proc "c$c"
        hold 0 4
        start_proc "c$c"
        ;;
    ctl-pause)
        fault_log "$k: SIGSTOP controller $c"
        kill -STOP "${PID[c$c]}"
        hold 1 5
        kill -CONT "${PID[c$c]}"
        ;;
    esac
}

# ---------------------------------------------------------------------------------------
# Checker

# check_partition P: read-P.txt (OFFSET<TAB>VALUE as consumed) against acks-P.txt and
# tries-P.txt; prints the violations, returns 1 if any.
check_partition() {
    local p=$1
    awk -F'\t' -v p="$p" '
        FILENAME ~ /tries-/ { tried[$1] = 1; next }
        FILENAME ~ /acks-/ { split($0, f, " "); na++; av[na] = f[1]; ao[na] = f[2]; next }
        {
            n++
            if ($1 != n - 1) {
                bad++
                if (gap++ < 5) print "partition " p ": record " n " read at offset " $1 ", expected offset " n - 1 " (gap or reordering)"
            }
            if (($1) in at) { bad++; print "partition " p ": offset " $1 " read twice" }
            at[$1] = $2
            cnt[$2]++
            if (cnt[$2] == 2) { bad++; if (dup++ < 10) print "partition " p ": DUPLICATE value " $2 " (again at offset " $1 ")" }
            if (!($2 in tried)) { bad++; if (alien++ < 5) print "partition " p ": value " $2 " at offset " $1 " was never produced to this partition" }
        }
        END {
            for (a = 1; a <= na; a++) {
                if (!(ao[a] in at)) {
                    bad++; if (lost++ < 10) print "partition " p ": LOST acknowledged record " av[a] " (offset " ao[a] "): nothing read there"
                } else if (at[ao[a]] != av[a]) {
                    bad++; if (lost++ < 10) print "partition " p ": LOST acknowledged record " av[a] " at offset " ao[a] ": read " at[ao[a]] " there"
                }
            }
            exit (bad > 0)
        }' "$DIR/tries-$p.txt" "$DIR/acks-$p.txt" "$DIR/read-$p.txt"
}

# selftest_checker: check_partition against made-up histories. Each case is
# "NAME|WANT|TRIES|ACKS|READ|PATTERN": WANT pass or fail; TRIES the values produced; ACKS
# "value@offset" pairs; READ "offset:value" pairs (as consumed); PATTERN must appear in the
# checker's output of a failing case.
selftest_checker() {
    local cases=(
        "all acknowledged|pass|r1 r2 r3|r1@0 r2@1 r3@2|0:r1 1:r2 2:r3|"
        "a failed record is present|pass|r1 r2 r3|r1@0 r3@2|0:r1 1:r2 2:r3|"
        "a failed record is absent|pass|r1 r2 r3|r1@0 r3@1|0:r1 1:r3|"
        "nothing acknowledged, nothing read|pass|r1||| "
        "acknowledged record missing|fail|r1 r2|r1@0 r2@1|0:r1|LOST acknowledged record p0-r2 (offset 1)"
        "acknowledged record at another offset|fail|r1 r2 r3|r1@0 r2@1 r3@2|0:r1 1:r3 2:r2|LOST acknowledged record p0-r2 at offset 1: read p0-r3"
        "record read twice|fail|r1 r2|r1@0 r2@2|0:r1 1:r1 2:r2|DUPLICATE value p0-r1"
        "failed record read twice|fail|r1 r2|r1@0|0:r1 1:r2 2:r2|DUPLICATE value p0-r2"
        "gap in the offsets|fail|r1 r2|r1@0 r2@2|0:r1 2:r2|expected offset 1"
        "value never produced|fail|r1|r1@0|0:r1 1:r9|value p0-r9 at offset 1 was never produced"
    )
    local c name want tries acks reads pat got out fails=0 x
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/kq-dchaos-check.XXXXXX") || exit 1
    for c in "${cases[@]}"; do
        IFS='|' read -r name want tries acks reads pat <<<"$c"
        : >"$DIR/tries-0.txt" && : >"$DIR/acks-0.txt" && : >"$DIR/read-0.txt"
        for x in $tries; do echo "p0-$x" >>"$DIR/tries-0.txt"; done
        for x in $acks; do echo "p0-${x%@*} ${x#*@} 0" >>"$DIR/acks-0.txt"; done
        for x in $reads; do printf '%s\tp0-%s\n' "${x%%:*}" "${x#*:}" >>"$DIR/read-0.txt"; done
        got=pass
        out=$(check_partition 0) || got=fail
        if [[ $got != "$want" ]]; then
            echo "FAIL: checker case '$name': expected $want, got $got: $out" >&2
            fails=$((fails + 1))
        elif [[ $want == fail && $out != *"$pat"* ]]; then
            echo "FAIL: checker case '$name': output lacks '$pat': $out" >&2
            fails=$((fails + 1))
        else
            echo "ok: $name${out:+ ($(head -n 1 <<<"$out"))}"
        fi
    done
    rm -rf "$DIR"
    DIR=""
    if ((fails > 0)); then
        echo "FAIL: $fails of ${#cases[@]} checker cases" >&2
        exit 1
    fi
    echo "PASS: ${#cases[@]} checker cases"
    exit 0
}
[[ $SELFTEST -eq 1 ]] && selftest_checker

# ---------------------------------------------------------------------------------------
# The run

cn_check_privs
DIR=$(mktemp -d "${TMPDIR:-/tmp}/kq-dchaos.XXXXXX")
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM
log "seed $SEED, $NCTL controllers, $NBRK brokers, $PARTS partitions, ${DURATION} s of faults, dir $DIR"
log "reproduce with: $REPRO"
RANDOM=$SEED
cn_setup $((NCTL + NBRK)) || fail "could not create the network namespaces"

CLUSTER_ID=$("$KQ" storage random-uuid) || fail "kq storage random-uuid failed"
write_configs
for p in c1 c2 c3 b1 b2 b3; do
    out=$("$KQ" storage format --config "$DIR/$p.properties" --cluster-id "$CLUSTER_ID" 2>&1) ||
        fail "kq storage format of $p failed: $out"
done
for p in c1 c2 c3 b1 b2 b3; do
    start_proc "$p"
done

# Every broker registered and unfenced.
deadline=$(($(date +%s) + 90))
while :; do
    if kqc cluster describe --bootstrap-controller "$CONTROLLERS" --timeout-ms 2000 &&
        [[ $(grep -c $'Fenced: false' <<<"$OUT") -eq $NBRK ]]; then
        break
    fi
    check_crashes || fail "a process exited during start-up"
    (($(date +%s) < deadline)) || fail "the $NBRK brokers were not all registered and unfenced within 90 s: $OUT"
    sleep 0.3
done
kqc topics --bootstrap-controller "$CONTROLLERS" --create --topic "$TOPIC" --partitions "$PARTS" \
    --replication-factor "$NBRK" --config min.insync.replicas=2 || fail "creating topic $TOPIC failed: $OUT"
wait_full_isr 60 || fail "topic $TOPIC did not get leaders and full ISRs within 60 s: $OUT"
log "topic $TOPIC: leaders ${LEADER[0]},${LEADER[1]}; ISRs ${ISR[0]} / ${ISR[1]}"

for ((p = 0; p < PARTS; p++)); do
    : >"$DIR/acks-$p.txt"
    : >"$DIR/tries-$p.txt"
    : >"$DIR/writer-$p.log"
    "writer_$PRODUCER" "$p" &
    BG+=($!)
done

# Faults. RANDOM is re-seeded per round so a slow machine gets the same sequence of fault
# kinds and targets for a given seed. After each fault the schedule waits (up to 30 s, not a
# failure) until every broker is registered and unfenced (a killed one with its new
# registration) and every ISR is full again, so the next fault never meets a second broker
# that is still recovering.
END=$(($(date +%s) + DURATION))
round=0
NOT_REJOINED=0
while (($(date +%s) < END)); do
    round=$((round + 1))
    RANDOM=$((SEED * 7919 + round))
    one_fault
    check_crashes || break
    (($(date +%s) < END)) || break # the final phase waits for recovery
    if ! wait_recovered 30 "$RESTARTED" "$OLD_EPOCH"; then
        NOT_REJOINED=$((NOT_REJOINED + 1))
        log "not recovered 30 s after healing fault #$FAULTS: ISRs ${ISR[0]:-?} / ${ISR[1]:-?}"
    fi
    hold 1 2
    check_crashes || break
done

# Heal, stop writing, let the cluster settle.
touch "$DIR/stop"
cn_heal_all
for p in c1 c2 c3 b1 b2 b3; do
    [[ -n ${PID[$p]:-} ]] && kill -CONT "${PID[$p]}" 2>/dev/null
done
log "healed; $FAULTS faults injected; waiting for the writers"
for pid in "${BG[@]}"; do
    wait "$pid" 2>/dev/null
done
BG=()
check_crashes
for p in c1 c2 c3 b1 b2 b3; do
    alive "$p" || start_proc "$p" # a crashed process gets its chance to recover
done
wait_full_isr 120 || fail "partitions without a leader or a full ISR 120 s after healing: $OUT"
log "every ISR full: leaders ${LEADER[0]},${LEADER[1]}; ISRs ${ISR[0]} / ${ISR[1]}"

# Liveness: one more acks=all record per partition must go through; its offset bounds the read.
declare -A LAST=()
for ((p = 0; p < PARTS; p++)); do
    v="p$p-final"
    echo "$v" >>"$DIR/tries-$p.txt"
    out=$(cn_exec c timeout 90 "$KQ" produce --bootstrap-server "$BROKERS" --topic "$TOPIC" \
        --partition "$p" --acks all --request-timeout-ms 5000 --delivery-timeout-ms 60000 \
        --value "$v" 2>&1) || fail "the acks=all write to partition $p after healing failed: $out"
    [[ $out =~ written\ at\ offset\ ([0-9]+) ]] || fail "unexpected answer to the write after healing: $out"
    LAST[$p]=${BASH_REMATCH[1]}
    echo "$v ${LAST[$p]} $(now_ms)" >>"$DIR/acks-$p.txt"
done

# Read every partition from the beginning, up to and including the final record.
for ((p = 0; p < PARTS; p++)); do
    cn_exec c timeout 120 "$KQ" consume --bootstrap-server "$BROKERS" --topic "$TOPIC" --partition "$p" \
        --from-beginning --print-offsets --max-records $((LAST[$p] + 1)) --timeout-ms 20000 \
        >"$DIR/read-$p.txt" 2>"$DIR/read-$p.err" ||
        fail "kq consume of partition $p failed: $(tail -n 3 "$DIR/read-$p.err")"
done

# Controlled shutdown of the brokers (each must exit 0), then the controllers.
for p in b1 b2 b3; do
    EXPECT[$p]=0
    kill -TERM "${PID[$p]}" 2>/dev/null
done
for p in b1 b2 b3; do
    reap "$p" || fail "$p did not exit within 30 s of SIGTERM"
    [[ $RC -eq 0 ]] || CRASHES+=("$p exited with status $RC after SIGTERM")
done
for p in c1 c2 c3; do
    EXPECT[$p]=0
    kill -TERM "${PID[$p]}" 2>/dev/null
done
for p in c1 c2 c3; do
    reap "$p" || fail "$p did not exit within 30 s of SIGTERM"
    [[ $RC -eq 0 ]] || CRASHES+=("$p exited with status $RC after SIGTERM")
done

result=PASS
VIOL=""
for ((p = 0; p < PARTS; p++)); do
    v=$(check_partition "$p") || result=FAIL
    VIOL+=$v${v:+$'\n'}
done
[[ ${#CRASHES[@]} -gt 0 ]] && result=FAIL
HUNG=$(cat "$DIR"/writer-*.log 2>/dev/null | grep -c HUNG)
((HUNG > 0)) && result=FAIL

KIND_SUMMARY=""
for k in "${!FAULT_KINDS[@]}"; do
    KIND_SUMMARY+="$k=${FAULT_KINDS[$k]} "
done
# Elections: distinct (partition, leader epoch) that some broker became leader of.
ELECTIONS=$(cat "$DIR"/b[0-9].log 2>/dev/null | grep -o "Became leader of $TOPIC-[0-9]* at leader epoch [0-9]*" |
    sort -u | wc -l)
LEADER_EPOCHS=$(cat "$DIR"/b[0-9].log 2>/dev/null | grep -o "Became leader of $TOPIC-[0-9]* at leader epoch [0-9]*" |
    sort -u | awk '{ split($4, t, "-"); s[t[2]] = s[t[2]] " " $8 } END { for (p in s) printf "p%s:%s; ", p, s[p] }')
SHRINKS=$(cat "$DIR"/b[0-9].log 2>/dev/null | grep -c "Shrinking ISR from")
EXPANDS=$(cat "$DIR"/b[0-9].log 2>/dev/null | grep -c "Expanding ISR from")

echo "==== data chaos summary (seed $SEED, ${DURATION} s, $NBRK brokers, $PARTS partitions) ===="
echo "faults injected:      $FAULTS (${KIND_SUMMARY% })"
for ((p = 0; p < PARTS; p++)); do
    echo "partition $p:          $(wc -l <"$DIR/acks-$p.txt") acknowledged, $(grep -c "p$p-r" "$DIR/writer-$p.log") failed or unanswered, $(wc -l <"$DIR/read-$p.txt") records read (final offset ${LAST[$p]})"
done
echo "elections seen:       $ELECTIONS (leader epochs by partition: ${LEADER_EPOCHS% })"
echo "ISR shrinks/expands:  $SHRINKS / $EXPANDS (leader log lines); not recovered 30 s after a fault: $NOT_REJOINED"
echo "replica logs compared offline: no (not implemented; kq log-dump --partition-log dumps them)"
[[ -n ${VIOL//$'\n'/} ]] && printf '%s' "$VIOL"
((HUNG > 0)) && grep -h HUNG "$DIR"/writer-*.log | sed 's/^/liveness: /'
for c in "${CRASHES[@]}"; do
    echo "crash: $c"
done
echo "result:               $result"
[[ $result == PASS ]] || fail "data chaos run found violations (see above); logs in $DIR"
for ((p = 0; p < PARTS; p++)); do
    (($(wc -l <"$DIR/acks-$p.txt") >= 3)) ||
        fail "partition $p: fewer than 3 acknowledged records: the run exercised nothing"
done
PASSED=1
exit 0
