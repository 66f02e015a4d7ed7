#!/usr/bin/env bash
# psched-launch --launcher ssh across three "hosts": network namespaces
# joined by veth links to a bridge (the link of host 3 tbf-shaped), each
# running Debian's openssh-server (/usr/sbin/sshd with its own config, a
# throw-away host key, on its own address), logged into with a throw-away
# user key.  Checks:
#   1. a 2-server 2-worker job across them ends 0 with every worker's
#      aggregates verified exactly, output prefixed by role, rank and host,
#      each sshd saw logins (the processes really ran there), and the
#      workers got the job's DMLC_*, an --env variable and a secret;
#   2. a user's PS_JOB_TOKEN reaches the remote worker's environment and
#      no command line here or on the hosts;
#      killing one remote worker (SIGKILL, inside its namespace) ends the
#      job with that worker named and its status, and no psched process
#      is left in any namespace;
#   3. SIGINT to the launcher (Ctrl-C) stops every remote process.
# Namespaces, links and sshd processes are removed on exit.  Exit 77
# without root or namespaces.
. "$(dirname "$0")/lib.sh"
# The launcher makes the job's secret itself (tested here): not lib.sh's.
unset PS_JOB_TOKEN
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
bash scripts/install-deps.sh openssh-server openssh-client >"$TMP/deps.log" 2>&1 ||
	{ cat "$TMP/deps.log"; echo "cannot install openssh-server"; exit 77; }
[ -x /usr/sbin/sshd ] || { echo "no /usr/sbin/sshd"; exit 77; }

ABS_BIN=$(cd "$BIN" && pwd)
LAUNCH=$(pwd)/bin/psched-launch
id=$$
net=10.78.$((id % 250))
br=psl${id}br
NS=()
SSHD_PIDS=()
remote_pids() { # psched processes left in the namespaces
	local ns p
	for ns in "${NS[@]}"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			case $(cat /proc/"$p"/comm 2>/dev/null) in ps-*) echo "$p" ;; esac
		done
	done
}
net_cleanup() {
	local p ns
	for p in $(remote_pids); do kill -9 "$p" 2>/dev/null; done
	for p in "${SSHD_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for ns in "${NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
	ip link del "$br" 2>/dev/null
	cleanup
}
trap net_cleanup EXIT

ip link add "$br" type bridge 2>"$TMP/ip.err" ||
	{ echo "cannot create a bridge: $(cat "$TMP/ip.err")"; exit 77; }
ip addr add "$net.1/24" dev "$br"
ip link set "$br" up
ssh-keygen -q -t ed25519 -N "" -f "$TMP/hostkey" || die "ssh-keygen (host)"
ssh-keygen -q -t ed25519 -N "" -f "$TMP/userkey" || die "ssh-keygen (user)"
cp "$TMP/userkey.pub" "$TMP/authorized_keys"
chmod 600 "$TMP/authorized_keys"
mkdir -p /run/sshd # sshd's privilege separation directory
for i in 1 2 3; do
	ns=psl$id-h$i
	ip netns add "$ns" || die "ip netns add $ns"
	NS+=("$ns")
	ip link add "psl${id}v$i" type veth peer name "psl${id}n$i" || die "veth $i"
	ip link set "psl${id}n$i" netns "$ns"
	ip link set "psl${id}v$i" master "$br" up
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "$net.1$i/24" dev "psl${id}n$i"
	ip -n "$ns" link set "psl${id}n$i" up
	cat >"$TMP/sshd$i.conf" <<EOF
ListenAddress $net.1$i
Port 22
HostKey $TMP/hostkey
PidFile $TMP/sshd$i.pid
AuthorizedKeysFile $TMP/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel VERBOSE
EOF
	ip netns exec "$ns" /usr/sbin/sshd -D -e -f "$TMP/sshd$i.conf" 2>"$TMP/sshd$i.log" &
	SSHD_PIDS+=($!)
done
# Host 3's link: 200 Mbit/s both ways.
tc qdisc add dev "psl${id}v3" root tbf rate 200mbit burst 64kb latency 100ms || die "tbf"
ip netns exec "psl$id-h3" tc qdisc add dev "psl${id}n3" root tbf rate 200mbit burst 64kb latency 100ms || die "tbf (ns)"

cat >"$TMP/ssh_config" <<EOF
Host *
  User root
  IdentityFile $TMP/userkey
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ConnectTimeout 10
EOF
SSH="ssh -F $TMP/ssh_config"
for i in 1 2 3; do
	ok=0
	for t in $(seq 1 $((100 * MULT))); do
		$SSH "$net.1$i" true 2>/dev/null && { ok=1; break; }
		sleep 0.1
	done
	[ $ok = 1 ] || { cat "$TMP/sshd$i.log"; die "sshd on $net.1$i does not answer"; }
done
printf '%s\n' "# three hosts" "$net.11:2" "$net.12" "$net.13   # shaped" >"$TMP/hosts"
export PSCHED_BIN_DIR=$ABS_BIN PS_CONNECT_TIMEOUT=$((30 * MULT))
unset DMLC_PS_ROOT_URI

# 1. A job across the hosts.  spread: server 0 on h1, server 1 on h2,
# worker 0 on h3, worker 1 on h1.  The workers print what they were
# given (--env, the role, their id, the secret's length) first.
cat >"$TMP/worker.sh" <<EOS
#!/bin/sh
echo "env: PSTEST_X=\$PSTEST_X role=\$DMLC_ROLE id=\$DMLC_WORKER_ID root=\$DMLC_PS_ROOT_URI token_len=\${#PS_JOB_TOKEN}"
exec $ABS_BIN/ps-worker "\$@"
EOS
chmod +x "$TMP/worker.sh"
timeout $((240 * MULT)) "$LAUNCH" --launcher ssh -H "$TMP/hosts" --ssh "$SSH" -s 2 -w 2 \
	--env PSTEST_X="a b'c" -- "$TMP/worker.sh" --steps 10 --keys 3 --sizes 1,4,4K,1M \
	>"$TMP/job1.out" 2>"$TMP/job1.err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/job1.out" "$TMP/job1.err"; die "job exited $rc"; }
