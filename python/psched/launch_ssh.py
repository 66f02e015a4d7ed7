# SPDX-License-Identifier: MIT
"""ssh back end of psched-launch (dmlc-tracker / bpslaunch style).

The hostfile names one host a line, ``host[:slots]`` (``user@host`` too;
``#`` starts a comment; slots default 1).  The scheduler runs on the first
host (``--scheduler-host``) and takes no slot; servers are placed first,
then workers: ``--placement spread`` (default) deals them round-robin over
the hosts with a free slot, ``pack`` fills each host's slots in turn.
``--oversubscribe`` lets placement go round again when the slots are used
up; without it too few slots is an error naming the counts.
``--server-hostfile`` puts the servers on hosts of their own (BytePS
style) and the workers on the hostfile's.

Each process runs as ``ssh HOST sh -c SCRIPT``: the script exports the
job's environment (DMLC_*, PS_*, PSCHED_*, BYTEPS_*, PYTHONPATH and every
``--env NAME[=VALUE]``), reads the job's secret from its standard input
(so it never shows on a command line), starts the program, and kills it
when its standard input ends: the launcher closing the connection (on a
failure, Ctrl-C, or its own death) stops every remote process.  Output
comes back line by line, prefixed ``[worker 1@host]``.  The remote
programs and the worker command use the same paths as here (a shared or
identical install; ``--remote-bin-dir`` for ps-server/ps-scheduler).
"""
import os
import shlex
import subprocess
import sys

from .launch import (FORWARD_PREFIXES, Job, LaunchError, find_program,
                     job_env, read_root_port, role_env, start_pumps)


def add_args(ap):
    g = ap.add_argument_group("ssh back end")
    g.add_argument("-H", "--hostfile",
                   help="ssh: file of host[:slots] lines")
    g.add_argument("--server-hostfile",
                   help="ssh: put the servers on these hosts (host[:slots] "
                        "lines) and only the workers on -H's hosts")
    g.add_argument("--placement", choices=("spread", "pack"),
                   default="spread",
                   help="ssh: round-robin over hosts (spread) or fill each "
                        "host's slots in turn (pack)")
    g.add_argument("--oversubscribe", action="store_true",
                   help="ssh: place more processes than slots")
    g.add_argument("--scheduler-host",
                   help="ssh: host of the scheduler (default the first "
                        "of the hostfile)")
    g.add_argument("--ssh", default=os.environ.get("PSCHED_SSH", "ssh"),
                   help="ssh: the ssh command and its options, one string "
                        "(default $PSCHED_SSH or ssh)")
    g.add_argument("--env", "-x", action="append", default=[],
                   metavar="NAME[=VALUE]",
                   help="ssh: also forward this variable (repeatable)")
    g.add_argument("--remote-bin-dir",
                   help="ssh: where ps-scheduler and ps-server are on the "
                        "hosts (default: where they are here)")
    g.add_argument("--remote-cwd",
                   help="ssh: working directory on the hosts (default "
                        "this one, when it exists there)")
    g.add_argument("--dry-run", action="store_true",
                   help="ssh: print the placement and stop")


def parse_hostfile(text, name="hostfile"):
    """[(host, slots)] from host[:slots] lines; errors name the line."""
    hosts = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 1:
            raise LaunchError("%s line %d: want host[:slots], got %r"
                              % (name, n, raw.strip()), 2)
        host, slots = fields[0], 1
        if ":" in host and not host.startswith("["):
            host, s = host.rsplit(":", 1)
            if not s.isdigit() or int(s) < 1:
                raise LaunchError("%s line %d: slots must be a number >= 1, "
                                  "got %r" % (name, n, s), 2)
            slots = int(s)
        elif host.startswith("["):  # [v6addr]:slots
            end = host.find("]")
            if end < 0:
                raise LaunchError("%s line %d: unclosed [ in %r"
                                  % (name, n, host), 2)
            rest = host[end + 1:]
            if rest:
                if not rest.startswith(":") or not rest[1:].isdigit() \
                        or int(rest[1:]) < 1:
                    raise LaunchError("%s line %d: slots must be a number "
                                      ">= 1, got %r" % (name, n, rest), 2)
                slots = int(rest[1:])
            host = host[1:end]
        if not host:
            raise LaunchError("%s line %d: empty host name" % (name, n), 2)
        hosts.append((host, slots))
    if not hosts:
        raise LaunchError("%s names no host" % name, 2)
    return hosts


