#!/usr/bin/env python3
"""Check a worker's per-chunk timeline (Chrome trace JSON from
psched_timeline_write) against the scheduling rules.

  timeline_check.py FILE credit BYTES          bytes in flight never exceed
                                               BYTES, except one chunk alone
  timeline_check.py FILE before KEY_HI KEY_LO T  once KEY_HI was queued
                                               (T: CLOCK_MONOTONIC us, when
                                               its push call returned), no
                                               chunk of KEY_LO starts until
                                               every chunk of KEY_HI has
  timeline_check.py FILE chunks KEY COUNT MAXLEN  KEY went as COUNT chunks
                                               (per step), none over MAXLEN
  timeline_check.py FILE order KEY_A KEY_B     KEY_A's first chunk starts
                                               before KEY_B's first
A chunk holds credit from its start until the server acknowledged its
bytes: its push slice in the timeline, exactly as the credit gate counts
it (a pushpull's pull answer may come later; see worker/kv_worker.c).
"""
import json
import sys


T0 = 0


def chunks(path):
    global T0
    with open(path) as f:
        doc = json.load(f)
    T0 = doc["otherData"]["t0_us"]
    per = {}
    for ev in doc["traceEvents"]:
        if ev.get("ph") != "X":
            continue
        a = ev["args"]
        ident = (ev["tid"], a["key"], a["offset"], a["step"], a["op"])
        c = per.setdefault(ident, {"key": a["key"], "bytes": a["bytes"],
                                   "start": None, "end": None})
        if ev["cat"] == "push":
            c["start"], c["end"] = ev["ts"], ev["ts"] + ev["dur"]
    out = [c for c in per.values() if c["start"] is not None]
    if not out:
        sys.exit("no push chunks in %s" % path)
    return out


def check_credit(cs, credit):
    events = []
    for c in cs:
        events.append((c["start"], 1, c))
        events.append((c["end"], 0, c))  # ends sort before starts at a tie
    events.sort(key=lambda e: (e[0], e[1]))
    inflight, n, peak = 0, 0, 0
    for _, kind, c in events:
        if kind:
            inflight += c["bytes"]
            n += 1
            if inflight > credit and n > 1:
                sys.exit("credit %d exceeded: %d bytes in %d chunks in flight"
                         % (credit, inflight, n))
            peak = max(peak, inflight)
        else:
            inflight -= c["bytes"]
            n -= 1
    print("credit ok: peak %d bytes in flight (credit %d), %d chunks"
          % (peak, credit, len(cs)))


def main():
    path, mode = sys.argv[1], sys.argv[2]
    cs = chunks(path)
    if mode == "credit":
        check_credit(cs, int(sys.argv[3]))
    elif mode == "before":
        hi, lo = int(sys.argv[3]), int(sys.argv[4])
        queued = int(sys.argv[5]) - T0
        his = sorted(c["start"] for c in cs if c["key"] == hi)
        los = sorted(c["start"] for c in cs if c["key"] == lo)
        if not his or not los:
            sys.exit("keys %d/%d missing from the timeline" % (hi, lo))
        bad = sum(1 for t in los if queued < t < his[-1])
        if bad:
            sys.exit("%d chunks of key %d started after key %d was queued "
                     "and before its last chunk" % (bad, lo, hi))
        waiting = sum(1 for t in los if t > queued)
        if not waiting:
            sys.exit("no backlog: key %d was done before key %d was queued"
                     % (lo, hi))
        print("order ok: key %d's %d chunks overtook %d queued chunks of "
              "key %d" % (hi, len(his), waiting, lo))
    elif mode == "chunks":
        key, count, maxlen = (int(x) for x in sys.argv[3:6])
        mine = [c for c in cs if c["key"] == key]
        if len(mine) != count or any(c["bytes"] > maxlen for c in mine):
            sys.exit("key %d: %d chunks (want %d), largest %d (max %d)"
                     % (key, len(mine), count,
                        max(c["bytes"] for c in mine) if mine else 0, maxlen))
        print("chunks ok: key %d in %d chunks" % (key, count))
    elif mode == "order":
        a, b = int(sys.argv[3]), int(sys.argv[4])
        fa = min(c["start"] for c in cs if c["key"] == a)
        fb = min(c["start"] for c in cs if c["key"] == b)
        if fa > fb:
            sys.exit("key %d started after key %d" % (a, b))
        print("arrival order ok: key %d before key %d" % (a, b))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
