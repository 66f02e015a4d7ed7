#!/usr/bin/env python3
"""Server-side optimizers, optimizer state files and bfloat16, checked
against the numpy references of tests/python/ref_optim.py.

    python3 tests/python/test_optim.py            # local, then dist jobs
    python3 tests/python/test_optim.py local      # in-process tests only

"local" runs every optimizer (and its variants) step by step against its
reference for float32, float64, float16 and bfloat16 keys, saves the
states mid-way, loads them into a new store and checks the continuation,
and refuses bad parameters and bad files.  The dist part runs jobs with
psched.launch: 2 servers x 2 workers push rank-dependent gradients whose
sum the reference optimizer sees, save mid-way, and a second job with 3
servers (other byte ranges per server) and another partition size loads
the file and must continue exactly as the reference does.
"""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psched  # noqa: E402
from psched import PSchedError  # noqa: E402
from ref_optim import Ref, RefCompression  # noqa: E402

# (optimizer, params): every rule and the variants that change its state.
CASES = [
    ("sgd", dict(learning_rate=0.1)),
    ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01,
                 rescale_grad=0.5, clip_gradient=0.7)),
    ("nag", dict(learning_rate=0.05, momentum=0.8, wd=0.02)),
    ("nag", dict(learning_rate=0.05)),
    ("adam", dict(learning_rate=0.01, wd=0.01)),
    ("adam", dict(learning_rate=0.02, beta1=0.8, beta2=0.99, epsilon=1e-6,
                  clip_gradient=1.0, rescale_grad=0.25)),
    ("adamw", dict(learning_rate=0.01, wd=0.05)),
    ("adamw", dict(learning_rate=0.01, wd=0.05, correct_bias=False)),
    ("rmsprop", dict(learning_rate=0.01, wd=0.01)),
    ("rmsprop", dict(learning_rate=0.01, centered=True, gamma1=0.95,
                     gamma2=0.8, clip_weights=0.9)),
    ("adagrad", dict(learning_rate=0.1, wd=0.01)),
    ("signum", dict(learning_rate=0.01, momentum=0.9, wd_lh=0.1, wd=0.01)),
    ("signum", dict(learning_rate=0.01, momentum=0.0)),
]

# Tolerance by stored type: the library computes in double and rounds to
# the stored type once per step, as the reference does; the bound allows
# the last-bit differences of sqrt/pow orderings to grow over the steps.
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-11, 1e-12),
       "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}
NPT = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
       "bfloat16": psched.bfloat16}


def to_np(x, kind):
    if kind == "bfloat16":
        return psched.to_bfloat16(x)
    return np.asarray(x).astype(NPT[kind])


def from_np(a, kind):
    if kind == "bfloat16":
        return psched.from_bfloat16(a).astype(np.float64)
    return a.astype(np.float64)


def grad_of(step, n, rank=0):
    i = np.arange(n)
    return (np.sin(i * 0.37 + step * 1.3 + rank) * 1.5 +
            0.1 * (rank + 1)).astype(np.float64)


def weights0(n):
    return (np.cos(np.arange(n) * 0.11) * 0.8).astype(np.float64)


def check_close(tc, got, want, kind, what):
    rtol, atol = TOL[kind]
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        i = int(np.argmax(np.abs(got - want)))
        tc.fail("%s: element %d is %r, reference %r (%s, rtol %g)"
                % (what, i, got[i], want[i], kind, rtol))


