// SPDX-License-Identifier: MIT
/*
 * The worker's packed key lists (common/klpack.c), which its key-list
 * cache uses to tell a repeated list: equal() must be true exactly when
 * the keys are the same, for strided, random and irregular lists, every
 * excess width 0..8 bytes, block edges, any order (arithmetic mod 2^64),
 * and buffers reused for smaller and larger lists.  The reference is
 * memcmp of the plain arrays.  The packed form is also the wire's
 * (PSD_F_KLPACKED): unpack() must give back exactly the keys of every
 * strictly ascending list, and refuse -- without reading outside the
 * section -- lists that are not ascending, truncated or padded sections,
 * key counts that do not match, widths above 8, gaps past 2^64.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "klpack.h"

/* Packed @p of @k (n keys) unpacks to exactly @k when @k is strictly
 * ascending, and is refused otherwise; the length follows the rule. */
static void kp_wire(const struct psd_klpack *p, const uint64_t *k, size_t n)
{
	uint64_t *u = malloc((n ? n : 1) * 8);
	const char *why = "";
	bool asc = n > 0;
	int ret;

	CHECK(u != NULL);
	for (size_t i = 1; i < n; i++)
		asc = asc && k[i] > k[i - 1];
	/* the first pass tells the same */
	CHECK_EQ(p->sorted, n == 0 || asc);
	if (n) {
		CHECK_U64(p->len % 8, ==, 0);
		CHECK_U64(p->len, >=, psd_klpack_min_len(n));
	}
	ret = psd_klpack_unpack(p->buf, p->len, n, u, &why);
	CHECK_EQ(ret, asc ? 0 : -EPROTO);
	if (asc)
		CHECK(!memcmp(u, k, n * 8));
	else
		CHECK(strstr(why, "packed keys") != NULL);
	free(u);
}

/* equal() of @a (packed) against @b, checked against memcmp. */
static void kp_agree(struct psd_klpack *p, const uint64_t *a, size_t na,
		     const uint64_t *b, size_t nb)
{
	bool same = na == nb && (!na || !memcmp(a, b, na * 8));

	CHECK_EQ(psd_klpack_set(p, a, na, UINT64_MAX), 0);
	CHECK_U64(p->n, ==, na);
	CHECK_EQ(psd_klpack_equal(p, b, nb), same);
	CHECK(psd_klpack_equal(p, a, na));
	kp_wire(p, a, na);
}

/* set() of @k (n keys) says sorted exactly when they are strictly
 * ascending (the worker skips its own pass over the keys on it), whether
 * or not the packed form fits a small limit. */
static void kp_sorted_flag(struct psd_klpack *p, const uint64_t *k, size_t n)
{
	bool asc = true;

	for (size_t i = 1; i < n; i++)
		asc = asc && k[i] > k[i - 1];
	CHECK(psd_klpack_set(p, k, n, UINT64_MAX) == 0);
	CHECK_EQ(p->sorted, asc);
	CHECK(psd_klpack_set(p, k, n, 8) >= 0);
	CHECK_EQ(p->sorted, asc);
}

/* Every single-key change of @k (n keys) at the positions that matter
 * (block edges, ends, some random) is told apart, by +-1 and by a far
 * value. */
static void kp_mutations(const uint64_t *k, size_t n)
{
	struct psd_klpack p = { 0 }, q = { 0 };
	uint64_t *m = malloc((n ? n : 1) * 8);
	size_t pos[] = { 0,   1,   2,	254,   255,   256,
			 257, 511, 512, n / 2, n - 2, n - 1 };

	CHECK(m != NULL);
	CHECK_EQ(psd_klpack_set(&p, k, n, UINT64_MAX), 0);
	CHECK(psd_klpack_equal(&p, k, n));
	kp_wire(&p, k, n);
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
			CHECK(!psd_klpack_equal(&p, m, n));
			if (t < sizeof(pos) / sizeof(pos[0]))
				kp_sorted_flag(&q, m, n);
		}
	}
	/* a prefix, one key more, two neighbours swapped */
	if (n > 1) {
		CHECK(!psd_klpack_equal(&p, k, n - 1));
		memcpy(m, k, n * 8);
		m[n / 2] = k[n / 2 - 1];
		m[n / 2 - 1] = k[n / 2];
		CHECK(memcmp(m, k, n * 8) == 0 || !psd_klpack_equal(&p, m, n));
		kp_sorted_flag(&q, m, n);
	}
	psd_klpack_free(&p);
	psd_klpack_free(&q);
	free(m);
}

