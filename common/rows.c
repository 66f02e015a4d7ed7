// SPDX-License-Identifier: MIT
/*
 * Row-sparse tensors: row placement, payload prefix, payload checks and
 * row sums shared by worker and server (common/rows.h).
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "rows.h"
#include "updater.h"

static uint64_t rows_lo(uint64_t rows, unsigned nserver, unsigned s)
{
	return (uint64_t)((unsigned __int128)rows * s / nserver);
}

void psd_rows_place(uint64_t rows, unsigned nserver, unsigned s, uint64_t *lo,
		    uint64_t *n)
{
	*lo = rows_lo(rows, nserver, s);
	*n = rows_lo(rows, nserver, s + 1) - *lo;
}

unsigned psd_rows_owner(uint64_t rows, unsigned nserver, uint64_t id)
{
	unsigned s = (unsigned)((unsigned __int128)id * nserver / rows);

	/* The estimate is off by at most one either way. */
	while (s > 0 && rows_lo(rows, nserver, s) > id)
		s--;
	while (s + 1 < nserver && rows_lo(rows, nserver, s + 1) <= id)
		s++;
	return s;
}

void psd_rows_prefix_put(uint8_t *buf, const struct psd_rows_prefix *p)
{
	memcpy(buf, &p->nrows, 4);
	memcpy(buf + 4, &p->pieces, 4);
}

void psd_rows_prefix_get(const uint8_t *buf, struct psd_rows_prefix *p)
{
	memcpy(&p->nrows, buf, 4);
	memcpy(&p->pieces, buf + 4, 4);
}

int psd_rows_check(const struct psd_hdr *h, const uint8_t *payload, uint64_t lo,
		   uint64_t n, char *why, unsigned len)
{
	uint64_t per = psd_msg_is_push(h->type) ? 8 + h->part : 8;
	struct psd_rows_prefix p;
	uint64_t i, id, prev = 0;

	psd_rows_prefix_get(payload, &p);
	if ((uint64_t)p.nrows * per != h->length - PSD_ROWS_PREFIX) {
		snprintf(why, len,
			 "row count %u does not match the payload of %llu "
			 "bytes (rows of %llu bytes)",
			 p.nrows, (unsigned long long)h->length,
			 (unsigned long long)h->part);
		return -EPROTO;
	}
	if (psd_msg_is_push(h->type) && !p.pieces) {
		snprintf(why, len, "push announces zero pieces");
		return -EPROTO;
	}
	for (i = 0; i < p.nrows; i++) {
		memcpy(&id, payload + PSD_ROWS_PREFIX + i * 8, 8);
		if (id < lo || id - lo >= n) {
			snprintf(why, len,
				 "row id %llu (index %llu) is outside rows "
				 "[%llu, %llu) held by this server",
				 (unsigned long long)id, (unsigned long long)i,
				 (unsigned long long)lo,
				 (unsigned long long)(lo + n));
			return -EPROTO;
		}
		if (i && id <= prev) {
			snprintf(why, len,
				 "row ids not strictly increasing: %llu after "
				 "%llu (index %llu)",
				 (unsigned long long)id,
				 (unsigned long long)prev,
				 (unsigned long long)i);
			return -EPROTO;
		}
		prev = id;
	}
	return 0;
}

/*
 * dst += src over @n elements of @type, 32 bytes at a time through GCC's
 * vector extension (the loop -O2 leaves scalar; rows are a few hundred
 * bytes, summed thousands of times a step), the tail one by one.  The
 * vectors are loaded and stored with memcpy: rows need not be aligned.
 */
#define ROWS_ADD(type)                                                         \
	do {                                                                   \
		typedef type vec __attribute__((vector_size(32)));             \
		unsigned char *restrict d = dst;                               \
		const unsigned char *restrict s = src;                         \
		type a, b;                                                     \
		vec va, vb;                                                    \
                                                                               \
		for (i = 0; i + sizeof(vec) <= bytes; i += sizeof(vec)) {      \
			memcpy(&va, d + i, sizeof(vec));                       \
			memcpy(&vb, s + i, sizeof(vec));                       \
			va += vb;                                              \
			memcpy(d + i, &va, sizeof(vec));                       \
		}                                                              \
		for (; i + sizeof(type) <= bytes; i += sizeof(type)) {         \
			memcpy(&a, d + i, sizeof(type));                       \
			memcpy(&b, s + i, sizeof(type));                       \
			a += b;                                                \
			memcpy(d + i, &a, sizeof(type));                       \
		}                                                              \
	} while (0)

void psd_rows_add(uint8_t dtype, void *dst, const void *src, uint64_t bytes)
{
	uint64_t i;

	switch (dtype) {
	case PSCHED_F32:
		ROWS_ADD(float);
		break;
	case PSCHED_F64:
		ROWS_ADD(double);
		break;
	case PSCHED_I32: /* unsigned: wraparound, not UB */
		ROWS_ADD(uint32_t);
		break;
	case PSCHED_I64:
		ROWS_ADD(uint64_t);
		break;
	case PSCHED_F16:
		psd_f16_add(dst, src, (size_t)(bytes / 2));
		break;
	case PSCHED_BF16:
		psd_bf16_add(dst, src, (size_t)(bytes / 2));
		break;
	default:
		memcpy(dst, src, (size_t)bytes);
		break;
	}
}