def place(hosts, servers, workers, placement="spread", oversubscribe=False,
          server_hosts=None):
    """[(role, rank, host)]: servers first, then workers; with
    server_hosts, servers there and workers on hosts."""
    if server_hosts:
        return place(server_hosts, servers, 0, placement, oversubscribe,
                     None)[:servers] + [
            ("worker", k, h) for _, k, h in
            place(hosts, 0, workers, placement, oversubscribe, None)]
    need = servers + workers
    total = sum(s for _, s in hosts)
    if need > total and not oversubscribe:
        what = "%d servers + %d workers" % (servers, workers)
        if not servers:
            what = "%d workers" % workers
        elif not workers:
            what = "%d servers" % servers
        raise LaunchError("the hostfile has %d slots for %s (add slots, "
                          "or --oversubscribe)" % (total, what), 2)
    order = []
    if placement == "pack":
        while len(order) < need:
            for h, s in hosts:
                order.extend([h] * s)
    else:
        while len(order) < need:
            free = [s for _, s in hosts]
            while any(free) and len(order) < need:
                for i, (h, _) in enumerate(hosts):
                    if free[i] and len(order) < need:
                        order.append(h)
                        free[i] -= 1
    roles = [("server", i) for i in range(servers)] + \
        [("worker", i) for i in range(workers)]
    if not roles:
        return []
    return [(r, k, order[i]) for i, (r, k) in enumerate(roles)]


def host_addr(host):
    """The address part of [user@]host."""
    return host.rsplit("@", 1)[-1]


def remote_script(env, cmd, cwd, grace):
    """sh script run by ssh: secret from stdin, env, cmd in the
    background, killed when stdin ends; exits with cmd's status."""
    lines = ['IFS= read -r t || exit 97',
             'if [ -n "$t" ]; then PS_JOB_TOKEN=$t; export PS_JOB_TOKEN; fi',
             'unset t']
    if cwd:
        lines.append("cd %s 2>/dev/null || true" % shlex.quote(cwd))
    for k in sorted(env):
        lines.append("export %s=%s" % (k, shlex.quote(env[k])))
    q = " ".join(shlex.quote(c) for c in cmd)
    lines += [
        "exec 3<&0",
        # In a session of its own (setsid, util-linux) when the host has
        # it, so that stopping reaches the program's children too.
        "if command -v setsid >/dev/null 2>&1; then",
        "  setsid %s </dev/null & pid=$!; g=-$pid" % q,
        "else",
        "  %s </dev/null & pid=$!; g=$pid" % q,
        "fi",
        # The watcher: end of stdin (the launcher closed the connection or
        # died) stops the program, SIGKILL after the grace period.
        "{ while IFS= read -r l; do :; done; kill -TERM $g; "
        "sleep %d; kill -KILL $g; } <&3 >/dev/null 2>&1 &" % max(
            1, int(grace + 0.999)),
        "w=$!",
        "exec 3<&-",
        "wait $pid; rc=$?",
        "kill $w 2>/dev/null",
        "exit $rc",
    ]
    return "\n".join(lines)


def forwarded_env(env, extra):
    """What crosses to the hosts: DMLC_*/PS_*/PSCHED_*/BYTEPS_*,
    PYTHONPATH, and --env names; never the token (sent on stdin)."""
    out = {k: v for k, v in env.items()
           if k.startswith(FORWARD_PREFIXES) or k == "PYTHONPATH"}
    for item in extra:
        if "=" in item:
            k, v = item.split("=", 1)
            out[k] = v
        elif item in env:
            out[item] = env[item]
        else:
            raise LaunchError("--env %s: not set here (use NAME=VALUE)"
                              % item)
    out.pop("PS_JOB_TOKEN", None)
    return out


