"""psched.torch with nn.Embedding(sparse=True) (tests/integration/
test_rows_torch.sh): two workers (psched.launch, 2 servers) train an
embedding and a dense bias with DistributedOptimizer(SGD) on different
batches; only the touched rows travel (row-sparse keys); after every
step each worker's table and bias equal a one-process reference fed the
averaged dense gradient, and rows nobody touched never move.  In the
first step one worker does not touch the table (its gradient is None):
the workers still agree that it is sparse, and no dense key of the
table's size is ever declared.
"""
import os
import sys

import numpy as np
import torch

R, W, LR = 300, 4, 0.5


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    idx = torch.randint(0, R // 2, (12,), generator=g)
    idx[0] = idx[1]                     # a repeated row
    return idx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(R, W, sparse=True)
        self.bias = torch.nn.Parameter(torch.zeros(W))


def worker():
    import psched.torch as pst
    pst.init()
    n, rank = pst.size(), pst.rank()
    torch.manual_seed(0)
    m = Model()
    emb = m.emb
    opt = pst.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=LR),
                                   named_parameters=m.named_parameters())
    pst.broadcast_parameters(m.state_dict(), root_rank=0)
    ref = emb.weight.detach().clone().double()
    ref_b = m.bias.detach().clone().double()
    coef = torch.arange(1, W + 1, dtype=torch.float32)

    def uses_table(r, step):
        # in the first step rank 1 does not touch the table: its
        # gradient is None there (the workers must still agree)
        return not (step == 1 and r == 1)

    for step in range(1, 4):
        opt.zero_grad()
        loss = (m.bias * coef).sum() * (rank + 1)
        if uses_table(rank, step):
            loss = loss + (emb(batch(rank, step)) * coef * (rank + 1)).sum()
        loss.backward()
        assert (emb.weight.grad is None) == (not uses_table(rank, step))
        assert emb.weight.grad is None or emb.weight.grad.is_sparse
        opt.step()
        g = torch.zeros(R, W, dtype=torch.float64)
        gb = torch.zeros(W, dtype=torch.float64)
        for r in range(n):
            gb += (coef * (r + 1)).double()
            if uses_table(r, step):
                g.index_add_(0, batch(r, step),
                             (coef * (r + 1)).double().expand(12, W))
        ref -= LR * g / n
        ref_b -= LR * gb / n
        assert torch.allclose(emb.weight.detach().double(), ref,
                              atol=1e-5), "step %d" % step
        assert torch.allclose(m.bias.detach().double(), ref_b,
                              atol=1e-5), "bias, step %d" % step
    untouched = emb.weight.detach()[R // 2:]
    torch.manual_seed(0)
    assert torch.equal(untouched,
                       torch.nn.Embedding(R, W).weight.detach()[R // 2:])
    # the table's gradient never had a dense key (its size on the servers)
    keys = pst._ctx.keys
    assert ("t", "grad/emb.weight") not in keys, sorted(keys)
    assert ("t", "grad/bias") in keys, sorted(keys)
    pst.shutdown()
    print("torch sparse worker: ok")


def main():
    if os.environ.get("DMLC_ROLE"):
        worker()
        return 0
    import subprocess
    return subprocess.call(
        [sys.executable, "-m", "psched.launch", "-s", "2", "-w", "2", "--",
         sys.executable, os.path.abspath(__file__)])


if __name__ == "__main__":
    sys.exit(main())
