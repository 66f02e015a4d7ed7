// SPDX-License-Identifier: MIT
/*
 * Placement (common/placement.h): the per-server ranges of a tensor tile
 * [0, total) in rank order, respect the element size, are balanced, and
 * small tensors go whole to psd_place_home().
 */
#include <string.h>

#include "../harness.h"
#include "../../common/placement.h"

#define MAX_SERV     8
#define RANDOM_CASES 20000

struct layout {
	uint64_t off[MAX_SERV];
	uint64_t len[MAX_SERV];
};

static void place_all(uint64_t key, uint64_t total, unsigned esize,
		      unsigned nserv, struct layout *l)
{
	unsigned r;

	memset(l, 0xa5, sizeof(*l));
	for (r = 0; r < nserv; r++)
		psd_place(key, total, esize, nserv, r, &l->off[r], &l->len[r]);
}

/* Every invariant of one (key, total, esize, nserv) case. */
static void check_case_at(const char *file, int line, uint64_t key,
			  uint64_t total, unsigned esize, unsigned nserv)
{
	struct layout l, again;
	uint64_t next = 0, minlen = UINT64_MAX, maxlen = 0;
	unsigned r, holders = 0, home;
	bool split = nserv > 1 && total >= PSD_PLACE_SPLIT_MIN;

#define FAIL_IF(cond)                                                          \
	do {                                                                   \
		if (cond)                                                      \
			test_fail_at(file, line,                               \
				     "%s: key %llu total %llu esize %u "       \
				     "nserv %u rank %u off %llu len %llu",     \
				     #cond, (unsigned long long)key,           \
				     (unsigned long long)total, esize, nserv,  \
				     r, (unsigned long long)l.off[r],          \
				     (unsigned long long)l.len[r]);            \
	} while (0)

	place_all(key, total, esize, nserv, &l);
	home = psd_place_home(key, nserv);
	r = 0;
	FAIL_IF(home >= nserv);
	for (r = 0; r < nserv; r++) {
		FAIL_IF(l.off[r] % esize != 0);
		FAIL_IF(l.len[r] % esize != 0);
		FAIL_IF(l.off[r] > total);
		FAIL_IF(l.len[r] > total - l.off[r]);
		if (l.len[r] == 0)
			continue;
		/* Non-empty ranges follow each other in rank order. */
		FAIL_IF(l.off[r] != next);
		next = l.off[r] + l.len[r];
		holders++;
	}
	r = nserv;
	/* Together they cover [0, total) exactly. */
	FAIL_IF(next != total);
	if (split) {
		/* Every server owns a part, back to back from 0. */
		for (r = 0; r < nserv; r++) {
			FAIL_IF(l.len[r] == 0);
			FAIL_IF(l.off[r] !=
				(r ? l.off[r - 1] + l.len[r - 1] : 0));
			if (l.len[r] < minlen)
				minlen = l.len[r];
			if (l.len[r] > maxlen)
				maxlen = l.len[r];
		}
		r = nserv;
		FAIL_IF(maxlen - minlen > esize);
	} else {
		/* Whole tensor on the home server, nothing elsewhere. */
		FAIL_IF(holders != 1);
		r = home;
		FAIL_IF(l.off[r] != 0);
		FAIL_IF(l.len[r] != total);
		if (nserv == 1)
			FAIL_IF(home != 0);
	}
	/* Determinism: asking again, in reverse rank order, agrees. */
	memset(&again, 0x5a, sizeof(again));
	for (r = nserv; r-- > 0;) {
		psd_place(key, total, esize, nserv, r, &again.off[r],
			  &again.len[r]);
		FAIL_IF(again.off[r] != l.off[r] || again.len[r] != l.len[r]);
	}
	r = 0;
	FAIL_IF(psd_place_home(key, nserv) != home);
#undef FAIL_IF
}

#define check_case(key, total, esize, nserv)                                   \
	check_case_at(__FILE__, __LINE__, (key), (total), (esize), (nserv))