static void test_klpack_strided(void)
{
	size_t n = 100000;
	uint64_t *k = malloc(n * 8);
	struct psd_klpack p = { 0 };

	CHECK(k != NULL);
	/* dmlc's benchmark keys: kMaxKey / n * i + rank */
	for (size_t i = 0; i < n; i++)
		k[i] = UINT64_MAX / n * i + 1;
	CHECK_EQ(psd_klpack_set(&p, k, n, UINT64_MAX), 0);
	CHECK(psd_klpack_equal(&p, k, n));
	/* one block header per 256 keys, no bytes per key */
	CHECK_U64(p.len, ==, psd_klpack_min_len(n));
	CHECK_U64(p.len, <=, (n / PSD_KLPACK_BLK + 1) * 17 + 16);
	psd_klpack_free(&p);
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
	struct psd_klpack p = { 0 };

	CHECK(k != NULL);
	test_rng_seed(7);
	/* keys spread over 2^64: gaps of about 2^64 / n */
	k[0] = test_rng_below(1ull << 40);
	for (size_t i = 1; i < n; i++)
		k[i] = k[i - 1] + 1 + test_rng_below(UINT64_MAX / n);
	CHECK_EQ(psd_klpack_set(&p, k, n, UINT64_MAX), 0);
	CHECK(psd_klpack_equal(&p, k, n));
	CHECK_U64(p.len, <, n * 8);
	psd_klpack_free(&p);
	kp_mutations(k, n);
	free(k);
}

/* Blocks whose largest excess needs exactly w bytes, w = 0..8, then the
 * same with the excesses moved around. */
static void test_klpack_every_width(void)
{
	size_t n = 9 * PSD_KLPACK_BLK + 3;
	uint64_t *k = malloc(n * 8);
	struct psd_klpack p = { 0 };

	CHECK(k != NULL);
	test_rng_seed(11);
	k[0] = 5;
	for (size_t i = 1; i < n; i++) {
		unsigned w = (unsigned)(i / PSD_KLPACK_BLK);
		uint64_t top = w >= 8 ? UINT64_MAX / 4 : (1ull << (8 * w)) - 1;

		/* the stride 3, excess up to top (reached once per block) */
		k[i] = k[i - 1] + 3 +
		       (i % PSD_KLPACK_BLK == 7 ? top
						: test_rng_below(top + 1));
	}
	CHECK_EQ(psd_klpack_set(&p, k, n, UINT64_MAX), 0);
	/* the widths follow the 16-byte table entries of 10 blocks */
	for (size_t b = 1; b < 9; b++)
		CHECK_EQ(p.buf[16 * 10 + b], b >= 8 ? 8 : b);
	CHECK_EQ(p.buf[16 * 10], 0);
	psd_klpack_free(&p);
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
	struct psd_klpack p = { 0 };

	CHECK(k != NULL && r != NULL);
	kp_agree(&p, down, 8, down, 8);
	kp_mutations(down, 8);
	kp_agree(&p, one, 1, one, 1);
	kp_agree(&p, one, 1, other, 1);
	kp_agree(&p, one, 0, one, 0);
	kp_agree(&p, one, 0, one, 1);
	/* one gap all along (a strided block) that wraps past 2^64, goes
	 * down (a gap over 2^63), repeats (gap 0), or ends exactly at the
	 * top: sorted only in the last case */
	{
		uint64_t wrap[] = { UINT64_MAX - 2, 0, 3 },
			 fall[] = { 30, 20, 10, 0 }, rep[] = { 5, 5, 5 },
			 top[] = { UINT64_MAX - 20, UINT64_MAX - 10,
				   UINT64_MAX };

		kp_agree(&p, wrap, 3, wrap, 3);
		CHECK(!p.sorted);
		kp_agree(&p, fall, 4, fall, 4);
		CHECK(!p.sorted);
		kp_agree(&p, rep, 3, rep, 3);
		CHECK(!p.sorted);
		kp_agree(&p, top, 3, top, 3);
		CHECK(p.sorted);
	}
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
	psd_klpack_free(&p);
	free(k);
	free(r);
}

/* Unpack @n keys from @len bytes of @src (a copy exactly that long, so
 * ASan sees any read past it): the return value, keys in @out.  The
 * check without keys (what a server does before it unpacks lazily) and a
 * read block by block from every block on (the lazy lookups) agree. */
