#!/usr/bin/env bash
# The first minute: every program's --version is the VERSION file's;
# --help lists the options of the program's role only; log lines start
# with an ISO 8601 UTC time; a worker whose scheduler is not there says
# once, early, what it waits for (address, port, timeout); the Python
# package's __version__ is the same in the source tree and in a wheel
# built from pyproject.toml (offline, when pip is there).
. "$(dirname "$0")/lib.sh"
ver=$(cat VERSION)
echo "$ver" | grep -Eq '^0\.[0-9]+\.[0-9]+$' || die "VERSION is '$ver', want 0.x.y"
for p in ps-scheduler ps-server ps-worker ps-bench; do
	v=$("$BIN/$p" --version) || die "$p --version exited $?"
	[ "$v" = "$p $ver" ] || die "$p --version: '$v', want '$p $ver'"
	"$BIN/$p" --help >"$TMP/$p.help" || die "$p --help exited $?"
	grep -q -- '--version' "$TMP/$p.help" || die "$p --help does not mention --version"
done
# The launcher, run as users run it (no PYTHONPATH, any python3).
v=$(bin/psched-launch --version) || die "psched-launch --version exited $?"
[ "$v" = "psched-launch $ver" ] || die "psched-launch --version: '$v', want 'psched-launch $ver'"
has() { grep -q -- "^  --$2 " "$TMP/$1.help"; }
for o in autotune config-cycle autotune-seed; do
	has ps-scheduler $o || die "ps-scheduler --help lacks --$o"
	! has ps-server $o || die "ps-server --help lists the scheduler's --$o"
	! has ps-worker $o || die "ps-worker --help lists the scheduler's --$o"
done
for o in server-mode; do
	has ps-server $o || die "ps-server --help lacks --$o"
	! has ps-scheduler $o || die "ps-scheduler --help lists --$o"
	! has ps-worker $o || die "ps-worker --help lists --$o"
done
for o in scheduling; do
	has ps-worker $o || die "ps-worker --help lacks --$o"
	! has ps-server $o || die "ps-server --help lists --$o"
done
for o in rdma-device port socket-buf-bytes; do
	! has ps-scheduler $o || die "ps-scheduler --help lists --$o (a data-plane option)"
	has ps-server $o || die "ps-server --help lacks --$o"
done
for p in ps-scheduler ps-server ps-worker; do
	! has $p role || die "$p --help lists --role (the program has its role)"
	has $p root-port || die "$p --help lacks --root-port"
	has $p heartbeat-timeout || die "$p --help lacks --heartbeat-timeout"
done
# ps-bench runs every role: it lists them all.
has ps-bench autotune && has ps-bench server-mode && has ps-bench role ||
	die "ps-bench --help should list every cluster option"

# A free port nobody listens on: the worker waits, says so once, gives up.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DMLC_PS_ROOT_PORT=$port PS_CONNECT_TIMEOUT=3 timeout $((20 * MULT)) "$BIN/ps-worker" >"$TMP/w.out" 2>"$TMP/w.err"
rc=$?
[ $rc = 1 ] || die "worker without a scheduler exited $rc, want 1: $(cat "$TMP/w.err")"
n=$(grep -c "waiting for the scheduler at 127.0.0.1:$port .*up to 3 s" "$TMP/w.err")
[ "$n" = 1 ] || { cat "$TMP/w.err"; die "the waiting message appeared $n times, want once"; }
grep "waiting for the scheduler" "$TMP/w.err" |
	grep -Eq '^\[20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{6}Z worker WARN\] ' ||
	{ cat "$TMP/w.err"; die "log line does not start with an ISO 8601 UTC time"; }
grep -q "cannot reach the scheduler at 127.0.0.1:$port" "$TMP/w.err" || die "no final error naming the scheduler"

PY=/usr/bin/python3
v=$(PYTHONPATH=python "$PY" -c 'import psched; print(psched.__version__)' 2>&1)
[ "$v" = "$ver" ] || die "psched.__version__ in the source tree: '$v', want $ver"
if "$PY" -m pip --version >/dev/null 2>&1 && "$PY" -c 'import setuptools, wheel' 2>/dev/null; then
	mkdir "$TMP/src"
	git ls-files -co --exclude-standard -z 2>/dev/null | tar --null -T - -cf - | tar -xf - -C "$TMP/src"
	[ -f "$TMP/src/pyproject.toml" ] || cp -r pyproject.toml VERSION README.md LICENSE python "$TMP/src/"
	(cd "$TMP/src" && "$PY" -m pip wheel --no-build-isolation --no-deps -q -w "$TMP/whl" .) >"$TMP/pip.log" 2>&1 ||
		{ cat "$TMP/pip.log"; die "pip wheel of pyproject.toml failed"; }
	whl=$(ls "$TMP"/whl/psched-"$ver"-py3-none-any.whl 2>/dev/null)
	[ -f "$whl" ] || die "no psched-$ver wheel: $(ls "$TMP/whl")"
	"$PY" -m pip install --no-deps -q --target "$TMP/site" "$whl" >"$TMP/pip2.log" 2>&1 || { cat "$TMP/pip2.log"; die "pip install of the wheel failed"; }
	v=$(cd "$TMP" && PYTHONPATH="$TMP/site" "$PY" -c 'import psched; print(psched.__version__, psched.__file__)')
	case $v in "$ver $TMP/site/psched/__init__.py") ;; *) die "wheel's psched: '$v', want $ver from $TMP/site" ;; esac
else
	echo "pip/setuptools/wheel for $PY not installed: wheel not checked"
fi
echo "ok: --version $ver everywhere, per-role --help, ISO log time, waiting message once"
