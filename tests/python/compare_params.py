#!/usr/bin/env python3
"""Compare the parameters of a distributed run with a single-process
reference run (examples/train_*.py --out files) and check that training
lowered the loss.  Usage: compare_params.py REF.npz DIST.npz RTOL ATOL"""
import sys

import numpy as np


def main():
    ref, dist = np.load(sys.argv[1]), np.load(sys.argv[2])
    rtol, atol = float(sys.argv[3]), float(sys.argv[4])
    bad = 0
    names = sorted(k for k in ref.files if k.startswith("p"))
    if not names or names != sorted(k for k in dist.files
                                    if k.startswith("p")):
        print("FAIL: parameter sets differ: %s vs %s" % (ref.files,
                                                         dist.files))
        return 1
    for k in names:
        diff = np.abs(ref[k] - dist[k])
        ok = np.allclose(dist[k], ref[k], rtol=rtol, atol=atol)
        print("%s %s: max |dist - ref| = %.3g (%s)"
              % (k, ref[k].shape, diff.max(), "ok" if ok else "FAIL"))
        bad += not ok
    for name, f in (("reference", ref), ("distributed", dist)):
        first, last = float(f["first"]), float(f["last"])
        print("%s loss %.6f -> %.6f" % (name, first, last))
        if not last < 0.5 * first:
            print("FAIL: %s loss did not go down by half" % name)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
