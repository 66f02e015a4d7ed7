# shellcheck shell=bash
# Shared by the benches and tests that build a cluster in network
# namespaces (bench/sched-bench.sh, bench/autotune-bench.sh,
# bench/delayline-bench.sh, tests/integration/test_delayline.sh and
# test_link_floor.sh): each node's eth0 a veth to a bridge in a "switch"
# namespace, links shaped with tbf.  The includer may set MTU (9000 if
# not), sources this file and calls ns_init first.  The job's secret is
# made here unless the caller gave one.

if [ -z "${PS_JOB_TOKEN:-}" ] && [ -z "${PS_JOB_TOKEN_FILE:-}" ]; then
	PS_JOB_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
	export PS_JOB_TOKEN
fi

# ns_init TAG NAME: this run's names and state: ID (TAG and the script's
# pid, unique per run), SW (the switch namespace), NODES=() (the node
# namespaces), RUN_PIDS=() (pids of the nodes the includer starts), MTU
# (9000 unless set) and TMP (a new /tmp/psched-NAME.XXXXXX); ns_cleanup
# runs on EXIT and removes them all, INT or TERM exits with 130.
ns_init() {
	ID=$1$$
	SW=$ID-sw
	NODES=()
	RUN_PIDS=()
	MTU=${MTU:-9000}
	TMP=$(mktemp -d "/tmp/psched-$2.XXXXXX") || exit 1
	trap ns_cleanup EXIT
	trap 'exit 130' INT TERM
}

# ns_die MSG: a test's failure: MSG, the tail of every non-empty
# $TMP/*.err, exit 1.
ns_die() {
	echo "FAIL: $*"
	for f in "$TMP"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done
	exit 1
}

ns_kill_nodes() {
	local p
	for p in "${RUN_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${RUN_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	RUN_PIDS=()
}

DL_PIDS=()

ns_cleanup() {
	local ns p
	ns_kill_nodes
	for p in "${DL_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${DL_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	# Anything still inside our namespaces was started by this script.
	for ns in "${NODES[@]}"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -9 "$p" 2>/dev/null || true
		done
	done
	for ns in "${NODES[@]}" "$SW"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	if [ "${KEEP_TMP:-0}" = 1 ]; then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
}

# ns_sched_port FILE TRIES: the port a scheduler started with
# --root-port 0 prints to FILE (its stdout, PS_ROOT_PORT=...), polled
# TRIES times 50 ms apart; empty if it never came.
ns_sched_port() {
	local i port=""
	for ((i = 0; i < $2; i++)); do
		port=$(sed -n 's/^PS_ROOT_PORT=//p' "$1" 2>/dev/null || true)
		[ -n "$port" ] && break
		sleep 0.05
	done
	echo "$port"
}

# ns_shape NS DEV GBIT: tbf at GBIT Gbit/s, a burst of 1 ms of traffic (at
# least 64 KiB, so a GSO packet passes whole), up to 20 ms queued.
ns_shape() {
	local burst
	burst=$(awk -v r="$3" 'BEGIN { b = r * 1e9 / 8 / 1000; if (b < 65536) b = 65536; printf "%d", b }')
	tc -n "$1" qdisc replace dev "$2" root tbf rate "${3}gbit" \
		burst "$burst" latency 20ms
}

# ns_topology N PREFIX: the switch namespace with a bridge and N node
# namespaces ($ID-n0 ..), node i at PREFIX.(i+1)/24, links up at $MTU
# (not shaped).
ns_topology() {
	local n=$1 prefix=$2 i ns
	ip netns add "$SW" || return 1
	ip -n "$SW" link set lo up
	ip -n "$SW" link add br0 type bridge
	ip -n "$SW" link set br0 up
	for ((i = 0; i < n; i++)); do
		ns=$ID-n$i
		ip netns add "$ns" || return 1
		NODES+=("$ns")
		ip -n "$ns" link set lo up
		ip -n "$SW" link add "p$i" type veth peer name eth0 netns "$ns" || return 1
		ip -n "$SW" link set "p$i" master br0 mtu "$MTU" up
		ip -n "$ns" link set eth0 mtu "$MTU" up
		ip -n "$ns" addr add "$prefix.$((i + 1))/24" dev eth0
	done
}