static const unsigned esizes[] = { 1, 4, 8 };

/* One total: every server count, element size and a few keys. */
static void check_total(uint64_t total)
{
	unsigned nserv, e;
	uint64_t key;

	for (nserv = 1; nserv <= MAX_SERV; nserv++)
		for (e = 0; e < 3; e++) {
			if (total % esizes[e])
				continue;
			for (key = 0; key < 16; key++)
				check_case(key * 0x100000001ull, total,
					   esizes[e], nserv);
		}
}

static void test_placement_around_split_min(void)
{
	static const int deltas[] = {
		-64, -16, -8, -4, -1, 0, 1, 4, 8, 16, 64
	};
	size_t d;

	for (d = 0; d < sizeof(deltas) / sizeof(deltas[0]); d++)
		check_total(
			(uint64_t)((int64_t)PSD_PLACE_SPLIT_MIN + deltas[d]));
}

static void test_placement_small_and_huge(void)
{
	static const uint64_t totals[] = { 8,
					   16,
					   24,
					   4096,
					   PSD_PLACE_SPLIT_MIN * 2,
					   (1ull << 20) + 8,
					   1ull << 32,
					   (1ull << 34) - 8,
					   1ull << 34 };
	unsigned nserv, e;
	size_t t;

	for (nserv = 1; nserv <= MAX_SERV; nserv++) {
		check_case(7, 1, 1, nserv);
		check_case(7, 4, 4, nserv);
		for (e = 0; e < 3; e++)
			for (t = 0; t < sizeof(totals) / sizeof(totals[0]); t++)
				check_case(UINT64_MAX - t, totals[t], esizes[e],
					   nserv);
	}
}

static void test_placement_random_cases(void)
{
	unsigned i, nserv, esize;
	uint64_t key, total;

	test_rng_seed(0x706c616365ull);
	for (i = 0; i < RANDOM_CASES; i++) {
		nserv = 1 + (unsigned)test_rng_below(MAX_SERV);
		esize = esizes[test_rng_below(3)];
		key = test_rng_next();
		switch (test_rng_below(3)) {
		case 0: /* log-uniform in [1, 2^34] */
			total = 1 + test_rng_below(1ull
						   << (1 + test_rng_below(34)));
			break;
		case 1: /* within 1 KiB of the split threshold */
			total = PSD_PLACE_SPLIT_MIN - 1024 +
				test_rng_below(2048);
			break;
		default:
			total = 1 + test_rng_below(1ull << 34);
			break;
		}
		total = total / esize * esize;
		if (total == 0)
			total = esize;
		check_case(key, total, esize, nserv);
	}
}

/* Exact values where the split has only one possible answer. */
static void test_placement_exact_even_split(void)
{
	uint64_t off, len;
	unsigned r;

	psd_place(1, 1ull << 20, 4, 2, 0, &off, &len);
	CHECK_U64(off, ==, 0);
	CHECK_U64(len, ==, 1ull << 19);
	psd_place(1, 1ull << 20, 4, 2, 1, &off, &len);
	CHECK_U64(off, ==, 1ull << 19);
	CHECK_U64(len, ==, 1ull << 19);
	for (r = 0; r < 4; r++) {
		psd_place(99, 1ull << 34, 8, 4, r, &off, &len);
		CHECK_U64(off, ==, (uint64_t)r << 32);
		CHECK_U64(len, ==, 1ull << 32);
	}
	for (r = 0; r < 8; r++) {
		psd_place(5, PSD_PLACE_SPLIT_MIN, 1, 8, r, &off, &len);
		CHECK_U64(off, ==, (uint64_t)r * (PSD_PLACE_SPLIT_MIN / 8));
		CHECK_U64(len, ==, PSD_PLACE_SPLIT_MIN / 8);
	}
	/* 3 servers, 65539 bytes: lengths 21846/21846/21847 in some order. */
	{
		uint64_t sum = 0, n21847 = 0;

		for (r = 0; r < 3; r++) {
			psd_place(5, PSD_PLACE_SPLIT_MIN + 3, 1, 3, r, &off,
				  &len);
			CHECK_U64(off, ==, sum);
			CHECK(len == 21846 || len == 21847);
			n21847 += len == 21847;
			sum += len;
		}
		CHECK_U64(sum, ==, PSD_PLACE_SPLIT_MIN + 3);
		CHECK_U64(n21847, ==, 1);
	}
}

