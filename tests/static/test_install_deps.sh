#!/usr/bin/env bash
# once
# scripts/install-deps.sh against fake apt-get/dpkg-query (nothing is
# installed): the base set has make and prometheus (test_metrics.sh) and
# no python3-torch; --for torch asks
# for python3-torch only; every apt-get call waits for the dpkg lock
# (DPkg::Lock::Timeout) instead of failing; a bad group is refused.
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
cat >"$tmp/bin/dpkg-query" <<'F'
#!/bin/sh
exit 1
F
cat >"$tmp/bin/apt-get" <<'F'
#!/bin/sh
echo "apt-get $*" >>"$APT_LOG"
F
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/apt-get"
# sudo is bypassed when root; otherwise a fake sudo runs the command.
printf '#!/bin/sh\nexec "$@"\n' >"$tmp/bin/sudo"
chmod +x "$tmp/bin/sudo"
fail=0
run() { # log args...
	local log=$1
	shift
	APT_LOG=$log PATH="$tmp/bin:$PATH" bash scripts/install-deps.sh "$@" >"$log.out" 2>&1
}

run "$tmp/base.log" || { echo "FAIL: base install exited $?"; cat "$tmp/base.log.out"; fail=1; }
inst=$(grep ' install ' "$tmp/base.log")
for p in make gcc libprotobuf-c-dev libgsl-dev nettle-dev zlib1g-dev python3-numpy prometheus; do
	echo "$inst" | grep -qw -- "$p" || { echo "FAIL: base set lacks $p: $inst"; fail=1; }
done
echo "$inst" | grep -q python3-torch && { echo "FAIL: base set installs python3-torch"; fail=1; }
n=$(grep -c . "$tmp/base.log")
nl=$(grep -c 'DPkg::Lock::Timeout=[1-9]' "$tmp/base.log")
[ "$n" -ge 2 ] && [ "$n" = "$nl" ] ||
	{ echo "FAIL: not every apt-get call waits for the lock:"; cat "$tmp/base.log"; fail=1; }

run "$tmp/torch.log" --for torch || { echo "FAIL: --for torch exited $?"; fail=1; }
inst=$(grep ' install ' "$tmp/torch.log")
[ "$(echo "$inst" | sed 's/.* --no-install-recommends //')" = python3-torch ] ||
	{ echo "FAIL: --for torch installs: $inst"; fail=1; }
grep -q 'DPkg::Lock::Timeout' "$tmp/torch.log" || { echo "FAIL: --for torch does not wait for the lock"; fail=1; }

run "$tmp/bad.log" --for nosuch
rc=$?
[ "$rc" = 2 ] && grep -q "nosuch" "$tmp/bad.log.out" ||
	{ echo "FAIL: --for nosuch: exit $rc, $(cat "$tmp/bad.log.out")"; fail=1; }
[ -s "$tmp/bad.log" ] && { echo "FAIL: --for nosuch ran apt-get"; fail=1; }
[ $fail = 0 ] && echo "ok: install-deps base set, --for torch, lock timeout"
exit $fail
