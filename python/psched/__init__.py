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
from . import kvstore, optimizer
from .kvstore import KVStore, PSchedError, create
from .kvstore import bfloat16, from_bfloat16, to_bfloat16

kv = kvstore
opt = optimizer

__all__ = ["KVStore", "PSchedError", "create", "kv", "kvstore", "optimizer",
           "opt", "bfloat16", "from_bfloat16", "to_bfloat16"]
