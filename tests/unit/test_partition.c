// SPDX-License-Identifier: MIT
/* The partition rule shared by worker and server (common/partition.h). */
#include <errno.h>
#include <stdlib.h>

#include "../harness.h"
#include "partition.h"

#define PART_CASES 3000

static const uint64_t primes[] = { 2, 3, 5, 7, 13, 31, 127, 997, 4093, 65521 };

static uint64_t pick_range_len(void)
{
	switch (test_rng_below(5)) {
	case 0:
		return 1 + test_rng_below(8);
	case 1:
		return primes[test_rng_below(sizeof(primes) /
					     sizeof(primes[0]))];
	case 2:
		return 8 * (1 + test_rng_below(512));
	default:
		return 1 + test_rng_below(20000);
	}
}

static uint64_t pick_part_bytes(uint64_t range_len, unsigned int elem)
{
	switch (test_rng_below(6)) {
	case 0:
		return 0; /* no partitioning */
	case 1:
		return test_rng_below(elem + 1); /* below one element */
	case 2:
		return range_len + 1 +
		       test_rng_below(1000); /* larger than range */
	case 3:
		return elem * (1 + test_rng_below(64)) + 1 +
		       test_rng_below(elem);
	case 4:
		return primes[test_rng_below(sizeof(primes) /
					     sizeof(primes[0]))];
	default:
		return 1 + test_rng_below(range_len + 64);
	}
}

static uint64_t pick_range_off(void)
{
	switch (test_rng_below(3)) {
	case 0:
		return 0;
	case 1:
		return test_rng_below(1u << 20);
	default:
		return (1ull << 63) + test_rng_below(1u << 20);
	}
}

/* Walk every chunk of one layout and check it against the definition. */
static void check_layout(uint64_t range_off, uint64_t range_len, uint64_t part,
			 unsigned int elem)
{
	uint64_t c = psd_part_chunk_size(part, elem, range_len);
	uint64_t n = psd_part_count(range_len, c);
	uint64_t next = range_off;
	uint64_t i;

	CHECK_U64(c, >=, 1);
	CHECK_U64(c, <=, range_len);
	if (!part)
		CHECK_U64(c, ==, range_len);
	else
		CHECK(c % elem == 0 || c == range_len);
	if (part >= elem && c < range_len)
		CHECK_U64(c, <=, part);
	for (i = 0; i < n; i++) {
		uint64_t off;
		uint64_t len;
		uint64_t idx = UINT64_MAX;

		psd_part_chunk(range_off, range_len, c, i, &off, &len);
		CHECK_U64(off, ==, next); /* contiguous: no gap, no overlap */
		CHECK_U64(len, >=, 1);
		CHECK_U64(len, <=, c);
		if (i + 1 < n)
			CHECK_U64(len, ==, c);
		CHECK_EQ(
			psd_part_index(range_off, range_len, c, off, len, &idx),
			0);
		CHECK_U64(idx, ==, i);
		next = off + len;
	}
	CHECK_U64(next, ==, range_off + range_len);
}

static void test_partition_chunk_size(void)
{
	CHECK_U64(psd_part_chunk_size(0, 4, 1000), ==, 1000);
	CHECK_U64(psd_part_chunk_size(100, 4, 1000), ==, 100);
	CHECK_U64(psd_part_chunk_size(103, 4, 1000), ==, 100);
	CHECK_U64(psd_part_chunk_size(103, 8, 1000), ==, 96);
	CHECK_U64(psd_part_chunk_size(103, 2, 1000), ==, 102);
	CHECK_U64(psd_part_chunk_size(103, 1, 1000), ==, 103);
	CHECK_U64(psd_part_chunk_size(3, 4, 1000), ==, 4);
	CHECK_U64(psd_part_chunk_size(1, 8, 1000), ==, 8);
	CHECK_U64(psd_part_chunk_size(5000, 4, 1000), ==, 1000);
	CHECK_U64(psd_part_chunk_size(5000, 4, 1), ==, 1);
	CHECK_U64(psd_part_chunk_size(1, 8, 3), ==, 3);
	CHECK_U64(psd_part_chunk_size(7, 0, 100), ==, 7);
	CHECK_U64(psd_part_chunk_size(64, 4, 0), ==, 0);
	CHECK_U64(psd_part_chunk_size(0, 4, 0), ==, 0);
	CHECK_U64(psd_part_chunk_size(UINT64_MAX, 8, UINT64_MAX), ==,
		  UINT64_MAX - 7);

	CHECK_U64(psd_part_count(0, 10), ==, 0);
	CHECK_U64(psd_part_count(0, 0), ==, 0);
	CHECK_U64(psd_part_count(10, 0), ==, 1);
	CHECK_U64(psd_part_count(10, 10), ==, 1);
	CHECK_U64(psd_part_count(11, 10), ==, 2);
	CHECK_U64(psd_part_count(1, 1), ==, 1);
	CHECK_U64(psd_part_count(UINT64_MAX, 1ull << 63), ==, 2);
	CHECK_U64(psd_part_count(UINT64_MAX, UINT64_MAX), ==, 1);
}

static void test_partition_fixed_layouts(void)
{
	static const unsigned int elems[] = { 1, 2, 4, 8 };
	size_t e;

	for (e = 0; e < 4; e++) {
		unsigned int elem = elems[e];

		check_layout(0, 1, 1, elem);
		check_layout(7, 1, 0, elem);
		check_layout(0, 997, 64, elem);
		check_layout(3, 997, 65, elem);
		check_layout(0, 65521, 4093, elem);
		check_layout(100, 4096, 4096, elem);
		check_layout(100, 4096, 4097, elem);
		check_layout(100, 4096, 4095, elem);
		check_layout(0, 4096, 1, elem);
		check_layout(1ull << 63, 13, 5, elem);
	}
}

