#!/usr/bin/env bash
# Garbage sent to a controller listener (random bytes, an nng SP handshake followed by a huge
# length prefix, a valid frame with a junk body, connect-and-close, a half-sent frame), 50
# rounds against the leader and a follower: both processes keep running, keep answering
# describe, and the quorum keeps committing.
# usage: test_garbage.sh BIN_DIR
# shellcheck source=SCRIPTDIR/../lib/kqtest.sh
source "$(dirname "$0")/../lib/kqtest.sh"
kt_init "${1:?usage: $0 BIN_DIR}" garbage 24700

kt_cluster 3
kt_start_all
kt_wait_for_leader 60
kt_wait_hw_above 30 0 1 2 3
leader=$KT_LEADER
follower=1
[[ $leader -eq 1 ]] && follower=2

cat >"$KT_DIR/garbage.py" <<'PY'
import random, socket, struct, sys

port = int(sys.argv[1]); rounds = int(sys.argv[2])
rng = random.Random(int(sys.argv[3]))
# nng SP-over-TCP header: 0x00 'S' 'P' 0x00, 16-bit protocol (REQ0 0x30, REP0 0x31), 2 zero bytes.
# A frame is a 64-bit big-endian length and the body; a REQ body starts with a request id.
REQ0 = 0x30
def sp(proto):
    return b"\x00SP\x00" + struct.pack(">HH", proto, 0)

def frame(body):
    return struct.pack(">Q", len(body)) + body

def junk(n):
    return bytes(rng.getrandbits(8) for _ in range(n))

def send(data, read=True, half_close=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(0.3)
    try:
        if data:
            s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        if read:
            try:
                s.recv(65536)
            except (socket.timeout, OSError):
                pass
    except OSError:
        pass  # the server may close on us: that is the point
    finally:
        s.close()

kinds = [
    lambda: send(junk(rng.randint(1, 4096))),                                   # random bytes
    lambda: send(b"\x00SP\x00" + junk(4)),                                      # bad header
    lambda: send(sp(REQ0) + struct.pack(">Q", 0xFFFFFFFFFFFFFFF0)),              # huge length
    lambda: send(sp(REQ0) + struct.pack(">Q", 1 << 31) + junk(100)),             # 2 GiB claim
    lambda: send(sp(REQ0) + frame(b"\x80\x00\x00\x01" + junk(rng.randint(0, 512)))),  # junk body
    lambda: send(sp(REQ0) + frame(b"\x80\x00\x00\x02")),                         # empty body
    lambda: send(sp(REQ0) + frame(b"\x80\x00\x00\x03" + b"\x08\xff\xff\xff\xff\x0f" * 50)),
    lambda: send(sp(REQ0) + struct.pack(">Q", 1000) + junk(10), half_close=True),  # half frame
    lambda: send(b"", read=False),                                             # connect+close
    lambda: send(sp(0x31) + frame(junk(64))),                                  # wrong peer proto
]
for r in range(rounds):
    for k in kinds:
        k()
print("sent %d garbage connections" % (rounds * len(kinds)))
PY

for target in "$leader" "$follower"; do
    kt_status 1 2 3 || kt_fail "describe failed: $KT_OUT"
    hw=$KT_HW
    kt_log "sending garbage to node $target (port $(kt_port "$target")), HighWatermark $hw"
    timeout 300 python3 "$KT_DIR/garbage.py" "$(kt_port "$target")" 50 "$target" >&2 ||
        kt_fail "the garbage sender failed or hung"
    kt_alive "$target" || kt_fail "node $target exited after receiving garbage"
    kt_status "$target" || kt_fail "node $target does not answer describe after garbage: $KT_OUT"
    kt_assert_ge "LeaderId reported by node $target after garbage" "$KT_LEADER" 1
    kt_wait_hw_above 30 "$hw" "$target"
    off=$(kt_write "$target")
    kt_assert_ge "offset committed after garbage to node $target" "$(tail -n 1 <<<"$off")" 0
done
for i in 1 2 3; do
    kt_alive "$i" || kt_fail "node $i exited"
done
kt_pass
