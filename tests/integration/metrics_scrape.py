#!/usr/bin/env python3
"""Scrapers that misbehave, for test_metrics.sh: PORT MODE.

bad   requests that are not HTTP, too long, cut off, or left unread;
      each must get 400/404/405 or be dropped, never hang the port
slow  a client that sends nothing, one that sends a byte a second, one
      that never reads a big answer (tiny receive buffer); run in the
      background while the test scrapes
many  N clients at once (default 40), each must get a 200 with a whole
      exposition
Exit 0, or 1 with the reason on stderr."""
import socket
import sys
import threading
import time

HOST = "127.0.0.1"


def talk(port, data, timeout=10.0, read=True):
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        if data:
            s.sendall(data)
        if not read:
            return b""
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def status(ans):
    if not ans.startswith(b"HTTP/1.1 "):
        return None
    return int(ans[9:12])


def fail(msg):
    print("metrics_scrape: " + msg, file=sys.stderr)
    sys.exit(1)


def bad(port):
    cases = [
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n", 400),
        (b"GET /metrics HTTP/1.1 extra\r\n\r\n", 400),
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405),
        (b"GET /admin HTTP/1.1\r\n\r\n", 404),
        (b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n", 400),
        (b"G" * 9000, 400),
    ]
    for req, want in cases:
        got = status(talk(port, req))
        if got != want:
            fail("bad request %r...: status %s, wanted %d" % (req[:30], got, want))
    # Cut off, or never read: the port must answer the next one.
    talk(port, b"GET /metr", read=False)
    talk(port, b"GET /metrics HTTP/1.1\r\n\r\n", read=False)
    if status(talk(port, b"GET /metrics HTTP/1.1\r\n\r\n")) != 200:
        fail("no 200 after the cut-off clients")


def slow(port, seconds):
    silent = socket.create_connection((HOST, port))
    dribble = socket.create_connection((HOST, port))
    sink = socket.socket()
    sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sink.connect((HOST, port))
    sink.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
    end = time.time() + seconds
    req = b"GET /metrics HTTP/1.1\r\n\r\n"
    i = 0
    while time.time() < end:
        try:
            if i < len(req):
                dribble.send(req[i:i + 1])
                i += 1
        except OSError:
            pass
        time.sleep(1)
    for s in (silent, dribble, sink):
        s.close()


def many(port, n):
    results = []

    def one():
        try:
            results.append(talk(port, b"GET /metrics HTTP/1.0\r\n\r\n", timeout=60))
        except OSError as e:
            results.append(repr(e).encode())

    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in results:
        if status(r) != 200 or b"\npsched_job_up 1\n" not in r:
            fail("one of %d scrapers got %r" % (n, r[:80]))


def main():
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "bad":
        bad(port)
    elif mode == "slow":
        slow(port, float(sys.argv[3]) if len(sys.argv) > 3 else 6)
    elif mode == "many":
        many(port, int(sys.argv[3]) if len(sys.argv) > 3 else 40)
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
