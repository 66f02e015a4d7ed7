# SPDX-License-Identifier: MIT
"""Start a local psched job, like dmlc-tracker's local mode::

    python3 -m psched.launch -s 2 -w 2 -- python3 train.py --epochs 3

starts one ps-scheduler, S ps-server and W copies of the command with the
DMLC_* environment set (DMLC_ROLE=worker, DMLC_PS_ROOT_URI/PORT,
DMLC_NUM_SERVER/WORKER, DMLC_TASK_ID = 0..W-1, and PSCHED_LIBRARY /
PYTHONPATH so the workers import this psched).  SIGINT, SIGTERM and SIGHUP
are forwarded to every process.  Exits with the first non-zero status of
any process (128 + signal number for one killed by a signal) after
stopping the rest, or 0 once every worker exited 0 and the servers and
scheduler shut down.
"""
import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import _lib


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
    except ImportError:
        pass
    for d in dirs:
        if (d / name).is_file():
            return str(d / name)
    found = shutil.which(name)
    if found:
        return found
    raise SystemExit("psched.launch: cannot find %s (looked in %s and "
                     "PATH; set PSCHED_BIN_DIR)"
                     % (name, ", ".join(map(str, dirs)) or "nothing"))


def status_of(rc):
    return 128 - rc if rc < 0 else rc


class Job:
    def __init__(self, args):
        self.args = args
        self.procs = []  # (name, Popen)
        self.stop_sig = None

    def spawn(self, name, cmd, env, **kw):
        p = subprocess.Popen(cmd, env=env, start_new_session=True, **kw)
        self.procs.append((name, p))
        return p

    def base_env(self):
        env = dict(os.environ)
        a = self.args
        env.update({
            "DMLC_PS_ROOT_URI": a.host,
            "DMLC_NUM_SERVER": str(a.servers),
            "DMLC_NUM_WORKER": str(a.workers),
        })
        # Every node of the job proves this secret (README
        # "Authentication"); a fresh one unless the caller gave one.
        if not env.get("PS_JOB_TOKEN") and not env.get("PS_JOB_TOKEN_FILE"):
            env["PS_JOB_TOKEN"] = secrets.token_hex(24)
        if a.server_mode:
            env["PS_SERVER_MODE"] = a.server_mode
        if a.verbose:
            env["PS_VERBOSE"] = str(a.verbose)
        try:
            env.setdefault("PSCHED_LIBRARY", str(_lib.path().resolve()))
        except ImportError:
            pass
        pkg_parent = str(Path(__file__).resolve().parent.parent)
        pp = env.get("PYTHONPATH")
        env["PYTHONPATH"] = pkg_parent + (os.pathsep + pp if pp else "")
        return env

    def start_scheduler(self, env):
        e = dict(env, DMLC_ROLE="scheduler")
        p = self.spawn("scheduler", [find_program("ps-scheduler"),
                                     "--root-port", "0"], e,
                       stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + self.args.connect_timeout
        port = None
        # The scheduler prints PS_ROOT_PORT=<port> once it listens.
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            if line.startswith("PS_ROOT_PORT="):
                port = line.strip().split("=", 1)[1]
                break
            sys.stdout.write(line)
        if not port:
            raise SystemExit("psched.launch: the scheduler did not report "
                             "its port (exit %s)" % p.poll())
        threading.Thread(target=self.drain, args=(p.stdout,),
                         daemon=True).start()
        return port

    @staticmethod
    def drain(f):
        for line in f:
            sys.stdout.write(line)
            sys.stdout.flush()

    def signal_all(self, sig):
        for _, p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass

    def stop_all(self, grace):
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(
                p.poll() is None for _, p in self.procs):
            time.sleep(0.05)
        self.signal_all(signal.SIGKILL)
        for _, p in self.procs:
            p.wait()

    def on_signal(self, sig, frame):
        self.stop_sig = sig
        self.signal_all(sig)

    def run(self):
        a = self.args
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, self.on_signal)
        env = self.base_env()
        env["DMLC_PS_ROOT_PORT"] = self.start_scheduler(env)
        for i in range(a.servers):
            self.spawn("server %d" % i, [find_program("ps-server")],
                       dict(env, DMLC_ROLE="server", DMLC_SERVER_ID=str(i)))
        workers = []
        for i in range(a.workers):
            workers.append(self.spawn(
                "worker %d" % i, a.command,
                dict(env, DMLC_ROLE="worker", DMLC_TASK_ID=str(i),
                     DMLC_WORKER_ID=str(i))))
        return self.monitor(workers)

    def monitor(self, workers):
        a = self.args
        start = time.monotonic()
        workers_done_at = None
        while True:
            if self.stop_sig is not None:
                self.stop_all(a.grace)
                return 128 + self.stop_sig
            for name, p in self.procs:
                rc = p.poll()
                if rc is not None and rc != 0:
                    sys.stderr.write("psched.launch: %s exited with status "
                                     "%d; stopping the job\n"
                                     % (name, status_of(rc)))
                    self.stop_all(a.grace)
                    return status_of(rc)
            if all(p.poll() is not None for _, p in self.procs):
                return 0
            now = time.monotonic()
            if workers_done_at is None and all(
                    p.poll() is not None for p in workers):
                workers_done_at = now
            if workers_done_at is not None and \
                    now - workers_done_at > a.shutdown_timeout:
                left = [n for n, p in self.procs if p.poll() is None]
                sys.stderr.write("psched.launch: %s still running %ds "
                                 "after the workers finished; stopping\n"
                                 % (", ".join(left), a.shutdown_timeout))
                self.stop_all(a.grace)
                return 1
            if a.timeout and now - start > a.timeout:
                sys.stderr.write("psched.launch: job exceeded --timeout %ds;"
                                 " stopping\n" % a.timeout)
                self.stop_all(a.grace)
                return 124
            time.sleep(0.05)


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python3 -m psched.launch",
        description="Start a local psched job: a scheduler, S servers and "
                    "W workers running COMMAND.")
    ap.add_argument("-s", "--servers", type=int, default=1)
    ap.add_argument("-w", "--workers", type=int, default=1)
    ap.add_argument("--host", default="127.0.0.1",
                    help="scheduler address (default 127.0.0.1)")
    ap.add_argument("--server-mode", choices=("sync", "async"),
                    help="PS_SERVER_MODE for the servers")
    ap.add_argument("--verbose", type=int, default=0, help="PS_VERBOSE")
    ap.add_argument("--timeout", type=int, default=0,
                    help="stop the job after this many seconds (exit 124)")
    ap.add_argument("--connect-timeout", type=int, default=60)
    ap.add_argument("--shutdown-timeout", type=int, default=60,
                    help="seconds servers may take to exit after the "
                         "workers")
    ap.add_argument("--grace", type=float, default=5.0,
                    help="seconds between SIGTERM and SIGKILL when "
                         "stopping")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.command and a.command[0] == "--":
        a.command = a.command[1:]
    if not a.command:
        ap.error("no worker command (put it after --)")
    if a.servers < 1 or a.workers < 1:
        ap.error("need at least one server and one worker")
    return a


def main(argv=None):
    return Job(parse(sys.argv[1:] if argv is None else argv)).run()


if __name__ == "__main__":
    sys.exit(main())
