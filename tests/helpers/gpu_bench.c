// SPDX-License-Identifier: MIT
/*
 * GPU figures for tests/gpu/gpu-check.sh.  Each mode needs a CUDA device
 * and exits 77 saying why without one; each prints one line of
 * "name=value" fields.
 *
 *   gpu_bench copy MIB        pinned host<->device copy bandwidth through
 *                             the staging copier (the limit of staging)
 *   gpu_bench sum MIB         the sum kernel on device memory against a
 *                             CPU loop on host memory, float32; then the
 *                             largest difference between the GPU and CPU
 *                             sums of float32, float16 and bfloat16
 *   gpu_bench net OP MIB N R  a worker of a running 1-worker cluster: R
 *                             interleaved rounds of N OPs (push, pull or
 *                             pushpull) of one MIB key from host memory,
 *                             then of another from device memory; the
 *                             medians of both and their ratio
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "psched.h"
#include "gpu/gpu.h"
#include "updater.h"

#define CHECK_WHO "gpu_bench"
#include "check.h"
#include "requests.h"

#define MIB	   (1024.0 * 1024.0)
#define ROUNDS_MAX 32

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int need_gpu(void)
{
	if (!psched_cuda_check(0))
		return 0;
	printf("skip: %s\n", psched_errmsg());
	return 77;
}

/* GB/s of @reps copies of @len bytes in direction @dir, one stream. */
static double copy_rate(struct psd_gpu_copier *c, enum psd_copy_dir dir,
			void *dst, const void *src, size_t len, int reps)
{
	double t0 = now();
	int i;

	for (i = 0; i < reps; i++)
		CHECK(!psd_gpu_copy_ops.copy(c, dir, 0, dst, src, len, 0) &&
			      !psd_gpu_copy_ops.sync(c, 0),
		      "copy: %s", psd_gpu_copy_ops.errmsg(c));
	return (double)len * reps / (now() - t0) / 1e9;
}

static int run_copy(size_t len)
{
	struct psd_gpu_copier *c;
	double h2d[5], d2h[5];
	void *host, *dev;
	int r;

	if (need_gpu())
		return 77;
	CHECK(!psd_gpu_copier_create(0, 1, &c), "copier: %s", psched_errmsg());
	CHECK(!psd_gpu_copy_ops.host_alloc(c, len, &host), "cudaHostAlloc: %s",
	      psd_gpu_copy_ops.errmsg(c));
	CHECK(!psd_gpu_malloc(0, len, &dev), "%s", psched_errmsg());
	memset(host, 1, len);
	copy_rate(c, PSD_COPY_H2D, dev, host, len, 1); /* warm-up */
	for (r = 0; r < 5; r++) {
		h2d[r] = copy_rate(c, PSD_COPY_H2D, dev, host, len, 4);
		d2h[r] = copy_rate(c, PSD_COPY_D2H, host, dev, len, 4);
	}
	printf("copy mib=%.0f h2d_GBps=%.2f d2h_GBps=%.2f\n", len / MIB,
	       median(h2d, 5), median(d2h, 5));
	psd_gpu_free(dev);
	psd_gpu_copy_ops.host_free(c, host);
	psd_gpu_copier_destroy(c);
	return 0;
}

/* The CPU's float32 sum, what a server does without PS_SERVER_GPU_SUM. */
static void cpu_sum(float *dst, const float *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] += src[i];
}

