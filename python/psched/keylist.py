# SPDX-License-Identifier: MIT
"""Key lists from Python (docs/python.md "Key lists"): one request
carrying many small keys, ps-lite's ZPush/ZPull shape, on a dist
KVStore's worker node.

    from psched.keylist import push_keys, pull_keys
    push_keys(kv, [3, 8, 20], [0.5, 1.0, 2.0])        # one float per key
    vals = pull_keys(kv, [3, 8, 20])                   # array('f') or numpy
    push_keys(kv, keys, vals, lens=[2, 1, 3])          # per-key lengths

Keys: a sorted list of distinct ints, array('Q') or a numpy uint64 array.
Values: a list (float32), an array.array ('f', 'd', 'i', 'q') or a numpy
array (float32/64, int32/64); pull answers come in the same kind (numpy
when numpy is importable and no @out is given, else array.array).  Each
call waits for its request; errors raise psched.kvstore.PSchedError.
"""
import array

from . import _lib

_CODES = {"f": _lib.F32, "d": _lib.F64, "i": _lib.I32, "q": _lib.I64}
_NP = {"float32": _lib.F32, "float64": _lib.F64, "int32": _lib.I32,
       "int64": _lib.I64}
_TYPECODE = {_lib.F32: "f", _lib.F64: "d", _lib.I32: "i", _lib.I64: "q"}


def _error(lib, ret, what):
    from .kvstore import PSchedError
    m = lib.psched_errmsg()
    raise PSchedError("%s: %s" % (what, m.decode(errors="replace")
                                  if m else "error %d" % ret), ret)


def _node(kv):
    lib = kv._lib
    node = lib.psched_kvstore_node(kv._live())
    if not node:
        from .kvstore import PSchedError
        raise PSchedError("key lists need a dist KVStore (a worker node)",
                          -22)
    return lib, node


def _buf(obj, what, writable=False):
    """(pointer, element count, dtype code, keep-alive) of @obj."""
    if isinstance(obj, array.array):
        if obj.typecode not in _CODES or (
                obj.typecode in "iq" and obj.itemsize not in (4, 8)):
            raise TypeError("%s: array typecode %r not supported"
                            % (what, obj.typecode))
        addr, n = obj.buffer_info()
        return addr, n, _CODES[obj.typecode], obj
    if type(obj).__module__ == "numpy":
        if str(obj.dtype) not in _NP or not obj.flags["C_CONTIGUOUS"] or (
                writable and not obj.flags["WRITEABLE"]):
            raise TypeError("%s: need a contiguous float32/64 or int32/64 "
                            "numpy array" % what)
        return obj.ctypes.data, obj.size, _NP[str(obj.dtype)], obj
    a = array.array("f", obj)
    addr, n = a.buffer_info()
    return addr, n, _lib.F32, a


def _keys(keys):
    if isinstance(keys, array.array) and keys.typecode == "Q":
        k = keys
    elif type(keys).__module__ == "numpy" and str(keys.dtype) == "uint64" \
            and keys.flags["C_CONTIGUOUS"]:
        return keys.ctypes.data, keys.size, keys
    else:
        k = array.array("Q", keys)
    addr, n = k.buffer_info()
    return addr, n, k


def _lens(lens, nkeys):
    if lens is None:
        return None, None
    ln = array.array("I", lens)
    if len(ln) != nkeys:
        raise ValueError("lens: %d lengths for %d keys" % (len(ln), nkeys))
    return ln.buffer_info()[0], ln


def _count(lens, nkeys, nvals, what):
    want = sum(lens) if lens is not None else nkeys
    if nkeys and lens is None and nvals % nkeys == 0:
        want = nvals  # same length each
    if nvals != want:
        raise ValueError("%s: %d values for %d keys (lens %s)"
                         % (what, nvals, nkeys,
                            "given" if lens is not None else "equal"))


def _issue(kv, op, what, keys, lens, vals, out, priority):
    lib, node = _node(kv)
    kp, nk, keep_k = _keys(keys)
    lp, keep_l = _lens(lens, nk)
    per = 0
    push_buf = pull_buf = None
    code = None
    if vals is not None:
        push_buf, nv, code, keep_v = _buf(vals, what)
        _count(keep_l, nk, nv, what)
        per = nv // nk if nk and lp is None else 1
    if out is not None:
        pull_buf, no, ocode, keep_o = _buf(out, what + " out", writable=True)
        if code is not None and ocode != code:
            raise TypeError("%s: out and values differ in dtype" % what)
        code = ocode
        _count(keep_l, nk, no, what + " out")
        per = no // nk if nk and lp is None else 1
    # MXNet's priority (larger = sooner) as the KVStore uses it
    ret = _lib.request_wait(lib, node, op=op, family=_lib.FAMILY_KEYLIST,
                            nkeys=nk, keys=kp, elems=lp, elem=max(per, 1),
                            push_buf=push_buf, pull_buf=pull_buf,
                            dtype=code, priority=-int(priority))
    if ret:
        _error(lib, ret, what)
    return keep_k, keep_l


def _new_out(vals_kind, code, n):
    if vals_kind == "numpy":
        import numpy as np
        return np.zeros(n, dtype={_lib.F32: np.float32, _lib.F64: np.float64,
                                  _lib.I32: np.int32,
                                  _lib.I64: np.int64}[code])
    return array.array(_TYPECODE[code], bytes(n * {_lib.F32: 4, _lib.F64: 8,
                                                   _lib.I32: 4,
                                                   _lib.I64: 8}[code]))


def _numpy_present():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


def push_keys(kv, keys, values, lens=None, priority=0):
    """Push @values of @keys (one key-list step of this worker)."""
    _issue(kv, _lib.OP_PUSH, "push_keys", keys, lens, values,
           None, priority)


def pull_keys(kv, keys, out=None, lens=None, per_key=1, dtype="float32",
              priority=0):
    """Pull @keys' values (including this worker's latest key-list push)
    into @out, or a new array (@per_key elements each when @lens is None,
    of @dtype: float32, float64, int32, int64); returns it."""
    if out is None:
        code = _NP[dtype]
        n = sum(lens) if lens is not None else len(keys) * per_key
        out = _new_out("numpy" if _numpy_present() else "array", code, n)
    _issue(kv, _lib.OP_PULL, "pull_keys", keys, lens, None, out,
           priority)
    return out


def pushpull_keys(kv, keys, values, out=None, lens=None, priority=0):
    """Push @values, then pull the step's sums into @out (or a new array of
    the values' kind); returns it."""
    if out is None:
        _, n, code, _ = _buf(values, "pushpull_keys")
        kind = "numpy" if type(values).__module__ == "numpy" else "array"
        out = _new_out(kind, code, n)
    _issue(kv, _lib.OP_PUSHPULL, "pushpull_keys", keys, lens,
           values, out, priority)
    return out
