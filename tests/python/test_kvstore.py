#!/usr/bin/env python3
"""Python KVStore tests (python/psched): every method, every dtype, and
every misuse as a PSchedError with a clear message, the store still
working afterwards.

    python3 tests/python/test_kvstore.py

runs the "local" tests in this process, then starts two real jobs (2
servers x 2 workers, dist_sync and dist_async) with psched.launch, each
worker running the dist tests of this file in lockstep (the same calls in
the same order; values depend on the rank).  Exit 0 when all passed.
"""
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

DTYPES = (np.float32, np.float64, np.float16, np.int32, np.int64)
ESIZE = -4100
EUNKNOWNKEY = -4099


class TestLocal(unittest.TestCase):
    def setUp(self):
        self.kv = psched.KVStore("local")

    def tearDown(self):
        self.kv.close()

    def test_type_rank_workers(self):
        self.assertEqual(self.kv.type, "local")
        self.assertEqual(self.kv.rank, 0)
        self.assertEqual(self.kv.num_workers, 1)
        self.assertEqual(psched.kv.create("device").type, "device")

    def test_init_pull_every_dtype(self):
        for i, dt in enumerate(DTYPES):
            v = (np.arange(12) - 3).astype(dt).reshape(3, 4)
            self.kv.init(i, v)
            out = np.zeros_like(v)
            self.kv.pull(i, out=out)
            np.testing.assert_array_equal(out, v)
            self.assertEqual(out.dtype, np.dtype(dt))

    def test_push_replaces_and_devices_sum(self):
        self.kv.init("w", np.zeros(5, np.float32))
        self.kv.push("w", np.full(5, 2.5, np.float32))
        out = np.empty(5, np.float32)
        self.kv.pull("w", out=out)
        np.testing.assert_array_equal(out, 2.5)
        # A list of values for one key is one value per device: summed.
        self.kv.push("w", [np.ones(5, np.float32), np.full(5, 3, np.float32)])
        outs = [np.empty(5, np.float32), np.empty(5, np.float32)]
        self.kv.pull("w", out=outs)
        for o in outs:
            np.testing.assert_array_equal(o, 4)

    def test_float16_device_sum_in_float32(self):
        a = np.array([2048, 0.1, 60000], np.float16)
        b = np.array([1, 0.2, 10000], np.float16)
        self.kv.init(1, np.zeros(3, np.float16))
        self.kv.push(1, [a, b])
        out = np.empty(3, np.float16)
        self.kv.pull(1, out=out)
        with np.errstate(over="ignore"):  # 70000 is inf in float16
            want = (a.astype(np.float32) + b.astype(np.float32)).astype(
                np.float16)
        np.testing.assert_array_equal(out, want)

    def test_pushpull_in_place_and_list(self):
        self.kv.init([1, 2], [np.zeros(3), np.zeros(4, np.int32)])
        v1, v2 = np.array([1.0, 2.0, 3.0]), np.arange(4, dtype=np.int32)
        self.kv.pushpull([1, 2], [v1, v2])
        np.testing.assert_array_equal(v1, [1, 2, 3])
        o = np.zeros(3)
        self.kv.pushpull(1, np.full(3, 7.0), out=o)
        np.testing.assert_array_equal(o, 7)

    def test_non_contiguous(self):
        self.kv.init(5, np.zeros((2, 3), np.float32))
        big = np.arange(12, dtype=np.float32).reshape(2, 6)
        self.kv.push(5, big[:, ::2])  # strided value
        outbig = np.zeros((2, 6), np.float32)
        self.kv.pull(5, out=outbig[:, 1::2])  # strided out
        np.testing.assert_array_equal(outbig[:, 1::2], big[:, ::2])
        np.testing.assert_array_equal(outbig[:, ::2], 0)

    def test_sgd_matches_numpy(self):
        w0 = np.linspace(-1, 1, 7)
        self.kv.init(9, w0.copy())
        self.kv.set_optimizer(psched.optimizer.SGD(
            learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5,
            clip_gradient=0.8))
        w, m = w0.copy(), np.zeros(7)
        out = np.empty(7)
        for step in range(5):
            g = np.sin(np.arange(7) + step) * 2
            self.kv.push(9, g)
            gg = np.clip(0.5 * g, -0.8, 0.8)
            m = 0.9 * m - 0.1 * (gg + 0.01 * w)
            w = w + m
        self.kv.pull(9, out=out)
        np.testing.assert_allclose(out, w, rtol=1e-12, atol=1e-12)
        # Integer keys keep the default rule under sgd.
        self.kv.init(10, np.zeros(2, np.int64))
        self.kv.push(10, np.array([5, 6]))
        o = np.empty(2, np.int64)
        self.kv.pull(10, out=o)
        np.testing.assert_array_equal(o, [5, 6])
        self.kv.set_optimizer(None)
        self.kv.push(9, np.ones(7))
        self.kv.pull(9, out=out)
        np.testing.assert_array_equal(out, 1)

    def test_custom_updater(self):
        seen = []

        def upd(key, merged, stored):
            seen.append(key)
            stored += 10 * merged

        self.kv.init("p", np.ones((2, 2), np.float32))
        self.kv._set_updater(upd)
        self.kv.push("p", np.ones((2, 2), np.float32))
        out = np.empty((2, 2), np.float32)
        self.kv.pull("p", out=out)
        np.testing.assert_array_equal(out, 11)
        self.assertEqual(seen, ["p"])

        def bad(key, merged, stored):
            raise ValueError("boom")

        self.kv._set_updater(bad)
        with self.assertRaisesRegex(PSchedError, "updater raised ValueError"):
            self.kv.push("p", np.ones((2, 2), np.float32))
        self.kv._set_updater(None)
        self.kv.push("p", np.full((2, 2), 3, np.float32))
        self.kv.pull("p", out=out)
        np.testing.assert_array_equal(out, 3)

    def test_errors(self):
        kv = self.kv
        kv.init(1, np.zeros((2, 3), np.float32))
        out = np.empty((2, 3), np.float32)
        with self.assertRaisesRegex(PSchedError, "never initialised") as c:
            kv.push(2, np.zeros(3, np.float32))
        self.assertEqual(c.exception.code, EUNKNOWNKEY)
        with self.assertRaisesRegex(PSchedError, "key 99.*never"):
            kv.pull(99, out=out)
        with self.assertRaisesRegex(PSchedError, r"shape \(3, 2\) differs"):
            kv.push(1, np.zeros((3, 2), np.float32))
        with self.assertRaisesRegex(PSchedError, "float64 but the key was "
                                    "initialised as float32"):
            kv.push(1, np.zeros((2, 3)))
        with self.assertRaisesRegex(PSchedError, "too small") as c:
            kv.pull(1, out=np.empty(4, np.float32))
        self.assertEqual(c.exception.code, ESIZE)
        with self.assertRaisesRegex(PSchedError, "8 bytes given, the key "
                                    "holds 24 bytes"):
            kv.push(1, np.zeros(2, np.float32))
        with self.assertRaisesRegex(PSchedError, "already initialised"):
            kv.init(1, np.zeros((2, 3), np.float32))
        with self.assertRaisesRegex(PSchedError, "uint8 is not supported"):
            kv.init(3, np.zeros(3, np.uint8))
        with self.assertRaisesRegex(PSchedError, "keys are int or str"):
            kv.push(1.5, np.zeros(3))
        with self.assertRaisesRegex(PSchedError, "appears twice"):
            kv.push([1, 1], [np.zeros((2, 3), np.float32)] * 2)
        with self.assertRaisesRegex(PSchedError, "ftrl.*not supported"):
            kv.set_optimizer(type("Ftrl", (), {"learning_rate": 0.1})())
        with self.assertRaisesRegex(PSchedError, "learning_rate inf"):
            kv.set_optimizer(psched.optimizer.SGD(learning_rate=np.inf))
        with self.assertRaisesRegex(PSchedError, "unknown KVStore type"):
            psched.KVStore("dist_banana")
        # Still healthy.
        kv.push(1, np.full((2, 3), 4, np.float32))
        kv.pull(1, out=out)
        np.testing.assert_array_equal(out, 4)
        kv.close()
        with self.assertRaisesRegex(PSchedError, "closed"):
            kv.pull(1, out=out)

    def test_priority_extremes(self):
        self.kv.init(4, np.zeros(2))
        for p in (-2**31, 2**31 - 1, 0):
            self.kv.pushpull(4, np.full(2, float(p)), priority=p)


