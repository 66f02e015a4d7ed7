# SPDX-License-Identifier: MIT
"""Start a psched job: one scheduler, S servers, W workers running COMMAND.

    psched-launch -s 2 -w 2 -- python3 train.py --epochs 3
    python3 -m psched.launch -s 2 -w 2 -- python3 train.py   (the same)

Back ends (``--launcher``):

local (default)
    every process on this machine, like dmlc-tracker's local mode.
ssh
    ``-H HOSTFILE`` (lines ``host[:slots]``); the scheduler on the first
    host (``--scheduler-host``), servers then workers placed over the
    slots (``--placement spread|pack``); psched.launch_ssh.
slurm
    inside an allocation (sbatch/salloc): the scheduler on the first node,
    servers and workers as the tasks of one ``srun`` (roles from
    SLURM_PROCID/SLURM_NTASKS); psched.launch_task.
mpi
    the same through ``mpirun`` (roles from OMPI_COMM_WORLD_RANK or
    PMI_RANK); also runs as the command of a user's own mpirun.

Every process gets DMLC_ROLE, DMLC_PS_ROOT_URI/PORT, DMLC_NUM_SERVER/
WORKER, DMLC_TASK_ID (DMLC_SERVER_ID / DMLC_WORKER_ID) and the job's
secret: PS_JOB_TOKEN or PS_JOB_TOKEN_FILE as the user set them, else a
fresh random PS_JOB_TOKEN (never on a command line).  SIGINT, SIGTERM and
SIGHUP stop the job.  Exits with the first non-zero status of any process
(128 + signal number for one killed by a signal) after stopping the rest,
or 0 once every worker exited 0 and the servers and scheduler shut down.
A command that cannot be started is reported by name (status 127) and
nothing is left running.
"""
import argparse
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import _lib

PROG = "psched-launch"
FORWARD_PREFIXES = ("DMLC_", "PS_", "PSCHED_", "BYTEPS_")


class LaunchError(Exception):
    """A launch that cannot go on; the message names what was wrong."""

    def __init__(self, msg, status=1):
        super().__init__(msg)
        self.status = status


def find_program(name):
    """ps-scheduler / ps-server: PSCHED_BIN_DIR, next to the library
    (<prefix>/lib -> <prefix>/bin, build/lib -> build/bin), then PATH."""
    dirs = []
    if os.environ.get("PSCHED_BIN_DIR"):
        dirs.append(Path(os.environ["PSCHED_BIN_DIR"]))
    try:
        lib = _lib.path()
        if lib.is_absolute():
            dirs.append(lib.resolve().parent.parent / "bin")
    except (ImportError, OSError):
        pass
    for d in dirs:
        if (d / name).is_file():
            return str(d / name)
    found = shutil.which(name)
    if found:
        return found
    raise LaunchError("cannot find %s (looked in %s and PATH; set "
                      "PSCHED_BIN_DIR)"
                      % (name, ", ".join(map(str, dirs)) or "nothing"))


def check_command(cmd):
    """Refuse a worker command that cannot be executed, before anything
    starts (status 127 like a shell)."""
    exe = cmd[0]
    if os.sep in exe:
        if not os.path.exists(exe):
            raise LaunchError("cannot run the worker command %s: no such "
                              "file" % exe, 127)
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            raise LaunchError("cannot run the worker command %s: not an "
                              "executable file" % exe, 126)
    elif not shutil.which(exe):
        raise LaunchError("cannot run the worker command %s: not found in "
                          "PATH" % exe, 127)


# How long a failure waits for a signal death to show (failure_to_report).
FAIL_SETTLE_S = 1.0


def status_of(rc):
    return 128 - rc if rc < 0 else rc


def describe_status(st):
    if st > 128 and st - 128 < 65:
        try:
            return "status %d (killed by %s)" % (
                st, signal.Signals(st - 128).name)
        except ValueError:
            pass
    return "status %d" % st


def restore_root(env):
    """The snapshot directory PS_RESTORE names or lies in, or None."""
    r = env.get("PS_RESTORE")
    if not r:
        return None
    r = r.rstrip("/") or "/"
    if re.fullmatch(r"step-[0-9]+", os.path.basename(r)):
        return os.path.dirname(r) or "."
    return r


