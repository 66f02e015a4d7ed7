#!/usr/bin/env bash
# once
# Every C source and header git knows is laid out as .clang-format says
# (what `make format` writes): `make format-check` (the Makefile keeps
# the file list and the flags), so a change that drifts from the style
# fails here, not only in `make check`.  Skips (77) without clang-format 14 or outside a git tree.
set -u
cd "$(dirname "$0")/../.."
if ! command -v clang-format >/dev/null; then
	echo "clang-format not installed (scripts/install-deps.sh installs it)"
	exit 77
fi
# Another major version lays some constructs out differently: the tree is
# kept in Debian 12's (14), what install-deps.sh installs.
ver=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$ver" != 14 ]; then
	echo "clang-format $ver, not 14 (Debian 12's, the tree's layout): not checked"
	exit 77
fi
# Outside a git tree the Makefile's list is empty (and clang-format would
# read standard input).
if ! files=$(git ls-files '*.c' '*.h' 2>/dev/null) || [ -z "$files" ]; then
	echo "not a git work tree: no list of sources to check"
	exit 77
fi
out=$(make --no-print-directory format-check </dev/null 2>&1)
rc=$?
if [ "$rc" != 0 ]; then
	echo "$out" | grep 'error:' | cut -d: -f1 | sort | uniq -c |
		sed 's/^/FAIL: places off the style: /'
	echo "$out" | head -30
	echo "run 'make format' and look at the diff"
	exit 1
fi
echo "ok: $(echo "$files" | wc -l) files as .clang-format lays them out"
