#!/usr/bin/env python3
"""A stranger on a server's shared-memory listener (test_shm_auto.sh).

Usage:
  shm_attack.py shm-push SHM_PORT
      completes the shm handshake (common/transport/shm/setup.c: a sealed
      memfd with the two rings and four eventfds over the abstract
      socket), then posts a push of key 0 without authenticating; the
      server must drop the connection.
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


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "shm-push":
        print(__doc__)
        sys.exit(2)
    shm_push(sys.argv[2:])
    if failures:
        print("%d checks failed: %s" % (len(failures), ", ".join(failures)))
        sys.exit(1)


if __name__ == "__main__":
    main()
