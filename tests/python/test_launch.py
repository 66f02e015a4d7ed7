# SPDX-License-Identifier: MIT
"""psched.launch's parts that need no cluster: hostfile parsing,
placement, the job secret, roles from ranks, and the ssh back end's remote
script run for real under sh (stdin closing stops the program; its exit
status comes back).  No numpy needed."""
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from psched import launch, launch_ssh, launch_task  # noqa: E402
from psched.launch import LaunchError  # noqa: E402


class Hostfile(unittest.TestCase):
    def test_parse(self):
        h = launch_ssh.parse_hostfile(
            "# c\nnode1:2\n\n root@node2  # x\n[fe80::1]:3\n10.0.0.4\n")
        self.assertEqual(h, [("node1", 2), ("root@node2", 1),
                             ("fe80::1", 3), ("10.0.0.4", 1)])

    def test_bad(self):
        for text, what in (("a:0\n", "line 1: slots must be a number"),
                           ("a\nb:x\n", "line 2: slots must be a number"),
                           ("a b\n", "line 1: want host[:slots]"),
                           ("# only\n", "names no host"),
                           ("[::1\n", "unclosed ["),
                           (":3\n", "empty host name")):
            with self.assertRaises(LaunchError) as c:
                launch_ssh.parse_hostfile(text, "hf")
            self.assertIn(what, str(c.exception), text)

    def test_place_spread_and_pack(self):
        hosts = [("a", 2), ("b", 1), ("c", 1)]
        self.assertEqual(launch_ssh.place(hosts, 2, 2, "spread"),
                         [("server", 0, "a"), ("server", 1, "b"),
                          ("worker", 0, "c"), ("worker", 1, "a")])
        self.assertEqual(launch_ssh.place(hosts, 2, 2, "pack"),
                         [("server", 0, "a"), ("server", 1, "a"),
                          ("worker", 0, "b"), ("worker", 1, "c")])

    def test_place_slots(self):
        with self.assertRaises(LaunchError) as c:
            launch_ssh.place([("a", 1), ("b", 2)], 2, 2)
        self.assertIn("3 slots for 2 servers + 2 workers", str(c.exception))
        p = launch_ssh.place([("a", 1), ("b", 1)], 1, 3, oversubscribe=True)
        self.assertEqual([h for _, _, h in p], ["a", "b", "a", "b"])

    def test_place_server_hosts(self):
        p = launch_ssh.place([("w1", 2), ("w2", 1)], 2, 3,
                             server_hosts=[("s1", 1), ("s2", 1)])
        self.assertEqual(p, [("server", 0, "s1"), ("server", 1, "s2"),
                             ("worker", 0, "w1"), ("worker", 1, "w2"),
                             ("worker", 2, "w1")])
        with self.assertRaises(LaunchError) as c:
            launch_ssh.place([("w", 4)], 3, 1, server_hosts=[("s", 2)])
        self.assertIn("2 slots for 3 servers", str(c.exception))


class Secret(unittest.TestCase):
    def test_generated_fresh(self):
        a = launch.token_env({})["PS_JOB_TOKEN"]
        b = launch.token_env({})["PS_JOB_TOKEN"]
        self.assertEqual(len(a), 32)
        self.assertNotEqual(a, b)

    def test_user_token_passes(self):
        self.assertEqual(launch.token_env({"PS_JOB_TOKEN": "mine"}),
                         {"PS_JOB_TOKEN": "mine"})
        e = launch.token_env({"PS_JOB_TOKEN_FILE": "/run/t"})
        self.assertEqual(e, {"PS_JOB_TOKEN_FILE": "/run/t"})

    def test_kept_beside_snapshots(self):
        with tempfile.TemporaryDirectory() as d:
            snap = os.path.join(d, "ckpt")
            a = launch.token_env({"PS_SNAPSHOT_DIR": snap})
            path = os.path.join(snap, "job.token")
            self.assertEqual(a, {"PS_SNAPSHOT_DIR": snap,
                                 "PS_JOB_TOKEN_FILE": path})
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            first = open(path).read()
            self.assertEqual(len(first.strip()), 32)
            # A restore, from the directory or one of its steps, finds
            # the same file and keeps its secret.
            for r in (snap, os.path.join(snap, "step-40"),
                      os.path.join(snap, "step-40") + "/"):
                b = launch.token_env({"PS_RESTORE": r})
                self.assertEqual(b["PS_JOB_TOKEN_FILE"], path)
            self.assertEqual(open(path).read(), first)
            # Restored from here, snapshots into another directory: the
            # same secret, kept there too.
            other = os.path.join(d, "next")
            c = launch.token_env({"PS_RESTORE": snap,
                                  "PS_SNAPSHOT_DIR": other})
            self.assertEqual(c["PS_JOB_TOKEN_FILE"], path)
            self.assertEqual(open(os.path.join(other, "job.token")).read(),
                             first)
            # A restore from a directory without one: a fresh secret.
            e = launch.token_env({"PS_RESTORE": os.path.join(d, "none")})
            self.assertEqual(len(e["PS_JOB_TOKEN"]), 32)
            # A user's own secret still wins.
            self.assertEqual(launch.token_env({"PS_SNAPSHOT_DIR": snap,
                                               "PS_JOB_TOKEN": "mine"}),
                             {"PS_SNAPSHOT_DIR": snap, "PS_JOB_TOKEN": "mine"})

    def test_never_forwarded_on_the_command_line(self):
        env = {"PS_JOB_TOKEN": "s3cret", "DMLC_ROLE": "worker",
               "PS_JOB_TOKEN_FILE": "/f", "HOME": "/root", "PYTHONPATH": "p"}
        fw = launch_ssh.forwarded_env(env, ["HOME", "X=1"])
        self.assertNotIn("PS_JOB_TOKEN", fw)
        self.assertEqual(fw, {"DMLC_ROLE": "worker", "PS_JOB_TOKEN_FILE":
                              "/f", "HOME": "/root", "PYTHONPATH": "p",
                              "X": "1"})
        script = launch_ssh.remote_script(fw, ["true"], "/", 1)
        self.assertNotIn("s3cret", script)
        with self.assertRaises(LaunchError):
            launch_ssh.forwarded_env({}, ["NOT_SET_ANYWHERE"])


