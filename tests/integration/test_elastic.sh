#!/usr/bin/env bash
# Elastic membership (docs/elastic.md): a worker leaves a running job on
# purpose (psched_leave(), ps-worker --leave-after) and the others go on.
# 2 servers x 3 workers, ps-worker's exact-sum checks: every step a
# worker verifies must equal the sum over that step's members (the
# leaver's pushes up to its last step, only the others' after it), and
# the job must finish.  Servers that still counted 3 pushes would stall
# the others' steps; ones that summed a wrong set fail the check.
# PS_TEST_SEED picks the step it leaves after (printed).
. "$(dirname "$0")/lib.sh"

seed=${PS_TEST_SEED:-$(( $(date +%s) % 1000 ))}
steps=12
leave=$(( seed % 6 + 1 ))
echo "seed $seed: worker 3 leaves after step $leave of $steps"

export PS_VERBOSE=1
args=(--steps "$steps" --keys 2 --sizes 4,1001,64K,1M --seed "$seed"
	--timeout $((20000 * MULT)))
# leave_job WHAT SCHEDULER-ARGS...: the C job, worker 3 leaving
leave_job() {
	local what=$1 i
	shift
	start_scheduler 2 3 "$@"
	start_servers 2
	start_workers 2 "${args[@]}"
	"$BIN/ps-worker" "${args[@]}" --leave-after "$leave" \
		>"$TMP/worker3.out" 2>"$TMP/worker3.err" &
	WORKER_PIDS+=($!)
	PIDS+=($!)
	job_verified "$what, leave after step $leave" 120
	grep -q "left the job after $leave steps" "$TMP/worker3.out" ||
		die "$what: worker 3 did not say it left: $(cat "$TMP/worker3.out")"
	for i in 1 2; do
		grep -q "rank .*: $steps steps x" "$TMP/worker$i.out" ||
			die "$what: worker $i did not run all $steps steps: $(cat "$TMP/worker$i.out")"
	done
	grep -q "left the job: 2 workers push each step from step $((leave + 1))" \
		"$TMP/sched.err" ||
		die "$what: the scheduler did not commit the membership from step $((leave + 1)): $(grep -i left "$TMP/sched.err")"
	echo "ok $what: worker 3 left after step $leave; 2 workers verified $steps steps" \
		"($(grep -c 'config epoch [0-9]*: partition' "$TMP/sched.err") switches committed," \
		"$(grep -c 'called off' "$TMP/sched.err") called off)"
}
leave_job "no other switch"
# Size switches every 10 ms around the leave: one open when it comes is
# called off, none starts until the membership is committed.
leave_job "config cycle" --config-cycle "64K:64K,4K:16K,1M:0" \
	--config-interval 0.01

# The same from Python: KVStore.leave(), and psched.torch.join() (whose
# averages must divide by the members left) where torch is installed.
. "$(dirname "$0")/pylib.sh"
py_job() { # WHAT ARGS...
	local what=$1 i p
	shift
	start_scheduler 2 3
	start_servers 2
	WORKER_PIDS=()
	for i in 1 2 3; do
		DMLC_ROLE=worker "$PYTHON" tests/python/elastic_leave.py "$@" \
			>"$TMP/py$i.out" 2>"$TMP/py$i.err" &
		WORKER_PIDS+=($!)
		PIDS+=($!)
	done
	for p in "${WORKER_PIDS[@]}" "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" 120 || die "$what: process $p exited $?: $(cat "$TMP"/py*.err)"
	done
	[ "$(cat "$TMP"/py*.out | grep -c "verified $2 steps")" = 2 ] &&
		grep -q "left after $1 steps" "$TMP"/py*.out ||
		die "$what: $(cat "$TMP"/py*.out)"
	echo "ok $what: one worker left after step $1, two verified $2 steps"
}
py_job "KVStore.leave()" "$leave" 8
if PSCHED_NO_INSTALL=1 have_torch && [ -z "${PY_SANITIZED:-}" ]; then
	py_job "psched.torch.join()" "$leave" 8 --torch
else
	echo "psched.torch.join() not run: python3-torch is not installed"
fi
exit 0
