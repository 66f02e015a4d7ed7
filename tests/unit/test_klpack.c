// SPDX-License-Identifier: MIT
/*
 * The worker's packed key lists (worker/kvw_klpack.c), which its key-list
 * cache uses to tell a repeated list: equal() must be true exactly when
 * the keys are the same, for strided, random and irregular lists, every
 * excess width 0..8 bytes, block edges, any order (arithmetic mod 2^64),
 * and buffers reused for smaller and larger lists.  The reference is
 * memcmp of the plain arrays.
 */
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../../worker/kvw_klpack.h"

/* equal() of @a (packed) against @b, checked against memcmp. */
static void kp_agree(struct kvw_klpack *p, const uint64_t *a, size_t na,
		     const uint64_t *b, size_t nb)
{
	bool same = na == nb && (!na || !memcmp(a, b, na * 8));

	CHECK_EQ(psd_kvw_klpack_set(p, a, na), 0);
	CHECK_U64(p->n, ==, na);
	CHECK_EQ(psd_kvw_klpack_equal(p, b, nb), same);
	CHECK(psd_kvw_klpack_equal(p, a, na));
}

/* Every single-key change of @k (n keys) at the positions that matter
 * (block edges, ends, some random) is told apart, by +-1 and by a far
 * value. */
static void kp_mutations(const uint64_t *k, size_t n)
{
	struct kvw_klpack p = { 0 };
	uint64_t *m = malloc((n ? n : 1) * 8);
	size_t pos[] = { 0,   1,   2,	254,   255,   256,
			 257, 511, 512, n / 2, n - 2, n - 1 };

	CHECK(m != NULL);
	CHECK_EQ(psd_kvw_klpack_set(&p, k, n), 0);
	CHECK(psd_kvw_klpack_equal(&p, k, n));
	for (size_t t = 0; t < sizeof(pos) / sizeof(pos[0]) + 40; t++) {
		size_t i = t < sizeof(pos) / sizeof(pos[0])
				   ? pos[t]
				   : (size_t)test_rng_below(n);
		uint64_t d[] = { 1, (uint64_t)-1, 1ull << 40,
				 test_rng_next() | 1 };

		if (i >= n)
			continue;
		for (size_t j = 0; j < 4; j++) {
			memcpy(m, k, n * 8);
			m[i] += d[j];
			CHECK(!psd_kvw_klpack_equal(&p, m, n));
		}
	}
	/* a prefix, one key more, two neighbours swapped */
	if (n > 1) {
		CHECK(!psd_kvw_klpack_equal(&p, k, n - 1));
		memcpy(m, k, n * 8);
		m[n / 2] = k[n / 2 - 1];
		m[n / 2 - 1] = k[n / 2];
		CHECK(memcmp(m, k, n * 8) == 0 ||
		      !psd_kvw_klpack_equal(&p, m, n));
	}
	psd_kvw_klpack_free(&p);
	free(m);
}

static void test_klpack_strided(void)
{
	size_t n = 100000;
	uint64_t *k = malloc(n * 8);
	struct kvw_klpack p = { 0 };

	CHECK(k != NULL);
	/* dmlc's benchmark keys: kMaxKey / n * i + rank */
	for (size_t i = 0; i < n; i++)
		k[i] = UINT64_MAX / n * i + 1;
	CHECK_EQ(psd_kvw_klpack_set(&p, k, n), 0);
	CHECK(psd_kvw_klpack_equal(&p, k, n));
	/* one block header per 256 keys, no bytes per key */
	CHECK_U64(psd_kvw_klpack_bytes(&p), <=,
		  (n / KVW_KLPACK_BLK + 1) * sizeof(struct kvw_klpack_blk));
	psd_kvw_klpack_free(&p);
	kp_mutations(k, n);
	for (size_t i = 0; i < n; i++)
		k[i] = i; /* ids 0..n-1 */
	kp_mutations(k, n);
	free(k);
}

