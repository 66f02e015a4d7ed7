#!/usr/bin/env bash
# once
# No library C file (.c or .h) over 900 lines: a longer file is split into
# cohesive files by whole functions.  Checks the folders given as arguments
# (default: the library's common/ worker/ server/ scheduler/ app/).  Its
# self-test first: in a temp folder of its own a 900-line file passes and
# a planted 901-line one must be caught, so a check that cannot fail fails
# here (and a long file in the tree is reported as itself).
set -eu
cd "$(dirname "$0")/../.."
MAX=900

# check DIR... : one line per file over $MAX lines; exit 1 if any.
check() {
	local bad=0 f n rel
	while IFS= read -r f; do
		n=$(wc -l <"$f")
		rel=${f#./}
		if [ "$n" -gt "$MAX" ]; then
			echo "$rel: $n lines (over $MAX)"
			bad=1
		fi
	done < <(find "$@" -type f \( -name '*.c' -o -name '*.h' \) | sort)
	return $bad
}

if [ "${1:-}" != --no-selftest ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir "$tmp/lib"
	seq 900 | sed 's|.*|/* line */|' >"$tmp/lib/full.c"
	check "$tmp/lib" >/dev/null || { echo "selftest: a 900-line file fails"; exit 1; }
	seq 901 | sed 's|.*|/* line */|' >"$tmp/lib/planted.c"
	out=$(check "$tmp/lib") && { echo "selftest: 901-line file not caught"; exit 1; }
	case "$out" in
	*"planted.c: 901 lines"*) echo "selftest ok" ;;
	*) echo "selftest: wrong message: $out"; exit 1 ;;
	esac
else
	shift
fi
[ $# -gt 0 ] || set -- common worker server scheduler app
if check "$@"; then
	echo "ok: no C file over $MAX lines in $*"
else
	exit 1
fi
