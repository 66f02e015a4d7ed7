/* SPDX-License-Identifier: MIT */
/*
 * CUDA in psched: whether it is built and usable, the CUDA copier of the
 * staging pipeline (stage.h), the server's sum kernel (sum.cu) and the
 * GPUDirect RDMA probe.  Built with nvcc present (PSCHED_HAVE_CUDA, the
 * CUDA runtime linked statically, so libpsched never needs libcudart.so);
 * without it every function here reports "built without CUDA".  On a
 * machine without a GPU or driver the first psd_gpu_check() logs one line
 * and device buffers are refused; host tensors never touch this module.
 */
#ifndef PSCHED_COMMON_GPU_GPU_H
#define PSCHED_COMMON_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "psched.h"
#include "gpu/stage.h"

/* libpsched was compiled with CUDA. */
bool psd_gpu_is_built(void);
/* 0 if CUDA device @device can be used; -ENODEV (no CUDA in this build,
 * no driver, no device, @device out of range) or -EINVAL, with
 * psd_set_errmsg() saying which.  Probes once per process and logs the
 * outcome once. */
int psd_gpu_check(int device);
/* 0 if @p is memory of CUDA device @device (a device or managed
 * allocation); -EINVAL naming what it is instead. */
int psd_gpu_check_ptr(const void *p, int device);

/* The CUDA copier: pinned cudaHostAlloc memory, cudaMemcpyAsync on
 * @nstreams streams of @device. */
struct psd_gpu_copier;
extern const struct psd_copy_ops psd_gpu_copy_ops;
int psd_gpu_copier_create(int device, unsigned nstreams,
			  struct psd_gpu_copier **out);
void psd_gpu_copier_destroy(struct psd_gpu_copier *c);

/* Device memory, for tests and the probes. */
int psd_gpu_malloc(int device, size_t len, void **out);
void psd_gpu_free(void *p);
int psd_gpu_memcpy(void *dst, const void *src, size_t len, bool to_device);

/* sum.cu: dst[i] += src[i] for @n elements of @dtype (F32, F16 or BF16
 * as raw bits, see PSD_GPU_BF16) in device memory of the current device;
 * waits for the kernel.  -EINVAL for another dtype, -ENODEV without
 * CUDA. */
#define PSD_GPU_BF16 100
int psd_gpu_sum_dev(int dtype, void *dst, const void *src, size_t n);
/* The same on host arrays: copies in, sums on device @device, copies
 * back (the server's PS_SERVER_GPU_SUM path). */
int psd_gpu_sum_host(int device, int dtype, void *dst, const void *src,
		     size_t n);

/* GPUDirect RDMA: nvidia_peermem loaded and ibv_reg_mr on device memory
 * of @device works on the first RDMA device.  true/false, probed once
 * and logged once with the reason; false without RDMA or CUDA. */
bool psd_gpu_direct_usable(int device);
/* The reason of the last probe ("" before one). */
const char *psd_gpu_direct_why(void);

#endif