static void test_partition_random_layouts(void)
{
	static const unsigned int elems[] = { 1, 2, 4, 8 };
	int i;

	test_rng_seed(1);
	for (i = 0; i < PART_CASES; i++) {
		unsigned int elem = elems[test_rng_below(4)];
		uint64_t range_len = pick_range_len();
		uint64_t part = pick_part_bytes(range_len, elem);

		check_layout(pick_range_off(), range_len, part, elem);
	}
}

static void check_rejected(uint64_t range_off, uint64_t range_len, uint64_t c,
			   uint64_t off, uint64_t len)
{
	uint64_t idx = 12345;

	CHECK_EQ(psd_part_index(range_off, range_len, c, off, len, &idx),
		 -EPROTO);
	CHECK_U64(idx, ==, 12345); /* untouched on error */
}

static void test_partition_index_rejects(void)
{
	const uint64_t big = 1ull << 63;
	uint64_t idx = 0;

	/* Range [1000, 1250), c = 100: chunks 1000+100, 1100+100, 1200+50. */
	check_rejected(1000, 250, 100, 1000, 0);   /* zero length */
	check_rejected(1000, 250, 100, 1001, 100); /* misaligned */
	check_rejected(1000, 250, 100, 1050, 50);  /* misaligned, in range */
	check_rejected(1000, 250, 100, 1100, 99);  /* short */
	check_rejected(1000, 250, 100, 1100, 101); /* long */
	check_rejected(1000, 250, 100, 1200, 49);  /* short last chunk */
	check_rejected(1000, 250, 100, 1200, 100); /* last chunk, full size */
	check_rejected(1000, 250, 100, 1000, 250); /* whole range */
	check_rejected(1000, 250, 100, 900, 100);  /* before the range */
	check_rejected(1000, 250, 100, 0, 100);
	check_rejected(1000, 250, 100, 1250, 100); /* at the end */
	check_rejected(1000, 250, 100, 1300, 100); /* after the end */
	check_rejected(1000, 250, 100, UINT64_MAX, 1);
	check_rejected(1000, 250, 100, 1000, UINT64_MAX);
	check_rejected(1000, 250, 100, big, big); /* off + len wraps */
	check_rejected(1000, 250, 100, 1100, big + 100);
	check_rejected(1000, 0, 100, 1000, 100); /* empty range */
	check_rejected(1000, 0, 0, 1000, 0);
	/* c == 0: the whole range is the only chunk. */
	check_rejected(1000, 250, 0, 1000, 100);
	CHECK_EQ(psd_part_index(1000, 250, 0, 1000, 250, &idx), 0);
	CHECK_U64(idx, ==, 0);
	/* A range that wraps around 2^64 is no layout at all. */
	check_rejected(UINT64_MAX - 10, 100, 10, UINT64_MAX - 10, 10);
	check_rejected(big, big, big, big, big);

	/* Huge but valid: [2^63, 2^63 + 2^62) in chunks of 2^61. */
	CHECK_EQ(psd_part_index(big, big >> 1, big >> 2, big + (big >> 2),
				big >> 2, &idx),
		 0);
	CHECK_U64(idx, ==, 1);
	check_rejected(big, big >> 1, big >> 2, big + (big >> 2), big >> 1);
	check_rejected(big, big >> 1, big >> 2, big + (big >> 1), big >> 2);
	check_rejected(big, big >> 1, big >> 2, big - (big >> 2), big >> 2);
	/* The range ending at UINT64_MAX is fine, one byte before 2^64. */
	CHECK_EQ(psd_part_index(big, big - 1, big >> 1, big + (big >> 1),
				(big >> 1) - 1, &idx),
		 0);
	CHECK_U64(idx, ==, 1);
	check_rejected(big, big - 1, big >> 1, big + (big >> 1), big >> 1);
}

static void test_partition_index_random_rejects(void)
{
	static const unsigned int elems[] = { 1, 2, 4, 8 };
	int i;

	test_rng_seed(2);
	for (i = 0; i < PART_CASES; i++) {
		unsigned int elem = elems[test_rng_below(4)];
		uint64_t range_off = pick_range_off();
		uint64_t range_len = pick_range_len();
		uint64_t c = psd_part_chunk_size(
			pick_part_bytes(range_len, elem), elem, range_len);
		uint64_t n = psd_part_count(range_len, c);
		uint64_t k = test_rng_below(n);
		uint64_t off;
		uint64_t len;
		uint64_t idx;

		psd_part_chunk(range_off, range_len, c, k, &off, &len);
		CHECK_EQ(
			psd_part_index(range_off, range_len, c, off, len, &idx),
			0);
		CHECK_U64(idx, ==, k);
		check_rejected(range_off, range_len, c, off, len + 1);
		check_rejected(range_off, range_len, c, off, len - 1);
		if (k + 1 == n) /* just past the end */
			check_rejected(range_off, range_len, c, off + len, len);
		check_rejected(range_off, range_len, c, range_off - 1 - k, len);
		check_rejected(range_off, range_len, c, off, UINT64_MAX - k);
		if (c > 1) {
			uint64_t shift = 1 + test_rng_below(c - 1);

			check_rejected(range_off, range_len, c, off + shift,
				       len);
			check_rejected(range_off, range_len, c, off + shift,
				       len - shift);
		}
	}
}

const struct test_case test_list[] = {
	{ "partition_chunk_size", test_partition_chunk_size },
	{ "partition_fixed_layouts", test_partition_fixed_layouts },
	{ "partition_random_layouts", test_partition_random_layouts },
	{ "partition_index_rejects", test_partition_index_rejects },
	{ "partition_index_random_rejects",
	  test_partition_index_random_rejects },
	{ NULL, NULL },
};