class TestLocal(unittest.TestCase):
    N = 37

    def run_case(self, name, params, kind, steps=6, mp=False):
        kv = psched.KVStore("local")
        opt = psched.optimizer.create(name, multi_precision=mp, **params)
        kv.set_optimizer(opt)
        w0 = weights0(self.N)
        kv.init("w", to_np(w0, kind))
        ref = Ref(name, to_np(w0, kind) if kind != "bfloat16" else
                  psched.from_bfloat16(to_np(w0, kind)), kind=kind,
                  multi_precision=mp, **params)
        out = np.zeros(self.N, NPT[kind])
        for s in range(steps):
            g = to_np(grad_of(s, self.N), kind)
            kv.push("w", g)
            kv.pull("w", out=out)
            ref.step(from_np(g, kind))
            check_close(self, from_np(out, kind), ref.w, kind,
                        "%s %s step %d" % (name, params, s))
        kv.close()

    def test_every_optimizer_float32_float64(self):
        for name, params in CASES:
            for kind in ("float32", "float64"):
                with self.subTest(opt=name, params=params, kind=kind):
                    self.run_case(name, params, kind)

    def test_half_keys_and_multi_precision(self):
        for name, params in CASES[:1] + CASES[4:5] + CASES[8:9]:
            for kind in ("float16", "bfloat16"):
                for mp in (False, True):
                    with self.subTest(opt=name, kind=kind, mp=mp):
                        self.run_case(name, params, kind, mp=mp)

    def test_multi_precision_differs_from_half_state(self):
        """Small steps vanish in float16 weights without master copies:
        the two modes must really differ (and each match its ref)."""
        res = {}
        for mp in (False, True):
            kv = psched.KVStore("local")
            kv.set_optimizer(psched.optimizer.SGD(learning_rate=1e-4,
                                                  multi_precision=mp))
            kv.init(0, np.full(8, 1.0, np.float16))
            out = np.zeros(8, np.float16)
            for _ in range(20):
                kv.push(0, np.full(8, 1.0, np.float16))
            kv.pull(0, out=out)
            res[mp] = out.astype(np.float64)
            kv.close()
        self.assertEqual(res[False][0], 1.0)  # each step rounds away
        self.assertLess(res[True][0], 0.999)  # the master copy moves

    def test_lr_and_wd_mult(self):
        kv = psched.KVStore("local")
        opt = psched.optimizer.SGD(learning_rate=0.1, momentum=0.5, wd=0.1)
        opt.set_lr_mult({"a": 0.5, "c": 0.0})
        opt.set_wd_mult({"a": 2.0})
        kv.set_optimizer(opt)
        refs = {}
        for k, lm, wm in (("a", 0.5, 2.0), ("c", 0.0, 1.0), ("b", 1.0, 1.0)):
            kv.init(k, np.ones(5, np.float32))
            refs[k] = Ref("sgd", np.ones(5), learning_rate=0.1, momentum=0.5,
                          wd=0.1, lr_mult=lm, wd_mult=wm)
        out = np.zeros(5, np.float32)
        for s in range(4):
            for k, r in refs.items():
                g = grad_of(s, 5).astype(np.float32)
                kv.push(k, g)
                kv.pull(k, out=out)
                r.step(g)
                check_close(self, out.astype(np.float64), r.w, "float32",
                            "key %r step %d" % (k, s))
        kv.pull("c", out=out)
        self.assertTrue((out == 1).all(), out)  # lr_mult 0: unchanged
        kv.close()

    def test_save_load_continue(self):
        """Save after 3 steps; run 3 more; a new store with the same
        optimizer loads the file and its 3 steps equal the reference's."""
        path = os.path.join(tempfile.mkdtemp(), "st.bin")
        for name, params in CASES:
            for kind in ("float32", "float16"):
                with self.subTest(opt=name, params=params, kind=kind):
                    self.save_load_case(name, params, kind, path)

    def save_load_case(self, name, params, kind, path):
        n = 23
        mp = kind == "float16"
        mk = lambda: psched.optimizer.create(name, multi_precision=mp,
                                             **params)
        kv = psched.KVStore("local")
        kv.set_optimizer(mk())
        kv.init(7, to_np(weights0(n), kind))
        ref = Ref(name, to_np(weights0(n), kind), kind=kind,
                  multi_precision=mp, **params)
        out = np.zeros(n, NPT[kind])
        for s in range(3):
            g = to_np(grad_of(s, n), kind)
            kv.push(7, g)
            ref.step(from_np(g, kind))
        kv.pull(7, out=out)
        mid = out.copy()
        kv.save_optimizer_states(path)
        for s in range(3, 6):
            g = to_np(grad_of(s, n), kind)
            kv.push(7, g)
            ref.step(from_np(g, kind))
        kv.pull(7, out=out)
        check_close(self, from_np(out, kind), ref.w, kind, "first run")
        first = out.copy()
        kv.close()
        kv = psched.KVStore("local")
        kv.set_optimizer(mk())
        kv.init(7, mid)
        kv.load_optimizer_states(path)
        for s in range(3, 6):
            kv.push(7, to_np(grad_of(s, n), kind))
        kv.pull(7, out=out)
        # The same computation from the same state: bit for bit.
        self.assertTrue((out.view(np.uint8) == first.view(np.uint8)).all(),
                        "continuation after load differs: %r vs %r"
                        % (out, first))
        kv.close()

    def test_state_kept_across_lr_change(self):
        kv = psched.KVStore("local")
        o = psched.optimizer.Adam(learning_rate=0.01)
        kv.set_optimizer(o)
        kv.init(1, np.ones(4))
        ref = Ref("adam", np.ones(4), kind="float64", learning_rate=0.01)
        out = np.zeros(4)
        for s in range(4):
            if s == 2:  # a learning-rate schedule: moments must survive
                o.learning_rate = 0.005
                kv.set_optimizer(o)
                ref.lr = 0.005
            g = grad_of(s, 4)
            kv.push(1, g)
            ref.step(g)
        kv.pull(1, out=out)
        check_close(self, out, ref.w, "float64", "after lr change")
        kv.close()

    def test_bad_parameters_refused(self):
        kv = psched.KVStore("local")
        bad = [
            (lambda: psched.optimizer.create("ftrl"), "'ftrl' is not "
             "supported"),
            (lambda: psched.optimizer.create("adam", momentum=0.9),
             "adam has no parameter 'momentum'"),
            (lambda: kv.set_optimizer(psched.optimizer.Adam(beta1=1.0)),
             "beta1 1 is not in [0, 1)"),
            (lambda: kv.set_optimizer(psched.optimizer.RMSProp(
                epsilon=0)), "epsilon 0 is not a finite number > 0"),
            (lambda: kv.set_optimizer(psched.optimizer.SGD(
                learning_rate=np.nan)), "learning_rate nan"),
            (lambda: kv.set_optimizer(psched.optimizer.Signum(
                wd_lh=-0.5)), "wd_lh -0.5"),
            (lambda: kv.set_optimizer(psched.optimizer.NAG(
                momentum=1.5)), "momentum 1.5"),
        ]
        o = psched.optimizer.SGD()
        o.set_lr_mult({"x": -1.0})
        bad.append((lambda: kv.set_optimizer(o), "lr_mult -1"))
        for fn, msg in bad:
            with self.assertRaises(PSchedError) as cm:
                fn()
            self.assertIn(msg, str(cm.exception))
            self.assertEqual(cm.exception.code, -22)
        # The store still works, with no optimizer installed.
        kv.init(0, np.ones(3, np.float32))
        kv.push(0, np.full(3, 4, np.float32))
        out = np.zeros(3, np.float32)
        kv.pull(0, out=out)
        self.assertTrue((out == 4).all())
        kv.close()

    def test_bad_state_files_refused(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "st.bin")
        kv = psched.KVStore("local")
        kv.set_optimizer(psched.optimizer.Adam())
        kv.init(0, np.ones(64, np.float32))
        kv.push(0, np.ones(64, np.float32))
        kv.save_optimizer_states(path)
        blob = open(path, "rb").read()
        self.assertEqual(blob[:8], b"PSCHOPTS")
        cases = {
            "flip": blob[:100] + bytes([blob[100] ^ 1]) + blob[101:],
            "short": blob[:-9],
            "magic": b"XSCHOPTS" + blob[8:],
            "empty": b"",
        }
        for what, data in cases.items():
            p = os.path.join(d, what)
            open(p, "wb").write(data)
            with self.assertRaises(PSchedError, msg=what) as cm:
                kv.load_optimizer_states(p)
            self.assertTrue(any(s in str(cm.exception) for s in (
                "checksum", "not a version", "too short")), str(cm.exception))
        with self.assertRaises(PSchedError) as cm:
            kv.load_optimizer_states(os.path.join(d, "missing"))
        self.assertIn("cannot open", str(cm.exception))
        kv.set_optimizer(psched.optimizer.SGD(momentum=0.9))
        with self.assertRaises(PSchedError) as cm:
            kv.load_optimizer_states(path)
        self.assertIn("saved under 'adam'", str(cm.exception))
        kv.close()
        kv = psched.KVStore("local")  # key of another size
        kv.set_optimizer(psched.optimizer.Adam())
        kv.init(0, np.ones(32, np.float32))
        with self.assertRaises(PSchedError) as cm:
            kv.load_optimizer_states(path)
        self.assertIn("key 0 was saved as 256 bytes of float32", str(
            cm.exception))
        kv.close()

    def test_compression_local_refused(self):
        kv = psched.KVStore("local")
        with self.assertRaises(PSchedError) as cm:
            kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
        self.assertIn("dist stores", str(cm.exception))
        kv.close()

    def test_bfloat16_values(self):
        x = np.array([1.0, 1.00390625, 1.01171875, -3.5, 1e-40, 3e38,
                      np.inf, -np.inf], np.float64)
        b = psched.to_bfloat16(x)
        back = psched.from_bfloat16(b)
        # 1 + 2^-8 is a tie: even (1.0); 1 + 3 * 2^-8 rounds up.
        self.assertEqual(list(back[:4]), [1.0, 1.0, 1.015625, -3.5])
        self.assertTrue(np.isinf(back[6]) and back[7] < 0)
        kv = psched.KVStore("local")
        kv.init("b", b)
        out = np.zeros(8, psched.bfloat16)
        kv.pull("b", out=out)
        self.assertEqual(out.tobytes(), b.tobytes())
        with self.assertRaises(PSchedError) as cm:
            kv.push("b", np.zeros(8, np.uint16))
        self.assertIn("uint16 is not supported", str(cm.exception))
        kv.close()