def snapshot_token_file(env):
    """The file of the job's secret kept beside its snapshots, or None
    without PS_SNAPSHOT_DIR or PS_RESTORE: the restored snapshots'
    job.token (copied into PS_SNAPSHOT_DIR when that is another
    directory without one, so that the new snapshots restore too), else
    PS_SNAPSHOT_DIR/job.token, made (mode 0600, a fresh random secret)
    if it is not there.  A job restarted from its snapshots keeps the
    secret they are signed with (docs/snapshots.md)."""
    snap, rest = env.get("PS_SNAPSHOT_DIR"), restore_root(env)
    src = os.path.join(rest, "job.token") if rest else None
    if src and not os.path.exists(src):
        src = None
    if not snap:
        return src
    path = os.path.join(snap, "job.token")
    if not os.path.exists(path):
        os.makedirs(snap, exist_ok=True)
        if src:
            with open(src) as f:
                secret = f.read()
        else:
            secret = secrets.token_hex(16) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secret)
    return src or path


def token_env(env):
    """The job's secret: a user-set PS_JOB_TOKEN or PS_JOB_TOKEN_FILE is
    passed through as it is; else the one kept with the job's snapshots
    (snapshot_token_file()); else a fresh random PS_JOB_TOKEN."""
    if not env.get("PS_JOB_TOKEN") and not env.get("PS_JOB_TOKEN_FILE"):
        path = snapshot_token_file(env)
        if path:
            env["PS_JOB_TOKEN_FILE"] = os.path.abspath(path)
        else:
            env["PS_JOB_TOKEN"] = secrets.token_hex(16)
    return env


def job_env(a, root_uri, base=None):
    """DMLC_* of the whole job, the secret, and what lets a Python worker
    import this psched (PSCHED_LIBRARY, PYTHONPATH)."""
    env = dict(os.environ if base is None else base)
    env.update({
        "DMLC_PS_ROOT_URI": root_uri,
        "DMLC_NUM_SERVER": str(a.servers),
        "DMLC_NUM_WORKER": str(a.workers),
    })
    if a.snapshot_dir:
        env["PS_SNAPSHOT_DIR"] = os.path.abspath(a.snapshot_dir)
    if a.snapshot_steps:
        env["PS_SNAPSHOT_STEPS"] = str(a.snapshot_steps)
    if a.restore:
        env["PS_RESTORE"] = os.path.abspath(a.restore)
    token_env(env)
    if a.server_mode:
        env["PS_SERVER_MODE"] = a.server_mode
    if a.verbose:
        env["PS_VERBOSE"] = str(a.verbose)
    try:
        env.setdefault("PSCHED_LIBRARY", str(_lib.path().resolve()))
    except (ImportError, OSError):
        pass
    pkg_parent = str(Path(__file__).resolve().parent.parent)
    pp = env.get("PYTHONPATH")
    if pkg_parent not in (pp or "").split(os.pathsep):
        env["PYTHONPATH"] = pkg_parent + (os.pathsep + pp if pp else "")
    return env


def role_env(env, role, rank):
    e = dict(env, DMLC_ROLE=role)
    if role == "server":
        e["DMLC_SERVER_ID"] = str(rank)
    elif role == "worker":
        e["DMLC_TASK_ID"] = str(rank)
        e["DMLC_WORKER_ID"] = str(rank)
    return e


_out_lock = threading.Lock()


def pump(stream, prefix, sink, on_line=None):
    """Copy lines of a child's output to sink, each after prefix;
    on_line(line) sees them first and returns False to swallow one."""
    for line in stream:
        if on_line is not None and on_line(line) is False:
            continue
        with _out_lock:
            sink.write(prefix + line if prefix else line)
            if not line.endswith("\n"):
                sink.write("\n")
            sink.flush()


def start_pumps(p, prefix, on_line=None):
    ts = []
    for f, sink in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
        if f is None:
            continue
        t = threading.Thread(target=pump, args=(f, prefix, sink, on_line),
                             daemon=True)
        t.start()
        ts.append(t)
    return ts


