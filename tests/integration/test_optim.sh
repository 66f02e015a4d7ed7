#!/usr/bin/env bash
# Server-side optimizers (issue 13): tests/python/test_optim.py checks
# every optimizer step by step against numpy references in a "local"
# store, state files (save, load, bad files), bfloat16; then jobs of
# 2 servers x 2 workers: bfloat16 sums, and Adam / centered RMSProp /
# momentum SGD saved mid-way on 2 servers and loaded on 3 servers with
# another partition size, continuing exactly as the uninterrupted run.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"

timeout $((600 * MULT)) "$PYTHON" tests/python/test_optim.py >"$TMP/optim.log" 2>&1
rc=$?
grep -E "^(==|FAIL|ERROR|Ran|OK)" "$TMP/optim.log"
[ $rc = 0 ] || { tail -n 40 "$TMP/optim.log"; die "test_optim.py exited $rc"; }
grep -q "== bf16 sums, 2 servers x 2 workers: exit 0" "$TMP/optim.log" || die "bf16 job did not pass"
[ "$(grep -c "== compression 2bit/1bit, dist_[a-z]*, 2 servers x 2 workers: exit 0" "$TMP/optim.log")" = 2 ] ||
	die "compression job did not pass"
n=$(grep -c "save (2 servers) / load (3 servers): ok" "$TMP/optim.log")
[ "$n" = 3 ] || die "only $n of 3 save/load jobs passed"

# Config switches under the optimizer: the scheduler changes partition
# and credit every 0.05 s while 2 workers x 2 servers run Adam for 40
# steps, saving and loading the states in between; the result must be
# the reference's (state is per element, so it maps by byte range).
export PS_VERBOSE=1 # the scheduler logs each committed config
start_scheduler 2 2 --config-cycle "256:1K,4K:16K,300:0,0:0,1K:4K" \
	--config-interval 0.05
start_servers 2
WPIDS=()
for r in 1 2; do
	DMLC_ROLE=worker PSCHED_TEST_PHASE=switch PSCHED_TEST_DIR=$TMP \
		timeout $((120 * MULT)) "$PYTHON" tests/python/test_optim.py \
		>"$TMP/sw$r.out" 2>"$TMP/sw$r.err" &
	WPIDS+=($!)
	PIDS+=($!)
done
for p in "${WPIDS[@]}"; do
	wait_pid "$p" $((150 * MULT)) || die "switch worker $p exited $?"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $?"
done
commits=$(grep -c "config epoch [0-9]*: partition" "$TMP/sched.err")
[ "$commits" -ge 3 ] || die "only $commits config switches committed during the Adam run"
"$PYTHON" tests/python/test_optim.py check-switch "$TMP/switch.npz" 2 ||
	die "Adam across config switches differs from the reference"
echo "ok: optimizers vs numpy, state files, bfloat16, compression, save/load across server counts, $commits config switches"
exit 0
