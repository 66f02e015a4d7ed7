# SPDX-License-Identifier: MIT
"""ctypes declarations of libpsched (include/psched.h, psched/kvstore.h)."""
import ctypes
import ctypes.util
import os
from pathlib import Path

c_u64 = ctypes.c_uint64
c_u64_p = ctypes.POINTER(c_u64)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)

# enum psched_dtype
RAW, F32, F64, I32, I64, F16, BF16 = 0, 1, 2, 3, 4, 5, 6

# psched_dtype_name() of each code (the library's own names)
DTYPE_NAMES = {RAW: "raw", F32: "float32", F64: "float64", I32: "int32",
               I64: "int64", F16: "float16", BF16: "bfloat16"}

# psched's own error codes (include/psched.h)
E_BASE = 4096
ENODEDEAD = -(E_BASE + 1)
ESHUTDOWN = -(E_BASE + 2)
EUNKNOWNKEY = -(E_BASE + 3)
ESIZE = -(E_BASE + 4)
EREMOTE = -(E_BASE + 5)
ERENDEZVOUS = -(E_BASE + 6)


# enum psched_op, enum psched_family
OP_PUSH, OP_PULL, OP_PUSHPULL = 1, 2, 3
FAMILY_DENSE, FAMILY_KEYLIST, FAMILY_ROWS = 0, 1, 2


