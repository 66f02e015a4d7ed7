# SPDX-License-Identifier: MIT
"""MXNet-style KVStore over libpsched (ctypes; numpy arrays in and out).

Method names and argument order follow ``mxnet.kvstore.KVStore`` so code
written for MXNet's kvstore ports by changing the import::

    import psched as mx          # or: from psched import kv
    kv = mx.kv.create('dist_sync')
    kv.init(3, np.ones((2, 3), np.float32))
    kv.push(3, grad, priority=-layer)
    kv.pull(3, out=weight, priority=-layer)

Values are numpy arrays (or CPU torch tensors, used through their numpy
view).  Contiguous arrays are handed to the library as they are, without
copies: a pushed array must not be modified until a later call that
covers its key returns (pull, pushpull, wait), and a pulled-into array is
written in place.
"""
import ctypes
import os
import pickle
import sys
import traceback

import numpy as np

from . import _lib
from ._errors import PSchedError, _PSchedValueError
from . import rowsparse as _rs
from .rowsparse import RowSparse
from .optimizer import Optimizer as _PyOptimizer

__all__ = ["KVStore", "PSchedError", "create", "cuda_check"]


def cuda_check(device=0):
    """None when buffers on CUDA device @device can be used, else the
    reason (built without CUDA, no driver, no such device)."""
    lib = _lib.load()
    if lib.psched_cuda_check(int(device)) == 0:
        return None
    m = lib.psched_errmsg()
    return m.decode(errors="replace") if m else "no CUDA device"



# numpy has no bfloat16: psched's is a 2-byte structured dtype with one
# field named "bfloat16", so an array of it is never mistaken for uint16
# data.  Make one from bits with ``bits.view(psched.bfloat16)`` (uint16 or
# int16 bits, little-endian), or from floats with to_bfloat16(); read it
# with from_bfloat16().  CPU torch.bfloat16 tensors map to it by sharing
# their memory.
bfloat16 = np.dtype([("bfloat16", "<u2")])

_DTYPES = {
    np.dtype(np.float32): _lib.F32,
    np.dtype(np.float64): _lib.F64,
    np.dtype(np.float16): _lib.F16,
    np.dtype(np.int32): _lib.I32,
    np.dtype(np.int64): _lib.I64,
    bfloat16: _lib.BF16,
}