class Ranks(unittest.TestCase):
    def test_roles(self):
        self.assertEqual(launch_task.role_of(0, 2, True), ("scheduler", 0))
        self.assertEqual(launch_task.role_of(2, 2, True), ("server", 1))
        self.assertEqual(launch_task.role_of(3, 2, True), ("worker", 0))
        self.assertEqual(launch_task.role_of(1, 2, False), ("server", 1))
        self.assertEqual(launch_task.role_of(3, 2, False), ("worker", 1))

    def test_rank_env(self):
        r = launch_task.rank_of
        self.assertEqual(r("mpi", {"OMPI_COMM_WORLD_RANK": "3",
                                   "OMPI_COMM_WORLD_SIZE": "5"}), (3, 5))
        self.assertEqual(r("mpi", {"PMI_RANK": "1", "PMI_SIZE": "4"}), (1, 4))
        self.assertEqual(r("slurm", {"SLURM_PROCID": "0",
                                     "SLURM_NTASKS": "2"}), (0, 2))
        self.assertIsNone(r("slurm", {"PMI_RANK": "1", "PMI_SIZE": "4"}))
        with self.assertRaises(LaunchError):
            r("mpi", {"PMI_RANK": "4", "PMI_SIZE": "4"})
        with self.assertRaises(LaunchError):
            r("slurm", {"SLURM_PROCID": "x", "SLURM_NTASKS": "4"})


class RemoteScript(unittest.TestCase):
    """The script ssh runs, run here under sh with the same stdin use."""

    def run_script(self, cmd, env=None, token="tok"):
        s = launch_ssh.remote_script(env or {}, cmd, "/", 1)
        p = subprocess.Popen(["sh", "-c", s], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        p.stdin.write((token + "\n").encode())
        p.stdin.flush()
        return p

    def test_env_token_and_status(self):
        p = self.run_script(["sh", "-c", 'echo "$PS_JOB_TOKEN $A"; exit 7'],
                            {"A": "x y'z"})
        out = p.stdout.read()  # stdin stays open, as ssh's does
        self.assertEqual(p.wait(timeout=30), 7)
        self.assertEqual(out.decode(), "tok x y'z\n")
        p.stdin.close()
        p.stdout.close()

    def test_stdin_end_stops_the_program(self):
        p = self.run_script(["sleep", "60"])
        time.sleep(0.5)
        self.assertIsNone(p.poll())
        t = time.monotonic()
        p.stdin.close()
        p.wait(timeout=30)
        p.stdout.close()
        self.assertLess(time.monotonic() - t, 20)
        self.assertEqual(p.returncode, 128 + 15)


    def test_stdin_end_stops_the_children_too(self):
        pidfile = "/tmp/psched-test-launch-%d.pid" % os.getpid()
        p = self.run_script(["sh", "-c", 'sleep 60 & echo $! >%s; wait'
                             % pidfile])
        t = time.monotonic()
        while not os.path.exists(pidfile) and time.monotonic() - t < 20:
            time.sleep(0.05)
        time.sleep(0.2)
        with open(pidfile) as f:
            child = int(f.read())
        os.unlink(pidfile)
        os.kill(child, 0)  # running
        p.stdin.close()
        p.wait(timeout=30)
        p.stdout.close()
        t = time.monotonic()
        gone = False
        while time.monotonic() - t < 10 and not gone:
            try:
                os.kill(child, 0)
                time.sleep(0.05)
            except ProcessLookupError:
                gone = True
        self.assertTrue(gone, "the program's child survived")


class Command(unittest.TestCase):
    def test_check_command(self):
        for cmd, st in ((["/nonexistent/cmd"], 127), (["no-such-cmd-x"], 127),
                        (["/"], 126)):
            with self.assertRaises(LaunchError) as c:
                launch.check_command(cmd)
            self.assertEqual(c.exception.status, st)
            self.assertIn(cmd[0], str(c.exception))
        launch.check_command(["sh"])


if __name__ == "__main__":
    self_ok = "numpy" not in sys.modules
    unittest.main(exit=False)
    if not self_ok or "numpy" in sys.modules:
        print("psched.launch imported numpy")
        sys.exit(1)
