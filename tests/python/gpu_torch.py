#!/usr/bin/env python3
"""psched.torch training on a device, against a one-process reference.

    python3 tests/python/gpu_torch.py [--device cuda|cpu] [--servers S]

starts a job of S servers (default 2) x 2 workers with psched.launch.
Each worker trains a small CNN whose parameters live on the device with
DistributedOptimizer (SGD with momentum) on its half of every global
batch, then trains the same CNN in one process on the CPU over the whole
batches and compares the weights (float32; the sums differ only in their
order, so the tolerance is 1e-4 relative).  It prints the largest
difference per run.  With --device cuda and no usable GPU it exits 77
saying why; --device cpu runs the same script on the CPU (what this
machine can check of it).
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
if (ROOT / "python" / "psched").is_dir():
    sys.path.insert(0, str(ROOT / "python"))

NW = 2
BATCH = 32
STEPS = 10


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


def model_cls():
    from torch import nn

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            import torch
            torch.manual_seed(5)
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x):
            import torch.nn.functional as F
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc(x.flatten(1))
    return CNN


def data():
    import torch
    g = torch.Generator().manual_seed(11)
    x = torch.randn(BATCH * STEPS, 3, 16, 16, generator=g)
    y = torch.randint(0, 10, (BATCH * STEPS,), generator=g)
    return x, y


def sgd(params):
    import torch
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def train(model, opt, x, y, rank, size, device):
    import torch.nn.functional as F
    share = BATCH // size
    for s in range(STEPS):
        lo = s * BATCH + rank * share
        xb, yb = x[lo:lo + share].to(device), y[lo:lo + share].to(device)
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()


def job(args):
    import torch
    import psched.torch as pst

    torch.use_deterministic_algorithms(True, warn_only=True)
    if args.device == "cuda":
        import warnings
        from psched.kvstore import cuda_check
        why = cuda_check(0)
        if why is not None:
            print("FAIL: torch sees a GPU, but psched cannot use it: %s"
                  % why)
            return 1
        # Staging through host memory would mean the device path failed.
        warnings.filterwarnings("error", message="psched.torch: CUDA")
    dev = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    pst.init()
    r, n = pst.rank(), pst.size()
    x, y = data()
    CNN = model_cls()
    model = CNN().to(dev)
    opt = pst.DistributedOptimizer(sgd(model.parameters()),
                                   named_parameters=model.named_parameters())
    train(model, opt, x, y, r, n, dev)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    ref = CNN()
    ropt = sgd(ref.parameters())
    train(ref, ropt, x, y, 0, 1, torch.device("cpu"))
    worst, moved = 0.0, 0.0
    for (name, p), (_, q), (_, p0) in zip(model.named_parameters(),
                                          ref.named_parameters(),
                                          CNN().named_parameters()):
        p = p.detach().cpu()
        worst = max(worst, (p - q.detach()).abs().max().item())
        moved = max(moved, (p - p0.detach()).abs().max().item())
        if not torch.allclose(p, q.detach(), rtol=1e-4, atol=1e-5):
            print("FAIL rank %d: %s differs from the one-process reference "
                  "by %g" % (r, name, (p - q.detach()).abs().max().item()))
            return 1
    if moved < 1e-3:
        print("FAIL rank %d: training did not move the weights" % r)
        return 1
    print("rank %d device %s: weights equal the one-process reference, "
          "largest difference %.3g (moved %.3g)" % (r, dev, worst, moved),
          flush=True)
    pst.shutdown()
    return 0


def main():
    args = parse()
    if args.job:
        return job(args)
    try:
        import torch
    except ImportError as e:
        print("skip: no torch for %s: %s" % (sys.executable, e))
        return 77
    if args.device == "cuda" and not torch.cuda.is_available():
        print("skip: torch sees no CUDA device")
        return 77
    cmd = [sys.executable, "-m", "psched.launch", "-s", str(args.servers),
           "-w", str(NW), "--timeout", "240", "--", sys.executable,
           str(HERE), "--job", "--device", args.device,
           "--servers", str(args.servers)]
    env = dict(os.environ)
    if (ROOT / "python" / "psched").is_dir():
        env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + \
            env.get("PYTHONPATH", "")
    rc = subprocess.call(cmd, env=env)
    print("gpu_torch: %s, %d servers x %d workers: exit %d"
          % (args.device, args.servers, NW, rc))
    return rc


if __name__ == "__main__":
    sys.exit(main())
