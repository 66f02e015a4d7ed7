#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Independent numpy reference for the tuner's GP posterior.

Reads the cases in gp_cases.txt (fixed hyperparameters) and prints, for
each case, the log marginal likelihood and the posterior mean and variance
of the latent function at every test point:

    lml <case> <value>
    pred <case> <index> <mean> <var>

Written from the formulas, not from scheduler/tuner/gp.c: the kernel
matrix is solved with numpy.linalg.solve and the log determinant comes
from numpy.linalg.slogdet (no Cholesky).

usage: gp_ref.py CASES [OUT]   (OUT defaults to stdout)
"""
import sys

import numpy as np


def matern52(a, b, lens, signal_var):
    r = np.sqrt(np.sum(((a - b) / lens) ** 2))
    s = np.sqrt(5.0) * r
    return signal_var * (1.0 + s + 5.0 * r * r / 3.0) * np.exp(-s)


def parse(path):
    cases, cur = [], None
    with open(path) as f:
        for line in f:
            tok = line.split()
            if not tok or tok[0].startswith("#"):
                continue
            if tok[0] == "case":
                cur = {"name": tok[1], "dim": int(tok[2]),
                       "x": [], "y": [], "w": [], "t": []}
            elif tok[0] == "hyper":
                v = [float(s) for s in tok[1:]]
                d = cur["dim"]
                assert len(v) == d + 2, line
                cur["lens"] = np.array(v[:d])
                cur["signal"], cur["noise"] = v[d], v[d + 1]
            elif tok[0] == "obs":
                v = [float(s) for s in tok[1:]]
                assert len(v) == cur["dim"] + 2, line
                cur["x"].append(v[:cur["dim"]])
                cur["y"].append(v[cur["dim"]])
                cur["w"].append(v[cur["dim"] + 1])
            elif tok[0] == "test":
                v = [float(s) for s in tok[1:]]
                assert len(v) == cur["dim"], line
                cur["t"].append(v)
            elif tok[0] == "end":
                cases.append(cur)
                cur = None
            else:
                raise ValueError("bad line: " + line)
    return cases


def posterior(c):
    x = np.array(c["x"], dtype=float)
    y = np.array(c["y"], dtype=float)
    w = np.array(c["w"], dtype=float)
    n = len(y)
    # mean and population sd weighted by 1/w, as documented
    mu = np.average(y, weights=1.0 / w)
    sd = np.sqrt(np.average((y - mu) ** 2, weights=1.0 / w))
    if not sd > 1e-12 * max(1.0, abs(mu)):
        sd = 1.0
    ys = (y - mu) / sd
    k = np.array([[matern52(x[i], x[j], c["lens"], c["signal"])
                   for j in range(n)] for i in range(n)])
    k += np.diag(c["noise"] * w)
    alpha = np.linalg.solve(k, ys)
    sign, logdet = np.linalg.slogdet(k)
    assert sign > 0
    lml = -0.5 * ys @ alpha - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)
    preds = []
    for t in np.array(c["t"], dtype=float):
        ks = np.array([matern52(t, x[i], c["lens"], c["signal"])
                       for i in range(n)])
        m = mu + sd * (ks @ alpha)
        v = (c["signal"] - ks @ np.linalg.solve(k, ks)) * sd * sd
        preds.append((m, max(v, 0.0)))
    return lml, preds


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: gp_ref.py CASES [OUT]")
    out = open(sys.argv[2], "w") if len(sys.argv) == 3 else sys.stdout
    for c in parse(sys.argv[1]):
        lml, preds = posterior(c)
        out.write("lml %s %.17g\n" % (c["name"], lml))
        for i, (m, v) in enumerate(preds):
            out.write("pred %s %d %.17g %.17g\n" % (c["name"], i, m, v))
    out.close()


if __name__ == "__main__":
    main()
