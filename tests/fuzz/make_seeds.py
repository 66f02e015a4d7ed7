#!/usr/bin/env python3
"""Write the seed inputs of tests/fuzz/corpus/<harness>/ (run once; the
corpus is kept in the tree and grows with FUZZ_MERGE=1 runs).  Frames are
built as common/wire.h and proto/psched.proto define them."""
import os
import struct
import sys

HDR = struct.Struct("<IBBBBiiQQQQQQQQIIiI")
MAGIC = 0x31445350
CONTROL, PUSH, PULL, PUSHPULL, PUSH_ACK, PULL_RESP, INIT = range(1, 8)
F32 = 1


def hdr(type_, key=0, total=0, offset=0, span=0, length=0, step=0, dtype=F32,
        sender=0, flags=0, status=0, part=0, req=0, slot=0, epoch=0, prio=0):
    return HDR.pack(MAGIC, 1, type_, dtype, flags, sender, status, key, total,
                    offset, span, length, part, step, req, slot, epoch, prio, 0)


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_varint(field, v):
    return varint(field << 3) + varint(v)


def f_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def f_double(field, d):
    return varint(field << 3 | 1) + struct.pack("<d", d)


def zigzag(v):
    return (v << 1) ^ (v >> 31)


def control(field, body):
    return f_bytes(field, body)


def ctl_frame(body, sender=0):
    return hdr(CONTROL, length=len(body), sender=sender) + body


