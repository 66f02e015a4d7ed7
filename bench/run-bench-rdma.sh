#!/usr/bin/env bash
# `make bench-rdma`: inside ONE soft-RoCE VM, booted once
# (../shared/rdma-vm/run-in-rxe-vm), measure perftest's ib_write_bw on rxe0, then ps-bench
# push and pull over RDMA and over TCP, for 64 KiB, 1 MiB and 16 MiB, and
# print one table with the ratios.  Soft-RoCE under emulation is CPU-bound:
# the ratios matter, not the absolute figures.
#   PS_BENCH_SECONDS  window per ps-bench run [3]
#   PS_BENCH_ROUNDS   interleaved rounds, medians [3]
#   RDMA_VM_TIMEOUT   bound for the whole VM [1500]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RUNNER=${RDMA_VM_RUNNER:-$(cd .. && pwd)/shared/rdma-vm/run-in-rxe-vm}
export RDMA_VM_TIMEOUT=${RDMA_VM_TIMEOUT:-1500}
[ -x "$RUNNER" ] || { echo "bench-rdma: no VM runner at $RUNNER (set RDMA_VM_RUNNER)" >&2; exit 2; }
BUILD=$BUILD exec "$RUNNER" bash bench/rdma_vm_bench.sh
