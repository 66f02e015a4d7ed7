#!/usr/bin/env python3
"""psched.torch tests.

    python3 tests/python/test_torch.py

runs the one-process tests ("local" store), then three real jobs started
with psched.launch (2 workers each): "worker" (DistributedOptimizer +
Adam on a small CNN against one process training on the concatenated
batches, fp16 and bf16 paths, accumulation, two models, broadcasts,
push_pull), "server_sgd" (ServerOptimizer with the servers' sgd against
torch.optim.SGD on the whole batches) and "server_adam" (the servers'
adam against MXNet's Adam rule, skipped with the reason when the library
has no server adam).  Every worker computes the one-process reference
itself and compares.  Exit 0 when all passed.
"""
import gc
import os
import subprocess
import sys
import unittest
from pathlib import Path

import torch
from torch import nn
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import psched  # noqa: E402
import psched.torch as pst  # noqa: E402
from psched import PSchedError  # noqa: E402

torch.set_num_threads(1)
NW = 2        # workers of the dist jobs
BATCH = 16    # global batch (NW shares)
STEPS = 12


def data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(BATCH * STEPS, 1, 8, 8, generator=g)
    y = (x.mean((1, 2, 3)) > 0).long() + (x[:, 0, 0, 0] > 0).long()
    return x, y