def data(type_, key, total, step=1, offset=0, span=None, payload=True,
         sender=0, **kw):
    span = total - offset if span is None else span
    n = span if payload else 0
    return hdr(type_, key=key, total=total, offset=offset, span=span, length=n,
               step=step, sender=sender, **kw) + b"\x01\x00\x80\x3f" * (n // 4)


def write(dirname, name, blob):
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(blob)


def main(root):
    w = os.path.join(root, "wire")
    write(w, "push", hdr(PUSH, key=1, total=64, span=64, length=64, step=1) + struct.pack("<Q", 1 << 30))
    write(w, "pull", hdr(PULL, key=2, total=64, span=64, step=3) + struct.pack("<Q", 64))
    write(w, "control", hdr(CONTROL, length=20) + struct.pack("<Q", 0))
    write(w, "resp", hdr(PULL_RESP, key=2, total=8, span=8, length=8) + struct.pack("<Q", 1 << 20))
    write(w, "ack_err", hdr(PUSH_ACK, key=2, total=8, span=8, status=-4100) + struct.pack("<Q", 4))

    s = os.path.join(root, "server")
    cmd = control(20, f_varint(1, 1) + f_varint(2, 2))
    opt = f_bytes(1, b"sgd") + f_double(2, 0.1) + f_double(3, 0.9)
    cmd_opt = control(20, f_varint(1, 2) + f_bytes(3, opt))
    cfg = control(10, f_varint(1, 1) + f_varint(2, 64) + f_varint(4, 3))
    write(s, "sync_steps", b"\x02" +
          data(INIT, 7, 256, step=0, flags=1) + data(INIT, 7, 256, step=0, payload=False, sender=1) +
          data(PUSH, 7, 256, 1) + data(PUSH, 7, 256, 1, sender=1) +
          data(PULL, 7, 256, 1, payload=False) + data(PUSHPULL, 7, 256, 2) +
          data(PUSHPULL, 7, 256, 2, sender=1))
    write(s, "early_and_limits", b"\x02" + data(PUSH, 9, 4096, 1) +
          data(PUSH, 9, 4096, 3) + data(PUSH, 9, 4096, 5) + data(PUSH, 9, 4096, 1000000000) +
          data(PULL, 9, 4096, 4, payload=False, sender=1))
    write(s, "conflict", b"\x22" + data(PUSHPULL, 11, 512, 1) +
          data(PUSHPULL, 11, 1024, 1, sender=1) + data(INIT, 12, 64, 0, flags=1) +
          data(INIT, 12, 128, 0, payload=False, sender=1))
    write(s, "oversize", b"\x00" + data(PUSH, 13, 2 << 20, 1, span=64) + data(PUSH, 14, 64, 1))
    write(s, "partition_epoch", b"\x0a" + ctl_frame(cfg) + data(PUSH, 15, 256, 1, span=64, part=64) +
          data(PUSH, 15, 256, 3, span=64, part=64, epoch=1))
    write(s, "commands", b"\x01" + ctl_frame(cmd) + ctl_frame(cmd_opt) + data(PUSH, 16, 64, 1))

    k = os.path.join(root, "worker")
    rerr = control(22, f_varint(1, 0) + f_varint(3, 0) + f_varint(4, zigzag(-4100)) +
                   f_bytes(5, b"key 0: refused for a reason"))
    rfatal = control(22, f_varint(3, 1) + f_varint(4, zigzag(-4100)) +
                     f_bytes(5, b"init conflict") + f_varint(6, 1))
    ack = control(21, f_varint(1, 1) + f_varint(2, zigzag(-22)) + f_bytes(3, b"no"))
    write(k, "ack_then_resp", b"\x00" + data(PUSH_ACK, 0, 64, 1, payload=False) +
          data(PULL_RESP, 0, 64, 1))
    write(k, "refused", b"\x01" + ctl_frame(rerr) + data(PULL_RESP, 1, 4096, 1, payload=False, status=-4100))
    write(k, "fatal", b"\x02" + ctl_frame(rfatal) + ctl_frame(ack))
    write(k, "split", b"\x02" + data(PUSH_ACK, 2, 262144, 1, span=131072, payload=False) +
          data(PULL_RESP, 2, 262144, 1, offset=131072, span=131072, sender=1, slot=1,
               payload=False, status=-4100))

    c = os.path.join(root, "sched")
    node_srv = f_varint(2, 1) + f_bytes(4, b"127.0.0.1") + f_varint(5, 4000)
    node_wrk = f_varint(2, 2) + f_bytes(4, b"127.0.0.1")
    reg = lambda node: control(1, f_bytes(1, node) + f_bytes(2, b"tcp") + f_varint(3, 1) +
                               f_varint(4, 1) + f_varint(5, 1234))
    write(c, "register_server", ctl_frame(reg(node_srv)) + ctl_frame(control(5, f_varint(1, 5))))
    write(c, "register_worker", ctl_frame(reg(node_wrk)) + ctl_frame(control(4, f_varint(1, 1) + f_varint(2, 1))) +
          ctl_frame(control(11, f_varint(1, 3) + f_varint(2, 100))) +
          ctl_frame(control(12, f_varint(1, 1) + f_varint(2, 3))) + ctl_frame(control(8, b"")))
    write(c, "heartbeat_first", ctl_frame(control(5, f_varint(1, 1))))
    # A heartbeat with a node's counters (NodeStats): bytes, requests,
    # latency buckets, unpacked and packed.
    stats = (f_varint(1, 100) + f_varint(11, 2) + f_varint(15, 1) + f_varint(19, 3) +
             f_varint(19, 4) + f_bytes(19, varint(5) + varint(6)) + f_varint(20, 77) +
             f_varint(21, 1))
    write(c, "heartbeat_stats", ctl_frame(reg(node_srv)) +
          ctl_frame(control(5, f_varint(1, 1) + f_bytes(2, stats))))
    write(c, "data_to_sched", data(PULL, 1, 4, 1, payload=False))

    # fuzz_node: setup byte (bits 0-1 state, bit 2 worker when joining,
    # bit 3 close all at the end), then frames routed by byte 92 (0 the
    # scheduler link, 1 and 2 the data connections); a Challenge/Proof
    # proof of the single byte 0xA5 is replaced by the right one.
    n = os.path.join(root, "node")
    fix = b"\xa5"
    nonce = bytes(range(32))
    to = lambda route, frame: frame[:92] + bytes([route]) + frame[93:]
    ctl = lambda route, body: to(route, ctl_frame(body))
    hello = lambda wid, nc=nonce: control(3, f_varint(1, wid) + f_bytes(3, nc))
    proof = lambda pr=fix: control(14, f_bytes(1, pr))
    chal = lambda pr=fix, nc=nonce: control(13, f_bytes(1, nc) + f_bytes(2, pr))
    info = lambda i, role, rank: f_bytes(2, f_varint(1, i) + f_varint(2, role) + f_varint(3, rank) +
                                        f_bytes(4, b"127.0.0.1") + f_varint(5, 4000 + i))
    table = lambda me: control(2, f_varint(1, me) + info(1, 1, 0) + info(2, 1, 1) +
                               info(3, 2, 0) + info(4, 2, 1))
    barrier = control(4, f_varint(1, 7) + f_varint(2, 1))
    failure = lambda i: control(6, f_varint(1, i) + f_varint(2, 2) + f_bytes(4, b"heartbeat lost"))
    finalize = control(8, b"")
    write(n, "server_handshake", b"\x02" + ctl(1, hello(3)) + ctl(1, proof()) +
          to(1, data(PUSH, 5, 64, 1, sender=3)) + ctl(0, barrier) + ctl(0, cfg) +
          ctl(1, finalize) + ctl(2, hello(4)) + ctl(2, proof()) + ctl(0, failure(4)) +
          ctl(0, control(9, b"")))
    write(n, "server_early_hellos", b"\x01" + ctl(1, hello(3)) + ctl(1, proof()) +
          ctl(2, hello(4)) + ctl(2, proof()) + ctl(0, table(1)) + to(2, data(PUSH, 6, 64, 1, sender=4)) +
          ctl(0, control(7, f_bytes(1, b"rendezvous gave up"))))
    write(n, "server_join", b"\x00" + ctl(0, chal()) + ctl(0, table(1)) + ctl(0, barrier) +
          ctl(1, hello(3)) + ctl(1, proof()) + ctl(0, control(5, f_varint(1, 1))))
    write(n, "worker_join", b"\x04" + ctl(0, chal()) + ctl(0, table(3)) + ctl(0, barrier) +
          ctl(0, cfg) + ctl(0, failure(1)))
    write(n, "worker_servers", b"\x0b" + ctl(1, chal()) + ctl(2, chal()) +
          ctl(1, rerr) + ctl(2, ack) + ctl(1, finalize) + ctl(0, failure(2)) + ctl(0, control(9, b"")))
    write(n, "preauth_limits", b"\x02" + to(1, data(PUSH, 5, 64, 1, sender=3)) +
          ctl(2, hello(4) + b"\x00" * 5000))
    write(n, "bad_proofs", b"\x0a" + ctl(1, hello(3)) + ctl(1, proof(b"\x01" * 32)) +
          ctl(2, hello(9)) + ctl(2, hello(4)) + ctl(0, chal(b"\x02" * 32)))
    write(n, "hello_short_nonce", b"\x02" + ctl(1, hello(3, b"abc")) + ctl(2, proof()) +
          ctl(2, hello(3)) + ctl(2, proof()) + ctl(1, hello(3)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus"))