class Request(ctypes.Structure):
    """struct psched_request (psched_request(): one request of any family;
    fields a family does not read stay 0 / None)"""
    _fields_ = [
        ("op", ctypes.c_int),
        ("family", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("priority", ctypes.c_int),
        ("nkeys", ctypes.c_size_t),
        ("keys", ctypes.c_void_p),
        ("lens", ctypes.c_void_p),
        ("push_vals", ctypes.c_void_p),
        ("pull_vals", ctypes.c_void_p),
        ("on_device", ctypes.c_bool),
        ("device", ctypes.c_int),
        ("elems", ctypes.c_void_p),
        ("elem", ctypes.c_uint32),
        ("key", c_u64),
        ("nrows", ctypes.c_size_t),
        ("row_ids", ctypes.c_void_p),
        ("push_buf", ctypes.c_void_p),
        ("pull_buf", ctypes.c_void_p),
        ("cb", ctypes.c_void_p),
        ("arg", ctypes.c_void_p),
    ]


def request_wait(lib, node, **fields):
    """Issue a psched_request() of @fields on @node and wait for it:
    0 or the error code."""
    rq = Request(**fields)
    req = c_u64()
    ret = lib.psched_request(node, ctypes.byref(rq), ctypes.byref(req))
    return ret if ret else lib.psched_wait(node, req.value, 0)


class Optimizer(ctypes.Structure):
    """struct psched_optimizer"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("learning_rate", ctypes.c_double),
        ("momentum", ctypes.c_double),
        ("wd", ctypes.c_double),
        ("rescale_grad", ctypes.c_double),
        ("clip_gradient", ctypes.c_double),
        ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double),
        ("epsilon", ctypes.c_double),
        ("gamma1", ctypes.c_double),
        ("gamma2", ctypes.c_double),
        ("wd_lh", ctypes.c_double),
        ("clip_weights", ctypes.c_double),
        ("centered", ctypes.c_int),
        ("correct_bias", ctypes.c_int),
        ("multi_precision", ctypes.c_int),
        ("nmult", ctypes.c_size_t),
        ("mult_keys", c_u64_p),
        ("lr_mult", ctypes.POINTER(ctypes.c_double)),
        ("wd_mult", ctypes.POINTER(ctypes.c_double)),
    ]


# struct psched_stats's request latency buckets (include/psched.h)
LATENCY_BUCKETS = 20
LATENCY_BUCKET_US = 16


class Stats(ctypes.Structure):
    """struct psched_stats, field for field in its order (test_metrics.sh
    checks the latency buckets, the last fields, against the counts)"""
    _fields_ = [(n, c_u64) for n in (
        "tx_bytes", "rx_bytes", "tx_msgs", "rx_msgs", "stored_bytes",
        "alloc_bytes", "chunks_started", "max_in_flight_bytes",
        "credit_bytes")] + [("config_epoch", ctypes.c_uint32)] + [
        (n, c_u64) for n in (
            "caller_rx_waits", "requests_in_flight", "in_flight_bytes",
            "requests_ok", "errors_timeout", "errors_node_dead",
            "errors_remote", "errors_shutdown", "errors_other")] + [
        ("latency_count", c_u64 * LATENCY_BUCKETS),
        ("latency_sum_us", c_u64)]


# typedef void psched_updater_fn(uint64_t key, enum psched_dtype dtype,
#     uint64_t offset, void *stored, const void *merged, uint64_t nbytes,
#     void *arg);
UPDATER_FN = ctypes.CFUNCTYPE(None, c_u64, ctypes.c_int, c_u64,
                              ctypes.c_void_p, ctypes.c_void_p, c_u64,
                              ctypes.c_void_p)

# typedef int psched_server_controller_fn(struct psched_node *node, int head,
#     const void *body, size_t len, char *msg, size_t msglen, void *arg);
CONTROLLER_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                 ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_void_p)


def candidates():
    """Where libpsched.so is looked for, in order."""
    here = Path(__file__).resolve().parent
    out = []
    env = os.environ.get("PSCHED_LIBRARY")
    if env:
        out.append(Path(env))
    out.append(here / "libpsched.so")
    # Source tree: python/psched -> <repo>/build/lib
    build = os.environ.get("BUILD", "build")
    out.append(here.parents[1] / build / "lib" / "libpsched.so")
    # make install: $(PREFIX)/lib/python3/dist-packages/psched -> $(PREFIX)/lib
    if len(here.parents) > 2:
        out.append(here.parents[2] / "libpsched.so")
    return out


_lib = None
_path = None


def _declare(lib):
    f = lib.psched_errmsg
    f.restype, f.argtypes = ctypes.c_char_p, []
    f = lib.psched_strerror
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int]
    vp = ctypes.c_void_p
    sigs = {
        "psched_kvstore_create": [ctypes.c_char_p, vp, ctypes.POINTER(vp)],
        "psched_kvstore_destroy": [vp],
        "psched_kvstore_rank": [vp],
        "psched_kvstore_num_workers": [vp],
        "psched_kvstore_init": [vp, c_u64_p, ctypes.c_size_t, c_void_pp,
                                c_u64_p, ctypes.c_int],
        "psched_kvstore_push": [vp, c_u64_p, ctypes.c_size_t, c_void_pp,
                                c_u64_p, ctypes.c_int, ctypes.c_int],
        "psched_kvstore_pull": [vp, c_u64_p, ctypes.c_size_t, c_void_pp,
                                c_u64_p, ctypes.c_int, ctypes.c_int],
        "psched_kvstore_pushpull": [vp, c_u64_p, ctypes.c_size_t, c_void_pp,
                                    c_void_pp, c_u64_p, ctypes.c_int,
                                    ctypes.c_int],
        # GPU tensors: the same with buffers on CUDA device N (kvstore.py
        # KVStore.issue_device, docs/gpu.md).
        "psched_kvstore_push_device": [vp, c_u64_p, ctypes.c_size_t,
                                       c_void_pp, c_u64_p, ctypes.c_int,
                                       ctypes.c_int, ctypes.c_int],
        "psched_kvstore_pull_device": [vp, c_u64_p, ctypes.c_size_t,
                                       c_void_pp, c_u64_p, ctypes.c_int,
                                       ctypes.c_int, ctypes.c_int],
        "psched_kvstore_pushpull_device": [vp, c_u64_p, ctypes.c_size_t,
                                           c_void_pp, c_void_pp, c_u64_p,
                                           ctypes.c_int, ctypes.c_int,
                                           ctypes.c_int],
        "psched_request": [vp, ctypes.POINTER(Request), c_u64_p],
        "psched_wait": [vp, c_u64, ctypes.c_uint],
        "psched_cuda_check": [ctypes.c_int],
        "psched_cuda_built": [],
        "psched_kvstore_wait": [vp, c_u64_p, ctypes.c_size_t],
        "psched_kvstore_test": [vp, c_u64_p, ctypes.c_size_t],
        "psched_num_dead_nodes": [vp, ctypes.c_uint],
        "psched_leave": [vp, ctypes.c_uint],
        "psched_key_members": [vp, c_u64],
        "psched_kvstore_barrier": [vp],
        "psched_kvstore_set_optimizer": [vp, ctypes.POINTER(Optimizer)],
        "psched_kvstore_set_updater": [vp, UPDATER_FN, vp],
        "psched_kvstore_run_node_from_env": [],
        "psched_kvstore_run_server_from_env": [CONTROLLER_FN, vp],
        "psched_servers_command": [vp, ctypes.c_int, vp, ctypes.c_size_t,
                                   ctypes.c_uint],
        "psched_server_set_updater": [vp, UPDATER_FN, vp],
        "psched_optimizer_check": [ctypes.POINTER(Optimizer)],
        "psched_optimizer_defaults": [ctypes.POINTER(Optimizer),
                                      ctypes.c_char_p],
        "psched_kvstore_save_optimizer_states": [vp, ctypes.c_char_p],
        "psched_kvstore_snapshot": [vp, ctypes.c_uint64],
        "psched_kvstore_load_optimizer_states": [vp, ctypes.c_char_p],
        "psched_kvstore_set_gradient_compression": [vp, ctypes.c_char_p,
                                                    ctypes.c_double],
    }
    for name, args in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = ctypes.c_int, args
    f = lib.psched_kvstore_type
    f.restype, f.argtypes = ctypes.c_char_p, [vp]
    f = lib.psched_kvstore_node
    f.restype, f.argtypes = vp, [vp]
    f = lib.psched_dtype_name
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int]
    f = lib.psched_node_stats
    f.restype, f.argtypes = None, [vp, ctypes.POINTER(Stats)]
    for name in ("psched_timeline_start", "psched_timeline_write"):
        f = getattr(lib, name)
        f.restype = ctypes.c_int
    lib.psched_timeline_start.argtypes = [vp, ctypes.c_size_t]
    lib.psched_timeline_write.argtypes = [vp, ctypes.c_char_p]


def load():
    """The loaded library (found as candidates() lists, then by the
    dynamic linker's own search)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    tried = []
    for p in candidates():
        tried.append(str(p))
        if p.is_file():
            lib = ctypes.CDLL(str(p))
            _path = p
            break
    else:
        name = ctypes.util.find_library("psched") or "libpsched.so"
        tried.append(name)
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            raise ImportError(
                "psched: cannot find libpsched.so (tried %s); build it "
                "with `make`, install it with `make install`, or set "
                "PSCHED_LIBRARY" % ", ".join(tried)) from None
        _path = Path(name)
    _declare(lib)
    _lib = lib
    return lib


def path():
    """Where the library is (or would be loaded from), without loading it:
    the launcher only needs the path, and a sanitizer build of the
    library cannot be loaded into a plain python3."""
    if _path is not None:
        return _path
    for p in candidates():
        if p.is_file():
            return p
    name = ctypes.util.find_library("psched")
    if name is None:
        raise ImportError("psched: cannot find libpsched.so (tried %s)"
                          % ", ".join(map(str, candidates())))
    return Path(name)
