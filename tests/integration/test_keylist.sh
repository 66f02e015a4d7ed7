#!/usr/bin/env bash
# Key lists (PSCHED_FAMILY_KEYLIST requests) in real clusters on loopback: 1 server
# + 1 worker, 2 + 2 and 3 + 3; every worker checks exact sums step by step
# against a model of all workers' pushes, pulls of subsets, pushpull,
# pipelined steps, empty lists, and refusals with nothing stored
# (tests/helpers/keylist.c).  The last cluster's lists are large enough
# for the servers to adopt the first one's buffer instead of copying it.
# PS_TEST_LITE=1 (the soft-RoCE VM): the clusters whose messages differ
# by transport only.
. "$(dirname "$0")/lib.sh"
run() { # servers workers keys
	local i
	start_scheduler "$1" "$2"
	start_servers "$1"
	KL=()
	for i in $(seq 1 "$2"); do
		"$BUILD/tests/helpers/keylist" "$3" >"$TMP/kl$i.out" 2>"$TMP/kl$i.err" &
		KL[$i]=$!; PIDS+=(${KL[$i]})
	done
	for i in $(seq 1 "$2"); do
		wait_pid "${KL[$i]}" 120 || die "$1+$2: keylist worker $i exited $?: $(tail -n 5 "$TMP/kl$i.err")"
	done
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "$1+$2: node $p exited $?"; done
	[ "$(cat "$TMP"/kl*.out | grep -c ' ok ')" = "$2" ] || die "$1+$2: not every worker said ok"
	grep -q "length, but\|holds it with" "$TMP"/server*.err || die "$1+$2: server did not log the length refusal"
	cat "$TMP"/kl*.out
	# sanitizer builds: a report fails the test even if the run passed
	if grep -l "runtime error\|Sanitizer" "$TMP"/kl*.err "$TMP"/server*.err; then
		die "$1+$2: sanitizer report (above)"
	fi
	rm -f "$TMP"/kl*.out "$TMP"/kl*.err "$TMP"/server*.err
}
# kl_bench W RUNS: ps-bench --keys-per-request with 2 servers and W
# workers, every pull checked; W ending in p ("3p"): keys sent plain
# (PS_KEYLIST_PACK=0)
kl_bench() {
	PS_KEYLIST_PACK=$([ "${1%p}" != "$1" ] && echo 0 || echo 1) \
	"$BUILD/bin/ps-bench" --servers 2 --workers "${1%p}" --keys-per-request 400000 --runs "$2" >"$TMP/klb.out" 2>&1 ||
		die "ps-bench --keys-per-request 2+$1: $(grep -v '^#' "$TMP/klb.out" | tail -n 5)"
	if grep -l "runtime error\|Sanitizer" "$TMP/klb.out"; then
		die "ps-bench --keys-per-request 2+$1: sanitizer report"
	fi
}
if [ "${PS_TEST_LITE:-0}" = 1 ]; then
	# Slow hosts (the soft-RoCE VM under emulation, the TSan build)
	# check what a
	# transport carries: lists in several pieces, cached and packed
	# (2 + 2), over 1 MiB per server (adopted), and every list carrying
	# its keys unpacked, 3 workers merging; the store's and the cache's
	# other paths do not depend on the transport and run in full on
	# tcp and shm.
	run 2 2 600
	run 2 2 400000
	PS_KEYLIST_PACK=0 PS_KEYLIST_CACHE=0 run 2 3 400000
	kl_bench 2 1
	echo "key lists: all clusters exact (lite)"
	exit 0
fi
run 1 1 600
run 2 2 600
run 3 3 1001
# lists of over 1 MiB per server: the first lands in a buffer the empty
# store adopts as its keys and sums (server/kvs_klapply.c)
run 2 2 400000
# big arrays in transparent huge pages (server store and receive buffers,
# worker cache: common/bigmem.c; plain pages where THP is off)
PS_KEYLIST_HUGEPAGES=1 run 2 2 600000
# the worker-side cache off: every list carries its keys
PS_KEYLIST_CACHE=0 run 2 2 600
# keys packed on the wire (PS_KEYLIST_PACK, the default) and not, with
# the cache off (every list carries them), over TCP too; lists big
# enough to be adopted, unpacked in place (server/kvs_klapply.c)
PS_KEYLIST_PACK=0 run 2 2 600
PS_KEYLIST_PACK=0 PS_KEYLIST_CACHE=0 run 2 3 400000
PS_KEYLIST_CACHE=0 run 2 3 400000
PS_TRANSPORT=tcp PS_KEYLIST_CACHE=0 run 2 2 400000
# dmlc's benchmark shape (ps-bench --keys-per-request checks every pull):
# each worker's keys disjoint and interleaved with the others', so the
# first step's second list stays a second key run on each server and a
# third worker's list merges the runs (server/kvs_klapply.c)
for w in 2 3 3p; do
	kl_bench "$w" 3
done
echo "key lists: all clusters exact"
