// SPDX-License-Identifier: MIT
/*
 * ps-bench: throughput and latency of push / pull / pushpull.
 *
 * Without DMLC_ROLE it starts a local cluster (fork+exec of ps-scheduler,
 * ps-server and W copies of itself as workers), collects the workers'
 * results and prints a table with a raw TCP baseline measured in the same
 * run with the same request pattern.  With DMLC_ROLE set it joins a
 * running cluster in that role.
 *
 * Workload (BytePS test_benchmark style): per size, K keys (40 per server,
 * fewer above 1 MiB), all K requests of an iteration outstanding at once.
 * Goodput counts each key's payload once per iteration, even for pushpull
 * where it crosses the wire twice.
 */
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

#define MAX_SIZES 16

enum bmode {
	MODE_PUSH,
	MODE_PULL,
	MODE_PUSHPULL,
};

struct bopts {
	unsigned servers;
	unsigned workers;
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes;
	enum bmode mode;
	double seconds;
	unsigned keys; /* per server; 0 = auto */
	unsigned runs;
	bool csv;
	bool baseline;
	enum psched_dtype dtype;
	char transport[16];
	char root_uri[256]; /* local cluster: address the nodes dial */
};

struct bresult {
	uint64_t size;
	unsigned keys;
	double gbps;	 /* median over runs */
	double reqs;	 /* requests per second, median */
	double p50, p99; /* microseconds */
	uint64_t iters;
	double raw_gbps;
};

static const char *const mode_names[] = { "push", "pull", "pushpull" };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned auto_keys(const struct bopts *o, uint64_t size)
{
	uint64_t per = o->keys ? o->keys : 40;

	/* Fewer keys above 1 MiB: at most ~64 MiB per server per iteration. */
	if (!o->keys && size > (1u << 20)) {
		per = (64ull << 20) / size;
		if (per < 1)
			per = 1;
	}
	return (unsigned)(per * o->servers);
}

/* ---- worker side ------------------------------------------------------ */

struct bworker {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned outstanding;
	int err;
	double *done_at; /* per key: completion time */
};

/* Per-key callback context. */
struct kctx {
	struct bworker *bw;
	double done;
};

static void on_done(int err, uint64_t req, void *arg)
{
	struct kctx *kc = arg;
	struct bworker *bw = kc->bw;

	(void)req;
	kc->done = now_s();
	pthread_mutex_lock(&bw->lock);
	if (err && !bw->err)
		bw->err = err;
	if (--bw->outstanding == 0)
		pthread_cond_signal(&bw->cond);
	pthread_mutex_unlock(&bw->lock);
}

/*
 * Workers of a pushpull run must stop at the same iteration: one that goes
 * on alone waits forever for the others' pushes of its step.  So each
 * iteration also pushpulls a one-float "time is up" flag; all workers see
 * the same sum for it and stop after the same iteration.
 */
struct bstop {
	uint64_t key; /* 0: no flag (one worker, or push/pull mode) */
	float up;     /* pushed: 1 once this worker's window is over */
	float sum;    /* pulled: workers whose window is over */
	struct kctx ctx;
};

static int bench_stop_issue(struct psched_node *node, struct bstop *st)
{
	const void *pv = &st->up;
	void *qv = &st->sum;
	uint64_t len = sizeof(float), req;

	return psched_pushpull(node, &st->key, 1, &pv, &qv, &len, PSCHED_F32, 0,
			       on_done, &st->ctx, &req);
}

