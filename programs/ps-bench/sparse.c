// SPDX-License-Identifier: MIT
/*
 * ps-bench --mode sparse: an embedding table of --rows x --width float32
 * rows (row-sparse key, docs/c-api.md); each iteration a
 * worker pushes --batch-rows rows drawn from a zipf(--zipf) distribution
 * (hot rows first, duplicates summed by psched) and gets the same rows
 * back: one row-sparse pushpull, as the baseline's dense pushpull (with
 * --sparse-op push-pull, a push and a row_sparse_pull in flight
 * together).  The baseline, in the same rounds, interleaved
 * (the order alternates round by round): a dense pushpull of one key of
 * the batch's bytes (batch-rows x width x 4).  Goodput counts the batch's
 * bytes once per iteration for both ("logical"), and for the sparse side
 * also the distinct rows actually moved ("wire").
 *
 * Every worker runs the same number of iterations per window (sync steps
 * need all workers' pushes): agreed after the warm-up through a one-float
 * pushpull (the mean of what each worker estimates fits --seconds).
 *
 * Server memory: the dense baseline's key is set up and warmed first;
 * then (launched workers) each prints "MEM 0 0" and waits for the
 * launcher's go, which reads the servers' RSS meanwhile: what they grow
 * by after it is the row tables' memory (the report's "growth").
 */
#include <errno.h>
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"

#include "bench.h"

#define SP_BATCHES 32 /* distinct batches, cycled */
#define SP_ROWKEY  0x5350415253450000ull
#define SP_DENSE   (SP_ROWKEY + 1)
#define SP_AGREE   (SP_ROWKEY + 2)

struct sp {
	struct psched_node *node;
	const struct bopts *o;
	uint64_t *ids[SP_BATCHES];
	size_t uniq[SP_BATCHES]; /* distinct rows per batch */
	float *rows, *out, *dense, *dout;
	uint64_t bytes;	 /* batch bytes */
	uint64_t stored; /* distinct rows over all batches */
};

/* xorshift64*: reproducible per worker. */
static uint64_t sp_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* A zipf(@a) row of @n (continuous inverse-CDF approximation of the
 * discrete law: rank k has weight ~ k^-a; row 0 is the hottest). */
static uint64_t sp_zipf(uint64_t *s, uint64_t n, double a)
{
	double u = (double)(sp_rand(s) >> 11) / 9007199254740992.0, x;

	if (fabs(a - 1.0) < 1e-9)
		x = exp(u * log((double)n + 1));
	else
		x = pow(u * (pow((double)n + 1, 1 - a) - 1) + 1, 1 / (1 - a));
	if (x < 1)
		x = 1;
	return (uint64_t)x - 1 < n ? (uint64_t)x - 1 : n - 1;
}

/* --scatter: rank @k's row under a fixed permutation of @n rows
 * (multiplication by @mul, coprime with @n). */
static uint64_t sp_scatter(uint64_t k, uint64_t n, uint64_t mul)
{
	return (uint64_t)((unsigned __int128)k * mul % n);
}

static uint64_t sp_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static int sp_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Distinct values of sorted @v. */
static size_t sp_distinct(const uint64_t *v, size_t n)
{
	size_t i, d = n ? 1 : 0;

	for (i = 1; i < n; i++)
		d += v[i] != v[i - 1];
	return d;
}

