#!/usr/bin/env bash
# A controller verifies the storage it will rely on before it serves or votes, and a damaged
# or full disk gets a clear message and a documented exit status, never an abort (issue 8,
# item 11). One single-voter controller at a time:
#  A. a byte flipped inside a stored record: exit 2 before it starts serving, naming
#     data.mdb, the CRC32C mismatch and how to recover;
#  B. bytes flipped at seeded random places of data.mdb (12 seeds): each start either exits 2
#     naming data.mdb or runs (the damage hit space nothing uses); never SIGABRT, SIGSEGV or 1;
#     and a data.mdb cut to half its size (LMDB would fault reading past its end): exit 2;
#  C. a byte flipped in the latest snapshot file: exit 2 naming the snapshot file;
#  D. metadata.log.dir on a full file system (a 6 MiB tmpfs, filled): the write fails and the
#     daemon exits 3 with "no space left ... (metadata.log.dir)".
# usage: test_storage_damage_stops_before_serving.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" storage_damage 27800

MNT=""
cleanup_mount() { [[ -n $MNT ]] && umount "$MNT" 2>/dev/null; MNT=""; }
# kt_cleanup reads the test's exit status from $?: keep it across the unmount.
trap 'rc=$?; cleanup_mount; (exit "$rc"); kt_cleanup' EXIT

# run_fg NODE SECONDS: the daemon in the foreground; RC and OUT (124: still running).
run_fg() {
    RC=0
    OUT=$(timeout "$2" "$KT_CTL" --config "$(kt_config "$1")" 2>&1) || RC=$?
}
flip() { # FILE OFFSET: invert one byte
    python3 - "$1" "$2" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, 'r+b') as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xff]))
PY
}

KT_NODES=1
KT_CLUSTER_ID=$("$KT_KQ" storage random-uuid)
kt_write_config 1 1
kt_format 1
kt_start 1
kt_wait_for_leader 30 1
kt_write 1 -- --count 4 --size 200 >/dev/null
# A record with a string to find in the file: a cluster-default config.
kt_kq_ok configs --entity-type brokers --entity-default --alter --add-config min.insync.replicas=2
kt_stop 1
DATA=$KT_DIR/node-1/data.mdb
cp "$DATA" "$KT_DIR/pristine.mdb"

echo "## A. a flipped byte inside a stored record"
# Flip a byte of every copy of the config's name in the file (LMDB may keep older copies of a
# page): the live record is then damaged, whatever page holds it.
n=$(python3 - "$DATA" <<'PY'
import sys
p = sys.argv[1]
d = bytearray(open(p, 'rb').read())
needle = b'min.insync.replicas'
n, i = 0, d.find(needle)
while i >= 0:
    d[i + 4] ^= 0xff
    n += 1
    i = d.find(needle, i + 1)
open(p, 'wb').write(d)
print(n)
PY
)
((n > 0)) || kt_fail "the config record was not found in $DATA"
echo "---- start (damaged record) ----" >>"$KT_DIR/node-1.log"
run_fg 1 30
echo "$OUT" >>"$KT_DIR/node-1.log"
kt_assert_eq "exit status with a damaged record" 2 "$RC"
kt_assert_contains "message names the file" "$DATA" "$OUT"
kt_assert_contains "message says what is wrong" "CRC32C" "$OUT"
kt_assert_contains "message says how to recover" "kq storage format with the same cluster id and node id" "$OUT"
[[ $OUT != *'msg="started"'* ]] || kt_fail "the node started serving before it found the damage: $OUT"

echo "## B. random damage: exit 2 or run, never an abort"
caught=0
for seed in 1 2 3 4 5 6 7 8 9 10 11 12; do
    cp "$KT_DIR/pristine.mdb" "$DATA"
    python3 - "$DATA" "$seed" <<'PY'
import os, random, sys
p, seed = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(p)
r = random.Random(seed)
with open(p, 'r+b') as f:
    for _ in range(16):
        off = r.randrange(0, size)
        f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ (1 << r.randrange(8))]))
PY
    run_fg 1 4
    case $RC in
    2)
        kt_assert_contains "seed $seed: the message names data.mdb" "data.mdb" "$OUT"
        kt_log "ok: seed $seed: exit 2: $(grep -m1 -o 'kq[-a-z]*: .*' <<<"$OUT" | head -c 200)"
        caught=$((caught + 1))
        ;;
    124) kt_log "ok: seed $seed: the damage hit unused space; the node ran" ;;
    *) kt_fail "seed $seed: exit status $RC (want 2, or a running node): $(tail -n 5 <<<"$OUT")" ;;
    esac
done
kt_assert_gt "seeds whose damage was found (of 12)" "$caught" 0

echo "## B2. a truncated data.mdb (LMDB would read past the end of its file: SIGBUS)"
cp "$KT_DIR/pristine.mdb" "$DATA"
truncate -s $(($(stat -c %s "$DATA") / 2 / 4096 * 4096)) "$DATA"
run_fg 1 10
kt_assert_eq "exit status with a truncated data.mdb" 2 "$RC"
kt_assert_contains "message names the directory" "$KT_DIR/node-1" "$OUT"
kt_assert_contains "message says how to recover" "re-format it with the same cluster id and node id" "$OUT"

echo "## C. a damaged snapshot file"
cp "$KT_DIR/pristine.mdb" "$DATA"
kt_set_prop "$(kt_config 1)" metadata.log.max.record.bytes.between.snapshots 1024
kt_start 1
kt_wait_for_leader 30 1
for _ in 1 2 3 4; do
    kt_write 1 -- --count 4 --size 200 >/dev/null
done
kt_stop 1
snap=$(find "$KT_DIR/node-1/snapshots" -name '*.checkpoint' | sort | tail -n 1)
[[ -n $snap ]] || kt_fail "no snapshot was written (metadata.log.max.record.bytes.between.snapshots=1024)"
flip "$snap" $(($(stat -c %s "$snap") - 3))
run_fg 1 30
kt_assert_eq "exit status with a damaged snapshot" 2 "$RC"
kt_assert_contains "message names the snapshot file" "$snap" "$OUT"
kt_assert_contains "message says how to recover" "kq storage format" "$OUT"

echo "## D. a full disk"
MNT=$KT_DIR/small
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=6m tmpfs "$MNT" 2>"$KT_DIR/mount.err"; then
    MNT=""
    kt_fail "cannot mount a 6 MiB tmpfs for the full-disk case (needs root): $(cat "$KT_DIR/mount.err")"
fi
kt_write_config 2 1 "metadata.log.dir=$MNT/meta"
sed -i "s/^controller.quorum.voters=.*/controller.quorum.voters=2@127.0.0.1:$(kt_port 2)/" "$(kt_config 2)"
kt_format 2
KT_NODES=2
kt_start 2
kt_wait_for_leader 30 2
# Fill what is left, then write until a commit fails.
dd if=/dev/zero of="$MNT/fill" bs=64k status=none 2>/dev/null || true
for ((k = 0; k < 40; k++)); do
    kt_alive 2 || break
    timeout 10 "$KT_KQ" metadata-write --bootstrap-controller "127.0.0.1:$(kt_port 2)" \
        --count 8 --size 60000 --timeout-ms 3000 >/dev/null 2>&1 || true
done
kt_wait_exit 2 30 || kt_fail "the controller kept running on a full disk"
kt_assert_eq "exit status on a full disk" 3 "$KT_RC"
log=$(cat "$KT_DIR/node-2.log")
kt_assert_contains "full-disk message" "no space left on the file system of $MNT/meta (metadata.log.dir)" "$log"
cleanup_mount
kt_pass
