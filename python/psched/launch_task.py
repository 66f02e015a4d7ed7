# SPDX-License-Identifier: MIT
"""Slurm and mpirun back ends of psched-launch.

Both run in two halves.  The outer half (what the user runs, e.g. in an
sbatch script) starts ps-scheduler on the first node of the allocation
with a port the system picks, then starts the servers and workers as the
tasks of one ``srun`` (or ``mpirun``), with the job's DMLC_* and secret
in their environment (srun --export=ALL, mpirun -x NAME: values never on
a command line).  The inner half is this same program as each task: its
role comes from its rank, SLURM_PROCID (of SLURM_NTASKS), or
OMPI_COMM_WORLD_RANK / PMI_RANK under mpirun: ranks below S are servers
0..S-1, the rest workers 0..W-1.  A task runs its program with output
prefixed ``[worker 1@node]`` and exits with its status.

Run by hand as every task of an srun or mpirun of your own (no outer
half), ranks shift by one: rank 0 is the scheduler, listening on
DMLC_PS_ROOT_PORT (default 9091) of DMLC_PS_ROOT_URI (slurm: the first
node of the step; mpi: ``--host``, default 127.0.0.1), and the secret must
come from you (PS_JOB_TOKEN or PS_JOB_TOKEN_FILE exported to every task).
"""
import os
import re
import shlex
import signal
import socket
import subprocess
import sys

from .launch import (PROG, Job, LaunchError, check_command, describe_status,
                     find_program, job_env, read_root_port, role_env,
                     start_pumps, status_of)

TASK_FLAG = "PSCHED_LAUNCH_TASK"  # set by the outer half for the tasks


def add_args(ap):
    g = ap.add_argument_group("slurm and mpi back ends")
    g.add_argument("--srun", default="srun",
                   help="slurm: the srun command and options, one string")
    g.add_argument("--mpirun", default="mpirun",
                   help="mpi: the mpirun command and options, one string "
                        "(e.g. 'mpirun --hostfile hosts')")
    g.add_argument("--port", type=int, default=None,
                   help="slurm/mpi run by hand: the scheduler's port "
                        "(default DMLC_PS_ROOT_PORT or 9091)")


def rank_of(kind, env):
    """(rank, size) of this task, or None outside srun/mpirun."""
    names = {"slurm": [("SLURM_PROCID", "SLURM_NTASKS")],
             "mpi": [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                     ("PMI_RANK", "PMI_SIZE"),
                     ("PMIX_RANK", "PMIX_SIZE")]}[kind]
    for r, s in names:
        if r in env:
            try:
                rank = int(env[r])
                size = int(env.get(s, ""))
            except ValueError:
                raise LaunchError("%s=%r / %s=%r: not numbers"
                                  % (r, env.get(r), s, env.get(s))) from None
            if not 0 <= rank < size:
                raise LaunchError("%s=%d out of range for %s=%d"
                                  % (r, rank, s, size))
            return rank, size
    return None


def role_of(rank, servers, scheduler_first):
    """('scheduler'|'server'|'worker', index) of a task rank."""
    if scheduler_first:
        if rank == 0:
            return "scheduler", 0
        rank -= 1
    if rank < servers:
        return "server", rank
    return "worker", rank - servers


def slurm_nodes(env):
    """Host names of the allocation (or step), first one first."""
    nl = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") \
        or env.get("SLURM_NODELIST")
    if not nl:
        raise LaunchError("no SLURM_JOB_NODELIST: run inside an allocation "
                          "(sbatch or salloc)")
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nl],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError("scontrol show hostnames %s: %s" % (nl, e)) \
            from None
    if out.returncode != 0 or not out.stdout.split():
        raise LaunchError("scontrol show hostnames %s failed: %s"
                          % (nl, out.stderr.strip()))
    return out.stdout.split()


