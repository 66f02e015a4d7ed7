# SPDX-License-Identifier: MIT
"""Device buffers through the Python binding (KVStore.issue_device), run
by tests/integration/test_python_gpu.sh as each worker of a dist_sync job
(or with "local" as one process).  Without a usable CUDA device the call
raises PSchedError with code -ENODEV and the reason, and the same store's
host pushpull stays exact; bad arguments are refused with -EINVAL.  With a
GPU and torch, device pushpull equals host pushpull."""
import sys

import numpy as np

import psched
from psched.kvstore import PSchedError, cuda_check

ENODEV, EINVAL = -19, -22


def expect_error(code, text, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except PSchedError as e:
        assert e.code == code, (e.code, str(e))
        assert text in str(e), str(e)
        return str(e)
    raise AssertionError("no error raised, want %d %r" % (code, text))


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "dist_sync"
    kv = psched.KVStore(kind)
    n = 1000
    kv.init("w", np.zeros(n, np.float32))
    buf = np.ones(n, np.float32)
    ptr = buf.ctypes.data
    why = cuda_check(0)
    expect_error(EINVAL, "op 'send'", kv.issue_device, "send", ["w"],
                 [ptr], [buf.nbytes], "float32", 0)
    expect_error(EINVAL, "differ in length", kv.issue_device, "push",
                 ["w"], [ptr, ptr], [buf.nbytes], np.float32, 0)
    if kind == "local":
        msg = expect_error(EINVAL, "host buffers only", kv.issue_device,
                           "push", ["w"], [ptr], [buf.nbytes], "float32", 0)
        print("local refused:", msg)
        return 0
    if why is not None:
        msg = expect_error(ENODEV, why.split(":")[0], kv.issue_device,
                           "pushpull", ["w"], [ptr], [buf.nbytes],
                           "float32", 0)
        print("refused as expected:", msg)
    else:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            t = torch.full((n,), float(kv.rank + 1), device="cuda:0")
            kv.issue_device("pushpull", ["w"], [t.data_ptr()],
                            [t.numel() * t.element_size()], "float32", 0)
            kv.wait("w")
            want = sum(r + 1 for r in range(kv.num_workers))
            assert torch.all(t.cpu() == want), t[:4]
            print("device pushpull exact on", torch.cuda.get_device_name(0))
    # Host tensors are unaffected (a new key: "w" has a step in flight
    # only on GPU machines).
    kv.init("h", np.zeros(n, np.float32))
    for step in range(3):
        v = np.arange(n, dtype=np.float32) * (kv.rank + 1) + step
        out = np.empty_like(v)
        kv.pushpull("h", v, out=out)
        want = sum(np.arange(n, dtype=np.float32) * (r + 1) + step
                   for r in range(kv.num_workers))
        assert np.array_equal(out, want), (step, out[:4], want[:4])
    # one write: the other worker prints into the same file
    sys.stdout.write("host pushpull exact, rank %d\n" % kv.rank)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
