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
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	/* --stream: the keys completed and not yet issued again (each key
	 * is in flight at most once, so nk slots); NULL otherwise */
	unsigned *doneq;
	unsigned ndone;
	/* Callbacks between their start and their signal (on_done signals
	 * after the unlock): bench_size() waits for none before @lock and
	 * @cond, on its stack, go. */
	atomic_uint in_cb;
};

/* One measured window: iterations, seconds, latencies (grown as needed). */
struct bwin {
	uint64_t iters;
	uint64_t reqs; /* requests completed */
	double el;
	double *lat;
	size_t nlat, cap;
};

/* Per-key callback context. */
struct kctx {
	struct bworker *bw;
	unsigned idx;  /* the key's index */
	double issued; /* --stream: when it was last issued */
	double done;
};

static void on_done(int err, uint64_t req, void *arg)
{
	struct kctx *kc = arg;
	struct bworker *bw = kc->bw;
	bool last;

	(void)req;
	atomic_fetch_add(&bw->in_cb, 1);
	kc->done = bench_now_s();
	pthread_mutex_lock(&bw->lock);
	if (err && !bw->err)
		bw->err = err;
	last = --bw->outstanding == 0;
	if (bw->doneq) {
		bw->doneq[bw->ndone++] = kc->idx;
		last = true; /* the streaming caller reissues it */
	}
	pthread_mutex_unlock(&bw->lock);
	/* After the unlock: the woken caller does not find the lock held. */
	if (last)
		pthread_cond_signal(&bw->cond);
	atomic_fetch_sub(&bw->in_cb, 1);
}

/*
 * Workers of a pushpull or push run must stop at the same iteration: in a
 * pushpull run one that goes on alone waits forever for the others' pushes
 * of its step; in a push run its pushes are held by the servers for steps
 * the others never push, and beyond PS_MAX_STEPS_AHEAD or
 * PS_MAX_PARKED_BYTES refused.  So each
 * iteration also pushpulls a one-float "time is up" flag; all workers see
 * the same sum for it and stop after the same iteration.
 */