# -- dist: run as a worker of a psched.launch job ------------------------

DIST_KEYS = [("a", 1001), ("b", 17), ("e5", 4099)]
DIST_OPTS = [("adam", dict(learning_rate=0.01, wd=0.01)),
             ("rmsprop", dict(learning_rate=0.01, centered=True)),
             ("sgd", dict(learning_rate=0.05, momentum=0.9))]


def dist_worker():
    """Phase "save": 3 steps, save, 3 more steps, write the result.
    Phase "load": start from the mid weights, load, 3 steps, compare.
    Phase "bf16": bfloat16 sums against float32."""
    phase = os.environ["PSCHED_TEST_PHASE"]
    tmp = os.environ["PSCHED_TEST_DIR"]
    kv = psched.KVStore(os.environ.get("PSCHED_TEST_KVTYPE", "dist_sync"))
    rank, nw = kv.rank, kv.num_workers
    if phase == "bf16":
        vals = {k: np.linspace(-3, 3, n) * (rank + 1) + 0.01 * rank
                for k, n in DIST_KEYS}
        for k, n in DIST_KEYS:
            kv.init(k, psched.to_bfloat16(np.zeros(n)))
        for k, n in DIST_KEYS:
            kv.push(k, psched.to_bfloat16(vals[k]))
        for k, n in DIST_KEYS:
            out = np.zeros(n, psched.bfloat16)
            kv.pull(k, out=out)
            # Reference: the rounded pushes summed in float32, rounded.
            parts = [psched.from_bfloat16(psched.to_bfloat16(
                np.linspace(-3, 3, n) * (r + 1) + 0.01 * r))
                for r in range(nw)]
            want = psched.from_bfloat16(psched.to_bfloat16(
                np.sum(parts, axis=0, dtype=np.float32)))
            got = psched.from_bfloat16(out)
            assert np.array_equal(got, want), (k, got, want)
            exact = np.sum([np.linspace(-3, 3, n) * (r + 1) + 0.01 * r
                            for r in range(nw)], axis=0)
            assert np.allclose(got, exact, rtol=2 ** -7, atol=0.05), k
        kv.close()
        print("bf16 ok rank %d" % rank)
        return 0
    if phase == "cmp":
        return dist_compression(kv)
    if phase == "switch":
        return dist_switch(kv)
    oname, params = DIST_OPTS[int(os.environ["PSCHED_TEST_OPT"])]
    kv.set_optimizer(psched.optimizer.create(oname, **params))
    path = os.path.join(tmp, "states.%s" % oname)
    mid = None
    if phase == "load":
        mid = np.load(os.path.join(tmp, "mid.%s.npz" % oname))
    for k, n in DIST_KEYS:
        kv.init(k, (mid["k%s" % k] if mid is not None else
                    weights0(n)).astype(np.float32))
    if phase == "load":
        kv.load_optimizer_states(path)
    first = 3 if phase == "load" else 0
    for s in range(first, 6):
        for k, n in DIST_KEYS:
            kv.push(k, grad_of(s, n, rank).astype(np.float32))
        if phase == "save" and s == 2:
            res = {}
            for k, n in DIST_KEYS:
                out = np.zeros(n, np.float32)
                kv.pull(k, out=out)
                res["k%s" % k] = out
            kv.save_optimizer_states(path)
            if rank == 0:
                np.savez(os.path.join(tmp, "mid.%s.npz" % oname), **res)
    res = {}
    for k, n in DIST_KEYS:
        out = np.zeros(n, np.float32)
        kv.pull(k, out=out)
        res["k%s" % k] = out
    if rank == 0:
        np.savez(os.path.join(tmp, "%s.%s.npz" % (phase, oname)), **res)
    kv.close()
    return 0


