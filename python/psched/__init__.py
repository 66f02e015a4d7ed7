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
try:  # written by make install and the Debian package
    from ._version import __version__
except ImportError:  # the source tree: its VERSION file
    from pathlib import Path as _Path
    try:
        __version__ = (_Path(__file__).resolve().parents[2] /
                       "VERSION").read_text().strip()
    except OSError:
        __version__ = "0+unknown"

from . import kvstore, optimizer
from .kvstore import KVStore, PSchedError, create

kv = kvstore
opt = optimizer

__all__ = ["__version__", "KVStore", "PSchedError", "create", "kv", "kvstore", "optimizer",
           "opt"]
