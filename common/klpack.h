/* SPDX-License-Identifier: MIT */
/*
 * Packed key lists (common/klpack.c): a sorted key list in a few bytes
 * per key, exact.  Used by the worker's key-list cache (to tell a
 * repeated list: worker/kvw_keylist.c) and on the wire (PSD_F_KLPACKED,
 * common/wire.h: a request's keys packed instead of 8 bytes each; the
 * server unpacks them, server/kvs_keylist.c).
 *
 * The keys are cut into blocks of PSD_KLPACK_BLK (the last may be
 * shorter); a block keeps its first key, the smallest gap between
 * neighbours (its step) and, per key after the first, by how much its gap
 * exceeds the step, in the fewest bytes that hold the block's largest
 * excess (0 to 8).  A strided list (ids 0..n-1, dmlc's benchmark keys)
 * costs 17 bytes per block and nothing per key; keys spread at random
 * over 2^64 cost 5-6 bytes each.
 *
 * The packed form is exactly what travels (all little-endian), for n keys
 * in nblk = ceil(n / 256) blocks:
 *   nblk x { u64 first key, u64 step }
 *   nblk x u8 width (bytes per excess, 0..8)
 *   the excesses, block after block: (len - 1) x width bytes per block;
 *     key i = key i-1 + step + excess (no wrap past 2^64)
 *   zeros up to P = round_up_8(17 * nblk + E + 7) bytes (E: excess bytes)
 * so its length is a multiple of 8 (what follows stays aligned) and any
 * 8 bytes from an excess on are inside it (loads need no tail case).
 */
#ifndef PSCHED_COMMON_KLPACK_H
#define PSCHED_COMMON_KLPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PSD_KLPACK_BLK 256u

struct psd_klpack {
	uint64_t n;   /* keys held; valid only after a successful set() */
	uint8_t *buf; /* the packed form (psd_big_alloc) */
	uint64_t len; /* its bytes (P) */
	uint64_t cap; /* bytes allocated */
	bool huge;    /* buf in huge pages (PS_KEYLIST_HUGEPAGES) */
	/* The keys given to the last set() were strictly ascending (set
	 * even when it returned 1; false after -ENOMEM). */
	bool sorted;
};

/* The first index of sorted keys[@lo, @n) at or above @key (@n if none):
 * the worker cuts a list per server with it, the server looks keys up. */
static inline uint64_t psd_kl_lower(const uint64_t *keys, uint64_t lo,
				    uint64_t n, uint64_t key)
{
	uint64_t hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (keys[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The smallest packed length of @n keys (every width 0); 0 for n = 0. */
uint64_t psd_klpack_min_len(uint64_t n);
/*
 * Pack @keys[0, @n) (any order, repeats allowed: arithmetic mod 2^64;
 * the wire needs them sorted), reusing the buffer while it fits.  When
 * the packed form would take more than @max_len bytes, stop after the
 * first pass: 1, nothing kept.  0 (packed), or -ENOMEM with nothing
 * kept; n is 0 unless 0 is returned.
 */
int psd_klpack_set(struct psd_klpack *p, const uint64_t *keys, uint64_t n,
		   uint64_t max_len);
/* Exactly the keys kept, in order? */
bool psd_klpack_equal(const struct psd_klpack *p, const uint64_t *keys,
		      uint64_t n);
void psd_klpack_free(struct psd_klpack *p);
/*
 * Reading a packed section block by block (psd_klpack_unpack() is one
 * such read into an array): init checks the length rule and the widths;
 * each next() writes the following block's keys (at most PSD_KLPACK_BLK)
 * and returns how many, 0 at the end; once every block was read, done()
 * says whether the keys were strictly ascending without running past
 * 2^64.  0 or -EPROTO with the reason in *@why.
 */
struct psd_klpack_rd {
	const uint8_t *src;
	uint64_t n, nblk, b; /* keys, blocks, the next block */
	const uint8_t *r;    /* its excesses */
	uint64_t last;	     /* the last key read */
	uint64_t gap, same, wrap;
};
int psd_klpack_rd_init(struct psd_klpack_rd *rd, const uint8_t *src,
		       uint64_t len, uint64_t n, const char **why);
uint64_t psd_klpack_rd_next(struct psd_klpack_rd *rd, uint64_t *k);
int psd_klpack_rd_done(const struct psd_klpack_rd *rd, const char **why);
/* Make block @b the next one (a section checked before: the order across
 * the jump is not checked). */
void psd_klpack_rd_seek(struct psd_klpack_rd *rd, uint64_t b);
/* The first key of block @b of a section. */
uint64_t psd_klpack_first(const uint8_t *src, uint64_t b);
/* psd_klpack_unpack()'s checks without keeping the keys. */
int psd_klpack_check(const uint8_t *src, uint64_t len, uint64_t n,
		     const char **why);
/*
 * Unpack @n keys (n >= 1) from the @len bytes at @src into @keys,
 * checking everything: the length rule, widths, gaps that overflow 2^64,
 * keys strictly ascending (so a list that unpacks is sorted and
 * distinct).  0, or -EPROTO with the reason in *@why; @keys may be
 * written either way.  @keys must not overlap @src.
 */
int psd_klpack_unpack(const uint8_t *src, uint64_t len, uint64_t n,
		      uint64_t *keys, const char **why);

#endif
