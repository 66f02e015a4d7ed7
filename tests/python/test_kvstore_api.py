#!/usr/bin/env python3
"""The rest of MXNet's KVStore API in psched's Python KVStore: broadcast,
pushpull with out, is_capable, num_dead_node, type returning the name
asked for (MXNet's local type names too), mixed key types refused with
MXNet's message, string keys in every call, _poll, bfloat16 tensors
reaching the library (PSchedError, never torch's TypeError).

    python3 tests/python/test_kvstore_api.py

runs the "local" tests here, then two jobs (2 servers x 2 workers) of
types "dist" and "dist_async" with the dist tests in lockstep.
"""
import os
import sys
import unittest
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psched  # noqa: E402
import kvjob  # noqa: E402
from psched import PSchedError  # noqa: E402

LOCAL_TYPES = ("local", "device", "local_update_cpu", "local_allreduce_cpu",
               "local_allreduce_device")


class TestLocal(unittest.TestCase):
    def setUp(self):
        self.kv = psched.KVStore("local")

    def tearDown(self):
        self.kv.close()

    def test_type_names(self):
        for t in LOCAL_TYPES:
            with psched.kv.create(t) as kv:
                self.assertEqual(kv.type, t)
                kv.init("a", np.ones(2))  # and it works as a local store
                kv.push("a", np.full(2, 3.0))
                out = np.empty(2)
                kv.pull("a", out=out)
                np.testing.assert_array_equal(out, 3)
        with self.assertRaisesRegex(PSchedError,
                                    "unknown KVStore type 'local_gpu'"):
            psched.kv.create("local_gpu")

    def test_broadcast(self):
        v = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = np.zeros_like(v)
        self.kv.broadcast("b", v, out=out)
        np.testing.assert_array_equal(out, v)
        outs = [np.zeros_like(v), np.zeros_like(v)]
        self.kv.broadcast(["c", "d"], [v, v + 1], out=[outs[0], outs[1]])
        np.testing.assert_array_equal(outs[1], v + 1)
        # MXNet: a key is broadcast once.
        with self.assertRaisesRegex(PSchedError,
                                    "key 'b': the key is already init"):
            self.kv.broadcast("b", v, out=out)

    def test_pushpull_out_and_priority(self):
        self.kv.init(["p", "q"], [np.zeros(3), np.zeros(3)])
        v, out = np.full(3, 2.0), np.zeros(3)
        self.kv.pushpull("p", v, out=out, priority=5)
        np.testing.assert_array_equal(out, 2)
        np.testing.assert_array_equal(v, 2)  # value untouched
        self.kv.pushpull("q", v)             # out=None: into the value
        np.testing.assert_array_equal(v, 2)
        with self.assertRaisesRegex(PSchedError, "never initialised"):
            self.kv.pushpull("nope", v)

    def test_is_capable(self):
        self.assertTrue(self.kv.is_capable("optimizer"))
        self.assertTrue(self.kv.is_capable(psched.KVStore.OPTIMIZER))
        self.assertTrue(self.kv.is_capable("OPTIMIZER"))
        with self.assertRaisesRegex(ValueError, "Unknown capability: sparse"):
            self.kv.is_capable("sparse")
        with self.assertRaises(PSchedError):  # both, like every error here
            self.kv.is_capable("sparse")

    def test_num_dead_node(self):
        for g in (1, 2, 4, 6, 7):
            self.assertEqual(self.kv.num_dead_node(g), 0)
        self.assertEqual(self.kv.num_dead_node(2, timeout_sec=5), 0)
        for bad in (0, 8, -1, "2", True):
            with self.assertRaisesRegex(PSchedError, "is not a group"):
                self.kv.num_dead_node(bad)

    def test_mixed_and_bad_keys(self):
        self.kv.init([1, 2], [np.zeros(2), np.zeros(2)])
        with self.assertRaisesRegex(PSchedError,
                                    "inconsistent types of keys detected."):
            self.kv.init([3, "x"], [np.zeros(2), np.zeros(2)])
        with self.assertRaisesRegex(PSchedError,
                                    "inconsistent types of keys detected."):
            self.kv.push([1, "a"], [np.zeros(2), np.zeros(2)])
        with self.assertRaisesRegex(PSchedError,
                                    "inconsistent types of keys detected."):
            self.kv.pull(["a", 1], out=[np.zeros(2), np.zeros(2)])
        with self.assertRaisesRegex(PSchedError,
                                    "unexpected type for keys: <class "
                                    "'float'>"):
            self.kv.push(1.0, np.zeros(2))
        # Nothing was half done: key 3 and "x" do not exist.
        with self.assertRaisesRegex(PSchedError, "never initialised"):
            self.kv.pull(3, out=np.zeros(2))

    def test_string_keys_everywhere(self):
        kv = self.kv
        kv.init(["w1", "w2"], [np.zeros(2), np.ones(2)])
        kv.push(["w1", "w2"], [np.full(2, 5.0), np.full(2, 6.0)])
        a, b = np.zeros(2), np.zeros(2)
        kv.pull(["w1", "w2"], out=[a, b], block=False)
        kv.wait(["w1", "w2"])
        self.assertTrue(kv._poll("w1"))
        self.assertTrue(kv._poll())
        np.testing.assert_array_equal(a, 5)
        np.testing.assert_array_equal(b, 6)

    def test_bfloat16_tensor(self):
        try:
            import torch
        except ImportError:
            self.skipTest("python3-torch is not installed")
        t = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
        try:
            self.kv.init("bf", t)
        except PSchedError as e:  # a library without bfloat16
            self.assertRegex(str(e), "dtype")
            return
        out = torch.zeros(2, dtype=torch.bfloat16)
        self.kv.pull("bf", out=out)
        self.assertEqual(out.tolist(), [1.0, 2.0])


KV = None


class TestDist(unittest.TestCase):
    def test_a_type(self):
        self.assertEqual(KV.type, os.environ["PSCHED_TEST_KVTYPE"])
        self.assertTrue(KV.is_capable("optimizer"))

    def test_b_broadcast_rank0(self):
        v = np.full((3, 2), 7.0 + KV.rank)
        out = np.zeros((3, 2))
        KV.broadcast("bc", v, out=out)
        np.testing.assert_array_equal(out, 7.0)
        with self.assertRaisesRegex(PSchedError, "already initialised"):
            KV.broadcast("bc", v, out=out)
        KV.barrier()

    def test_c_pushpull_out_and_poll(self):
        KV.init("pp", np.zeros(1000, np.float32))
        v = np.full(1000, KV.rank + 1.0, np.float32)
        out = np.zeros(1000, np.float32)
        KV.pushpull("pp", v, out=out, block=False)
        while not KV._poll("pp"):  # bounded by the request timeout
            pass
        KV.wait("pp")
        if KV.type != "dist_async":
            np.testing.assert_array_equal(out, 3)
        np.testing.assert_array_equal(v, KV.rank + 1.0)
        KV.barrier()

    def test_d_num_dead_node(self):
        self.assertEqual(KV.num_dead_node(2), 0)
        self.assertEqual(KV.num_dead_node(1 + 2 + 4, timeout_sec=10), 0)
        KV.barrier()

    def test_e_mixed_keys(self):
        with self.assertRaisesRegex(PSchedError, "inconsistent types"):
            KV.init([1, "s"], [np.zeros(1), np.zeros(1)])
        KV.barrier()


if __name__ == "__main__":
    sys.exit(kvjob.main(sys.modules[__name__], TestLocal, TestDist,
                        ("dist", "dist_async")))
