"""Row-sparse values (embedding tables) for the KVStore: MXNet's
``row_sparse`` arrays in a small container, docs/python.md "Row-sparse
values".

    table = psched.RowSparse.zeros((10_000_000, 64))   # shape only
    kv.init("emb", table)                              # rows start at 0
    kv.push("emb", psched.RowSparse(ids, grads, table.shape))
    out = psched.RowSparse.zeros(table.shape)
    kv.row_sparse_pull("emb", out=out, row_ids=ids)    # out.ids, out.rows

    kv.pushpull("emb", grads_rs)        # push, then grads_rs.rows = the
                                        # updated rows of grads_rs.ids

scipy.sparse CSR matrices are taken as pushes too (their non-empty rows)
when scipy is installed.  Row-sparse pushes and pulls block until done.
"""

import numpy as np

from . import _lib


class RowSparse:
    """Rows @rows (n x width) at row ids @ids of a table of @shape
    (rows, width); the other rows are zero (or, in the KVStore, not
    touched)."""

    __slots__ = ("ids", "rows", "shape")

    def __init__(self, ids, rows, shape):
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            raise ValueError("RowSparse: shape must be (rows, width), "
                             "got %r" % (shape,))
        ids = np.ascontiguousarray(np.asarray(ids, dtype=np.int64)
                                   .reshape(-1))
        rows = np.asarray(rows)
        if rows.ndim == 1 and ids.size <= 1:
            rows = rows.reshape(ids.size, -1)
        if rows.ndim != 2 or rows.shape != (ids.size, shape[1]):
            raise ValueError(
                "RowSparse: %d row ids need rows of shape (%d, %d), got %s"
                % (ids.size, ids.size, shape[1], rows.shape))
        if ids.size and (ids.min() < 0 or ids.max() >= shape[0]):
            bad = ids[(ids < 0) | (ids >= shape[0])][0]
            raise ValueError("RowSparse: row id %d is out of range, the "
                             "table has %d rows" % (bad, shape[0]))
        self.ids = ids
        self.rows = rows
        self.shape = shape

    @classmethod
    def zeros(cls, shape, dtype=np.float32):
        """No rows: a table of @shape that is all zeros."""
        return cls(np.empty(0, np.int64),
                   np.empty((0, int(shape[1])), dtype), shape)

    @property
    def dtype(self):
        return self.rows.dtype

    def todense(self):
        """The whole table as an array (duplicate ids summed)."""
        d = np.zeros(self.shape, self.rows.dtype)
        np.add.at(d, self.ids, self.rows)
        return d

    def __repr__(self):
        return "RowSparse(%d rows of %s, dtype %s)" % (
            self.ids.size, self.shape, self.rows.dtype)


def is_row_sparse(v):
    """A RowSparse, or a scipy.sparse matrix (only if scipy is here)."""
    if isinstance(v, RowSparse):
        return True
    mod = type(v).__module__ or ""
    return mod.startswith("scipy.sparse") and hasattr(v, "tocsr")


def as_row_sparse(v):
    """@v as a RowSparse (scipy CSR/COO...: its rows with entries)."""
    if isinstance(v, RowSparse):
        return v
    csr = v.tocsr()
    ids = np.flatnonzero(np.diff(csr.indptr))
    return RowSparse(ids, np.asarray(csr[ids].todense()), csr.shape)


def _node(kv):
    node = kv._lib.psched_kvstore_node(kv._live())
    if not node:
        raise kv_error(kv, -95, "row-sparse keys need a dist KVStore "
                       "(dist_sync / dist_async), not %r" % kv.type)
    return node


def kv_error(kv, code, msg):
    from .kvstore import PSchedError
    return PSchedError(msg, code)


def init(kv, ck, key, value):
    """Declare row-sparse key @key of @value's shape and dtype."""
    from .kvstore import _code_of
    v = as_row_sparse(value)
    if v.ids.size:
        raise kv_error(kv, -22, "init of row-sparse key %r: the table "
                       "starts at zero; push its first rows instead "
                       "(got %d rows)" % (key, v.ids.size))
    node = _node(kv)
    code = _code_of(v.dtype, "init of key %r" % (key,))
    ret = kv._lib.psched_row_sparse_init(node, ck, v.shape[0], v.shape[1],
                                         code, 0)
    kv._check(ret, {ck: key})
    _tables(kv)[ck] = (key, v.shape, v.dtype)


def _tables(kv):
    """The KVStore's row-sparse keys: ckey -> (key, shape, dtype)."""
    t = getattr(kv, "_row_tables", None)
    if t is None:
        t = kv._row_tables = {}
    return t


def _meta(kv, ck, key, what):
    m = _tables(kv).get(ck)
    if m is None:
        raise kv_error(kv, _lib.EUNKNOWNKEY,
                       "%s of key %r: not a row-sparse key (init it with "
                       "a RowSparse)" % (what, key))
    return m


