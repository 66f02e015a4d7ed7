#!/usr/bin/env python3
"""A stranger on a server's shared-memory listener (test_shm_auto.sh).

Usage:
  shm_attack.py shm-push SHM_PORT
      completes the shm handshake (common/transport/shm/setup.c: a sealed
      memfd with the two rings and four eventfds over the abstract
      socket), then posts a push of key 0 without authenticating; the
      server must drop the connection.
  shm_attack.py silent SHM_PORT SECONDS
      keeps 4 connections to the shm listener that send nothing, each
      closed and opened again every half second, for SECONDS: the
      server's I/O thread must go on serving its workers meanwhile.
  shm_attack.py flood HOST TCP_PORT SHM_PORT SECONDS
      opens and closes connections to the shm listener and to the TCP
      port as fast as it can for SECONDS (at most 200000 of each); prints
      how many it made.
"""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attack import PUSH, check, closed_by_peer, failures, hdr  # noqa: E402

# ---- shared memory (common/transport/shm/shm_internal.h) ----------------
SHM_MAGIC = 0x31306D6873737070
SHM_CTL, SHM_RING = 4096, 8 << 20
SHM_MAP = 2 * SHM_CTL + 2 * SHM_RING
SHM_HELLO = struct.Struct("<QQII")


def shm_connect(port):
    """The connector's side of the shm handshake: a sealed memfd with the
    two rings and four eventfds, passed over the listener's abstract
    socket; returns (socket, mmap, eventfds)."""
    import fcntl
    import mmap
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect("\0psched-shm-%d-%d" % (os.getuid(), port))
    mfd = os.memfd_create("stranger", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(mfd, SHM_MAP)
    fcntl.fcntl(mfd, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    evs = [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(4)]
    m = mmap.mmap(mfd, SHM_MAP)
    socket.send_fds(s, [SHM_HELLO.pack(SHM_MAGIC, 0, SHM_RING, SHM_MAP)],
                    [mfd] + evs)
    os.close(mfd)
    data = s.recv(SHM_HELLO.size)
    if len(data) != SHM_HELLO.size or SHM_HELLO.unpack(data)[0] != SHM_MAGIC:
        raise RuntimeError("no shm hello from the node")
    return s, m, evs


def shm_push(argv):
    """A stranger on a server's shm listener (PS_TRANSPORT=auto or shm):
    completes the shm handshake, then posts a push of key 0 without
    authenticating; the server must drop the connection."""
    port = int(argv[0])
    s, m, evs = shm_connect(port)
    payload = struct.pack("<f", 1e6) * 4
    fr = (hdr(PUSH, key=0, total=len(payload), span=len(payload),
              length=len(payload), step=1, sender=3) +
          struct.pack("<II", 1, 0) + payload)  # mode inline, no iovecs
    m[2 * SHM_CTL:2 * SHM_CTL + len(fr)] = fr
    m[0:8] = struct.pack("<Q", len(fr))  # ring 0 head
    os.eventfd_write(evs[0], 1)
    check("shm push before authenticating: connection dropped",
          closed_by_peer(s))
    s.close()


def shm_sock(port):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect("\0psched-shm-%d-%d" % (os.getuid(), port))
    return s


def silent(argv):
    """Silent connections to the shm listener, renewed every 0.5 s."""
    import time
    port, end = int(argv[0]), time.monotonic() + float(argv[1])
    held = []
    while time.monotonic() < end:
        for s in held:
            s.close()
        held = []
        for _ in range(4):
            try:
                held.append(shm_sock(port))
            except OSError:
                pass  # a full backlog: the next round tries again
        time.sleep(0.5)
    for s in held:
        s.close()


def flood(argv):
    """Connect and close on both listeners, bounded by time and count."""
    import time
    host, tport, sport = argv[0], int(argv[1]), int(argv[2])
    end = time.monotonic() + float(argv[3])
    made = 0
    while time.monotonic() < end and made < 200000:
        for conn in (lambda: shm_sock(sport),
                     lambda: socket.create_connection((host, tport), 5)):
            try:
                conn().close()
                made += 1
            except OSError:
                time.sleep(0.001)
    print("flood: %d connections" % made)


def main():
    modes = {"shm-push": (shm_push, 1), "silent": (silent, 2),
             "flood": (flood, 4)}
    if len(sys.argv) < 2 or sys.argv[1] not in modes or \
            len(sys.argv) != 2 + modes[sys.argv[1]][1]:
        print(__doc__)
        sys.exit(2)
    modes[sys.argv[1]][0](sys.argv[2:])
    if failures:
        print("%d checks failed: %s" % (len(failures), ", ".join(failures)))
        sys.exit(1)


if __name__ == "__main__":
    main()
