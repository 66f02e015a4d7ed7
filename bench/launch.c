// SPDX-License-Identifier: MIT
/* ps-bench's launcher: fork+exec a local cluster, collect the workers'
 * results, print the table. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "psched.h"

#include "bench.h"

/* ---- launcher ---------------------------------------------------------- */

struct child {
	pid_t pid;
	int out; /* stdout pipe, -1 none */
	const char *what;
	struct rusage ru;
	int status;
};

static char self_dir[512];

static int spawn(struct child *c, const char *prog, char **argv,
		 const char *role, unsigned port, const struct bopts *o)
{
	char path[600], num[32];
	int pfd[2] = { -1, -1 };

	snprintf(path, sizeof(path), "%s/%s", self_dir, prog);
	if (pipe(pfd))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		setenv("DMLC_ROLE", role, 1);
		/* RDMA needs an address of an RDMA netdev, not loopback:
		 * --root-uri / DMLC_PS_ROOT_URI picks it. */
		setenv("DMLC_PS_ROOT_URI", o->root_uri, 1);
		snprintf(num, sizeof(num), "%u", port);
		setenv("DMLC_PS_ROOT_PORT", num, 1);
		snprintf(num, sizeof(num), "%u", o->servers);
		setenv("DMLC_NUM_SERVER", num, 1);
		snprintf(num, sizeof(num), "%u", o->workers);
		setenv("DMLC_NUM_WORKER", num, 1);
		if (o->transport[0])
			setenv("PS_TRANSPORT", o->transport, 1);
		execv(path, argv);
		fprintf(stderr, "ps-bench: cannot run %s: %s\n", path,
			strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	c->out = pfd[0];
	c->what = prog;
	return 0;
}

static void reap(struct child *c)
{
	if (c->pid > 0)
		wait4(c->pid, &c->status, 0, &c->ru);
	c->pid = 0;
}

static void kill_all(struct child *cs, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (cs[i].pid > 0)
			kill(cs[i].pid, SIGKILL);
	for (i = 0; i < n; i++)
		reap(&cs[i]);
}

static unsigned read_port(int fd)
{
	char buf[128];
	size_t got = 0;
	ssize_t n;
	char *p;

	while (got < sizeof(buf) - 1) {
		n = read(fd, buf + got, 1);
		if (n <= 0)
			return 0;
		got++;
		if (buf[got - 1] == '\n')
			break;
	}
	buf[got] = '\0';
	p = strstr(buf, "PS_ROOT_PORT=");
	return p ? (unsigned)atoi(p + 13) : 0;
}

/* Read a worker's RESULT lines; fold them into @res (sum goodput, max
 * latency). */
static void collect(int fd, const struct bopts *o, struct bresult *res)
{
	static char buf[1 << 16];
	size_t got = 0;
	ssize_t n;
	char *line, *save = NULL;
	unsigned si = 0;

	while (got < sizeof(buf) - 1 &&
	       (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	for (line = strtok_r(buf, "\n", &save); line && si < o->nsizes;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long size, iters;
		unsigned keys;
		double gbps, reqs, p50, p99;

		if (sscanf(line, "RESULT %llu %u %llu %lf %lf %lf %lf", &size,
			   &keys, &iters, &gbps, &reqs, &p50, &p99) != 7)
			continue;
		res[si].size = size;
		res[si].keys = keys;
		res[si].iters += iters;
		res[si].gbps += gbps;
		res[si].reqs += reqs;
		if (p50 > res[si].p50)
			res[si].p50 = p50;
		if (p99 > res[si].p99)
			res[si].p99 = p99;
		si++;
	}
}

static void print_table(const struct bopts *o, const struct bresult *res,
			const struct child *servers)
{
	uint64_t stored = 0;
	long rss = 0;
	unsigned i;

	if (o->csv)
		printf("bytes,keys,iterations,goodput_gbps,req_per_s,p50_us,"
		       "p99_us,raw_tcp_gbps,ratio\n");
	else
		printf("%10s %6s %8s %14s %11s %10s %10s %13s %7s\n", "#bytes",
		       "#keys", "#iters", "Goodput[Gb/s]", "Req/s", "p50[usec]",
		       "p99[usec]", "RawTCP[Gb/s]", "ratio");
	for (i = 0; i < o->nsizes; i++) {
		const struct bresult *r = &res[i];
		double ratio = r->raw_gbps > 0 ? r->gbps / r->raw_gbps : 0;

		printf(o->csv ? "%llu,%u,%llu,%.3f,%.0f,%.1f,%.1f,%.3f,%.3f\n"
			      : "%10llu %6u %8llu %14.3f %11.0f %10.1f %10.1f "
				"%13.3f %7.3f\n",
		       (unsigned long long)r->size, r->keys,
		       (unsigned long long)r->iters, r->gbps, r->reqs, r->p50,
		       r->p99, r->raw_gbps, ratio);
		stored += (uint64_t)r->keys * r->size;
	}
	for (i = 0; i < o->servers; i++)
		if (servers[i].ru.ru_maxrss > rss)
			rss = servers[i].ru.ru_maxrss;
	if (!o->csv && stored)
		printf("# server peak RSS %.1f MiB for %.1f MiB stored per "
		       "server (%.2fx)\n",
		       rss / 1024.0, stored / o->servers / 1048576.0,
		       rss * 1024.0 / ((double)stored / o->servers));
}

static char **worker_argv(int argc, char **argv)
{
	char **v = calloc((size_t)argc + 2, sizeof(char *));
	int i;

	static char name[] = "ps-bench";

	v[0] = name;
	for (i = 1; i < argc; i++)
		v[i] = argv[i];
	return v;
}

static int launch_run(const struct bopts *o, int argc, char **argv)
{
	unsigned n = 1 + o->servers + o->workers, i, port;
	struct child *cs = calloc(n, sizeof(*cs));
	struct bresult res[MAX_SIZES];
	static char sname[] = "ps-scheduler", rp[] = "--root-port",
		    zero[] = "0", vname[] = "ps-server";
	char *sargv[] = { sname, rp, zero, NULL };
	char *vargv[] = { vname, NULL };
	char **wargv = worker_argv(argc, argv);
	int failed = 0;

	memset(res, 0, sizeof(res));
	if (spawn(&cs[0], "ps-scheduler", sargv, "scheduler", 0, o))
		return 1;
	port = read_port(cs[0].out);
	if (!port) {
		fprintf(stderr, "ps-bench: the scheduler did not start\n");
		kill_all(cs, n);
		return 1;
	}
	for (i = 1; i <= o->servers; i++)
		spawn(&cs[i], "ps-server", vargv, "server", port, o);
	for (; i < n; i++)
		spawn(&cs[i], "ps-bench", wargv, "worker", port, o);
	for (i = 1 + o->servers; i < n; i++) {
		collect(cs[i].out, o, res);
		reap(&cs[i]);
		if (!WIFEXITED(cs[i].status) || WEXITSTATUS(cs[i].status))
			failed = 1;
	}
	if (failed) {
		fprintf(stderr, "ps-bench: a worker failed (see above)\n");
		kill_all(cs, n);
		return 1;
	}
	for (i = 0; i <= o->servers; i++)
		reap(&cs[i]);
	for (i = 0; i < o->nsizes && o->baseline; i++)
		res[i].raw_gbps = bench_raw_tcp(o, o->sizes[i], res[i].keys);
	print_table(o, res, cs + 1);
	free(wargv);
	free(cs);
	return 0;
}

int bench_launch(const struct bopts *o, int argc, char **argv)
{
	char *slash;

	/* The other programs are found next to this one. */
	if (readlink("/proc/self/exe", self_dir, sizeof(self_dir) - 1) < 0)
		return 1;
	slash = strrchr(self_dir, '/');
	if (slash)
		*slash = '\0';
	return launch_run(o, argc, argv);
}
