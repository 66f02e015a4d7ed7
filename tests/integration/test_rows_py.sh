#!/usr/bin/env bash
# Row-sparse keys from Python (tests/python/test_rowsparse.py): a
# dist_sync job of 2 servers x 2 workers started by psched.launch,
# checked against numpy.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
timeout $((300 * MULT)) "$PYTHON" tests/python/test_rowsparse.py >"$TMP/rows.log" 2>&1
rc=$?
tail -n 20 "$TMP/rows.log"
[ $rc = 0 ] || die "test_rowsparse.py exited $rc"
[ "$(grep -o 'rowsparse worker: ok' "$TMP/rows.log" | wc -l)" = 2 ] || die "not both workers passed"
exit 0
