# shellcheck shell=bash
# Shared by bench/sched-bench.sh and bench/autotune-bench.sh: a cluster in
# network namespaces, each node's eth0 a veth to a bridge in a "switch"
# namespace, links shaped with tbf.  The includer sets ID (unique per
# run), SW (the switch namespace), MTU, NODES=() and RUN_PIDS=() (pids of
# the nodes it starts) and TMP, then sources this file; ns_cleanup runs on
# EXIT.  The job's secret is made here unless the caller gave one.

if [ -z "${PS_JOB_TOKEN:-}" ] && [ -z "${PS_JOB_TOKEN_FILE:-}" ]; then
	PS_JOB_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
	export PS_JOB_TOKEN
fi

ns_kill_nodes() {
	local p
	for p in "${RUN_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${RUN_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	RUN_PIDS=()
}

ns_cleanup() {
	local ns p
	ns_kill_nodes
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
