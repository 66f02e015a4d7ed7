# SPDX-License-Identifier: MIT
"""psched.keylist in a dist_sync job (run by test_python_keylist.sh under
psched.launch, 2 servers x 2 workers): exact sums over steps, per-key
lengths, subsets, array.array and numpy values, pushpull, refusals."""
import array
import sys

import numpy as np

import psched
from psched.keylist import pull_keys, push_keys, pushpull_keys
from psched.kvstore import PSchedError

kv = psched.KVStore("dist_sync")
r, nw = kv.rank, kv.num_workers
M = 300
# spread over the key space: both servers own some
keys = [(2**64 - 1) // M * u + 3 for u in range(M)]
ok = True


def check(cond, what):
    global ok
    if not cond:
        print("rank %d: FAIL %s" % (r, what), flush=True)
        ok = False


# step 1: lists of floats, one per key
push_keys(kv, keys, [float(u + r) for u in range(M)])
got = pull_keys(kv, keys)
want = [sum(float(u + w) for w in range(nw)) for u in range(M)]
check(isinstance(got, np.ndarray) and list(got) == want, "step 1 sums")
# step 2: numpy, only even keys (odd keys keep step 1's sums)
ev = np.array(keys[::2], dtype=np.uint64)
push_keys(kv, ev, np.full(len(ev), 10.0 * (r + 1), dtype=np.float32))
got = pull_keys(kv, keys)
want2 = [sum(10.0 * (w + 1) for w in range(nw)) if u % 2 == 0 else want[u]
         for u in range(M)]
check(list(got) == want2, "step 2: even keys summed, odd keys kept")
# subset, into an array.array
sub = array.array("Q", keys[1::3])
out = array.array("f", bytes(4 * len(sub)))
pull_keys(kv, sub, out=out)
check(list(out) == [want2[u] for u in range(1, M, 3)], "subset pull")
# step 3: new keys with per-key lengths, pushpull answers the sums
nk = [keys[u] + 1 for u in range(0, M, 10)]
lens = [1 + i % 3 for i in range(len(nk))]
vals = np.array([float(r + 1)] * sum(lens), dtype=np.float32)
res = pushpull_keys(kv, nk, vals, lens=lens)
check(list(res) == [float(sum(w + 1 for w in range(nw)))] * sum(lens),
      "pushpull of new keys with lengths")
# refusals: unsorted keys (local), a key's length changed (server)
try:
    push_keys(kv, [5, 3], [1.0, 2.0])
    check(False, "unsorted keys accepted")
except PSchedError as e:
    check("sorted" in str(e), "unsorted refusal names the rule: %s" % e)
try:  # all workers: the same refused step
    push_keys(kv, nk[:1], [1.0, 2.0, 3.0], lens=[3])
    check(False, "length change accepted")
except PSchedError as e:
    check("key %d" % nk[0] in str(e), "length refusal names the key: %s" % e)
check(list(pull_keys(kv, nk[:1], lens=[1])) == [float(sum(
    w + 1 for w in range(nw)))], "refused push stored nothing")
print("rank %d keylist %s" % (r, "ok" if ok else "FAILED"), flush=True)
sys.exit(0 if ok else 1)