def call(kv, fn, key, value, *args):
    """@fn(kv, ckey, key, value, *args) for a key or a list of keys."""
    from .kvstore import _ckey
    many = isinstance(key, (list, tuple))
    keys, vals = (key, value) if many else ([key], [value])
    if many and (not isinstance(value, (list, tuple)) or
                 len(value) != len(key)):
        raise kv_error(kv, -22, "%d keys need a list of %d values"
                       % (len(key), len(key)))
    outs = [fn(kv, _ckey(k), k, v, *args) for k, v in zip(keys, vals)]
    return outs if many else outs[0]


def is_row_sparse_arg(v):
    """@v, or the first of a list @v, is row-sparse."""
    if isinstance(v, (list, tuple)):
        return bool(v) and is_row_sparse(v[0])
    return is_row_sparse(v)


def _rows(kv, node, op, ck, key, ids, push, pull, priority):
    """A row-sparse @op of rows @ids of table @ck, waited for."""
    ret = _lib.request_wait(
        kv._lib, node, op=op, family=_lib.FAMILY_ROWS, key=ck,
        nrows=ids.size, row_ids=ids.ctypes.data,
        push_buf=push.ctypes.data if push is not None else None,
        pull_buf=pull.ctypes.data if pull is not None else None,
        priority=int(priority))
    kv._check(ret, {ck: key})


def _pushed(kv, ck, key, value, what):
    """The table's (key, shape, dtype), @value as a RowSparse, and its
    rows and ids as the C call takes them."""
    m = _meta(kv, ck, key, what)
    v = as_row_sparse(value)
    if v.shape != m[1]:
        raise kv_error(kv, _lib.ESIZE, "%s of key %r: shape %s differs "
                       "from the table's %s" % (what, key, v.shape, m[1]))
    return (m, v, np.ascontiguousarray(v.rows, dtype=m[2]),
            np.ascontiguousarray(v.ids, dtype=np.uint64))


def _check_out(kv, key, what, dst, n, m):
    """@dst can take @n rows of the table @m."""
    if (not isinstance(dst, np.ndarray) or dst.dtype != m[2] or
            dst.shape != (n, m[1][1]) or
            not dst.flags.c_contiguous or not dst.flags.writeable):
        raise kv_error(kv, _lib.ESIZE, "%s of key %r: out must be a "
                       "writeable contiguous %s array of shape (%d, %d)"
                       % (what, key, np.dtype(m[2]).name, n, m[1][1]))


def push(kv, ck, key, value, priority):
    """Push row-sparse @value into key @key (blocks until sent and
    acknowledged)."""
    m, v, rows, ids = _pushed(kv, ck, key, value, "push")
    _rows(kv, _node(kv), _lib.OP_PUSH, ck, key, ids, rows, None, priority)


def pushpull(kv, ck, key, value, out, priority):
    """Push row-sparse @value, then get the rows of its ids once the
    step is applied, in one request per server: into @out (an array of
    len(value.ids) x width, row i for value.ids[i]), or, when @out is
    None, into @value itself (its rows replaced; a scipy matrix is
    returned as a RowSparse).  Returns what it wrote."""
    m, v, rows, ids = _pushed(kv, ck, key, value, "pushpull")
    dst = np.empty((ids.size, m[1][1]), m[2]) if out is None else out
    _check_out(kv, key, "pushpull", dst, ids.size, m)
    _rows(kv, _node(kv), _lib.OP_PUSHPULL, ck, key, ids, rows, dst,
          priority)
    if out is not None:
        return out
    v.rows = dst
    return v


def row_sparse_pull(kv, ck, key, out, priority, row_ids):
    """Rows @row_ids of key @key into @out: a RowSparse (its ids become
    the distinct sorted @row_ids, its rows theirs) or an array of
    len(row_ids) x width (row i for row_ids[i])."""
    m = _meta(kv, ck, key, "row_sparse_pull")
    ids = np.asarray(row_ids).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= m[1][0]):
        raise kv_error(kv, -22, "row_sparse_pull of key %r: a row id is "
                       "out of range, the table has %d rows"
                       % (key, m[1][0]))
    if isinstance(out, RowSparse):
        ids = np.unique(ids)
        dst = np.empty((ids.size, m[1][1]), m[2])
    else:
        dst = out
        _check_out(kv, key, "row_sparse_pull", dst, ids.size, m)
    u = np.ascontiguousarray(ids, dtype=np.uint64)
    _rows(kv, _node(kv), _lib.OP_PULL, ck, key, u, None, dst, priority)
    if isinstance(out, RowSparse):
        out.ids, out.rows, out.shape = ids.astype(np.int64), dst, m[1]
    return out
