#!/usr/bin/env bash
# `make bench`: the ps-lite comparison workload (docs/benchmarks.md), 1 server + 1 worker on loopback:
# push, pull and push+pull goodput for 4 KiB .. 64 MiB (40 keys per server,
# fewer above 1 MiB, all outstanding), then serial latency (one request
# outstanding) at 4 KiB and 1 MiB.  Every figure is the median of 3
# rounds; each round measures the plain-socket baselines (tcp1, tcp2: the
# same bytes per iteration with large writes over 1 or 2 streams; raw: the
# same request pattern), then psched's window (ps-bench --help, docs/benchmarks.md
# "Throughput and latency").
# PS_BENCH_SECONDS sets the window (4 windows per round).  psched runs over
# TCP like its baselines (PS_BENCH_TRANSPORT; auto would link the local
# cluster by shm, bench/shm-vs-tcp.sh compares the two).
set -euo pipefail
BUILD=${BUILD:-build}
B=$BUILD/bin/ps-bench
SECS=${PS_BENCH_SECONDS:-2}
T=${PS_BENCH_TRANSPORT:-tcp}
for mode in push pull pushpull; do
	echo "## $mode, throughput"
	"$B" --transport "$T" --mode "$mode" --size 4K,64K,1M,16M,64M --seconds "$SECS" --runs 3
	echo
done
for mode in push pull; do
	echo "## $mode, serial latency (1 request outstanding)"
	"$B" --transport "$T" --mode "$mode" --size 4K,1M --keys 1 --seconds "$SECS" --runs 3
	echo
done
