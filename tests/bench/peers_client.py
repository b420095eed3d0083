#!/usr/bin/python3
"""Same-kind clients for tests/bench/peers.sh: kq (libnng through ctypes), etcd (python3-etcd3)
and ZooKeeper (python3-kazoo), each writing 100-byte values and waiting for every answer.

    peers_client.py SYSTEM ENDPOINTS WRITERS SECONDS

SYSTEM is kq, etcd or zk; ENDPOINTS is host:port[,host:port...] (kq: the leader's; etcd and
zk: the members). Prints one line: `SYSTEM writers=W writes=N rate=R/s p50=A ms p99=B ms
errors=E`."""
import ctypes, struct, sys, threading, time

system, endpoints, writers, seconds = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
VALUE = b"v" * 100


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def kq_writer():
    """kq.Request{api_key Write, api_version 0, cluster_id "", sender_id -1, write{records}}"""
    nng = ctypes.CDLL("libnng.so.1")
    sock = ctypes.c_uint32()
    assert nng.nng_req0_open(ctypes.byref(sock)) == 0
    nng.nng_socket_set_ms(sock, b"recv-timeout", 10000)
    assert nng.nng_dial(sock, ("tcp://" + endpoints[0]).encode(), None, 0) == 0
    record = b"\x0a" + varint(len(VALUE)) + VALUE
    body = b"\x08" + varint(1000) + b"\x10\x00\x1a\x00\x20" + varint(-1)
    request = body + b"\x7a" + varint(len(record)) + record
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()

    def write():
        if nng.nng_send(sock, request, len(request), 0) != 0:
            return False
        if nng.nng_recv(sock, ctypes.byref(buf), ctypes.byref(size), 1) != 0:  # NNG_FLAG_ALLOC
            return False
        answer = ctypes.string_at(buf, size.value)
        nng.nng_free(buf, size)
        return error_code(answer) == 0
    return write


def error_code(answer):
    """kq.Response field 2 (a varint); the fields before it are varints too."""
    pos = 0
    while pos < len(answer):
        key, pos = read_varint(answer, pos)
        value, pos = read_varint(answer, pos)
        if key == 0x10:
            return value
    return -1


def read_varint(b, pos):
    v = shift = 0
    while True:
        v |= (b[pos] & 0x7F) << shift
        shift += 7
        pos += 1
        if not b[pos - 1] & 0x80:
            return v, pos


def etcd_writer():
    import etcd3
    host, port = endpoints[0].split(":")
    client = etcd3.client(host=host, port=int(port))
    key = "bench-%d" % threading.get_ident()
    return lambda: client.put(key, VALUE) is not None


def zk_writer():
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=",".join(endpoints))
    zk.start()
    path = "/bench-%d" % threading.get_ident()
    zk.ensure_path(path)
    return lambda: zk.set(path, VALUE) is not None


make = {"kq": kq_writer, "etcd": etcd_writer, "zk": zk_writer}[system]
lat, errors, lock = [], [0], threading.Lock()
start = threading.Barrier(writers + 1)


def run():
    write, mine, bad = make(), [], 0
    write()  # connect and warm up
    start.wait()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        ok = write()
        mine.append(time.perf_counter() - t)
        bad += not ok
    with lock:
        lat.extend(mine)
        errors[0] += bad


threads = [threading.Thread(target=run) for _ in range(writers)]
for t in threads:
    t.start()
start.wait()
t0 = time.monotonic()
for t in threads:
    t.join()
took = time.monotonic() - t0
lat.sort()
print("%s writers=%d writes=%d rate=%.0f/s p50=%.3f ms p99=%.3f ms errors=%d" % (
    system, writers, len(lat), len(lat) / took, lat[len(lat) // 2] * 1e3,
    lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, errors[0]))