static int bench_iter(struct psched_node *node, const struct bopts *o,
		      struct bworker *bw, uint64_t *keys, unsigned nk,
		      void **bufs, void **outs, uint64_t size, struct kctx *ctx,
		      double *lat, struct bstop *st)
{
	uint64_t req;
	double t0;
	unsigned i;
	int ret = 0;

	pthread_mutex_lock(&bw->lock);
	bw->outstanding = nk + (st && st->key ? 1 : 0);
	bw->err = 0;
	pthread_mutex_unlock(&bw->lock);
	if (st && st->key) {
		ret = bench_stop_issue(node, st);
		if (ret) {
			pthread_mutex_lock(&bw->lock);
			bw->outstanding = 0;
			pthread_mutex_unlock(&bw->lock);
			return ret;
		}
	}
	t0 = now_s();
	for (i = 0; i < nk && !ret; i++) {
		const void *pv = bufs[i];

		if (o->mode == MODE_PUSH)
			ret = psched_push(node, &keys[i], 1, &pv, &size,
					  o->dtype, (int)i, on_done, &ctx[i],
					  &req);
		else if (o->mode == MODE_PULL)
			ret = psched_pull(node, &keys[i], 1, &outs[i], &size,
					  o->dtype, (int)i, on_done, &ctx[i],
					  &req);
		else
			ret = psched_pushpull(node, &keys[i], 1, &pv, &outs[i],
					      &size, o->dtype, (int)i, on_done,
					      &ctx[i], &req);
	}
	pthread_mutex_lock(&bw->lock);
	if (ret)
		bw->outstanding -= nk - i + 1;
	while (bw->outstanding)
		pthread_cond_wait(&bw->cond, &bw->lock);
	if (!ret)
		ret = bw->err;
	pthread_mutex_unlock(&bw->lock);
	for (i = 0; i < nk && lat; i++)
		lat[i] = (ctx[i].done - t0) * 1e6;
	return ret;
}

static int bench_size(struct psched_node *node, const struct bopts *o,
		      unsigned si, struct bresult *res)
{
	uint64_t size = o->sizes[si];
	unsigned nk = auto_keys(o, size), i, r;
	uint64_t *keys = calloc(nk, sizeof(*keys));
	void **bufs = calloc(nk, sizeof(void *));
	void **outs = calloc(nk, sizeof(void *));
	struct kctx *ctx = calloc(nk, sizeof(*ctx));
	double gb[16], rq[16], *lat = NULL;
	size_t nlat = 0, cap = 0;
	struct bworker bw;
	struct bstop st;
	uint64_t it, iters = 0;
	double t0, el;
	int ret = 0;

	pthread_mutex_init(&bw.lock, NULL);
	pthread_cond_init(&bw.cond, NULL);
	for (i = 0; i < nk; i++) {
		keys[i] = (uint64_t)si << 32 | i;
		bufs[i] = malloc(size);
		outs[i] = malloc(size);
		memset(bufs[i], 1, size);
		memset(outs[i], 0, size);
		ctx[i].bw = &bw;
	}
	for (i = 0; i < nk && !ret; i++)
		ret = psched_init(node, &keys[i], 1, NULL, &size, o->dtype, 0);
	memset(&st, 0, sizeof(st));
	st.ctx.bw = &bw;
	if (o->mode == MODE_PUSHPULL && psched_num_workers(node) > 1) {
		uint64_t flen = sizeof(float);

		st.key = (uint64_t)si << 32 | 0xffffffffu;
		ret = psched_init(node, &st.key, 1, NULL, &flen, PSCHED_F32, 0);
	}
	for (i = 0; i < 2 && !ret; i++) /* warm-up, discarded */
		ret = bench_iter(node, o, &bw, keys, nk, bufs, outs, size, ctx,
				 NULL, NULL);
	for (r = 0; r < o->runs && !ret; r++) {
		ret = psched_barrier(node, PSCHED_GROUP_WORKERS, 0);
		t0 = now_s();
		for (it = 0; !ret; it++) {
			bool up = it >= 3 && now_s() - t0 >= o->seconds;

			if (!st.key && up)
				break;
			if (st.key && it && st.sum > 0.5f)
				break;
			if (nlat + nk > cap) {
				cap = (cap + nk) * 2;
				lat = realloc(lat, cap * sizeof(*lat));
			}
			st.up = up ? 1.0f : 0.0f;
			ret = bench_iter(node, o, &bw, keys, nk, bufs, outs,
					 size, ctx, lat + nlat, &st);
			nlat += nk;
		}
		el = now_s() - t0;
		iters += it;
		gb[r] = (double)it * nk * size * 8 / el / 1e9;
		rq[r] = (double)it * nk / el;
	}
	if (!ret) {
		res->size = size;
		res->keys = nk;
		res->iters = iters;
		res->gbps = median(gb, o->runs);
		res->reqs = median(rq, o->runs);
		qsort(lat, nlat, sizeof(*lat), cmp_double);
		res->p50 = lat[nlat / 2];
		res->p99 = lat[(size_t)((double)nlat * 0.99)];
	}
	for (i = 0; i < nk; i++) {
		free(bufs[i]);
		free(outs[i]);
	}
	free(keys);
	free(bufs);
	free(outs);
	free(ctx);
	free(lat);
	return ret;
}

