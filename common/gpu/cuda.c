// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime side of psched (gpu.h): device probe, the copier of the
 * staging pipeline, device memory for tests.  Without PSCHED_HAVE_CUDA
 * every entry point says the library was built without CUDA.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "gpu/gpu.h"

#ifdef PSCHED_HAVE_CUDA
#include <cuda_runtime_api.h>

static pthread_once_t gpu_once = PTHREAD_ONCE_INIT;
static int gpu_count;	  /* devices, once probed */
static char gpu_why[256]; /* why there are none */

static void gpu_probe(void)
{
	cudaError_t e = cudaGetDeviceCount(&gpu_count);

	if (e != cudaSuccess) {
		gpu_count = 0;
		snprintf(gpu_why, sizeof(gpu_why),
			 "no CUDA device: cudaGetDeviceCount: %s (%s)",
			 cudaGetErrorString(e), cudaGetErrorName(e));
		(void)cudaGetLastError();
		psd_warn("cuda: %s; device buffers are refused, host tensors "
			 "unaffected",
			 gpu_why);
		return;
	}
	if (!gpu_count) {
		snprintf(gpu_why, sizeof(gpu_why), "no CUDA device found");
		psd_warn("cuda: %s; device buffers are refused", gpu_why);
		return;
	}
	psd_info("cuda: %d device(s); device buffers are staged through "
		 "pinned host memory",
		 gpu_count);
}

bool psd_gpu_is_built(void)
{
	return true;
}

int psd_gpu_check(int device)
{
	pthread_once(&gpu_once, gpu_probe);
	if (!gpu_count)
		return psd_set_errmsg(-ENODEV, "%s", gpu_why);
	if (device < 0 || device >= gpu_count)
		return psd_set_errmsg(-ENODEV,
				      "CUDA device %d does not exist (%d "
				      "device(s))",
				      device, gpu_count);
	return 0;
}

int psd_gpu_check_ptr(const void *p, int device)
{
	struct cudaPointerAttributes a;
	cudaError_t e;
	int ret = psd_gpu_check(device);

	if (ret)
		return ret;
	e = cudaPointerGetAttributes(&a, p);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return psd_set_errmsg(-EINVAL, "%p is no CUDA memory: %s", p,
				      cudaGetErrorString(e));
	}
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
		return psd_set_errmsg(-EINVAL,
				      "%p is host memory, not memory of CUDA "
				      "device %d",
				      p, device);
	if (a.device != device)
		return psd_set_errmsg(-EINVAL,
				      "%p is memory of CUDA device %d, not %d",
				      p, a.device, device);
	return 0;
}

struct psd_gpu_copier {
	int device;
	unsigned nstreams;
	char msg[256];
	cudaStream_t streams[];
};