def read_root_port(p, timeout, what="the scheduler", sink=None):
    """Read ps-scheduler's 'PS_ROOT_PORT=<port>' line from p.stdout
    (lines before it go to sink); bounded by timeout."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = p.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LaunchError("%s did not report its port within %ds "
                              "(--connect-timeout)" % (what, timeout))
        r, _, _ = select.select([fd], [], [], min(left, 0.5))
        if not r:
            if p.poll() is not None:
                raise LaunchError("%s exited with %s before reporting its "
                                  "port" % (what, describe_status(
                                      status_of(p.returncode))))
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            p.wait()
            raise LaunchError("%s exited with %s before reporting its port"
                              % (what, describe_status(
                                  status_of(p.returncode))))
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode(errors="replace")
            if text.startswith("PS_ROOT_PORT="):
                # What follows the port line is not lost: hand it back.
                return text.split("=", 1)[1].strip(), buf
            if sink is not None:
                sink.write(text + "\n")


class Job:
    """Processes this launcher started, each a Popen with a name; the
    first failure stops the rest."""

    def __init__(self, args):
        self.args = args
        self.procs = []  # (name, Popen)
        self.workers = []
        self.stop_sig = None

    def spawn(self, name, cmd, env, **kw):
        try:
            p = subprocess.Popen(cmd, env=env, start_new_session=True, **kw)
        except OSError as e:
            raise LaunchError("cannot start %s: %s: %s"
                              % (name, cmd[0], e.strerror), 127) from None
        self.procs.append((name, p))
        return p

    def signal_all(self, sig):
        for _, p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def stop_all(self, grace):
        """SIGTERM (after closing the stdin of each process that has one:
        a remote process ends when it sees end of file), then SIGKILL
        once grace seconds passed."""
        for _, p in self.procs:
            if p.stdin is not None:
                try:
                    p.stdin.close()
                except OSError:
                    pass
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(
                p.poll() is None for _, p in self.procs):
            time.sleep(0.05)
        self.signal_all(signal.SIGKILL)
        for _, p in self.procs:
            p.wait()

    def failure(self, p, st):
        """(exit status, explanation) for a process that failed with st;
        a back end that knows the first failure behind it says so."""
        return st, ""

    def on_signal(self, sig, frame):
        self.stop_sig = sig

    def catch_signals(self):
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self.on_signal)

    def execute(self, start):
        """Run start() (which spawns), then monitor; whatever goes wrong
        in between, nothing this launcher started is left running."""
        self.catch_signals()
        try:
            start()
        except LaunchError as e:
            sys.stderr.write("%s: %s; stopping the job\n" % (PROG, e)
                             if self.procs else "%s: %s\n" % (PROG, e))
            self.stop_all(self.args.grace)
            return e.status
        except BaseException:
            self.stop_all(self.args.grace)
            raise
        try:
            return self.monitor()
        finally:
            if any(p.poll() is None for _, p in self.procs):
                self.stop_all(self.args.grace)

    def failure_to_report(self):
        """(name, process, rc) of the failure to report, or None.  When
        one process dies, the others exit with an error a moment later
        (they see a peer die), and over ssh the killed one's status can
        arrive after theirs: so for up to FAIL_SETTLE_S the launcher looks
        for a process killed by a signal, and reports it before one that
        exited with an error."""
        def failed():
            polled = [(n, p, p.poll()) for n, p in self.procs]
            return [f for f in polled if f[2] not in (None, 0)]
        now = failed()
        if not now:
            return None
        first = now[0]
        deadline = time.monotonic() + FAIL_SETTLE_S
        while not any(status_of(rc) > 128 for _, _, rc in now) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
            now = failed()
        for f in now:
            if status_of(f[2]) > 128:
                return f
        return first

    def monitor(self):
        a = self.args
        start = time.monotonic()
        workers_done_at = None
        while True:
            if self.stop_sig is not None:
                sys.stderr.write("%s: %s; stopping the job\n"
                                 % (PROG, signal.Signals(self.stop_sig).name))
                self.stop_all(a.grace)
                return 128 + self.stop_sig
            failed = self.failure_to_report()
            if failed is not None:
                name, p, rc = failed
                st, why = self.failure(p, status_of(rc))
                sys.stderr.write("%s: %s exited with %s%s; stopping the "
                                 "job\n" % (PROG, name,
                                             describe_status(
                                                 status_of(rc)), why))
                self.stop_all(a.grace)
                return st
            if all(p.poll() is not None for _, p in self.procs):
                return 0
            now = time.monotonic()
            if workers_done_at is None and all(
                    p.poll() is not None for p in self.workers):
                workers_done_at = now
            if workers_done_at is not None and \
                    now - workers_done_at > a.shutdown_timeout:
                left = [n for n, p in self.procs if p.poll() is None]
                sys.stderr.write("%s: %s still running %ds after the "
                                 "workers finished; stopping\n"
                                 % (PROG, ", ".join(left),
                                    a.shutdown_timeout))
                self.stop_all(a.grace)
                return 1
            if a.timeout and now - start > a.timeout:
                sys.stderr.write("%s: job exceeded --timeout %ds; stopping\n"
                                 % (PROG, a.timeout))
                self.stop_all(a.grace)
                return 124
            time.sleep(0.05)


class LocalJob(Job):
    def start_scheduler(self, env):
        a = self.args
        e = role_env(env, "scheduler", 0)
        p = self.spawn("scheduler", [find_program("ps-scheduler"),
                                     "--root-port", "0"], e,
                       stdout=subprocess.PIPE)
        port, rest = read_root_port(p, a.connect_timeout, sink=sys.stdout)
        if rest:
            sys.stdout.write(rest.decode(errors="replace"))
        threading.Thread(target=pump, args=(
            (l.decode(errors="replace") for l in p.stdout), "", sys.stdout),
            daemon=True).start()
        return port

    def start(self):
        a = self.args
        check_command(a.command)
        server = find_program("ps-server")
        env = job_env(a, a.host)
        env["DMLC_PS_ROOT_PORT"] = self.start_scheduler(env)
        for i in range(a.servers):
            self.spawn("server %d" % i, [server], role_env(env, "server", i))
        for i in range(a.workers):
            self.workers.append(self.spawn(
                "worker %d" % i, a.command,
                dict(role_env(env, "worker", i), PSCHED_LOCAL_RANK=str(i),
                     PSCHED_LOCAL_SIZE=str(a.workers))))


def add_common(ap):
    ap.add_argument("--launcher", "--backend", dest="launcher",
                    choices=("local", "ssh", "slurm", "mpi"),
                    default=os.environ.get("PSCHED_LAUNCHER", "local"),
                    help="where the processes run (default local)")
    ap.add_argument("-s", "--servers", type=int, default=None,
                    help="servers in the job (default 1)")
    ap.add_argument("-w", "--workers", type=int, default=None,
                    help="workers in the job (default 1; slurm and mpi: "
                         "the tasks left after the servers)")
    ap.add_argument("--host", default=None,
                    help="scheduler address the others dial (local: "
                         "127.0.0.1; ssh: the scheduler host; slurm: the "
                         "first node)")
    ap.add_argument("--server-mode", choices=("sync", "async"),
                    help="PS_SERVER_MODE for the servers")
    ap.add_argument("--verbose", type=int, default=0, help="PS_VERBOSE")
    ap.add_argument("--snapshot-dir", default=None,
                    help="PS_SNAPSHOT_DIR: the servers write snapshots "
                         "here (docs/snapshots.md)")
    ap.add_argument("--snapshot-steps", type=int, default=0,
                    help="PS_SNAPSHOT_STEPS: a snapshot every this many "
                         "steps")
    ap.add_argument("--restore", default=None,
                    help="PS_RESTORE: the servers start from the latest "
                         "complete snapshot in this directory")
    ap.add_argument("--timeout", type=int, default=0,
                    help="stop the job after this many seconds (exit 124)")
    ap.add_argument("--connect-timeout", type=int, default=60,
                    help="seconds for the scheduler to report its port")
    ap.add_argument("--shutdown-timeout", type=int, default=60,
                    help="seconds servers may take to exit after the "
                         "workers")
    ap.add_argument("--grace", type=float, default=5.0,
                    help="seconds between SIGTERM and SIGKILL when "
                         "stopping")


def parse(argv):
    from . import launch_ssh, launch_task
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Start a psched job: a scheduler, S servers and W "
                    "workers running COMMAND, on this machine, over ssh, "
                    "in a Slurm allocation or through mpirun.",
        epilog="Example: %s -s 2 -w 2 -- python3 train.py" % PROG)
    from . import __version__
    ap.add_argument("--version", action="version",
                    version="%s %s" % (PROG, __version__))
    add_common(ap)
    launch_ssh.add_args(ap)
    launch_task.add_args(ap)
    ap.add_argument("command", nargs=argparse.REMAINDER,
                    help="the worker command, after --")
    a = ap.parse_args(argv)
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    if not a.command:
        ap.error("no worker command (put it after --)")
    if a.servers is None:
        a.servers = 1
    if a.workers is None and a.launcher not in ("slurm", "mpi"):
        a.workers = 1
    if a.servers < 1 or (a.workers is not None and a.workers < 1):
        ap.error("need at least one server and one worker")
    if a.launcher == "ssh" and not a.hostfile:
        ap.error("--launcher ssh needs -H/--hostfile")
    return a


def main(argv=None):
    a = parse(sys.argv[1:] if argv is None else argv)
    try:
        if a.launcher == "ssh":
            from .launch_ssh import SshJob as cls
        elif a.launcher in ("slurm", "mpi"):
            from . import launch_task
            return launch_task.main(a)
        else:
            cls = LocalJob
            a.host = a.host or "127.0.0.1"
        job = cls(a)
    except LaunchError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return e.status
    return job.execute(job.start)


if __name__ == "__main__":
    # Run the module's imported copy: the back ends import psched.launch,
    # and its classes (LaunchError) must be the ones main() catches.
    from . import launch as _launch
    sys.exit(_launch.main())