def to_bfloat16(a):
    """float array -> bfloat16 array (round to nearest even, NaN kept),
    as the library rounds."""
    x = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    nan = (x & 0x7f800000) == 0x7f800000
    nan &= (x & 0x7fffff) != 0
    r = ((x + 0x7fff + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((x[nan] >> 16) | 0x40).astype(np.uint16)
    return r.view(bfloat16)


def from_bfloat16(a):
    """bfloat16 array -> float32 array (exact)."""
    bits = np.ascontiguousarray(a).view(np.uint16).astype(np.uint32)
    return (bits << 16).view(np.float32)


_KEY_LIMIT = 1 << 63



def _ckey(key):
    """The library's uint64 key of a Python key (int, or str by a stable
    64-bit FNV-1a hash with the top bit set, so it never meets an int)."""
    if isinstance(key, (bool, np.bool_)):
        raise PSchedError("key %r: keys are int or str" % (key,), -22)
    if isinstance(key, (int, np.integer)):
        key = int(key)
        if not 0 <= key < _KEY_LIMIT:
            raise PSchedError("key %d: int keys must be in [0, 2**63)" % key,
                              -22)
        return key
    if isinstance(key, str):
        h = 0xcbf29ce484222325
        for b in key.encode("utf-8"):
            h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
        return h | _KEY_LIMIT
    raise PSchedError("unexpected type for keys: %s (key %r: keys are int "
                      "or str)" % (type(key), key), -22)


def _as_array(v, what):
    """A numpy view of @v (ndarray, CPU torch tensor, or array-like)."""
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "detach") and hasattr(v, "numpy"):
        if getattr(v, "device", None) is not None and v.device.type != "cpu":
            raise PSchedError("%s: a %s tensor: the KVStore takes CPU "
                              "memory (copy it with .cpu(), or use "
                              "psched.torch, which stages it)"
                              % (what, v.device.type), -22)
        if str(getattr(v, "dtype", "")) == "torch.bfloat16":
            import torch  # only torch makes bfloat16 tensors
            return v.detach().view(torch.int16).numpy().view(bfloat16)
        try:
            return v.detach().numpy()  # shares the tensor's memory
        except (TypeError, RuntimeError) as e:
            raise PSchedError("%s: %s" % (what, e), -22) from None
    if isinstance(v, (list, tuple)):
        raise PSchedError("%s: expected an array, got a nested %s"
                          % (what, type(v).__name__), -22)
    return np.asarray(v)


def _code_of(dtype, what):
    code = _DTYPES.get(np.dtype(dtype))
    if code is None:
        raise PSchedError(
            "%s: dtype %s is not supported (float32, float64, float16, "
            "bfloat16, int32, int64)" % (what, np.dtype(dtype).name), -22)
    return code


class _Pending:
    """What a key's outstanding requests need kept alive, and what to do
    once they are done (copy a pulled temporary into its destination)."""
    __slots__ = ("keep", "after")

    def __init__(self):
        self.keep = []
        self.after = []


def create(name="local"):
    """``mxnet.kv.create``: a KVStore of type @name."""
    return KVStore(name)


class KVStore:
    """A key-value store: ``local`` (this process), ``dist_sync`` or
    ``dist_async`` (a worker of a psched job described by the DMLC_*
    environment, as set by ``python3 -m psched.launch``)."""

    def __init__(self, kvtype="local"):
        if not isinstance(kvtype, str):
            raise PSchedError("KVStore type must be a str", -22)
        lib = _lib.load()
        self._lib = lib
        self._handle = None
        if kvtype.startswith("dist") and os.environ.get("DMLC_ROLE") in (
                "server", "scheduler"):
            # dmlc-tracker style: the same script runs in every role;
            # a server or scheduler serves, then exits (as MXNet does).
            if os.environ["DMLC_ROLE"] == "server":
                ret = lib.psched_kvstore_run_server_from_env(
                    _SERVER_CONTROLLER, None)
            else:
                ret = lib.psched_kvstore_run_node_from_env()
            if ret < 0:
                sys.stderr.write("psched: %s\n" % self._msg())
            sys.exit(0 if ret == 0 else 1)
        h = ctypes.c_void_p()
        ret = lib.psched_kvstore_create(kvtype.encode(), None,
                                        ctypes.byref(h))
        self._check(ret)
        self._handle = h
        self._meta = {}     # ckey -> (pykey, shape, dtype)
        self._names = {}    # ckey -> pykey, for messages
        self._pending = {}  # ckey -> _Pending
        self._updater = None
        self._updater_exc = None
        self._key_kind = None     # ("int" or "str", the first key)
        self._compression = None  # (type, threshold) once set
        self._dev_cmp = None      # device stores: (type, float32 threshold)
        self._residuals = {}      # device stores: (ckey, device) -> array

    # -- errors ---------------------------------------------------------

    def _msg(self):
        m = self._lib.psched_errmsg()
        return m.decode(errors="replace") if m else ""

    def _check(self, ret, names=None):
        if ret == 0:
            return
        msg = self._msg() or self._lib.psched_strerror(ret).decode()
        for ck, pk in (names or {}).items():
            if isinstance(pk, str):
                msg = msg.replace("key %d" % ck, "key %r" % pk)
        raise PSchedError(msg, ret)

    def _live(self):
        if self._handle is None:
            raise PSchedError("the KVStore is closed", -22)
        return self._handle

    # -- properties -----------------------------------------------------

    @property
    def type(self):
        return self._lib.psched_kvstore_type(self._live()).decode()

    @property
    def rank(self):
        return self._lib.psched_kvstore_rank(self._live())

    @property
    def num_workers(self):
        return self._lib.psched_kvstore_num_workers(self._live())

    # -- argument handling ----------------------------------------------

    def _ck(self, k, what):
        """The library key of @k; MXNet's rule: one store's keys are all
        int or all str (the first key used decides)."""
        ck = _ckey(k)
        kind = "str" if isinstance(k, str) else "int"
        if self._key_kind is None:
            self._key_kind = (kind, k)
        elif self._key_kind[0] != kind:
            raise PSchedError(
                "%s of key %r: Mixed key types are not allowed: this "
                "store's keys are %s (the first was %r), %r is a%s %s"
                % (what, k, self._key_kind[0], self._key_kind[1], k,
                   "n" if kind == "int" else "", kind), -22)
        return ck

    def _entries(self, key, value, what, sparse=False):
        """[(ckey, pykey, [values])] for a key or a list of keys, each
        with a value or a list of values (one per device): arrays, and
        with @sparse RowSparse / scipy.sparse values as they are."""
        if isinstance(key, (list, tuple)):
            if not isinstance(value, (list, tuple)) or len(value) != len(key):
                raise PSchedError(
                    "%s: %d keys need a list of %d values"
                    % (what, len(key), len(key)), -22)
            if not key:
                raise PSchedError("%s: no keys" % what, -22)
            pairs = list(zip(key, value))
            if len({isinstance(k, str) for k in key}) > 1:
                # MXNet's check and message (its _ctype_key_value)
                raise PSchedError("%s: inconsistent types of keys detected."
                                  % what, -22)
        else:
            pairs = [(key, value)]
        out = []
        for k, v in pairs:
            ck = self._ck(k, what)
            self._names[ck] = k
            vs = list(v) if isinstance(v, (list, tuple)) else [v]
            if not vs:
                raise PSchedError("%s of key %r: no value" % (what, k), -22)
            w = "%s of key %r" % (what, k)
            out.append((ck, k, [a if sparse and _rs.is_row_sparse(a)
                                else _as_array(a, w) for a in vs]))
        return out

    def _check_shape(self, what, ck, k, arr, exact):
        """Shape check against init; sizes that differ are left to the
        library, which names both sizes (except a pull into a larger
        array, which the library would accept)."""
        meta = self._meta.get(ck)
        if meta is None or arr.shape == meta[1]:
            return
        size = int(np.prod(meta[1]))
        if arr.size == size or (not exact and
                                arr.nbytes > meta[2].itemsize * size):
            raise PSchedError(
                "%s of key %r: shape %s differs from the shape %s the key "
                "was initialised with" % (what, k, arr.shape, meta[1]),
                _lib.ESIZE)

    @staticmethod
    def _groups(items):
        """Split (ckey, dtype code, ...) items by dtype, keeping order."""
        groups = {}
        for it in items:
            groups.setdefault(it[1], []).append(it)
        return groups.values()

    def _pend(self, ck):
        p = self._pending.get(ck)
        if p is None:
            p = self._pending[ck] = _Pending()
        return p

    @staticmethod
    def _ptr(arr):
        return ctypes.c_void_p(arr.ctypes.data)

    # -- init -----------------------------------------------------------

    def init(self, key, value):
        """Declare keys with initial values (collective: every worker
        calls it with the same keys; rank 0's values are stored).  A
        RowSparse value declares a row-sparse key holding its rows
        (docs/python.md "Row-sparse values")."""
        items, rows = [], []
        tabs = _rs.tables(self)
        for ck, k, arrs in self._entries(key, value, "init", True):
            w = "init of key %r" % (k,)
            if ck in self._meta or ck in tabs:
                raise PSchedError("%s: the key is already initialised" % w,
                                  -17)
            if any(_rs.is_row_sparse(a) for a in arrs):
                if len(arrs) != 1:
                    raise PSchedError("%s: one RowSparse value per key"
                                      % w, -22)
                rows.append((ck, k, _rs.as_row_sparse(arrs[0])))
                continue
            a = np.ascontiguousarray(arrs[0])
            items.append((ck, _code_of(a.dtype, w), k, a))
        for ck, k, v in rows:
            _rs.init(self, ck, k, v)
        for g in self._groups(items):
            n = len(g)
            keys = (_lib.c_u64 * n)(*[it[0] for it in g])
            vals = (ctypes.c_void_p * n)(*[self._ptr(it[3]) for it in g])
            lens = (_lib.c_u64 * n)(*[it[3].nbytes for it in g])
            ret = self._lib.psched_kvstore_init(self._live(), keys, n, vals,
                                                lens, g[0][1])
            self._check(ret, {it[0]: it[2] for it in g})
            for ck, _, k, a in g:
                self._meta[ck] = (k, a.shape, a.dtype)

    # -- push / pull ----------------------------------------------------

    def _push_items(self, entries, what):
        """(ckey, code, pykey, contiguous array to send) per entry."""
        items = []
        for ck, k, arrs in entries:
            w = "%s of key %r" % (what, k)
            for a in arrs:
                self._check_shape(what, ck, k, a, True)
            if self._dev_cmp is not None and all(
                    a.dtype == np.float32 for a in arrs):
                arrs = [self._dev_quantize(ck, i, a)
                        for i, a in enumerate(arrs)]
            if len(arrs) == 1:
                a = np.ascontiguousarray(arrs[0])
            else:  # one value per device: sum them here first
                acc = np.float32 if arrs[0].dtype == np.float16 else None
                if arrs[0].dtype == bfloat16:  # sum in float32, round
                    a = to_bfloat16(np.sum(np.stack(
                        [from_bfloat16(x) for x in arrs]), axis=0))
                else:
                    with np.errstate(over="ignore"):  # float16 overflows
                        a = np.sum(np.stack(arrs), axis=0,
                                   dtype=acc).astype(arrs[0].dtype)
            items.append((ck, _code_of(a.dtype, w), k, a))
        return items

    def _out_items(self, entries, what):
        """(ckey, code, pykey, array written by the library) per entry;
        copies into non-contiguous and extra (per device) outputs are
        queued for when the request is done."""
        items = []
        for ck, k, arrs in entries:
            w = "%s of key %r" % (what, k)
            for a in arrs:
                if not isinstance(a, np.ndarray) or not a.flags.writeable:
                    raise PSchedError("%s: out must be a writeable numpy "
                                      "array (or CPU tensor)" % w, -22)
                self._check_shape(what, ck, k, a, False)
            dst = arrs[0]
            if not dst.flags.c_contiguous:
                dst = np.empty(dst.shape, dst.dtype)
            p = self._pend(ck)
            for a in arrs:
                if a is not dst:
                    p.after.append((a, dst))
            items.append((ck, _code_of(dst.dtype, w), k, dst))
        return items

    def _issue(self, fn, items, priority, outs=None):
        """Call @fn once per dtype group; keep the arrays alive."""
        for g in self._groups(items):
            n = len(g)
            keys = (_lib.c_u64 * n)(*[it[0] for it in g])
            names = {it[0]: it[2] for it in g}
            if outs is None:
                bufs = (ctypes.c_void_p * n)(*[self._ptr(it[3]) for it in g])
                lens = (_lib.c_u64 * n)(*[it[3].nbytes for it in g])
                ret = fn(self._live(), keys, n, bufs, lens, g[0][1],
                         int(priority))
            else:  # pushpull: @items are pushes, @outs the outputs by key
                o = [outs[it[0]] for it in g]
                for it, x in zip(g, o):
                    if x[1] != it[1]:
                        raise PSchedError(
                            "pushpull of key %r: out is %s but the value "
                            "is %s" % (it[2], x[3].dtype, it[3].dtype), -22)
                bufs = (ctypes.c_void_p * n)(*[self._ptr(it[3]) for it in g])
                obufs = (ctypes.c_void_p * n)(*[self._ptr(x[3]) for x in o])
                lens = (_lib.c_u64 * n)(*[it[3].nbytes for it in g])
                ret = fn(self._live(), keys, n, bufs, obufs, lens, g[0][1],
                         int(priority))
            self._check(ret, names)
            self._raise_updater_exc()
            for it in g:
                self._pend(it[0]).keep.append(it[3])
                if outs is not None:
                    self._pend(it[0]).keep.append(outs[it[0]][3])

    def _drop_pending(self, cks):
        for ck in cks:
            self._pending.pop(ck, None)

    def _split_push(self, entries, what):
        """Row-sparse pushes (ckey, key, RowSparse, rows) to row-sparse
        keys, and the dense entries: arrays, and RowSparse values of
        dense keys made dense (MXNet aggregates them so: the other rows
        are zero).  Everything is checked before anything is sent."""
        tabs = _rs.tables(self)
        rows, dense = [], []
        for ck, k, arrs in entries:
            w = "%s of key %r" % (what, k)
            sp = [_rs.is_row_sparse(a) for a in arrs]
            if any(sp) and not all(sp):
                raise PSchedError("%s: the devices' values must all be "
                                  "RowSparse or all be arrays" % w, -22)
            if any(sp) and self._compression is not None:
                raise PSchedError("%s: gradient compression does not take "
                                  "row-sparse values (as MXNet's)" % w, -95)
            if ck in tabs:
                if not all(sp):
                    raise PSchedError("%s: a row-sparse key takes RowSparse "
                                      "values" % w, -22)
                v = _rs.summed(arrs, w)
                _rs._rows_of(self, ck, k, v, what)
                rows.append((ck, k, v))
            elif all(sp):
                dense.append((ck, k, [self._densify(ck, k, arrs, w)]))
            else:
                dense.append((ck, k, arrs))
        return rows, dense

    def _densify(self, ck, k, vals, w):
        """RowSparse values @vals of dense key @k as one dense array."""
        meta = self._meta.get(ck)
        if meta is None:
            raise PSchedError("%s: the key was never initialised (call "
                              "init first)" % w, _lib.EUNKNOWNKEY)
        v = _rs.summed(vals, w)
        shape = meta[1]
        if not shape or v.shape != (shape[0], int(np.prod(shape[1:]))):
            raise PSchedError("%s: a RowSparse of shape %s, the key's shape "
                              "is %s" % (w, v.shape, shape), _lib.ESIZE)
        if v.dtype != meta[2]:
            raise PSchedError("%s: the rows are %s but the key was "
                              "initialised as %s"
                              % (w, v.dtype.name, meta[2].name), -22)
        return v.todense().reshape(shape)

    def push(self, key, value, priority=0):
        """Add @value to the keys' aggregate of this step (asynchronous:
        returns once sent; don't modify @value until a later pull,
        pushpull or wait of the key).  Larger @priority = more urgent.
        A RowSparse (or scipy.sparse) value pushes just its rows to a
        row-sparse key, blocking until done; into a dense key it is a
        dense value whose other rows are zero.  A list of values per key
        (one per device) is summed first."""
        rows, dense = self._split_push(
            self._entries(key, value, "push", True), "push")
        for ck, k, v in rows:
            _rs.push(self, ck, k, v, priority)
        if not dense:
            return
        items = self._push_items(dense, "push")
        self._issue(self._lib.psched_kvstore_push, items, priority)
        # Bound what a push-only loop keeps alive.
        for it in items:
            if len(self._pending[it[0]].keep) > 64:
                self.wait(self._names[it[0]])

    def pull(self, key, out=None, priority=0, ignore_sparse=True,
             block=True):
        """Copy the keys' values into @out (an array, or a list of arrays
        per device, per key).  Waits for the values unless @block is
        False (then call wait() before reading @out).  RowSparse outs are
        skipped (MXNet's ignore_sparse=True); with ignore_sparse=False a
        local store writes the key's whole value into them (its rows that
        are not all zero).  A local store's row-sparse key pulls into a
        dense array as its whole table (MXNet's cast)."""
        if out is None:
            raise PSchedError("pull: out is required", -22)
        dense, fill, tables = [], [], []
        local = self.type in _LOCAL_TYPES
        for ck, k, arrs in self._entries(key, out, "pull", True):
            sp = [a for a in arrs if _rs.is_row_sparse(a)]
            ds = [a for a in arrs if not _rs.is_row_sparse(a)]
            if sp and not ignore_sparse:
                fill.append(self._fill_job(ck, k, sp))
            if ds and local and ck in _rs.tables(self):
                tables.append(self._table_job(ck, k, ds))
            elif ds:
                dense.append((ck, k, ds))
        for ck, k, outs in tables:  # a local row-sparse key, made dense
            val = _rs.pull_table(self, ck, k, priority)
            for o in outs:
                np.copyto(o, val.reshape(o.shape))
        if dense:
            items = self._out_items(dense, "pull")
            self._issue(self._lib.psched_kvstore_pull, items, priority)
            if block or fill:
                self.wait([e[1] for e in dense])
        for ck, k, outs in fill:
            if ck in _rs.tables(self):
                val = _rs.pull_table(self, ck, k, priority)
            else:
                val = np.empty(self._meta[ck][1], self._meta[ck][2])
                self.pull(k, out=val, priority=priority)
            v = _rs.from_dense(val.reshape(val.shape[0], -1))
            for o in outs:
                o.ids, o.rows = v.ids.copy(), v.rows.copy()

    def _table_job(self, ck, k, outs):
        """Check a local pull of row-sparse key @k into dense @outs."""
        m = _rs.tables(self)[ck]
        for o in outs:
            if not isinstance(o, np.ndarray) or not o.flags.writeable or \
                    o.dtype != m[2] or o.size != m[1][0] * m[1][1]:
                raise PSchedError("pull of row-sparse key %r: out must be a "
                                  "writeable %s array of %d x %d elements "
                                  "(or use row_sparse_pull)"
                                  % (k, m[2].name, m[1][0], m[1][1]),
                                  _lib.ESIZE)
        return ck, k, outs

    def _fill_job(self, ck, k, outs):
        """Check a pull with ignore_sparse=False into RowSparse @outs."""
        w = "pull of key %r" % (k,)
        if self.type not in _LOCAL_TYPES:
            raise PSchedError("%s: dist kvstore pull doesn't support "
                              "ignore_sparse=False (MXNet's rule)" % w, -95)
        tab = _rs.tables(self).get(ck)
        meta = self._meta.get(ck) if tab is None else tab
        if meta is None:
            raise PSchedError("%s: the key was never initialised (call init "
                              "first)" % w, _lib.EUNKNOWNKEY)
        shape = meta[1]
        want = (shape[0], int(np.prod(shape[1:]))) if shape else ()
        for o in outs:
            if not isinstance(o, RowSparse):
                raise PSchedError("%s: out: only a psched.RowSparse is "
                                  "written in place" % w, -22)
            if o.shape != want:
                raise PSchedError("%s: out has shape %s, the key %s"
                                  % (w, o.shape, shape), _lib.ESIZE)
        return ck, k, outs

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """MXNet's row_sparse_pull: rows @row_ids of a row-sparse key
        into @out: a RowSparse (its ids become the distinct sorted ids),
        or an array of len(row_ids) x width (row i for row_ids[i]); a list
        of outs (one per device) takes a list of row_ids, one per out, or
        one row_ids for all.  Lists of keys take lists of outs and of
        row_ids.  Blocks; returns @out."""
        if out is None or row_ids is None:
            raise PSchedError("row_sparse_pull: out and row_ids are "
                              "required", -22)
        if isinstance(key, (list, tuple)):
            if not isinstance(out, (list, tuple)) or len(out) != len(key):
                raise PSchedError("row_sparse_pull: %d keys need a list of "
                                  "%d outs" % (len(key), len(key)), -22)
            if len({isinstance(k, str) for k in key}) > 1:
                raise PSchedError("row_sparse_pull: inconsistent types of "
                                  "keys detected.", -22)
            rids = row_ids if _per_item(row_ids, len(key), "row_sparse_pull",
                                        "keys") else [row_ids] * len(key)
            jobs = [self._rsp_jobs(k, o, r)
                    for k, o, r in zip(key, out, rids)]
        else:
            jobs = [self._rsp_jobs(key, out, row_ids)]
        for job in jobs:
            for ck, k, o, ids in job:
                _rs.row_sparse_pull(self, ck, k, o, ids, priority)
        return out

    def _rsp_jobs(self, k, out, row_ids):
        """(ckey, key, out, int64 ids) per out of one key, checked."""
        w = "row_sparse_pull of key %r" % (k,)
        ck = self._ck(k, "row_sparse_pull")
        self._names[ck] = k
        if ck not in _rs.tables(self):
            if ck in self._meta:
                raise PSchedError("%s: not a row-sparse key (it was "
                                  "initialised dense: pull it)" % w, -22)
            raise PSchedError("%s: the key was never initialised (call "
                              "init first)" % w, _lib.EUNKNOWNKEY)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if not outs:
            raise PSchedError("%s: no out" % w, -22)
        for o in outs:
            if not isinstance(o, (RowSparse, np.ndarray)):
                raise PSchedError("%s: out must be a psched.RowSparse or a "
                                  "numpy array, not %s"
                                  % (w, type(o).__name__), -22)
        rids = row_ids if _per_item(row_ids, len(outs), w, "outs") else \
            [row_ids] * len(outs)
        return [(ck, k, o, _rs._int_ids(r, w)) for o, r in zip(outs, rids)]

    def pushpull(self, key, value, out=None, priority=0, block=True):
        """push then pull in one round trip; @out None = into @value.
        A RowSparse value pushes its rows to a row-sparse key and gets
        back the updated rows of its ids (into @out, an array of one row
        per id, or into the RowSparse's rows), blocking; returns them."""
        if _any_sparse(value):
            return self._pushpull_rows(key, value, out, priority)
        pe = self._entries(key, value, "pushpull")
        items = self._push_items(pe, "pushpull")
        oe = pe if out is None else self._entries(key, out, "pushpull")
        outs = {it[0]: it for it in self._out_items(oe, "pushpull")}
        self._issue(self._lib.psched_kvstore_pushpull, items, priority,
                    outs)
        if block:
            self.wait([e[1] for e in pe])

    def _pushpull_rows(self, key, value, out, priority):
        many = isinstance(key, (list, tuple))
        if many and out is not None:
            raise PSchedError("pushpull of row-sparse keys: out must be None "
                              "with a list of keys (the answers go into the "
                              "values)", -22)
        jobs = []
        for ck, k, arrs in self._entries(key, value, "pushpull", True):
            w = "pushpull of key %r" % (k,)
            if len(arrs) != 1 or not _rs.is_row_sparse(arrs[0]):
                raise PSchedError("%s: one RowSparse value per row-sparse "
                                  "key (push the devices' values, then "
                                  "row_sparse_pull)" % w, -22)
            if ck not in _rs.tables(self):
                raise PSchedError("%s: not a row-sparse key (init it with a "
                                  "RowSparse)" % w, _lib.EUNKNOWNKEY)
            if self._compression is not None:
                raise PSchedError("%s: gradient compression does not take "
                                  "row-sparse values (as MXNet's)" % w, -95)
            v = _rs.as_row_sparse(arrs[0])
            _rs._rows_of(self, ck, k, v, "pushpull")
            jobs.append((ck, k, v))
        res = [_rs.pushpull(self, ck, k, v, out, priority)
               for ck, k, v in jobs]
        return res if many else res[0]

    def issue_device(self, op, keys, ptrs, nbytes, dtype, device,
                     out_ptrs=None, priority=0):
        """Push, pull or pushpull buffers given by address, on CUDA device
        @device (e.g. torch: ``t.data_ptr()``, ``t.numel() *
        t.element_size()``, ``t.device.index``); nothing is copied in
        Python, the worker stages them through pinned memory.

        @op: "push", "pull" or "pushpull"; @keys, @ptrs, @nbytes: lists of
        one entry per key (keys initialised with init() before); @dtype: a
        numpy dtype or its name ("float32", "float16", ...); @out_ptrs:
        the pull buffers of a pushpull (None: into @ptrs).  Asynchronous:
        the buffers must stay alive and unchanged (push) or untouched
        (pull) until wait() covering the keys returns; the caller keeps
        them alive.  Raises PSchedError (code -19, ENODEV, with the reason)
        when there is no CUDA build, driver or device."""
        fns = {"push": self._lib.psched_kvstore_push_device,
               "pull": self._lib.psched_kvstore_pull_device,
               "pushpull": self._lib.psched_kvstore_pushpull_device}
        if op not in fns:
            raise PSchedError("issue_device: op %r is not push, pull or "
                              "pushpull" % (op,), -22)
        n = len(keys)
        if len(ptrs) != n or len(nbytes) != n or \
                (out_ptrs is not None and len(out_ptrs) != n):
            raise PSchedError("issue_device: keys, ptrs, nbytes (and "
                              "out_ptrs) differ in length", -22)
        code = _code_of(np.dtype(dtype), op)
        cks = [self._ck(k, op) for k in keys]
        for ck, k in zip(cks, keys):
            self._names.setdefault(ck, k)
        ckeys = (_lib.c_u64 * n)(*cks)
        bufs = (ctypes.c_void_p * n)(*[int(p) for p in ptrs])
        lens = (_lib.c_u64 * n)(*[int(b) for b in nbytes])
        if op == "pushpull":
            obufs = (ctypes.c_void_p * n)(
                *[int(p) for p in (ptrs if out_ptrs is None else out_ptrs)])
            ret = fns[op](self._live(), ckeys, n, bufs, obufs, lens, code,
                          int(device), int(priority))
        else:
            ret = fns[op](self._live(), ckeys, n, bufs, lens, code,
                          int(device), int(priority))
        self._check(ret, {ck: k for ck, k in zip(cks, keys)})

    def wait(self, keys=None):
        """Wait for every request issued on @keys (all when None); raise
        the first failure.  Then pulled values are in their arrays."""
        if keys is None:
            cks = list(self._pending)
            ret = self._lib.psched_kvstore_wait(self._live(), None, 0)
        else:
            ks = keys if isinstance(keys, (list, tuple)) else [keys]
            cks = [_ckey(k) for k in ks]
            arr = (_lib.c_u64 * len(cks))(*cks)
            ret = self._lib.psched_kvstore_wait(self._live(), arr, len(cks))
        if ret == 0:
            for ck in cks:
                p = self._pending.get(ck)
                for dst, src in (p.after if p else ()):
                    np.copyto(dst, src)
        self._drop_pending(cks)
        self._check(ret, {ck: self._names.get(ck) for ck in cks})

    def wait_all(self):
        self.wait(None)

    def _poll(self, keys=None):
        """True when every request issued on @keys (all when None) has
        completed, so that wait() on them returns at once; never blocks."""
        if keys is None:
            ret = self._lib.psched_kvstore_test(self._live(), None, 0)
        else:
            ks = keys if isinstance(keys, (list, tuple)) else [keys]
            arr = (_lib.c_u64 * len(ks))(*[_ckey(k) for k in ks])
            ret = self._lib.psched_kvstore_test(self._live(), arr, len(ks))
        if ret < 0:
            self._check(ret)
        return ret == 1

    def broadcast(self, key, value, out, priority=0):
        """MXNet's broadcast: store rank 0's @value under @key (init,
        collective) and pull it into @out on every worker.  A key is
        broadcast once: a second broadcast (or init) of it is an error."""
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    OPTIMIZER = "optimizer"

    def is_capable(self, capability):
        """Whether this store supports @capability; only ``'optimizer'``
        (set_optimizer) is known, as in MXNet, and it is supported by
        every type here."""
        if isinstance(capability, str) and \
                capability.lower() == KVStore.OPTIMIZER:
            return True
        raise _PSchedValueError("Unknown capability: {}".format(capability),
                                -22)

    def num_dead_node(self, node_id, timeout_sec=60):
        """How many nodes of group @node_id (1 scheduler, 2 servers, 4
        workers, or a sum of them) this worker has seen die.  A node is
        dead once it missed heartbeats for PS_HEARTBEAT_TIMEOUT (the
        node's setting; @timeout_sec is accepted for MXNet's signature)
        or dropped its connection.  Always 0 for a local store."""
        if isinstance(node_id, bool) or not isinstance(node_id, int) or \
                not 0 < node_id <= 7:
            raise _PSchedValueError(
                "num_dead_node: node_id %r is not a group (1 scheduler, "
                "2 servers, 4 workers, or a sum of them)" % (node_id,), -22)
        node = self._lib.psched_kvstore_node(self._live())
        if not node:
            return 0
        ret = self._lib.psched_num_dead_nodes(node, node_id)
        if ret < 0:
            self._check(ret)
        return ret

    def leave(self, timeout_sec=None):
        """Leave the job on purpose (this worker's data is exhausted):
        the other workers go on without it from the next step
        (docs/elastic.md).  Call it once this worker's own requests are
        done; blocks until the scheduler committed the membership without
        it (at most @timeout_sec, default PS_REQUEST_TIMEOUT).  Later
        pushes are refused; close() then does not wait for the job's
        end.  A no-op for a local store."""
        node = self._lib.psched_kvstore_node(self._live())
        if not node:
            return
        self.wait()
        ms = 0 if timeout_sec is None else max(1, int(timeout_sec * 1000))
        self._check(self._lib.psched_leave(node, ms))

    def _members(self, ck):
        """How many workers the last step this worker pushed of library
        key @ck sums (elastic membership); num_workers for a local
        store."""
        node = self._lib.psched_kvstore_node(self._live())
        if not node:
            return self.num_workers
        ret = self._lib.psched_key_members(node, ck)
        if ret < 0:
            self._check(ret)
        return ret

    def stats(self):
        """This node's counters, the figures the scheduler exports for it
        (docs/metrics.md): bytes and messages in and out, requests in
        flight, credit in use, requests done by outcome, request latency
        ("latency_buckets": (upper bound in seconds, count) pairs, the
        last bound inf).  All 0 for a local store."""
        st = _lib.Stats()
        node = self._lib.psched_kvstore_node(self._live())
        if node:
            self._lib.psched_node_stats(node, ctypes.byref(st))
        out = {n: int(getattr(st, n)) for n, _ in _lib.Stats._fields_
               if n not in ("latency_count", "latency_sum_us")}
        out["credit_in_use_bytes"] = out.pop("in_flight_bytes")
        out["errors"] = {k: out.pop("errors_" + k) for k in (
            "timeout", "node_dead", "remote", "shutdown", "other")}
        bounds = [(_lib.LATENCY_BUCKET_US << i) / 1e6
                  for i in range(_lib.LATENCY_BUCKETS - 1)] + [float("inf")]
        out["latency_buckets"] = list(zip(bounds, map(int, st.latency_count)))
        out["latency_sum_s"] = st.latency_sum_us / 1e6
        return out

    def timeline_start(self, max_events=0):
        """Record every chunk this worker sends (start, push done, pull
        done), at most @max_events (0: 1M)."""
        node = self._lib.psched_kvstore_node(self._live())
        if node:
            self._check(self._lib.psched_timeline_start(node, max_events))

    def timeline_write(self, path):
        """Write what timeline_start() recorded to @path as Chrome trace
        JSON (chrome://tracing, Perfetto)."""
        node = self._lib.psched_kvstore_node(self._live())
        if node:
            self._check(self._lib.psched_timeline_write(
                node, os.fsencode(path)))

    # -- job ------------------------------------------------------------

    def barrier(self):
        """Wait until every worker gets here."""
        self._check(self._lib.psched_kvstore_barrier(self._live()))

    _barrier = barrier

    def set_optimizer(self, optimizer):
        """Apply @optimizer where values are aggregated (the servers, or
        this process for ``local``).  Collective for dist stores.  Takes
        a psched.optimizer object or any object with the same attributes
        (an mxnet.optimizer.SGD works)."""
        o = _PyOptimizer.to_c(optimizer)
        self._check(self._lib.psched_kvstore_set_optimizer(
            self._live(), ctypes.byref(o)))

    def _set_updater(self, updater):
        """``updater(key, merged, stored)`` folds @merged into @stored in
        place (MXNet's custom updater); None removes it.

        ``local``: it runs in this process.  Dist stores (collective): it
        runs on the servers, which must be started from this same script
        (``DMLC_ROLE=server``, MXNet's pattern): the updater goes to them
        by pickle, i.e. by its module and name, so it must be a module-
        level function defined before the script creates its KVStore.  On
        a server, @stored and @merged are flat arrays of the byte range of
        the key that server holds (elementwise updaters see no
        difference); str keys initialised before this call are passed by
        name, later ones by their 64-bit hash.  An exception in it is
        printed on the server's stderr and leaves @stored unchanged."""
        if self.type not in _LOCAL_TYPES:
            self._set_server_updater(updater)
            return
        if updater is None:
            fn = _lib.UPDATER_FN()
        else:
            fn = _lib.UPDATER_FN(self._make_updater(updater))
        self._check(self._lib.psched_kvstore_set_updater(self._live(), fn,
                                                         None))
        self._updater = fn

    def _set_server_updater(self, updater):
        names = {ck: pk for ck, pk in self._names.items()
                 if isinstance(pk, str)}
        try:
            body = pickle.dumps((updater, names))
        except Exception as e:
            raise PSchedError(
                "_set_updater: the servers get the updater by pickle (as "
                "MXNet sends its optimizer), so it must be a module-level "
                "function of the script the servers run: %s: %s"
                % (type(e).__name__, e), -22) from None
        err = None
        if self.rank == 0:
            node = self._lib.psched_kvstore_node(self._live())
            ret = self._lib.psched_servers_command(node, _CMD_UPDATER, body,
                                                   len(body), 0)
            if ret:
                err = PSchedError(self._msg() or
                                  self._lib.psched_strerror(ret).decode(),
                                  ret)
        self.barrier()  # nobody pushes before the servers have it
        if err is not None:
            raise err

    def _make_updater(self, updater):
        def call(ckey, dtype, offset, stored, merged, nbytes, arg):
            try:
                pk, shape, dt = self._meta[ckey] if ckey in self._meta \
                    else _rs.tables(self)[ckey]  # a row: flat arrays
                n = nbytes // dt.itemsize
                st = np.ctypeslib.as_array(
                    (ctypes.c_byte * nbytes).from_address(stored)).view(dt)
                mg = np.ctypeslib.as_array(
                    (ctypes.c_byte * nbytes).from_address(merged)).view(dt)
                if offset == 0 and n == int(np.prod(shape)):
                    st, mg = st.reshape(shape), mg.reshape(shape)
                mg.flags.writeable = False
                updater(pk, mg, st)
            except BaseException as e:  # raised after the call returns
                if self._updater_exc is None:
                    self._updater_exc = e
        return call

    def _raise_updater_exc(self):
        e, self._updater_exc = self._updater_exc, None
        if e is not None:
            raise PSchedError("custom updater raised %s: %s"
                              % (type(e).__name__, e), -22) from e

    def _send_command_to_servers(self, head, body):
        """MXNet's: send (@head, @body) to every server's controller (a
        server started from this script, DMLC_ROLE=server).  Head 0 is the
        updater command of _set_updater; other heads are refused there."""
        if self.type in _LOCAL_TYPES:
            raise PSchedError("_send_command_to_servers: a %s store has no "
                              "servers" % self.type, -22)
        if isinstance(body, str):
            body = body.encode()
        node = self._lib.psched_kvstore_node(self._live())
        ret = self._lib.psched_servers_command(node, int(head), bytes(body),
                                               len(body), 0)
        self._check(ret)

    def set_gradient_compression(self, compression_params):
        """MXNet's gradient compression of float32 pushes: ``{'type':
        '2bit', 'threshold': 0.5}`` (each element sent as +threshold,
        -threshold or 0), ``{'type': '1bit', 'threshold': 0.0}`` (+1 or
        -1 by the side of threshold), ``{'type': 'none'}``; type is
        required, threshold defaults to 0.5 (MXNet's rules); what is not
        sent stays in a residual
        added to the next push (error feedback).  Dist stores compress
        each worker's pushes (every worker calls it); device stores
        ("device", "local_allreduce_device") each device's value before
        they are summed, with a residual per device, as MXNet's."""
        if not isinstance(compression_params, dict):
            raise PSchedError("set_gradient_compression: compression_params "
                              "must be a dict such as {'type': '2bit', "
                              "'threshold': 0.5}", -22)
        extra = set(compression_params) - {"type", "threshold"}
        if extra:
            raise PSchedError("set_gradient_compression: unknown "
                              "parameter%s %s (known: type, threshold)"
                              % ("s" if len(extra) > 1 else "",
                                 ", ".join(sorted(map(repr, extra)))), -22)
        ctype = compression_params.get("type")
        if not isinstance(ctype, str):
            raise PSchedError("set_gradient_compression: type is required, "
                              "a str ('2bit', '1bit', 'none')", -22)
        th = compression_params.get("threshold", 0.5)  # MXNet's default
        try:
            th = float(th)
        except (TypeError, ValueError):
            raise PSchedError("set_gradient_compression: threshold %r is "
                              "not a number" % (th,), -22) from None
        if self.type in _LOCAL_TYPES:
            self._set_device_compression(ctype, th)
        else:
            self._check(self._lib.psched_kvstore_set_gradient_compression(
                self._live(), ctype.encode(), th))
        self._compression = None if ctype in ("none", "") else (ctype, th)

    def _set_device_compression(self, ctype, th):
        if "device" not in self.type:
            raise PSchedError("set_gradient_compression: Gradient "
                              "compression is not supported for this type "
                              "of kvstore (%r; MXNet compresses on device "
                              "and dist stores)" % self.type, -95)
        if ctype not in ("2bit", "1bit", "none", ""):
            raise PSchedError("gradient compression type '%s' is not "
                              "supported (2bit, 1bit, none)" % ctype, -22)
        if not np.isfinite(th) or (ctype == "2bit" and th <= 0) or \
                abs(th) > 3.0e38:
            raise PSchedError("gradient compression %s: threshold %g is not "
                              "%s" % (ctype, th, "a finite number > 0"
                                      if ctype == "2bit" else
                                      "a finite float"), -22)
        new = None if ctype in ("none", "") else (ctype, np.float32(th))
        if new != self._dev_cmp:
            self._residuals = {}
        self._dev_cmp = new

    def _dev_quantize(self, ck, dev, a):
        """Device @dev's value @a of key @ck as its 2bit / 1bit form
        would be dequantised (MXNet's device store, common/compress.h's
        rules), its residual kept for the next push."""
        kind, th = self._dev_cmp
        r = self._residuals.get((ck, dev))
        if r is None or r.shape != a.shape:
            r = np.zeros(a.shape, np.float32)
        r = r + a
        one = np.float32(1)
        if kind == "2bit":
            q = np.where(r >= th, th, np.where(r <= -th, -th, 0))
        else:
            q = np.where(r > th, one, -one)
        q = q.astype(np.float32)
        self._residuals[(ck, dev)] = r - q
        return q

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the optimizer's states (of every server, for dist
        stores) to file @fname (format: docs/optimizers.md).
        Collective for dist stores.  @dump_optimizer is accepted for
        MXNet's signature; the file always names the optimizer."""
        self._check(self._lib.psched_kvstore_save_optimizer_states(
            self._live(), os.fsencode(fname)))

    def load_optimizer_states(self, fname):
        """Restore states saved by save_optimizer_states (the same
        optimizer must be set; any server count or partition size).
        Collective for dist stores."""
        self._check(self._lib.psched_kvstore_load_optimizer_states(
            self._live(), os.fsencode(fname)))

    def snapshot(self, step):
        """Every server writes what it holds (weights, optimizer states,
        row-sparse tables) as the snapshot of @step into its
        PS_SNAPSHOT_DIR (docs/snapshots.md).  Collective for dist stores:
        call it between steps, on every worker."""
        self._check(self._lib.psched_kvstore_snapshot(self._live(),
                                                      int(step)))

    def close(self):
        """Wait for outstanding requests, leave the job (workers: the
        job ends when every worker has closed)."""
        if self._handle is None:
            return
        h, self._handle = self._handle, None
        ret = self._lib.psched_kvstore_destroy(h)
        self._pending.clear()
        self._check(ret)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _per_item(arg, n, what, things):
    """Whether @arg is a list of @n row_ids arrays, one per item (else
    one row_ids for all); a list of arrays of another length is an
    error."""
    if not isinstance(arg, (list, tuple)) or not arg or not all(
            isinstance(x, (list, tuple, np.ndarray)) for x in arg):
        return False
    if len(arg) != n:
        raise PSchedError("%s: %d row_ids for %d %s" % (what, len(arg), n,
                                                        things), -22)
    return True


