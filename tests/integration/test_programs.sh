#!/usr/bin/env bash
# Every program documents every option it reads with its default, and
# rejects a bad flag with a message and exit status 2.  (Which options a
# role's --help leaves out: test_version_help.sh.)
. "$(dirname "$0")/lib.sh"
for p in ps-scheduler ps-server ps-worker ps-bench; do
	"$BIN/$p" --help >"$TMP/help" 2>&1 || die "$p --help failed"
	own=()
	# The scheduler listens on the root port: no node-host/port of its own.
	[ $p = ps-scheduler ] || own+=(node-host interface port DMLC_NODE_HOST DMLC_INTERFACE DMLC_PORT)
	# ps-bench takes any role; the others have theirs.
	[ $p != ps-bench ] || own+=(DMLC_ROLE)
	for opt in root-uri root-port num-server num-worker verbose \
		heartbeat-interval heartbeat-timeout connect-timeout request-timeout transport \
		DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NUM_SERVER DMLC_NUM_WORKER \
		PS_VERBOSE PS_HEARTBEAT_INTERVAL \
		PS_HEARTBEAT_TIMEOUT PS_PARTITION_BYTES PS_CREDIT_BYTES "${own[@]}"; do
		grep -q -- "$opt" "$TMP/help" || die "$p --help does not mention $opt"
	done
	"$BIN/$p" --num-server abc >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc = 2 ] || die "$p with a bad value exited $rc"
	grep -q "num-server" "$TMP/err" || die "$p: message does not name the flag: $(cat "$TMP/err")"
	DMLC_NUM_WORKER=zero "$BIN/$p" >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc = 2 ] || die "$p with a bad env value exited $rc"
	grep -q "DMLC_NUM_WORKER" "$TMP/err" || die "$p: message does not name the variable"
done
"$BIN/ps-scheduler" --bogus 2>"$TMP/err"; [ $? = 2 ] || die "unknown flag accepted"
echo "ok all programs"
