# SPDX-License-Identifier: MIT
"""psched: MXNet-style KVStore over the psched parameter server.

    import psched
    kv = psched.KVStore('dist_sync')     # or psched.kv.create('dist_sync')
    kv.init(0, weights)
    kv.set_optimizer(psched.optimizer.SGD(learning_rate=0.1))
    kv.push(0, grad, priority=0)
    kv.pull(0, out=weights)

PyTorch: ``import psched.torch`` (BytePS's torch API: DistributedOptimizer,
ServerOptimizer, push_pull, broadcast_parameters...).

Run a local job with ``python3 -m psched.launch -s 2 -w 2 -- python3 x.py``
(or ``psched-launch``; ssh, Slurm and mpirun back ends too).
The library is found through PSCHED_LIBRARY, next to this package, in
the source tree's build/lib, or under the install prefix.

The KVStore needs numpy; it is imported on first use of one of its names,
so ``psched.launch`` runs on a python3 without numpy.
"""
import importlib


def _find_version():
    """The VERSION file's version: written to _version.py by make install
    and the Debian package, read from the source tree's VERSION, or the
    installed distribution's (pip install . from pyproject.toml)."""
    try:
        from ._version import __version__ as v
        return v
    except ImportError:
        pass
    from pathlib import Path
    try:
        return (Path(__file__).resolve().parents[2] /
                "VERSION").read_text().strip()
    except OSError:
        pass
    try:
        from importlib.metadata import version
        return version("psched")
    except Exception:
        return "0+unknown"


__version__ = _find_version()

_LAZY = {
    "kvstore": ("kvstore", None), "kv": ("kvstore", None),
    "optimizer": ("optimizer", None), "opt": ("optimizer", None),
    "KVStore": ("kvstore", "KVStore"),
    "PSchedError": ("kvstore", "PSchedError"),
    "create": ("kvstore", "create"),
    "bfloat16": ("kvstore", "bfloat16"),
    "from_bfloat16": ("kvstore", "from_bfloat16"),
    "to_bfloat16": ("kvstore", "to_bfloat16"),
    "RowSparse": ("rowsparse", "RowSparse"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError("module 'psched' has no attribute %r" % name)
    mod, attr = _LAZY[name]
    m = importlib.import_module("." + mod, __name__)
    val = m if attr is None else getattr(m, attr)
    globals()[name] = val
    return val


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = ["__version__", "KVStore", "PSchedError", "create", "kv",
           "kvstore", "optimizer", "opt", "bfloat16", "from_bfloat16",
           "to_bfloat16", "RowSparse"]
