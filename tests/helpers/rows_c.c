// SPDX-License-Identifier: MIT
/*
 * Row-sparse keys in a real dist_sync job (tests/integration/
 * test_rows.sh; one copy per worker, every copy knows what every worker
 * pushes, so each checks the whole table independently):
 *  - exact sums over several steps of pushes from every worker, with
 *    duplicate row ids inside one push, an empty push, rows on both
 *    sides of the servers' row boundary; float32, float64, bfloat16;
 *    pulls in sorted, reverse and repeating orders; the last steps
 *    pushes come as sorted, distinct ids (sent from the caller's arrays);
 *    every other step pushes with a pushpull and checks the rows it
 *    answers;
 *  - bad requests refused with a clear error and nothing stored: a row
 *    id out of range, a dense push on the row key, another shape;
 *  - lazy sgd, adagrad and adam on the servers against a reference
 *    written here from the textbook rules (rows not pushed keep their
 *    weights; each row counts its own updates).
 * With the argument "async" (a dist_async job) instead: every worker's
 * pushes of unsorted ids with duplicates (packed, and over shm read by
 * the servers in place) are each added at once; each pushpull of rows
 * only its worker touches answers their running totals; after a barrier
 * every row holds the sum of all of them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "psched/kvstore.h"

#define CHECK_WHO "rows_c rank %d", rank
#include "check.h"
#include "requests.h"

#define R     1000u
#define WIDTH 5u
#define STEPS 4
#define MAXN  64

static int rank = -1;
static int nw;
static struct psched_node *node;
static unsigned tmo = 60000;

/* The rows worker @r pushes at step @s (1-based): ids into @ids, count
 * returned.  Worker 1 pushes nothing at step 2. */
static size_t push_ids(int r, int s, uint64_t *ids)
{
	size_t n = 20 + 5 * (size_t)r, i;

	if (r == 1 && s == 2)
		return 0;
	for (i = 0; i < n; i++)
		ids[i] = ((uint64_t)i * i * 7 + (uint64_t)r * 13 +
			  (uint64_t)s * 31) %
			 R;
	ids[3] = ids[0]; /* duplicates inside one push */
	ids[n - 1] = ids[1];
	ids[5] = R / 2 - 1; /* both sides of the 2-server boundary */
	ids[6] = R / 2;
	ids[7] = R / 2;
	return n;
}

/* Element @j of the row worker @r pushes for id @id at step @s, entry
 * @i: small integers, exact in every dtype here. */
static double push_val(int r, int s, uint64_t id, size_t i, unsigned j)
{
	return (double)(1 + (r + s + (int)(id % 5) + (int)j + (int)i) % 4);
}

static float bf16_to_f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16); /* exact for the small integers used */
}

static void put(enum psched_dtype dt, void *buf, size_t i, double v)
{
	if (dt == PSCHED_F64)
		((double *)buf)[i] = v;
	else if (dt == PSCHED_BF16)
		((uint16_t *)buf)[i] = f_to_bf16((float)v);
	else
		((float *)buf)[i] = (float)v;
}

static double get(enum psched_dtype dt, const void *buf, size_t i)
{
	if (dt == PSCHED_F64)
		return ((const double *)buf)[i];
	if (dt == PSCHED_BF16)
		return bf16_to_f(((const uint16_t *)buf)[i]);
	return ((const float *)buf)[i];
}

static void wait_req(uint64_t req, const char *what)
{
	int ret = psched_wait(node, req, tmo);

	CHECK(!ret, "%s: %s (%s)", what, psched_strerror(ret), psched_errmsg());
}

