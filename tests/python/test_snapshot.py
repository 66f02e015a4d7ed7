"""Server snapshots (docs/snapshots.md), run by
tests/integration/test_snapshot.sh.

A 2 servers x 2 workers dist_sync job trains keys under Adam on the
servers for 6 steps with PS_SNAPSHOT_STEPS=2 (snapshots at steps 2, 4
and 6, each server keeping its last two) and pulls the weights after
step 4 and at the end.  A second job of 3 servers restores the
snapshot of step 4 (other byte ranges on other servers), initialises
the keys with zeros (ignored: the snapshot's values win), pulls, runs
steps 5 and 6 and must end bit-equal to the uninterrupted job: values
and Adam's states (moments and update counts) came back.  A key the
resuming job declares with another size is refused, naming the
snapshot.

Usage: test_snapshot.py DIR (the driver); the workers read
PSCHED_TEST_PHASE (run | resume) and PSCHED_TEST_DIR.
test_snapshot.py check-format SNAPDIR OUTDIR reads the files of step 4
as the format's documentation describes them, and writes files whose
trailer is right but whose records lie (a range beyond its key, a body
shorter than its range, a states record without its name or with a
state record cut short).
"""
import hashlib
import hmac
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import psched  # noqa: E402
from psched import PSchedError, RowSparse  # noqa: E402

KEYS = [("a", 1001), ("b", 17), ("e5", 4099), ("z", 10)]
ADAM = dict(learning_rate=0.01, wd=0.01)
STEPS = 6
MID = 4
R, W = 500, 6  # the embedding table "emb": rows x width


def rows_of(step, rank):
    """The rows worker @rank pushes to "emb" at @step (duplicates too)."""
    rng = np.random.default_rng(100 * step + rank)
    ids = rng.integers(0, R, size=60)
    ids[:2] = [0, R - 1]
    return ids, rng.standard_normal((60, W)).astype(np.float32)


def grad_of(step, n, rank):
    i = np.arange(n)
    return (np.sin(i * 0.37 + step * 1.3 + rank) * 1.5 +
            0.1 * (rank + 1)).astype(np.float32)


def weights0(n):
    return (np.cos(np.arange(n) * 0.11) * 0.8).astype(np.float32)


def pull_all(kv, keys):
    out = {}
    for k, n in keys:
        o = np.zeros(n, np.float32)
        kv.pull(k, out=o)
        out["k" + k] = o
    o = np.empty((R, W), np.float32)
    kv.row_sparse_pull("emb", out=o, row_ids=np.arange(R))
    out["kemb"] = o
    return out


def init_refused(kv, key, value, what, path):
    """kv.init(key, value) must be refused naming the snapshot; the
    refusal goes to @path.  False (said why) when it was not."""
    try:
        kv.init(key, value)
        print("FAIL: %s was not refused" % what)
        return False
    except PSchedError as e:
        if "snapshot" not in str(e):
            print("FAIL: refusal does not name the snapshot: %s" % e)
            return False
        print("refused as expected: %s" % e)
        with open(path, "w") as f:
            f.write(str(e))
        return True


def worker():
    phase = os.environ["PSCHED_TEST_PHASE"]
    mode = os.environ["PSCHED_TEST_MODE"]
    tmp = os.environ["PSCHED_TEST_DIR"]
    kv = psched.KVStore("dist_sync")
    rank = kv.rank
    kv.set_optimizer(psched.optimizer.create("adam", **ADAM))
    keys = KEYS
    first = 0
    if phase == "resume":
        first = MID
        keys = [kn for kn in KEYS if kn[0] != "z"]
        # "z" was 10 floats when the snapshot was taken.
        if not init_refused(kv, "z", np.zeros(12, np.float32),
                            "a key of another size", os.path.join(
                                tmp, "%s.refused.%d" % (mode, rank))):
            return 1
    if phase == "resume" and mode == "demand":
        # So was the table "embz" ((R, W) rows).
        if not init_refused(kv, "embz", RowSparse.zeros((R, W + 1)),
                            "a table of another shape", os.path.join(
                                tmp, "refused_rows.%d" % rank)):
            return 1
    else:
        kv.init("embz", RowSparse.zeros((R, W)))
    kv.init("emb", RowSparse.zeros((R, W)))
    for k, n in keys:
        kv.init(k, np.zeros(n, np.float32) if phase == "resume"
                else weights0(n))
    if phase == "resume" and rank == 0:
        np.savez(os.path.join(tmp, "%s.restored.npz" % mode),
                 **pull_all(kv, keys))
    for s in range(first, STEPS):
        for k, n in keys:
            kv.push(k, grad_of(s, n, rank))
        ids, rows = rows_of(s, rank)
        kv.push("emb", RowSparse(ids, rows, (R, W)))
        if phase == "run" and s + 1 == MID:
            mid = pull_all(kv, keys)
            if rank == 0:
                np.savez(os.path.join(tmp, "%s.mid.npz" % mode), **mid)
            if mode == "demand":
                kv.snapshot(MID)
    res = pull_all(kv, keys)
    if rank == 0:
        np.savez(os.path.join(tmp, "%s.%s.npz" % (mode, phase)), **res)
    kv.close()
    return 0