struct bstop {
	uint64_t key; /* 0: no flag (one worker, or pull mode) */
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

/* One size's keys and buffers. */
struct bkeys {
	unsigned nk;
	uint64_t size;
	uint64_t *keys;
	void **bufs; /* pushed from */
	void **outs; /* pulled into */
	struct kctx *ctx;
	uint8_t *block; /* --hugepages: all buffers, one mapping */
	size_t block_len;
};

/* A message for errors of ps-bench's own (psched's are in psched_errmsg()).
 */
static char bench_err[256];

static void bkeys_free(struct bkeys *k)
{
	unsigned i;

	for (i = 0; i < k->nk && !k->block; i++) {
		if (k->bufs)
			free(k->bufs[i]);
		if (k->outs)
			free(k->outs[i]);
	}
	if (k->block)
		munmap(k->block, k->block_len);
	free(k->keys);
	free(k->bufs);
	free(k->outs);
	free(k->ctx);
}

/*
 * --hugepages: every buffer of one size in one mapping aligned to 2 MiB
 * with MADV_HUGEPAGE (transparent huge pages), as an application's
 * tensor allocator may do; on failure the buffers are malloc'd.
 */
static void bkeys_map(struct bkeys *k, size_t len)
{
	const size_t huge = 2u << 20;
	size_t mlen = (len + huge - 1) & ~(huge - 1);
	uint8_t *p, *a;

	p = mmap(NULL, mlen + huge, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	a = (uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + mlen, (size_t)(p + huge - a));
	(void)madvise(a, mlen, MADV_HUGEPAGE);
	k->block = a;
	k->block_len = mlen;
}

static int bkeys_alloc(struct bkeys *k, unsigned si, uint64_t size, unsigned nk,
		       struct bworker *bw, bool huge)
{
	unsigned i;

	memset(k, 0, sizeof(*k));
	k->nk = nk;
	k->size = size;
	k->keys = calloc(nk, sizeof(*k->keys));
	k->bufs = calloc(nk, sizeof(*k->bufs));
	k->outs = calloc(nk, sizeof(*k->outs));
	k->ctx = calloc(nk, sizeof(*k->ctx));
	if (huge && nk && size <= SIZE_MAX / 2 / nk)
		bkeys_map(k, 2 * (size_t)size * nk);
	for (i = 0; i < nk && k->keys && k->bufs && k->outs && k->ctx; i++) {
		k->keys[i] = (uint64_t)si << 32 | i;
		if (k->block) {
			k->bufs[i] = k->block + (size_t)i * size;
			k->outs[i] = k->block + ((size_t)nk + i) * size;
		} else {
			k->bufs[i] = malloc(size);
			k->outs[i] = malloc(size);
		}
		if (!k->bufs[i] || !k->outs[i])
			break;
		memset(k->bufs[i], 1, size);
		memset(k->outs[i], 0, size);
		k->ctx[i].bw = bw;
		k->ctx[i].idx = i;
	}
	if (i < nk || !nk) {
		snprintf(bench_err, sizeof(bench_err),
			 "cannot allocate %u keys x 2 buffers of %llu bytes",
			 nk, (unsigned long long)size);
		bkeys_free(k);
		return -ENOMEM;
	}
	return 0;
}

/* One key alone (serial latency): issue it and psched_wait() for it, as
 * a serial caller (and ps-lite's Wait(ZPush())) does. */
static int bench_iter_one(struct psched_node *node, const struct bopts *o,
			  struct bkeys *k, double *lat)
{
	const void *pv = k->bufs[0];
	double t0 = bench_now_s();
	uint64_t req;
	int ret;

	if (o->mode == MODE_PUSH)
		ret = psched_push(node, &k->keys[0], 1, &pv, &k->size, o->dtype,
				  0, NULL, NULL, &req);
	else if (o->mode == MODE_PULL)
		ret = psched_pull(node, &k->keys[0], 1, &k->outs[0], &k->size,
				  o->dtype, 0, NULL, NULL, &req);
	else
		ret = psched_pushpull(node, &k->keys[0], 1, &pv, &k->outs[0],
				      &k->size, o->dtype, 0, NULL, NULL, &req);
	if (!ret)
		ret = psched_wait(node, req, 0);
	if (lat)
		lat[0] = (bench_now_s() - t0) * 1e6;
	return ret;
}

/* Issue key @i of @k (its callback: on_done). */
static int bench_issue(struct psched_node *node, const struct bopts *o,
		       struct bkeys *k, unsigned i)
{
	const void *pv = k->bufs[i];
	uint64_t req;

	if (o->mode == MODE_PUSH)
		return psched_push(node, &k->keys[i], 1, &pv, &k->size,
				   o->dtype, (int)i, on_done, &k->ctx[i], &req);
	if (o->mode == MODE_PULL)
		return psched_pull(node, &k->keys[i], 1, &k->outs[i], &k->size,
				   o->dtype, (int)i, on_done, &k->ctx[i], &req);
	return psched_pushpull(node, &k->keys[i], 1, &pv, &k->outs[i], &k->size,
			       o->dtype, (int)i, on_done, &k->ctx[i], &req);
}

static int bench_iter(struct psched_node *node, const struct bopts *o,
		      struct bworker *bw, struct bkeys *k, double *lat,
		      struct bstop *st)
{
	unsigned nk = k->nk, i;
	double t0;
	int ret = 0;

	if (nk == 1 && !(st && st->key))
		return bench_iter_one(node, o, k, lat);
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
	for (i = 0; i < nk && !ret; i++)
		ret = bench_issue(node, o, k, i);
	pthread_mutex_lock(&bw->lock);
	if (ret)
		bw->outstanding -= nk - i + 1;
	while (bw->outstanding)
		pthread_cond_wait(&bw->cond, &bw->lock);
	if (!ret)
		ret = bw->err;
	pthread_mutex_unlock(&bw->lock);
	for (i = 0; i < nk && lat; i++)
		lat[i] = (k->ctx[i].done - t0) * 1e6;
	return ret;
}

/* Room for one more iteration's latencies. */
static int lat_reserve(double **lat, size_t *cap, size_t need)
{
	double *p;

	if (need <= *cap)
		return 0;
	p = realloc(*lat, need * 2 * sizeof(*p));
	if (!p) {
		snprintf(bench_err, sizeof(bench_err),
			 "cannot allocate %zu latency samples", need * 2);
		return -ENOMEM;
	}
	*lat = p;
	*cap = need * 2;
	return 0;
}

/*
 * Under a local launcher (o->sync), wait for its go before each window
 * (it measures the baselines while the cluster idles) and report each
 * window's goodput after it: "WAIT si r" ... "DONE si r gbps".
 */
int bench_sync_wait(const struct bopts *o, unsigned si, unsigned r)
{
	char c;
	ssize_t n;

	if (!o->sync)
		return 0;
	printf("WAIT %u %u\n", si, r);
	fflush(stdout);
	do
		n = read(STDIN_FILENO, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		return 0;
	snprintf(bench_err, sizeof(bench_err), "the launcher went away");
	return -EPIPE;
}

/*
 * --rate: before round @it of a window that began at @t0, sleep until
 * the rounds done so far are no more than this worker's share of the
 * rate (o->rate / the job's workers Gbit/s of Goodput), so a window's Goodput
 * is at most the rate however fast the cluster is.
 */
static void bench_pace(struct psched_node *node, const struct bopts *o,
		       const struct bkeys *k, double t0, uint64_t it)
{
	double bits = (double)it * k->nk * k->size * 8;
	unsigned nw = psched_num_workers(node);
	double due, left;
	struct timespec ts;

	if (!(o->rate > 0) || !it)
		return;
	due = t0 + bits / (o->rate / (nw ? nw : 1) * 1e9);
	left = due - bench_now_s();
	if (left <= 0)
		return;
	ts.tv_sec = (time_t)left;
	ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One measured window: iterations until o->seconds are up (at least 3). */
static int bench_window(struct psched_node *node, const struct bopts *o,
			struct bworker *bw, struct bkeys *k, struct bstop *st,
			struct bwin *w)
{
	double t0 = bench_now_s();
	uint64_t it;
	int ret = 0;

	for (it = 0; !ret; it++) {
		bool up = it >= 3 && bench_now_s() - t0 >= o->seconds;

		if (!st->key && up)
			break;
		if (st->key && it && st->sum > 0.5f)
			break;
		ret = lat_reserve(&w->lat, &w->cap, w->nlat + k->nk);
		if (ret)
			break;
		st->up = up ? 1.0f : 0.0f;
		bench_pace(node, o, k, t0, it);
		ret = bench_iter(node, o, bw, k, w->lat + w->nlat, st);
		w->nlat += k->nk;
	}
	if (!ret)
		bench_pace(node, o, k, t0, it); /* the last round's time */
	w->iters = it;
	w->reqs = it * k->nk;
	w->el = bench_now_s() - t0;
	return ret;
}

/*
 * --stream (one worker): every key in flight, each issued again as soon
 * as it completes until o->seconds are up, then the last ones drained:
 * no barrier between rounds, as ib_write_bw keeps its writes
 * outstanding.  The window counts every request completed in it.
 */
static int bench_stream(struct psched_node *node, const struct bopts *o,
			struct bworker *bw, struct bkeys *k, struct bwin *w)
{
	unsigned *mine = calloc(k->nk, sizeof(*mine));
	unsigned *q = calloc(k->nk, sizeof(*q));
	unsigned n, i, j, issued = 0;
	uint64_t done = 0;
	double t0, now;
	bool up = false;
	int ret = 0;

	if (!mine || !q) {
		free(mine);
		free(q);
		snprintf(bench_err, sizeof(bench_err),
			 "cannot allocate the stream's queue of %u keys",
			 k->nk);
		return -ENOMEM;
	}
	pthread_mutex_lock(&bw->lock);
	bw->outstanding = k->nk;
	bw->err = 0;
	bw->ndone = 0;
	bw->doneq = q;
	pthread_mutex_unlock(&bw->lock);
	t0 = bench_now_s();
	for (i = 0; i < k->nk && !ret; i++) {
		k->ctx[i].issued = bench_now_s();
		ret = bench_issue(node, o, k, i);
		issued += !ret;
	}
	pthread_mutex_lock(&bw->lock);
	bw->outstanding -= k->nk - issued;
	for (;;) {
		while (!bw->ndone && bw->outstanding)
			pthread_cond_wait(&bw->cond, &bw->lock);
		n = bw->ndone;
		memcpy(mine, bw->doneq, n * sizeof(*mine));
		bw->ndone = 0;
		now = bench_now_s();
		up = up || ret || bw->err || now - t0 >= o->seconds;
		if (!up)
			bw->outstanding += n; /* issued again below */
		pthread_mutex_unlock(&bw->lock);
		done += n;
		ret = ret ? ret : lat_reserve(&w->lat, &w->cap, w->nlat + n);
		for (j = 0; j < n && !ret; j++) {
			struct kctx *c = &k->ctx[mine[j]];

			w->lat[w->nlat++] = (c->done - c->issued) * 1e6;
		}
		issued = 0;
		for (j = 0; j < n && !up && !ret; j++) {
			k->ctx[mine[j]].issued = bench_now_s();
			ret = bench_issue(node, o, k, mine[j]);
			issued += !ret;
		}
		pthread_mutex_lock(&bw->lock);
		if (!up)
			bw->outstanding -= n - issued; /* not issued */
		if (up && !bw->outstanding && !bw->ndone)
			break;
	}
	if (!ret)
		ret = bw->err;
	bw->doneq = NULL;
	pthread_mutex_unlock(&bw->lock);
	w->el = bench_now_s() - t0;
	w->reqs = done;
	w->iters = done / k->nk;
	free(mine);
	free(q);
	return ret;
}

static int bench_size_init(struct psched_node *node, const struct bopts *o,
			   unsigned si, struct bkeys *k, struct bstop *st)
{
	unsigned i;
	int ret = 0;

	for (i = 0; i < k->nk && !ret; i++)
		ret = psched_keys_init(node, &k->keys[i], 1, NULL, &k->size,
				       o->dtype, 0);
	if (!ret && o->mode != MODE_PULL && psched_num_workers(node) > 1) {
		uint64_t flen = sizeof(float);

		st->key = (uint64_t)si << 32 | 0xffffffffu;
		ret = psched_keys_init(node, &st->key, 1, NULL, &flen,
				       PSCHED_F32, 0);
	}
	return ret;
}

static int bench_size(struct psched_node *node, const struct bopts *o,
		      unsigned si, struct bresult *res)
{
	double gb[MAX_RUNS], rq[MAX_RUNS];
	struct bwin w = { 0 };
	struct bworker bw;
	struct bkeys k;
	struct bstop st;
	unsigned i, r;
	int ret;

	memset(&bw, 0, sizeof(bw));
	pthread_mutex_init(&bw.lock, NULL);
	pthread_cond_init(&bw.cond, NULL);
	atomic_init(&bw.in_cb, 0);
	memset(&st, 0, sizeof(st));
	st.ctx.bw = &bw;
	ret = bkeys_alloc(&k, si, o->sizes[si],
			  bench_auto_keys(o, o->sizes[si]), &bw, o->hugepages);
	if (ret)
		return ret;
	ret = bench_size_init(node, o, si, &k, &st);
	for (i = 0; i < 2 && !ret; i++) /* warm-up, discarded */
		ret = bench_iter(node, o, &bw, &k, NULL, NULL);
	for (r = 0; r < o->runs && !ret; r++) {
		ret = bench_sync_wait(o, si, r);
		if (!ret)
			ret = psched_barrier(node, PSCHED_GROUP_WORKERS, 0);
		if (!ret)
			ret = o->stream
				      ? bench_stream(node, o, &bw, &k, &w)
				      : bench_window(node, o, &bw, &k, &st, &w);
		res->iters += w.iters;
		gb[r] = (double)w.reqs * k.size * 8 / w.el / 1e9;
		rq[r] = (double)w.reqs / w.el;
		if (!ret && o->sync) {
			printf("DONE %u %u %.6f\n", si, r, gb[r]);
			fflush(stdout);
		}
	}
	if (!ret) {
		res->size = k.size;
		res->keys = k.nk;
		res->gbps = bench_median(gb, o->runs);
		res->reqs = bench_median(rq, o->runs);
		qsort(w.lat, w.nlat, sizeof(*w.lat), bench_cmp_double);
		res->p50 = w.lat[w.nlat / 2];
		res->p99 = w.lat[(size_t)((double)w.nlat * 0.99)];
	}
	/* The last callback may still be about to signal. */
	while (atomic_load(&bw.in_cb))
		sched_yield();
	bkeys_free(&k);
	free(w.lat);
	return ret;
}

/* Worker role: run every size, print one RESULT line per size. */
static int run_worker(struct psched_node *node, const struct bopts *o)
{
	struct bresult res;
	unsigned si;
	int ret;

	if (o->mode == MODE_SPARSE)
		return bench_sparse_worker(node, o);
	for (si = 0; si < o->nsizes; si++) {
		memset(&res, 0, sizeof(res));
		ret = bench_size(node, o, si, &res);
		if (ret) {
			fprintf(stderr, "ps-bench worker %d: size %llu: %s\n",
				psched_node_rank(node),
				(unsigned long long)o->sizes[si],
				bench_err[0] ? bench_err : psched_errmsg());
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

/* ---- main ---------------------------------------------------------------- */

static int join(const struct psched_cfg *cfg, const struct bopts *o)
{
	struct psched_node *node;
	int ret;

	ret = psched_node_create(cfg, &node);
	if (ret) {
		fprintf(stderr, "ps-bench: %s\n", psched_errmsg());
		return 1;
	}
	if (psched_node_role(node) == PSCHED_ROLE_WORKER && o->kl_keys)
		ret = bench_kl_worker(node, o);
	else if (psched_node_role(node) == PSCHED_ROLE_WORKER)
		ret = run_worker(node, o);
	else
		ret = psched_node_run(node);
	if (psched_node_destroy(node) && !ret)
		ret = 1;
	return ret ? 1 : 0;
}

/* Cluster flags the launcher sets for every node itself. */
static bool launcher_owned(const char *flag)
{
	static const char *const own[] = { "role",	 "root-uri",
					   "root-port",	 "num-server",
					   "num-worker", "port" };
	size_t len = strcspn(flag, "=");
	size_t i;

	for (i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == len && !strncmp(flag, own[i], len))
			return true;
	return false;
}

/*
 * The cluster flags of the command line: what psched_cfg_parse_args()
 * took out of @orig (@oargc entries) to leave @kept (@kargc), in order,
 * for the nodes ps-bench starts (which otherwise see only the
 * environment), less the ones it sets itself (where the scheduler is,
 * the node counts, a node's role and port).  NULL-terminated; NULL when
 * out of memory (then nothing is passed on, as before).
 */
static char **cluster_flags(char **orig, int oargc, char **kept, int kargc)
{
	char **v = calloc((size_t)oargc + 1, sizeof(*v));
	bool skip_value = false;
	int i, j = 1, n = 0;

	if (!v)
		return NULL;
	for (i = 1; i < oargc; i++) {
		if (j < kargc && orig[i] == kept[j]) {
			j++;
			continue;
		}
		if (skip_value) { /* the value of a flag left out */
			skip_value = false;
			continue;
		}
		if (!strncmp(orig[i], "--", 2) && launcher_owned(orig[i] + 2)) {
			/* each of those takes a value: in it or next */
			skip_value = !strchr(orig[i], '=');
			continue;
		}
		v[n++] = orig[i];
	}
	return v;
}

/* main() after the cluster flags are parsed (@ret: their status). */
static int bench_run(struct bopts *o, const struct psched_cfg *cfg, int ret,
		     int argc, char **argv)
{
	if (ret == 1) {
		bench_usage();
		return 0;
	}
	if (ret) {
		fprintf(stderr, "ps-bench: %s (see --help)\n", psched_errmsg());
		return 2;
	}
	if (bench_parse_opts(argc, argv, o))
		return 2; /* the message is out */
	if (getenv("DMLC_ROLE")) {
		o->sync = getenv("PS_BENCH_SYNC") != NULL;
		return join(cfg, o);
	}
	if (psched_cfg_get(cfg, "transport", o->transport,
			   sizeof(o->transport)) ||
	    psched_cfg_get(cfg, "root-uri", o->root_uri, sizeof(o->root_uri))) {
		fprintf(stderr, "ps-bench: %s\n", psched_errmsg());
		return 2;
	}
	if (!o->root_uri[0])
		snprintf(o->root_uri, sizeof(o->root_uri), "127.0.0.1");
	if (o->kl_keys)
		printf("# ps-bench: key lists, servers=%u workers=%u "
		       "transport=%s rounds=%u\n",
		       o->servers, o->workers, o->transport, o->runs);
	else if (!o->csv && !o->json)
		printf("# ps-bench: mode=%s servers=%u workers=%u "
		       "transport=%s dtype=%s window=%.1fs runs=%u "
		       "(medians)\n",
		       bench_mode_names[o->mode], o->servers, o->workers,
		       o->transport, o->dtype == PSCHED_RAW ? "raw" : "f32",
		       o->seconds, o->runs);
	fflush(stdout);
	return bench_launch(o, argc, argv);
}

int main(int argc, char **argv)
{
	struct bopts o = { .servers = 1,
			   .workers = 1,
			   .mode = MODE_PUSHPULL,
			   .seconds = 2,
			   .runs = 3,
			   .baseline = true,
			   .dtype = PSCHED_F32,
			   .rows = 10000000,
			   .width = 64,
			   .batch_rows = 8192,
			   .zipf = 1.1 };
	struct psched_cfg *cfg = NULL;
	char **orig;
	int ret, oargc;

	for (ret = 1; ret < argc && strcmp(argv[ret], "--"); ret++)
		if (!strcmp(argv[ret], "--version")) {
			printf("ps-bench %s\n", psched_version());
			return 0;
		}
	orig = malloc(((size_t)argc + 1) * sizeof(*orig));
	if (!orig || psched_cfg_create(&cfg)) {
		fprintf(stderr, "ps-bench: out of memory\n");
		free(orig);
		return 1;
	}
	ret = psched_cfg_from_env(cfg);
	memcpy(orig, argv, ((size_t)argc + 1) * sizeof(*orig));
	oargc = argc;
	if (!ret)
		ret = psched_cfg_parse_args(cfg, &argc, argv, false);
	if (!ret)
		o.cluster_argv = cluster_flags(orig, oargc, argv, argc);
	free(orig);
	ret = bench_run(&o, cfg, ret, argc, argv);
	psched_cfg_destroy(cfg);
	free(o.cluster_argv);
	return ret;
}