/* Largest |gpu - cpu| over @n sums of @dtype (2-byte types as raw). */
static double sum_diff(int dtype, size_t n)
{
	size_t es = dtype == PSCHED_F32 ? 4 : 2, i;
	uint8_t *a = malloc(n * es), *b = malloc(n * es), *ref = malloc(n * es);
	double worst = 0, x, y;

	CHECK(a && b && ref, "no memory");
	for (i = 0; i < n; i++) {
		float fa = (float)sin((double)i) * 100.0f;
		float fb = (float)cos((double)i * 0.7) * 3.0f;

		if (dtype == PSCHED_F32) {
			((float *)a)[i] = fa, ((float *)b)[i] = fb;
		} else if (dtype == PSCHED_F16) {
			((uint16_t *)a)[i] = psd_f32_to_f16(fa);
			((uint16_t *)b)[i] = psd_f32_to_f16(fb);
		} else {
			((uint16_t *)a)[i] = psd_f32_to_bf16(fa);
			((uint16_t *)b)[i] = psd_f32_to_bf16(fb);
		}
	}
	memcpy(ref, a, n * es);
	if (dtype == PSCHED_F32)
		cpu_sum((float *)ref, (const float *)b, n);
	else if (dtype == PSCHED_F16)
		psd_f16_add((uint16_t *)ref, (const uint16_t *)b, n);
	else
		psd_bf16_add((uint16_t *)ref, (const uint16_t *)b, n);
	CHECK(!psd_gpu_sum_host(0, dtype, a, b, n), "%s", psched_errmsg());
	for (i = 0; i < n; i++) {
		if (dtype == PSCHED_F32)
			x = ((float *)a)[i], y = ((float *)ref)[i];
		else if (dtype == PSCHED_F16)
			x = psd_f16_to_f32(((uint16_t *)a)[i]),
			y = psd_f16_to_f32(((uint16_t *)ref)[i]);
		else
			x = psd_bf16_to_f32(((uint16_t *)a)[i]),
			y = psd_bf16_to_f32(((uint16_t *)ref)[i]);
		if (fabs(x - y) > worst)
			worst = fabs(x - y);
	}
	free(a), free(b), free(ref);
	return worst;
}

static int run_sum(size_t len)
{
	size_t n = len / 4;
	float *a = malloc(len), *b = malloc(len);
	double g[5], c[5], t0;
	void *da, *db;
	int r;

	if (need_gpu())
		return 77;
	CHECK(a && b, "no memory");
	memset(a, 0, len), memset(b, 0, len);
	CHECK(!psd_gpu_malloc(0, len, &da) && !psd_gpu_malloc(0, len, &db),
	      "%s", psched_errmsg());
	CHECK(!psd_gpu_memcpy(da, a, len, true) &&
		      !psd_gpu_memcpy(db, b, len, true),
	      "%s", psched_errmsg());
	CHECK(!psd_gpu_sum_dev(PSCHED_F32, da, db, n), "%s", psched_errmsg());
	cpu_sum(a, b, n); /* warm both */
	for (r = 0; r < 5; r++) {
		t0 = now();
		CHECK(!psd_gpu_sum_dev(PSCHED_F32, da, db, n), "%s",
		      psched_errmsg());
		g[r] = (double)len / (now() - t0) / 1e9;
		t0 = now();
		cpu_sum(a, b, n);
		c[r] = (double)len / (now() - t0) / 1e9;
	}
	printf("sum mib=%.0f gpu_GBps=%.2f cpu_GBps=%.2f ratio=%.1f "
	       "maxdiff_f32=%g maxdiff_f16=%g maxdiff_bf16=%g\n",
	       len / MIB, median(g, 5), median(c, 5),
	       median(g, 5) / median(c, 5), sum_diff(PSCHED_F32, 1000003),
	       sum_diff(PSCHED_F16, 1000003), sum_diff(PSCHED_BF16, 1000003));
	psd_gpu_free(da), psd_gpu_free(db);
	free(a), free(b);
	return 0;
}

static enum psched_op op_of(const char *s)
{
	if (!strcmp(s, "push"))
		return PSCHED_OP_PUSH;
	if (!strcmp(s, "pull"))
		return PSCHED_OP_PULL;
	CHECK(!strcmp(s, "pushpull"), "op %s: push, pull or pushpull", s);
	return PSCHED_OP_PUSHPULL;
}

/* Seconds of @steps @op requests of @key (@len bytes at @in and @out,
 * device memory when @dev). */
