#!/usr/bin/env python3
"""Round-trip time of KVStore.pushpull from Python (numpy, zero-copy), per
size, median of --iters after --warmup.  Run under the launcher:

    python3 -m psched.launch -s 1 -w 1 -- python3 examples/bench_kvstore.py
"""
import argparse
import time

import numpy as np

import psched


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,1048576,16777216",
                    help="bytes per key, comma separated")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    kv = psched.KVStore("dist_sync")
    for i, size in enumerate(int(x) for x in a.sizes.split(",")):
        v = np.ones(size // 4, np.float32)
        kv.init(i, v)
        times = []
        for it in range(a.warmup + a.iters):
            t = time.perf_counter()
            kv.pushpull(i, v)
            if it >= a.warmup:
                times.append(time.perf_counter() - t)
        med = float(np.median(times))
        if kv.rank == 0:
            print("%10d bytes  pushpull median %9.1f us  %7.2f Gbit/s"
                  % (size, med * 1e6, size * 8 / med / 1e9), flush=True)
    kv.close()


if __name__ == "__main__":
    main()
