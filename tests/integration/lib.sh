# Shared helpers for the integration tests: start a real cluster on
# loopback (scheduler on port 0, read back), run ps-worker, kill
# everything on exit.  Every wait is bounded; PS_TEST_TIMEOUT_MULT scales.
set -u
BUILD=${BUILD:-build}
BIN=$BUILD/bin
MULT=${PS_TEST_TIMEOUT_MULT:-1}
TMP=$(mktemp -d /tmp/psched-test.XXXXXX)
PIDS=()
# PS_TEST_ROOT_URI: an RDMA netdev's address when PS_TRANSPORT=rdma
# (rdma_cm cannot use loopback), see test_rdma_vm.sh.
export DMLC_PS_ROOT_URI=${PS_TEST_ROOT_URI:-127.0.0.1}
export PS_CONNECT_TIMEOUT=${PS_CONNECT_TIMEOUT:-$((30 * MULT))}
# A fresh job secret per test run, as every launcher makes one (docs/security.md
# "The job secret"); tests of authentication itself unset or change it.
if [ -z "${PS_JOB_TOKEN:-}" ] && [ -z "${PS_JOB_TOKEN_FILE:-}" ]; then
	PS_JOB_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
	export PS_JOB_TOKEN
fi

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

die() { echo "FAIL: $*"; for f in "$TMP"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }

# start_scheduler S W [ARGS...]: sets SCHED_PID and exports
# DMLC_PS_ROOT_PORT; ARGS go to ps-scheduler
start_scheduler() {
	export DMLC_NUM_SERVER=$1 DMLC_NUM_WORKER=$2
	shift 2
	# A previous scheduler's port must not be read back (the new one's
	# redirection may truncate the file only after the loop below looked).
	rm -f "$TMP/sched.out"
	"$BIN/ps-scheduler" --root-port 0 "$@" >"$TMP/sched.out" 2>"$TMP/sched.err" &
	SCHED_PID=$!
	PIDS+=("$SCHED_PID")
	local i
	# Up to 30 s: a sanitizer build on a loaded machine starts slowly.
	for i in $(seq 1 $((600 * MULT))); do
		grep -q PS_ROOT_PORT= "$TMP/sched.out" 2>/dev/null && break
		sleep 0.05
	done
	DMLC_PS_ROOT_PORT=$(sed -n 's/^PS_ROOT_PORT=//p' "$TMP/sched.out")
	[ -n "$DMLC_PS_ROOT_PORT" ] || die "scheduler did not start"
	export DMLC_PS_ROOT_PORT
}

# start_servers N: SERVER_PIDS
start_servers() {
	local i
	SERVER_PIDS=()
	for i in $(seq 1 "$1"); do
		"$BIN/ps-server" >"$TMP/server$i.out" 2>"$TMP/server$i.err" &
		SERVER_PIDS+=($!)
		PIDS+=($!)
	done
}

# start_workers N ARGS...: WORKER_PIDS (ps-worker with ARGS)
start_workers() {
	local n=$1 i
	shift
	WORKER_PIDS=()
	for i in $(seq 1 "$n"); do
		"$BIN/ps-worker" "$@" >"$TMP/worker$i.out" 2>"$TMP/worker$i.err" &
		WORKER_PIDS+=($!)
		PIDS+=($!)
	done
}

# wait_pid PID SECONDS: exit status, or 124 after the deadline
wait_pid() {
	local pid=$1 limit=$(($2 * MULT * 10)) i
	for i in $(seq 1 "$limit"); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; return $?; }
		sleep 0.1
	done
	return 124
}

# job_verified WHAT [WORKER_SECONDS]: every worker of start_job exits 0
# (within WORKER_SECONDS, default 120) and printed "verified", then every
# server and the scheduler exit 0
job_verified() {
	local p i
	for p in "${WORKER_PIDS[@]}"; do
		wait_pid "$p" "${2:-120}" || die "$1: worker $p exited $?"
	done
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" 30 || die "$1: node $p exited $?"
	done
	for i in $(seq 1 "${#WORKER_PIDS[@]}"); do
		grep -q verified "$TMP/worker$i.out" || die "$1: worker $i did not verify"
	done
}

# server_ports: the listen ports the servers print once the cluster is up
server_ports() {
	sed -n 's/.*listening on [^ ]*:\([0-9]*\).*/\1/p' "$TMP"/server*.out
}

# await_server_ports N: until N servers printed their port, at most 10 s
# (x MULT); 1 if they did not
await_server_ports() {
	local i
	for i in $(seq 1 $((100 * MULT))); do
		[ "$(server_ports | wc -l)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
