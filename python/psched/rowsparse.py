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
import ctypes

import numpy as np

from . import _lib
from ._errors import PSchedError, _PSchedValueError


class RowSparse:
    """Rows @rows (n x width) at row ids @ids of a table of @shape
    (rows, width); the other rows are zero (or, in the KVStore, not
    touched)."""

    __slots__ = ("ids", "rows", "shape")

    def __init__(self, ids, rows, shape):
        try:
            shape = tuple(int(s) for s in shape)
            ids = np.ascontiguousarray(np.asarray(ids, dtype=np.int64)
                                       .reshape(-1))
            rows = np.asarray(rows)
        except (TypeError, ValueError, OverflowError) as e:
            raise _PSchedValueError("RowSparse: %s" % e, -22) from None
        if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            raise _PSchedValueError("RowSparse: shape must be (rows, "
                                    "width), got %r" % (shape,), -22)
        if rows.ndim == 1 and ids.size <= 1:
            rows = rows.reshape(ids.size, -1)
        if rows.ndim != 2 or rows.shape != (ids.size, shape[1]):
            raise _PSchedValueError(
                "RowSparse: %d row ids need rows of shape (%d, %d), got %s"
                % (ids.size, ids.size, shape[1], rows.shape), -22)
        if ids.size and (ids.min() < 0 or ids.max() >= shape[0]):
            bad = ids[(ids < 0) | (ids >= shape[0])][0]
            raise _PSchedValueError("RowSparse: row id %d is out of range, "
                                    "the table has %d rows"
                                    % (bad, shape[0]), -22)
        self.ids = ids
        self.rows = rows
        self.shape = shape

    @classmethod
    def zeros(cls, shape, dtype=np.float32):
        """No rows: a table of @shape that is all zeros."""
        try:
            width = int(shape[1])
        except (TypeError, ValueError, IndexError):
            raise _PSchedValueError("RowSparse: shape must be (rows, "
                                    "width), got %r" % (shape,), -22) \
                from None
        return cls(np.empty(0, np.int64), np.empty((0, width), dtype), shape)

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
    try:
        csr = v.tocsr()
        ids = np.flatnonzero(np.diff(csr.indptr))
        rows = np.asarray(csr[ids].todense())
    except Exception as e:  # a broken sparse matrix
        raise PSchedError("row-sparse value %r: %s" % (v, e), -22) from None
    return RowSparse(ids, rows, csr.shape)


def from_dense(a):
    """A RowSparse of dense 2-D array @a: its rows that are not all zero
    (what MXNet's cast to row_sparse keeps)."""
    ids = np.flatnonzero(np.any(a.reshape(a.shape[0], -1) != 0, axis=1))
    return RowSparse(ids, a[ids], a.shape)


def summed(vals, what):
    """One RowSparse of the devices' RowSparse values @vals (of one key):
    their rows together (repeated ids are summed where they land)."""
    vs = [as_row_sparse(v) for v in vals]
    for v in vs[1:]:
        if v.shape != vs[0].shape or v.dtype != vs[0].dtype:
            raise PSchedError("%s: the devices' values differ in shape or "
                              "dtype (%s %s vs %s %s)"
                              % (what, vs[0].shape, vs[0].dtype.name,
                                 v.shape, v.dtype.name), _lib.ESIZE)
    if len(vs) == 1:
        return vs[0]
    return RowSparse(np.concatenate([v.ids for v in vs]),
                     np.concatenate([v.rows for v in vs]), vs[0].shape)


# -- the KVStore's row-sparse keys (psched_kvstore_row_sparse_*) --------

_declared = False


def _declare(lib):
    global _declared
    if _declared:
        return
    vp, u64, sz, i = ctypes.c_void_p, _lib.c_u64, ctypes.c_size_t, \
        ctypes.c_int
    sigs = {
        "psched_kvstore_row_sparse_init": [vp, u64, u64, u64, i, sz,
                                           _lib.c_u64_p, vp],
        "psched_kvstore_row_sparse_push": [vp, u64, sz, _lib.c_u64_p, vp, i],
        "psched_kvstore_row_sparse_pull": [vp, u64, sz, _lib.c_u64_p, vp, i],
        "psched_kvstore_row_sparse_pushpull": [vp, u64, sz, _lib.c_u64_p,
                                               vp, vp, i],
    }
    for name, args in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = ctypes.c_int, args
    _declared = True


def tables(kv):
    """The KVStore's row-sparse keys: ckey -> (key, shape, dtype)."""
    t = getattr(kv, "_row_tables", None)
    if t is None:
        t = kv._row_tables = {}
    return t


def _ids_arg(ids):
    u = np.ascontiguousarray(ids, dtype=np.uint64)
    return u, u.ctypes.data_as(_lib.c_u64_p)


def _int_ids(row_ids, what):
    """@row_ids as a flat int64 array (PSchedError if not integers)."""
    try:
        a = np.asarray(row_ids)
        if a.size == 0:
            return np.empty(0, np.int64)
        if a.dtype.kind not in "iu":
            raise TypeError("dtype %s" % a.dtype)
        return a.astype(np.int64).reshape(-1)
    except (TypeError, ValueError) as e:
        raise PSchedError("%s: row_ids must be an array of integer row ids "
                          "(%s)" % (what, e), -22) from None