def run_task(a, kind, rank, size):
    """The inner half: one task becomes its role's program."""
    env = dict(os.environ)
    outer = env.pop(TASK_FLAG, None) == "1"
    if outer:
        servers = int(env["DMLC_NUM_SERVER"])
        workers = size - servers
    else:
        servers = a.servers
        workers = size - 1 - servers
        if env.get("PS_JOB_TOKEN") is None and \
                env.get("PS_JOB_TOKEN_FILE") is None:
            raise LaunchError(
                "rank %d of a %s job started by hand: export PS_JOB_TOKEN "
                "or PS_JOB_TOKEN_FILE to every task (the tasks cannot agree "
                "on a secret by themselves)" % (rank, kind), 2)
    if workers < 1 or (a.workers is not None and a.workers != workers):
        raise LaunchError(
            "%d tasks do not fit %d server(s)%s + %s worker(s)"
            % (size, servers, "" if outer else " + 1 scheduler",
               a.workers if a.workers is not None else ">= 1"), 2)
    role, idx = role_of(rank, servers, not outer)
    if not outer:
        port = a.port or int(env.get("DMLC_PS_ROOT_PORT") or 9091)
        if kind == "slurm":
            uri = a.host or slurm_nodes(env)[0]
        else:
            uri = a.host or env.get("DMLC_PS_ROOT_URI", "127.0.0.1")
        a.workers = workers
        env = job_env(a, uri, env)
        env["DMLC_PS_ROOT_PORT"] = str(port)
    env = role_env(env, role, idx)
    if role == "scheduler":
        cmd = [find_program("ps-scheduler"), "--root-port",
               env["DMLC_PS_ROOT_PORT"]]
    elif role == "server":
        cmd = [find_program("ps-server")]
    else:
        check_command(a.command)
        cmd = a.command
    prefix = "[%s %d@%s] " % (role, idx, socket.gethostname())
    try:
        # Its own process group: a signal forwarded to the task reaches
        # the program's children too.
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
    except OSError as e:
        raise LaunchError("cannot start %s %d: %s: %s"
                          % (role, idx, cmd[0], e.strerror), 127) from None

    def forward(sig, frame):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    ts = start_pumps(_text(p), prefix)
    rc = p.wait()
    for t in ts:
        t.join(5)
    st = status_of(rc)
    if st:
        sys.stderr.write("%s%s %d exited with %s\n"
                         % (prefix, role, idx, describe_status(st)))
    return st


def _text(p):
    class T:
        stdout = (l.decode(errors="replace") for l in p.stdout)
        stderr = (l.decode(errors="replace") for l in p.stderr)
    return T


