#!/usr/bin/env python3
"""The split TCP pair (PS_TCP_SPLIT) against a live server.

Usage: split_attack.py SCHED_PORT
  The job has 1 server and 1 worker, and this script is the worker: it
  registers with the job's secret (PS_JOB_TOKEN), gets the node table and
  then, against the server:
   - an answers connection (Hello.channel 2, proofs right) while its
     request connection is still authenticating: refused;
   - the request connection (channel 1) finishes: PairReady 1 on it;
   - an answers hello whose proof is made for another channel: the
     server's own proof does not verify as that channel's, and the
     server refuses ours;
   - a hello opening channel 7: refused;
   - the answers connection: PairReady 2; a second one: refused;
   - an init on the request connection: its answer comes on the answers
     connection, nothing on the request one;
   - a push on the answers connection: the server drops both.
  test_tcp_split.sh checks the server's log for the reasons.
"""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack as A  # noqa: E402

C_PAIR_READY = 23
AUTH_HELLO_REQ, AUTH_HELLO_ANS = 3, 4


def hello(wid, n_i, channel):
    body = A.f_varint(1, wid) + A.f_bytes(3, n_i) + A.f_varint(4, channel)
    return A.frame(A.control(A.C_HELLO, body))


def challenge(port, wid, channel):
    """Open a connection, say hello on @channel, read the Challenge."""
    n_i = os.urandom(32)
    s = A.connect(port)
    s.sendall(hello(wid, n_i, channel))
    field, ch = A.recv_control(s)
    assert field == A.C_CHALLENGE, "expected a Challenge, got %d" % field
    return s, n_i, ch[1], ch[2]


def finish(s, kind, wid, n_i, n_r):
    s.sendall(A.proof_msg(A.proof(A.secret(), False, kind, wid, n_i, n_r)))


def expect_ready(s, channel, what):
    try:
        field, body = A.recv_control(s)
    except (OSError, ConnectionResetError) as e:
        A.check("%s: PairReady %d (got %s)" % (what, channel, e), False)
        return
    A.check("%s: PairReady %d, got field %d %s" % (what, channel, field, body),
            field == C_PAIR_READY and body.get(1, 0) == channel)


def nothing_for(s, secs):
    s.settimeout(secs)
    try:
        s.recv(1)  # a byte, or EOF
        return False
    except socket.timeout:
        return True
    except OSError:
        return False


def main():
    sched = int(sys.argv[1])
    key = A.secret()
    n_i = os.urandom(32)
    reg, _, ok = A.handshake(sched, A.register_msg(n_i), A.AUTH_REGISTER,
                             A.ROLE_WORKER, key, n_i)
    A.check("scheduler proves the job's secret", ok)
    reg.settimeout(60)
    wid, servers = A.recv_table(reg)
    port = servers[0]
    reg.sendall(A.frame(A.control(A.C_BARRIER,
                                  A.f_varint(1, 7) + A.f_varint(2, 1))))

    # The request connection: hello, Challenge, but no proof yet.
    req, rn_i, rn_r, rproof = challenge(port, wid, 1)
    A.check("server's proof on channel 1 is made for channel 1",
            A.proof(key, True, AUTH_HELLO_REQ, wid, rn_i, rn_r) == rproof)
    # An answers connection, its proofs right, for a request connection
    # that has not authenticated: refused.
    s, n_i, n_r, _ = challenge(port, wid, 2)
    finish(s, AUTH_HELLO_ANS, wid, n_i, n_r)
    A.check("answers connection before its request connection "
            "authenticated: closed", A.closed_by_peer(s))
    s.close()
    finish(req, AUTH_HELLO_REQ, wid, rn_i, rn_r)
    expect_ready(req, 1, "request connection")

    # Channel 2 opened with the proof of channel 0 (kind 2).
    s, n_i, n_r, sproof = challenge(port, wid, 2)
    A.check("server's proof on channel 2 is not channel 0's",
            A.proof(key, True, A.AUTH_HELLO, wid, n_i, n_r) != sproof and
            A.proof(key, True, AUTH_HELLO_ANS, wid, n_i, n_r) == sproof)
    finish(s, A.AUTH_HELLO, wid, n_i, n_r)
    A.check("answers hello proved as channel 0: closed", A.closed_by_peer(s))
    s.close()
    # Channel 2 opened with the proof of channel 1.
    s, n_i, n_r, _ = challenge(port, wid, 2)
    finish(s, AUTH_HELLO_REQ, wid, n_i, n_r)
    A.check("answers hello proved as channel 1: closed", A.closed_by_peer(s))
    s.close()
    # No such channel.
    A.expect_closed("hello opening channel 7", port,
                    hello(wid, os.urandom(32), 7))

    ans, n_i, n_r, _ = challenge(port, wid, 2)
    finish(ans, AUTH_HELLO_ANS, wid, n_i, n_r)
    expect_ready(ans, 2, "answers connection")
    s, n_i, n_r, _ = challenge(port, wid, 2)
    finish(s, AUTH_HELLO_ANS, wid, n_i, n_r)
    A.check("a second answers connection: closed", A.closed_by_peer(s))
    s.close()

    # A request on the request connection is answered on the other.
    n = 4096
    req.sendall(A.hdr(A.INIT, key=5, total=n, span=n, length=n, flags=A.F32,
                      sender=wid, req=1) + b"\x01" * n)
    ans.settimeout(30)
    st = A.recv_status(ans, "init on the request connection")
    A.check("init answered on the answers connection (status %d)" % st,
            st == 0)
    A.check("nothing comes on the request connection", nothing_for(req, 1))

    # Data on the answers connection: the server drops the pair.
    ans.sendall(A.hdr(A.PUSH, key=5, total=n, span=n, length=n, flags=A.F32,
                      sender=wid, step=1, req=2) + b"\x01" * n)
    A.check("push on the answers connection: closed", A.closed_by_peer(ans))
    A.check("... and its request connection with it", A.closed_by_peer(req))
    reg.close()
    if A.failures:
        print("%d checks failed: %s" % (len(A.failures),
                                        ", ".join(A.failures)))
        sys.exit(1)


if __name__ == "__main__":
    main()
