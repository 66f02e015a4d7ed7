"""A dist_sync worker of test_elastic.sh: rank 2 leaves after LEAVE steps
(kv.leave(), or psched.torch.join() with --torch); every step's pulled
sum must be exactly the sum over that step's members, known here by
construction: every worker before the leave, ranks 0 and 1 after.  The
KVStore job sums dense keys, a key list and a row-sparse table."""
import sys

import numpy as np

import psched
from psched import RowSparse
from psched.keylist import pushpull_keys

leave, steps, use_torch = int(sys.argv[1]), int(sys.argv[2]), \
    len(sys.argv) > 3 and sys.argv[3] == "--torch"
sizes = {"small": 1000, "split": 300000}  # the second spans both servers


def members(step, nw):
    return range(nw) if step <= leave else [0, 1]


# key-list keys spread over the key space (both servers own some)
KL = [(2**64 - 1) // 50 * u + 11 for u in range(50)]
ROWS, WIDTH = 64, 3


def check(r, step, what, got, want):
    if not np.array_equal(got, want):
        sys.exit("rank %d step %d %s: got %r want %r"
                 % (r, step, what, np.asarray(got).ravel()[:3],
                    np.asarray(want).ravel()[:3]))


def other_families(kv, r, step, nw):
    """A key-list pushpull and a row-sparse push + pull of this step
    (a worker leaves after the highest step it pushed of any key)."""
    m = list(members(step, nw))
    got = pushpull_keys(kv, KL, [float(u + (r + 1) * step)
                                 for u in range(len(KL))])
    check(r, step, "key list", np.asarray(got, np.float32),
          np.array([sum(float(u + (x + 1) * step) for x in m)
                    for u in range(len(KL))], np.float32))
    # The table's init was a step of it (every worker takes it): its
    # pushes start at step 2, so that its step count is every key's.
    if step == 1:
        return
    ids = np.array([step % ROWS, (step + 5) % ROWS], np.int64)
    kv.push("emb", RowSparse(ids, np.full((2, WIDTH), float(r + 1),
                                          np.float32), (ROWS, WIDTH)))
    out = np.empty((2, WIDTH), np.float32)
    kv.row_sparse_pull("emb", out=out, row_ids=ids)
    want = np.full((2, WIDTH), float(sum(x + 1 for x in m)), np.float32)
    check(r, step, "row-sparse rows", out, want)


def run_kv():
    kv = psched.KVStore("dist_sync")
    r, nw = kv.rank, kv.num_workers
    for name, n in sizes.items():
        kv.init(name, np.zeros(n, np.float32))
    kv.init("emb", RowSparse.zeros((ROWS, WIDTH)))
    for step in range(1, steps + 1):
        if r == 2 and step > leave:
            kv.leave()
            print("rank %d left after %d steps" % (r, leave))
            break
        for name, n in sizes.items():
            val = np.arange(n, dtype=np.float32) % 7 + (r + 1) * step
            out = np.empty(n, np.float32)
            kv.pushpull(name, val, out=out)
            want = sum(np.arange(n, dtype=np.float32) % 7 + (m + 1) * step
                       for m in members(step, nw))
            check(r, step, "key " + name, out, want)
        other_families(kv, r, step, nw)
    else:
        print("rank %d verified %d steps" % (r, steps))
    kv.close()


def run_torch():
    import torch
    import psched.torch as pt
    pt.init()
    r, nw = pt.rank(), pt.size()
    for step in range(1, steps + 1):
        if r == 2 and step > leave:
            pt.join()
            print("rank %d left after %d steps" % (r, leave))
            break
        t = torch.full((5000,), float((r + 1) * step))
        got = pt.push_pull(t, average=True, name="g")
        m = list(members(step, nw))
        want = sum((x + 1) * step for x in m) / len(m)
        if not torch.equal(got, torch.full((5000,), float(want))):
            sys.exit("rank %d step %d: average %r want %r"
                     % (r, step, got[0].item(), want))
    else:
        print("rank %d verified %d steps" % (r, steps))
    pt.shutdown()


run_torch() if use_torch else run_kv()