class CNN(nn.Module):
    def __init__(self, seed=3):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc1 = nn.Linear(4 * 6 * 6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        x = torch.tanh(self.conv(x))
        return self.fc2(torch.tanh(self.fc1(x.flatten(1))))


def batch(step, rank=None, size=1):
    """Rows of global batch @step; a worker's share when @rank given."""
    lo = step * BATCH
    if rank is None:
        return slice(lo, lo + BATCH)
    share = BATCH // size
    return slice(lo + rank * share, lo + (rank + 1) * share)


def train_reference(make_opt, steps=STEPS):
    x, y = data()
    model = CNN()
    opt = make_opt(model)
    for s in range(steps):
        rows = batch(s)
        opt.zero_grad()
        F.cross_entropy(model(x[rows]), y[rows]).backward()
        opt.step()
    return model


def assert_close(tc, model, ref, rtol, atol):
    for (n, p), (_, q) in zip(model.named_parameters(),
                              ref.named_parameters()):
        err = (p.detach() - q.detach()).abs().max().item()
        tc.assertTrue(torch.allclose(p.detach(), q.detach(), rtol=rtol,
                                     atol=atol),
                      "%s differs from the reference by %g" % (n, err))


def mx_adam_reference(lr, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0):
    """MXNet's Adam update, written here independently of the library:
    g += wd*w; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    w -= lr sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)."""
    class MxAdam:
        def __init__(self, model):
            self.params = list(model.parameters())
            self.m = [torch.zeros_like(p) for p in self.params]
            self.v = [torch.zeros_like(p) for p in self.params]
            self.t = 0

        def zero_grad(self):
            for p in self.params:
                p.grad = None

        @torch.no_grad()
        def step(self):
            self.t += 1
            c = lr * (1 - beta2 ** self.t) ** 0.5 / (1 - beta1 ** self.t)
            for p, m, v in zip(self.params, self.m, self.v):
                g = p.grad + wd * p
                m.mul_(beta1).add_((1 - beta1) * g)
                v.mul_(beta2).add_((1 - beta2) * g * g)
                p.sub_(c * m / (v.sqrt() + epsilon))
    return MxAdam


def server_has(name):
    try:
        psched.optimizer.create(name, learning_rate=0.1)
        return True
    except PSchedError:
        return False


class TestLocal(unittest.TestCase):
    """One process ("local" store): the API's contract and errors."""

    @classmethod
    def setUpClass(cls):
        pst.init()

    def test_a_basics(self):
        self.assertEqual((pst.size(), pst.rank()), (1, 0))
        t = torch.arange(5, dtype=torch.float64)
        out = pst.push_pull(t, name="local.basic")
        self.assertEqual(out.tolist(), t.tolist())
        self.assertIsNot(out, t)
        h = pst.push_pull_async_inplace(t, name="local.basic")
        self.assertTrue(pst.poll(h))
        self.assertIs(pst.synchronize(h), t)
        with self.assertRaisesRegex(PSchedError, "no push_pull handle"):
            pst.synchronize(h)

    def test_b_errors(self):
        with self.assertRaisesRegex(PSchedError, "dtype bool is not"):
            pst.push_pull(torch.ones(2, dtype=torch.bool), name="b")
        pst.push_pull(torch.ones(3), name="local.shape")
        with self.assertRaisesRegex(PSchedError,
                                    r"first used for float32 \(3,\)"):
            pst.push_pull(torch.ones(4), name="local.shape")
        with self.assertRaisesRegex(PSchedError, "not a torch.optim"):
            pst.DistributedOptimizer(object())
        m = CNN()
        with self.assertRaisesRegex(PSchedError, "are not in it"):
            pst.DistributedOptimizer(
                torch.optim.SGD(m.parameters(), lr=0.1),
                named_parameters=list(m.named_parameters())[1:])
        with self.assertRaisesRegex(PSchedError, "not a worker rank"):
            pst.broadcast_parameters(m.state_dict(), root_rank=1)

    def test_d_cuda(self):
        if not torch.cuda.is_available():
            self.skipTest("no CUDA device here: CUDA tensors by device "
                          "address (or staged) are not run")
        import warnings
        from psched.kvstore import cuda_check
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = torch.arange(4.0, device="cuda")
            out = pst.push_pull(t, name="local.cuda")
            self.assertEqual(out.device.type, "cuda")
            self.assertEqual(out.tolist(), t.tolist())
            # In place into a transposed (non-contiguous) tensor.
            m = torch.arange(6.0, device="cuda").reshape(2, 3).t()
            want = m.tolist()
            h = pst.push_pull_async_inplace(m, name="local.cuda_t")
            self.assertIs(pst.synchronize(h), m)
            self.assertEqual(m.tolist(), want)
        staged = [x for x in w if "staged through pinned" in str(x.message)]
        # The library's own device path whenever it can use the GPU.
        self.assertEqual(bool(staged), cuda_check(0) is not None,
                         [str(x.message) for x in staged])

    def test_e_device_issue(self):
        """What a CUDA push_pull hands the library (_issue_device): CPU
        tensors stand in for CUDA ones, the call is recorded, and the
        library's answer is written where it was told to write."""
        calls = []

        class KV:
            def issue_device(self, *a, **k):
                calls.append((a, k))

        class Ctx:
            kv = KV()

        class Stream:
            def synchronize(self):
                calls.append("sync")

        real = torch.cuda.current_stream
        torch.cuda.current_stream = lambda device=None: Stream()
        try:
            t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).t()
            h = pst._Handle()
            h.key, h.out, h.average, h.size = 7, t, True, 2
            pst._issue_device(Ctx(), h, t, t, priority=3)
        finally:
            torch.cuda.current_stream = real
        self.assertEqual(calls[0], "sync")  # the stream first
        (op, keys, ptrs, nbytes, dtype, _), kw = calls[1]
        src, dst = h.keep
        self.assertEqual((op, keys, nbytes), ("pushpull", [7], [12]))
        self.assertEqual(dtype, pst._np_bf16)
        self.assertTrue(src.is_contiguous())
        self.assertEqual(ptrs, [src.data_ptr()])
        self.assertEqual(src.tolist(), t.tolist())
        self.assertEqual(kw, {"out_ptrs": [dst.data_ptr()], "priority": 3})
        dst.copy_(src * 4)  # the library's sum of two workers
        want = (src * 2).tolist()
        self.assertIs(h.done(), t)
        self.assertEqual(t.tolist(), want)
        self.assertIsNone(h.keep)

    def test_c_bfloat16(self):
        t = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
        try:
            out = pst.push_pull(t, name="local.bf16")
        except PSchedError as e:
            # A library without bfloat16 refuses it with its own message
            # (not torch's TypeError).
            self.assertRegex(str(e), "dtype")
            self.skipTest("the library has no bfloat16 yet: %s" % e)
        self.assertEqual(out.dtype, torch.bfloat16)
        self.assertEqual(out.tolist(), t.tolist())


