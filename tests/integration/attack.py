#!/usr/bin/env python3
"""Bad peers against a live psched cluster (tests/integration/test_bad_input.sh).

Each case opens its own connection, misbehaves, and checks that the node
closes it (and, in the shell test, that it logged why).  Refusals of
well-formed requests from real workers (wrong size, unknown key) are
tested by tests/helpers/misuse.c.
Usage: PS_JOB_TOKEN=... attack.py SCHED_PORT WORKER_ID REAL_KEY REAL_TOTAL SERVER_PORT...
With the job token the attacker can even pass for a worker that is already
connected; the server must refuse that too.
"""
import os
import random
import socket
import struct
import sys

HDR = struct.Struct("<IBBBBiiQQQQQQQQIIiI")  # 96 bytes, common/wire.h
assert HDR.size == 96
MAGIC = 0x31445350
CONTROL, PUSH, PULL, PUSHPULL, PUSH_ACK, PULL_RESP, INIT = range(1, 8)
F32 = 1
failures = []


def hdr(type_, key=0, total=0, offset=0, span=0, length=0, step=0,
        dtype=F32, sender=-1, magic=MAGIC, version=1, flags=0, status=0,
        reserved=0, part=0, req=7, slot=0):
    return HDR.pack(magic, version, type_, dtype, flags, sender, status,
                    key, total, offset, span, length, part, step, req,
                    slot, 0, 0, reserved)


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def hello(worker_id, token):
    # Control{hello = 3: Hello{id = 1, token = 2}}
    inner = b"\x08" + varint(worker_id) + b"\x10" + varint(token)
    body = b"\x1a" + varint(len(inner)) + inner
    return hdr(CONTROL, length=len(body)) + body


def fnv1a(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h or 1


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.settimeout(10)
    return s


def closed_by_peer(s):
    """True if the node closes the connection (EOF or reset) in time."""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def expect_closed(name, port, payload, die=False):
    """Send @payload; with @die, then half-close as a dying peer would."""
    s = connect(port)
    try:
        s.sendall(payload)
        if die:
            s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass
    ok = closed_by_peer(s)
    s.close()
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        failures.append(name)


def attack_common(tag, port):
    rnd = random.Random(port)
    expect_closed(tag + " garbage bytes", port, bytes(rnd.getrandbits(8) for _ in range(300)))
    expect_closed(tag + " bad magic", port, hdr(CONTROL, magic=0xdeadbeef))
    expect_closed(tag + " truncated control frame", port, hdr(CONTROL, length=50) + b"\x00" * 10, die=True)
    expect_closed(tag + " header claiming 2^40 bytes", port,
                  hdr(PUSH, key=1, total=1 << 40, span=1 << 40, length=1 << 40, step=1))
    expect_closed(tag + " control claiming 2^40 bytes", port, hdr(CONTROL, length=1 << 40))
    expect_closed(tag + " garbage protobuf", port,
                  hdr(CONTROL, length=24) + bytes(rnd.getrandbits(8) | 0x80 for _ in range(24)))
    expect_closed(tag + " reserved bytes set", port, hdr(CONTROL, reserved=5))


def attack_server(port, worker_id, key, total, token):
    tag = "server:%d" % port
    attack_common(tag, port)
    expect_closed(tag + " push before hello", port,
                  hdr(PUSH, key=key, total=total, span=4, length=4, step=1) + b"\x00" * 4)
    # Control{command = 20: ServerCommand{seq 1, mode ASYNC}} and
    # Control{command_ack = 21: CommandAck{seq 1}}: only a worker's data
    # connection, after its hello, may configure a server.
    cmd = b"\x08\x01\x10\x02"
    body = b"\xa2\x01" + varint(len(cmd)) + cmd
    expect_closed(tag + " server command before hello", port,
                  hdr(CONTROL, length=len(body)) + body)
    body = b"\xaa\x01\x02\x08\x01"
    expect_closed(tag + " command ack sent to a server", port,
                  hdr(CONTROL, length=len(body)) + body)
    expect_closed(tag + " hello with a wrong job token", port, hello(worker_id, token + 1))
    expect_closed(tag + " hello from a non-worker id", port, hello(1, token))
    expect_closed(tag + " hello for a worker already connected", port, hello(worker_id, token))
    # A peer that dies mid-message (after a refused hello: framing only).
    expect_closed(tag + " peer dies mid-payload", port,
                  hdr(PUSH, key=key, total=total, offset=0, span=4096, length=4096,
                      step=1 << 40, req=14) + b"\x01" * 1000, die=True)


def attack_scheduler(port):
    tag = "scheduler:%d" % port
    attack_common(tag, port)
    expect_closed(tag + " data message to the scheduler", port,
                  hdr(PULL, key=1, total=4, span=4))
    expect_closed(tag + " heartbeat before registering", port,
                  hdr(CONTROL, length=2) + b"\x2a\x00")
    # Register{node{role=WORKER}, transport "tcp", 1 server, 1 worker}
    # with a wrong token: the scheduler answers Abort and closes.
    node = b"\x10\x02"
    reg = (b"\x0a" + varint(len(node)) + node + b"\x12\x03tcp" +
           b"\x18\x02\x20\x02\x30" + varint(12345))
    body = b"\x0a" + varint(len(reg)) + reg
    expect_closed(tag + " register with a wrong job token", port,
                  hdr(CONTROL, length=len(body)) + body)


def main():
    sched, worker_id, key, total = (int(a) for a in sys.argv[1:5])
    token = fnv1a(os.environ["PS_JOB_TOKEN"])
    for p in sys.argv[5:]:
        attack_server(int(p), worker_id, key, total, token)
    attack_scheduler(sched)
    if failures:
        print("%d checks failed: %s" % (len(failures), ", ".join(failures)))
        sys.exit(1)


if __name__ == "__main__":
    main()
