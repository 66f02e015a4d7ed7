#!/usr/bin/env bash
# The README's Python blocks run as printed: each ```python block is
# written to a file and run by bin/psched-launch as a 2-server,
# 2-worker job (a block that does not join a job runs alone); each must
# exit 0 with no traceback.  The last lines of each run are shown.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
n=$("$PYTHON" - README.md "$TMP" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# Blocks marked "README example" have their own checks
# (test_readme_examples.sh); every other python block runs here.
blocks = [b for mark, b in re.findall(
    r"(<!-- README example[^\n]*-->\n)?^```python\n(.*?)^```", text,
    re.S | re.M) if not mark]
for i, b in enumerate(blocks):
    open("%s/readme%d.py" % (sys.argv[2], i), "w").write(b)
print(len(blocks))
PY
)
[ "$n" -ge 1 ] || die "no python blocks found in README.md"
for i in $(seq 0 $((n - 1))); do
	f=$TMP/readme$i.py
	if grep -q "dist_" "$f"; then
		# As README says: the source tree's launcher, no PYTHONPATH.
		(cd "$TMP" && timeout $((120 * MULT)) env -u PYTHONPATH "$OLDPWD/bin/psched-launch" -s 2 -w 2 -- "$PYTHON" "$f") >"$TMP/readme$i.log" 2>&1
	else
		(cd "$TMP" && timeout $((60 * MULT)) "$PYTHON" "$f") >"$TMP/readme$i.log" 2>&1
	fi
	rc=$?
	echo "--- README python block $((i + 1)) of $n: exit $rc"
	tail -n 8 "$TMP/readme$i.log"
	[ $rc = 0 ] || { echo "--- block:"; cat "$f"; die "README python block $((i + 1)) exited $rc"; }
	! grep -q Traceback "$TMP/readme$i.log" || die "README python block $((i + 1)) printed a traceback"
done
echo "ok: $n README python block(s) ran as printed"
