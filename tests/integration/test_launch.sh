#!/usr/bin/env bash
# psched-launch, local back end, the first minute: a worker command that
# does not exist (or cannot be executed) is named and nothing the launcher
# started is left running; the launcher runs from the source tree without
# PYTHONPATH (bin/psched-launch from anywhere, through a symlink too, and
# `python3 -m psched.launch` at the top of the tree) on a python3 that has
# no numpy; every process of a job gets the same secret, the user's
# PS_JOB_TOKEN when set, a fresh one per job otherwise.  Then the
# launcher's own unit tests (tests/python/test_launch.py: hostfile,
# placement, ranks, the ssh remote script under sh).
. "$(dirname "$0")/lib.sh"
# The launcher makes the job's secret itself (tested here): not lib.sh's.
unset PS_JOB_TOKEN
REPO=$(pwd)
ABS_BIN=$(cd "$BIN" && pwd)
export PSCHED_BIN_DIR=$ABS_BIN
unset PYTHONPATH DMLC_PS_ROOT_URI
# A python3 without numpy: whatever python3 is on PATH, with numpy blocked.
mkdir -p "$TMP/nonumpy/numpy" "$TMP/pybin"
echo 'raise ImportError("numpy is blocked by test_launch.sh")' >"$TMP/nonumpy/numpy/__init__.py"
realpy=$(command -v python3)
cat >"$TMP/pybin/python3" <<EOS
#!/bin/sh
PYTHONPATH=$TMP/nonumpy\${PYTHONPATH:+:\$PYTHONPATH} exec $realpy "\$@"
EOS
chmod +x "$TMP/pybin/python3"
export PATH=$TMP/pybin:$PATH
python3 -c 'import numpy' 2>/dev/null && die "numpy not blocked"

# leftovers TOKEN: processes whose environment holds this job's token
leftovers() {
	grep -l -s -a "PS_JOB_TOKEN=$1" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
}

# 1. A command that does not exist, and one that cannot be executed
# (checked before anything starts, and at spawn time after the scheduler
# and servers run).
printf '\177ELFnot-a-program' >"$TMP/badexe"
chmod +x "$TMP/badexe"
for cmd in /nonexistent/cmd no-such-command-psched "$TMP/badexe"; do
	tok=launchtest-$$-$RANDOM
	start=$(date +%s)
	PS_JOB_TOKEN=$tok timeout $((60 * MULT)) "$REPO/bin/psched-launch" -s 2 -w 2 -- "$cmd" arg \
		>"$TMP/bad.out" 2>"$TMP/bad.err"
	rc=$?
	[ $rc = 127 ] || { cat "$TMP/bad.err"; die "$cmd: exit $rc, want 127"; }
	grep -q "^psched-launch: cannot .*$cmd" "$TMP/bad.err" || { cat "$TMP/bad.err"; die "$cmd not named"; }
	grep -q Traceback "$TMP/bad.err" && { cat "$TMP/bad.err"; die "$cmd: traceback"; }
	[ $(($(date +%s) - start)) -lt 30 ] || die "$cmd: took $(($(date +%s) - start)) s"
	sleep 0.3
	left=$(leftovers "$tok")
	[ -z "$left" ] || die "$cmd: left running: $(ps -o pid,args -p "$left")"
	echo "ok $cmd: $(cat "$TMP/bad.err")"
done

# Bad launcher input: a clear message, no traceback.
printf 'a:2\nb\n' >"$TMP/hosts"
while IFS='|' read -r want msg args; do
	# shellcheck disable=SC2086
	"$REPO/bin/psched-launch" $args -- true >"$TMP/cli.out" 2>&1
	rc=$?
	[ $rc = "$want" ] || { cat "$TMP/cli.out"; die "psched-launch $args: exit $rc, want $want"; }
	grep -q "$msg" "$TMP/cli.out" || { cat "$TMP/cli.out"; die "psched-launch $args: no '$msg'"; }
	grep -q Traceback "$TMP/cli.out" && { cat "$TMP/cli.out"; die "psched-launch $args: traceback"; }
done <<EOS
2|cannot read hostfile $TMP/nohosts: No such file|--launcher ssh -H $TMP/nohosts
2|the hostfile has 3 slots for 3 servers + 3 workers|--launcher ssh -H $TMP/hosts -s 3 -w 3
2|needs -H/--hostfile|--launcher ssh
2|runs inside an allocation|--launcher slurm
2|need at least one server|-s 0
2|invalid choice: 'nope'|--launcher nope
EOS
echo "ok bad launcher input refused with its reason"

# 2. A job from the source tree without PYTHONPATH, no numpy: through a
# symlink to bin/psched-launch from another directory, and python3 -m at
# the top of the tree.  Each worker prints its secret; both must agree.
cat >"$TMP/w.sh" <<EOS
#!/bin/sh
echo "token[\$DMLC_WORKER_ID]=\$PS_JOB_TOKEN"
exec $ABS_BIN/ps-worker --steps 3 --keys 2 --sizes 4,4K
EOS
chmod +x "$TMP/w.sh"
ln -s "$REPO/bin/psched-launch" "$TMP/launch-link"
(cd "$TMP" && timeout $((120 * MULT)) ./launch-link -s 2 -w 2 -- "$TMP/w.sh") >"$TMP/j1.out" 2>&1 ||
	{ cat "$TMP/j1.out"; die "job through the symlink failed"; }
[ "$(grep -c verified "$TMP/j1.out")" = 2 ] || { cat "$TMP/j1.out"; die "workers did not verify"; }
t0=$(sed -n 's/^token\[0\]=//p' "$TMP/j1.out")
t1=$(sed -n 's/^token\[1\]=//p' "$TMP/j1.out")
[ ${#t0} = 32 ] && [ "$t0" = "$t1" ] || die "workers got secrets '$t0' and '$t1'"
PS_JOB_TOKEN=users-own-secret timeout $((120 * MULT)) python3 -m psched.launch -s 1 -w 2 -- "$TMP/w.sh" \
	>"$TMP/j2.out" 2>&1 || { cat "$TMP/j2.out"; die "python3 -m psched.launch at the top of the tree failed"; }
[ "$(grep -c '=users-own-secret$' "$TMP/j2.out")" = 2 ] || { cat "$TMP/j2.out"; die "the user's PS_JOB_TOKEN did not reach the workers"; }
t3=$( (cd "$TMP" && timeout $((120 * MULT)) ./launch-link -s 1 -w 1 -- "$TMP/w.sh") | sed -n 's/^token\[0\]=//p')
[ -n "$t3" ] && [ "$t3" != "$t0" ] || die "two jobs got the same secret"
echo "ok jobs without PYTHONPATH or numpy; one fresh secret per job"

# 3. unit tests of the launcher's parts
timeout $((120 * MULT)) python3 tests/python/test_launch.py >"$TMP/unit.log" 2>&1 ||
	{ cat "$TMP/unit.log"; die "tests/python/test_launch.py failed"; }
tail -n 1 "$TMP/unit.log"
exit 0
