#!/usr/bin/env bash
# libpsched.so exports its public API and nothing else: every defined
# dynamic symbol is psched_<name> (not the generated psched__* protobuf
# code, not psd_* internals), every function the public headers declare
# is exported, no program code is in the library, the SONAME is
# versioned, and the pkg-config file that `make install` writes lets a
# program build and run against it.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
lib=$BUILD/lib/libpsched.so
[ -e "$lib" ] || { echo "no $lib: run make first"; exit 1; }
fail=0

bad=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^psched_[a-z]' || true)
if [ -n "$bad" ]; then
	echo "FAIL: $(echo "$bad" | wc -l) exported symbols outside the API, e.g.:"
	echo "$bad" | head -5
	fail=1
fi

# Functions the public headers declare (preprocessed, so no comments;
# typedef'd callback types are no functions).
declared=$(for h in include/psched.h include/psched/*.h; do
	cc -E -P -Iinclude "$h"; done | tr '\n' ' ' | tr ';' '\n' |
	grep -v typedef | grep -oE '\bpsched_[a-z_0-9]+ *\(' |
	grep -oE 'psched_[a-z_0-9]+' | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
if [ -n "$missing" ]; then
	echo "FAIL: declared in include/ but not exported: $missing"
	fail=1
fi
echo "exported: $(echo "$exported" | wc -l) symbols, $(echo "$declared" | wc -l) declared"

# The library holds only what a user links: the programs (programs/ps-*/,
# ps-worker's model profiles and replay among them) are not in it.
prog=$(nm -A --defined-only "$BUILD/lib/libpsched.a" 2>/dev/null |
	grep -E ' [TDBR] (main|psd_profile_[a-z_]+|psd_replay_[a-z_]+)$' || true)
if [ -n "$prog" ]; then
	echo "FAIL: program code in libpsched.a:"
	echo "$prog" | head -5
	fail=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
if [ "$soname" != libpsched.so.1 ]; then
	echo "FAIL: SONAME is '$soname', want libpsched.so.1"
	fail=1
fi

# make install of a sanitizer tree from here could rebuild it with other
# flags; the install is checked in the plain build (as test_python does).
if nm -D "$lib" | grep -qE ' U __(a|t)san_'; then
	[ $fail = 0 ] && echo "ok: exports and SONAME (install checked in the plain build)"
	exit $fail
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make --no-print-directory BUILD="$BUILD" PREFIX="$tmp" install >"$tmp/install.log" 2>&1 ||
	{ echo "FAIL: make install"; tail -5 "$tmp/install.log"; exit 1; }
[ -L "$tmp/lib/libpsched.so" ] && [ -f "$tmp/lib/libpsched.so.1" ] ||
	{ echo "FAIL: install did not lay out libpsched.so -> libpsched.so.1"; fail=1; }
cat >"$tmp/use.c" <<'C'
#include <psched.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	struct psched_cfg *cfg;
	char role[16];
	if (psched_cfg_create(&cfg) || psched_cfg_set(cfg, "role", "server") ||
	    psched_cfg_get(cfg, "role", role, sizeof(role)))
		return 1;
	psched_cfg_destroy(cfg);
	printf("%s %s\n", role, psched_strerror(-22));
	return strcmp(role, psched_role_name(PSCHED_ROLE_SERVER)) != 0;
}
C
export PKG_CONFIG_PATH=$tmp/lib/pkgconfig
if ! cc -o "$tmp/use" "$tmp/use.c" $(pkg-config --cflags --libs psched) 2>"$tmp/cc.log"; then
	echo "FAIL: building against pkg-config psched:"; cat "$tmp/cc.log"; fail=1
elif ! out=$(LD_LIBRARY_PATH=$tmp/lib "$tmp/use"); then
	echo "FAIL: the program built against the installed library failed: $out"; fail=1
else
	echo "pkg-config build ran: $out"
	LD_LIBRARY_PATH=$tmp/lib ldd "$tmp/use" | grep -q "libpsched.so.1 => $tmp/lib/" ||
		{ echo "FAIL: not linked to the installed libpsched.so.1"; ldd "$tmp/use"; fail=1; }
fi
[ $fail = 0 ] && echo "ok: exports, SONAME and pkg-config"
exit $fail