CMP_CASES = [("2bit", 0.5), ("1bit", 0.0), ("2bit", 0.25)]


def dist_compression(kv):
    """Every worker compresses its pushes; each step's pulled aggregate
    (no optimizer: it replaces the value) must equal the sum of every
    worker's reference quantisation, bit for bit, over several steps;
    then bad settings are refused and the store still works."""
    rank, nw = kv.rank, kv.num_workers
    sync = kv.type != "dist_async"
    for ci, (ctype, th) in enumerate(CMP_CASES):
        kv.set_gradient_compression({"type": ctype, "threshold": th})
        keys = [("c%d%s" % (ci, k), n) for k, n in DIST_KEYS]
        for k, n in keys:
            kv.init(k, np.zeros(n, np.float32))
        refs = {(k, r): RefCompression(ctype, th, n) for k, n in keys
                for r in range(nw)}
        total = {k: np.zeros(n, np.float32) for k, n in keys}
        for s in range(5):
            for k, n in keys:
                kv.push(k, (grad_of(s, n, rank) * 0.4).astype(np.float32))
            if not sync:  # async: every push adds to the value at once
                for k, n in keys:
                    for r in range(nw):
                        total[k] += refs[(k, r)].quantize((grad_of(
                            s, n, r) * 0.4).astype(np.float32))
                continue
            for k, n in keys:
                out = np.zeros(n, np.float32)
                kv.pull(k, out=out)
                want = np.zeros(n, np.float32)
                for r in range(nw):  # the servers add in rank order or
                    # not: these sums of +-t, 0, +-1 are exact in float32
                    want += refs[(k, r)].quantize(
                        (grad_of(s, n, r) * 0.4).astype(np.float32))
                assert np.array_equal(out, want), (
                    ctype, k, s, np.flatnonzero(out != want)[:5])
        if not sync:
            kv.wait()
            kv.barrier()  # every worker's pushes are applied
            for k, n in keys:
                out = np.zeros(n, np.float32)
                kv.pull(k, out=out)
                assert np.array_equal(out, total[k]), (
                    ctype, k, np.flatnonzero(out != total[k])[:5])
            kv.barrier()
    for bad, msg in (({"type": "3bit"}, "'3bit' is not supported"),
                     ({"type": "2bit", "threshold": -1}, "threshold -1"),
                     ({"type": "2bit", "thresh": 1}, "unknown parameter")):
        try:
            kv.set_gradient_compression(bad)
        except PSchedError as e:
            assert msg in str(e), (bad, str(e))
        else:
            raise AssertionError("%r was accepted" % (bad,))
    kv.set_gradient_compression({"type": "none"})
    kv.init("plain", np.zeros(5, np.float32))
    kv.push("plain", np.full(5, 0.3, np.float32))
    kv.wait()
    kv.barrier()
    out = np.zeros(5, np.float32)
    kv.pull("plain", out=out)
    assert np.allclose(out, 0.3 * nw), out
    kv.close()
    print("compression ok rank %d" % rank)
    return 0


