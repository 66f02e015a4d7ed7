#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Compare the tuner's GP (scheduler/tuner/gp.c) with an independent numpy
# implementation on the fixed-hyperparameter cases in gp_cases.txt.
# Run from the repo root after the unit tests are built; builds nothing.
#   BUILD   build dir holding tests/unit/test_gp (default: build)
#   PYTHON  interpreter with numpy (default: /usr/bin/python3, the Debian
#           one; a pyenv python3 first on PATH may lack numpy)
# Exit: 0 pass, 1 fail, 77 skipped (no python3 or no numpy).
set -u

BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
here=tests/ref
cases=$here/gp_cases.txt
bin=$BUILD/tests/unit/test_gp

if ! [ -x "$PYTHON" ] && ! command -v "$PYTHON" >/dev/null 2>&1; then
	echo "test_gp_ref: SKIP: $PYTHON not found"
	exit 77
fi
if ! "$PYTHON" -c 'import numpy' >/dev/null 2>&1; then
	echo "test_gp_ref: SKIP: numpy missing for $PYTHON"
	exit 77
fi
if ! [ -x "$bin" ]; then
	echo "test_gp_ref: FAIL: $bin not built" >&2
	exit 1
fi

tmp=$(mktemp "${TMPDIR:-/tmp}/gp_ref.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT

if ! "$PYTHON" "$here/gp_ref.py" "$cases" "$tmp"; then
	echo "test_gp_ref: FAIL: gp_ref.py failed" >&2
	exit 1
fi
PSCHED_GP_REF=$tmp PSCHED_GP_CASES=$cases "$bin" gp_matches_numpy_reference
rc=$?
if [ "$rc" -ne 0 ]; then
	echo "test_gp_ref: FAIL (test_gp exit $rc)" >&2
	exit 1
fi
echo "test_gp_ref: PASS ($(grep -c . "$tmp") reference values)"
exit 0
