#!/usr/bin/env bash
# The two examples of README.md's "Using psched from PyTorch" (each the
# python block after a "README example" comment), run exactly as printed
# on 2 workers: the PyTorch one (DistributedOptimizer + Adam) must end
# with the same weights on both workers (averaged gradients) and a lower
# loss than at start is not asserted (20 steps on random labels); the
# MXNet-style one must recover the regression's true weights on both.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
"$PYTHON" - README.md "$TMP" <<'PY' || die "could not extract the README examples"
import re, sys
text = open(sys.argv[1]).read()
sec = text.split("## Using psched from PyTorch", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"<!-- README example[^\n]*-->\n```python\n(.*?)```", sec, re.S)
assert len(blocks) == 2, "found %d README examples, want 2" % len(blocks)
for name, b in zip(("torch_ex.py", "mx_ex.py"), blocks):
    open("%s/%s" % (sys.argv[2], name), "w").write(b)
PY
if [ -z "${PY_SANITIZED:-}" ] && have_torch; then
	timeout $((180 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 2 -- "$PYTHON" "$TMP/torch_ex.py" >"$TMP/torch.out" 2>&1 ||
		{ cat "$TMP/torch.out"; die "the README's PyTorch example failed"; }
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
	{ cat "$TMP/mx.out"; die "the README's MXNet-style example failed"; }
cat "$TMP/mx.out"
# Both workers write to one file, so their lines can run together:
# count each rank's answer where it appears, not whole lines.
n=$(grep -o "rank [01]: w = \[1\. 2\. 3\. 4\. 5\.\]" "$TMP/mx.out" | sort -u | wc -l)
[ "$n" = 2 ] || die "the MXNet-style example did not recover w = [1 2 3 4 5] on both workers"
exit 0
