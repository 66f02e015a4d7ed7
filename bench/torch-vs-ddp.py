#!/usr/bin/env python3
"""psched.torch against torch.nn.parallel.DistributedDataParallel (gloo).

    python3 bench/torch-vs-ddp.py [--models mlp,cnn,transformer]
        [--workers 2] [--servers 1] [--rounds 3] [--steps 20] [--warmup 5]
        [--buckets 1M[,0,...]]

For each round and model it trains the same model on the same batches
twice on this machine, once with DDP over gloo (W processes) and once
with psched.torch.DistributedOptimizer (psched.launch: S servers, W
workers), the order alternating by round.  Each run reports rank 0's
steps/s over the steps after the warm-up and a digest of its final
weights; the table gives the median of each side, the median of the
per-round ratios psched / DDP with their range, and the largest
difference between the two sides' final weights (both sum the same
gradients, so only the order of float additions differs).  `make
bench-torch` runs it with the defaults.  --buckets runs psched.torch once
per PSCHED_TORCH_BUCKET_BYTES value in each round (0: every gradient
alone), each against the same round's DDP run.  Exit 1 when a run fails
or the weights differ by more than 1e-4.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
BATCH = 32


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,cnn,transformer")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--buckets", default="1M",
                    help="PSCHED_TORCH_BUCKET_BYTES values to run")
    ap.add_argument("--job", choices=("ddp", "psched"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    return ap.parse_args()


def make_model(name):
    import torch
    from torch import nn
    torch.manual_seed(3)
    if name == "mlp":  # large layers: 12.6 M parameters
        return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(),
                             nn.Linear(4096, 1536), nn.ReLU(),
                             nn.Linear(1536, 1024), nn.ReLU(),
                             nn.Linear(1024, 10)), (1024,)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a = nn.Conv2d(c, c, 3, padding=1)
            self.b = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return torch.relu(x + self.b(torch.relu(self.a(x))))

    if name == "cnn":  # small ResNet-style: many small tensors
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                             Block(32), Block(32), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                             Block(64), Block(64), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(64, 10)), (3, 32, 32)
    if name == "transformer":  # encoder blocks on 32 tokens
        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerEncoderLayer(128, 4, 512,
                                                   dropout=0.0,
                                                   batch_first=True)
                self.enc = nn.TransformerEncoder(layer, 3)
                self.head = nn.Linear(128, 10)

            def forward(self, x):
                return self.head(self.enc(x).mean(1))
        return Enc(), (32, 128)
    raise SystemExit("unknown model %r (mlp, cnn, transformer)" % name)


def batches(shape, steps, world):
    import torch
    g = torch.Generator().manual_seed(17)
    n = BATCH * world * steps
    return (torch.randn((n,) + shape, generator=g),
            torch.randint(0, 10, (n,), generator=g))


def train(args, rank, world, model, opt, wait=None):
    import torch
    import torch.nn.functional as F
    x, y = batches(args.in_shape, args.steps, world)
    t0 = None
    for s in range(args.steps):
        if s == args.warmup:
            if wait:
                wait()
            t0 = time.perf_counter()
        lo = (s * world + rank) * BATCH
        opt.zero_grad()
        F.cross_entropy(model(x[lo:lo + BATCH]), y[lo:lo + BATCH]).backward()
        opt.step()
    if wait:
        wait()
    dt = time.perf_counter() - t0
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return (args.steps - args.warmup) / dt, flat


def job_ddp(args):
    import torch
    import torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, args.in_shape = make_model(args.model)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    rate, flat = train(args, rank, world, ddp, opt, wait=dist.barrier)
    if rank == 0:
        torch.save(flat, args.out + ".pt")
        Path(args.out).write_text(json.dumps({"rate": rate}))
    dist.destroy_process_group()


def job_psched(args):
    import torch
    import psched.torch as pst
    pst.init()
    rank, world = pst.rank(), pst.size()
    model, args.in_shape = make_model(args.model)
    opt = pst.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
        named_parameters=model.named_parameters())
    w = torch.zeros(1)
    rate, flat = train(args, rank, world, model, opt,
                       wait=lambda: pst.push_pull(w, name="bench.barrier"))
    if rank == 0:
        torch.save(flat, args.out + ".pt")
        Path(args.out).write_text(json.dumps({"rate": rate}))
    pst.shutdown()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, side, model, out, bucket=None):
    me = [sys.executable, str(HERE), "--job", side, "--model", model,
          "--out", out, "--steps", str(args.steps), "--warmup",
          str(args.warmup)]
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(ROOT / "python") + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    if side == "psched":
        env["PSCHED_TORCH_BUCKET_BYTES"] = str(bucket)
        rc = subprocess.call([sys.executable, "-m", "psched.launch", "-s",
                              str(args.servers), "-w", str(args.workers),
                              "--timeout", "600", "--"] + me, env=env)
    else:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   WORLD_SIZE=str(args.workers))
        procs = [subprocess.Popen(me, env=dict(env, RANK=str(r)))
                 for r in range(args.workers)]
        rc = max(p.wait() for p in procs)
    if rc:
        raise SystemExit("%s run of %s exited %d" % (side, model, rc))
    return json.loads(Path(out).read_text())["rate"]


def main():
    args = parse()
    if args.job:
        import torch
        torch.set_num_threads(1)
        (job_ddp if args.job == "ddp" else job_psched)(args)
        return 0
    import torch
    tmp = tempfile.mkdtemp(prefix="psched-torch-bench.")
    models = args.models.split(",")
    buckets = [parse_bytes(b) for b in args.buckets.split(",")]
    variants = ["psched@%d" % b for b in buckets]
    rates = {m: {v: [] for v in ["ddp"] + variants} for m in models}
    worst = {m: {v: 0.0 for v in variants} for m in models}
    for r in range(args.rounds):
        for m in models:
            sides = ["ddp"] + variants
            if r % 2:
                sides.reverse()
            flat = {}
            for side in sides:
                out = os.path.join(tmp, "%s-%s-%d.json" % (m, side, r))
                kind, _, b = side.partition("@")
                rates[m][side].append(run(args, kind, m, out,
                                          int(b) if b else None))
                flat[side] = torch.load(out + ".pt")
            for v in variants:
                d = (flat["ddp"] - flat[v]).abs().max().item()
                worst[m][v] = max(worst[m][v], d)
                print("round %d %s: ddp %.2f steps/s, psched (buckets %s) "
                      "%.2f steps/s, weights differ by %.2g"
                      % (r + 1, m, rates[m]["ddp"][-1], v[7:],
                         rates[m][v][-1], d), flush=True)
    print("\n| model | W | S | buckets | DDP steps/s | psched.torch steps/s | "
          "psched / DDP (median [range]) | largest weight difference |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for m in models:
        for v in variants:
            ratios = [p / d for p, d in zip(rates[m][v], rates[m]["ddp"])]
            print("| %s | %d | %d | %s | %.2f | %.2f | %.2f [%.2f-%.2f] | "
                  "%.1e |" % (m, args.workers, args.servers, v[7:],
                              statistics.median(rates[m]["ddp"]),
                              statistics.median(rates[m][v]),
                              statistics.median(ratios), min(ratios),
                              max(ratios), worst[m][v]))
            ok = ok and worst[m][v] <= 1e-4
    if not ok:
        print("FAIL: the two sides' final weights differ by more than 1e-4")
    return 0 if ok else 1


def parse_bytes(t):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = t.strip().upper()
    if t and t[-1] in mult:
        return int(t[:-1]) * mult[t[-1]]
    return int(t)


if __name__ == "__main__":
    sys.exit(main())