/* Pull rows @ids and compare every element with @want (R x WIDTH). */
static void pull_check(uint64_t key, enum psched_dtype dt, const uint64_t *ids,
		       size_t n, const double *want, const char *what, int s)
{
	size_t es = psched_dtype_size(dt), i;
	uint8_t *out = malloc(n * WIDTH * es + 1);
	uint64_t req;
	unsigned j;
	int ret;

	CHECK(out, "no memory");
	memset(out, 0xee, n * WIDTH * es);
	ret = rows_pull(node, key, n, ids, out, 1, NULL, NULL, &req);
	CHECK(!ret, "pull: %s", psched_errmsg());
	wait_req(req, what);
	for (i = 0; i < n; i++)
		for (j = 0; j < WIDTH; j++)
			CHECK(get(dt, out, i * WIDTH + j) ==
				      want[ids[i] * WIDTH + j],
			      "%s step %d key %llu row %llu elem %u: got %g "
			      "want %g",
			      what, s, (unsigned long long)key,
			      (unsigned long long)ids[i], j,
			      get(dt, out, i * WIDTH + j),
			      want[ids[i] * WIDTH + j]);
	free(out);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Rewrite the push (@ids, @buf, *@n rows) as sorted, distinct ids with
 * duplicates summed (exact: small integers): psched sends those ids and
 * rows straight from the caller's arrays. */
static void push_sorted(enum psched_dtype dt, uint64_t *ids, uint8_t *buf,
			size_t *n)
{
	static uint64_t u[MAXN];
	static double v[MAXN * WIDTH];
	size_t i, k, nu = 0;
	unsigned j;

	memcpy(u, ids, *n * sizeof(*u));
	qsort(u, *n, sizeof(*u), cmp_u64);
	for (i = 0; i < *n; i++)
		if (!i || u[i] != u[i - 1])
			u[nu++] = u[i];
	memset(v, 0, sizeof(v));
	for (i = 0; i < *n; i++) {
		for (k = 0; u[k] != ids[i]; k++)
			;
		for (j = 0; j < WIDTH; j++)
			v[k * WIDTH + j] += get(dt, buf, i * WIDTH + j);
	}
	for (k = 0; k < nu; k++) {
		ids[k] = u[k];
		for (j = 0; j < WIDTH; j++)
			put(dt, buf, k * WIDTH + j, v[k * WIDTH + j]);
	}
	*n = nu;
}

/* The optimizer run's gradient: entry (@i, @j) of worker @r's push @s of
 * row @id, as the float the worker sends. */
static float grad_val(int r, int s, uint64_t id, size_t i, unsigned j)
{
	return (float)(push_val(r, s, id, i, j) / 8.0 - 0.2);
}

/* Every worker's step-@s pushes summed per row into @sum (R x WIDTH);
 * @hit marks the rows pushed.  @grad: the optimizer run's gradients
 * (grad_val), else the values push_val gives. */
static void step_sums(int s, bool grad, double *sum, bool *hit)
{
	static uint64_t ids[MAXN];
	size_t i, k;
	unsigned j;
	int r;

	memset(sum, 0, R * WIDTH * sizeof(*sum));
	memset(hit, 0, R * sizeof(*hit));
	for (r = 0; r < nw; r++) {
		k = push_ids(r, s, ids);
		for (i = 0; i < k; i++) {
			hit[ids[i]] = true;
			for (j = 0; j < WIDTH; j++)
				sum[ids[i] * WIDTH + j] +=
					grad ? grad_val(r, s, ids[i], i, j)
					     : push_val(r, s, ids[i], i, j);
		}
	}
}

/* The default rule's effect of step @s on @want (R x WIDTH): a row any
 * worker pushed at step @s holds the sum of its step-@s pushes
 * (duplicates included); other rows keep their value. */
static void want_step(int s, double *want)
{
	static double sum[R * WIDTH];
	static bool hit[R];
	size_t i;

	step_sums(s, false, sum, hit);
	for (i = 0; i < R; i++)
		if (hit[i])
			memcpy(want + i * WIDTH, sum + i * WIDTH,
			       WIDTH * sizeof(double));
}

/* Sums, default rule: a row pushed in step s holds the sum of its step-s
 * pushes (duplicates included); other rows keep their value. */
static void run_sums(uint64_t key, enum psched_dtype dt)
{
	static double want[R * WIDTH];
	static uint64_t all[R], rev[R], dup[3 * R], ids[MAXN], mine[MAXN];
	static uint8_t buf[MAXN * WIDTH * 8], pout[MAXN * WIDTH * 8];
	uint64_t req;
	size_t n, i;
	unsigned j;
	int s, ret;
	bool pp;

	ret = psched_row_sparse_init(node, key, R, WIDTH, dt, tmo);
	CHECK(!ret, "init key %llu: %s", (unsigned long long)key,
	      psched_errmsg());
	for (i = 0; i < R; i++) {
		all[i] = i;
		rev[i] = R - 1 - i;
		dup[3 * i] = dup[3 * i + 1] = (i * 17) % R;
		dup[3 * i + 2] = i;
	}
	memset(want, 0, sizeof(want));
	pull_check(key, dt, all, R, want, "initial pull", 0);
	for (s = 1; s <= STEPS; s++) {
		n = push_ids(rank, s, ids);
		for (i = 0; i < n; i++)
			for (j = 0; j < WIDTH; j++)
				put(dt, buf, i * WIDTH + j,
				    push_val(rank, s, ids[i], i, j));
		if (s >= 3) /* the same sums from sorted, distinct ids */
			push_sorted(dt, ids, buf, &n);
		/* Steps 2 and 4 push with a pushpull (duplicate ids, and an
		 * empty one from worker 1, at 2; sorted, distinct ids at 4)
		 * and check the rows it answers. */
		pp = s % 2 == 0;
		memcpy(mine, ids, n * sizeof(*ids));
		memset(pout, 0xee, sizeof(pout));
		if (pp)
			ret = rows_pushpull(node, key, n, ids, buf, pout, s,
					    NULL, NULL, &req);
		else
			ret = rows_push(node, key, n, ids, buf, s, NULL, NULL,
					&req);
		CHECK(!ret, "push step %d: %s", s, psched_errmsg());
		wait_req(req, pp ? "pushpull" : "push");
		want_step(s, want);
		for (i = 0; pp && i < n; i++)
			for (j = 0; j < WIDTH; j++)
				CHECK(get(dt, pout, i * WIDTH + j) ==
					      want[mine[i] * WIDTH + j],
				      "pushpull step %d row %llu elem %u: got "
				      "%g want %g",
				      s, (unsigned long long)mine[i], j,
				      get(dt, pout, i * WIDTH + j),
				      want[mine[i] * WIDTH + j]);
		pull_check(key, dt, all, R, want, "sorted pull", s);
		pull_check(key, dt, rev, R, want, "reverse pull", s);
		pull_check(key, dt, dup, 3 * R, want, "repeating pull", s);
	}
}

/*
 * Steps issued back to back, none waited for before the next: rank 0
 * starts 300 ms late, so the other workers' later steps reach the
 * servers before step 1 is complete and are held there until their step
 * opens (over shm read from the ring, then copied into the held queue,
 * prefix and ids from the server's own copy, rows from the ring).  Every
 * row then holds the sum of the last step that pushed it.
 */
#define AH_STEPS 4

static void run_ahead(uint64_t key)
{
	static double want[R * WIDTH];
	static uint64_t ids[AH_STEPS][MAXN], all[R];
	static float buf[AH_STEPS][MAXN * WIDTH];
	uint64_t req[AH_STEPS];
	size_t n, i;
	unsigned j;
	int s, ret;

	ret = psched_row_sparse_init(node, key, R, WIDTH, PSCHED_F32, tmo);
	CHECK(!ret, "init ahead key: %s", psched_errmsg());
	if (rank == 0)
		usleep(300000);
	for (s = 1; s <= AH_STEPS; s++) {
		n = push_ids(rank, s, ids[s - 1]);
		for (i = 0; i < n; i++)
			for (j = 0; j < WIDTH; j++)
				buf[s - 1][i * WIDTH + j] = (float)push_val(
					rank, s, ids[s - 1][i], i, j);
		ret = rows_push(node, key, n, ids[s - 1], buf[s - 1], 0, NULL,
				NULL, &req[s - 1]);
		CHECK(!ret, "ahead push step %d: %s", s, psched_errmsg());
	}
	for (s = 1; s <= AH_STEPS; s++)
		wait_req(req[s - 1], "ahead push");
	memset(want, 0, sizeof(want));
	for (s = 1; s <= AH_STEPS; s++)
		want_step(s, want);
	for (i = 0; i < R; i++)
		all[i] = i;
	pull_check(key, PSCHED_F32, all, R, want, "ahead pull", AH_STEPS);
}

/* Big batches: the worker's scratch buffers (pairs, packed rows, landing
 * rows) are reused step after step, in other sizes, with a push and a
 * pull in flight together; every pulled element is checked. */
#define BIG_R	  200000u
#define BIG_N(s)  (12000u + 3000u * (unsigned)(s))
#define BIG_STEPS 6

static uint64_t big_id(int r, int s, size_t i)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull +
		     (uint64_t)r * 0xbf58476d1ce4e5b9ull + (uint64_t)s * 977;

	x ^= x >> 29;
	/* a hot head (duplicates) and a long tail (rows on both servers) */
	return i % 3 ? x % 2000 : x % BIG_R;
}

