# shellcheck shell=bash
# Sourced by bench/kl-vs-pslite.sh and bench/pslite-api.sh: ps-lite's
# test_kv_app_benchmark run in ps-lite's launch shape, psched's key-list
# API on the same workload, and the checks and medians of their figures.
# The sourcing script sets BUILD (psched's build tree) and TOOL (its
# name, for messages).

dmlc_job() { # BIN REPEAT S W -> "push_ms pull_ms" (slowest worker, per repeat)
	local bin=$1 rep=$2 port out pids=() i
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	out=$(mktemp)
	# the job secret psched needs; ps-lite ignores it
	export DMLC_NUM_SERVER=$3 DMLC_NUM_WORKER=$4 DMLC_PS_ROOT_URI=127.0.0.1 \
		DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1 \
		PS_JOB_TOKEN=bench-$RANDOM$RANDOM$RANDOM
	DMLC_ROLE=scheduler timeout 300 "$bin" >/dev/null 2>&1 & pids+=($!)
	for ((i = 0; i < $3; i++)); do DMLC_ROLE=server timeout 300 "$bin" >/dev/null 2>&1 & pids+=($!); done
	for ((i = 0; i < $4; i++)); do DMLC_ROLE=worker timeout 300 "$bin" >>"$out" 2>&1 & pids+=($!); done
	for p in "${pids[@]}"; do wait "$p"; done
	unset DMLC_NUM_SERVER DMLC_NUM_WORKER DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NODE_HOST PS_JOB_TOKEN
	awk -v rep="$rep" '/Push average/ {v=$(NF)+0; if (v>pu) pu=v} /Pull average/ {v=$(NF)+0; if (v>pl) pl=v}
	     END {printf "%.1f %.1f\n", pu/rep, pl/rep}' FS='cost: ' "$out"
	rm -f "$out"
}

kl_job() { # S W N [env...] -> "cold_push cold_pull warm_push warm_pull"
	local s=$1 w=$2 n=$3
	shift 3
	env "$@" "$BUILD/bin/ps-bench" --servers "$s" --workers "$w" --keys-per-request "$n" --runs 4 2>&1 |
		awk '$1 == "0" {cp=$2; cl=$3} /^warm median/ {wp=$4; wl=$7} END {print cp, cl, wp, wl}'
}

positive() { # MESSAGE VALUE...: every value a positive number, else stop
	local msg=$1 v
	shift
	for v; do
		awk -v v="$v" 'BEGIN {exit !(v > 0)}' || { echo "$TOOL: $msg (got '$v')" >&2; exit 1; }
	done
}

med() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
