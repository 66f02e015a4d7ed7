#!/usr/bin/env bash
# Runs INSIDE the soft-RoCE VM (see test_rdma_vm.sh): every RDMA test of
# one boot.  Prints one ok/FAIL line per part; exit 0 when all pass (never
# 124/125, which belong to the VM runner).
set -u
BUILD=${BUILD:-build}
export PS_TEST_TRANSPORT=rdma PS_TEST_ROOT_URI=${RDMA_VM_ADDR:?not in the VM}
export PS_TEST_LITE=1 PS_TEST_TIMEOUT_MULT=${PS_TEST_TIMEOUT_MULT:-3}
# Emulation on a shared host can stall a node for seconds.
export PS_HEARTBEAT_TIMEOUT=${PS_HEARTBEAT_TIMEOUT:-60}
fail=0
# The key-list and row-sparse tests' lite runs, or (PS_TEST_RDMA_FULL=1)
# all of them.
lite=1
[ "${PS_TEST_RDMA_FULL:-0}" = 1 ] && lite=0
part() { # name command...
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	echo "== $name"
	"$@"
	rc=$?
	if [ $rc = 0 ]; then echo "ok   $name ($(($(date +%s) - t0)) s)"
	else echo "FAIL $name (exit $rc)"; fail=1; fi
}
echo "== rdma device: $(ibv_devices 2>/dev/null | awk 'NR>2{print $1}' | tr '\n' ' ')addr $RDMA_VM_ADDR"
for b in "$BUILD" ${PS_TEST_RDMA_ASAN_BUILD:-build-asan}; do
	[ -x "$b/tests/transport/test_transport" ] || { echo "(no $b tree)"; continue; }
	for t in "$b"/tests/transport/test_*; do
		# split connection pairs (PS_TCP_SPLIT) are TCP only: it skips
		[ "$(basename "$t")" = test_transport_pair ] && continue
		part "$b: transport conformance $(basename "$t") (rdma)" "$t"
	done
	part "$b: cluster (PS_TRANSPORT=rdma)" env BUILD="$b" PS_TRANSPORT=rdma \
		bash tests/integration/test_cluster.sh
	# Partition sizes switch under live rendezvous-cache grants.
	part "$b: config switches (PS_TRANSPORT=rdma)" env BUILD="$b" PS_TRANSPORT=rdma \
		bash tests/integration/test_config.sh
	# Key lists and row-sparse pushes go out in several pieces (keys,
	# lengths, values; ids, rows): one RDMA write gathers them.  Their
	# lite runs (PS_TEST_LITE=1) keep the clusters whose messages differ
	# by transport; PS_TEST_RDMA_FULL=1 runs both tests in full.  Even
	# lite, the two take minutes in the ASan build under emulation, so
	# the ASan pass runs them only with PS_TEST_RDMA_ASAN_FULL=1; its
	# conformance suite still sends messages in pieces over rdma
	# (transport_pieces, transport_send_fill), and make asan runs both
	# tests over tcp and shm.
	if [ "$b" != "$BUILD" ] && [ "${PS_TEST_RDMA_ASAN_FULL:-0}" != 1 ]; then
		echo "== $b: key lists and row-sparse over rdma left to the $BUILD tree (PS_TEST_RDMA_ASAN_FULL=1 runs them)"
	else
		part "$b: key lists (PS_TRANSPORT=rdma)" env BUILD="$b" PS_TRANSPORT=rdma \
			PS_TEST_LITE=$lite bash tests/integration/test_keylist.sh
		part "$b: row-sparse (PS_TRANSPORT=rdma)" env BUILD="$b" PS_TRANSPORT=rdma \
			PS_TEST_LITE=$lite bash tests/integration/test_rows.sh
	fi
	part "$b: transport choice (auto picks rdma)" env BUILD="$b" \
		PS_TEST_EXPECT_RDMA=1 bash tests/integration/test_transport_choice.sh
done
# The transport's threads (senders post outside dev->lock, the progress
# thread reaps completions meanwhile, the rendezvous cache's grants come
# back on it) under ThreadSanitizer: the conformance suite and the cache's.
# Its failure and lane cases run in the two builds above.
tb=${PS_TEST_RDMA_TSAN_BUILD:-build-tsan}
if [ -x "$tb/tests/transport/test_transport" ]; then
	for t in test_transport test_transport_cache; do
		part "$tb: transport conformance $t (rdma)" \
			env TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$tb/tests/transport/$t"
	done
else
	echo "(no $tb tree)"
fi
[ $fail = 0 ] && echo "all RDMA VM parts passed"
[ $fail = 0 ] && exit 0
exit 1