# -- dist tests: run by every worker of a job, in the same order ----------

KV = None


def expect_sum(per_rank):
    """Sum over the workers of per_rank(r)."""
    return sum(per_rank(r) for r in range(KV.num_workers))


class DistCase(unittest.TestCase):
    def healthy(self):
        """A pushpull on a fresh key still gives the workers' sum."""
        DistCase._hk = getattr(DistCase, "_hk", 100000) + 1
        k = DistCase._hk
        KV.init(k, np.zeros(3, np.float32))
        v = np.full(3, KV.rank + 1, np.float32)
        KV.pushpull(k, v)
        want = (expect_sum(lambda r: r + 1) if KV.type == "dist_sync"
                else None)
        if want is not None:
            np.testing.assert_array_equal(v, want)


class TestDist(DistCase):
    def test_a_rank_and_workers(self):
        self.assertEqual(KV.num_workers, 2)
        self.assertIn(KV.rank, (0, 1))
        self.assertTrue(KV.type.startswith("dist"))
        KV.init(1, np.zeros(1, np.int64))
        v = np.array([1 << (10 * KV.rank)], np.int64)
        KV.pushpull(1, v)
        if KV.type == "dist_sync":  # ranks are 0 and 1, once each
            self.assertEqual(int(v[0]), 1 + 1024)

    def test_b_init_rank0_wins(self):
        KV.init(2, np.full((4, 4), 10 + KV.rank, np.float32))
        out = np.zeros((4, 4), np.float32)
        KV.pull(2, out=out)
        np.testing.assert_array_equal(out, 10)
        KV.barrier()

    def test_c_sum_every_dtype(self):
        if KV.type != "dist_sync":
            self.skipTest("sums of one step: dist_sync")
        for i, dt in enumerate(DTYPES):
            k = 10 + i
            base = (np.arange(1000) % 7 - 3).astype(dt)
            KV.init(k, np.zeros(1000, dt))
            for step in range(3):
                KV.push(k, base * (KV.rank + 1 + step))
                out = np.empty(1000, dt)
                KV.pull(k, out=out)
                want = expect_sum(lambda r: base * (r + 1 + step))
                np.testing.assert_array_equal(out, want.astype(dt))

    def test_c_async_applies_each_push(self):
        if KV.type != "dist_async":
            self.skipTest("dist_async")
        KV.init(15, np.zeros(8, np.float32))
        for _ in range(5):
            KV.push(15, np.ones(8, np.float32) * (KV.rank + 1))
        KV.wait(15)
        KV.barrier()  # every worker's pushes are applied
        out = np.empty(8, np.float32)
        KV.pull(15, out=out)
        np.testing.assert_array_equal(out, 5 * expect_sum(lambda r: r + 1))
        KV.barrier()

    def test_d_float16_sum(self):
        if KV.type != "dist_sync":
            self.skipTest("dist_sync")
        vals = [np.array([2048, 0.1, 60000, -3.5e-5], np.float16),
                np.array([1, 0.2, 10000, 1e-7], np.float16)]
        KV.init(20, np.zeros(4, np.float16))
        v = vals[KV.rank].copy()
        KV.pushpull(20, v)
        with np.errstate(over="ignore"):  # 70000 is inf in float16
            want = (vals[0].astype(np.float32) +
                    vals[1].astype(np.float32)).astype(np.float16)
        np.testing.assert_array_equal(v, want)

    def test_e_lists_strings_priorities_big(self):
        # One store takes keys of one type (MXNet: "Mixed key types are
        # not allowed"): int keys, as everywhere in this job.
        keys = [130, 31, 132, 33]
        vals = [np.ones(3, np.float32), np.ones((2, 2), np.float64),
                np.ones(600000, np.float32), np.ones(5, np.int32)]
        KV.init(keys, vals)
        for step in range(3):
            push = [v * (KV.rank + 1) for v in vals]
            KV.push(keys, push, priority=-step)
            outs = [np.empty_like(v) for v in vals]
            KV.pull(keys, out=outs, priority=step)
            if KV.type == "dist_sync":
                for o in outs:
                    np.testing.assert_array_equal(o, 3)
        # Per-key priorities, non-blocking pushpulls, one wait.
        outs = [np.empty_like(v) for v in vals]
        for i, k in enumerate(keys):
            KV.pushpull(k, vals[i] * (KV.rank + 1), out=outs[i],
                        priority=-i, block=False)
        KV.wait(keys)
        if KV.type == "dist_sync":
            for o in outs:
                np.testing.assert_array_equal(o, 3)

    def test_f_devices_and_non_contiguous(self):
        if KV.type != "dist_sync":
            self.skipTest("dist_sync")
        KV.init(40, np.zeros((3, 2)))
        KV.push(40, [np.ones((3, 2)), np.full((3, 2), KV.rank)])
        big = np.zeros((3, 4))
        outs = [big[:, ::2], np.empty((3, 2))]
        KV.pull(40, out=outs)
        for o in outs:
            np.testing.assert_array_equal(o, 2 + expect_sum(lambda r: r))
        np.testing.assert_array_equal(big[:, 1::2], 0)

    def test_g_errors_then_healthy(self):
        KV.init(50, np.zeros((2, 3), np.float32))
        out = np.empty((2, 3), np.float32)
        with self.assertRaisesRegex(PSchedError, "never initialised") as c:
            KV.push(51, np.zeros(3, np.float32))
        self.assertEqual(c.exception.code, EUNKNOWNKEY)
        self.healthy()
        with self.assertRaisesRegex(PSchedError, "key 777.*never"):
            KV.pull(777, out=out)
        with self.assertRaisesRegex(PSchedError, r"shape \(6,\) differs"):
            KV.pushpull(50, np.zeros(6, np.float32))
        self.healthy()
        with self.assertRaisesRegex(PSchedError, "float64 but the key was "
                                    "initialised as float32"):
            KV.push(50, np.zeros((2, 3)))
        with self.assertRaisesRegex(PSchedError, "too small") as c:
            KV.pull(50, out=np.empty(5, np.float32))
        self.assertEqual(c.exception.code, ESIZE)
        with self.assertRaisesRegex(PSchedError, "already initialised"):
            KV.init(50, np.zeros((2, 3), np.float32))
        with self.assertRaisesRegex(PSchedError, "momentum 1 is not in"):
            KV.set_optimizer(psched.optimizer.SGD(momentum=1.0))
        # Dist updaters go to the servers by pickle: a lambda cannot.
        with self.assertRaisesRegex(PSchedError, "module-level function"):
            KV._set_updater(lambda k, m, s: None)
        self.healthy()
        KV.push(50, np.ones((2, 3), np.float32))
        KV.pull(50, out=out)
        if KV.type == "dist_sync":
            np.testing.assert_array_equal(out, 2)

    def test_h_barrier(self):
        for _ in range(3):
            KV.barrier()
        KV._barrier()

    def test_z_optimizer(self):
        """Last: the optimizer applies to every key from now on."""
        w0 = np.linspace(-1, 1, 9)
        KV.init(60, w0.copy())
        opt = psched.optimizer.SGD(learning_rate=0.1, momentum=0.9,
                                   wd=0.01, rescale_grad=1.0 / 2)
        KV.set_optimizer(opt)
        w, m = w0.copy(), np.zeros(9)
        out = np.empty(9)
        for step in range(4):
            g = np.cos(np.arange(9) * (KV.rank + 1) + step)
            KV.pushpull(60, g, out=out)
            if KV.type == "dist_sync":
                gs = expect_sum(
                    lambda r: np.cos(np.arange(9) * (r + 1) + step)) / 2
                m = 0.9 * m - 0.1 * (gs + 0.01 * w)
                w = w + m
                np.testing.assert_allclose(out, w, rtol=1e-12, atol=1e-12)
        KV.barrier()
        KV.set_optimizer(None)
        self.healthy()


if __name__ == "__main__":
    sys.exit(kvjob.main(sys.modules[__name__], TestLocal, TestDist,
                        ("dist_sync", "dist_async")))
