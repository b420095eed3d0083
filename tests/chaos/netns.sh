#!/usr/bin/env bash
# shellcheck disable=SC2034 # the CN_ globals are read by chaos.sh, which sources this file
# tests/chaos/netns.sh: network namespaces for the chaos tests.
#
# Sourced by chaos.sh (functions cn_*), or run on its own as a self-test of the topology and of
# every partition primitive (registered in ctest as chaos_netns):
#     tests/chaos/netns.sh selftest [N]        # N nodes, default 3
#     tests/chaos/netns.sh cleanup             # remove stale kqc-* namespaces of dead runs
#
# Topology for run id R (R = <pid of the owning script>x<random>, so stale namespaces can be
# told from those of a live run): a switch namespace kqc-R-sw holding bridge br0; node i
# (1-based) is namespace kqc-R-i with eth0 = 10.233.0.i/24, plugged into port i of the bridge;
# the client namespace kqc-R-c (10.233.0.200) runs the kq tool. The veth pairs are created
# directly inside the namespaces: the root namespace gets no address, link or firewall rule.
# Traffic only ever goes to 10.233.0.x inside these namespaces.
#
# Faults (all undone by cn_heal_all):
#   cn_block A B        symmetric partition between nodes A and B (iptables DROP both ways)
#   cn_block_oneway A B A cannot reach B: packets from A to B's controller port are dropped in
#                       B (connections B opens to A keep working)
#   cn_isolate A        A is cut from every other node (the client can still reach it)
#   cn_link_down A      the bridge port of A goes down (cut from everything, client included)
# Exit code 77 (ctest SKIP_RETURN_CODE) when not root or when namespaces are not permitted.

CN_PREFIX=kqc
CN_SUBNET=10.233.0
CN_CLIENT_HOST=200
CN_RUNID=""
CN_NODES=0
CN_IPTABLES=""
CN_ACTIVE=0

cn_log() {
    printf '[%s netns] %s\n' "$(date +%H:%M:%S.%3N)" "$*" >&2
}

cn_skip() {
    echo "SKIP: $*" >&2
    exit 77
}

cn_ns() { # NODE -> namespace name ("sw" and "c" name the switch and the client)
    echo "$CN_PREFIX-$CN_RUNID-$1"
}

cn_addr() { # NODE -> its address
    echo "$CN_SUBNET.$1"
}

cn_client_addr() {
    echo "$CN_SUBNET.$CN_CLIENT_HOST"
}

# cn_exec NODE CMD...: runs CMD inside the node's namespace (exec, so $! is CMD's pid).
cn_exec() {
    local n=$1
    shift
    ip netns exec "$(cn_ns "$n")" "$@"
}

# cn_check_privs: exits 77 when this machine cannot run the chaos tests.
cn_check_privs() {
    if [[ $(id -u) -ne 0 ]]; then
        cn_skip "the chaos tests need root (network namespaces, iptables); running as uid $(id -u)"
    fi
    command -v ip >/dev/null || cn_skip "the 'ip' tool (iproute2) is not installed"
    local probe="$CN_PREFIX-probe-$$" err
    if ! err=$(ip netns add "$probe" 2>&1); then
        cn_skip "'ip netns add' is not permitted here: $err"
    fi
    if ! err=$(ip -n "$probe" link add br0 type bridge 2>&1); then
        ip netns del "$probe" 2>/dev/null
        cn_skip "cannot create a bridge inside a namespace: $err"
    fi
    if ! err=$(ip -n "$probe" link add v0 type veth peer name v1 2>&1); then
        ip netns del "$probe" 2>/dev/null
        cn_skip "cannot create a veth pair inside a namespace: $err"
    fi
    CN_IPTABLES=""
    if command -v iptables >/dev/null &&
        ip netns exec "$probe" iptables -w -A OUTPUT -d "$CN_SUBNET.1" -j DROP 2>/dev/null; then
        CN_IPTABLES=iptables
    fi
    ip netns del "$probe" 2>/dev/null || true
    if [[ -z $CN_IPTABLES ]]; then
        cn_log "NOTE: iptables is missing or does not work in a namespace: partitions are" \
            "limited to cutting bridge links (apt-get install iptables for the full schedule)"
    fi
}

