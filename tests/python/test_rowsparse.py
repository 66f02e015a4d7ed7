"""Row-sparse keys from Python (docs/python.md "Row-sparse values"), run as a
dist_sync job of 2 servers x 2 workers by psched.launch
(tests/integration/test_rows_py.sh): RowSparse pushes with duplicate
ids and an empty push, row_sparse_pull into a RowSparse and into an
array, pushpulls into an array and into the RowSparse, checked against a
numpy reference of every worker's pushes; a
lazy sgd step; refusals (row id out of range, dense pull of a row key).
"""
import os
import sys

import numpy as np

import psched
from psched import RowSparse

R, W = 500, 6


def pushes(rank, step):
    """The rows worker @rank pushes at @step (ids with duplicates)."""
    rng = np.random.default_rng(1000 * step + rank)
    if rank == 1 and step == 2:
        return np.empty(0, np.int64), np.empty((0, W), np.float32)
    ids = rng.integers(0, R, size=40)
    ids[:3] = [0, R // 2, R // 2]          # both servers, a duplicate
    rows = rng.integers(-4, 5, size=(40, W)).astype(np.float32)
    return ids, rows


def step_sums(want, nw, step):
    """@want (R x W) after every worker's push of @step: each row pushed
    holds the sum of that step's pushes of it."""
    total = np.zeros((R, W), np.float32)
    hit = np.zeros(R, bool)
    for r in range(nw):
        i, x = pushes(r, step)
        np.add.at(total, i, x)
        hit[i] = True
    want[hit] = total[hit]


def worker():
    kv = psched.KVStore("dist_sync")
    nw = kv.num_workers
    kv.init("emb", RowSparse.zeros((R, W)))
    want = np.zeros((R, W), np.float32)
    for step in range(1, 4):
        ids, rows = pushes(kv.rank, step)
        kv.push("emb", RowSparse(ids, rows, (R, W)))
        step_sums(want, nw, step)
        q = np.arange(R)[::-1].copy()
        out = np.empty((R, W), np.float32)
        kv.row_sparse_pull("emb", out=out, row_ids=q)
        assert np.array_equal(out, want[q]), "step %d: rows differ" % step
        rs = RowSparse.zeros((R, W))
        kv.row_sparse_pull("emb", out=rs, row_ids=[7, 3, 3, R - 1])
        assert list(rs.ids) == [3, 7, R - 1]
        assert np.array_equal(rs.rows, want[[3, 7, R - 1]])
    # pushpull: a step's push answered with the new rows of its ids
    for step in range(4, 6):
        ids, rows = pushes(kv.rank, step)
        rs = RowSparse(ids, rows, (R, W))
        out = np.full((ids.size, W), -7, np.float32)
        if step == 4:
            got = kv.pushpull("emb", rs, out=out)
            assert got is out
        else:
            got = kv.pushpull("emb", rs).rows   # into the RowSparse
            assert got is rs.rows
        step_sums(want, nw, step)
        assert np.array_equal(got, want[ids]), "pushpull %d differs" % step
        out = np.empty((R, W), np.float32)
        kv.row_sparse_pull("emb", out=out, row_ids=np.arange(R))
        assert np.array_equal(out, want), "after pushpull %d" % step
    try:
        kv.pushpull("emb", RowSparse([1], np.ones((1, W), np.float32),
                                     (R, W)), out=np.empty((2, W)))
        raise AssertionError("a pushpull into a wrong out was accepted")
    except psched.PSchedError as e:
        assert "out must be" in str(e), e
    try:
        kv.push("emb", RowSparse([0], np.ones((1, W), np.float32), (R, W)))
        kv.row_sparse_pull("emb", out=np.empty((1, W), np.float32),
                           row_ids=[R])
        raise AssertionError("an out-of-range row id was accepted")
    except psched.PSchedError as e:
        assert "out of range" in str(e), e
    try:
        kv.pull("emb", out=np.empty((R, W), np.float32))
        raise AssertionError("a dense pull of a row-sparse key passed")
    except psched.PSchedError as e:
        assert "row-sparse" in str(e) or "never" in str(e), e
    # lazy sgd: only rows pushed move, weight decay included
    opt = psched.optimizer.SGD(learning_rate=0.5, wd=0.1)
    kv.set_optimizer(opt)
    kv.init("emb2", RowSparse.zeros((R, W)))
    w = np.zeros((R, W), np.float64)
    for step in range(1, 4):
        ids = np.array([1, 2, 2, 300]) if step != 2 else np.array([2, 9])
        g = np.full((ids.size, W), 0.25 * (kv.rank + 1), np.float32)
        kv.push("emb2", RowSparse(ids, g, (R, W)))
        gs = np.zeros((R, W))
        for r in range(nw):
            np.add.at(gs, ids, np.full((ids.size, W), 0.25 * (r + 1)))
        hit = np.unique(ids)
        w[hit] = (w[hit] - 0.5 * (gs[hit] + 0.1 * w[hit])).astype(
            np.float32)
        out = np.empty((R, W), np.float32)
        kv.row_sparse_pull("emb2", out=out, row_ids=np.arange(R))
        assert np.allclose(out, w, rtol=1e-6, atol=1e-7), \
            "sgd step %d: %s vs %s" % (step, out[[1, 2, 9, 300], 0],
                                       w[[1, 2, 9, 300], 0])
    kv.close()
    print("rowsparse worker: ok")


def main():
    if os.environ.get("DMLC_ROLE") or os.environ.get("PS_ROWS_WORKER"):
        worker()
        return 0
    import subprocess
    env = dict(os.environ, PS_ROWS_WORKER="1", PS_PARTITION_BYTES="128")
    return subprocess.call(
        [sys.executable, "-m", "psched.launch", "-s", "2", "-w", "2", "--",
         sys.executable, os.path.abspath(__file__)], env=env)


if __name__ == "__main__":
    sys.exit(main())
