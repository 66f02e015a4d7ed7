/* SPDX-License-Identifier: MIT */
/*
 * Gradient compression (MXNet's set_gradient_compression): float32
 * pushes quantised on the worker with error feedback, dequantised on the
 * server before summing.  Per element, with r the worker's residual for
 * that element (0 at first):
 *
 *   2bit  r += g; q = +t if r >= t, -t if r <= -t, else 0; r -= q
 *   1bit  r += g; q = +1 if r > t, else -1; r -= q
 *
 * A compressed chunk's payload (wire flag PSD_F_COMPRESSED):
 *   u8 kind (1 = 2bit, 2 = 1bit), 3 zero bytes, f32 threshold t
 *   (little-endian), then the codes of its n elements, element i at bit
 *   (i * bits) % 8 of byte (i * bits) / 8:
 *   2bit: 2 bits, 0 = 0, 1 = +t, 2 = -t (3 is malformed);
 *   1bit: 1 bit, 1 = +1, 0 = -1.
 */
#ifndef PSCHED_COMMON_COMPRESS_H
#define PSCHED_COMMON_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

enum psd_cmp_kind {
	PSD_CMP_NONE = 0,
	PSD_CMP_2BIT = 1,
	PSD_CMP_1BIT = 2,
};

#define PSD_CMP_HDR 8u

/* Payload bytes of @n elements compressed with @kind. */
uint64_t psd_cmp_len(int kind, uint64_t n);
/* "2bit" / "1bit" -> kind; "none" / "" / NULL -> PSD_CMP_NONE; -1 else. */
int psd_cmp_kind_of(const char *name);
/*
 * Quantise @n gradients @g with residuals @res (updated) into @codes,
 * one code per byte (0, 1, 2 as above; 1bit: 1 = +1, 0 = -1).
 */
void psd_cmp_quantize(int kind, float threshold, const float *g, float *res,
		      uint8_t *codes, size_t n);
/* Pack codes[0..n) into a payload at @out (psd_cmp_len(kind, n) bytes). */
void psd_cmp_pack(int kind, float threshold, const uint8_t *codes, size_t n,
		  uint8_t *out);
/*
 * Dequantise payload @in (@len bytes) of @n elements into @dst (add:
 * dst += values, else dst = values).  0, or -EPROTO for a payload that is
 * malformed (kind, length, a code of 3, a threshold that is not finite).
 */
int psd_cmp_unpack(const uint8_t *in, uint64_t len, float *dst, size_t n,
		   int add);

#endif