static void run_big(uint64_t key)
{
	static double want[BIG_R * WIDTH], sum[BIG_R * WIDTH];
	static bool hit[BIG_R];
	size_t n = BIG_N(BIG_STEPS), i, k;
	uint64_t *ids = malloc(n * sizeof(*ids)), id, r1, r2;
	float *buf = malloc(n * WIDTH * sizeof(*buf));
	float *out = malloc(n * WIDTH * sizeof(*out));
	unsigned j;
	int s, r, ret;

	CHECK(ids && buf && out, "no memory");
	ret = psched_row_sparse_init(node, key, BIG_R, WIDTH, PSCHED_F32, tmo);
	CHECK(!ret, "init big key: %s", psched_errmsg());
	memset(want, 0, sizeof(want));
	for (s = 1; s <= BIG_STEPS; s++) {
		n = BIG_N(s);
		for (i = 0; i < n; i++) {
			ids[i] = big_id(rank, s, i);
			for (j = 0; j < WIDTH; j++)
				buf[i * WIDTH + j] =
					(float)push_val(rank, s, ids[i], i, j);
		}
		memset(out, 0xee, n * WIDTH * sizeof(*out));
		ret = rows_push(node, key, n, ids, buf, 0, NULL, NULL, &r1);
		CHECK(!ret, "big push step %d: %s", s, psched_errmsg());
		ret = rows_pull(node, key, n, ids, out, 0, NULL, NULL, &r2);
		CHECK(!ret, "big pull step %d: %s", s, psched_errmsg());
		wait_req(r1, "big push");
		wait_req(r2, "big pull");
		memset(sum, 0, sizeof(sum));
		memset(hit, 0, sizeof(hit));
		for (r = 0; r < nw; r++)
			for (i = 0; i < BIG_N(s); i++) {
				id = big_id(r, s, i);
				hit[id] = true;
				for (j = 0; j < WIDTH; j++)
					sum[id * WIDTH + j] +=
						push_val(r, s, id, i, j);
			}
		for (k = 0; k < BIG_R; k++)
			if (hit[k])
				memcpy(want + k * WIDTH, sum + k * WIDTH,
				       WIDTH * sizeof(double));
		for (i = 0; i < n; i++)
			for (j = 0; j < WIDTH; j++)
				CHECK(out[i * WIDTH + j] ==
					      want[ids[i] * WIDTH + j],
				      "big step %d row %llu (entry %zu) elem "
				      "%u: got %g want %g",
				      s, (unsigned long long)ids[i], i, j,
				      out[i * WIDTH + j],
				      want[ids[i] * WIDTH + j]);
	}
	free(ids);
	free(buf);
	free(out);
}