static void test_placement_small_goes_home(void)
{
	uint64_t off, len, key;
	unsigned r, home;

	for (key = 0; key < 200; key++) {
		home = psd_place_home(key, 5);
		for (r = 0; r < 5; r++) {
			off = len = 12345;
			psd_place(key, PSD_PLACE_SPLIT_MIN - 4, 4, 5, r, &off,
				  &len);
			CHECK_U64(off, ==, 0);
			CHECK_U64(len, ==,
				  r == home ? PSD_PLACE_SPLIT_MIN - 4 : 0);
		}
	}
	/* One server: everything is rank 0's, split size or not. */
	CHECK_EQ(psd_place_home(UINT64_MAX, 1), 0);
	psd_place(UINT64_MAX, 1ull << 34, 8, 1, 0, &off, &len);
	CHECK_U64(off, ==, 0);
	CHECK_U64(len, ==, 1ull << 34);
}

static void test_placement_home_spread(void)
{
	unsigned count[4] = { 0 }, r;
	uint64_t key;

	for (key = 0; key < 10000; key++) {
		r = psd_place_home(key, 4);
		CHECK_INT(r, <, 4);
		count[r]++;
	}
	for (r = 0; r < 4; r++) {
		CHECK_INT(count[r], >=, 2000);
		CHECK_INT(count[r], <=, 3000);
	}
	/* Keys that differ only in their high bits spread too. */
	memset(count, 0, sizeof(count));
	for (key = 0; key < 10000; key++)
		count[psd_place_home(key << 40, 4)]++;
	for (r = 0; r < 4; r++) {
		CHECK_INT(count[r], >=, 2000);
		CHECK_INT(count[r], <=, 3000);
	}
}

/* Any server count: no server gets under half or over 1.5x its share. */
static void test_placement_home_spread_any_count(void)
{
	unsigned count[MAX_SERV], nserv, r;
	uint64_t key;

	for (nserv = 2; nserv <= MAX_SERV; nserv++) {
		memset(count, 0, sizeof(count));
		for (key = 0; key < 10000; key++) {
			r = psd_place_home(key, nserv);
			CHECK_INT(r, <, nserv);
			count[r]++;
		}
		for (r = 0; r < nserv; r++) {
			CHECK_INT(count[r] * 2 * nserv, >=, 10000);
			CHECK_INT(count[r] * 2 * nserv, <=, 30000);
		}
	}
}

/* The home of a key does not depend on anything but (key, nserv). */
static void test_placement_home_deterministic(void)
{
	unsigned first[256], nserv;
	uint64_t key;

	for (nserv = 1; nserv <= MAX_SERV; nserv++) {
		for (key = 0; key < 256; key++)
			first[key] = psd_place_home(key * 977, nserv);
		for (key = 256; key-- > 0;)
			CHECK_EQ(psd_place_home(key * 977, nserv), first[key]);
	}
}

const struct test_case test_list[] = {
	{ "placement_around_split_min", test_placement_around_split_min },
	{ "placement_small_and_huge", test_placement_small_and_huge },
	{ "placement_random_cases", test_placement_random_cases },
	{ "placement_exact_even_split", test_placement_exact_even_split },
	{ "placement_small_goes_home", test_placement_small_goes_home },
	{ "placement_home_spread", test_placement_home_spread },
	{ "placement_home_spread_any_count",
	  test_placement_home_spread_any_count },
	{ "placement_home_deterministic", test_placement_home_deterministic },
	{ NULL, NULL },
};