static int gpu_fail(struct psd_gpu_copier *c, const char *what, cudaError_t e)
{
	if (c)
		snprintf(c->msg, sizeof(c->msg), "%s: %s", what,
			 cudaGetErrorString(e));
	(void)cudaGetLastError();
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

int psd_gpu_copier_create(int device, unsigned nstreams,
			  struct psd_gpu_copier **out)
{
	struct psd_gpu_copier *c;
	cudaError_t e;
	unsigned i;
	int old = -1, ret = psd_gpu_check(device);

	if (ret)
		return ret;
	c = calloc(1, sizeof(*c) + nstreams * sizeof(c->streams[0]));
	if (!c)
		return -ENOMEM;
	c->device = device;
	/* The caller's current device is put back: it is the app's. */
	if (cudaGetDevice(&old) != cudaSuccess)
		old = -1;
	if ((e = cudaSetDevice(device)) != cudaSuccess) {
		ret = gpu_fail(c, "cudaSetDevice", e);
		goto err;
	}
	for (; c->nstreams < nstreams; c->nstreams++) {
		e = cudaStreamCreateWithFlags(&c->streams[c->nstreams],
					      cudaStreamNonBlocking);
		if (e != cudaSuccess) {
			ret = gpu_fail(c, "cudaStreamCreate", e);
			goto err;
		}
	}
	if (old >= 0)
		cudaSetDevice(old);
	*out = c;
	return 0;
err:
	if (old >= 0)
		cudaSetDevice(old);
	psd_set_errmsg(ret, "CUDA device %d: %s", device, c->msg);
	for (i = 0; i < c->nstreams; i++)
		cudaStreamDestroy(c->streams[i]);
	free(c);
	return ret;
}

void psd_gpu_copier_destroy(struct psd_gpu_copier *c)
{
	unsigned i;

	if (!c)
		return;
	for (i = 0; i < c->nstreams; i++)
		cudaStreamDestroy(c->streams[i]);
	free(c);
}

static int gpu_host_alloc(void *ctx, size_t len, void **out)
{
	struct psd_gpu_copier *c = ctx;
	cudaError_t e;

	/* Portable: pinned for every device, whichever is current. */
	e = cudaHostAlloc(out, len, cudaHostAllocPortable);
	return e == cudaSuccess ? 0 : gpu_fail(c, "cudaHostAlloc", e);
}

static void gpu_host_free(void *ctx, void *p)
{
	(void)ctx;
	cudaFreeHost(p);
}

static int gpu_copy(void *ctx, enum psd_copy_dir dir, int device, void *dst,
		    const void *src, size_t len, unsigned stream)
{
	struct psd_gpu_copier *c = ctx;
	cudaError_t e;

	(void)device; /* unified addressing: the pointers say where */
	e = cudaMemcpyAsync(dst, src, len,
			    dir == PSD_COPY_D2H ? cudaMemcpyDeviceToHost
						: cudaMemcpyHostToDevice,
			    c->streams[stream % c->nstreams]);
	return e == cudaSuccess ? 0 : gpu_fail(c, "cudaMemcpyAsync", e);
}

static int gpu_sync(void *ctx, unsigned stream)
{
	struct psd_gpu_copier *c = ctx;
	cudaError_t e = cudaStreamSynchronize(c->streams[stream % c->nstreams]);

	return e == cudaSuccess ? 0 : gpu_fail(c, "cudaStreamSynchronize", e);
}

static const char *gpu_errmsg(void *ctx)
{
	return ((struct psd_gpu_copier *)ctx)->msg;
}

const struct psd_copy_ops psd_gpu_copy_ops = {
	.host_alloc = gpu_host_alloc,
	.host_free = gpu_host_free,
	.copy = gpu_copy,
	.sync = gpu_sync,
	.errmsg = gpu_errmsg,
};

int psd_gpu_malloc(int device, size_t len, void **out)
{
	cudaError_t e;
	int ret = psd_gpu_check(device);

	if (ret)
		return ret;
	cudaSetDevice(device);
	e = cudaMalloc(out, len);
	if (e != cudaSuccess)
		return psd_set_errmsg(gpu_fail(NULL, "cudaMalloc", e),
				      "cudaMalloc of %zu bytes: %s", len,
				      cudaGetErrorString(e));
	return 0;
}

void psd_gpu_free(void *p)
{
	if (p)
		cudaFree(p);
}

int psd_gpu_memcpy(void *dst, const void *src, size_t len, bool to_device)
{
	cudaError_t e = cudaMemcpy(dst, src, len,
				   to_device ? cudaMemcpyHostToDevice
					     : cudaMemcpyDeviceToHost);

	if (e != cudaSuccess)
		return psd_set_errmsg(gpu_fail(NULL, "cudaMemcpy", e),
				      "cudaMemcpy of %zu bytes: %s", len,
				      cudaGetErrorString(e));
	return 0;
}

/* The server's device buffers for psd_gpu_sum_host(): grown, never
 * allocated per message. */
static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;
static void *sum_dst, *sum_src;
static size_t sum_cap;

int psd_gpu_sum_host(int device, int dtype, void *dst, const void *src,
		     size_t n)
{
	size_t es = dtype == PSCHED_F32 ? 4 : 2;
	int ret = psd_gpu_check(device);

	if (ret)
		return ret;
	if (dtype != PSCHED_F32 && dtype != PSCHED_F16 && dtype != PSD_GPU_BF16)
		return psd_set_errmsg(-EINVAL,
				      "GPU sum: dtype %d is not float32, "
				      "float16 or bfloat16",
				      dtype);
	pthread_mutex_lock(&sum_lock);
	if (n * es > sum_cap) {
		psd_gpu_free(sum_dst);
		psd_gpu_free(sum_src);
		sum_dst = sum_src = NULL;
		sum_cap = 0;
		if ((ret = psd_gpu_malloc(device, n * es, &sum_dst)) ||
		    (ret = psd_gpu_malloc(device, n * es, &sum_src)))
			goto out;
		sum_cap = n * es;
	}
	cudaSetDevice(device);
	if (!(ret = psd_gpu_memcpy(sum_dst, dst, n * es, true)) &&
	    !(ret = psd_gpu_memcpy(sum_src, src, n * es, true)) &&
	    !(ret = psd_gpu_sum_dev(dtype, sum_dst, sum_src, n)))
		ret = psd_gpu_memcpy(dst, sum_dst, n * es, false);
out:
	pthread_mutex_unlock(&sum_lock);
	return ret;
}

#else /* !PSCHED_HAVE_CUDA */

#define GPU_NOT_BUILT                                                          \
	"libpsched was built without CUDA (no nvcc found at build time, or "   \
	"CUDA=0)"

bool psd_gpu_is_built(void)
{
	return false;
}

int psd_gpu_check(int device)
{
	(void)device;
	return psd_set_errmsg(-ENODEV, GPU_NOT_BUILT);
}

int psd_gpu_check_ptr(const void *p, int device)
{
	(void)p;
	return psd_gpu_check(device);
}

int psd_gpu_copier_create(int device, unsigned nstreams,
			  struct psd_gpu_copier **out)
{
	(void)nstreams;
	*out = NULL;
	return psd_gpu_check(device);
}

void psd_gpu_copier_destroy(struct psd_gpu_copier *c)
{
	(void)c;
}

static int gpu_none_alloc(void *ctx, size_t len, void **out)
{
	(void)ctx;
	(void)len;
	*out = NULL;
	return -ENODEV;
}

static void gpu_none_free(void *ctx, void *p)
{
	(void)ctx;
	(void)p;
}

static int gpu_none_copy(void *ctx, enum psd_copy_dir dir, int device,
			 void *dst, const void *src, size_t len,
			 unsigned stream)
{
	(void)ctx, (void)dir, (void)device, (void)dst, (void)src, (void)len,
		(void)stream;
	return -ENODEV;
}

static int gpu_none_sync(void *ctx, unsigned stream)
{
	(void)ctx, (void)stream;
	return -ENODEV;
}

const struct psd_copy_ops psd_gpu_copy_ops = {
	.host_alloc = gpu_none_alloc,
	.host_free = gpu_none_free,
	.copy = gpu_none_copy,
	.sync = gpu_none_sync,
};

int psd_gpu_malloc(int device, size_t len, void **out)
{
	(void)len;
	*out = NULL;
	return psd_gpu_check(device);
}

void psd_gpu_free(void *p)
{
	(void)p;
}

int psd_gpu_memcpy(void *dst, const void *src, size_t len, bool to_device)
{
	(void)dst, (void)src, (void)len, (void)to_device;
	return psd_gpu_check(0);
}

int psd_gpu_sum_dev(int dtype, void *dst, const void *src, size_t n)
{
	(void)dtype, (void)dst, (void)src, (void)n;
	return psd_gpu_check(0);
}

int psd_gpu_sum_host(int device, int dtype, void *dst, const void *src,
		     size_t n)
{
	(void)dtype, (void)dst, (void)src, (void)n;
	return psd_gpu_check(device);
}

#endif

/* Public (psched.h). */
int psched_cuda_check(int device)
{
	return psd_gpu_check(device);
}

int psched_cuda_built(void)
{
	return psd_gpu_is_built();
}