/* Refusals: clear errors, nothing sent, nothing stored. */
static void run_refusals(uint64_t key)
{
	static float row[WIDTH] = { 9, 9, 9, 9, 9 }, out[WIDTH], dense[8];
	uint64_t bad = R, ok = 3, req, len = sizeof(dense);
	const void *vals[1] = { dense };
	int ret;

	ret = rows_push(node, key, 1, &bad, row, 0, NULL, NULL, &req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "out of range"),
	      "out-of-range id: %d %s", ret, psched_errmsg());
	ret = rows_pull(node, key, 1, &bad, out, 0, NULL, NULL, &req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "out of range"),
	      "out-of-range pull id: %d %s", ret, psched_errmsg());
	ret = rows_pushpull(node, key, 1, &bad, row, out, 0, NULL, NULL, &req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "out of range"),
	      "out-of-range pushpull id: %d %s", ret, psched_errmsg());
	ret = rows_pushpull(node, key, 1, &ok, row, NULL, 0, NULL, NULL, &req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "no row buffer"),
	      "pushpull without out: %d %s", ret, psched_errmsg());
	ret = psched_push(node, &key, 1, vals, &len, PSCHED_F32, 0, NULL, NULL,
			  &req);
	CHECK(ret == PSCHED_ESIZE && strstr(psched_errmsg(), "row-sparse"),
	      "dense push on a row key: %d %s", ret, psched_errmsg());
	ret = psched_row_sparse_init(node, key, R, WIDTH + 1, PSCHED_F32, tmo);
	CHECK(ret == PSCHED_ESIZE, "another width accepted: %d %s", ret,
	      psched_errmsg());
	ret = rows_push(node, 999, 1, &ok, row, 0, NULL, NULL, &req);
	CHECK(ret == PSCHED_EUNKNOWNKEY, "unknown key: %d %s", ret,
	      psched_errmsg());
}

