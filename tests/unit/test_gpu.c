// SPDX-License-Identifier: MIT
/*
 * CUDA support where it cannot run (common/gpu/): whether the library was
 * built with it agrees with the build flags, and with no GPU or driver
 * (as here) every device entry point fails with -ENODEV and a message
 * saying why, nothing crashes, and the knobs are checked.  On a machine
 * with a GPU the no-GPU checks skip; test_gpu_device covers that side.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "gpu/gpu.h"
#include "internal.h"

static void need_no_gpu(void)
{
	if (psched_cuda_check(0) == 0)
		test_skip("a CUDA device is present: the no-GPU path does not "
			  "run here");
}

/* The message a refused device call carries on this machine. */
static void check_reason(const char *msg)
{
#ifdef PSCHED_HAVE_CUDA
	CHECK(strstr(msg, "no CUDA device") != NULL);
	CHECK(strstr(msg, "cudaGetDeviceCount") != NULL);
#else
	CHECK(strstr(msg, "built without CUDA") != NULL);
#endif
}

static void test_built_matches_flags(void)
{
#ifdef PSCHED_HAVE_CUDA
	CHECK_EQ(psched_cuda_built(), 1);
	CHECK(psd_gpu_is_built());
#else
	CHECK_EQ(psched_cuda_built(), 0);
	CHECK(!psd_gpu_is_built());
#endif
}

static void test_check_without_gpu(void)
{
	need_no_gpu();
	CHECK_EQ(psched_cuda_check(0), -ENODEV);
	check_reason(psched_errmsg());
	/* Asked again: same answer (probed once). */
	CHECK_EQ(psched_cuda_check(3), -ENODEV);
	check_reason(psched_errmsg());
}

static void test_entry_points_refuse(void)
{
	struct psd_gpu_copier *c = (struct psd_gpu_copier *)1;
	float a[4] = { 1, 2, 3, 4 }, b[4] = { 1, 1, 1, 1 };
	void *p = (void *)1;

	need_no_gpu();
	CHECK_EQ(psd_gpu_copier_create(0, 2, &c), -ENODEV);
	check_reason(psched_errmsg());
	CHECK_EQ(psd_gpu_malloc(0, 64, &p), -ENODEV);
	CHECK_EQ(psd_gpu_sum_host(0, PSCHED_F32, a, b, 4), -ENODEV);
	check_reason(psched_errmsg());
	CHECK(a[0] == 1 && a[3] == 4); /* untouched */
	CHECK_EQ(psd_gpu_check_ptr(a, 0), -ENODEV);
}

static void test_gpudirect_probe_off(void)
{
	need_no_gpu();
	CHECK(!psd_gpu_direct_usable(0));
	/* Probed once: the reason stays, the answer too. */
	CHECK(!psd_gpu_direct_usable(0));
#if defined(PSCHED_HAVE_CUDA) && defined(PSCHED_HAVE_RDMA)
	check_reason(psd_gpu_direct_why());
#elif defined(PSCHED_HAVE_CUDA)
	CHECK(strstr(psd_gpu_direct_why(), "built without RDMA") != NULL);
#else
	CHECK(strstr(psd_gpu_direct_why(), "built without CUDA") != NULL);
#endif
}

static void test_knobs(void)
{
	struct psched_cfg cfg;

	psd_cfg_defaults(&cfg);
	CHECK_U64(cfg.gpu_stage_bytes, ==, 4u << 20);
	CHECK_EQ(cfg.gpu_stage_bufs, 8);
	CHECK_EQ(cfg.gpu_streams, 2);
	CHECK_EQ(cfg.server_gpu_sum, 0);
	setenv("PS_GPU_STAGE_BYTES", "64K", 1);
	setenv("PS_GPU_STAGE_BUFS", "16", 1);
	setenv("PS_GPU_STREAMS", "4", 1);
	setenv("PS_SERVER_GPU_SUM", "1", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), 0);
	CHECK_U64(cfg.gpu_stage_bytes, ==, 65536);
	CHECK_EQ(cfg.gpu_stage_bufs, 16);
	CHECK_EQ(cfg.gpu_streams, 4);
	CHECK_EQ(cfg.server_gpu_sum, 1);
	setenv("PS_GPU_STAGE_BUFS", "65", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), -EINVAL);
	CHECK(strstr(psched_errmsg(), "PS_GPU_STAGE_BUFS") != NULL);
	setenv("PS_GPU_STAGE_BUFS", "8", 1);
	setenv("PS_GPU_STAGE_BYTES", "100", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), -EINVAL);
	CHECK(strstr(psched_errmsg(), "PS_GPU_STAGE_BYTES") != NULL);
	setenv("PS_GPU_STAGE_BYTES", "4M", 1);
	setenv("PS_GPU_STREAMS", "0", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), -EINVAL);
	CHECK(strstr(psched_errmsg(), "PS_GPU_STREAMS") != NULL);
	unsetenv("PS_GPU_STAGE_BYTES");
	unsetenv("PS_GPU_STAGE_BUFS");
	unsetenv("PS_GPU_STREAMS");
	unsetenv("PS_SERVER_GPU_SUM");
	/* PS_GPU_DIRECT: auto | 0 | 1. */
	psd_cfg_defaults(&cfg);
	CHECK_STR(cfg.gpu_direct, "auto");
	setenv("PS_GPU_DIRECT", "0", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), 0);
	CHECK_STR(cfg.gpu_direct, "0");
	setenv("PS_GPU_DIRECT", "yes", 1);
	CHECK_EQ(psched_cfg_from_env(&cfg), -EINVAL);
	CHECK(strstr(psched_errmsg(), "PS_GPU_DIRECT") != NULL);
	unsetenv("PS_GPU_DIRECT");
}

const struct test_case test_list[] = {
	{ "built matches the build flags", test_built_matches_flags },
	{ "check without a GPU says why", test_check_without_gpu },
	{ "device entry points refuse", test_entry_points_refuse },
	{ "GPUDirect probe off, with the reason", test_gpudirect_probe_off },
	{ "GPU knobs", test_knobs },
	{ NULL, NULL },
};
