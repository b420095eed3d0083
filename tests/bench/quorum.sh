# shellcheck shell=bash
# Sourced by the quorum benchmarks (run.sh, run_alter.sh, profile_path.sh): start a quorum of
# kq-controller processes on loopback with default settings (fsync on) and wait for a leader.
#
#   bench_quorum BIN DIR N BASE_PORT
#
# Formats DIR/node-1..N (one cluster id), starts the nodes (logs in DIR/node-I.log), appends
# their pids to the caller's `pids` array, and sets `bench_boot` (the bootstrap list) and
# `bench_cid` (the cluster id). The caller stops the nodes (kill the pids).
bench_quorum() {
  local bin=$1 dir=$2 n=$3 base=$4 voters="" i
  bench_boot=""
  bench_cid=$("$bin/kq" storage random-uuid)
  for i in $(seq 1 "$n"); do
    voters+="${voters:+,}$i@127.0.0.1:$((base + i))"
    bench_boot+="${bench_boot:+,}127.0.0.1:$((base + i))"
  done
  mkdir -p "$dir"
  for i in $(seq 1 "$n"); do
    cat >"$dir/node-$i.properties" <<CFG
node.id=$i
process.roles=controller
controller.quorum.voters=$voters
listeners=CONTROLLER://127.0.0.1:$((base + i))
metadata.log.dir=$dir/node-$i
log.level=warn
CFG
    "$bin/kq" storage format --config "$dir/node-$i.properties" --cluster-id "$bench_cid" >/dev/null
    "$bin/kq-controller" --config "$dir/node-$i.properties" 2>"$dir/node-$i.log" &
    pids+=($!)
  done
  for _ in $(seq 1 100); do
    "$bin/kq" metadata-quorum --bootstrap-controller "$bench_boot" describe --status >/dev/null 2>&1 &&
      return 0
    sleep 0.2
  done
  echo "bench_quorum: no leader after 20 s; logs in $dir" >&2
  return 1
}
