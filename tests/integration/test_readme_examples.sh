#!/usr/bin/env bash
# The two marked examples of the manual (the python block after a
# "README example" comment): docs/pytorch.md's and docs/python.md's, run
# exactly as printed on 2 workers.  The PyTorch one (DistributedOptimizer
# + Adam) must end with the same weights on both workers (averaged
# gradients; a lower loss is not asserted: 20 steps on random labels);
# the MXNet-style one must recover the regression's true weights on both.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
"$PYTHON" - "$TMP" <<'PY' || die "could not extract the marked examples of docs/"
import re, sys
for page, name in (("docs/pytorch.md", "torch_ex.py"),
                   ("docs/python.md", "mx_ex.py")):
    text = open(page).read()
    blocks = re.findall(r"<!-- README example[^\n]*-->\n```python\n(.*?)```",
                        text, re.S)
    assert len(blocks) == 1, "%s: %d marked examples, want 1" % (
        page, len(blocks))
    open("%s/%s" % (sys.argv[1], name), "w").write(blocks[0])
PY
if [ -z "${PY_SANITIZED:-}" ] && have_torch; then
	timeout $((180 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 2 -- "$PYTHON" "$TMP/torch_ex.py" >"$TMP/torch.out" 2>&1 ||
		{ cat "$TMP/torch.out"; die "docs/pytorch.md's example failed"; }
	cat "$TMP/torch.out"
	# Both ranks write to one file: their lines may run together, so
	# each rank's answer is counted where it appears (as for mx below).
	grep -o "rank [01] of 2: loss [0-9.]*, weights -\{0,1\}[0-9]*\.[0-9]\{6\}" "$TMP/torch.out" >"$TMP/torch.ranks"
	n=$(cut -d' ' -f2 "$TMP/torch.ranks" | sort -u | wc -l)
	[ "$n" = 2 ] || die "the PyTorch example printed $n ranks' lines, want 2"
	w=$(sed 's/.*, weights //' "$TMP/torch.ranks" | sort -u | wc -l)
	[ "$w" = 1 ] || die "the workers of the PyTorch example ended with different weights"
	# Alone (no launcher) it is one worker.
	env -u DMLC_ROLE timeout $((120 * MULT)) "$PYTHON" "$TMP/torch_ex.py" >"$TMP/torch1.out" 2>&1 ||
		{ cat "$TMP/torch1.out"; die "the PyTorch example failed alone"; }
	grep -q "^rank 0 of 1: loss" "$TMP/torch1.out" || die "the PyTorch example alone printed: $(cat "$TMP/torch1.out")"
else
	echo "python3-torch missing (or a sanitizer build): the PyTorch example is not run"
fi
timeout $((120 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 2 -- "$PYTHON" "$TMP/mx_ex.py" >"$TMP/mx.out" 2>&1 ||
	{ cat "$TMP/mx.out"; die "docs/python.md's MXNet-style example failed"; }
cat "$TMP/mx.out"
# Both workers write to one file, so their lines can run together:
# count each rank's answer where it appears, not whole lines.
n=$(grep -o "rank [01]: w = \[1\. 2\. 3\. 4\. 5\.\]" "$TMP/mx.out" | sort -u | wc -l)
[ "$n" = 2 ] || die "the MXNet-style example did not recover w = [1 2 3 4 5] on both workers"
exit 0