def _any_sparse(value):
    """@value, or a value in the list (of lists) @value, is row-sparse."""
    if isinstance(value, (list, tuple)):
        return any(_any_sparse(v) for v in value)
    return _rs.is_row_sparse(value)


# -- servers started from the workers' script (DMLC_ROLE=server) ---------

_LOCAL_TYPES = ("local", "device", "local_update_cpu", "local_allreduce_cpu",
                "local_allreduce_device")
_CMD_UPDATER = 0  # MXNet's kController head
_NP_OF_CODE = {_lib.F32: np.dtype(np.float32), _lib.F64: np.dtype(np.float64),
               _lib.F16: np.dtype(np.float16), _lib.I32: np.dtype(np.int32),
               _lib.I64: np.dtype(np.int64), _lib.BF16: bfloat16,
               _lib.RAW: np.dtype(np.uint8)}
_server = {"updater": None, "errors": 0}


def _server_updater(fn, names):
    def call(ckey, dtype, offset, stored, merged, nbytes, arg):
        try:
            dt = _NP_OF_CODE.get(dtype, np.dtype(np.uint8))
            st = np.ctypeslib.as_array(
                (ctypes.c_byte * nbytes).from_address(stored)).view(dt)
            mg = np.ctypeslib.as_array(
                (ctypes.c_byte * nbytes).from_address(merged)).view(dt)
            mg.flags.writeable = False
            fn(names.get(ckey, ckey), mg, st)
        except BaseException:
            _server["errors"] += 1
            if _server["errors"] <= 5:
                sys.stderr.write("psched server: the updater failed on key "
                                 "%r (value left unchanged):\n%s"
                                 % (names.get(ckey, ckey),
                                    traceback.format_exc()))
    return call


def _server_control(node, head, body, length, msg, msglen, arg):
    """A server's controller (van thread): install the workers' updater."""
    try:
        if head != _CMD_UPDATER:
            raise ValueError("unknown command head %d (0 = updater)" % head)
        fn, names = pickle.loads(ctypes.string_at(body, length))
        cb = _lib.UPDATER_FN() if fn is None else \
            _lib.UPDATER_FN(_server_updater(fn, names))
        ret = _lib.load().psched_server_set_updater(node, cb, None)
        if ret == 0:
            _server["updater"] = cb  # alive while installed
        return ret
    except BaseException as e:
        why = ("%s: %s" % (type(e).__name__, e)).encode(errors="replace")
        why = why[:max(0, msglen - 1)] + b"\0"
        ctypes.memmove(msg, why, len(why))
        sys.stderr.write("psched server: refusing command %d: %s\n"
                         % (head, why[:-1].decode(errors="replace")))
        return -22


_SERVER_CONTROLLER = _lib.CONTROLLER_FN(_server_control)