/* The reference rules (MXNet's sgd / adagrad / adam, lazy: only rows
 * with a gradient this step, each row with its own update count). */
static void ref_step(const char *opt, double *w, double g, double *s0,
		     double *s1, unsigned t)
{
	const double lr = 0.1, wd = 0.01, eps = 1e-7, b1 = 0.9, b2 = 0.999;

	if (!strcmp(opt, "sgd")) {
		*w = *w - lr * (g + wd * *w);
	} else if (!strcmp(opt, "adagrad")) {
		g = g + wd * *w;
		*s0 = *s0 + g * g;
		*w = *w - lr * g / (sqrt(*s0) + eps);
	} else {
		g = g + wd * *w;
		*s0 = b1 * *s0 + (1 - b1) * g;
		*s1 = b2 * *s1 + (1 - b2) * g * g;
		*w = *w - lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t)) * *s0 /
				  (sqrt(*s1) + 1e-8);
	}
	(void)eps;
}

static void run_optimizer(uint64_t key, const char *opt)
{
	static double w[R * WIDTH], s0[R * WIDTH], s1[R * WIDTH];
	static double g[R * WIDTH];
	static unsigned t[R];
	static bool hit[R];
	static uint64_t all[R], ids[MAXN];
	static float buf[MAXN * WIDTH], out[R * WIDTH];
	struct psched_optimizer o;
	uint64_t req;
	size_t n, i, k;
	unsigned j;
	int s, ret;
	double tol;

	psched_optimizer_init(&o);
	CHECK(!psched_optimizer_defaults(&o, opt), "defaults %s", opt);
	o.learning_rate = 0.1;
	o.wd = 0.01;
	if (!strcmp(opt, "adagrad"))
		o.epsilon = 1e-7;
	if (!strcmp(opt, "adam"))
		o.epsilon = 1e-8;
	ret = rank ? 0 : psched_servers_configure(node, NULL, &o, tmo);
	CHECK(!ret, "configure %s: %s", opt, psched_errmsg());
	ret = psched_barrier(node, PSCHED_GROUP_WORKERS, tmo);
	CHECK(!ret, "barrier");
	ret = psched_row_sparse_init(node, key, R, WIDTH, PSCHED_F32, tmo);
	CHECK(!ret, "init: %s", psched_errmsg());
	memset(w, 0, sizeof(w));
	memset(s0, 0, sizeof(s0));
	memset(s1, 0, sizeof(s1));
	memset(t, 0, sizeof(t));
	for (i = 0; i < R; i++)
		all[i] = i;
	for (s = 1; s <= STEPS; s++) {
		n = push_ids(rank, s, ids);
		for (i = 0; i < n; i++)
			for (j = 0; j < WIDTH; j++)
				buf[i * WIDTH + j] =
					grad_val(rank, s, ids[i], i, j);
		ret = rows_push(node, key, n, ids, buf, 0, NULL, NULL, &req);
		CHECK(!ret, "push: %s", psched_errmsg());
		wait_req(req, "optimizer push");
		step_sums(s, true, g, hit);
		for (i = 0; i < R; i++) {
			if (!hit[i])
				continue;
			t[i]++;
			for (j = 0; j < WIDTH; j++) {
				k = i * WIDTH + j;
				ref_step(opt, &w[k], g[k], &s0[k], &s1[k],
					 t[i]);
				w[k] = (double)(float)w[k];
			}
		}
		ret = rows_pull(node, key, R, all, out, 0, NULL, NULL, &req);
		CHECK(!ret, "pull: %s", psched_errmsg());
		wait_req(req, "optimizer pull");
		for (k = 0; k < R * WIDTH; k++) {
			tol = 1e-5 * (fabs(w[k]) + 1e-3);
			CHECK(fabs(out[k] - w[k]) <= tol,
			      "%s step %d row %zu elem %zu: got %.9g want "
			      "%.9g",
			      opt, s, k / WIDTH, k % WIDTH, out[k], w[k]);
			/* Lazy: a row never pushed stays exactly zero. */
			CHECK(t[k / WIDTH] || out[k] == 0.0f,
			      "%s: untouched row %zu changed to %g", opt,
			      k / WIDTH, out[k]);
		}
	}
}

