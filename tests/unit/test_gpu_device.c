// SPDX-License-Identifier: MIT
/*
 * GPU tests: they need a CUDA device and skip (exit 77, saying why)
 * without one.  The staging pipeline with the real CUDA copier (pinned
 * cudaHostAlloc pool, cudaMemcpyAsync on streams); the server's sum kernel
 * against the CPU sum for float32, float16 and bfloat16; the GPUDirect
 * RDMA probe's answer against what the machine has.  The device pull ==
 * host pull check over a real cluster is tests/integration/test_gpu_pull.sh.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "gpu/gpu.h"
#include "internal.h"
#include "updater.h"

static char why[300];

static void need_gpu(void)
{
	if (psched_cuda_check(0)) {
		snprintf(why, sizeof(why), "%s", psched_errmsg());
		test_skip(why);
	}
}

static void test_real_copier_pipeline(void)
{
	const size_t chunk = 3 << 20, nchunk = 6, len = chunk * nchunk;
	uint8_t *host, *wire;
	struct psd_gpu_copier *c;
	struct psd_stage_stats st;
	struct psd_stage_buf b;
	struct psd_stage s;
	void *dev;
	size_t i;

	need_gpu();
	host = malloc(len);
	wire = malloc(len);
	CHECK(host && wire);
	for (i = 0; i < len; i++)
		host[i] = (uint8_t)(i * 31 + (i >> 12));
	CHECK_EQ(psd_gpu_malloc(0, len, &dev), 0);
	CHECK_EQ(psd_gpu_memcpy(dev, host, len, true), 0);
	CHECK_EQ(psd_gpu_copier_create(0, 2, &c), 0);
	CHECK_EQ(psd_stage_init(&s, &psd_gpu_copy_ops, c, 1 << 20, 8, 2), 0);
	for (i = 0; i < nchunk; i++) {
		CHECK_EQ(psd_stage_push_take(&s, i, 0,
					     (uint8_t *)dev + i * chunk, chunk,
					     10000, &b),
			 0);
		if (i + 1 < nchunk)
			CHECK(psd_stage_push_ahead(
				&s, i + 1, 0, (uint8_t *)dev + (i + 1) * chunk,
				chunk));
		memcpy(wire + i * chunk, b.host, chunk);
		psd_stage_put(&s, &b);
	}
	CHECK(memcmp(host, wire, len) == 0);
	psd_stage_stats(&s, &st);
	CHECK_U64(st.ahead_hits, ==, nchunk - 1);
	/* Pull side: pinned slots to device, then back to compare. */
	CHECK_EQ(psd_stage_get(&s, chunk, &b), 0);
	memset(b.host, 0x3c, chunk);
	CHECK_EQ(psd_stage_h2d(&s, 0, dev, b.host, chunk), 0);
	psd_stage_put(&s, &b);
	CHECK_EQ(psd_gpu_memcpy(wire, dev, chunk, false), 0);
	for (i = 0; i < chunk; i++)
		CHECK_EQ(wire[i], 0x3c);
	psd_stage_fini(&s);
	psd_gpu_copier_destroy(c);
	psd_gpu_free(dev);
	free(host);
	free(wire);
}

static uint16_t bf16_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float f32_of_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static void test_sum_kernel_vs_cpu(void)
{
	const size_t n = 1000003; /* not a multiple of the block size */
	float *a, *b, *ref;
	uint16_t *h, *hb, *href;
	size_t i;

	need_gpu();
	a = malloc(n * 4), b = malloc(n * 4), ref = malloc(n * 4);
	h = malloc(n * 2), hb = malloc(n * 2), href = malloc(n * 2);
	CHECK(a && b && ref && h && hb && href);
	for (i = 0; i < n; i++) {
		a[i] = (float)((int)(i % 2001) - 1000) / 8.0f;
		b[i] = (float)((int)(i % 777)) / 16.0f;
		ref[i] = a[i] + b[i];
	}
	CHECK_EQ(psd_gpu_sum_host(0, PSCHED_F32, a, b, n), 0);
	CHECK(memcmp(a, ref, n * 4) == 0);

	for (i = 0; i < n; i++) {
		h[i] = psd_f32_to_f16((float)(i % 1500) / 3.0f);
		hb[i] = psd_f32_to_f16((float)(i % 333) / 7.0f);
	}
	memcpy(href, h, n * 2);
	psd_f16_add(href, hb, n); /* the server's CPU sum */
	CHECK_EQ(psd_gpu_sum_host(0, PSCHED_F16, h, hb, n), 0);
	CHECK(memcmp(h, href, n * 2) == 0);

	for (i = 0; i < n; i++) {
		h[i] = bf16_of((float)(i % 1500) / 3.0f);
		hb[i] = bf16_of((float)(i % 333) / 7.0f);
		href[i] = bf16_of(f32_of_bf16(h[i]) + f32_of_bf16(hb[i]));
	}
	CHECK_EQ(psd_gpu_sum_host(0, PSD_GPU_BF16, h, hb, n), 0);
	CHECK(memcmp(h, href, n * 2) == 0);

	CHECK_EQ(psd_gpu_sum_host(0, PSCHED_F64, a, b, 4), -EINVAL);
	CHECK(strstr(psched_errmsg(), "not float32") != NULL);
	free(a), free(b), free(ref), free(h), free(hb), free(href);
}

static void test_gpudirect_probe(void)
{
	bool loaded = access("/sys/module/nvidia_peermem", F_OK) == 0 ||
		      access("/sys/module/nv_peer_mem", F_OK) == 0;
	bool ok;

	need_gpu();
	ok = psd_gpu_direct_usable(0);
	CHECK(*psd_gpu_direct_why());
#ifdef PSCHED_HAVE_RDMA
	if (!loaded) {
		CHECK(!ok);
		CHECK(strstr(psd_gpu_direct_why(), "nvidia_peermem") != NULL);
	} else if (ok) {
		CHECK(strstr(psd_gpu_direct_why(), "registered") != NULL);
	} else {
		CHECK(strstr(psd_gpu_direct_why(), "RDMA") != NULL ||
		      strstr(psd_gpu_direct_why(), "ibv_reg_mr") != NULL);
	}
#else
	(void)loaded;
	CHECK(!ok);
	CHECK(strstr(psd_gpu_direct_why(), "built without RDMA") != NULL);
#endif
	CHECK(psd_gpu_direct_usable(0) == ok); /* probed once */
}

const struct test_case test_list[] = {
	{ "staging pipeline with the CUDA copier", test_real_copier_pipeline },
	{ "sum kernel vs CPU sum (f32, f16, bf16)", test_sum_kernel_vs_cpu },
	{ "GPUDirect RDMA probe", test_gpudirect_probe },
	{ NULL, NULL },
};