for w in "0@$net.13" "1@$net.11"; do
	grep -qF "[worker $w] env: PSTEST_X=a b'c role=worker id=${w%@*} root=$net.11 token_len=32" "$TMP/job1.out" ||
		{ cat "$TMP/job1.out"; die "worker $w did not get the job's environment"; }
done
for w in "0@$net.13" "1@$net.11"; do
	grep -q "^\[worker $w\] ps-worker rank .* verified" "$TMP/job1.out" ||
		{ cat "$TMP/job1.out" "$TMP/job1.err"; die "worker $w did not verify its sums"; }
done
grep -q "^\[server 1@$net.12\] .*listening on" "$TMP/job1.out" ||
	{ cat "$TMP/job1.out"; die "no output of server 1 on $net.12"; }
for i in 1 2 3; do
	n=$(grep -c "Accepted publickey" "$TMP/sshd$i.log")
	[ "$n" -ge 2 ] || die "sshd on host $i saw $n logins"
done
[ -z "$(remote_pids)" ] || die "processes left after the job: $(remote_pids)"
echo "ok job across 3 ssh hosts: $(grep -h verified "$TMP/job1.out" | tr '\n' ' ')"

# remote_gone JOB WHAT: wait (30 s x MULT) until no psched process is left
# in the namespaces; GONE_S is how long it took, or fail with each one's state
# (lines prefixed FAIL:, which the suite's summary keeps)
remote_gone() {
	local t0=$SECONDS t p
	for t in $(seq 1 $((300 * MULT))); do
		[ -z "$(remote_pids)" ] && { GONE_S=$((SECONDS - t0)); return 0; }
		sleep 0.1
	done
	for p in $(remote_pids); do
		echo "FAIL: left $p: $(ps -o pid=,ppid=,pgid=,sid=,etimes=,stat=,args= -p "$p")" \
			"state $(awk '/^State/ {print $2$3}' /proc/"$p"/status 2>/dev/null)" \
			"wchan $(cat /proc/"$p"/wchan 2>/dev/null)" \
			"threads $(ls /proc/"$p"/task 2>/dev/null | wc -l)"
		echo "FAIL: parent of $p: $(ps -o pid=,stat=,args= -p "$(ps -o ppid= -p "$p" | tr -d ' ')" 2>/dev/null)"
	done
	sed 's/^/FAIL: job log: /' "$TMP/$1.err" | tail -n 12
	die "left running after $2, $((SECONDS - t0)) s on: $(remote_pids)"
}