def launch(env, servers, workers, log):
    cmd = [sys.executable, "-m", "psched.launch", "-s", str(servers), "-w",
           str(workers), "--timeout", "240", "--", sys.executable,
           __file__]
    with open(log, "w") as f:
        return subprocess.call(cmd, env=env, stdout=f,
                               stderr=subprocess.STDOUT)


def same(a, b, keys, what):
    ok = True
    for k in keys:
        if not np.array_equal(a[k], b[k]):
            print("FAIL %s %s: differs by %g" % (
                what, k, np.max(np.abs(a[k] - b[k]))))
            ok = False
    return ok


def one_mode(tmp, mode):
    """Run, then resume from step 4 on 3 servers; 0 when the resumed job
    ended where the uninterrupted one did."""
    snap = os.path.join(tmp, mode)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"),
               PSCHED_TEST_DIR=tmp, PSCHED_TEST_MODE=mode, PS_VERBOSE="1")
    env.setdefault("PS_REQUEST_TIMEOUT", "60")
    for v in ("PS_JOB_TOKEN", "PS_JOB_TOKEN_FILE", "PS_RESTORE",
              "PS_SNAPSHOT_STEPS"):
        env.pop(v, None)
    env.update(PSCHED_TEST_PHASE="run", PS_SNAPSHOT_DIR=snap,
               PS_PARTITION_BYTES="1024")
    if mode == "periodic":
        env["PS_SNAPSHOT_STEPS"] = "2"
    rc = launch(env, 2, 2, os.path.join(tmp, mode + ".run.log"))
    print("== %s: run, 2 servers x 2 workers: exit %d" % (mode, rc),
          flush=True)
    if rc:
        return 1
    have = sorted(os.listdir(snap))
    print("%s: snapshot directory: %s" % (mode, " ".join(have)))
    want = (["job.token", "step-4", "step-6"] if mode == "periodic"
            else ["job.token", "step-4"])
    if have != want:
        print("FAIL: expected %s (periodic: step-2 removed)" % want)
        return 1
    for st in want[1:]:
        files = sorted(os.listdir(os.path.join(snap, st)))
        if files != ["server-0-of-2.psnap", "server-1-of-2.psnap"]:
            print("FAIL: %s holds %s" % (st, files))
            return 1
    # Resume from step 4 on 3 servers, another partition size; the
    # launcher finds the job's secret beside the snapshots.
    env.pop("PS_SNAPSHOT_DIR")
    env.pop("PS_SNAPSHOT_STEPS", None)
    env.update(PSCHED_TEST_PHASE="resume",
               PS_RESTORE=os.path.join(snap, "step-4"),
               PS_PARTITION_BYTES="300")
    rc = launch(env, 3, 2, os.path.join(tmp, mode + ".resume.log"))
    print("== %s: resume from step 4 on 3 servers: exit %d" % (mode, rc),
          flush=True)
    if rc:
        return 1
    keys = ["k" + k for k, _ in KEYS if k != "z"]
    if mode == "demand":
        keys.append("kemb")
    got = {p: np.load(os.path.join(tmp, "%s.%s.npz" % (mode, p)))
           for p in ("mid", "restored", "run", "resume")}
    ok = same(got["restored"], got["mid"], keys,
              "%s: restored weights vs step 4" % mode)
    ok = same(got["resume"], got["run"], keys,
              "%s: resumed end vs uninterrupted end" % mode) and ok
    if not any(not np.array_equal(got["mid"][k], got["run"][k])
               for k in keys):
        print("FAIL: steps 5 and 6 did not change the weights")
        ok = False
    print("%s snapshot restore: %s" % (mode, "ok" if ok else "FAIL"))
    return 0 if ok else 1