# ns_set_rate GBIT: shape every link, both directions.
ns_set_rate() {
	local i
	for ((i = 0; i < ${#NODES[@]}; i++)); do
		ns_shape "$SW" "p$i" "$1"
		ns_shape "${NODES[$i]}" eth0 "$1"
	done
}

# ns_us MS: MS milliseconds (decimals allowed) in whole microseconds
ns_us() { awk -v d="$1" 'BEGIN { printf "%d", d * 1000 }'; }

# ns_delay I MS [line]: every frame to and from node I waits MS
# milliseconds (decimals allowed; 0: no line unless "line" is given, for
# a delay that ns_delay_set changes later) (this kernel has no netem).
# The node's switch port p$I leaves the
# bridge; a delay line (a process in the switch namespace, for the
# topology's life) moves frames between p$I and a tap d$I that takes its
# place in the bridge.  p$I's tbf (ns_set_rate) still shapes what goes to
# the node, the node's eth0 tbf what comes from it; the delay is in
# series with both.  The line's counters go to $TMP/delayline$I.err.
ns_delay() {
	local i=$1 us k
	us=$(ns_us "$2")
	[ "$us" -gt 0 ] || [ "${3:-}" = line ] || return 0
	[ -x "${DELAYLINE:-}" ] || {
		echo "ns_delay: no delay line binary (DELAYLINE='${DELAYLINE:-}'; make tests)" >&2
		return 1
	}
	ip -n "$SW" link set "p$i" nomaster || return 1
	rm -f "$TMP/delayline$i.ready"
	echo "$us" >"$TMP/delayline$i.us"
	ip netns exec "$SW" "$DELAYLINE" --dev "p$i" --tap "d$i" --delay-us "$us" \
		--ready "$TMP/delayline$i.ready" --delay-file "$TMP/delayline$i.us" \
		2>"$TMP/delayline$i.err" &
	DL_PIDS+=($!)
	printf -v "DL_PID_$i" %s "$!"
	for ((k = 0; k < 100; k++)); do
		[ -e "$TMP/delayline$i.ready" ] && break
		kill -0 "$!" 2>/dev/null || break
		sleep 0.05
	done
	[ -e "$TMP/delayline$i.ready" ] || {
		echo "ns_delay: the delay line did not start: $(cat "$TMP/delayline$i.err")" >&2
		return 1
	}
	ip -n "$SW" link set "d$i" master br0 mtu "$MTU" up
}

# ns_line_mark: start counting the delay lines' CPU time (ns_line_cpu).
ns_line_mark() {
	NS_LINE_T0=$(date +%s%N)
	NS_LINE_C0=$(ns_line_ticks)
}

# ns_line_ticks: CPU ticks (user + system) the delay lines used so far.
ns_line_ticks() {
	local p s=0 t
	for p in "${DL_PIDS[@]}"; do
		t=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null) || continue
		s=$((s + ${t:-0}))
	done
	echo "$s"
}

# ns_line_cpu: percent of one CPU the delay lines used, summed, since
# ns_line_mark (nothing without a line).  A busy line is what limits
# the link, not its tbf rate: the line shares the machine's CPUs with
# the job, and each frame costs it two system calls
# (tests/helpers/delayline.c).  On a 2-vCPU guest whose page faults are
# dear, a line that reallocated its frame buffers moved 1.4-1.9 Gbit/s
# of one flow over a 5 Gbit/s link, at 74-78 % of a CPU; reusing them it
# moves 4.4-4.7 (bench/delayline-bench.sh measures a line).  The
# benches warn from 50 %: VGG-16 behind a line at 55-68 % of a CPU ran
# at 0.36-0.55 of its speed behind one at 27-35 %, so such figures say
# more about the line than about the job.
ns_line_cpu() {
	[ "${#DL_PIDS[@]}" -gt 0 ] && [ -n "${NS_LINE_T0:-}" ] || return 0
	awk -v c="$(( $(ns_line_ticks) - NS_LINE_C0 ))" -v hz="$(getconf CLK_TCK)" \
		-v ns="$(( $(date +%s%N) - NS_LINE_T0 ))" \
		'BEGIN { if (ns > 0) printf "%.0f\n", 100 * c / hz / (ns / 1e9) }'
}

# ns_line_warn NAME CPU: NAME's warning on stderr when the delay lines
# used CPU % of a CPU (ns_line_cpu), 50 or more, in the last run.
ns_line_warn() {
	[ -n "${2:-}" ] && [ "$2" -ge 50 ] || return 0
	echo "$1: the delay line(s) used $2 % of a CPU in that run: they, not the link's rate, may have set the speed (docs/benchmarks.md, \"The delay line\")" >&2
}

# ns_delay_set I MS: node I's line (ns_delay) delays by MS milliseconds
# from now on (frames already in it keep theirs).  Returns once the line
# said so in $TMP/delayline$I.err, 1 if it did not within 2 s.
ns_delay_set() {
	local i=$1 us pid k v
	pid=DL_PID_$i
	pid=${!pid:-}
	[ -n "$pid" ] || { echo "ns_delay_set: node $i has no delay line" >&2; return 1; }
	us=$(ns_us "$2")
	echo "$us" >"$TMP/delayline$i.us"
	kill -HUP "$pid" || return 1
	for ((k = 0; k < 40; k++)); do
		v=$(sed -n 's/.*: delay [0-9]* -> \([0-9]*\) us$/\1/p' "$TMP/delayline$i.err" | tail -n 1)
		[ "$v" = "$us" ] && return 0
		sleep 0.05
	done
	echo "ns_delay_set: the line of node $i did not take $us us: $(tail -n 1 "$TMP/delayline$i.err")" >&2
	return 1
}