SWITCH_STEPS = 40


def dist_switch(kv):
    """Run by tests/integration/test_optim.sh under a scheduler that
    switches the partition size every few hundredths of a second: Adam
    over SWITCH_STEPS steps, states saved after step 14 and loaded back
    after step 24, so states are kept, saved and loaded across several
    partition sizes; rank 0 writes the final weights."""
    import time
    rank, nw = kv.rank, kv.num_workers
    tmp = os.environ["PSCHED_TEST_DIR"]
    kv.set_optimizer(psched.optimizer.Adam(learning_rate=0.01, wd=0.01))
    for k, n in DIST_KEYS:
        kv.init(k, weights0(n).astype(np.float32))
    path = os.path.join(tmp, "switch.states")
    saved = {}
    s = 0
    replayed = False
    while s < SWITCH_STEPS:
        for k, n in DIST_KEYS:
            kv.push(k, grad_of(s, n, rank).astype(np.float32))
        for k, n in DIST_KEYS:
            out = np.zeros(n, np.float32)
            kv.pull(k, out=out)
            if s == 14:
                saved[k] = out
        if s == 14:
            kv.save_optimizer_states(path)
        if s == 24 and not replayed:
            # The states go back to those after step 14 (moments and
            # update counts); the weights stay: the reference does so.
            kv.load_optimizer_states(path)
            replayed = True
        time.sleep(0.01)
        s += 1
    res = {}
    for k, n in DIST_KEYS:
        out = np.zeros(n, np.float32)
        kv.pull(k, out=out)
        res["k%s" % k] = out
    if rank == 0:
        np.savez(os.path.join(tmp, "switch.npz"), **res)
    kv.close()
    return 0