/* Worker role: run every size, print one RESULT line per size. */
static int run_worker(struct psched_node *node, const struct bopts *o)
{
	struct bresult res;
	unsigned si;
	int ret;

	for (si = 0; si < o->nsizes; si++) {
		memset(&res, 0, sizeof(res));
		ret = bench_size(node, o, si, &res);
		if (ret) {
			fprintf(stderr, "ps-bench worker %d: size %llu: %s\n",
				psched_node_rank(node),
				(unsigned long long)o->sizes[si],
				psched_errmsg());
			return 1;
		}
		printf("RESULT %llu %u %llu %.6f %.3f %.2f %.2f\n",
		       (unsigned long long)res.size, res.keys,
		       (unsigned long long)res.iters, res.gbps, res.reqs,
		       res.p50, res.p99);
		fflush(stdout);
	}
	return 0;
}

/* ---- raw TCP baseline ------------------------------------------------- */

struct raw_msg {
	uint64_t op; /* enum bmode */
	uint64_t len;
};

static int full_io(int fd, void *buf, size_t len, bool wr)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void raw_sockopts(int fd)
{
	int one = 1, buf = 4 << 20;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

/* The echo side: like a server that stores but does not sum. */
static void raw_server(int lfd, uint64_t size)
{
	int fd = accept(lfd, NULL, NULL);
	char *buf = malloc(size);
	struct raw_msg m, ack = { 0, 0 };

	raw_sockopts(fd);
	while (!full_io(fd, &m, sizeof(m), false)) {
		if (m.op != MODE_PULL && full_io(fd, buf, size, false))
			break;
		if (m.op == MODE_PUSH) {
			if (full_io(fd, &ack, sizeof(ack), true))
				break;
			continue;
		}
		if (full_io(fd, &m, sizeof(m), true) ||
		    full_io(fd, buf, size, true))
			break;
	}
	_exit(0);
}

struct raw_writer {
	int fd;
	enum bmode mode;
	uint64_t size;
	unsigned nk;
	char *buf;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned go; /* iterations requested */
	bool stop;
};

static void *raw_writer_main(void *arg)
{
	struct raw_writer *w = arg;
	struct raw_msg m = { w->mode, w->size };
	unsigned done = 0, i;

	for (;;) {
		pthread_mutex_lock(&w->lock);
		while (w->go == done && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		pthread_mutex_unlock(&w->lock);
		if (w->stop)
			return NULL;
		for (i = 0; i < w->nk; i++)
			if (full_io(w->fd, &m, sizeof(m), true) ||
			    (w->mode != MODE_PULL &&
			     full_io(w->fd, w->buf, w->size, true)))
				return NULL;
		done++;
	}
}

static int raw_connect(uint64_t size, pid_t *child)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int lfd, fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&a, &al))
		return -1;
	*child = fork();
	if (*child == 0)
		raw_server(lfd, size);
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	raw_sockopts(fd);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Gbit/s of a plain socket pair with the same request pattern (median of
 * o->runs windows of o->seconds each, after 2 warm-up iterations). */
