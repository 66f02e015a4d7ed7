#!/usr/bin/env bash
# psched-launch --launcher mpi with Debian's Open MPI (openmpi-bin,
# installed here when missing) on localhost:
#   1. the outer launcher runs the scheduler and one mpirun of 2 servers +
#      2 workers (roles from OMPI_COMM_WORLD_RANK): exact sums, output
#      prefixed by role and rank, exit 0;
#   2. a user's own `mpirun -np 5 psched-launch --launcher mpi` (rank 0 =
#      scheduler on --port, PS_JOB_TOKEN exported with -x): exact sums;
#      without a token every rank refuses to start, saying why;
#   3. PMI_RANK/PMI_SIZE (MPICH, Intel MPI) give the roles as well;
#   4. a failing worker ends the job with its status, naming it.
. "$(dirname "$0")/lib.sh"
bash scripts/install-deps.sh openmpi-bin >"$TMP/deps.log" 2>&1 ||
	{ cat "$TMP/deps.log"; echo "cannot install openmpi-bin"; exit 77; }
command -v mpirun >/dev/null || { echo "no mpirun"; exit 77; }
ABS_BIN=$(cd "$BIN" && pwd)
export PATH=$PWD/bin:$ABS_BIN:$PATH
unset DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NUM_SERVER DMLC_NUM_WORKER PS_JOB_TOKEN
MPIRUN="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
T=$((120 * MULT))
WORK=(ps-worker --steps 6 --keys 3 --sizes 1,4,4K,1M)

check_sums() { # log
	local w
	for w in 0 1; do
		grep -q "^\[worker $w@[^]]*\] ps-worker rank .* verified" "$1" ||
			{ cat "$1"; die "worker $w did not verify its sums ($1)"; }
	done
}

# 1. outer launcher
timeout $T psched-launch --launcher mpi -s 2 -w 2 --mpirun "$MPIRUN" -- "${WORK[@]}" >"$TMP/m1.log" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$TMP/m1.log"; die "mpi launcher exited $rc"; }
check_sums "$TMP/m1.log"
grep -q "^\[server 1@" "$TMP/m1.log" || die "no output of server 1"
echo "ok outer mpirun: $(grep -h verified "$TMP/m1.log" | tr '\n' ' ')"

# 2. the user's own mpirun: rank 0 is the scheduler on a free port
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
PS_JOB_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n') timeout $T $MPIRUN -np 5 -x PS_JOB_TOKEN -x PATH \
	psched-launch --launcher mpi -s 2 --port "$port" -- "${WORK[@]}" >"$TMP/m2.log" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$TMP/m2.log"; die "mpirun of psched-launch exited $rc"; }
check_sums "$TMP/m2.log"
grep -q "^\[scheduler 0@" "$TMP/m2.log" || { cat "$TMP/m2.log"; die "rank 0 was not the scheduler"; }
timeout $T $MPIRUN -np 5 -x PATH psched-launch --launcher mpi -s 2 --port "$port" -- "${WORK[@]}" >"$TMP/m2b.log" 2>&1
rc=$?
[ $rc = 2 ] || { cat "$TMP/m2b.log"; die "ranks without a token exited $rc, want 2"; }
grep -q "export PS_JOB_TOKEN or PS_JOB_TOKEN_FILE" "$TMP/m2b.log" || { cat "$TMP/m2b.log"; die "no reason given"; }
echo "ok user's mpirun (rank 0 scheduler on port $port); refused without a token"

# 3. PMI_RANK / PMI_SIZE: five processes started by hand, as an MPICH
# launcher would.
pids=()
for r in 0 1 2 3 4; do
	PMI_RANK=$r PMI_SIZE=5 PS_JOB_TOKEN=pmi-test-secret \
		psched-launch --launcher mpi -s 2 --port "$port" -- "${WORK[@]}" >"$TMP/pmi$r.log" 2>&1 &
	pids+=($!)
	PIDS+=($!)
done
for r in 0 1 2 3 4; do
	wait_pid "${pids[$r]}" 120 || { cat "$TMP"/pmi*.log; die "PMI rank $r exited $?"; }
done
cat "$TMP"/pmi*.log >"$TMP/pmi.log"
check_sums "$TMP/pmi.log"
grep -q "^\[server 0@" "$TMP/pmi1.log" || die "PMI rank 1 was not server 0"
grep -q "^\[worker 1@" "$TMP/pmi4.log" || die "PMI rank 4 was not worker 1"
echo "ok PMI_RANK roles"

# 4. a failing worker
cat >"$TMP/failer.sh" <<'EOS'
#!/bin/sh
[ "$DMLC_WORKER_ID" = 1 ] && exit 6
exec ps-worker --steps 0 --seconds 120 --keys 1 --sizes 4K
EOS
chmod +x "$TMP/failer.sh"
timeout $T psched-launch --launcher mpi -s 2 -w 2 --grace 2 --mpirun "$MPIRUN" -- "$TMP/failer.sh" >"$TMP/m4.log" 2>&1
rc=$?
[ $rc = 6 ] || { cat "$TMP/m4.log"; die "job with a failing worker exited $rc, want 6"; }
grep -q "worker 1 exited with status 6" "$TMP/m4.log" || { cat "$TMP/m4.log"; die "the failed worker was not named"; }
pgrep -f "$TMP/failer.sh" >/dev/null && die "workers left running"
echo "ok failing worker: $(grep 'psched-launch:' "$TMP/m4.log")"
exit 0
