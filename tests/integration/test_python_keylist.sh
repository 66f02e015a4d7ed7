#!/usr/bin/env bash
# psched.keylist (push_keys / pull_keys / pushpull_keys) in a dist_sync
# job of 2 servers x 2 workers started by psched.launch
# (tests/python/test_keylist.py).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
timeout $((200 * MULT)) "$PYTHON" -m psched.launch -s 2 -w 2 -- \
	"$PYTHON" tests/python/test_keylist.py >"$TMP/kl.log" 2>&1
rc=$?
grep "keylist\|FAIL" "$TMP/kl.log"
[ $rc = 0 ] || { tail -n 20 "$TMP/kl.log"; die "job exited $rc"; }
# Both workers print into one file: count each rank where it appears.
[ "$(grep -o "rank [01] keylist ok" "$TMP/kl.log" | sort -u | wc -l)" = 2 ] ||
	die "not both workers ok"
echo "python key lists: ok"
