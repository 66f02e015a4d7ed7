#!/usr/bin/env python3
"""MXNet's KVStore rules that MXNet-style code meets first (issue cases
1-9, docs/python.md "Differences from MXNet"): row-sparse keys in local
stores, init with rows, row-sparse pushes into dense keys, one value per
device (dense and row-sparse), row_sparse_pull into one out per device,
pull's ignore_sparse, mixed int / str keys, MXNet's 'test' optimizer
and a negative learning rate, gradient compression on device stores;
every bad input a PSchedError.

    python3 tests/python/test_kvstore_mx.py

runs the local tests for "local" and "device" here, then two jobs (2
servers x 2 workers) of types "dist_sync" and "dist_async" with the dist
tests in lockstep (tests/integration/test_kvstore_mx.sh).
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
from psched import PSchedError, RowSparse  # noqa: E402

F32 = np.float32


def ones(shape):
    return np.ones(shape, F32)


class LocalCases:
    """The cases on one local store type (TYPE)."""
    TYPE = "local"

    def setUp(self):
        self.kv = psched.KVStore(self.TYPE)

    def tearDown(self):
        self.kv.close()

    # 1. local stores take row-sparse keys
    def test_1_row_sparse_key(self):
        kv = self.kv
        kv.init("emb", RowSparse.zeros((4, 4)))
        kv.push("emb", RowSparse([1], ones((1, 4)), (4, 4)))
        out = RowSparse.zeros((4, 4))
        kv.row_sparse_pull("emb", out=out, row_ids=[1, 2])
        self.assertEqual(list(out.ids), [1, 2])
        np.testing.assert_array_equal(out.rows, [[1] * 4, [0] * 4])
        # Repeated ids are summed; a pushed row is replaced by the step's
        # sum (no optimizer), rows not pushed keep their values.
        kv.push("emb", RowSparse([2, 2], ones((2, 4)), (4, 4)))
        arr = np.empty((3, 4), F32)
        kv.row_sparse_pull("emb", out=arr, row_ids=[2, 1, 0])
        np.testing.assert_array_equal(arr[:, 0], [2, 1, 0])
        # pushpull: the updated rows of the pushed ids
        got = kv.pushpull("emb", RowSparse([3], np.full((1, 4), 5, F32),
                                           (4, 4)))
        np.testing.assert_array_equal(got.rows, [[5] * 4])
        with self.assertRaisesRegex(PSchedError, "out of range"):
            kv.row_sparse_pull("emb", out=np.empty((1, 4), F32), row_ids=[4])
        with self.assertRaisesRegex(PSchedError, "shape"):
            kv.push("emb", RowSparse([0], ones((1, 3)), (4, 3)))
        with self.assertRaisesRegex(PSchedError, "dtype|float64"):
            kv.push("emb", RowSparse([0], np.ones((1, 4)), (4, 4)))
        with self.assertRaisesRegex(PSchedError, "already initialised"):
            kv.init("emb", RowSparse.zeros((4, 4)))

    def test_1_row_sparse_lazy_sgd(self):
        kv = self.kv
        kv.init("e", RowSparse(np.arange(3), np.full((3, 2), 1, F32),
                               (3, 2)))
        kv.set_optimizer(psched.optimizer.SGD(learning_rate=0.5, wd=0.1))
        kv.push("e", RowSparse([0], np.full((1, 2), 2, F32), (3, 2)))
        out = np.empty((3, 2), F32)
        kv.row_sparse_pull("e", out=out, row_ids=[0, 1, 2])
        # Only row 0 moves (MXNet's lazy update): 1 - 0.5 * (2 + 0.1).
        np.testing.assert_allclose(out[:, 0], [1 - 0.5 * 2.1, 1, 1],
                                   rtol=1e-6)

    def test_1_row_sparse_custom_updater(self):
        kv = self.kv
        kv.init("u", RowSparse([0, 1], ones((2, 3)), (3, 3)))
        seen = []

        def upd(key, merged, stored):  # called once per row pushed
            seen.append((key, merged.shape))
            stored += 2 * merged

        kv._set_updater(upd)
        kv.push("u", RowSparse([1, 1, 2], ones((3, 3)), (3, 3)))
        out = np.empty((3, 3), F32)
        kv.row_sparse_pull("u", out=out, row_ids=[0, 1, 2])
        np.testing.assert_array_equal(out[:, 0], [1, 1 + 2 * 2, 2])
        self.assertEqual(sorted(seen), [("u", (3,)), ("u", (3,))])

        def bad(key, merged, stored):
            raise KeyError("boom")

        kv._set_updater(bad)
        with self.assertRaisesRegex(PSchedError, "custom updater raised"):
            kv.push("u", RowSparse([0], ones((1, 3)), (3, 3)))

    # 2. init with rows stores them
    def test_2_init_with_rows(self):
        kv = self.kv
        kv.init("e", RowSparse(np.arange(4), ones((4, 4)), (4, 4)))
        out = np.empty((4, 4), F32)
        kv.row_sparse_pull("e", out=out, row_ids=np.arange(4))
        np.testing.assert_array_equal(out, 1)
        kv.init("f", RowSparse([2], np.full((1, 3), 7, F32), (3, 3)))
        rs = RowSparse.zeros((3, 3))
        kv.row_sparse_pull("f", out=rs, row_ids=[0, 1, 2])
        np.testing.assert_array_equal(rs.todense()[:, 0], [0, 0, 7])

    # 3. a row-sparse push into a dense key
    def test_3_row_sparse_into_dense(self):
        kv = self.kv
        kv.init(3, np.zeros((4, 4), F32))
        kv.push(3, RowSparse([0, 2], ones((2, 4)), (4, 4)))
        out = np.empty((4, 4), F32)
        kv.pull(3, out=out)
        np.testing.assert_array_equal(out[:, 0], [1, 0, 1, 0])
        with self.assertRaisesRegex(PSchedError, "shape"):
            kv.push(3, RowSparse([0], ones((1, 4)), (5, 4)))

    # 4. one value per device, row-sparse
    def test_4_list_of_row_sparse(self):
        kv = self.kv
        kv.init("s", RowSparse.zeros((3, 2)))
        kv.push("s", [RowSparse([0], ones((1, 2)), (3, 2)),
                      RowSparse([0, 1], ones((2, 2)), (3, 2))])
        out = np.empty((3, 2), F32)
        kv.row_sparse_pull("s", out=out, row_ids=[0, 1, 2])
        np.testing.assert_array_equal(out[:, 0], [2, 1, 0])
        kv.init("d", np.zeros((3, 2), F32))   # into a dense key too
        kv.push("d", [RowSparse([1], ones((1, 2)), (3, 2)),
                      RowSparse([1, 2], ones((2, 2)), (3, 2))])
        kv.pull("d", out=out)
        np.testing.assert_array_equal(out[:, 0], [0, 2, 1])

    def test_4_bad_inputs_are_psched_errors(self):
        kv = self.kv
        kv.init("s", RowSparse.zeros((3, 2)))
        bad = [
            lambda: kv.push("s", [RowSparse([0], ones((1, 2)), (3, 2)),
                                  np.ones((3, 2), F32)]),
            lambda: kv.push("s", [RowSparse([0], ones((1, 2)), (3, 2)),
                                  "x"]),
            lambda: kv.push("s", [RowSparse([0], ones((1, 2)), (3, 2)),
                                  RowSparse([0], ones((1, 3)), (3, 3))]),
            lambda: kv.push("s", RowSparse([5], ones((1, 2)), (3, 2))),
            lambda: kv.push("s", []),
            lambda: kv.push(["s"], RowSparse.zeros((3, 2))),
            lambda: kv.init("t", RowSparse([0], ones((1, 2)), (0, 2))),
            lambda: kv.init("t", [RowSparse.zeros((3, 2))] * 2),
            lambda: kv.row_sparse_pull("s", out=RowSparse.zeros((3, 2)),
                                       row_ids="x"),
            lambda: kv.row_sparse_pull("s", out=RowSparse.zeros((3, 2)),
                                       row_ids=[[0, 1], [1]]),
            lambda: kv.row_sparse_pull("s", out=[RowSparse.zeros((3, 2))],
                                       row_ids=[[0], [1]]),
            lambda: kv.row_sparse_pull("s", out="x", row_ids=[0]),
            lambda: kv.row_sparse_pull("nope", out=RowSparse.zeros((3, 2)),
                                       row_ids=[0]),
            lambda: kv.pull("s", out=np.zeros((3, 3), F32)),
            lambda: kv.pull("s", out=np.zeros((3, 2))),
            lambda: kv.pushpull("s", [RowSparse.zeros((3, 2))] * 2),
        ]
        for i, f in enumerate(bad):
            try:
                f()
            except PSchedError:
                continue
            except Exception as e:  # a raw Python error escaped
                self.fail("bad input %d raised %s: %s"
                          % (i, type(e).__name__, e))
            self.fail("bad input %d was accepted" % i)
        # RowSparse itself refuses bad arrays with a PSchedError (and a
        # ValueError, as before).
        with self.assertRaises(PSchedError):
            RowSparse([0, 1], ones((1, 2)), (3, 2))
        with self.assertRaises(ValueError):
            RowSparse([0], ones((1, 2)), (3,))
        out = np.empty((3, 2), F32)  # the store still works
        kv.row_sparse_pull("s", out=out, row_ids=[0, 1, 2])
        np.testing.assert_array_equal(out, 0)

    # 5. row_sparse_pull of one key into one out per device
    def test_5_row_sparse_pull_outs(self):
        kv = self.kv
        kv.init("r", RowSparse(np.arange(4), np.arange(8, dtype=F32)
                               .reshape(4, 2), (4, 2)))
        o1, o2 = RowSparse.zeros((4, 2)), RowSparse.zeros((4, 2))
        kv.row_sparse_pull("r", out=[o1, o2], row_ids=[[3, 0], [1]])
        self.assertEqual(list(o1.ids), [0, 3])
        np.testing.assert_array_equal(o1.rows, [[0, 1], [6, 7]])
        self.assertEqual(list(o2.ids), [1])
        np.testing.assert_array_equal(o2.rows, [[2, 3]])
        o3, o4 = RowSparse.zeros((4, 2)), RowSparse.zeros((4, 2))
        kv.row_sparse_pull("r", out=[o3, o4], row_ids=np.array([2, 1]))
        for o in (o3, o4):
            self.assertEqual(list(o.ids), [1, 2])
            np.testing.assert_array_equal(o.rows, [[2, 3], [4, 5]])

    # 6. pull's ignore_sparse
    def test_6_ignore_sparse(self):
        kv = self.kv
        kv.init("k6", np.arange(6, dtype=F32).reshape(3, 2))
        rs = RowSparse.zeros((3, 2))
        kv.pull("k6", out=rs)         # default: skipped, unchanged
        self.assertEqual(rs.ids.size, 0)
        dense = np.zeros((3, 2), F32)
        kv.pull(["k6"], out=[[dense, RowSparse.zeros((3, 2))]])
        np.testing.assert_array_equal(dense[:, 1], [1, 3, 5])
        kv.pull("k6", out=rs, ignore_sparse=False)
        np.testing.assert_array_equal(rs.todense(),
                                      np.arange(6).reshape(3, 2))
        kv.init("rk", RowSparse([1], np.full((1, 2), 4, F32), (3, 2)))
        rs2 = RowSparse.zeros((3, 2))
        kv.pull("rk", out=rs2)        # a row-sparse key, skipped too
        self.assertEqual(rs2.ids.size, 0)
        kv.pull("rk", out=rs2, ignore_sparse=False)
        np.testing.assert_array_equal(rs2.todense()[:, 0], [0, 4, 0])
        with self.assertRaisesRegex(PSchedError, "shape"):
            kv.pull("k6", out=RowSparse.zeros((4, 2)),
                    ignore_sparse=False)
        d = np.full((3, 2), -1, F32)  # a row-sparse key into a dense out
        kv.pull("rk", out=d)
        np.testing.assert_array_equal(d[:, 1], [0, 4, 0])

    # 7. int and str keys are not mixed in one store
    def test_7_mixed_key_types(self):
        kv = self.kv
        kv.init(1, np.zeros(2, F32))
        with self.assertRaisesRegex(
                PSchedError, "Mixed key types are not allowed.*int.*"
                "'x'.*str"):
            kv.init("x", np.zeros(2, F32))
        for call in (lambda: kv.push("x", np.zeros(2, F32)),
                     lambda: kv.pull("x", out=np.zeros(2, F32)),
                     lambda: kv.row_sparse_pull("x", out=np.zeros((1, 2)),
                                                row_ids=[0])):
            with self.assertRaisesRegex(PSchedError, "Mixed key types"):
                call()
        kv.push(1, np.ones(2, F32))   # the int keys still work
        with psched.KVStore(self.TYPE) as kv2:  # a str-first store
            kv2.init("a", np.zeros(1, F32))
            with self.assertRaisesRegex(PSchedError,
                                        "Mixed key types.*str.*3.*int"):
                kv2.push(3, np.zeros(1, F32))

    # 8. MXNet's 'test' optimizer, and a negative learning rate
    def test_8_test_optimizer(self):
        kv = self.kv
        kv.init(0, np.ones(3, F32))
        kv.set_optimizer(psched.optimizer.create("test", rescale_grad=0.5))
        kv.push(0, np.full(3, 2, F32))
        out = np.empty(3, F32)
        kv.pull(0, out=out)
        np.testing.assert_array_equal(out, 1 + 0.5 * 2)
        kv.push(0, [np.full(3, 1, F32), np.full(3, 3, F32)])  # 2 devices
        kv.pull(0, out=out)
        np.testing.assert_array_equal(out, 2 + 0.5 * 4)
        self.assertEqual(psched.optimizer.create("Test").name, "test")
        kv.set_optimizer(psched.optimizer.SGD(learning_rate=-0.25))
        kv.push(0, np.full(3, 4, F32))
        kv.pull(0, out=out)
        np.testing.assert_array_equal(out, 4 + 0.25 * 4)
        with self.assertRaisesRegex(PSchedError, "learning_rate nan"):
            kv.set_optimizer(psched.optimizer.SGD(learning_rate=np.nan))

    # 9. gradient compression on device stores
    def test_9_compression(self):
        kv = self.kv
        params = {"type": "2bit", "threshold": 0.5}
        if "device" not in self.TYPE:
            with self.assertRaisesRegex(PSchedError, "not supported for "
                                        "this type of kvstore"):
                kv.set_gradient_compression(params)
            return
        kv.set_gradient_compression(params)
        kv.init("g", np.zeros(4, F32))
        two = [np.full(4, 0.4, F32), np.full(4, 0.4, F32)]
        out = np.empty(4, F32)
        kv.push("g", two)       # each device's 0.4 is below 0.5: 0 sent
        kv.pull("g", out=out)
        np.testing.assert_array_equal(out, 0)
        kv.push("g", two)       # residuals 0.8: each device sends 0.5
        kv.pull("g", out=out)
        np.testing.assert_array_equal(out, 1.0)
        kv.push("g", np.full(4, -0.6, F32))  # device 0: 0.3 - 0.6 -> 0
        kv.pull("g", out=out)
        np.testing.assert_array_equal(out, 0)
        kv.push("g", np.full(4, -0.3, F32))  # -0.6 -> -0.5
        kv.pull("g", out=out)
        np.testing.assert_array_equal(out, -0.5)
        kv.init("i", np.zeros(2, np.int32))  # other dtypes: as they are
        kv.push("i", [np.ones(2, np.int32)] * 2)
        o = np.empty(2, np.int32)
        kv.pull("i", out=o)
        np.testing.assert_array_equal(o, 2)
        kv.set_gradient_compression({"type": "1bit", "threshold": 0.0})
        kv.push("g", np.full(4, 0.25, F32))   # > 0: +1
        kv.pull("g", out=out)
        np.testing.assert_array_equal(out, 1)
        kv.init("r", RowSparse.zeros((2, 4)))
        with self.assertRaisesRegex(PSchedError, "row-sparse"):
            kv.push("r", RowSparse([0], ones((1, 4)), (2, 4)))
        with self.assertRaisesRegex(PSchedError, "threshold"):
            kv.set_gradient_compression({"type": "2bit", "threshold": -1})
        kv.set_gradient_compression({"type": "none"})
        kv.push("g", np.full(4, 0.1, F32))
        kv.pull("g", out=out)
        np.testing.assert_allclose(out, 0.1)


    # The rest of MXNet's rules (docs/python.md "Differences from MXNet")
    def test_audit_type_names_any_case(self):
        with psched.kv.create(self.TYPE.upper()) as kv:
            self.assertEqual(kv.type, self.TYPE)  # MXNet lower-cases it
            kv.init(0, np.zeros(1, F32))

    def test_audit_compression_params(self):
        kv = self.kv
        with self.assertRaisesRegex(PSchedError, "type is required"):
            kv.set_gradient_compression({"threshold": 0.5})
        if "device" not in self.TYPE:
            return
        kv.set_gradient_compression({"type": "1bit"})  # threshold 0.5
        kv.init("c", np.zeros(2, F32))
        kv.push("c", np.full(2, 0.4, F32))   # 0.4 <= 0.5: -1
        out = np.empty(2, F32)
        kv.pull("c", out=out)
        np.testing.assert_array_equal(out, -1)


class TestLocal(LocalCases, unittest.TestCase):
    TYPE = "local"


class TestDevice(LocalCases, unittest.TestCase):
    TYPE = "device"


KV = None


class TestDist(unittest.TestCase):
    """In lockstep on every worker (KV: a dist_sync or dist_async store
    of 2 workers); every test ends at a barrier."""

    def sync(self):
        return KV.type != "dist_async"

    def test_1_row_sparse(self):
        KV.init("emb", RowSparse.zeros((4, 4)))
        KV.push("emb", RowSparse([1], ones((1, 4)), (4, 4)))
        KV.barrier()
        out = RowSparse.zeros((4, 4))
        KV.row_sparse_pull("emb", out=out, row_ids=[1, 2])
        self.assertEqual(list(out.ids), [1, 2])
        np.testing.assert_array_equal(out.rows[:, 0], [KV.num_workers, 0])
        KV.barrier()

    def test_2_init_with_rows(self):
        # rank 0's rows are stored (as for dense keys)
        KV.init("e", RowSparse(np.arange(4), np.full((4, 4), KV.rank + 1,
                                                     F32), (4, 4)))
        out = np.empty((4, 4), F32)
        KV.row_sparse_pull("e", out=out, row_ids=np.arange(4))
        np.testing.assert_array_equal(out, 1)
        KV.barrier()

    def test_3_row_sparse_into_dense(self):
        KV.init("d3", np.zeros((4, 4), F32))
        KV.push("d3", RowSparse([0, 2], ones((2, 4)), (4, 4)))
        KV.wait("d3")
        KV.barrier()
        out = np.empty((4, 4), F32)
        KV.pull("d3", out=out)
        n = KV.num_workers
        np.testing.assert_array_equal(out[:, 0], [n, 0, n, 0])
        KV.barrier()

    def test_4_list_of_row_sparse(self):
        KV.init("s", RowSparse.zeros((3, 2)))
        KV.push("s", [RowSparse([0], ones((1, 2)), (3, 2)),
                      RowSparse([0, 1], ones((2, 2)), (3, 2))])
        KV.barrier()
        out = np.empty((3, 2), F32)
        KV.row_sparse_pull("s", out=out, row_ids=[0, 1, 2])
        n = KV.num_workers
        np.testing.assert_array_equal(out[:, 0], [2 * n, n, 0])
        with self.assertRaises(PSchedError):
            KV.push("s", [RowSparse([0], ones((1, 2)), (3, 2)), "x"])
        KV.barrier()

    def test_5_row_sparse_pull_outs(self):
        KV.init("r", RowSparse(np.arange(4), np.arange(8, dtype=F32)
                               .reshape(4, 2), (4, 2)))
        o1, o2 = RowSparse.zeros((4, 2)), RowSparse.zeros((4, 2))
        KV.row_sparse_pull("r", out=[o1, o2], row_ids=[[3, 0], [1]])
        np.testing.assert_array_equal(o1.rows, [[0, 1], [6, 7]])
        np.testing.assert_array_equal(o2.rows, [[2, 3]])
        KV.barrier()

    def test_6_ignore_sparse(self):
        KV.init("d6", np.ones((3, 2), F32))
        rs = RowSparse.zeros((3, 2))
        KV.pull("d6", out=rs)
        self.assertEqual(rs.ids.size, 0)
        with self.assertRaisesRegex(PSchedError, "ignore_sparse=False"):
            KV.pull("d6", out=rs, ignore_sparse=False)
        KV.barrier()

    def test_7_mixed_key_types(self):
        with self.assertRaisesRegex(PSchedError, "Mixed key types"):
            KV.init(70, np.zeros(1, F32))   # str keys came first here...
        KV.barrier()

    def test_8_test_optimizer(self):
        KV.init("w8", np.ones(3, F32))
        KV.set_optimizer(psched.optimizer.create("test", rescale_grad=0.5))
        KV.push("w8", np.full(3, KV.rank + 1, F32))
        KV.wait("w8")
        KV.barrier()
        out = np.empty(3, F32)
        KV.pull("w8", out=out)
        np.testing.assert_array_equal(out, 1 + 0.5 * 3)
        KV.set_optimizer(None)
        KV.barrier()

    def test_9_init_rows_after_optimizer(self):
        # The rows would go through the servers' optimizer: rank 0
        # refuses them, the key is declared zero on every worker.
        KV.set_optimizer(psched.optimizer.SGD(learning_rate=0.5))
        v = RowSparse([1], ones((1, 2)), (2, 2))
        if KV.rank == 0:
            with self.assertRaisesRegex(PSchedError,
                                        "before set_optimizer"):
                KV.init("late", v)
        else:
            KV.init("late", v)
        out = np.empty((2, 2), F32)
        KV.row_sparse_pull("late", out=out, row_ids=[0, 1])
        np.testing.assert_array_equal(out, 0)
        KV.set_optimizer(None)
        KV.barrier()


if __name__ == "__main__":
    sys.exit(kvjob.main(sys.modules[__name__], TestLocal, TestDist,
                        ("dist_sync", "dist_async"),
                        extra_local=(TestDevice,)))