static int kp_unpack(const uint8_t *src, uint64_t len, uint64_t n,
		     uint64_t *out, const char **why)
{
	uint8_t *cp = malloc(len ? len : 1);
	uint64_t blk[PSD_KLPACK_BLK];
	struct psd_klpack_rd rd;
	const char *why2 = "";
	int ret;

	CHECK(cp != NULL);
	memcpy(cp, src, len);
	*why = "";
	ret = psd_klpack_unpack(cp, len, n, out, why);
	CHECK_EQ(psd_klpack_check(cp, len, n, &why2), ret);
	CHECK(!strcmp(why2, ret ? *why : ""));
	if (!ret) {
		CHECK_EQ(psd_klpack_rd_init(&rd, cp, len, n, &why2), 0);
		for (uint64_t b = 0; b * PSD_KLPACK_BLK < n; b++) {
			uint64_t got;

			psd_klpack_rd_seek(&rd, b);
			got = psd_klpack_rd_next(&rd, blk);
			CHECK_U64(got, ==,
				  n - b * PSD_KLPACK_BLK < PSD_KLPACK_BLK
					  ? n - b * PSD_KLPACK_BLK
					  : PSD_KLPACK_BLK);
			CHECK(!memcmp(blk, out + b * PSD_KLPACK_BLK, got * 8));
			CHECK_U64(psd_klpack_first(cp, b), ==,
				  out[b * PSD_KLPACK_BLK]);
		}
	}
	free(cp);
	return ret;
}

/* Every list length around the block edges, strided, with excesses of
 * each width and random: unpack gives the keys back; a max_len below the
 * packed length stops after the first pass with nothing kept. */
static void test_klpack_wire_round_trip(void)
{
	size_t ns[] = { 1, 2, 3, 255, 256, 257, 511, 512, 513, 1000, 4113 };
	uint64_t *k = malloc(4113 * 8), *u = malloc(4113 * 8);
	struct psd_klpack p = { 0 };
	const char *why;
	int ret;

	CHECK(k != NULL && u != NULL);
	test_rng_seed(5);
	for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
		for (unsigned kind = 0; kind < 11; kind++) {
			size_t n = ns[t];
			/* kinds 1..9: excesses of up to kind - 1 bytes */
			uint64_t top = kind >= 9 ? (1ull << 58)
				       : kind == 0
					       ? 0
					       : (1ull << (8 * (kind - 1))) - 1;

			/* kind 10: random gaps; else stride 78 and one
			 * excess per block reaching top, the others below
			 * 2^40 (the keys stay below 2^64) */
			k[0] = kind == 10 ? test_rng_below(1ull << 60) : kind;
			for (size_t i = 1; i < n; i++)
				k[i] = k[i - 1] + 1 +
				       (kind == 10
						? test_rng_below(UINT64_MAX /
								 8192)
						: 77 + (i % 256 == 7
								? top
								: test_rng_below(
									  (top < (1ull
										  << 40)
										   ? top
										   : (1ull
										      << 40)) +
									  1)));
			CHECK_EQ(psd_klpack_set(&p, k, n, UINT64_MAX), 0);
			ret = kp_unpack(p.buf, p.len, n, u, &why);
			if (ret)
				fprintf(stderr, "n %zu kind %u: %s\n", n, kind,
					why);
			CHECK_EQ(ret, 0);
			CHECK(!memcmp(u, k, n * 8));
			if (p.len > psd_klpack_min_len(n)) {
				CHECK_EQ(psd_klpack_set(&p, k, n, p.len - 8),
					 1);
				CHECK_U64(p.n, ==, 0);
			}
		}
	}
	/* the top of the key space, exactly */
	k[0] = UINT64_MAX - 2;
	k[1] = UINT64_MAX - 1;
	k[2] = UINT64_MAX;
	CHECK_EQ(psd_klpack_set(&p, k, 3, UINT64_MAX), 0);
	CHECK_EQ(kp_unpack(p.buf, p.len, 3, u, &why), 0);
	CHECK(!memcmp(u, k, 3 * 8));
	psd_klpack_free(&p);
	free(k);
	free(u);
}

static void kp_put64(uint8_t *p, uint64_t x)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(x >> (8 * i));
}

/* Refused with -EPROTO and a reason naming @what. */
#define KP_REFUSED(buf, len, n, what)                                          \
	do {                                                                   \
		const char *why_;                                              \
		CHECK_EQ(kp_unpack((buf), (len), (n), u, &why_), -EPROTO);     \
		CHECK_STR(why_, why_ &&strstr(why_, (what)) ? why_ : (what));  \
	} while (0)

/* Sections a peer could send: truncated, padded, counts that lie, a
 * width above 8, a gap past 2^64, keys that repeat, go down or run past
 * 2^64 -- each refused with its reason; random corruption is either
 * refused or unpacks to strictly ascending keys. */
