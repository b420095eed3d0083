#!/usr/bin/env bash
# kq next to its peers (issue 10, item 5): a 3-voter kq quorum, a 3-member etcd (Debian
# etcd-server) and a 3-node ZooKeeper ensemble (Debian zookeeper), all on loopback with their
# data in one temporary directory on the same disk, each driven in the same run by the same
# kind of client (tests/bench/peers_client.py: Python, one connection per writer, 100-byte
# values, every write waited for): kq's Write through libnng, etcd's put through python3-etcd3,
# ZooKeeper's set through python3-kazoo. Every system syncs each write to disk before it
# answers (kq: the follower commits before its Fetch acknowledges; etcd and ZooKeeper: their
# defaults).
#
#   tests/bench/peers.sh [BIN_DIR] [SECONDS]
#
# BIN_DIR defaults to build/release/bin (kq, kq-controller); SECONDS (default 10) per
# measurement. Optional dependencies, never in CI: apt-get install etcd-server zookeeper
# python3-etcd3 python3-kazoo. Prints one line per system and writer count, then the ratios;
# docs/performance.md records the results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../../build/release/bin}
secs=${2:-10}
py=/usr/bin/python3 # Debian's, where python3-etcd3 and python3-kazoo live
for need in /usr/bin/etcd /usr/share/java/zookeeper.jar; do
    [[ -e $need ]] || {
        echo "peers.sh: $need is missing (apt-get install etcd-server zookeeper python3-etcd3 python3-kazoo)" >&2
        exit 2
    }
done
"$py" -c 'import etcd3, kazoo' 2>/dev/null || {
    echo "peers.sh: python3-etcd3 and python3-kazoo are needed for $py" >&2
    exit 2
}
# shellcheck source=tests/lib/kqtest.sh
source "$here/../lib/kqtest.sh"
kt_init "$bin" bench_peers 29700
pids=()
# shellcheck disable=SC2317 # invoked by the EXIT trap
peers_cleanup() {
    local rc=$?
    ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
    wait 2>/dev/null || true
    kt_cleanup
    return "$rc"
}
trap peers_cleanup EXIT

# Ports: kq uses BASE+1..3; etcd BASE+10.. (client 2379-like, peer); ZooKeeper BASE+20..
base=$KT_BASE_PORT
kt_cluster 3
kt_start_all

cluster=""
for i in 1 2 3; do
    cluster+="${cluster:+,}e$i=http://127.0.0.1:$((base + 10 + 2 * i))"
done
for i in 1 2 3; do
    c=$((base + 9 + 2 * i)) p=$((base + 10 + 2 * i))
    /usr/bin/etcd --name "e$i" --data-dir "$KT_DIR/etcd-$i" \
        --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token bench \
        --log-level error >"$KT_DIR/etcd-$i.log" 2>&1 &
    pids+=($!)
done

for i in 1 2 3; do
    mkdir -p "$KT_DIR/zk-$i"
    echo "$i" >"$KT_DIR/zk-$i/myid"
    {
        echo "tickTime=2000"
        echo "initLimit=10"
        echo "syncLimit=5"
        echo "dataDir=$KT_DIR/zk-$i"
        echo "clientPort=$((base + 20 + i))"
        echo "admin.enableServer=false"
        for j in 1 2 3; do
            echo "server.$j=127.0.0.1:$((base + 23 + 2 * j)):$((base + 24 + 2 * j))"
        done
    } >"$KT_DIR/zk-$i.cfg"
    java -Dzookeeper.log.dir="$KT_DIR" -Dlog4j.configuration=file:/etc/zookeeper/conf_example/log4j.properties \
        -cp "/usr/share/java/zookeeper.jar:/etc/zookeeper/conf_example" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$KT_DIR/zk-$i.cfg" >"$KT_DIR/zk-$i.log" 2>&1 &
    pids+=($!)
done

kt_wait_for_leader 30
kq_ep=127.0.0.1:$(kt_port "$KT_LEADER")
etcd_ep=127.0.0.1:$((base + 11))
zk_ep=127.0.0.1:$((base + 21)),127.0.0.1:$((base + 22)),127.0.0.1:$((base + 23))
# wait (at most 60 s in all) until etcd and ZooKeeper take a write, every member still running
deadline=$(($(date +%s) + 60))
for sys in etcd zk; do
    ep=$etcd_ep
    [[ $sys == zk ]] && ep=$zk_ep
    until timeout 10 "$py" "$here/peers_client.py" "$sys" "$ep" 1 0.2 >/dev/null 2>&1; do
        for p in "${pids[@]}"; do
            kill -0 "$p" 2>/dev/null || kt_fail "a peer process (pid $p) exited; logs in $KT_DIR"
        done
        (($(date +%s) < deadline)) || kt_fail "$sys takes no write after 60 s; logs in $KT_DIR"
        sleep 1
    done
done

declare -A p50 rate
for w in 1 16; do
    for sys in kq etcd zk; do
        ep=$kq_ep
        [[ $sys == etcd ]] && ep=$etcd_ep
        [[ $sys == zk ]] && ep=$zk_ep
        line=$(timeout $((secs + 60)) "$py" "$here/peers_client.py" "$sys" "$ep" "$w" "$secs") ||
            kt_fail "$sys with $w writers failed: $line"
        echo "peers: $line"
        p50[$sys.$w]=$(sed -n 's/.* p50=\([0-9.]*\) ms.*/\1/p' <<<"$line")
        rate[$sys.$w]=$(sed -n 's/.* rate=\([0-9]*\)\/s.*/\1/p' <<<"$line")
    done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "peers: 1 writer p50: kq/etcd $(ratio "${p50[kq.1]}" "${p50[etcd.1]}")," \
    "kq/zk $(ratio "${p50[kq.1]}" "${p50[zk.1]}") (target <= 0.5)"
echo "peers: 16 writers rate: kq/etcd $(ratio "${rate[kq.16]}" "${rate[etcd.16]}")," \
    "kq/zk $(ratio "${rate[kq.16]}" "${rate[zk.16]}")"
kt_pass >/dev/null
