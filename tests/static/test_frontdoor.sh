#!/usr/bin/env bash
# once
# The front door stays one (tests/static/check_frontdoor.py): README and
# docs links resolve, cited files and sections exist, no session-diary
# words outside CHANGELOG.md, README <= 300 lines, docs/ <= 40 files.
# The checker first runs on a copy of the tree with each kind of problem
# planted, and must catch every one: a checker that cannot fail fails here.
set -eu
cd "$(dirname "$0")/../.."
git rev-parse --git-dir >/dev/null 2>&1 || { echo "not a git checkout: the tracked files are unknown"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
git ls-files >"$TMP/list"
mkdir "$TMP/tree"
grep -v '^tests/fuzz/corpus/' "$TMP/list" | while IFS= read -r f; do
	[ -f "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$TMP/tree"

planted() { # file text what-the-checker-must-say
	cp "$TMP/tree/$1" "$TMP/saved"
	printf '%s\n' "$2" >>"$TMP/tree/$1"
	if python3 tests/static/check_frontdoor.py --root "$TMP/tree" --list "$TMP/list" >"$TMP/out"; then
		echo "FAIL: planted '$2' in $1, the checker passed"; exit 1
	fi
	grep -qF "$3" "$TMP/out" || { echo "FAIL: planted '$2' in $1, want '$3' in:"; cat "$TMP/out"; exit 1; }
	cp "$TMP/saved" "$TMP/tree/$1"
	echo "ok: planted '$2' in $1 -> $3"
}
# Only what is planted may fail: the copy itself must pass first.
python3 tests/static/check_frontdoor.py --root "$TMP/tree" --list "$TMP/list" >/dev/null ||
	python3 tests/static/check_frontdoor.py --root "$TMP/tree" --list "$TMP/list" | tail -n 30
planted README.md 'See [the guide](docs/no-such-page.md).' 'broken link: docs/no-such-page.md'
planted README.md 'See [tuning](docs/tuner.md#no-such-heading).' 'no heading for anchor'
planted docs/tuner.md 'As measured in stop 12, the tuner locks in.' 'session-diary words: stop 12'
planted docs/tuner.md 'Ran at 21:17 UTC on a quiet machine.' 'session-diary words'
planted common/log.c '/* The design: ARCHITECTURE.md, key decision 2. */' 'cites a file the tree lacks: ARCHITECTURE.md'
planted common/log.c '/* See worker/no_such_file.c. */' 'cites a file the tree lacks: worker/no_such_file.c'
planted common/log.c '/* README "No Such Section". */' 'cites a section README.md lacks'
seq 1 300 >>"$TMP/tree/README.md"
python3 tests/static/check_frontdoor.py --root "$TMP/tree" --list "$TMP/list" | grep -q 'README has' ||
	{ echo "FAIL: a README of over 300 lines passed"; exit 1; }
echo "ok: a README of over 300 lines is caught"
# The tree itself.
python3 tests/static/check_frontdoor.py
