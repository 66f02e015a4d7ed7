#!/usr/bin/env bash
# ps-lite's C++ API (include/ps/, docs/pslite.md) in real jobs on
# loopback, launched as ps-lite's local launcher script does: one binary
# (tests/pslite/pslite_check.cc) started as the scheduler, S servers and
# W workers by DMLC_ROLE, DMLC_NUM_SERVER/WORKER and DMLC_PS_ROOT_URI/
# PORT (the scheduler on port 0, its port read back from
# PS_PSLITE_PORT_FILE), plus the job secret.  Each mode checks its
# answers exactly (a failed CHECK aborts, a worker that printed nothing
# fails): the connection and the cluster's shape, KVServerDefaultHandle
# with Push / Pull / PushPull / ZPush / ZPull of several workers, a user
# handle that answers a round's pushes only once every worker pushed it
# (lens and cmd), SimpleApp requests to every server and from the
# scheduler to every node, a user slicer, big requests a handle keeps
# without copying until every worker sent all of them (then checked).
. "$(dirname "$0")/lib.sh"
PROG=$BUILD/tests/pslite/pslite_check
[ -x "$PROG" ] || die "$PROG not built (make tests)"

# run_job S W MODE: the job of MODE, every process within 60 s (x MULT)
run_job() {
	local s=$1 w=$2 mode=$3 i p pids=() tag="$3-$1x$2"
	rm -f "$TMP/port"
	DMLC_ROLE=scheduler DMLC_NUM_SERVER=$s DMLC_NUM_WORKER=$w \
		DMLC_PS_ROOT_PORT=0 PS_PSLITE_PORT_FILE=$TMP/port \
		"$PROG" "$mode" >"$TMP/$tag.sched.out" 2>"$TMP/$tag.sched.err" &
	pids+=($!); PIDS+=($!)
	for i in $(seq 1 $((300 * MULT))); do
		[ -s "$TMP/port" ] && break
		sleep 0.02
	done
	[ -s "$TMP/port" ] || die "$tag: the scheduler wrote no port"
	export DMLC_PS_ROOT_PORT=$(cat "$TMP/port")
	for i in $(seq 1 "$s"); do
		DMLC_ROLE=server DMLC_NUM_SERVER=$s DMLC_NUM_WORKER=$w \
			"$PROG" "$mode" >"$TMP/$tag.s$i.out" 2>"$TMP/$tag.s$i.err" &
		pids+=($!); PIDS+=($!)
	done
	for i in $(seq 1 "$w"); do
		DMLC_ROLE=worker DMLC_NUM_SERVER=$s DMLC_NUM_WORKER=$w \
			"$PROG" "$mode" >"$TMP/$tag.w$i.out" 2>"$TMP/$tag.w$i.err" &
		pids+=($!); PIDS+=($!)
	done
	for p in "${pids[@]}"; do
		wait_pid "$p" 60 || die "$tag: process $p exited $?"
	done
	if [ "$mode" != connection ]; then
		[ "$(cat "$TMP/$tag".w*.out | grep -c "^$mode: worker")" = "$w" ] ||
			die "$tag: not every worker reported: $(cat "$TMP/$tag".w*.out)"
	fi
	echo "ok: $mode, $s servers x $w workers"
}

run_job 1 1 connection
run_job 2 3 connection
run_job 1 1 kv
run_job 3 2 kv
run_job 1 2 handle
run_job 2 3 handle
run_job 2 2 simple
run_job 3 2 slicer
run_job 1 2 keep
run_job 2 3 keep
run_job 2 3 broadcast
cat "$TMP"/kv-3x2.w1.out "$TMP"/handle-2x3.w1.out