def driver(tmp):
    return one_mode(tmp, "periodic") or one_mode(tmp, "demand")


def job_secret(snapdir):
    with open(os.path.join(snapdir, "job.token"), "rb") as f:
        return f.read().rstrip(b"\n")


def mac_of(secret, body):
    return hmac.new(secret, hashlib.sha256(body).digest(),
                    hashlib.sha256).digest()


def parse_file(path, secret):
    """Read a snapshot file as docs/snapshots.md describes it: the
    header, the records, the trailer.  Returns (step, server, servers,
    [(kind, body)])."""
    data = open(path, "rb").read()
    assert data[:8] == b"PSCHSNAP", path
    ver, hlen, step, server, nserv = struct.unpack_from("<IIQII", data, 8)
    assert (ver, hlen) == (1, 64), (ver, hlen)
    tag = hmac.new(secret, b"psched snapshot job", hashlib.sha256).digest()
    assert data[32:48] == tag[:16], "job tag"
    nrec = struct.unpack_from("<Q", data, 48)[0]
    assert data[-32:] == mac_of(secret, data[:-32]), "trailer"
    recs, pos = [], 64
    while pos < len(data) - 32:
        kind, _, blen = struct.unpack_from("<IIQ", data, pos)
        recs.append((kind, data[pos + 16:pos + 16 + blen]))
        pos += 16 + blen
    assert pos == len(data) - 32 and len(recs) == nrec
    return step, server, nserv, recs


def write_file(path, secret, step, server, nserv, recs):
    tag = hmac.new(secret, b"psched snapshot job", hashlib.sha256).digest()
    out = b"PSCHSNAP" + struct.pack("<IIQII", 1, 64, step, server, nserv)
    out += tag[:16] + struct.pack("<QQ", len(recs), 0)
    for kind, body in recs:
        out += struct.pack("<IIQ", kind, 0, len(body)) + body
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(out + mac_of(secret, out))


def check_format(snapdir, outdir):
    """The files psched wrote, read by this reader of the documented
    format; then files this writer makes, with a valid trailer but
    records that lie, for ps-server to refuse."""
    secret = job_secret(snapdir)
    kinds = {}
    for i in range(2):
        step, server, nserv, recs = parse_file(os.path.join(
            snapdir, "step-4", "server-%d-of-2.psnap" % i), secret)
        assert (step, server, nserv) == (4, i, 2), (step, server, nserv)
        for kind, body in recs:
            kinds[kind] = kinds.get(kind, 0) + 1
            if kind == 1:
                key, total, off, ln, ver = struct.unpack_from("<QQQQQ",
                                                              body)
                assert ver == 4 and off + ln <= total
                assert len(body) == 48 + ln
    # The 4 keys' ranges, each with its Adam states, and the two
    # tables' rows on each server.
    assert kinds.get(1, 0) >= 4 and kinds.get(2) == kinds[1], kinds
    assert kinds.get(3) == 4, kinds
    print("format: step-4 read by the documented layout: %s" % kinds)
    dense = struct.pack("<QQQQQB7x", 7, 40, 32, 16, 1, 0) + bytes(16)
    write_file(os.path.join(outdir, "lies", "step-1",
                            "server-0-of-1.psnap"), secret, 1, 0, 1,
               [(1, dense)])
    short = struct.pack("<QQQQQB7x", 7, 40, 0, 40, 1, 0) + bytes(8)
    write_file(os.path.join(outdir, "short", "step-1",
                            "server-0-of-1.psnap"), secret, 1, 0, 1,
               [(1, short)])
    write_file(os.path.join(outdir, "states", "step-1",
                            "server-0-of-1.psnap"), secret, 1, 0, 1,
               [(2, b"adam")])
    write_file(os.path.join(outdir, "states2", "step-1",
                            "server-0-of-1.psnap"), secret, 1, 0, 1,
               [(2, b"adam".ljust(16, b"\0") + struct.pack(
                   "<QQQQBBBBI", 7, 40, 0, 40, 0, 2, 0, 4, 0) +
                 bytes(12))])
    print("format: crafted files written")
    return 0


def main():
    if os.environ.get("DMLC_ROLE") == "worker":
        return worker()
    if sys.argv[1:2] == ["check-format"]:
        return check_format(sys.argv[2], sys.argv[3])
    return driver(sys.argv[1])


if __name__ == "__main__":
    sys.exit(main())