# cn_cleanup_stale: deletes every kqc-<pid>x*-* namespace whose owning process is gone (an
# earlier run that was killed before its trap ran), killing what still runs inside it.
cn_cleanup_stale() {
    local ns owner pid
    while read -r ns _; do
        [[ $ns =~ ^$CN_PREFIX-([0-9]+)x[0-9a-f]+-[a-z0-9]+$ ]] || continue
        owner=${BASH_REMATCH[1]}
        if kill -0 "$owner" 2>/dev/null &&
            grep -qa -e chaos.sh -e netns.sh "/proc/$owner/cmdline" 2>/dev/null; then
            continue # a live run
        fi
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            kill -CONT "$pid" 2>/dev/null
            kill -KILL "$pid" 2>/dev/null
        done
        ip netns del "$ns" 2>/dev/null && cn_log "removed stale namespace $ns"
    done < <(ip netns list 2>/dev/null)
    # probe namespaces of killed runs
    while read -r ns _; do
        [[ $ns =~ ^$CN_PREFIX-probe-([0-9]+)$ ]] || continue
        kill -0 "${BASH_REMATCH[1]}" 2>/dev/null || ip netns del "$ns" 2>/dev/null
    done < <(ip netns list 2>/dev/null)
    return 0
}

# cn_plug NAME HOST: creates namespace NAME with eth0 = 10.233.0.HOST on a new bridge port.
cn_plug() {
    local ns=$1 host=$2 port="p$2"
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up || return 1
    ip link add eth0 netns "$ns" type veth peer name "$port" netns "$(cn_ns sw)" || return 1
    ip -n "$(cn_ns sw)" link set "$port" master br0 || return 1
    ip -n "$(cn_ns sw)" link set "$port" up || return 1
    ip -n "$ns" addr add "$CN_SUBNET.$host/24" dev eth0 || return 1
    ip -n "$ns" link set eth0 up || return 1
}

# cn_setup N: the switch, N node namespaces and the client namespace. Installs no trap: the
# caller's EXIT trap must call cn_teardown.
cn_setup() {
    local n=$1 i
    CN_NODES=$n
    CN_RUNID="$$x$(printf '%04x' $((RANDOM % 65536)))"
    cn_cleanup_stale
    CN_ACTIVE=1
    ip netns add "$(cn_ns sw)" || return 1
    ip -n "$(cn_ns sw)" link set lo up || return 1
    ip -n "$(cn_ns sw)" link add br0 type bridge || return 1
    ip -n "$(cn_ns sw)" link set br0 up || return 1
    for ((i = 1; i <= n; i++)); do
        cn_plug "$(cn_ns "$i")" "$i" || return 1
    done
    cn_plug "$(cn_ns c)" "$CN_CLIENT_HOST" || return 1
    cn_log "run $CN_RUNID: $n nodes $(cn_addr 1)..$(cn_addr "$n"), client $(cn_client_addr)"
}

# cn_teardown: kills whatever still runs in this run's namespaces and deletes them.
cn_teardown() {
    [[ $CN_ACTIVE -eq 1 ]] || return 0
    local ns pid
    while read -r ns _; do
        [[ $ns == "$CN_PREFIX-$CN_RUNID-"* ]] || continue
        for pid in $(ip netns pids "$ns" 2>/dev/null); do
            kill -CONT "$pid" 2>/dev/null
            kill -KILL "$pid" 2>/dev/null
        done
        ip netns del "$ns" 2>/dev/null
    done < <(ip netns list 2>/dev/null)
    CN_ACTIVE=0
}

# cn_reachable FROM TO_ADDR [PORT]: 0 when a TCP connect from FROM's namespace to TO_ADDR:PORT
# gets an answer (accepted or refused: a refusal proves the packet got there and back), 1 when
# it is dropped (times out or is refused locally by the firewall).
cn_reachable() {
    local from=$1 to=$2 port=${3:-9} out
    out=$(cn_exec "$from" timeout 3 bash -c "exec 3<>/dev/tcp/$to/$port" 2>&1) && return 0
    [[ $out == *"refused"* ]]
}

cn_ipt() { # NODE ARGS...: iptables inside the node's namespace
    local n=$1
    shift
    cn_exec "$n" "$CN_IPTABLES" -w "$@"
}

cn_block() { # A B: symmetric
    cn_ipt "$1" -A INPUT -s "$(cn_addr "$2")" -j DROP
    cn_ipt "$1" -A OUTPUT -d "$(cn_addr "$2")" -j DROP
    cn_ipt "$2" -A INPUT -s "$(cn_addr "$1")" -j DROP
    cn_ipt "$2" -A OUTPUT -d "$(cn_addr "$1")" -j DROP
}

# cn_block_oneway A B PORT: A's requests never reach B's listener (PORT): every packet from A to
# B:PORT is dropped in B, so A's connections to B time out, established ones included. B's own
# connections to A (A's port) keep working in both directions.
cn_block_oneway() {
    cn_ipt "$2" -A INPUT -s "$(cn_addr "$1")" -p tcp --dport "$3" -j DROP
}