# wait_remote NS NAME: pid of a psched process NAME running in NS
wait_remote() {
	local t p
	for t in $(seq 1 $((300 * MULT))); do
		for p in $(ip netns pids "$1"); do
			[ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$2" ] && { echo "$p"; return 0; }
		done
		sleep 0.1
	done
	return 1
}

# 2. Kill worker 0 on host 3: the job ends naming it.  This job's
# secret is the user's.
tok2=ssh-test-secret-$id-$RANDOM
PS_JOB_TOKEN=$tok2 "$LAUNCH" --launcher ssh -H "$TMP/hosts" --ssh "$SSH" -s 2 -w 2 --grace 2 \
	-- "$ABS_BIN/ps-worker" --steps 0 --seconds 300 --keys 2 --sizes 4K,64K \
	>"$TMP/job2.out" 2>"$TMP/job2.err" &
lpid=$!
PIDS+=("$lpid")
wpid=$(wait_remote "psl$id-h3" ps-worker) || die "worker 0 never ran on host 3"
sleep 1
# The secret shows on no command line, here or on the hosts.
n=0
for p in /proc/[0-9]*; do
	c=$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null)
	n=$((n + 1))
	[[ $c == *"$tok2"* ]] && die "the job's secret is on the command line of $c"
done
grep -qa "PS_JOB_TOKEN=$tok2" "/proc/$wpid/environ" || die "the remote worker did not get the user's PS_JOB_TOKEN"
echo "ok the secret is on none of $n command lines, and in the remote worker's environment"
kill -9 "$wpid"
wait_pid "$lpid" 60
rc=$?
[ $rc = 137 ] || { cat "$TMP/job2.err"; die "launcher exited $rc after a worker was killed, want 137"; }
grep -q "worker 0 on $net.13 exited with status 137 (killed by SIGKILL)" "$TMP/job2.err" ||
	{ cat "$TMP/job2.err"; die "the killed worker was not named"; }
remote_gone job2 "the failure"
echo "ok killed worker named: $(grep 'exited with' "$TMP/job2.err"); every remote process gone in $GONE_S s"

# 3. Ctrl-C (SIGINT) stops every remote process.
"$LAUNCH" --launcher ssh -H "$TMP/hosts" --ssh "$SSH" -s 2 -w 2 --grace 2 \
	-- "$ABS_BIN/ps-worker" --steps 0 --seconds 300 --keys 2 --sizes 4K \
	>"$TMP/job3.out" 2>"$TMP/job3.err" &
lpid=$!
PIDS+=("$lpid")
wait_remote "psl$id-h1" ps-worker >/dev/null || die "worker 1 never ran on host 1"
kill -INT "$lpid"
wait_pid "$lpid" 60
rc=$?
[ $rc = 130 ] || { cat "$TMP/job3.err"; die "launcher exited $rc on SIGINT, want 130"; }
remote_gone job3 Ctrl-C
echo "ok Ctrl-C stopped every remote process (all gone in $GONE_S s)"
exit 0