def init(kv, ck, key, value):
    """Declare row-sparse key @key of @value's shape and dtype, holding
    @value's rows (rank 0's for dist stores)."""
    from .kvstore import _code_of
    what = "init of key %r" % (key,)
    v = as_row_sparse(value)
    code = _code_of(v.dtype, what)
    _declare(kv._lib)
    ids, idp = _ids_arg(v.ids)
    rows = np.ascontiguousarray(v.rows)
    ret = kv._lib.psched_kvstore_row_sparse_init(
        kv._live(), ck, v.shape[0], v.shape[1], code, ids.size, idp,
        rows.ctypes.data)
    # Refused rows after set_optimizer (dist): the key is declared zero.
    if ret == 0 or (ret == -22 and "before set_optimizer" in kv._msg()):
        tables(kv)[ck] = (key, v.shape, v.dtype)
    kv._check(ret, {ck: key})


def _rows_of(kv, ck, key, v, what):
    m = tables(kv)[ck]
    if v.shape != m[1]:
        raise PSchedError("%s of key %r: shape %s differs from the "
                          "table's %s" % (what, key, v.shape, m[1]),
                          _lib.ESIZE)
    if v.dtype != m[2]:
        raise PSchedError("%s of key %r: the rows are %s but the table "
                          "is %s" % (what, key, v.dtype.name, m[2].name),
                          -22)
    return m, np.ascontiguousarray(v.rows)


def push(kv, ck, key, v, priority):
    """Push RowSparse @v into row-sparse key @key (blocks)."""
    m, rows = _rows_of(kv, ck, key, v, "push")
    ids, idp = _ids_arg(v.ids)
    ret = kv._lib.psched_kvstore_row_sparse_push(
        kv._live(), ck, ids.size, idp, rows.ctypes.data, int(priority))
    kv._raise_updater_exc()
    kv._check(ret, {ck: key})


def _check_out(key, what, dst, n, m):
    """@dst can take @n rows of the table @m."""
    if (not isinstance(dst, np.ndarray) or dst.dtype != m[2] or
            dst.shape != (n, m[1][1]) or
            not dst.flags.c_contiguous or not dst.flags.writeable):
        raise PSchedError("%s of key %r: out must be a writeable "
                          "contiguous %s array of shape (%d, %d)"
                          % (what, key, np.dtype(m[2]).name, n, m[1][1]),
                          _lib.ESIZE)


def pushpull(kv, ck, key, v, out, priority):
    """Push RowSparse @v, then get the rows of its ids once the step is
    applied: into @out (len(v.ids) x width, row i for v.ids[i]) or, when
    @out is None, into @v's rows.  Returns what it wrote."""
    m, rows = _rows_of(kv, ck, key, v, "pushpull")
    ids, idp = _ids_arg(v.ids)
    dst = np.empty((ids.size, m[1][1]), m[2]) if out is None else out
    _check_out(key, "pushpull", dst, ids.size, m)
    ret = kv._lib.psched_kvstore_row_sparse_pushpull(
        kv._live(), ck, ids.size, idp, rows.ctypes.data, dst.ctypes.data,
        int(priority))
    kv._raise_updater_exc()
    kv._check(ret, {ck: key})
    if out is not None:
        return out
    v.rows = dst
    return v


def pull_rows(kv, ck, key, ids, dst, priority):
    """Rows @ids (int64) of key @key into @dst (len(ids) x width)."""
    u, idp = _ids_arg(ids)
    ret = kv._lib.psched_kvstore_row_sparse_pull(
        kv._live(), ck, u.size, idp, dst.ctypes.data, int(priority))
    kv._check(ret, {ck: key})


def row_sparse_pull(kv, ck, key, out, ids, priority):
    """Rows @ids of row-sparse key @key into @out: a RowSparse (its ids
    become the distinct sorted ids, its rows theirs) or an array of
    len(ids) x width (row i for ids[i])."""
    m = tables(kv)[ck]
    if ids.size and (ids.min() < 0 or ids.max() >= m[1][0]):
        raise PSchedError("row_sparse_pull of key %r: a row id is out of "
                          "range, the table has %d rows" % (key, m[1][0]),
                          -22)
    if isinstance(out, RowSparse):
        if out.shape != m[1]:
            raise PSchedError("row_sparse_pull of key %r: out has shape %s, "
                              "the table %s" % (key, out.shape, m[1]),
                              _lib.ESIZE)
        ids = np.unique(ids)
        dst = np.empty((ids.size, m[1][1]), m[2])
    else:
        dst = out
        _check_out(key, "row_sparse_pull", dst, ids.size, m)
    pull_rows(kv, ck, key, ids, dst, priority)
    if isinstance(out, RowSparse):
        out.ids, out.rows = ids, dst
    return out


def pull_table(kv, ck, key, priority):
    """The whole table of row-sparse key @key, dense (local stores)."""
    m = tables(kv)[ck]
    dst = np.empty(m[1], m[2])
    pull_rows(kv, ck, key, np.arange(m[1][0], dtype=np.int64), dst,
              priority)
    return dst
