#!/usr/bin/env python3
"""Data-parallel PyTorch training (CPU) through psched.torch.

    python3 -m psched.launch -s 2 -w 2 -- python3 examples/train_torch.py --out dist.npz
    python3 examples/train_torch.py --reference --out ref.npz

A small MLP, the same initial weights and the same fixed synthetic data
set on every worker; each worker trains on its 1/W of every global batch.

By default psched.torch.ServerOptimizer keeps the parameters on the
servers and runs SGD there (momentum, weight decay, the gradients
averaged): each gradient leaves from its autograd hook as backward makes
it, front layers first, and each layer's forward waits for its new
weights just before it runs.  --worker-side uses
psched.torch.DistributedOptimizer around torch.optim.SGD instead.

--reference trains the same model in one process on the whole batches
with torch.optim.SGD; the parameters must agree.  Rank 0 (or the
reference) writes the parameters and the full-data loss before and after
training to --out.
"""
import argparse
import sys

import numpy as np
import torch
from torch import nn

D, H, C = 20, 32, 4
NDATA = 512


def dataset():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(NDATA, D, generator=g)
    teacher = torch.randn(D, C, generator=g)
    y = torch.argmax(x @ teacher + 0.3 * torch.randn(NDATA, C, generator=g),
                     1)
    return x, y


def make_model():
    torch.manual_seed(42)
    return nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H),
                         nn.Tanh(), nn.Linear(H, C))


def batch_rows(step, batch):
    start = (step * batch) % NDATA
    return torch.arange(start, start + batch) % NDATA


def full_loss(model, x, y):
    with torch.no_grad():
        return float(nn.functional.cross_entropy(model(x), y))


def train_reference(a, x, y):
    model = make_model()
    first = full_loss(model, x, y)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.wd)
    for step in range(a.steps):
        rows = batch_rows(step, a.batch)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
        opt.step()
    return model, first, full_loss(model, x, y)


def train_dist(a, x, y):
    import psched.torch as pst

    torch.set_num_threads(1)
    pst.init(a.kvstore)
    rank, nw = pst.rank(), pst.size()
    if a.batch % nw:
        sys.exit("--batch %d is not a multiple of %d workers" % (a.batch, nw))
    model = make_model()
    first = full_loss(model, x, y)
    if a.worker_side:  # torch.optim.SGD on every worker, averaged grads
        opt = pst.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=a.lr,
                            momentum=a.momentum, weight_decay=a.wd),
            named_parameters=model.named_parameters())
    else:              # SGD on the servers (rescale_grad = 1/workers)
        opt = pst.ServerOptimizer(model, "sgd", learning_rate=a.lr,
                                  momentum=a.momentum, wd=a.wd)
    share = a.batch // nw
    for step in range(a.steps):
        rows = batch_rows(step, a.batch)[rank * share:(rank + 1) * share]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[rows]), y[rows])
        loss.backward()
        opt.step()
        if a.verbose:
            print("rank %d step %d loss %.5f" % (rank, step, float(loss)))
    if not a.worker_side:
        opt.synchronize()  # the last step's weights, for full_loss
    last = full_loss(model, x, y)
    pst.shutdown()
    return model, first, last, rank


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--kvstore", default="dist_sync")
    ap.add_argument("--reference", action="store_true",
                    help="train in this process with torch.optim.SGD")
    ap.add_argument("--worker-side", action="store_true",
                    help="DistributedOptimizer (torch.optim.SGD on the "
                         "workers) instead of SGD on the servers")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--out", help="write parameters and losses (.npz)")
    a = ap.parse_args()
    x, y = dataset()
    if a.reference:
        torch.set_num_threads(1)
        model, first, last = train_reference(a, x, y)
        rank = 0
    else:
        model, first, last, rank = train_dist(a, x, y)
    if rank == 0:
        print("loss %.6f -> %.6f after %d steps" % (first, last, a.steps))
        if a.out:
            np.savez(a.out, first=first, last=last,
                     **{"p%d" % i: p.detach().numpy()
                        for i, p in enumerate(model.parameters())})


if __name__ == "__main__":
    main()