cn_isolate() { # A: from every other node, not from the client
    local a=$1 i
    for ((i = 1; i <= CN_NODES; i++)); do
        [[ $i -eq $a ]] && continue
        cn_ipt "$a" -A INPUT -s "$(cn_addr "$i")" -j DROP
        cn_ipt "$a" -A OUTPUT -d "$(cn_addr "$i")" -j DROP
    done
}

cn_link_down() { # A
    ip -n "$(cn_ns sw)" link set "p$1" down
}

cn_heal_all() {
    local i
    for ((i = 1; i <= CN_NODES; i++)); do
        ip -n "$(cn_ns sw)" link set "p$i" up 2>/dev/null
        if [[ -n $CN_IPTABLES ]]; then
            cn_ipt "$i" -F INPUT 2>/dev/null
            cn_ipt "$i" -F OUTPUT 2>/dev/null
        fi
    done
    return 0
}

# ---------------------------------------------------------------------------------------
# Self-test: builds the topology and checks every primitive with TCP probes (no listener is
# needed: "connection refused" from port 9 proves reachability).

cn_selftest() {
    local n=${1:-3} i j fails=0
    cn_check_privs
    trap 'cn_teardown' EXIT
    trap 'exit 130' INT TERM
    cn_setup "$n" || {
        echo "FAIL: could not build the namespaces" >&2
        exit 1
    }
    expect() { # WHAT WANT(0 reach,1 drop) FROM TO_ADDR [PORT]
        local what=$1 want=$2 got=0
        shift 2
        cn_reachable "$@" || got=1
        if [[ $got -ne $want ]]; then
            echo "FAIL: $what: expected $([[ $want -eq 0 ]] && echo reachable || echo dropped)" >&2
            fails=$((fails + 1))
        else
            cn_log "ok: $what"
        fi
    }
    for ((i = 1; i <= n; i++)); do
        for ((j = 1; j <= n; j++)); do
            [[ $i -ne $j ]] && expect "node $i -> node $j" 0 "$i" "$(cn_addr "$j")"
        done
        expect "client -> node $i" 0 c "$(cn_addr "$i")"
    done
    # The root namespace cannot see the private range (nothing leaked out of the namespaces).
    if ip -o addr show | grep -q "$CN_SUBNET\."; then
        echo "FAIL: the root namespace has an address in $CN_SUBNET.0/24" >&2
        fails=$((fails + 1))
    fi
    cn_link_down 2
    expect "link of node 2 down: node 1 -> node 2" 1 1 "$(cn_addr 2)"
    expect "link of node 2 down: node 1 -> node 3" 0 1 "$(cn_addr 3)"
    cn_heal_all
    expect "healed: node 1 -> node 2" 0 1 "$(cn_addr 2)"
    if [[ -n $CN_IPTABLES ]]; then
        cn_block 1 2
        expect "partition 1|2: node 1 -> node 2" 1 1 "$(cn_addr 2)"
        expect "partition 1|2: node 2 -> node 1" 1 2 "$(cn_addr 1)"
        expect "partition 1|2: node 1 -> node 3" 0 1 "$(cn_addr 3)"
        cn_heal_all
        expect "healed: node 2 -> node 1" 0 2 "$(cn_addr 1)"
        cn_block_oneway 1 2 9
        expect "one-way 1->2 cut: node 1 -> node 2" 1 1 "$(cn_addr 2)" 9
        expect "one-way 1->2 cut: node 2 -> node 1" 0 2 "$(cn_addr 1)" 9
        cn_heal_all
        cn_isolate 1
        expect "node 1 isolated: node 1 -> node 3" 1 1 "$(cn_addr 3)"
        expect "node 1 isolated: node 3 -> node 1" 1 3 "$(cn_addr 1)"
        expect "node 1 isolated: client -> node 1" 0 c "$(cn_addr 1)"
        expect "node 1 isolated: node 2 -> node 3" 0 2 "$(cn_addr 3)"
        cn_heal_all
        expect "healed: node 3 -> node 1" 0 3 "$(cn_addr 1)"
    fi
    local run=$CN_RUNID
    cn_teardown
    if ip netns list | grep -q "^$CN_PREFIX-$run-"; then
        echo "FAIL: namespaces of run $run left behind: $(ip netns list | grep "^$CN_PREFIX-$run-")" >&2
        fails=$((fails + 1))
    fi
    if [[ $fails -ne 0 ]]; then
        echo "FAIL: netns self-test: $fails check(s) failed" >&2
        exit 1
    fi
    cn_log "PASS ($n nodes${CN_IPTABLES:+, iptables})"
    exit 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -uo pipefail
    case ${1:-} in
    selftest) cn_selftest "${2:-3}" ;;
    cleanup)
        [[ $(id -u) -eq 0 ]] || cn_skip "needs root"
        cn_cleanup_stale
        ;;
    *)
        sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
    esac
fi
