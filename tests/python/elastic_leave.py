"""A dist_sync worker of test_elastic.sh: rank 2 leaves after LEAVE steps
(kv.leave(), or psched.torch.join() with --torch); every step's pulled
sum must be exactly the sum over that step's members, known here by
construction: every worker before the leave, ranks 0 and 1 after."""
import sys

import numpy as np

import psched

leave, steps, use_torch = int(sys.argv[1]), int(sys.argv[2]), \
    len(sys.argv) > 3 and sys.argv[3] == "--torch"
sizes = {"small": 1000, "split": 300000}  # the second spans both servers


def members(step, nw):
    return range(nw) if step <= leave else [0, 1]


def run_kv():
    kv = psched.KVStore("dist_sync")
    r, nw = kv.rank, kv.num_workers
    for name, n in sizes.items():
        kv.init(name, np.zeros(n, np.float32))
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
            if not np.array_equal(out, want):
                sys.exit("rank %d step %d key %s: got %r want %r"
                         % (r, step, name, out[:3], want[:3]))
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