class TestWorker(unittest.TestCase):
    """Job "worker": DistributedOptimizer on every worker."""

    def setUp(self):
        self.r, self.n = pst.rank(), pst.size()

    def train(self, make_opt, compression=pst.Compression.none, passes=1,
              prefix=""):
        x, y = data()
        model = CNN()
        opt = pst.DistributedOptimizer(
            make_opt(model),
            named_parameters=[(prefix + n, p)
                              for n, p in model.named_parameters()],
            compression=compression, backward_passes_per_step=passes)
        for s in range(STEPS):
            rows = batch(s, self.r, self.n)
            opt.zero_grad()
            xs, ys = x[rows], y[rows]
            for part in range(passes):  # accumulate: split the share
                k = len(ys) // passes
                sub = slice(part * k, (part + 1) * k)
                # mean over the share = sum of the parts' means / passes
                (F.cross_entropy(model(xs[sub]), ys[sub]) / passes
                 ).backward()
            opt.step()
        return model, opt

    def test_0_ranks(self):
        self.assertEqual(self.n, NW)
        self.assertEqual(pst.local_size(), NW)   # psched.launch: one host
        self.assertEqual(pst.local_rank(), int(os.environ["DMLC_WORKER_ID"]))
        ranks = pst.push_pull(torch.tensor([1 << self.r]), average=False,
                              name="ranks")
        self.assertEqual(ranks.item(), 3)        # ranks 0 and 1, once each
        # The worker's own counters (docs/metrics.md) saw that request.
        st = pst.stats()
        self.assertGreater(st["requests_ok"], 0)
        self.assertGreater(st["tx_bytes"], 0)
        self.assertEqual(sum(c for _, c in st["latency_buckets"]),
                         st["requests_ok"] + sum(st["errors"].values()))

    def test_a_adam_matches_one_process(self):
        adam = lambda m: torch.optim.Adam(m.parameters(), lr=0.01)  # noqa
        model, _ = self.train(adam, prefix="adam.")
        ref = train_reference(adam)
        assert_close(self, model, ref, 1e-4, 2e-5)
        # Training changed the weights (the comparison is not vacuous).
        self.assertGreater((model.fc1.weight - CNN().fc1.weight).abs()
                           .max().item(), 1e-2)

    def test_b_accumulation_and_recreated_optimizer(self):
        sgd = lambda m: torch.optim.SGD(m.parameters(), lr=0.2,  # noqa
                                        momentum=0.9)
        model, opt = self.train(sgd, passes=2, prefix="acc.")
        ref = train_reference(sgd)
        assert_close(self, model, ref, 1e-4, 1e-5)
        # Same names once the old model is gone: the keys are reused.
        del model, opt
        gc.collect()
        model, _ = self.train(sgd, passes=2, prefix="acc.")
        assert_close(self, model, ref, 1e-4, 1e-5)

    def test_c_fp16_compression(self):
        sgd = lambda m: torch.optim.SGD(m.parameters(), lr=0.2)  # noqa
        model, _ = self.train(sgd, compression=pst.Compression.fp16,
                              prefix="fp16.")
        ref = train_reference(sgd)
        # float16 gradients: ~3 decimal digits per step.
        assert_close(self, model, ref, 1e-2, 2e-3)

    def test_d_push_pull_dtypes(self):
        base = torch.linspace(-3, 3, 50, dtype=torch.float64) * \
            (self.r + 1)
        want = torch.linspace(-3, 3, 50, dtype=torch.float64) * 1.5
        for dt, tol in ((torch.float32, 1e-6), (torch.float64, 1e-12),
                        (torch.float16, 2e-3)):
            out = pst.push_pull(base.to(dt), name="pp.%s" % dt)
            self.assertEqual(out.dtype, dt)
            self.assertTrue(torch.allclose(out.double(), want, rtol=tol,
                                           atol=tol), (dt, out))
        out = pst.push_pull(torch.full((3,), self.r + 1, dtype=torch.int64),
                            average=False, name="pp.int")
        self.assertEqual(out.tolist(), [3, 3, 3])
        try:
            out = pst.push_pull(base.to(torch.bfloat16), name="pp.bf16")
        except PSchedError as e:
            self.assertRegex(str(e), "dtype")
            print("bfloat16: the library refuses it: %s" % e)
        else:  # bfloat16 keeps ~2-3 significant digits
            self.assertTrue(torch.allclose(out.double(), want, rtol=2e-2,
                                           atol=2e-2), out)
        hs = [pst.push_pull_async(torch.full((1000,), float(i + self.r)),
                                  name="pp.async.%d" % i,
                                  priority=i) for i in range(4)]
        for i, h in enumerate(hs):
            self.assertEqual(pst.synchronize(h)[0].item(), i + 0.5)

    def test_e_two_models_and_broadcast(self):
        x, y = data()
        g, d = CNN(seed=10 + self.r), CNN(seed=20 + self.r)
        # Rank 1's G and rank 0's D everywhere.
        pst.broadcast_parameters(g.state_dict(), root_rank=1)
        pst.broadcast_parameters(list(d.named_parameters()), root_rank=0)
        for mine, seed in ((g, 11), (d, 20)):
            assert_close(self, mine, CNN(seed=seed), 0, 0)
        og = pst.DistributedOptimizer(
            torch.optim.Adam(g.parameters(), lr=0.01),
            named_parameters=[("G." + n, p) for n, p in g.named_parameters()])
        od = pst.DistributedOptimizer(
            torch.optim.SGD(d.parameters(), lr=0.1),
            named_parameters=[("D." + n, p) for n, p in d.named_parameters()])
        for s in range(3):
            rows = batch(s, self.r, self.n)
            for opt, m in ((og, g), (od, d)):
                opt.zero_grad()
                F.cross_entropy(m(x[rows]), y[rows]).backward()
                opt.step()
        # Adam state differs per rank only if averaging failed; then
        # broadcast rank 1's state and check it arrived.
        og.param_groups[0]["lr"] = 0.5 if self.r == 1 else 0.01
        pst.broadcast_optimizer_state(og, root_rank=1)
        self.assertEqual(og.param_groups[0]["lr"], 0.5)
        st = og.state_dict()["state"]
        self.assertEqual(len(st), 6)
        both = pst.push_pull(st[0]["exp_avg"], average=False, name="st")
        self.assertTrue(torch.equal(both, 2 * st[0]["exp_avg"]))
        # The same parameter names for another live model are refused.
        with self.assertRaisesRegex(PSchedError, "another live model"):
            pst.DistributedOptimizer(
                torch.optim.SGD(d.parameters(), lr=0.1),
                named_parameters=[("G." + n, p)
                                  for n, p in d.named_parameters()])

    def test_f_zero_grad_in_flight(self):
        x, y = data()
        m = CNN()
        opt = pst.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=0.1),
            named_parameters=[("zg." + n, p) for n, p in m.named_parameters()])
        F.cross_entropy(m(x[:4]), y[:4]).backward()
        with self.assertRaisesRegex(PSchedError, "before step"):
            opt.zero_grad()
        opt.step()
        opt.zero_grad()
        self.assertEqual(m.fc1.weight.grad.abs().sum().item(), 0)
        # A re-created optimizer of the same model reuses its keys.
        w = m.fc2.weight.detach().clone()
        opt = pst.DistributedOptimizer(
            torch.optim.SGD(m.parameters(), lr=0.1),
            named_parameters=[("zg." + n, p) for n, p in m.named_parameters()])
        m.fc2.weight.grad = None
        seen = []  # this backward's gradient (the same on every rank)
        hk = m.fc2.weight.register_hook(lambda t: seen.append(t.clone()))
        F.cross_entropy(m(x[:4]), y[:4]).backward()
        hk.remove()
        g = seen[0]
        opt.step()
        self.assertTrue(torch.allclose(m.fc2.weight.detach(), w - 0.1 * g,
                                       atol=1e-6))
        # kv misuse surfaces as PSchedError with the library's message
        with self.assertRaisesRegex(PSchedError, "root_rank 5"):
            pst.broadcast_parameters(m.state_dict(), root_rank=5)


    def test_g_buckets(self):
        """Small gradients travel in buckets (one key each): the same
        weights, bit for bit, as with each gradient alone."""
        sgd = lambda m: torch.optim.SGD(m.parameters(), lr=0.2)  # noqa
        os.environ["PSCHED_TORCH_BUCKET_BYTES"] = "0"
        try:
            alone, opt0 = self.train(sgd, prefix="alone.")
        finally:
            del os.environ["PSCHED_TORCH_BUCKET_BYTES"]
        self.assertEqual(opt0._ps_buckets, [])
        os.environ["PSCHED_TORCH_BUCKET_BYTES"] = "256"
        try:
            bucketed, opt = self.train(sgd, prefix="bucket.")
        finally:
            del os.environ["PSCHED_TORCH_BUCKET_BYTES"]
        # fc1.weight (9 KiB) goes alone; the five others in two buckets
        # of at most 256 bytes, in the order backward makes them.
        inb = [opt._ps_names[p] for b in opt._ps_buckets for p in b.params]
        self.assertNotIn("bucket.fc1.weight", inb)
        self.assertEqual(sorted(inb), sorted(
            "bucket." + n for n, _ in CNN().named_parameters()
            if n != "fc1.weight"))
        self.assertEqual(inb[0], "bucket.fc2.bias")
        self.assertGreater(len(opt._ps_buckets), 1)
        for b in opt._ps_buckets:
            self.assertLessEqual(b.numel * 4, 256)
        for (n, a), (_, b) in zip(alone.named_parameters(),
                                  bucketed.named_parameters()):
            self.assertTrue(torch.equal(a, b), n)
        ref = train_reference(sgd)
        assert_close(self, bucketed, ref, 1e-4, 1e-5)


