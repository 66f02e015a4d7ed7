"""Shared by the KVStore tests (test_kvstore.py, test_kvstore_api.py):
run a module's local TestCase here, then the same file as the workers of
2 servers x 2 workers jobs of the given KVStore types, where its dist
TestCase runs in lockstep against the module-level store KV."""
import os
import subprocess
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import psched  # noqa: E402


def run_dist(module, dist_case):
    """A worker of the job: module.KV is the store the dist tests use."""
    module.KV = psched.KVStore(os.environ["PSCHED_TEST_KVTYPE"])
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(dist_case)
    res = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    module.KV.close()
    return 0 if res.wasSuccessful() else 1


def main(module, local_case, dist_case, kvtypes, extra_local=()):
    """Exit status: 0 when the local tests (@local_case, then the cases
    of @extra_local) and every job passed."""
    if os.environ.get("DMLC_ROLE") == "worker":
        return run_dist(module, dist_case)
    load = unittest.defaultTestLoader.loadTestsFromTestCase
    suite = unittest.TestSuite([load(c) for c in (local_case,) +
                                tuple(extra_local)])
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    status = 0 if ok else 1
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    env.setdefault("PS_REQUEST_TIMEOUT", "60")
    for kvtype in kvtypes:
        print("== %s: 2 servers x 2 workers" % kvtype, flush=True)
        env["PSCHED_TEST_KVTYPE"] = kvtype
        rc = subprocess.call(
            [sys.executable, "-m", "psched.launch", "-s", "2", "-w", "2",
             "--timeout", "300", "--", sys.executable, module.__file__],
            env=env)
        print("== %s: exit %d" % (kvtype, rc), flush=True)
        status = status or rc
    return status