static int sp_alloc(struct sp *p)
{
	const struct bopts *o = p->o;
	uint64_t seed = 0x9e3779b97f4a7c15ull *
			(uint64_t)(psched_node_rank(p->node) + 1);
	size_t b = o->batch_rows, i, j, all_n = (size_t)b * SP_BATCHES;
	uint64_t *all = malloc(all_n * sizeof(*all)), *tmp, id;
	uint64_t mul = 0x9e3779b97f4a7c15ull % o->rows;

	while (o->rows > 1 && (mul < 2 || sp_gcd(mul, o->rows) != 1))
		mul++;

	p->bytes = (uint64_t)b * o->width * sizeof(float);
	p->rows = malloc(p->bytes);
	p->out = malloc(p->bytes);
	p->dense = malloc(p->bytes);
	p->dout = malloc(p->bytes);
	tmp = malloc(b * sizeof(*tmp));
	if (!all || !p->rows || !p->out || !p->dense || !p->dout || !tmp)
		return -ENOMEM;
	for (i = 0; i < b * o->width; i++)
		p->rows[i] = p->dense[i] = 1e-3f * (float)(i % 97);
	for (j = 0; j < SP_BATCHES; j++) {
		p->ids[j] = malloc(b * sizeof(uint64_t));
		if (!p->ids[j])
			return -ENOMEM;
		for (i = 0; i < b; i++) {
			id = sp_zipf(&seed, o->rows, o->zipf);
			if (o->scatter)
				id = sp_scatter(id, o->rows, mul);
			p->ids[j][i] = all[j * b + i] = id;
		}
		memcpy(tmp, p->ids[j], b * sizeof(*tmp));
		qsort(tmp, b, sizeof(*tmp), sp_cmp_u64);
		p->uniq[j] = sp_distinct(tmp, b);
	}
	qsort(all, all_n, sizeof(*all), sp_cmp_u64);
	p->stored = sp_distinct(all, all_n);
	free(all);
	free(tmp);
	return 0;
}

static void sp_free(struct sp *p)
{
	unsigned j;

	for (j = 0; j < SP_BATCHES; j++)
		free(p->ids[j]);
	free(p->rows);
	free(p->out);
	free(p->dense);
	free(p->dout);
}

/* Issue a row-sparse @op of batch @j's rows. */
static int sp_rows(struct sp *p, enum psched_op op, unsigned j, uint64_t *req)
{
	const struct psched_request rq = {
		.op = op,
		.family = PSCHED_FAMILY_ROWS,
		.key = SP_ROWKEY,
		.nrows = p->o->batch_rows,
		.row_ids = p->ids[j],
		.push_buf = op != PSCHED_OP_PULL ? p->rows : NULL,
		.pull_buf = op != PSCHED_OP_PUSH ? p->out : NULL,
	};

	return psched_request(p->node, &rq, req);
}

/* One sparse iteration on batch @j: push and pull of its rows (one
 * pushpull, or with --sparse-op push-pull a push and a pull). */
static int sp_iter_sparse(struct sp *p, unsigned j)
{
	uint64_t r1, r2;
	int ret, ret2;

	if (!p->o->sparse_split) {
		ret = sp_rows(p, PSCHED_OP_PUSHPULL, j, &r1);
		return ret ? ret : psched_wait(p->node, r1, 0);
	}
	ret = sp_rows(p, PSCHED_OP_PUSH, j, &r1);
	if (ret)
		return ret;
	ret = sp_rows(p, PSCHED_OP_PULL, j, &r2);
	if (ret) {
		psched_wait(p->node, r1, 0);
		return ret;
	}
	ret = psched_wait(p->node, r1, 0);
	ret2 = psched_wait(p->node, r2, 0);
	return ret ? ret : ret2;
}

static int sp_iter_dense(struct sp *p)
{
	uint64_t key = SP_DENSE, req;
	const void *in = p->dense;
	void *out = p->dout;
	int ret;

	ret = psched_pushpull(p->node, &key, 1, &in, &out, &p->bytes,
			      PSCHED_F32, 0, NULL, NULL, &req);
	return ret ? ret : psched_wait(p->node, req, 0);
}

static int sp_run(struct sp *p, bool sparse, uint64_t iters, double *el,
		  uint64_t *wire)
{
	double t0 = bench_now_s();
	uint64_t it;
	int ret = 0;

	*wire = 0;
	for (it = 0; it < iters && !ret; it++) {
		ret = sparse ? sp_iter_sparse(p, (unsigned)(it % SP_BATCHES))
			     : sp_iter_dense(p);
		if (sparse)
			*wire += p->uniq[it % SP_BATCHES];
	}
	*el = bench_now_s() - t0;
	return ret;
}