static double raw_tcp(const struct bopts *o, uint64_t size, unsigned nk)
{
	struct raw_writer w = { .mode = o->mode, .size = size, .nk = nk };
	struct raw_msg m;
	double gb[16], t0;
	pthread_t th;
	pid_t child;
	char *rbuf = malloc(size);
	unsigned r, i, it;
	int ok = 1;

	w.buf = malloc(size);
	memset(w.buf, 1, size);
	w.fd = raw_connect(size, &child);
	if (w.fd < 0)
		return 0;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	pthread_create(&th, NULL, raw_writer_main, &w);
	for (r = 0; r < o->runs + 1 && ok; r++) {
		t0 = now_s();
		for (it = 0; ok && (it < 3 || now_s() - t0 < o->seconds);
		     it++) {
			pthread_mutex_lock(&w.lock);
			w.go++;
			pthread_cond_signal(&w.cond);
			pthread_mutex_unlock(&w.lock);
			for (i = 0; i < nk && ok; i++)
				ok = !full_io(w.fd, &m, sizeof(m), false) &&
				     (o->mode == MODE_PUSH ||
				      !full_io(w.fd, rbuf, size, false));
			if (r == 0 && it == 1)
				break; /* first round = warm-up */
		}
		if (r > 0)
			gb[r - 1] = (double)it * nk * size * 8 /
				    (now_s() - t0) / 1e9;
	}
	pthread_mutex_lock(&w.lock);
	w.stop = true;
	pthread_cond_signal(&w.cond);
	pthread_mutex_unlock(&w.lock);
	shutdown(w.fd, SHUT_RDWR);
	pthread_join(th, NULL);
	close(w.fd);
	waitpid(child, NULL, 0);
	free(rbuf);
	free(w.buf);
	return ok ? median(gb, o->runs) : 0;
}

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

static int launch(const struct bopts *o, int argc, char **argv)
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
		res[i].raw_gbps = raw_tcp(o, o->sizes[i], res[i].keys);
	print_table(o, res, cs + 1);
	free(wargv);
	free(cs);
	return 0;
}

/* ---- options and main ---------------------------------------------------- */

static int parse_sizes(const char *arg, struct bopts *o)
{
	char buf[512], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", arg);
	o->nsizes = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nsizes == MAX_SIZES)
			return -1;
		if (psched_parse_bytes(tok, &o->sizes[o->nsizes]) ||
		    !o->sizes[o->nsizes] ||
		    o->sizes[o->nsizes] % psched_dtype_size(o->dtype))
			return -1;
		o->nsizes++;
	}
	return o->nsizes ? 0 : -1;
}

static void usage(void)
{
	printf("usage: ps-bench [options] [cluster options]\n"
	       "Starts a local cluster (1 scheduler, S servers, W workers) on "
	       "loopback, or joins\none when DMLC_ROLE is set, and measures "
	       "push/pull throughput and latency.\n"
	       "  --servers S     servers to start [1]\n"
	       "  --workers W     workers to start [1]\n"
	       "  --size LIST     tensor sizes, comma-separated, K/M/G "
	       "[4K,64K,1M,16M,64M]\n"
	       "  --mode M        push | pull | pushpull [pushpull]\n"
	       "  --seconds N     length of one measured window [2]\n"
	       "  --runs R        measured windows per size; medians "
	       "reported [3]\n"
	       "  --keys K        keys per server (0 = 40, fewer above "
	       "1 MiB) [0]\n"
	       "  --dtype T       f32 (servers sum) | raw (servers store) "
	       "[f32]\n"
	       "  --no-baseline   skip the raw TCP baseline\n"
	       "  --csv           CSV instead of the table\n\n"
	       "Goodput = payload bytes of every key once per iteration / "
	       "time (pushpull moves\nthem twice but counts them once), "
	       "summed over workers.  RawTCP is one plain\nsocket pair in "
	       "this run with the same pattern (N bytes one way, N bytes or "
	       "an ack\nback, K requests outstanding); ratio = Goodput / "
	       "RawTCP.\n\n");
	psched_cfg_usage(stdout);
}

