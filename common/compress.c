// SPDX-License-Identifier: MIT
/* Gradient compression codec (common/compress.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "compress.h"

uint64_t psd_cmp_len(int kind, uint64_t n)
{
	return PSD_CMP_HDR + (kind == PSD_CMP_2BIT ? (n + 3) / 4 : (n + 7) / 8);
}

int psd_cmp_kind_of(const char *name)
{
	if (!name || !*name || !strcmp(name, "none"))
		return PSD_CMP_NONE;
	if (!strcmp(name, "2bit"))
		return PSD_CMP_2BIT;
	if (!strcmp(name, "1bit"))
		return PSD_CMP_1BIT;
	return -1;
}

void psd_cmp_quantize(int kind, float threshold, const float *g, float *res,
		      uint8_t *codes, size_t n)
{
	size_t i;
	float r;

	for (i = 0; i < n; i++) {
		r = res[i] + g[i];
		if (kind == PSD_CMP_2BIT) {
			if (r >= threshold) {
				codes[i] = 1;
				r -= threshold;
			} else if (r <= -threshold) {
				codes[i] = 2;
				r += threshold;
			} else {
				codes[i] = 0;
			}
		} else if (r > threshold) {
			codes[i] = 1;
			r -= 1.0f;
		} else {
			codes[i] = 0;
			r += 1.0f;
		}
		res[i] = r;
	}
}

void psd_cmp_pack(int kind, float threshold, const uint8_t *codes, size_t n,
		  uint8_t *out)
{
	unsigned bits = kind == PSD_CMP_2BIT ? 2 : 1;
	size_t i;

	memset(out, 0, (size_t)psd_cmp_len(kind, n));
	out[0] = (uint8_t)kind;
	memcpy(out + 4, &threshold, 4);
	for (i = 0; i < n; i++)
		out[PSD_CMP_HDR + i * bits / 8] |=
			(uint8_t)(codes[i] << (i * bits % 8));
}

int psd_cmp_unpack(const uint8_t *in, uint64_t len, float *dst, size_t n,
		   int add)
{
	unsigned bits, code;
	float t, v;
	size_t i;

	if (len < PSD_CMP_HDR ||
	    (in[0] != PSD_CMP_2BIT && in[0] != PSD_CMP_1BIT) ||
	    in[1] | in[2] | in[3] || len != psd_cmp_len(in[0], n))
		return -EPROTO;
	memcpy(&t, in + 4, 4);
	if (!isfinite(t))
		return -EPROTO;
	bits = in[0] == PSD_CMP_2BIT ? 2 : 1;
	/* Check every code before writing: a bad payload changes nothing. */
	for (i = 0; bits == 2 && i < n; i++)
		if ((in[PSD_CMP_HDR + i / 4] >> (i % 4 * 2) & 3u) == 3u)
			return -EPROTO;
	for (i = 0; i < n; i++) {
		code = in[PSD_CMP_HDR + i * bits / 8] >> (i * bits % 8) &
		       ((1u << bits) - 1);
		if (bits == 2)
			v = code == 1 ? t : (code == 2 ? -t : 0.0f);
		else
			v = code ? 1.0f : -1.0f;
		dst[i] = add ? dst[i] + v : v;
	}
	return 0;
}