/* Iterations per window every worker runs: the mean of their guesses. */
static int sp_agree(struct sp *p, double t_iter, uint64_t *iters)
{
	float mine = (float)(p->o->seconds / (t_iter > 1e-6 ? t_iter : 1e-6)),
	      sum = 0;
	uint64_t key = SP_AGREE, len = sizeof(float), req;
	const void *in = &mine;
	void *out = &sum;
	int ret;

	ret = psched_pushpull(p->node, &key, 1, &in, &out, &len, PSCHED_F32, 0,
			      NULL, NULL, &req);
	if (!ret)
		ret = psched_wait(p->node, req, 0);
	*iters = (uint64_t)(sum / (float)psched_num_workers(p->node));
	if (*iters < 3)
		*iters = 3;
	return ret;
}

/* Launched: tell the launcher no row is stored yet, wait for its go. */
static int sp_mem_mark(const struct bopts *o)
{
	ssize_t n;
	char c;

	if (!o->sync)
		return 0;
	printf("MEM 0 0\n");
	fflush(stdout);
	do
		n = read(STDIN_FILENO, &c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -EPIPE;
}

static int sp_setup(struct sp *p, uint64_t *sp_iters, uint64_t *dn_iters)
{
	uint64_t len = sizeof(float), wire;
	uint64_t key = SP_AGREE, dkey = SP_DENSE;
	double el;
	int ret;

	ret = psched_keys_init(p->node, &dkey, 1, NULL, &p->bytes, PSCHED_F32,
			       0);
	if (!ret)
		ret = psched_keys_init(p->node, &key, 1, NULL, &len, PSCHED_F32,
				       0);
	/* Warm-up of the dense baseline and the time of one iteration;
	 * then the servers' memory before any row; then the rows' warm-up
	 * (every batch once, so the table holds its rows) and its time. */
	if (!ret)
		ret = sp_run(p, false, 4, &el, &wire);
	if (!ret)
		ret = sp_agree(p, el / 4, dn_iters);
	if (!ret)
		ret = psched_barrier(p->node, PSCHED_GROUP_WORKERS, 0);
	if (!ret)
		ret = sp_mem_mark(p->o);
	if (!ret)
		ret = psched_row_sparse_init(p->node, SP_ROWKEY, p->o->rows,
					     p->o->width, PSCHED_F32, 0);
	if (!ret)
		ret = sp_run(p, true, SP_BATCHES, &el, &wire);
	if (!ret)
		ret = sp_agree(p, el / SP_BATCHES, sp_iters);
	return ret;
}

int bench_sparse_worker(struct psched_node *node, const struct bopts *o)
{
	struct sp p = { .node = node, .o = o };
	uint64_t spi = 0, dni = 0, wire = 0, dwire;
	double el_s = 0, el_d = 0, lg, wg, dg;
	unsigned r;
	int ret;

	ret = sp_alloc(&p);
	if (!ret)
		ret = sp_setup(&p, &spi, &dni);
	for (r = 0; r < o->runs && !ret; r++) {
		ret = bench_sync_wait(o, 0, r);
		if (!ret)
			ret = psched_barrier(node, PSCHED_GROUP_WORKERS, 0);
		/* Interleaved: the order alternates round by round. */
		if (!ret && r % 2)
			ret = sp_run(&p, false, dni, &el_d, &dwire);
		if (!ret)
			ret = sp_run(&p, true, spi, &el_s, &wire);
		if (!ret && !(r % 2))
			ret = sp_run(&p, false, dni, &el_d, &dwire);
		if (ret)
			break;
		lg = (double)spi * p.bytes * 8 / el_s / 1e9;
		wg = (double)wire * o->width * 4 * 8 / el_s / 1e9;
		dg = (double)dni * p.bytes * 8 / el_d / 1e9;
		printf("SPARSE %u %.6f %.6f %.6f %llu %llu\n", r, lg, wg, dg,
		       (unsigned long long)p.stored, (unsigned long long)spi);
		if (o->sync)
			printf("DONE 0 %u %.6f\n", r, lg);
		fflush(stdout);
	}
	if (ret)
		fprintf(stderr, "ps-bench worker %d: sparse: %s\n",
			psched_node_rank(node), psched_errmsg());
	sp_free(&p);
	return ret ? 1 : 0;
}

void bench_sparse_fold(const char *line, struct bresult *res)
{
	unsigned long long stored, iters;
	double lg, wg, dg;
	unsigned r;

	if (sscanf(line, "SPARSE %u %lf %lf %lf %llu %llu", &r, &lg, &wg, &dg,
		   &stored, &iters) != 6 ||
	    r >= MAX_RUNS)
		return;
	/* The DONE line carries the logical goodput (good_r). */
	res->dense_r[r] += dg; /* summed over workers */
	res->wire_r[r] += wg;
	if (stored > res->stored)
		res->stored = stored;
	res->iters += iters;
}

void bench_sparse_report(const struct bopts *o, const struct bresult *res,
			 double rss_mib_total, double rss_mib_before,
			 double noshm_growth_mib)
{
	double lg[MAX_RUNS], wg[MAX_RUNS], dg[MAX_RUNS], rl[MAX_RUNS],
		rw[MAX_RUNS];
	double stored_mib;
	unsigned r, n = o->runs;

	for (r = 0; r < n; r++) {
		lg[r] = res->good_r[r];
		wg[r] = res->wire_r[r];
		dg[r] = res->dense_r[r];
		rl[r] = dg[r] > 0 ? lg[r] / dg[r] : 0;
		rw[r] = dg[r] > 0 ? wg[r] / dg[r] : 0;
	}
	/* Rows stored: the most distinct rows one worker pushed (exact with
	 * 1 worker; with more, a lower bound of their union). */
	stored_mib = (double)res->stored * o->width * 4 / (1 << 20);
	printf("# sparse: table %llu x %u float32 (%.1f MiB dense), batch %u "
	       "rows zipf(%.2f)%s, %u servers, %u workers; dense baseline: "
	       "pushpull of one %llu-byte key\n",
	       (unsigned long long)o->rows, o->width,
	       (double)o->rows * o->width * 4 / (1 << 20), o->batch_rows,
	       o->zipf, o->scatter ? " scattered" : " hottest first",
	       o->servers, o->workers,
	       (unsigned long long)o->batch_rows * o->width * 4);
	printf("%-12s %14s %14s %14s %10s %10s\n", "#round", "sparse[Gb/s]",
	       "wire[Gb/s]", "dense[Gb/s]", "ratio", "wire/dense");
	for (r = 0; r < n; r++)
		printf("%-12u %14.3f %14.3f %14.3f %10.3f %10.3f\n", r, lg[r],
		       wg[r], dg[r], rl[r], rw[r]);
	printf("%-12s %14.3f %14.3f %14.3f %10.3f %10.3f\n", "median",
	       bench_median(lg, n), bench_median(wg, n), bench_median(dg, n),
	       bench_median(rl, n), bench_median(rw, n));
	printf("# servers' peak RSS, all servers together: %.1f MiB; rows "
	       "pushed (distinct, one worker's batches): %.1f MiB; "
	       "RSS / rows = %.2f\n",
	       rss_mib_total, stored_mib,
	       stored_mib > 0 ? rss_mib_total / stored_mib : 0);
	if (rss_mib_before > 0)
		printf("# servers' RSS before the first row (dense baseline "
		       "warmed): %.1f MiB; growth to the peak: %.1f MiB; "
		       "growth / rows = %.2f\n",
		       rss_mib_before, rss_mib_total - rss_mib_before,
		       stored_mib > 0
			       ? (rss_mib_total - rss_mib_before) / stored_mib
			       : 0);
	/* The shm transport's rings (2 MiB each way per connection) are
	 * touched as they cycle: memory of the transport, not of rows. */
	if (rss_mib_before > 0)
		printf("# growth without RssShmem (the shm transport's rings), "
		       "sampled at each round's start: %.1f MiB; / rows = "
		       "%.2f\n",
		       noshm_growth_mib,
		       stored_mib > 0 ? noshm_growth_mib / stored_mib : 0);
}