class TestServer(unittest.TestCase):
    """Jobs "server_sgd" / "server_adam": ServerOptimizer."""

    def run_server(self, make_ref, **opt):
        x, y = data()
        model = CNN()
        so = pst.ServerOptimizer(model, **opt)
        r, n = pst.rank(), pst.size()
        for s in range(STEPS):
            rows = batch(s, r, n)
            so.zero_grad()
            F.cross_entropy(model(x[rows]), y[rows]).backward()
            self.assertIsNone(model.fc2.weight.grad)  # servers took it
            so.step()
        so.synchronize()
        ref = train_reference(make_ref)
        return model, ref

    def test_server_sgd(self):
        model, ref = self.run_server(
            lambda m: torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.9,
                                      weight_decay=1e-3),
            optimizer="sgd", learning_rate=0.2, momentum=0.9, wd=1e-3)
        assert_close(self, model, ref, 1e-4, 1e-5)
        self.assertGreater((model.fc1.weight - CNN().fc1.weight).abs()
                           .max().item(), 1e-2)
        with self.assertRaisesRegex(PSchedError, "servers apply"):
            pst.push_pull(torch.ones(2), name="x")

    def test_server_adam(self):
        if not server_has("adam"):
            self.skipTest("the library's servers have no 'adam' optimizer "
                          "yet (psched.optimizer.create('adam') refuses)")
        model, ref = self.run_server(
            mx_adam_reference(0.01), optimizer="adam", learning_rate=0.01)
        assert_close(self, model, ref, 1e-3, 1e-4)


JOBS = {"worker": ["TestWorker"], "server_sgd": ["TestServer.test_server_sgd"],
        "server_adam": ["TestServer.test_server_adam"]}


def run_job_tests(job):
    pst.init()
    suite = unittest.defaultTestLoader.loadTestsFromNames(
        JOBS[job], sys.modules[__name__])
    res = unittest.TextTestRunner(verbosity=2).run(suite)
    pst.shutdown()
    return 0 if res.wasSuccessful() else 1


def main():
    job = os.environ.get("PSCHED_TORCH_JOB")
    if job:
        return run_job_tests(job)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(TestLocal)
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    pst.shutdown()
    for job in JOBS:
        print("== %s: 2 servers x %d workers" % (job, NW), flush=True)
        rc = subprocess.call(
            [sys.executable, "-m", "psched.launch", "-s", "2", "-w",
             str(NW), "--timeout", str(int(os.environ.get("PS_JOB_TIMEOUT",
                                                          "300"))),
             "--", sys.executable, __file__],
            env=dict(os.environ, PSCHED_TORCH_JOB=job))
        print("== %s: exit %d" % (job, rc), flush=True)
        ok = ok and rc == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
