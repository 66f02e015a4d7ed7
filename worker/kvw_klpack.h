/* SPDX-License-Identifier: MIT */
/*
 * A key list kept packed (worker/kvw_klpack.c), for the worker's key-list
 * cache (worker/kvw_keylist.c): the cache only ever asks "is this list
 * the one I sent last?", so it needs the exact keys but not as an array
 * of 8-byte words.  The keys are cut into blocks of KVW_KLPACK_BLK; a
 * block keeps its first key, the smallest gap between neighbours (its
 * stride) and, per key, by how much its gap exceeds the stride, in the
 * fewest bytes that hold the block's largest excess (0 to 8).  A strided
 * list (ids 0..n-1, or dmlc's benchmark keys) costs 24 bytes per block,
 * nothing per key; keys spread at random over 2^64 cost 5-6 bytes each.
 * Exact: equal() is true only for the same keys in the same order.
 */
#ifndef PSCHED_WORKER_KVW_KLPACK_H
#define PSCHED_WORKER_KVW_KLPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVW_KLPACK_BLK 256

struct kvw_klpack_blk {
	uint64_t base;	   /* the block's first key */
	uint64_t step;	   /* smallest gap in the block (mod 2^64) */
	uint64_t off : 60; /* its excesses start at res + off */
	uint64_t w : 4;	   /* bytes per excess, 0..8 */
};

struct kvw_klpack {
	size_t n; /* keys held; valid only after a successful set() */
	struct kvw_klpack_blk *blk;
	size_t blk_cap; /* blocks */
	uint8_t *res;	/* excesses, little-endian, + 8 bytes of slack */
	size_t res_cap; /* bytes */
	bool huge;	/* res in huge pages (PS_KEYLIST_HUGEPAGES) */
};

/* Keep @keys[0, @n) (any order, repeats allowed); the buffers are
 * reused while they fit.  0, or -ENOMEM with nothing kept (n = 0). */
int psd_kvw_klpack_set(struct kvw_klpack *p, const uint64_t *keys, size_t n);
/* Exactly the keys kept, in order? */
bool psd_kvw_klpack_equal(const struct kvw_klpack *p, const uint64_t *keys,
			  size_t n);
/* Bytes the packed keys take (blocks and excesses). */
size_t psd_kvw_klpack_bytes(const struct kvw_klpack *p);
void psd_kvw_klpack_free(struct kvw_klpack *p);

#endif
