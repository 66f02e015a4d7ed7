#!/usr/bin/env python3
"""Data-parallel training of a small MLP through psched, numpy only.

    python3 -m psched.launch -s 2 -w 2 -- python3 examples/train_numpy.py --out dist.npz
    python3 examples/train_numpy.py --reference --out ref.npz

Every step each of the W workers takes its 1/W of the step's global batch
(a fixed synthetic data set, the same on every worker), runs forward and
backward by hand, and hands each parameter's gradient to the KVStore as
soon as backward produces it (pushpull, priority by layer order: the first
layer is the most urgent, it is needed first by the next forward).  The
servers sum the W gradients and apply SGD (momentum, weight decay,
rescale_grad = 1/W, so the sum becomes the global batch's mean); the new
parameters land in place, and the next forward waits for each layer's
parameters just before it uses them.

--reference trains the same model in one process on the whole batches
with a plain numpy SGD (no psched); the parameters must agree.  Rank 0
(or the reference) writes the parameters and the full-data loss before
and after training to --out.
"""
import argparse
import sys

import numpy as np

D, H, C = 20, 32, 4         # input, hidden, classes
NDATA = 512


def dataset():
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((NDATA, D))
    teacher = rng.standard_normal((D, C))
    y = np.argmax(x @ teacher + 0.3 * rng.standard_normal((NDATA, C)), 1)
    return x, y


def init_params():
    rng = np.random.default_rng(42)
    return [rng.standard_normal((D, H)) / np.sqrt(D), np.zeros(H),
            rng.standard_normal((H, C)) / np.sqrt(H), np.zeros(C)]


# parameter i belongs to layer LAYER[i]
LAYER = [0, 0, 1, 1]


def forward(p, x):
    h = np.tanh(x @ p[0] + p[1])
    z = h @ p[2] + p[3]
    z = z - z.max(1, keepdims=True)
    prob = np.exp(z)
    prob /= prob.sum(1, keepdims=True)
    return h, prob


def loss_of(p, x, y):
    _, prob = forward(p, x)
    return float(-np.mean(np.log(prob[np.arange(len(y)), y])))


def backward(p, x, y, h, prob, emit):
    """Mean cross-entropy gradients, last layer first; emit(i, grad) is
    called as soon as parameter i's gradient exists (and p[i] is no longer
    needed by the rest of backward)."""
    n = len(y)
    dz = prob.copy()
    dz[np.arange(n), y] -= 1
    dz /= n
    g3, g2 = dz.sum(0), h.T @ dz
    dh = (dz @ p[2].T) * (1 - h * h)   # uses p[2]: before emitting it
    emit(3, g3)
    emit(2, g2)
    emit(1, dh.sum(0))
    emit(0, x.T @ dh)


def batch_rows(step, batch):
    start = (step * batch) % NDATA
    return np.arange(start, start + batch) % NDATA


def train_reference(a, x, y):
    p = init_params()
    first = loss_of(p, x, y)
    mom = [np.zeros_like(q) for q in p]
    for step in range(a.steps):
        rows = batch_rows(step, a.batch)
        h, prob = forward(p, x[rows])
        grads = {}
        backward(p, x[rows], y[rows], h, prob,
                 lambda i, g: grads.__setitem__(i, g))
        for i in range(len(p)):
            # Textbook momentum SGD (as torch.optim.SGD).
            mom[i] = a.momentum * mom[i] + grads[i] + a.wd * p[i]
            p[i] = p[i] - a.lr * mom[i]
    return p, first, loss_of(p, x, y)


def train_dist(a, x, y):
    import psched

    kv = psched.KVStore(a.kvstore)
    rank, nw = kv.rank, kv.num_workers
    if a.batch % nw:
        sys.exit("--batch %d is not a multiple of %d workers" % (a.batch, nw))
    p = init_params()
    first = loss_of(p, x, y)
    kv.init(list(range(len(p))), p)
    for i in range(len(p)):          # rank 0's values, everywhere
        kv.pull(i, out=p[i])
    kv.set_optimizer(psched.optimizer.SGD(
        learning_rate=a.lr, momentum=a.momentum, wd=a.wd,
        rescale_grad=1.0 / nw))
    share = a.batch // nw
    keep = []

    def emit(i, g):
        keep.append(g)  # must stay untouched until its request is done
        kv.pushpull(i, g, out=p[i], priority=-LAYER[i], block=False)

    for step in range(a.steps):
        rows = batch_rows(step, a.batch)[rank * share:(rank + 1) * share]
        xb, yb = x[rows], y[rows]
        if step:  # first layer's parameters, just before their use
            kv.wait([i for i in range(len(p)) if LAYER[i] == 0])
        z1 = xb @ p[0] + p[1]
        if step:
            kv.wait([i for i in range(len(p)) if LAYER[i] == 1])
        h = np.tanh(z1)
        z = h @ p[2] + p[3]
        z = z - z.max(1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(1, keepdims=True)
        keep.clear()
        backward(p, xb, yb, h, prob, emit)
    kv.wait()
    last = loss_of(p, x, y)
    kv.close()
    return p, first, last, rank


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--kvstore", default="dist_sync")
    ap.add_argument("--reference", action="store_true",
                    help="train in this process without psched")
    ap.add_argument("--out", help="write parameters and losses (.npz)")
    a = ap.parse_args()
    x, y = dataset()
    if a.reference:
        p, first, last = train_reference(a, x, y)
        rank = 0
    else:
        p, first, last, rank = train_dist(a, x, y)
    if rank == 0:
        print("loss %.6f -> %.6f after %d steps" % (first, last, a.steps))
        if a.out:
            np.savez(a.out, first=first, last=last,
                     **{"p%d" % i: q for i, q in enumerate(p)})


if __name__ == "__main__":
    main()