#define AS_R	 20000u
#define AS_N	 6000u
#define AS_STEPS 5

/* Async: row id of entry @i of worker @r's push @s (duplicates: about a
 * quarter of each push repeats an id). */
static uint64_t as_id(int r, int s, size_t i)
{
	return ((uint64_t)i * 7919u + (uint64_t)r * 31u + (uint64_t)s * 977u) %
	       (AS_N * 3 / 4) * 3 % AS_R;
}

/* Async pushpulls of rows only this worker touches (above every as_id()
 * row): each answer is the row's total of this worker's pushes so far,
 * this one included. */
#define AP_N 1500u
static void run_async_pushpull(uint64_t key)
{
	static double tot[AS_R * WIDTH];
	uint64_t ids[AP_N], req;
	static float vals[AP_N * WIDTH], out[AP_N * WIDTH];
	uint64_t base = AS_R - 2000u * (uint64_t)(rank + 1);
	unsigned j;
	size_t i;
	int t, ret;

	CHECK(base >= AS_N * 3 / 4 * 3,
	      "too many workers for the async pushpulls");
	for (t = 0; t < 4; t++) {
		for (i = 0; i < AP_N; i++) {
			ids[i] = base + (i * 37u + (unsigned)t) % 1200u;
			for (j = 0; j < WIDTH; j++) {
				vals[i * WIDTH + j] =
					(float)((i + j + t) % 5) + 1;
				tot[ids[i] * WIDTH + j] += vals[i * WIDTH + j];
			}
		}
		memset(out, 0xee, sizeof(out));
		ret = rows_pushpull(node, key, AP_N, ids, vals, out, 0, NULL,
				    NULL, &req);
		CHECK(!ret, "async pushpull %d: %s", t, psched_errmsg());
		wait_req(req, "async pushpull");
		for (i = 0; i < AP_N; i++)
			for (j = 0; j < WIDTH; j++)
				CHECK(out[i * WIDTH + j] ==
					      tot[ids[i] * WIDTH + j],
				      "async pushpull %d row %llu elem %u: got "
				      "%g want %g",
				      t, (unsigned long long)ids[i], j,
				      out[i * WIDTH + j],
				      tot[ids[i] * WIDTH + j]);
	}
}