class SshJob(Job):
    def __init__(self, args):
        super().__init__(args)
        try:
            with open(args.hostfile) as f:
                text = f.read()
        except OSError as e:
            raise LaunchError("cannot read hostfile %s: %s"
                              % (args.hostfile, e.strerror), 2) from None
        self.hosts = parse_hostfile(text, args.hostfile)
        shosts = None
        if args.server_hostfile:
            try:
                with open(args.server_hostfile) as f:
                    shosts = parse_hostfile(f.read(), args.server_hostfile)
            except OSError as e:
                raise LaunchError("cannot read server hostfile %s: %s"
                                  % (args.server_hostfile, e.strerror),
                                  2) from None
        self.plan = place(self.hosts, args.servers, args.workers,
                          args.placement, args.oversubscribe, shosts)
        self.sched_host = args.scheduler_host or self.hosts[0][0]
        try:
            self.ssh = shlex.split(args.ssh)
        except ValueError as e:
            raise LaunchError("--ssh %r: %s" % (args.ssh, e), 2) from None
        if not self.ssh:
            raise LaunchError("--ssh is empty", 2)

    def program(self, name):
        if self.args.remote_bin_dir:
            return os.path.join(self.args.remote_bin_dir, name)
        return find_program(name)

    def spawn_remote(self, name, host, cmd, env, token, **kw):
        a = self.args
        cwd = a.remote_cwd or os.getcwd()
        script = remote_script(forwarded_env(env, a.env), cmd, cwd, a.grace)
        argv = self.ssh + ["-o", "BatchMode=yes", host,
                           "sh -c %s" % shlex.quote(script)]
        p = self.spawn("%s on %s" % (name, host), argv, dict(os.environ),
                       stdin=subprocess.PIPE, **kw)
        try:
            p.stdin.write((token + "\n").encode())
            p.stdin.flush()
        except OSError:
            pass  # ssh died already; the monitor reports its status
        return p

    def start(self):
        a = self.args
        if a.dry_run:
            print("scheduler: %s" % self.sched_host)
            for role, rank, host in self.plan:
                print("%s %d: %s" % (role, rank, host))
            return
        env = job_env(a, a.host or host_addr(self.sched_host))
        token = env.get("PS_JOB_TOKEN", "")
        sched = self.spawn_remote(
            "scheduler", self.sched_host,
            [self.program("ps-scheduler"), "--root-port", "0"],
            role_env(env, "scheduler", 0), token,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        start_pumps(_Text(sched, "stderr"), "[scheduler@%s] "
                    % host_addr(self.sched_host))
        port, rest = read_root_port(
            sched, a.connect_timeout,
            "the scheduler on %s" % self.sched_host, sys.stdout)
        if rest:
            sys.stdout.write(rest.decode(errors="replace"))
        start_pumps(_Text(sched, "stdout"), "[scheduler@%s] "
                    % host_addr(self.sched_host))
        env["DMLC_PS_ROOT_PORT"] = port
        server = self.program("ps-server")
        for role, rank, host in self.plan:
            cmd = [server] if role == "server" else a.command
            p = self.spawn_remote(
                "%s %d" % (role, rank), host, cmd, role_env(env, role, rank),
                token, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            start_pumps(_Text(p), "[%s %d@%s] " % (role, rank,
                                                   host_addr(host)))
            if role == "worker":
                self.workers.append(p)


class _Text:
    """The text streams of a Popen opened in binary, for start_pumps."""

    def __init__(self, p, only=None):
        self.stdout = _lines(p.stdout) if only in (None, "stdout") else None
        self.stderr = _lines(p.stderr) if only in (None, "stderr") else None


def _lines(f):
    if f is None:
        return None
    return (l.decode(errors="replace") for l in f)
