// SPDX-License-Identifier: MIT
/*
 * The server's optional GPU aggregation (PS_SERVER_GPU_SUM): dst += src
 * over float32, float16 and bfloat16, the half types added in float32 and
 * rounded back to nearest even, as the CPU path (common/updater.c) does.
 * Compiled by nvcc into libpsched when nvcc is found (Makefile).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stddef.h>

extern "C" {
#include "internal.h"
#include "gpu/gpu.h"
}

static __global__ void sum_f32(float *dst, const float *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t step = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += step)
		dst[i] += src[i];
}

static __global__ void sum_f16(__half *dst, const __half *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t step = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += step)
		dst[i] = __float2half_rn(__half2float(dst[i]) +
					 __half2float(src[i]));
}

static __global__ void sum_bf16(__nv_bfloat16 *dst, const __nv_bfloat16 *src,
				size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	size_t step = (size_t)gridDim.x * blockDim.x;

	for (; i < n; i += step)
		dst[i] = __float2bfloat16_rn(__bfloat162float(dst[i]) +
					     __bfloat162float(src[i]));
}

extern "C" int psd_gpu_sum_dev(int dtype, void *dst, const void *src, size_t n)
{
	const unsigned threads = 256;
	size_t want = (n + threads - 1) / threads;
	unsigned blocks = want > 4096 ? 4096 : want ? (unsigned)want : 1;
	cudaError_t e;

	switch (dtype) {
	case PSCHED_F32:
		sum_f32<<<blocks, threads>>>((float *)dst, (const float *)src,
					     n);
		break;
	case PSCHED_F16:
		sum_f16<<<blocks, threads>>>((__half *)dst,
					     (const __half *)src, n);
		break;
	case PSD_GPU_BF16:
		sum_bf16<<<blocks, threads>>>((__nv_bfloat16 *)dst,
					      (const __nv_bfloat16 *)src, n);
		break;
	default:
		return psd_set_errmsg(-EINVAL,
				      "GPU sum: dtype %d is not float32, "
				      "float16 or bfloat16",
				      dtype);
	}
	e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e != cudaSuccess)
		return psd_set_errmsg(-EIO, "GPU sum kernel of %zu elements: %s",
				      n, cudaGetErrorString(e));
	return 0;
}