def switch_reference(nw):
    """The weights dist_switch must end with: Adam from step 0; at step
    24 the states go back to those after step 14 (the weights do not)."""
    out = {}
    for k, n in DIST_KEYS:
        r = Ref("adam", weights0(n).astype(np.float32), learning_rate=0.01,
                wd=0.01)
        snap = None
        for s in range(SWITCH_STEPS):
            g = np.sum([grad_of(s, n, rank).astype(np.float32)
                        for rank in range(nw)], axis=0, dtype=np.float32)
            r.step(g)
            if s == 14:
                snap = ([x.copy() for x in r.s], r.t)
            if s == 24:
                r.s, r.t = [x.copy() for x in snap[0]], snap[1]
        out["k%s" % k] = r.w
    return out


def dist_reference(oname, params, nw):
    out = {}
    for k, n in DIST_KEYS:
        r = Ref(oname, weights0(n).astype(np.float32), **params)
        for s in range(6):
            g = np.sum([grad_of(s, n, rank).astype(np.float32)
                        for rank in range(nw)], axis=0, dtype=np.float32)
            r.step(g)
        out["k%s" % k] = r.w
    return out


def launch(env, servers, workers, extra=()):
    cmd = [sys.executable, "-m", "psched.launch", "-s", str(servers), "-w",
           str(workers), "--timeout", "240", "--", sys.executable,
           __file__]
    return subprocess.call(cmd, env=env)


