"""Sparse gradients of psched.torch (``nn.Embedding(sparse=True)``):
only the rows a backward pass touched cross the network, through a
row-sparse key (docs/pytorch.md "Sparse embeddings").

One step of a parameter with a sparse gradient: push its touched rows
(summed by the servers per step), sum a mask of one float per row over
the workers (1/width of the table's bytes) to learn which rows any
worker touched, then row_sparse_pull those rows: every worker gets the
same averaged sparse gradient and keeps its replica in step.
"""
import numpy as np
import torch

from ..rowsparse import RowSparse


def _keys(c, name, p, dtype):
    """Declare (collectively, on first use) the row key and the mask key
    of parameter @name."""
    rec = c.keys.get(("s", name))
    shape = (int(p.shape[0]), int(np.prod(p.shape[1:])) if p.dim() > 1
             else 1)
    if rec is None:
        key = "psched.torch/s/" + name
        c.kv.init(key, RowSparse.zeros(shape, dtype))
        c.kv.init(key + "/mask", np.zeros(shape[0], np.float32))
        rec = c.keys[("s", name)] = [key, shape, dtype, None]
    return rec[0], shape


def push_pull(c, name, p, grad, average=True):
    """The workers' summed (averaged) sparse gradient @grad of @p, as a
    sparse COO tensor of @p's shape holding the rows any worker touched.
    Blocks."""
    if c.kv.type == "local":
        return grad
    g = grad.detach().coalesce()
    if g.dtype not in (torch.float32, torch.float64):
        raise ValueError("sparse gradient of %r: dtype %s is not supported "
                         "(float32, float64)" % (name, g.dtype))
    dtype = np.float32 if g.dtype == torch.float32 else np.float64
    key, shape = _keys(c, name, p, dtype)
    idx = g.indices()[0].cpu().numpy().astype(np.int64)
    vals = g.values().cpu().contiguous().numpy().reshape(idx.size, shape[1])
    c.kv.push(key, RowSparse(idx, vals, shape))
    mask = np.zeros(shape[0], np.float32)
    mask[idx] = 1
    c.kv.pushpull(key + "/mask", mask)
    rows = np.flatnonzero(mask)
    out = np.empty((rows.size, shape[1]), dtype)
    c.kv.row_sparse_pull(key, out=out, row_ids=rows)
    if average and c.size > 1:
        out /= c.size
    return torch.sparse_coo_tensor(
        torch.from_numpy(rows).unsqueeze(0),
        torch.from_numpy(out).reshape((rows.size,) + tuple(p.shape[1:])),
        tuple(p.shape)).to(grad.device)
