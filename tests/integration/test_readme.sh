#!/usr/bin/env bash
# The Python blocks of README.md and docs/*.md run as printed: each
# ```python block is written to a file and run by bin/psched-launch as a
# 2-server, 2-worker job (a block that does not join a job runs alone);
# each must exit 0 with no traceback.  Blocks after a "README example"
# marker have their own checks (test_readme_examples.sh).  The last lines
# of each run are shown.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
"$PYTHON" - "$TMP" README.md docs/*.md >"$TMP/blocks" <<'PY' || die "could not extract the python blocks"
import re, sys
n = 0
for page in sys.argv[2:]:
    text = open(page).read()
    blocks = [b for mark, b in re.findall(
        r"(<!-- README example[^\n]*-->\n)?^```python\n(.*?)^```", text,
        re.S | re.M) if not mark]
    for i, b in enumerate(blocks):
        open("%s/block%d.py" % (sys.argv[1], n), "w").write(b)
        print("%d %s %d" % (n, page, i + 1))
        n += 1
PY
n=$(wc -l <"$TMP/blocks")
grep -q ' README.md ' "$TMP/blocks" || die "no python blocks found in README.md"
while read -r i page nth; do
	f=$TMP/block$i.py
	if grep -q "dist_" "$f"; then
		# As the pages say: the source tree's launcher, no PYTHONPATH.
		(cd "$TMP" && timeout $((120 * MULT)) env -u PYTHONPATH "$OLDPWD/bin/psched-launch" -s 2 -w 2 -- "$PYTHON" "$f") >"$TMP/block$i.log" 2>&1
	else
		(cd "$TMP" && timeout $((60 * MULT)) "$PYTHON" "$f") >"$TMP/block$i.log" 2>&1
	fi
	rc=$?
	echo "--- $page python block $nth: exit $rc"
	tail -n 8 "$TMP/block$i.log"
	[ $rc = 0 ] || { echo "--- block:"; cat "$f"; die "$page python block $nth exited $rc"; }
	! grep -q Traceback "$TMP/block$i.log" || die "$page python block $nth printed a traceback"
done <"$TMP/blocks"
echo "ok: $n python block(s) of README.md and docs/ ran as printed"
