#!/usr/bin/env bash
# Row-sparse keys (issue 18 part B) in real 2-server jobs on loopback
# (tests/helpers/rows_c.c), each worker checking every row it reads:
#  - 3 workers, dist_sync: exact sums over several steps with duplicate
#    ids, an empty push and rows on both servers, in float32 / float64 /
#    bfloat16; pushpulls; refusals; lazy sgd, adagrad and adam against a
#    reference.  Small partitions cut each server's rows into many pieces.
#  - the same with 256 bytes of credit, so a pushpull's pieces must give
#    their credit back while their answers wait for the other workers (or
#    the job hangs);
#  - the same with one worker: every piece's rows are final once folded,
#    so the servers fold and answer each pushpull piece in one pass, before
#    the step's other pieces are in;
#  - 3 workers, dist_async: unsorted pushes with duplicates (over shm read
#    by the servers in place), pushpulls answering running totals, exact
#    totals after a barrier.
# Runs under ASan and TSan too.  PS_TEST_LITE=1 (the soft-RoCE VM, the
# TSan build): the credit256 and async jobs only.
. "$(dirname "$0")/lib.sh"

# rows_job TAG NWORKERS [rows_c arguments]: a job of NWORKERS rows_c
# workers on 2 servers; every worker must pass.
rows_job() {
	local tag=$1 nw=$2 i p
	shift 2
	start_scheduler 2 "$nw"
	start_servers 2
	for i in $(seq "$nw"); do
		"$BUILD/tests/helpers/rows_c" "$@" >"$TMP/$tag.$i.out" 2>"$TMP/$tag.$i.err" &
		K[$i]=$!; PIDS+=(${K[$i]})
	done
	for i in $(seq "$nw"); do
		wait_pid "${K[$i]}" $((120 * MULT)) ||
			die "$tag: rows_c worker $i exited $?: $(tail -5 "$TMP/$tag.$i.err")"
	done
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" 30 || die "$tag: node $p exited $?"
	done
	[ "$(cat "$TMP/$tag".*.out | grep -c ': ok')" = "$nw" ] ||
		die "$tag: not every worker passed"
	echo "$tag:"; cat "$TMP/$tag".*.out
}

export PS_PARTITION_BYTES=256
if [ "${PS_TEST_LITE:-0}" = 1 ]; then
	# Slow hosts (the soft-RoCE VM under emulation): the pieces with
	# their credit and the unsorted in-place pushes, what a transport
	# carries; the folding paths run in full on tcp and shm.
	PS_CREDIT_BYTES=256 rows_job credit256 3
	PS_CREDIT_BYTES=0 PS_PARTITION_BYTES=0 rows_job async 3 async
	exit 0
fi
PS_CREDIT_BYTES=0 rows_job credit0 3
PS_CREDIT_BYTES=256 rows_job credit256 3
PS_CREDIT_BYTES=0 rows_job one-worker 1
PS_CREDIT_BYTES=0 PS_PARTITION_BYTES=0 rows_job async 3 async
exit 0
