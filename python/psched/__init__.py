# SPDX-License-Identifier: MIT
"""psched: MXNet-style KVStore over the psched parameter server.

    import psched
    kv = psched.KVStore('dist_sync')     # or psched.kv.create('dist_sync')
    kv.init(0, weights)
    kv.set_optimizer(psched.optimizer.SGD(learning_rate=0.1))
    kv.push(0, grad, priority=0)
    kv.pull(0, out=weights)

Run a local job with ``python3 -m psched.launch -s 2 -w 2 -- python3 x.py``.
The library is found through PSCHED_LIBRARY, next to this package, in
the source tree's build/lib, or under the install prefix.
"""
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

from . import kvstore, optimizer
from .kvstore import KVStore, PSchedError, create

kv = kvstore
opt = optimizer

__all__ = ["__version__", "KVStore", "PSchedError", "create", "kv", "kvstore", "optimizer",
           "opt"]
