#!/usr/bin/env bash
# Server snapshots (docs/snapshots.md).  tests/python/test_snapshot.py:
# 2x2 Adam jobs snapshot every 2 steps (dense keys), or on demand at
# step 4 (dense keys and an embedding table); 3-server jobs restore step
# 4 and end bit-equal to the uninterrupted runs.  Then bad snapshots, each
# refused by ps-server at start with a message naming what is wrong:
# truncated, one byte changed, garbage, another job's secret, a server's
# file missing; and an incomplete newer step beside a complete one,
# where the complete one is taken.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
unset PS_JOB_TOKEN PS_JOB_TOKEN_FILE

timeout $((300 * MULT)) "$PYTHON" tests/python/test_snapshot.py "$TMP" >"$TMP/py.log" 2>&1
rc=$?
cat "$TMP/py.log"
[ $rc = 0 ] || { tail -n 30 "$TMP"/*.log 2>/dev/null; die "test_snapshot.py exited $rc"; }
for m in periodic demand; do
	grep -q "^$m snapshot restore: ok" "$TMP/py.log" || die "$m: restore check did not pass"
done
grep -q "row-sparse tables are not in periodic snapshots" "$TMP/periodic.run.log" ||
	die "periodic snapshots left the table out without saying so"
grep -q "is not in the snapshot of step 4 (periodic snapshots leave tables out): it starts from its init" \
	"$TMP/periodic.resume.log" || die "the restore did not say a table was missing"
for r in 0 1; do
	for m in periodic demand; do
		grep -q "snapshot of step 4 holds 40 bytes of float32, the job declares 48" "$TMP/$m.refused.$r" 2>/dev/null ||
			die "$m: the resized key was not refused for worker $r"
	done
	grep -q "snapshot of step 4 holds 500 rows of 24 bytes of float32, the job declares 500 rows of 28 bytes" \
		"$TMP/refused_rows.$r" 2>/dev/null || die "the reshaped table was not refused for worker $r"
done

SNAP=$TMP/demand
export PS_JOB_TOKEN_FILE=$SNAP/job.token DMLC_PS_ROOT_PORT=1 PS_CONNECT_TIMEOUT=1
# refused NAME WHAT: ps-server with PS_RESTORE=$TMP/NAME exits non-zero
# at start, its log naming WHAT.
refused() {
	local out=$TMP/bad-${1%%/*}.log rc
	PS_RESTORE=$TMP/$1 timeout $((20 * MULT)) "$BIN/ps-server" >"$out" 2>&1
	rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] || { cat "$out"; die "$1: ps-server exited $rc"; }
	grep -q "cannot restore from $TMP/$1: .*$2" "$out" || { cat "$out"; die "$1: no '$2' in the refusal"; }
	echo "ok: $1 refused: $(grep -o "cannot restore.*" "$out" | head -1 | cut -c1-160)"
}
bad_copy() { rm -rf "$TMP/$1"; mkdir -p "$TMP/$1"; cp -r "$SNAP/step-4" "$TMP/$1/step-4"; }
F=step-4/server-1-of-2.psnap

bad_copy trunc
truncate -s -7 "$TMP/trunc/$F"
refused trunc "checksum does not match"

bad_copy flipped
sz=$(stat -c %s "$TMP/flipped/$F")
printf "\x5a" | env -u LD_PRELOAD dd of="$TMP/flipped/$F" bs=1 seek=$((sz / 2)) conv=notrunc status=none
refused flipped "checksum does not match"

bad_copy garbage
head -c 5000 /dev/urandom >"$TMP/garbage/$F"
refused garbage "not a psched snapshot file"

bad_copy tiny
head -c 10 /dev/urandom >"$TMP/tiny/$F"
refused tiny "not a psched snapshot file (10 bytes)"

bad_copy other
PS_JOB_TOKEN_FILE= PS_JOB_TOKEN=another-jobs-secret-0123456789 refused other "written by another job"

bad_copy missing
rm "$TMP/missing/$F"
refused missing/step-4 "files are missing"
refused missing "no complete snapshot"

mkdir -p "$TMP/empty"
refused empty "no complete snapshot"

# A newer step that lacks a file is skipped for the complete one.
mkdir -p "$TMP/root"
cp -r "$TMP/periodic/step-4" "$TMP/root/step-4"
cp -r "$TMP/periodic/step-6" "$TMP/root/step-9"
rm "$TMP/root/step-9/server-1-of-2.psnap"
PS_JOB_TOKEN_FILE=$TMP/periodic/job.token PS_RESTORE=$TMP/root PS_VERBOSE=1 timeout $((20 * MULT)) "$BIN/ps-server" >"$TMP/fallback.log" 2>&1
grep -q "snapshot $TMP/root/step-9: not complete" "$TMP/fallback.log" || { cat "$TMP/fallback.log"; die "incomplete step 9 not reported"; }
grep -q "restoring the snapshot of step 4 (2 servers) from $TMP/root/step-4" "$TMP/fallback.log" ||
	{ cat "$TMP/fallback.log"; die "step 4 was not taken"; }
echo "ok: an incomplete newer snapshot is skipped for the complete one"

# Files made by a second writer of the documented format, with the job's
# secret (so the trailer checks) but records that lie.
"$PYTHON" tests/python/test_snapshot.py check-format "$SNAP" "$TMP" || die "format check failed"
refused lies "malformed dense record"
refused short "malformed dense record"
refused states "malformed states record"
refused states2 "malformed states record"

# PS_SNAPSHOT_STEPS alone is refused.
PS_SNAPSHOT_STEPS=5 timeout $((20 * MULT)) "$BIN/ps-server" >"$TMP/nodir.log" 2>&1 &&
	die "PS_SNAPSHOT_STEPS without a directory was accepted"
grep -q "PS_SNAPSHOT_STEPS=5 needs PS_SNAPSHOT_DIR" "$TMP/nodir.log" || { cat "$TMP/nodir.log"; die "no reason given"; }
echo "ok: snapshots written, restored into another server count, bad snapshots refused"
exit 0
