#!/usr/bin/env bash
# The Python binding's device-buffer call (KVStore.issue_device, what
# psched.torch builds on): argument checks, the local store refusing
# device buffers, and in a dist_sync job of 1 server x 2 workers the
# -ENODEV refusal with its reason when there is no usable GPU, then exact
# host pushpulls on the same store (device pushpull with torch on a GPU).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
"$PYTHON" tests/python/gpu_kvstore.py local >"$TMP/local.log" 2>&1 ||
	{ cat "$TMP/local.log"; die "local run failed"; }
grep -q "local refused" "$TMP/local.log" || die "local store did not refuse"
timeout $((120 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 2 -- \
	"$PYTHON" tests/python/gpu_kvstore.py dist_sync >"$TMP/dist.log" 2>&1
rc=$?
cat "$TMP/dist.log" | grep -v "^\[" | head -20
[ $rc = 0 ] || { tail -n 30 "$TMP/dist.log"; die "dist_sync job exited $rc"; }
# Both workers print into one file: count each rank where it appears.
[ "$(grep -o "host pushpull exact, rank [01]" "$TMP/dist.log" | sort -u | wc -l)" = 2 ] ||
	die "not both workers checked the host path"
grep -qE "refused as expected|device pushpull exact" "$TMP/dist.log" || die "device call not exercised"
echo "ok: python device-buffer binding"