static void test_klpack_random_sorted(void)
{
	size_t n = 50000;
	uint64_t *k = malloc(n * 8);
	struct kvw_klpack p = { 0 };

	CHECK(k != NULL);
	test_rng_seed(7);
	/* keys spread over 2^64: gaps of about 2^64 / n */
	k[0] = test_rng_below(1ull << 40);
	for (size_t i = 1; i < n; i++)
		k[i] = k[i - 1] + 1 + test_rng_below(UINT64_MAX / n);
	CHECK_EQ(psd_kvw_klpack_set(&p, k, n), 0);
	CHECK(psd_kvw_klpack_equal(&p, k, n));
	CHECK_U64(psd_kvw_klpack_bytes(&p), <, n * 8);
	psd_kvw_klpack_free(&p);
	kp_mutations(k, n);
	free(k);
}

/* Blocks whose largest excess needs exactly w bytes, w = 0..8, then the
 * same with the excesses moved around. */
static void test_klpack_every_width(void)
{
	size_t n = 9 * KVW_KLPACK_BLK + 3;
	uint64_t *k = malloc(n * 8);
	struct kvw_klpack p = { 0 };

	CHECK(k != NULL);
	test_rng_seed(11);
	k[0] = 5;
	for (size_t i = 1; i < n; i++) {
		unsigned w = (unsigned)(i / KVW_KLPACK_BLK);
		uint64_t top = w >= 8 ? UINT64_MAX / 4 : (1ull << (8 * w)) - 1;

		/* the stride 3, excess up to top (reached once per block) */
		k[i] = k[i - 1] + 3 +
		       (i % KVW_KLPACK_BLK == 7 ? top
						: test_rng_below(top + 1));
	}
	CHECK_EQ(psd_kvw_klpack_set(&p, k, n), 0);
	for (size_t b = 1; b < 9; b++)
		CHECK_EQ(p.blk[b].w, b >= 8 ? 8 : b);
	CHECK_EQ(p.blk[0].w, 0);
	psd_kvw_klpack_free(&p);
	kp_mutations(k, n);
	free(k);
}

/* Any order (mod 2^64 arithmetic), tiny lists, reuse of the buffers. */
static void test_klpack_any_order_and_reuse(void)
{
	uint64_t down[] = { UINT64_MAX, 7, 6, 0, UINT64_MAX - 1, 0, 0, 42 };
	uint64_t one[] = { 99 }, other[] = { 98 };
	size_t big = 3000;
	uint64_t *k = malloc(big * 8), *r = malloc(big * 8);
	struct kvw_klpack p = { 0 };

	CHECK(k != NULL && r != NULL);
	kp_agree(&p, down, 8, down, 8);
	kp_mutations(down, 8);
	kp_agree(&p, one, 1, one, 1);
	kp_agree(&p, one, 1, other, 1);
	kp_agree(&p, one, 0, one, 0);
	kp_agree(&p, one, 0, one, 1);
	test_rng_seed(3);
	for (unsigned t = 0; t < 200; t++) {
		/* sizes around block edges, random and strided keys, and a
		 * copy that differs in one random place or not at all */
		size_t n = 1 + test_rng_below(t % 2 ? big : 600);
		uint64_t s = test_rng_next();

		for (size_t i = 0; i < n; i++)
			k[i] = t % 3 ? s * i + (t % 5 ? 0 : test_rng_below(9))
				     : test_rng_next();
		memcpy(r, k, n * 8);
		if (t % 4)
			r[test_rng_below(n)] ^= 1ull << test_rng_below(64);
		kp_agree(&p, k, n, r, n); /* reused buffers, n up and down */
	}
	psd_kvw_klpack_free(&p);
	free(k);
	free(r);
}

const struct test_case test_list[] = {
	{ "klpack_strided", test_klpack_strided },
	{ "klpack_random_sorted", test_klpack_random_sorted },
	{ "klpack_every_width", test_klpack_every_width },
	{ "klpack_any_order_and_reuse", test_klpack_any_order_and_reuse },
	{ NULL, NULL },
};
