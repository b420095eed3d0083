# shellcheck shell=bash
# Sourced by the quorum benchmarks (run.sh, run_alter.sh, profile_path.sh): start a quorum of
# kq-controller processes on loopback with default settings (fsync on) and wait for a leader.
#
#   bench_quorum BIN DIR N BASE_PORT
#
# Formats DIR/node-1..N (one cluster id), starts the nodes (logs in DIR/node-I.log), appends
# their pids to the caller's `pids` array, and sets `bench_boot` (the bootstrap list) and
# `bench_cid` (the cluster id). The caller stops the nodes (kill the pids). With BENCH_TLS=1
# every listener is TLS with client certificates required (deploy/tls/make-certs.sh under
# DIR/tls, CN=node-I per node) and the authorizer on, and `bench_client` holds the
# --command-config arguments a client needs (empty otherwise).
bench_quorum() {
  local bin=$1 dir=$2 n=$3 base=$4 voters="" i names=(admin)
  bench_boot=""
  bench_client=()
  bench_cid=$("$bin/kq" storage random-uuid)
  for i in $(seq 1 "$n"); do
    voters+="${voters:+,}$i@127.0.0.1:$((base + i))"
    bench_boot+="${bench_boot:+,}127.0.0.1:$((base + i))"
  done
  mkdir -p "$dir"
  if [[ ${BENCH_TLS:-0} == 1 ]]; then
    for i in $(seq 1 "$n"); do names+=("node-$i"); done
    "$(dirname "${BASH_SOURCE[0]}")/../../deploy/tls/make-certs.sh" "$dir/tls" "${names[@]}"
    printf '%s\n' security.protocol=SSL "ssl.keystore.location=$dir/tls/admin.pem" \
      "ssl.truststore.location=$dir/tls/ca.pem" >"$dir/admin.properties"
    bench_client=(--command-config "$dir/admin.properties")
  fi
  for i in $(seq 1 "$n"); do
    cat >"$dir/node-$i.properties" <<CFG
node.id=$i
process.roles=controller
controller.quorum.voters=$voters
listeners=CONTROLLER://127.0.0.1:$((base + i))
metadata.log.dir=$dir/node-$i
log.level=warn
CFG
    if [[ ${BENCH_TLS:-0} == 1 ]]; then
      printf '%s\n' listener.security.protocol.map=CONTROLLER:SSL \
        "ssl.keystore.location=$dir/tls/node-$i.pem" "ssl.truststore.location=$dir/tls/ca.pem" \
        ssl.client.auth=required \
        authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
        super.users=User:CN=admin >>"$dir/node-$i.properties"
    fi
    "$bin/kq" storage format --config "$dir/node-$i.properties" --cluster-id "$bench_cid" >/dev/null
    "$bin/kq-controller" --config "$dir/node-$i.properties" 2>"$dir/node-$i.log" &
    pids+=($!)
  done
  for _ in $(seq 1 100); do
    "$bin/kq" metadata-quorum --bootstrap-controller "$bench_boot" "${bench_client[@]}" \
      describe --status >/dev/null 2>&1 &&
      return 0
    sleep 0.2
  done
  echo "bench_quorum: no leader after 20 s; logs in $dir" >&2
  return 1
}