def run_dist():
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"),
               PSCHED_TEST_DIR=tmp)
    env.setdefault("PS_REQUEST_TIMEOUT", "60")
    status = 0
    env["PSCHED_TEST_PHASE"] = "bf16"
    rc = launch(env, 2, 2)
    print("== bf16 sums, 2 servers x 2 workers: exit %d" % rc, flush=True)
    status = status or rc
    env["PSCHED_TEST_PHASE"] = "cmp"
    env["PS_PARTITION_BYTES"] = "300"  # chunks of 75 elements: codes
    for kvtype in ("dist_sync", "dist_async"):  # chunks start mid-byte
        env["PSCHED_TEST_KVTYPE"] = kvtype
        rc = launch(env, 2, 2)
        print("== compression 2bit/1bit, %s, 2 servers x 2 workers: "
              "exit %d" % (kvtype, rc), flush=True)
        status = status or rc
    env.pop("PSCHED_TEST_KVTYPE")
    for i, (oname, params) in enumerate(DIST_OPTS):
        env["PSCHED_TEST_OPT"] = str(i)
        env["PSCHED_TEST_PHASE"] = "save"
        env["PS_PARTITION_BYTES"] = "1024"
        rc = launch(env, 2, 2)
        # Load into another layout: 3 servers (other byte ranges) and
        # another partition size.
        env["PSCHED_TEST_PHASE"] = "load"
        env["PS_PARTITION_BYTES"] = "300"
        rc2 = launch(env, 3, 2)
        ok = rc == 0 and rc2 == 0
        if ok:
            want = dist_reference(oname, params, 2)
            a = np.load(os.path.join(tmp, "save.%s.npz" % oname))
            b = np.load(os.path.join(tmp, "load.%s.npz" % oname))
            for key in want:
                if not np.allclose(a[key], want[key], rtol=1e-5,
                                   atol=1e-6):
                    print("FAIL %s %s: dist run differs from the numpy "
                          "reference by %g" % (oname, key, np.max(np.abs(
                              a[key] - want[key]))))
                    ok = False
                if not np.array_equal(a[key], b[key]):
                    print("FAIL %s %s: the run loaded into 3 servers "
                          "differs from the uninterrupted one by %g"
                          % (oname, key, np.max(np.abs(a[key] - b[key]))))
                    ok = False
        print("== %s save (2 servers) / load (3 servers): %s"
              % (oname, "ok" if ok else "FAIL"), flush=True)
        status = status or (0 if ok else 1)
    return status


def main():
    if os.environ.get("DMLC_ROLE") == "worker":
        return dist_worker()
    if sys.argv[1:2] == ["check-switch"]:
        want = switch_reference(int(sys.argv[3]))
        got = np.load(sys.argv[2])
        bad = [k for k in want if not np.allclose(got[k], want[k],
                                                 rtol=1e-5, atol=1e-6)]
        for k in bad:
            print("FAIL %s: differs from the reference by %g" % (
                k, np.max(np.abs(got[k] - want[k]))))
        print("switch check: %s" % ("FAIL" if bad else "ok"))
        return 1 if bad else 0
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(TestLocal)
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    status = 0 if ok else 1
    if sys.argv[1:2] != ["local"]:
        status = status or run_dist()
    return status


if __name__ == "__main__":
    sys.exit(main())
