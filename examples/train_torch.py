#!/usr/bin/env python3
"""Data-parallel PyTorch training (CPU) through psched.

    python3 -m psched.launch -s 2 -w 2 -- python3 examples/train_torch.py --out dist.npz
    python3 examples/train_torch.py --reference --out ref.npz

A small MLP, the same initial weights and the same fixed synthetic data
set on every worker; each worker trains on its 1/W of every global batch.

- Backward: an autograd hook on every parameter hands its gradient to the
  KVStore the moment autograd produces it (pushpull, non-blocking), with
  priority by layer order (MXNet convention, larger = more urgent: the
  first layer is the most urgent, the next forward needs it first).
- The servers sum the W gradients and apply SGD (momentum, weight decay,
  rescale_grad = 1/W), and the new parameters are written straight into
  each parameter's storage (no copies: the numpy view of the tensor).
- Forward: a pre-hook on every layer waits for that layer's parameters
  just before the layer runs, so layer 2's transfer overlaps layer 1's
  compute.

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


class PSchedDataParallel:
    """Hooks a model up to a KVStore: parameter i is key i; layer order
    (module index) gives the priority."""

    def __init__(self, model, kv):
        self.kv = kv
        self.params = []   # (key, parameter, layer)
        self.held = {}     # key -> gradient tensor in flight
        layers = [m for m in model.modules()
                  if list(m.parameters(recurse=False))]
        for layer, m in enumerate(layers):
            keys = []
            for p in m.parameters(recurse=False):
                key = len(self.params)
                self.params.append((key, p, layer))
                keys.append(key)
                p.register_hook(self._grad_hook(key, p, layer))
            m.register_forward_pre_hook(self._wait_hook(keys))
        keys = [k for k, _, _ in self.params]
        kv.init(keys, [p.detach().numpy() for _, p, _ in self.params])
        # Rank 0's values everywhere, straight into the parameters.
        kv.pull(keys, out=[p.detach().numpy() for _, p, _ in self.params])

    def _grad_hook(self, key, p, layer):
        out = p.detach().numpy()  # the parameter's own storage

        def hook(grad):
            self.held[key] = grad  # alive and unchanged until done
            self.kv.pushpull(key, grad.detach().numpy(), out=out,
                             priority=-layer, block=False)
        return hook

    def _wait_hook(self, keys):
        def hook(module, inputs):
            self.kv.wait(keys)
            for k in keys:
                self.held.pop(k, None)
        return hook

    def finish(self):
        self.kv.wait()
        self.held.clear()


def train_dist(a, x, y):
    import psched

    torch.set_num_threads(1)
    kv = psched.KVStore(a.kvstore)
    rank, nw = kv.rank, kv.num_workers
    if a.batch % nw:
        sys.exit("--batch %d is not a multiple of %d workers" % (a.batch, nw))
    model = make_model()
    first = full_loss(model, x, y)
    dp = PSchedDataParallel(model, kv)
    kv.set_optimizer(psched.optimizer.SGD(
        learning_rate=a.lr, momentum=a.momentum, wd=a.wd,
        rescale_grad=1.0 / nw))
    share = a.batch // nw
    for step in range(a.steps):
        rows = batch_rows(step, a.batch)[rank * share:(rank + 1) * share]
        loss = nn.functional.cross_entropy(model(x[rows]), y[rows])
        loss.backward()
        for p in model.parameters():
            p.grad = None  # psched applied the update; nothing to keep
        if a.verbose:
            print("rank %d step %d loss %.5f" % (rank, step, float(loss)))
    dp.finish()
    last = full_loss(model, x, y)
    kv.close()
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
