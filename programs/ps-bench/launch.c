// SPDX-License-Identifier: MIT
/* ps-bench's launcher: fork+exec a local cluster, collect the workers'
 * results, print the table. */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "psched.h"

#include "bench.h"

/* ---- launcher ---------------------------------------------------------- */

#define MAX_NODES_KL 64 /* --workers' limit (opts.c) */

struct child {
	pid_t pid;
	int out;  /* stdout pipe, -1 none */
	int in;	  /* workers: stdin pipe (the go of each window), else -1 */
	FILE *fp; /* @out as lines */
	const char *what;
	struct rusage ru;
	int status;
};

static char self_dir[512];

/* Set in the child: where the cluster is, and (workers) the launcher's go
 * on stdin before each window. */
static void spawn_env(const char *role, unsigned port, const struct bopts *o)
{
	char num[32];

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
	if (!strcmp(role, "worker"))
		setenv("PS_BENCH_SYNC", "1", 1);
	signal(SIGPIPE, SIG_DFL); /* the launcher ignores it */
}

static int spawn(struct child *c, const char *prog, char **argv,
		 const char *role, unsigned port, const struct bopts *o)
{
	bool worker = !strcmp(role, "worker");
	int pfd[2] = { -1, -1 }, ifd[2] = { -1, -1 };
	char path[600];

	c->in = -1;
	snprintf(path, sizeof(path), "%s/%s", self_dir, prog);
	if (pipe(pfd))
		return -1;
	if (worker && pipe(ifd))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		if (worker)
			dup2(ifd[0], STDIN_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		if (worker) {
			close(ifd[0]);
			close(ifd[1]);
		}
		spawn_env(role, port, o);
		execv(path, argv);
		fprintf(stderr, "ps-bench: cannot run %s: %s\n", path,
			strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	if (worker) {
		close(ifd[0]);
		c->in = ifd[1];
		fcntl(c->in, F_SETFD, FD_CLOEXEC);
	}
	fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
	c->out = pfd[0];
	c->fp = fdopen(pfd[0], "r");
	c->what = prog;
	return c->fp ? 0 : -1;
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

/* Fold a worker's RESULT line into @res (sum goodput, max latency). */
static void fold_result(const char *line, const struct bopts *o,
			struct bresult *res)
{
	unsigned long long size, iters;
	unsigned keys, si;
	double gbps, reqs, p50, p99;

	if (sscanf(line, "RESULT %llu %u %llu %lf %lf %lf %lf", &size, &keys,
		   &iters, &gbps, &reqs, &p50, &p99) != 7)
		return;
	for (si = 0; si < o->nsizes && o->sizes[si] != size; si++)
		;
	if (si == o->nsizes)
		return;
	res[si].size = size;
	res[si].keys = keys;
	res[si].iters += iters;
	res[si].gbps += gbps;
	res[si].reqs += reqs;
	if (p50 > res[si].p50)
		res[si].p50 = p50;
	if (p99 > res[si].p99)
		res[si].p99 = p99;
}

/*
 * Read @c's lines up to "@tag @si @r" (its number after that in *@val),
 * folding RESULT lines into @res on the way; with @tag NULL, up to EOF.
 * -EPIPE when the worker's output ends first.
 */
static int wait_line(struct child *c, const char *tag, unsigned si, unsigned r,
		     const struct bopts *o, struct bresult *res, double *val)
{
	char line[256], want[64];
	size_t wl;

	snprintf(want, sizeof(want), "%s %u %u", tag ? tag : "", si, r);
	wl = strlen(want);
	while (fgets(line, sizeof(line), c->fp)) {
		if (!strncmp(line, "RESULT ", 7)) {
			fold_result(line, o, res);
		} else if (!strncmp(line, "SPARSE ", 7)) {
			bench_sparse_fold(line, res);
		} else if (tag && !strncmp(line, want, wl) &&
			   (line[wl] == ' ' || line[wl] == '\n')) {
			if (val)
				*val = strtod(line + wl, NULL);
			return 0;
		}
	}
	return tag ? -EPIPE : 0;
}

/* One round of baselines for size @si while the cluster idles. */
static void baseline_round(const struct bopts *o, unsigned si, unsigned r,
			   struct bresult *res)
{
	uint64_t size = o->sizes[si];
	unsigned nk = bench_auto_keys(o, size);
	unsigned par = bench_tcp_streams(o);
	uint64_t bytes = (uint64_t)nk * size * o->workers;
	double best;

	res->raw_r[r] = bench_raw_tcp(o, size, nk);
	res->tcp1_r[r] = bench_tcp_max(o, bytes, 1);
	res->tcpn_r[r] = bench_tcp_max(o, bytes, par);
	/* The fastest of the three; a tie goes to the simpler program. */
	best = res->tcp1_r[r];
	res->base_r[r] = BASE_TCP1;
	if (res->raw_r[r] > best) {
		best = res->raw_r[r];
		res->base_r[r] = BASE_RAW;
	}
	if (res->tcpn_r[r] > best) {
		best = res->tcpn_r[r];
		res->base_r[r] = BASE_TCPN;
	}
	if (!(best > 0))
		res->base_r[r] = BASE_NONE;
	res->max_r[r] = best;
	/* CSV and JSON's tcpmax_streams: raw counts as one stream. */
	res->streams_r[r] = res->base_r[r] == BASE_TCPN ? par : 1;
}

static void progress(const struct bopts *o, unsigned si, unsigned r,
		     const struct bresult *res)
{
	unsigned par = bench_tcp_streams(o);

	fprintf(stderr, "ps-bench: %llu bytes, run %u/%u: psched %.3f Gb/s",
		(unsigned long long)o->sizes[si], r + 1, o->runs,
		res->good_r[r]);
	if (o->baseline)
		fprintf(stderr, "; tcp1 %.3f, tcp%u %.3f, raw %.3f",
			res->tcp1_r[r], par, res->tcpn_r[r], res->raw_r[r]);
	fprintf(stderr, "\n");
}

/* The best baseline of the round whose best is the median (of the upper
 * one of the two middle rounds when @n is even). */
static enum bbase median_base(const struct bresult *res, unsigned n)
{
	unsigned r, q, below, same;

	for (r = 0; r < n; r++) {
		below = 0;
		same = 0;
		for (q = 0; q < n; q++) {
			below += res->max_r[q] < res->max_r[r];
			same += res->max_r[q] == res->max_r[r];
		}
		if (below <= n / 2 && n / 2 < below + same)
			return res->base_r[r];
	}
	return BASE_NONE;
}

/* Medians of the rounds; ratios are medians of per-round ratios. */
static void finish_size(const struct bopts *o, struct bresult *res)
{
	double v[MAX_RUNS], w[MAX_RUNS], x[MAX_RUNS], y[MAX_RUNS];
	unsigned r, n = o->runs, one = 0;

	if (!o->baseline)
		return;
	for (r = 0; r < n; r++) {
		v[r] = res->raw_r[r];
		w[r] = res->max_r[r];
		x[r] = w[r] > 0 ? res->good_r[r] / w[r] : 0;
		y[r] = v[r] > 0 ? res->good_r[r] / v[r] : 0;
		one += res->streams_r[r] == 1;
	}
	res->raw_gbps = bench_median(v, n);
	res->tcpmax_gbps = bench_median(w, n);
	res->ratio = bench_median(x, n);
	res->vs_raw = bench_median(y, n);
	res->base = res->tcpmax_gbps > 0 ? median_base(res, n) : BASE_NONE;
	res->streams = one * 2 >= n ? 1 : res->streams_r[n - 1];
	for (r = 0; r < n && res->streams == 1 && one * 2 < n; r++)
		if (res->streams_r[r] > 1)
			res->streams = res->streams_r[r];
}

/* VmRSS of process @pid in KiB, 0 when unknown; its RssShmem (the shm
 * transport's rings, shared with the peer) in *@shm_kib. */
static long proc_rss_kib(pid_t pid, long *shm_kib)
{
	char path[64], line[128];
	long kib = 0;
	FILE *f;

	*shm_kib = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) != 1)
			sscanf(line, "RssShmem: %ld", shm_kib);
	fclose(f);
	return kib;
}

/* --mode sparse: the servers (cs[1..servers]) and the most their RSS
 * without RssShmem summed reached at a round's start (rows stored). */
static const struct child *sparse_srv;
static long sparse_noshm_max;

/* The servers' RSS summed into *@kib, without RssShmem into *@noshm. */
static void sparse_rss(const struct bopts *o, const struct child *cs, long *kib,
		       long *noshm)
{
	long shm;
	unsigned i;

	*kib = *noshm = 0;
	for (i = 1; i <= o->servers; i++) {
		*kib += proc_rss_kib(cs[i].pid, &shm);
		*noshm += proc_rss_kib(cs[i].pid, &shm) - shm;
	}
}

/* --mode sparse: every worker's "MEM 0 0" (no row stored yet), then the
 * servers' RSS summed into *@kib (without RssShmem: *@noshm), then the
 * go. */
static int sparse_mem_mark(const struct bopts *o, struct child *cs,
			   struct bresult *res, long *kib, long *noshm)
{
	struct child *ws = cs + 1 + o->servers;
	unsigned i;
	int ret;

	for (i = 0; i < o->workers; i++) {
		ret = wait_line(&ws[i], "MEM", 0, 0, o, res, NULL);
		if (ret)
			return ret;
	}
	sparse_rss(o, cs, kib, noshm);
	sparse_srv = cs;
	for (i = 0; i < o->workers; i++)
		if (write(ws[i].in, "g", 1) != 1)
			return -EPIPE;
	return 0;
}

/*
 * Every window of every size, interleaved: for each round the baselines
 * run while the workers wait for their go, then psched's window.
 */
static int run_rounds(const struct bopts *o, struct child *ws,
		      struct bresult *res)
{
	bool tty = isatty(STDERR_FILENO);
	unsigned si, r, i;
	double g;
	int ret;

	for (si = 0; si < o->nsizes; si++) {
		for (r = 0; r < o->runs; r++) {
			for (i = 0; i < o->workers; i++) {
				ret = wait_line(&ws[i], "WAIT", si, r, o, res,
						NULL);
				if (ret)
					return ret;
			}
			if (o->baseline)
				baseline_round(o, si, r, &res[si]);
			if (sparse_srv) {
				long kib, noshm;

				sparse_rss(o, sparse_srv, &kib, &noshm);
				if (noshm > sparse_noshm_max)
					sparse_noshm_max = noshm;
			}
			for (i = 0; i < o->workers; i++)
				if (write(ws[i].in, "g", 1) != 1)
					return -EPIPE;
			for (i = 0; i < o->workers; i++) {
				ret = wait_line(&ws[i], "DONE", si, r, o, res,
						&g);
				if (ret)
					return ret;
				res[si].good_r[r] += g;
			}
			if (tty)
				progress(o, si, r, &res[si]);
		}
	}
	for (i = 0; i < o->workers; i++)
		wait_line(&ws[i], NULL, 0, 0, o, res, NULL);
	for (si = 0; si < o->nsizes; si++)
		finish_size(o, &res[si]);
	return 0;
}

/* @head (NULL-terminated), then @n of @argv from 1 on, then the cluster
 * flags given to ps-bench: a child's argv. */
static char **child_argv(char *const *head, int n, char **argv,
			 const struct bopts *o)
{
	size_t nh = 0, nc = 0, k = 0;
	char **v;
	int i;

	while (head[nh])
		nh++;
	while (o->cluster_argv && o->cluster_argv[nc])
		nc++;
	v = calloc(nh + (size_t)n + nc + 1, sizeof(char *));
	if (!v)
		return NULL;
	while (k < nh) {
		v[k] = head[k];
		k++;
	}
	for (i = 1; i <= n; i++)
		v[k++] = argv[i];
	for (i = 0; (size_t)i < nc; i++)
		v[k++] = o->cluster_argv[i];
	return v;
}

static int launch_run(const struct bopts *o, int argc, char **argv)
{
	unsigned n = 1 + o->servers + o->workers, i, port;
	struct child *cs = calloc(n, sizeof(*cs));
	struct bresult res[MAX_SIZES];
	struct bkl_result klres;
	static char sname[] = "ps-scheduler", rp[] = "--root-port",
		    zero[] = "0", vname[] = "ps-server";
	static char wname[] = "ps-bench";
	char *shead[] = { sname, rp, zero, NULL };
	char *vhead[] = { vname, NULL };
	char *whead[] = { wname, NULL };
	char **sargv = child_argv(shead, 0, argv, o);
	char **vargv = child_argv(vhead, 0, argv, o);
	char **wargv = child_argv(whead, argc - 1, argv, o);
	int failed = 0;
	long rss = 0, rss_before = 0, noshm_before = 0;

	memset(res, 0, sizeof(res));
	if (!cs || !sargv || !vargv || !wargv) {
		fprintf(stderr, "ps-bench: out of memory\n");
		return 1;
	}
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
	/* On a failure the other workers may wait for the one that failed. */
	if (o->kl_keys) {
		FILE *fps[MAX_NODES_KL];

		for (i = 0; i < o->workers; i++)
			fps[i] = cs[1 + o->servers + i].fp;
		failed = bench_kl_collect(o, fps, o->workers, &klres) != 0;
	} else {
		if (o->mode == MODE_SPARSE)
			failed = sparse_mem_mark(o, cs, res, &rss_before,
						 &noshm_before) != 0;
		if (!failed)
			failed = run_rounds(o, cs + 1 + o->servers, res) != 0;
	}
	if (failed)
		kill_all(cs + 1 + o->servers, o->workers);
	for (i = 1 + o->servers; i < n; i++) {
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
	for (i = 1; i <= o->servers; i++)
		if (o->mode == MODE_SPARSE)
			rss += cs[i].ru.ru_maxrss; /* all servers' memory */
		else if (cs[i].ru.ru_maxrss > rss)
			rss = cs[i].ru.ru_maxrss;
	if (o->kl_keys)
		bench_kl_report(o, &klres, rss / 1024.0);
	else if (o->mode == MODE_SPARSE)
		bench_sparse_report(o, res, rss / 1024.0, rss_before / 1024.0,
				    (sparse_noshm_max - noshm_before) / 1024.0);
	else
		bench_report(o, res, rss / 1024.0);
	free(sargv);
	free(vargv);
	free(wargv);
	free(cs);
	return 0;
}

/*
 * The cluster ps-bench starts is a job like any other: its nodes prove
 * a shared secret (docs/security.md "The job secret").  Unless the caller gave
 * one, draw a fresh one for this run; the children inherit it.
 */
static int launch_secret(void)
{
	unsigned char r[24];
	char hex[2 * sizeof(r) + 1];
	size_t i;

	if (getenv("PS_JOB_TOKEN") || getenv("PS_JOB_TOKEN_FILE"))
		return 0;
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		fprintf(stderr, "ps-bench: no random bytes for the job "
				"secret\n");
		return -1;
	}
	for (i = 0; i < sizeof(r); i++)
		snprintf(hex + 2 * i, 3, "%02x", r[i]);
	return setenv("PS_JOB_TOKEN", hex, 1);
}

int bench_launch(const struct bopts *o, int argc, char **argv)
{
	char *slash;

	if (launch_secret())
		return 1;

	signal(SIGPIPE, SIG_IGN); /* a worker that died is reported */
	/* The other programs are found next to this one. */
	if (readlink("/proc/self/exe", self_dir, sizeof(self_dir) - 1) < 0)
		return 1;
	slash = strrchr(self_dir, '/');
	if (slash)
		*slash = '\0';
	return launch_run(o, argc, argv);
}
