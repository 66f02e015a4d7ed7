#!/usr/bin/env bash
# slow
# serial
# prepare
# timeout: 1800
# The RDMA transport for real, inside one soft-RoCE VM, booted once
# (../shared/rdma-vm/run-in-rxe-vm: QEMU, Debian kernel, rdma_rxe on a
# dummy netdev):
#  (a) the transport conformance suite with PS_TEST_TRANSPORT=rdma;
#  (b) the cluster integration test (correct sums, several servers and
#      workers), the config-switch test (partition sizes change under
#      the rendezvous cache's grants), the key-list and row-sparse tests
#      (messages in several pieces; their lite runs, PS_TEST_RDMA_FULL=1
#      for all) with PS_TRANSPORT=rdma, and the
#      transport-choice test (auto must pick rdma there);
#  (c) (a) and (b) again with the ASan build (build-asan, built first),
#      without the key-list and row-sparse tests unless
#      PS_TEST_RDMA_ASAN_FULL=1 (rdma_vm_suite.sh says why);
#  (d) the conformance and rendezvous-cache suites of (a) with the TSan
#      build (build-tsan, built first; PS_TEST_RDMA_TSAN=0 skips the
#      build).
# --prepare only installs the VM's packages and builds its boot image
# (tests/run.sh does that beside the other tests, "# prepare"), waiting
# for a dpkg lock that another test's install holds.
# Exits 77 with the reason when the VM cannot run here (no runner, qemu
# missing and not installable, no kernel with rdma_rxe, ...).
# RDMA_VM_TIMEOUT bounds the whole VM (default 1500 s: emulation is slow;
# tests/run.sh gives this script 1800 s, so the VM's bound, which says
# so, comes first).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNNER=${RDMA_VM_RUNNER:-$(cd .. && pwd)/shared/rdma-vm/run-in-rxe-vm}
export RDMA_VM_TIMEOUT=${RDMA_VM_TIMEOUT:-1500}

skip() { echo "SKIP: RDMA VM tests not run: $*"; exit 77; }

[ -x "$RUNNER" ] || skip "no soft-RoCE VM runner at $RUNNER (set RDMA_VM_RUNNER)"
[ -x "$BUILD/tests/transport/test_transport" ] || skip "$BUILD/tests/transport/test_transport not built"
nm "$BUILD/lib/libpsched.a" 2>/dev/null | grep -q ' psd_rdma_ops$' ||
	skip "libpsched was built without libibverbs-dev/librdmacm-dev"
if [ "${1:-}" = --prepare ]; then
	conf=$(mktemp)
	echo 'DPkg::Lock::Timeout "600";' >"$conf"
	APT_CONFIG=$conf "$RUNNER" --build
	rc=$?
	rm -f "$conf"
	exit $rc
fi
mkdir -p "$BUILD/test-logs"
if [ "${PS_TEST_RDMA_ASAN:-1}" = 1 ]; then
	echo "== building the ASan tree (build-asan)"
	make --no-print-directory asan-build >"$BUILD/test-logs/asan-build-rdma.log" 2>&1 ||
		{ echo "FAIL: ASan build"; tail -n 30 "$BUILD/test-logs/asan-build-rdma.log"; exit 1; }
fi
if [ "${PS_TEST_RDMA_TSAN:-1}" = 1 ]; then
	echo "== building the TSan tree (build-tsan)"
	make --no-print-directory tsan-build >"$BUILD/test-logs/tsan-build-rdma.log" 2>&1 ||
		{ echo "FAIL: TSan build"; tail -n 30 "$BUILD/test-logs/tsan-build-rdma.log"; exit 1; }
fi
echo "== booting the soft-RoCE VM ($RUNNER, timeout ${RDMA_VM_TIMEOUT}s)"
BUILD=$BUILD "$RUNNER" bash tests/integration/rdma_vm_suite.sh
rc=$?
case $rc in
0) echo "ok RDMA VM suite"; exit 0 ;;
124) echo "FAIL: the VM ran past RDMA_VM_TIMEOUT=${RDMA_VM_TIMEOUT}s"; exit 1 ;;
125) skip "the VM or its rxe device could not start here (exit 125, see above)" ;;
*) echo "FAIL: RDMA VM suite (exit $rc)"; exit 1 ;;
esac
