// SPDX-License-Identifier: MIT
/*
 * GPUDirect RDMA probe (gpu.h): can the NIC read and write GPU memory
 * directly, so device buffers skip the pinned staging copy?  Needs the
 * peer-memory kernel module (nvidia_peermem, or the older nv_peer_mem) and
 * an ibv_reg_mr() of device memory that succeeds.  Probed once per process,
 * the outcome logged once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "gpu/gpu.h"

#if defined(PSCHED_HAVE_RDMA) && defined(PSCHED_HAVE_CUDA)
#include <infiniband/verbs.h>
#endif

static pthread_mutex_t gdr_lock = PTHREAD_MUTEX_INITIALIZER;
static bool gdr_done;
static bool gdr_ok;
static char gdr_why[256];

#if defined(PSCHED_HAVE_RDMA) && defined(PSCHED_HAVE_CUDA)
static bool gdr_module_loaded(void)
{
	return access("/sys/module/nvidia_peermem", F_OK) == 0 ||
	       access("/sys/module/nv_peer_mem", F_OK) == 0;
}

/* Register @len bytes of device memory on the first RDMA device. */
static bool gdr_try_reg(int device)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr = NULL;
	const size_t len = 1u << 16;
	void *buf = NULL;
	int n = 0, ret;

	list = ibv_get_device_list(&n);
	if (!list || !n) {
		snprintf(gdr_why, sizeof(gdr_why), "no RDMA device");
		goto out;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		snprintf(gdr_why, sizeof(gdr_why), "cannot open RDMA device %s",
			 ibv_get_device_name(list[0]));
		goto out;
	}
	ret = psd_gpu_malloc(device, len, &buf);
	if (ret) {
		snprintf(gdr_why, sizeof(gdr_why), "%s", psched_errmsg());
		goto out;
	}
	mr = ibv_reg_mr(pd, buf, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		snprintf(gdr_why, sizeof(gdr_why),
			 "ibv_reg_mr of CUDA device %d memory on %s failed: %s",
			 device, ibv_get_device_name(list[0]), strerror(errno));
	else
		snprintf(gdr_why, sizeof(gdr_why),
			 "GPUDirect RDMA: CUDA device %d memory registered on "
			 "%s",
			 device, ibv_get_device_name(list[0]));
out:
	if (mr)
		ibv_dereg_mr(mr);
	psd_gpu_free(buf);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	if (list)
		ibv_free_device_list(list);
	return mr != NULL;
}
#endif

bool psd_gpu_direct_usable(int device)
{
	bool ok;

	pthread_mutex_lock(&gdr_lock);
	if (!gdr_done) {
		gdr_done = true;
#if defined(PSCHED_HAVE_RDMA) && defined(PSCHED_HAVE_CUDA)
		if (psd_gpu_check(device))
			snprintf(gdr_why, sizeof(gdr_why), "%s",
				 psched_errmsg());
		else if (!gdr_module_loaded())
			snprintf(
				gdr_why, sizeof(gdr_why),
				"peer-memory module nvidia_peermem not loaded");
		else
			gdr_ok = gdr_try_reg(device);
#else
		(void)device;
		snprintf(gdr_why, sizeof(gdr_why), "built without %s",
			 psd_gpu_is_built() ? "RDMA" : "CUDA");
#endif
		psd_info("gpudirect: %s; %s", gdr_ok ? "on" : "off", gdr_why);
	}
	ok = gdr_ok;
	pthread_mutex_unlock(&gdr_lock);
	return ok;
}

const char *psd_gpu_direct_why(void)
{
	return gdr_why;
}
