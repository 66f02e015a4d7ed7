// SPDX-License-Identifier: MIT
/*
 * Packed key lists for the worker's key-list cache (worker/kvw_klpack.h).
 *
 * Why: the cache used to be a plain copy of the last list, 8 bytes per
 * key.  Copying a 10 M-key list into fresh memory costs 80 MB of page
 * faults on every new list, the first one included (the cold push), and
 * each such fault costs about as much as the copy itself.  Sorted keys
 * are mostly regular: packed, the same exact list takes a few MB at most
 * for strided keys, and comparing reads the caller's keys once instead of
 * two arrays.
 *
 * Arithmetic is mod 2^64 throughout, so any list packs and unpacks
 * exactly (the caller checks sortedness, this code does not need it).
 */
#include <errno.h>
#include <string.h>

#include "bigmem.h"
#include "kvw_klpack.h"

/* Bytes that hold @x (0 for 0). */
static unsigned klpack_width(uint64_t x)
{
	unsigned w = 0;

	while (x) {
		w++;
		x >>= 8;
	}
	return w;
}

/* The low @w bytes at @p, little-endian (8 readable bytes at @p). */
static inline uint64_t klpack_load(const uint8_t *p, unsigned w)
{
	uint64_t x = 0;

	memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return w >= 8 ? x : x & ((1ull << (8 * w)) - 1);
}

/* @x's low @w bytes at @p, little-endian; writes 8 bytes (the next
 * store, or the slack, takes the rest). */
static inline void klpack_store(uint8_t *p, uint64_t x)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	memcpy(p, &x, 8);
}

/* Block @b of a list of @n keys: its first key and length. */
static inline size_t klpack_blen(size_t n, size_t b)
{
	size_t first = b * KVW_KLPACK_BLK;

	return n - first < KVW_KLPACK_BLK ? n - first : KVW_KLPACK_BLK;
}

int psd_kvw_klpack_set(struct kvw_klpack *p, const uint64_t *keys, size_t n)
{
	size_t nblk = (n + KVW_KLPACK_BLK - 1) / KVW_KLPACK_BLK;
	size_t b, i, res = 0;

	p->n = 0;
	if (nblk > p->blk_cap) {
		struct kvw_klpack_blk *nb = psd_big_alloc(
			(uint64_t)nblk * sizeof(*nb), p->huge, false);

		if (!nb)
			return -ENOMEM;
		psd_big_free(p->blk);
		p->blk = nb;
		p->blk_cap = nblk;
	}
	/* pass 1: each block's stride and excess width */
	for (b = 0; b < nblk; b++) {
		const uint64_t *k = keys + b * KVW_KLPACK_BLK;
		size_t len = klpack_blen(n, b);
		uint64_t lo = UINT64_MAX, hi = 0;

		for (i = 1; i < len; i++) {
			uint64_t d = k[i] - k[i - 1];

			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
		if (len < 2)
			lo = hi = 0;
		p->blk[b].base = k[0];
		p->blk[b].step = lo;
		p->blk[b].w = klpack_width(hi - lo);
		p->blk[b].off = res;
		res += (len - 1) * p->blk[b].w;
	}
	if (res + 8 > p->res_cap) {
		uint8_t *nr = psd_big_alloc(res + 8, p->huge, false);

		if (!nr)
			return -ENOMEM;
		psd_big_free(p->res);
		p->res = nr;
		p->res_cap = res + 8;
	}
	/* pass 2: the excesses (none for a strided block) */
	for (b = 0; b < nblk; b++) {
		const uint64_t *k = keys + b * KVW_KLPACK_BLK;
		unsigned w = p->blk[b].w;
		uint8_t *o = p->res + p->blk[b].off;
		uint64_t step = p->blk[b].step;
		size_t len = klpack_blen(n, b);

		for (i = 1; w && i < len; i++, o += w)
			klpack_store(o, k[i] - k[i - 1] - step);
	}
	memset(p->res + res, 0, 8);
	p->n = n;
	return 0;
}

bool psd_kvw_klpack_equal(const struct kvw_klpack *p, const uint64_t *keys,
			  size_t n)
{
	size_t nblk = (n + KVW_KLPACK_BLK - 1) / KVW_KLPACK_BLK;
	size_t b, i;

	if (n != p->n)
		return false;
	for (b = 0; b < nblk; b++) {
		const struct kvw_klpack_blk *bk = &p->blk[b];
		const uint64_t *k = keys + b * KVW_KLPACK_BLK;
		const uint8_t *r = p->res + bk->off;
		size_t len = klpack_blen(n, b);
		unsigned w = bk->w;
		uint64_t bad = k[0] ^ bk->base;

		if (!w) {
			/* branch-free, vectorised */
			for (i = 1; i < len; i++)
				bad |= (k[i] - k[i - 1]) ^ bk->step;
		} else {
			for (i = 1; i < len; i++, r += w)
				bad |= (k[i] - k[i - 1]) ^
				       (bk->step + klpack_load(r, w));
		}
		if (bad)
			return false;
	}
	return true;
}

size_t psd_kvw_klpack_bytes(const struct kvw_klpack *p)
{
	size_t nblk = (p->n + KVW_KLPACK_BLK - 1) / KVW_KLPACK_BLK;

	if (!nblk)
		return 0;
	return nblk * sizeof(*p->blk) + p->blk[nblk - 1].off +
	       (klpack_blen(p->n, nblk - 1) - 1) * p->blk[nblk - 1].w;
}

void psd_kvw_klpack_free(struct kvw_klpack *p)
{
	psd_big_free(p->blk);
	psd_big_free(p->res);
	memset(p, 0, sizeof(*p));
}
