#!/usr/bin/env bash
# once
# docs/configuration.md matches the options table (common/options_table.c,
# plus the variables common/options.c reads by name): every variable and
# every flag of the table is named there, in backquotes, and every
# PS_* / PSCHED_* / DMLC_* / BYTEPS_* name the page gives is one some
# source file reads or prints (C, Python, shell, Makefile; docs and
# README do not count).  The checker's own self-test runs first, on
# copies of the page with a knob taken out and a knob made up, so a
# checker that cannot fail fails here.
set -eu
export LC_ALL=C # one sort order for comm
cd "$(dirname "$0")/../.."
DOC=docs/configuration.md
[ -f "$DOC" ] || { echo "FAIL: no $DOC"; exit 1; }

# The table's variables: the quoted upper-case names of its { "ENV", ... }
# lines, and what options.c reads with getenv().
table_vars=$( {
	grep -E '^[[:space:]]*\{ "[A-Z][A-Z0-9_]*"' common/options_table.c |
		grep -oE '"[A-Z][A-Z0-9_]*"' | tr -d '"'
	grep -oE 'getenv\("[A-Z][A-Z0-9_]*"\)' common/options.c |
		grep -oE '"[A-Z0-9_]+"' | tr -d '"'
} | sort -u)
# The table's flags: the first string of each entry, `{ "flag",`.
table_flags=$(grep -E '^[[:space:]]*\{ "[a-z][a-z0-9-]*",$' common/options_table.c |
	grep -oE '"[a-z0-9-]+"' | tr -d '"' | sort -u)
[ "$(echo "$table_vars" | wc -l)" -ge 40 ] ||
	{ echo "FAIL: read only $(echo "$table_vars" | wc -l) variables from the options table"; exit 1; }
[ "$(echo "$table_flags" | wc -l)" -ge 40 ] ||
	{ echo "FAIL: read only $(echo "$table_flags" | wc -l) flags from the options table"; exit 1; }

# Every such name in the sources (not this script, not the docs).
known=$(grep -rhoE '\b(PS|PSCHED|DMLC|BYTEPS)_[A-Z0-9_]*[A-Z0-9]\b' \
	--include='*.c' --include='*.h' --include='*.cu' --include='*.py' \
	--include='*.sh' --include=Makefile \
	--exclude-dir=.git --exclude-dir=docs --exclude-dir='build*' \
	--exclude=test_docs_knobs.sh . | sort -u)

# check FILE: 0 when FILE names every knob and no unknown one, else 1
# with the reasons on stdout.
check() {
	local f=$1 ticks miss unknown
	# What the page has in backquotes, one piece a line.
	ticks=$(grep -oE '`[^`]+`' "$f" | tr -d '`' | sort -u)
	miss=$( {
		comm -23 <(echo "$table_vars") <(echo "$ticks")
		comm -23 <(echo "$table_flags" | sed 's/^/--/') \
			<(echo "$ticks" | grep -oE '^--[a-z0-9-]+' | sort -u)
	} )
	unknown=$(comm -23 <(grep -oE '\b(PS|PSCHED|DMLC|BYTEPS)_[A-Z0-9_]*[A-Z0-9]\b' "$f" | sort -u) \
		<(echo "$known"))
	[ -z "$miss" ] || echo "$miss" | sed "s|.*|  & (options table) is not in $DOC|"
	[ -z "$unknown" ] || echo "$unknown" | sed "s|.*|  & is in $DOC but no source file knows it|"
	[ -z "$miss" ] && [ -z "$unknown" ]
}

# Self-test: a page without one knob, and one with a made-up knob, fail.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
drop=$(echo "$table_vars" | grep '^PS_' | head -1)
grep -vF "\`$drop\`" "$DOC" >"$tmp/missing.md"
if check "$tmp/missing.md" >/dev/null; then
	echo "FAIL: self-test: a page without $drop passed"
	exit 1
fi
made_up="PS_NOT_A_$$_KNOB"
{ cat "$DOC"; echo "| \`$made_up\` | | | | |"; } >"$tmp/extra.md"
if check "$tmp/extra.md" >/dev/null; then
	echo "FAIL: self-test: a page naming $made_up passed"
	exit 1
fi

if ! out=$(check "$DOC"); then
	echo "FAIL: $DOC and the options table disagree:"
	echo "$out"
	exit 1
fi
echo "ok: $DOC names all $(echo "$table_vars" | wc -l) variables and $(echo "$table_flags" | wc -l) flags of the options table, and no unknown knob"
