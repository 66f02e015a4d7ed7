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

#include "bench.h"

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
	kc->done = bench_now_s();
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
	t0 = bench_now_s();
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
	unsigned nk = bench_auto_keys(o, size), i, r;
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
		t0 = bench_now_s();
		for (it = 0; !ret; it++) {
			bool up = it >= 3 && bench_now_s() - t0 >= o->seconds;

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
		el = bench_now_s() - t0;
		iters += it;
		gb[r] = (double)it * nk * size * 8 / el / 1e9;
		rq[r] = (double)it * nk / el;
	}
	if (!ret) {
		res->size = size;
		res->keys = nk;
		res->iters = iters;
		res->gbps = bench_median(gb, o->runs);
		res->reqs = bench_median(rq, o->runs);
		qsort(lat, nlat, sizeof(*lat), bench_cmp_double);
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
				if (!strcmp(optarg, bench_mode_names[o->mode]))
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
	if (!o.csv)
		printf("# ps-bench: mode=%s servers=%u workers=%u "
		       "transport=%s dtype=%s window=%.1fs runs=%u "
		       "(medians)\n",
		       bench_mode_names[o.mode], o.servers, o.workers,
		       cfg.transport, o.dtype == PSCHED_RAW ? "raw" : "f32",
		       o.seconds, o.runs);
	fflush(stdout);
	return bench_launch(&o, argc, argv);
}