static double net_round(struct psched_node *n, enum psched_op op, uint64_t key,
			void *in, void *out, uint64_t len, bool dev, int steps)
{
	const void *pv = in;
	double t0 = now();
	uint64_t req;
	int s, ret;

	for (s = 0; s < steps; s++) {
		const struct psched_request rq = {
			.op = op,
			.keys = &key,
			.nkeys = 1,
			.lens = &len,
			.push_vals = RQ_PUSH(op, &pv),
			.pull_vals = RQ_PULL(op, &out),
			.dtype = PSCHED_F32,
			.on_device = dev,
			.device = 0,
		};

		ret = psched_request(n, &rq, &req);
		CHECK(!ret, "%s key %llu step %d: %s", dev ? "device" : "host",
		      (unsigned long long)key, s, psched_errmsg());
		CHECK(!psched_wait(n, req, 0), "wait key %llu step %d: %s",
		      (unsigned long long)key, s, psched_errmsg());
	}
	return now() - t0;
}

static int run_net(struct psched_node *n, enum psched_op op, size_t len,
		   int steps, int rounds)
{
	double h[ROUNDS_MAX], d[ROUNDS_MAX], hm, dm;
	void *hin = calloc(1, len), *hout = calloc(1, len), *din, *dout;
	int r;

	CHECK(hin && hout, "no memory");
	CHECK(!psd_gpu_malloc(0, len, &din) && !psd_gpu_malloc(0, len, &dout),
	      "%s", psched_errmsg());
	CHECK(!psd_gpu_memcpy(din, hin, len, true), "%s", psched_errmsg());
	net_round(n, op, 1, hin, hout, len, false, 1); /* warm-up */
	net_round(n, op, 2, din, dout, len, true, 1);
	for (r = 0; r < rounds; r++) {
		h[r] = (double)len * steps /
		       net_round(n, op, 1, hin, hout, len, false, steps) / MIB;
		d[r] = (double)len * steps /
		       net_round(n, op, 2, din, dout, len, true, steps) / MIB;
	}
	hm = median(h, rounds), dm = median(d, rounds);
	printf("net op=%s mib=%.0f host_MiBps=%.0f device_MiBps=%.0f "
	       "ratio=%.3f\n",
	       op == PSCHED_OP_PUSH   ? "push"
	       : op == PSCHED_OP_PULL ? "pull"
				      : "pushpull",
	       len / MIB, hm, dm, dm / hm);
	psd_gpu_free(din), psd_gpu_free(dout);
	free(hin), free(hout);
	return 0;
}

static int net_main(char **argv)
{
	enum psched_op op = op_of(argv[0]);
	size_t len = (size_t)atoi(argv[1]) << 20;
	int steps = atoi(argv[2]), rounds = atoi(argv[3]), rc;
	struct psched_cfg *cfg = NULL;
	struct psched_node *n;

	CHECK(len > 0 && steps > 0 && rounds > 0 && rounds <= ROUNDS_MAX,
	      "net OP MIB STEPS ROUNDS (ROUNDS <= %d)", ROUNDS_MAX);
	if (need_gpu())
		return 77;
	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	CHECK(!psched_node_create(cfg, &n), "create: %s", psched_errmsg());
	psched_cfg_destroy(cfg);
	rc = run_net(n, op, len, steps, rounds);
	CHECK(!psched_node_destroy(n), "destroy: %s", psched_errmsg());
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "copy"))
		return run_copy((size_t)atoi(argv[2]) << 20);
	if (argc == 3 && !strcmp(argv[1], "sum"))
		return run_sum((size_t)atoi(argv[2]) << 20);
	if (argc == 6 && !strcmp(argv[1], "net"))
		return net_main(argv + 2);
	fprintf(stderr, "usage: gpu_bench copy MIB | sum MIB | "
			"net push|pull|pushpull MIB STEPS ROUNDS\n");
	return 2;
}