static void run_async(struct psched_kvstore *kv, uint64_t key)
{
	static double want[AS_R * WIDTH];
	uint64_t *ids = malloc((size_t)AS_STEPS * AS_N * sizeof(*ids)), id;
	uint64_t req[AS_STEPS];
	float *buf = malloc((size_t)AS_STEPS * AS_N * WIDTH * sizeof(*buf));
	float *out = malloc(AS_R * WIDTH * sizeof(*out));
	uint64_t *all = malloc(AS_R * sizeof(*all));
	unsigned j;
	size_t i;
	int s, r, ret;

	CHECK(ids && buf && out && all, "no memory");
	ret = psched_row_sparse_init(node, key, AS_R, WIDTH, PSCHED_F32, tmo);
	CHECK(!ret, "init async key: %s", psched_errmsg());
	ret = psched_kvstore_barrier(kv);
	CHECK(!ret, "barrier after init: %s", psched_errmsg());
	for (s = 0; s < AS_STEPS; s++) {
		float *b = buf + (size_t)s * AS_N * WIDTH;
		uint64_t *d = ids + (size_t)s * AS_N;

		for (i = 0; i < AS_N; i++) {
			d[i] = as_id(rank, s, i);
			for (j = 0; j < WIDTH; j++)
				b[i * WIDTH + j] = (float)((i + j + s) % 9) + 1;
		}
		ret = rows_push(node, key, AS_N, d, b, 0, NULL, NULL, &req[s]);
		CHECK(!ret, "async push %d: %s", s, psched_errmsg());
	}
	for (s = 0; s < AS_STEPS; s++)
		wait_req(req[s], "async push");
	run_async_pushpull(key);
	ret = psched_kvstore_barrier(kv);
	CHECK(!ret, "barrier after the pushes: %s", psched_errmsg());
	memset(want, 0, sizeof(want));
	for (r = 0; r < nw; r++)
		for (s = 0; s < AS_STEPS; s++)
			for (i = 0; i < AS_N; i++) {
				id = as_id(r, s, i);
				for (j = 0; j < WIDTH; j++)
					want[id * WIDTH + j] +=
						(double)((i + j + s) % 9) + 1;
			}
	for (i = 0; i < AS_R; i++)
		all[i] = i;
	memset(out, 0xee, AS_R * WIDTH * sizeof(*out));
	ret = rows_pull(node, key, AS_R, all, out, 0, NULL, NULL, &req[0]);
	CHECK(!ret, "async pull: %s", psched_errmsg());
	wait_req(req[0], "async pull");
	for (r = 0; r < nw; r++) /* every worker's pushpulls */
		for (s = 0; s < 4; s++)
			for (i = 0; i < AP_N; i++) {
				id = AS_R - 2000u * (uint64_t)(r + 1) +
				     (i * 37u + (unsigned)s) % 1200u;
				for (j = 0; j < WIDTH; j++)
					want[id * WIDTH + j] +=
						(double)((i + j + s) % 5) + 1;
			}
	for (i = 0; i < AS_R; i++)
		for (j = 0; j < WIDTH; j++)
			CHECK(out[i * WIDTH + j] == want[i * WIDTH + j],
			      "async row %zu elem %u: got %g want %g", i, j,
			      out[i * WIDTH + j], want[i * WIDTH + j]);
	free(ids);
	free(buf);
	free(out);
	free(all);
}

int main(int argc, char **argv)
{
	struct psched_kvstore *kv;
	bool async = argc > 1 && !strcmp(argv[1], "async");
	int ret;

	ret = psched_kvstore_create(async ? "dist_async" : "dist_sync", NULL,
				    &kv);
	if (ret) {
		fprintf(stderr, "rows_c: create: %s\n", psched_errmsg());
		return 1;
	}
	rank = psched_kvstore_rank(kv);
	nw = psched_kvstore_num_workers(kv);
	node = psched_kvstore_node(kv);
	if (getenv("PS_TEST_TIMEOUT_MULT"))
		tmo *= (unsigned)atoi(getenv("PS_TEST_TIMEOUT_MULT"));
	if (async) {
		run_async(kv, 30);
		goto out;
	}
	run_sums(7, PSCHED_F32);
	run_sums(8, PSCHED_F64);
	run_sums(9, PSCHED_BF16);
	run_big(10);
	run_ahead(11);
	run_refusals(7);
	run_optimizer(20, "sgd");
	run_optimizer(21, "adagrad");
	run_optimizer(22, "adam");
out:
	ret = psched_kvstore_destroy(kv);
	CHECK(!ret, "destroy: %s", psched_errmsg());
	printf("rows_c rank %d: ok\n", rank);
	return 0;
}