static int parse_opts(int argc, char **argv, struct bopts *o)
{
	static const struct option lo[] = {
		{ "servers", required_argument, NULL, 's' },
		{ "workers", required_argument, NULL, 'w' },
		{ "size", required_argument, NULL, 'z' },
		{ "sizes", required_argument, NULL, 'z' },
		{ "mode", required_argument, NULL, 'm' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "runs", required_argument, NULL, 'r' },
		{ "keys", required_argument, NULL, 'k' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "no-baseline", no_argument, NULL, 'B' },
		{ "csv", no_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sizes = "4K,64K,1M,16M,64M";
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			o->servers = (unsigned)atoi(optarg);
			break;
		case 'w':
			o->workers = (unsigned)atoi(optarg);
			break;
		case 'z':
			sizes = optarg;
			break;
		case 'm':
			for (o->mode = 0; o->mode < 3; o->mode++)
				if (!strcmp(optarg, mode_names[o->mode]))
					break;
			if (o->mode == 3)
				return -1;
			break;
		case 'S':
			o->seconds = atof(optarg);
			break;
		case 'r':
			o->runs = (unsigned)atoi(optarg);
			break;
		case 'k':
			o->keys = (unsigned)atoi(optarg);
			break;
		case 'd':
			if (!strcmp(optarg, "raw"))
				o->dtype = PSCHED_RAW;
			else if (strcmp(optarg, "f32"))
				return -1;
			break;
		case 'B':
			o->baseline = false;
			break;
		case 'c':
			o->csv = true;
			break;
		default:
			return -1;
		}
	}
	if (optind < argc || !o->servers || !o->workers || o->servers > 64 ||
	    o->workers > 64 || !o->runs || o->runs > 15 || !(o->seconds > 0))
		return -1;
	return parse_sizes(sizes, o);
}

static int join(const struct psched_cfg *cfg, const struct bopts *o)
{
	struct psched_node *node;
	int ret;

	ret = psched_node_create(cfg, &node);
	if (ret) {
		fprintf(stderr, "ps-bench: %s\n", psched_errmsg());
		return 1;
	}
	if (cfg->role == PSCHED_ROLE_WORKER)
		ret = run_worker(node, o);
	else
		ret = psched_node_run(node);
	if (psched_node_destroy(node) && !ret)
		ret = 1;
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bopts o = { .servers = 1,
			   .workers = 1,
			   .mode = MODE_PUSHPULL,
			   .seconds = 2,
			   .runs = 3,
			   .baseline = true,
			   .dtype = PSCHED_F32 };
	struct psched_cfg cfg;
	char *slash;
	int ret;

	psched_cfg_init(&cfg);
	ret = psched_cfg_from_env(&cfg);
	if (!ret)
		ret = psched_cfg_parse_args(&cfg, &argc, argv, false);
	if (ret == 1) {
		usage();
		return 0;
	}
	if (ret || parse_opts(argc, argv, &o)) {
		fprintf(stderr, "ps-bench: %s (see --help)\n",
			ret ? psched_errmsg() : "bad arguments");
		return 2;
	}
	if (getenv("DMLC_ROLE"))
		return join(&cfg, &o);
	snprintf(o.transport, sizeof(o.transport), "%s", cfg.transport);
	snprintf(o.root_uri, sizeof(o.root_uri), "%s",
		 cfg.root_uri[0] ? cfg.root_uri : "127.0.0.1");
	if (readlink("/proc/self/exe", self_dir, sizeof(self_dir) - 1) < 0)
		return 1;
	slash = strrchr(self_dir, '/');
	if (slash)
		*slash = '\0';
	if (!o.csv)
		printf("# ps-bench: mode=%s servers=%u workers=%u "
		       "transport=%s dtype=%s window=%.1fs runs=%u "
		       "(medians)\n",
		       mode_names[o.mode], o.servers, o.workers, cfg.transport,
		       o.dtype == PSCHED_RAW ? "raw" : "f32", o.seconds,
		       o.runs);
	fflush(stdout);
	return launch(&o, argc, argv);
}
