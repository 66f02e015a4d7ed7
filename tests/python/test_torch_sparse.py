"""psched.torch with nn.Embedding(sparse=True) (tests/integration/
test_rows_torch.sh): two workers (psched.launch, 2 servers) train an
embedding with DistributedOptimizer(SGD) on different batches; only the
touched rows travel (row-sparse keys); after every step each worker's
table equals a one-process reference fed the averaged dense gradient,
and rows nobody touched never move.
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


def worker():
    import psched.torch as pst
    pst.init()
    n, rank = pst.size(), pst.rank()
    torch.manual_seed(0)
    emb = torch.nn.Embedding(R, W, sparse=True)
    ref = emb.weight.detach().clone().double()
    opt = pst.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=LR),
                                   named_parameters=emb.named_parameters())
    pst.broadcast_parameters(emb.state_dict(), root_rank=0)
    ref = emb.weight.detach().clone().double()
    coef = torch.arange(1, W + 1, dtype=torch.float32)
    for step in range(1, 4):
        opt.zero_grad()
        loss = (emb(batch(rank, step)) * coef * (rank + 1)).sum()
        loss.backward()
        assert emb.weight.grad.is_sparse
        opt.step()
        g = torch.zeros(R, W, dtype=torch.float64)
        for r in range(n):
            g.index_add_(0, batch(r, step),
                         (coef * (r + 1)).double().expand(12, W))
        ref -= LR * g / n
        assert torch.allclose(emb.weight.detach().double(), ref,
                              atol=1e-5), "step %d" % step
    untouched = emb.weight.detach()[R // 2:]
    torch.manual_seed(0)
    assert torch.equal(untouched,
                       torch.nn.Embedding(R, W).weight.detach()[R // 2:])
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
