// SPDX-License-Identifier: MIT
/*
 * 16-bit floats (common/updater.h): IEEE binary16 and bfloat16 to and
 * from binary32, and their sums computed in binary32.
 */
#include <string.h>

#include "updater.h"

float psd_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t x;
	float f;

	if (exp == 0x1f) {
		x = sign | 0x7f800000u | man << 13;
	} else if (exp) {
		x = sign | (exp + 112) << 23 | man << 13;
	} else if (!man) {
		x = sign;
	} else {
		/* Subnormal: shift the leading one into the implicit bit. */
		exp = 113;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		x = sign | exp << 23 | (man & 0x3ffu) << 13;
	}
	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Drop @shift low bits of @v, rounding to nearest, ties to even. */
static uint32_t f16_round_shift(uint32_t v, unsigned shift)
{
	uint32_t q = v >> shift;
	uint32_t rem = v & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);

	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

uint16_t psd_f32_to_f16(float f)
{
	uint32_t x, sign, exp, man;
	int e;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000u;
	exp = (x >> 23) & 0xffu;
	man = x & 0x7fffffu;
	if (exp == 0xff) /* inf, or NaN kept quiet and non-zero */
		return (uint16_t)(sign | 0x7c00u |
				  (man ? 0x200u | man >> 13 : 0));
	e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		/* Subnormal half: value = man' * 2^-24. */
		return (uint16_t)(sign | f16_round_shift(man | 0x800000u,
							 (unsigned)(14 - e)));
	}
	/* A carry out of the mantissa bumps the exponent, up to inf. */
	return (uint16_t)(sign | f16_round_shift((uint32_t)e << 23 | man, 13));
}

void psd_f16_add(uint16_t *dst, const uint16_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = psd_f32_to_f16(psd_f16_to_f32(dst[i]) +
					psd_f16_to_f32(src[i]));
}

float psd_bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

uint16_t psd_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
		return (uint16_t)(x >> 16 | 0x40u); /* NaN: keep it quiet */
	/* Ties to even; a carry may round up to the next binade or inf. */
	x += 0x7fffu + (x >> 16 & 1u);
	return (uint16_t)(x >> 16);
}

void psd_bf16_add(uint16_t *dst, const uint16_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = psd_f32_to_bf16(psd_bf16_to_f32(dst[i]) +
					 psd_bf16_to_f32(src[i]));
}