static void test_klpack_wire_malformed(void)
{
	size_t n = 3 * 256 + 5, i;
	uint64_t *k = malloc(n * 8), *u = malloc((n + 512) * 8);
	uint64_t nblk = 4;
	struct psd_klpack p = { 0 };
	uint8_t *b = malloc(8192);
	uint64_t len;
	const char *why;

	CHECK(k != NULL && u != NULL && b != NULL);
	test_rng_seed(9);
	/* block 1: 2-byte excesses, block 3 (the last, 5 keys): 8-byte */
	for (i = 0, k[0] = 1000; i + 1 < n; i++)
		k[i + 1] = k[i] + 10 +
			   (i / 256 == 1   ? test_rng_below(300)
			    : i / 256 == 3 ? test_rng_below(1ull << 60)
					   : 0);
	CHECK_EQ(psd_klpack_set(&p, k, n, UINT64_MAX), 0);
	len = p.len;
	CHECK(len <= 8192);
	memcpy(b, p.buf, len);
	CHECK_EQ(b[16 * nblk + 1], 2); /* block 1: 2-byte excesses */
	CHECK_EQ(b[16 * nblk + 3], 8); /* block 3: 8-byte */
	/* truncated, padded, not a multiple of 8 */
	KP_REFUSED(b, len - 8, n, "length");
	KP_REFUSED(b, len + 8, n, "length");
	KP_REFUSED(b, len - 3, n, "length");
	KP_REFUSED(b, 0, n, "length");
	/* key counts that do not match the section */
	KP_REFUSED(b, len, n + 1, "length");
	KP_REFUSED(b, len, n - 1, "length");
	KP_REFUSED(b, len, n + 256, "packed keys");
	KP_REFUSED(b, len, 0, "length");
	KP_REFUSED(b, len, UINT64_MAX, "length");
	/* a width above 8 */
	b[16 * nblk + 2] = 9;
	KP_REFUSED(b, len, n, "width");
	b[16 * nblk + 2] = 0;
	/* a width that says more bytes than the section has */
	b[16 * nblk + 2] = 8;
	KP_REFUSED(b, len, n, "length");
	b[16 * nblk + 2] = 0;
	CHECK_EQ(kp_unpack(b, len, n, u, &why), 0);
	CHECK(!memcmp(u, k, n * 8));
	/* block 1 (excesses): a step so big that step + excess wraps */
	kp_put64(b + 16 * 1 + 8, UINT64_MAX - 5);
	KP_REFUSED(b, len, n, "gap overflows");
	memcpy(b, p.buf, len);
	/* block 2 (strided): step 0 repeats the key */
	kp_put64(b + 16 * 2 + 8, 0);
	KP_REFUSED(b, len, n, "ascending");
	memcpy(b, p.buf, len);
	/* block 2 starts at or below block 1's last key */
	kp_put64(b + 16 * 2, k[511]);
	KP_REFUSED(b, len, n, "ascending");
	memcpy(b, p.buf, len);
	/* strided block 2 runs past 2^64 */
	kp_put64(b + 16 * 2, UINT64_MAX - 100);
	KP_REFUSED(b, len, n, "past 2^64");
	memcpy(b, p.buf, len);
	/* block 1 (excesses) runs past 2^64 without any gap wrapping */
	kp_put64(b + 16 * 1, UINT64_MAX - 1000);
	KP_REFUSED(b, len, n, "past 2^64");
	memcpy(b, p.buf, len);
	/* random corruption: refused, or strictly ascending keys */
	for (unsigned t = 0; t < 3000; t++) {
		int ret;

		memcpy(b, p.buf, len);
		for (unsigned f = 0; f < 1 + t % 4; f++)
			b[test_rng_below(len)] ^=
				(uint8_t)(1 + test_rng_below(255));
		ret = kp_unpack(b, len, n, u, &why);
		CHECK(ret == 0 || ret == -EPROTO);
		if (!ret)
			for (i = 1; i < n; i++)
				CHECK(u[i] > u[i - 1]);
		else
			CHECK(strstr(why, "packed keys") != NULL);
	}
	psd_klpack_free(&p);
	free(k);
	free(u);
	free(b);
}

const struct test_case test_list[] = {
	{ "klpack_wire_round_trip", test_klpack_wire_round_trip },
	{ "klpack_wire_malformed", test_klpack_wire_malformed },
	{ "klpack_strided", test_klpack_strided },
	{ "klpack_random_sorted", test_klpack_random_sorted },
	{ "klpack_every_width", test_klpack_every_width },
	{ "klpack_any_order_and_reuse", test_klpack_any_order_and_reuse },
	{ NULL, NULL },
};
