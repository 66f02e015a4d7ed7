#!/usr/bin/env bash
# slow
# psched-launch --launcher slurm on a real Slurm: Debian's slurm-wlm
# (slurmctld + slurmd) configured by this test on this machine with its own
# config, ports, state and spool directories, authenticated by a munged the
# test starts with a key it generates.  `sbatch --wait` runs
# examples/slurm/psched.sbatch (1 scheduler in the batch step + an srun of
# 2 servers and 2 workers); the job must end COMPLETED with every
# worker's aggregates verified exactly, and a job whose worker fails must
# end FAILED naming it; from salloc, the scheduler runs as an srun step
# on the first node.  Every daemon and file is removed on exit.  Slurm
# and munge are installed here when missing (heavy; only this test needs
# them).  Exit 77 without root.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (slurmd runs jobs as their user)"; exit 77; }
bash scripts/install-deps.sh slurmctld slurmd slurm-client munge >"$TMP/deps.log" 2>&1 ||
	{ cat "$TMP/deps.log"; echo "cannot install slurm-wlm and munge"; exit 77; }

ABS_BIN=$(cd "$BIN" && pwd)
REPO=$(pwd)
DAEMONS=()
slurm_cleanup() {
	local p
	for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null; done
	sleep 0.5
	for p in "${DAEMONS[@]}"; do kill -9 "$p" 2>/dev/null; done
	cleanup
}
trap slurm_cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
node=$(hostname -s)
mkdir -p "$TMP/state" "$TMP/spool" "$TMP/munge"
chmod 700 "$TMP/munge"
mungekey --create --keyfile "$TMP/munge/key" >/dev/null 2>&1 ||
	dd if=/dev/urandom of="$TMP/munge/key" bs=1024 count=1 2>/dev/null
chmod 600 "$TMP/munge/key"
/usr/sbin/munged -F --force --key-file "$TMP/munge/key" --socket "$TMP/munge/sock" \
	--pid-file "$TMP/munge/pid" --log-file "$TMP/munge/log" \
	--seed-file "$TMP/munge/seed" >"$TMP/munged.out" 2>&1 &
DAEMONS+=($!)
for t in $(seq 1 $((100 * MULT))); do [ -S "$TMP/munge/sock" ] && break; sleep 0.1; done
[ -S "$TMP/munge/sock" ] || { cat "$TMP/munged.out" "$TMP/munge/log"; die "munged did not start"; }

cat >"$TMP/slurm.conf" <<EOF
ClusterName=pstest$$
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$TMP/munge/sock
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=ps Nodes=$node Default=YES MaxTime=30 State=UP
EOF
export SLURM_CONF=$TMP/slurm.conf
/usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$TMP/slurmctld.out" 2>&1 &
DAEMONS+=($!)
/usr/sbin/slurmd -D -N "$node" -f "$SLURM_CONF" >"$TMP/slurmd.out" 2>&1 &
DAEMONS+=($!)
up=0
for t in $(seq 1 $((300 * MULT))); do
	if sinfo -h -n "$node" -o %T 2>/dev/null | grep -qx idle; then up=1; break; fi
	sleep 0.1
done
[ $up = 1 ] || { tail -n 20 "$TMP"/slurm*.log "$TMP"/slurm*.out; sinfo; die "the slurm node did not come up idle"; }

export PATH=$REPO/bin:$ABS_BIN:$PATH
unset DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NUM_SERVER DMLC_NUM_WORKER PS_JOB_TOKEN
cd "$TMP" || die "cd $TMP"

# job_state ID: COMPLETED, FAILED, ... (from scontrol while slurmctld keeps it)
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }

# 1. The example batch script, 2 servers + 2 workers.
out=$(timeout $((180 * MULT)) sbatch --parsable --wait --ntasks=4 -o "$TMP/job1.out" \
	"$REPO/examples/slurm/psched.sbatch" ps-worker --steps 10 --keys 3 --sizes 1,4,4K,1M 2>"$TMP/sbatch1.err")
rc=$?
jid=${out%%;*}
[ $rc = 0 ] || { cat "$TMP/sbatch1.err" "$TMP/job1.out"; tail -n 20 "$TMP/slurmd.log"; die "sbatch --wait exited $rc (job $jid: $(job_state "$jid"))"; }
[ "$(job_state "$jid")" = COMPLETED ] || die "job $jid ended $(job_state "$jid")"
for w in 0 1; do
	grep -q "^\[worker $w@$node\] ps-worker rank .* verified" "$TMP/job1.out" ||
		{ cat "$TMP/job1.out"; die "worker $w did not verify its sums"; }
done
for s in 0 1; do
	grep -q "^\[server $s@$node\] .*listening on" "$TMP/job1.out" ||
		{ cat "$TMP/job1.out"; die "server $s did not run as a task"; }
done
grep -q "PS_JOB_TOKEN" "$TMP/job1.out" && die "the job's secret shows in the job's output"
echo "ok sbatch job $jid: $(grep -h verified "$TMP/job1.out" | tr '\n' ' ')"

# 2. A worker that fails: the job fails, naming it.
cat >"$TMP/failer.sh" <<'EOF'
#!/bin/sh
[ "$DMLC_WORKER_ID" = 1 ] && { echo "worker 1 gives up"; exit 5; }
exec ps-worker --steps 0 --seconds 120 --keys 1 --sizes 4K
EOF
chmod +x "$TMP/failer.sh"
out=$(timeout $((180 * MULT)) sbatch --parsable --wait --ntasks=4 -o "$TMP/job2.out" \
	"$REPO/examples/slurm/psched.sbatch" "$TMP/failer.sh" 2>"$TMP/sbatch2.err")
rc=$?
jid=${out%%;*}
[ $rc = 5 ] || { cat "$TMP/job2.out"; die "sbatch --wait exited $rc, want 5 (the failed worker's status)"; }
grep -q "worker 1@$node\] worker 1 exited with status 5" "$TMP/job2.out" ||
	{ cat "$TMP/job2.out"; die "the failed worker was not named"; }
pgrep -f "$TMP/failer.sh" >/dev/null && die "workers left running after the failed job"
echo "ok failing worker named, job $jid $(job_state "$jid") (sbatch exit $rc)"

# 3. From salloc (the launcher outside the nodes' steps): the scheduler
# goes to the first node as an srun step of its own.
timeout $((180 * MULT)) salloc --ntasks=4 psched-launch --launcher slurm -s 2 -- \
	ps-worker --steps 5 --keys 2 --sizes 4,4K >"$TMP/job3.out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$TMP/job3.out"; die "salloc job exited $rc"; }
grep -q "scheduler on $node through srun" "$TMP/job3.out" || { cat "$TMP/job3.out"; die "the scheduler did not run as a step"; }
[ "$(grep -c '^\[worker [01]@.*verified' "$TMP/job3.out")" = 2 ] || { cat "$TMP/job3.out"; die "salloc job: workers did not verify"; }
echo "ok salloc job, scheduler as an srun step on $node"
exit 0