class TaskJob(Job):
    """The outer half: scheduler here (or on the first node), then one
    srun / mpirun of every server and worker."""

    def __init__(self, a):
        super().__init__(a)
        self.kind = a.launcher
        self.first_failure = None
        self.overlap = False

    def start_scheduler(self, env):
        a = self.args
        cmd = [find_program("ps-scheduler"), "--root-port", "0"]
        where = "here"
        if self.kind == "slurm":
            first = slurm_nodes(os.environ)[0]
            if os.environ.get("SLURMD_NODENAME") != first:
                # Not the batch script on the first node (salloc's shell,
                # maybe on a login node): a step of its own there, which
                # the servers' and workers' step may overlap.
                cmd = shlex.split(a.srun) + [
                    "--overlap", "--unbuffered", "-N1", "-n1", "-w", first,
                    "--export=ALL"] + cmd
                where = "on %s through srun" % first
                self.overlap = True
                sys.stderr.write("%s: scheduler on %s through srun\n"
                                 % (PROG, first))
        p = self.spawn("scheduler", cmd, role_env(env, "scheduler", 0),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        start_pumps(_Only(p, "stderr"), "[scheduler] ")
        port, rest = read_root_port(p, a.connect_timeout,
                                    "the scheduler (%s)" % where, sys.stdout)
        if rest:
            sys.stdout.write(rest.decode(errors="replace"))
        start_pumps(_Only(p, "stdout"), "[scheduler] ")
        return port

    def start(self):
        a = self.args
        env = dict(os.environ)
        if self.kind == "slurm":
            if "SLURM_JOB_ID" not in env:
                raise LaunchError("--launcher slurm runs inside an "
                                  "allocation: sbatch or salloc", 2)
            host = a.host or slurm_nodes(env)[0]
            if a.workers is None:
                try:
                    ntasks = int(env.get("SLURM_NTASKS", ""))
                except ValueError:
                    raise LaunchError("-w not given and SLURM_NTASKS not "
                                      "set: say how many workers", 2) \
                        from None
                a.workers = ntasks - a.servers
                if a.workers < 1:
                    raise LaunchError("SLURM_NTASKS=%d leaves no task for a "
                                      "worker after %d server(s)"
                                      % (ntasks, a.servers), 2)
        else:
            host = a.host or "127.0.0.1"
            if a.workers is None:
                raise LaunchError("--launcher mpi needs -w (workers)", 2)
        check_command(a.command)
        env = job_env(a, host, env)
        env["DMLC_PS_ROOT_PORT"] = self.start_scheduler(env)
        env[TASK_FLAG] = "1"
        n = a.servers + a.workers
        me = [sys.executable, "-m", "psched.launch", "--launcher", self.kind,
              "-s", str(a.servers), "-w", str(a.workers), "--"] + a.command
        if self.kind == "slurm":
            cmd = shlex.split(a.srun) + ["-n", str(n), "--kill-on-bad-exit=1",
                                         "--export=ALL"]
            if self.overlap:
                cmd.append("--overlap")
            cmd += me
        else:
            names = sorted(k for k in env if k.startswith(
                ("DMLC_", "PS_", "PSCHED_", "BYTEPS_")) or k == "PYTHONPATH")
            cmd = shlex.split(a.mpirun) + ["-np", str(n)]
            for k in names:
                cmd += ["-x", k]
            cmd += me
        p = self.spawn("%s of %d servers + %d workers"
                       % (os.path.basename(cmd[0]), a.servers, a.workers),
                       cmd, env, stderr=subprocess.PIPE)
        self.tasks = p
        self.pumps = start_pumps(_Only(p, "stderr"), "", self.watch_stderr)
        self.workers.append(p)

    # srun: "srun: error: node: task 3: Exited with exit code 5";
    # mpirun: "... exited on signal 9 ..." / "with status 5"
    _FAIL = re.compile(r"task (\d+): Exited with exit code (\d+)|"
                       r"rank (\d+) .*exit(?:ed)? (?:with )?(?:status|code) "
                       r"(\d+)")

    def watch_stderr(self, line):
        m = self._FAIL.search(line)
        if m and self.first_failure is None:
            task = m.group(1) or m.group(3)
            code = int(m.group(2) or m.group(4))
            if code:
                self.first_failure = (int(task), code)
        return True

    def failure(self, p, st):
        if p is getattr(self, "tasks", None):
            for t in self.pumps:  # srun's last lines name the failure
                t.join(2)
        if p is getattr(self, "tasks", None) and self.first_failure:
            task, code = self.first_failure
            role, idx = role_of(task, self.args.servers, False)
            return code, " (first failure: task %d = %s %d, status %d)" % (
                task, role, idx, code)
        return st, ""


class _Only:
    def __init__(self, p, which):
        f = getattr(p, which)
        g = (l.decode(errors="replace") for l in f)
        self.stdout = g if which == "stdout" else None
        self.stderr = g if which == "stderr" else None


def main(a):
    try:
        ra = rank_of(a.launcher, os.environ)
        if ra is not None and (os.environ.get(TASK_FLAG) == "1" or
                               a.launcher == "mpi" or
                               "SLURM_STEP_ID" in os.environ):
            return run_task(a, a.launcher, ra[0], ra[1])
        job = TaskJob(a)
    except LaunchError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return e.status
    return job.execute(job.start)
