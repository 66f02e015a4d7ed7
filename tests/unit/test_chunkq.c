// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../../worker/chunkq.h"

#define HEAP_OPS   10000
#define PART_CASES 3000

struct test_chunk {
	unsigned int id;
	struct psd_chunk_node node;
};

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

static void test_chunkq_part_chunk_size(void)
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

static void test_chunkq_part_fixed_layouts(void)
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

static void test_chunkq_part_random_layouts(void)
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

static void test_chunkq_part_index_rejects(void)
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

static void test_chunkq_part_index_random_rejects(void)
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

/* The queued chunk that must come out next: min by (prio, seq). */
static struct test_chunk *ref_min(struct test_chunk **ref, size_t n, bool fifo,
				  size_t *at)
{
	struct test_chunk *best = NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct psd_chunk_node *a = &ref[i]->node;

		if (best && !fifo && a->prio != best->node.prio) {
			if (a->prio > best->node.prio)
				continue;
		} else if (best && a->seq > best->node.seq) {
			continue;
		}
		best = ref[i];
		*at = i;
	}
	return best;
}

static void ref_drop(struct test_chunk **ref, size_t *n, size_t at)
{
	ref[at] = ref[--*n];
}

static void run_heap_vs_reference(bool fifo, uint64_t seed)
{
	static struct test_chunk chunks[HEAP_OPS];
	static struct test_chunk *ref[HEAP_OPS];
	struct psd_chunkq q;
	size_t n = 0;
	size_t at = 0;
	unsigned int used = 0;
	int i;

	test_rng_seed(seed);
	CHECK_EQ(psd_chunkq_init(&q, 1, fifo ? PSD_CHUNKQ_FIFO : 0), 0);
	for (i = 0; i < HEAP_OPS; i++) {
		uint64_t op = test_rng_below(10);
		struct test_chunk *want;
		struct psd_chunk_node *got;

		if (op < 5 && used < HEAP_OPS) {
			struct test_chunk *t = &chunks[used];

			t->id = used++;
			t->node.len = 1 + test_rng_below(4096);
			psd_chunk_node_init(&t->node);
			CHECK_EQ(psd_chunkq_push(&q, &t->node,
						 (int64_t)test_rng_below(16) -
							 8),
				 0);
			CHECK(psd_chunk_node_is_queued(&t->node));
			ref[n++] = t;
		} else if (op < 8) {
			want = ref_min(ref, n, fifo, &at);
			got = psd_chunkq_pop(&q);
			if (!want) {
				CHECK(!got);
				continue;
			}
			CHECK(got == &want->node);
			CHECK_EQ(psd_container_of(got, struct test_chunk, node)
					 ->id,
				 want->id);
			CHECK(!psd_chunk_node_is_queued(got));
			ref_drop(ref, &n, at);
		} else if (n) {
			at = test_rng_below(n);
			CHECK_EQ(psd_chunkq_remove(&q, &ref[at]->node), 0);
			CHECK_EQ(psd_chunkq_remove(&q, &ref[at]->node),
				 -ENOENT);
			ref_drop(ref, &n, at);
		}
		CHECK_U64(psd_chunkq_len(&q), ==, n);
		want = ref_min(ref, n, fifo, &at);
		got = psd_chunkq_peek(&q);
		CHECK(got == (want ? &want->node : NULL));
	}
	/* Drain what is left, still in reference order. */
	while (n) {
		struct test_chunk *want = ref_min(ref, n, fifo, &at);

		CHECK(psd_chunkq_pop(&q) == &want->node);
		ref_drop(ref, &n, at);
	}
	CHECK(!psd_chunkq_pop(&q));
	CHECK(!psd_chunkq_peek(&q));
	psd_chunkq_fini(&q);
}

static void test_chunkq_heap_matches_reference(void)
{
	run_heap_vs_reference(false, 3);
}

static void test_chunkq_heap_fifo_mode_matches_reference(void)
{
	run_heap_vs_reference(true, 4);
}

static void test_chunkq_equal_priority_is_fifo(void)
{
	struct test_chunk chunks[100];
	struct psd_chunkq q;
	unsigned int i;

	CHECK_EQ(psd_chunkq_init(&q, 0, 0), 0);
	for (i = 0; i < 100; i++) {
		chunks[i].id = i;
		chunks[i].node.len = 1;
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, 7), 0);
	}
	for (i = 0; i < 100; i++) {
		struct psd_chunk_node *got = psd_chunkq_pop(&q);

		CHECK(got);
		CHECK_EQ(psd_container_of(got, struct test_chunk, node)->id, i);
	}
	CHECK(!psd_chunkq_pop(&q));
	psd_chunkq_fini(&q);
}

static void test_chunkq_later_higher_priority_goes_first(void)
{
	struct test_chunk low[3];
	struct test_chunk high;
	struct psd_chunkq q;
	int i;

	CHECK_EQ(psd_chunkq_init(&q, 4, 0), 0);
	for (i = 0; i < 3; i++)
		CHECK_EQ(psd_chunkq_push(&q, &low[i].node, 5), 0);
	CHECK(psd_chunkq_pop(&q) == &low[0].node);
	/* Layer 1's gradient arrives after layer 5's chunks were queued. */
	CHECK_EQ(psd_chunkq_push(&q, &high.node, 1), 0);
	CHECK(psd_chunkq_peek(&q) == &high.node);
	CHECK(psd_chunkq_pop(&q) == &high.node);
	CHECK(psd_chunkq_pop(&q) == &low[1].node);
	CHECK(psd_chunkq_pop(&q) == &low[2].node);
	/* Negative priorities are just smaller. */
	CHECK_EQ(psd_chunkq_push(&q, &low[0].node, 0), 0);
	CHECK_EQ(psd_chunkq_push(&q, &low[1].node, INT64_MIN), 0);
	CHECK_EQ(psd_chunkq_push(&q, &low[2].node, INT64_MAX), 0);
	CHECK(psd_chunkq_pop(&q) == &low[1].node);
	CHECK(psd_chunkq_pop(&q) == &low[0].node);
	CHECK(psd_chunkq_pop(&q) == &low[2].node);
	psd_chunkq_fini(&q);
}

static void test_chunkq_fifo_mode_ignores_priority(void)
{
	struct test_chunk chunks[50];
	struct psd_chunkq q;
	unsigned int i;

	CHECK_EQ(psd_chunkq_init(&q, 0, PSD_CHUNKQ_FIFO), 0);
	for (i = 0; i < 50; i++) {
		chunks[i].id = i;
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, 100 - (int)i), 0);
	}
	for (i = 0; i < 50; i++)
		CHECK(psd_chunkq_pop(&q) == &chunks[i].node);
	psd_chunkq_fini(&q);
}

static void test_chunkq_remove(void)
{
	struct test_chunk chunks[8];
	struct test_chunk other;
	struct psd_chunkq q;
	struct psd_chunkq q2;
	int i;

	CHECK_EQ(psd_chunkq_init(&q, 0, 0), 0);
	CHECK_EQ(psd_chunkq_init(&q2, 0, 0), 0);
	for (i = 0; i < 8; i++)
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, i), 0);
	CHECK_EQ(psd_chunkq_push(&q2, &other.node, 0), 0);

	CHECK_EQ(psd_chunkq_remove(&q, &chunks[0].node), 0); /* head */
	CHECK_EQ(psd_chunkq_remove(&q, &chunks[7].node), 0); /* a leaf */
	CHECK_EQ(psd_chunkq_remove(&q, &chunks[3].node), 0); /* middle */
	CHECK_EQ(psd_chunkq_remove(&q, &chunks[3].node), -ENOENT);
	CHECK_EQ(psd_chunkq_remove(&q, &other.node), -ENOENT);
	psd_chunk_node_init(&chunks[0].node);
	CHECK_EQ(psd_chunkq_remove(&q, &chunks[0].node), -ENOENT);
	CHECK_U64(psd_chunkq_len(&q), ==, 5);
	CHECK_U64(psd_chunkq_len(&q2), ==, 1);
	CHECK(psd_chunkq_pop(&q) == &chunks[1].node);
	CHECK(psd_chunkq_pop(&q) == &chunks[2].node);
	CHECK(psd_chunkq_pop(&q) == &chunks[4].node);
	CHECK(psd_chunkq_pop(&q) == &chunks[5].node);
	CHECK(psd_chunkq_pop(&q) == &chunks[6].node);
	CHECK(!psd_chunkq_pop(&q));
	CHECK_EQ(psd_chunkq_remove(&q, &chunks[6].node), -ENOENT);
	/* Removing the only element. */
	CHECK_EQ(psd_chunkq_remove(&q2, &other.node), 0);
	CHECK_U64(psd_chunkq_len(&q2), ==, 0);
	psd_chunkq_fini(&q2);
	psd_chunkq_fini(&q);
}

static void test_chunkq_init_grow_fini(void)
{
	static struct test_chunk chunks[1000];
	struct psd_chunkq q;
	int i;

	CHECK_EQ(psd_chunkq_init(&q, 0, 0x2), -EINVAL);
	psd_chunkq_fini(&q); /* safe after a failed init */
	psd_chunkq_fini(&q); /* and twice */

	CHECK_EQ(psd_chunkq_init(&q, 0, 0), 0);
	CHECK(!psd_chunkq_peek(&q));
	CHECK(!psd_chunkq_pop(&q));
	CHECK_U64(psd_chunkq_len(&q), ==, 0);
	for (i = 0; i < 1000; i++)
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, 999 - i), 0);
	CHECK_U64(psd_chunkq_len(&q), ==, 1000);
	for (i = 999; i >= 0; i--)
		CHECK(psd_chunkq_pop(&q) == &chunks[i].node);
	psd_chunkq_fini(&q);

	CHECK_EQ(psd_chunkq_init(&q, 3, 0), 0);
	for (i = 0; i < 10; i++)
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, 0), 0);
	psd_chunkq_fini(&q); /* nodes still queued: they are the caller's */
}

/*
 * Random start/complete sequence through the gate: never more than the
 * credit in flight, except one oversized chunk alone; never a refusal that
 * the rule does not call for.
 */
static void run_credit_sim(uint64_t credit, uint64_t max_len, uint64_t seed)
{
	uint64_t lens[64];
	size_t n = 0;
	uint64_t pending;
	uint64_t sum = 0;
	uint64_t max_seen = 0;
	uint64_t started = 0;
	struct psd_credit c;
	int i;

	test_rng_seed(seed);
	psd_credit_init(&c, credit);
	pending = 1 + test_rng_below(max_len);
	for (i = 0; i < 20000; i++) {
		if (n < 64 && test_rng_below(2)) {
			bool can = psd_credit_can_start(&c, pending);

			CHECK_EQ(can,
				 !credit || !sum || sum + pending <= credit);
			if (!can)
				continue;
			psd_credit_start(&c, pending);
			lens[n++] = pending;
			sum += pending;
			started++;
			if (sum > max_seen)
				max_seen = sum;
			CHECK(!credit || sum <= credit || n == 1);
			pending = 1 + test_rng_below(max_len);
		} else if (n) {
			size_t k = test_rng_below(n);

			psd_credit_done(&c, lens[k]);
			sum -= lens[k];
			lens[k] = lens[--n];
		}
		CHECK_U64(c.in_flight, ==, sum);
	}
	CHECK_U64(c.max_in_flight_seen, ==, max_seen);
	CHECK_U64(c.started, ==, started);
	CHECK(started > 100);
	if (credit)
		CHECK_U64(c.max_in_flight_seen, <=,
			  credit > max_len ? credit : max_len);
}

static void test_chunkq_credit_random_never_exceeds(void)
{
	run_credit_sim(1000, 300, 5);  /* chunks always fit */
	run_credit_sim(1000, 2500, 6); /* some chunks larger than the credit */
	run_credit_sim(1, 50, 7);
	run_credit_sim(UINT64_MAX, 1000, 8);
}

static void test_chunkq_credit_one_chunk_is_stop_and_wait(void)
{
	static struct test_chunk chunks[200];
	struct psd_chunkq q;
	struct psd_credit c;
	struct psd_chunk_node *node;
	int i;

	CHECK_EQ(psd_chunkq_init(&q, 0, 0), 0);
	psd_credit_init(&c, 4096);
	for (i = 0; i < 200; i++) {
		chunks[i].node.len = 4096;
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, i % 7), 0);
	}
	while ((node = psd_sched_next(&q, &c))) {
		CHECK_U64(c.in_flight, ==, 4096);
		CHECK(!psd_sched_next(&q, &c)); /* never two in flight */
		psd_credit_done(&c, node->len);
	}
	CHECK_U64(psd_chunkq_len(&q), ==, 0);
	CHECK_U64(c.started, ==, 200);
	CHECK_U64(c.max_in_flight_seen, ==, 4096);
	psd_chunkq_fini(&q);
}

static void test_chunkq_credit_unlimited(void)
{
	static struct test_chunk chunks[1000];
	struct psd_chunkq q;
	struct psd_credit c;
	uint64_t total = 0;
	int i;

	CHECK_EQ(psd_chunkq_init(&q, 0, PSD_CHUNKQ_FIFO), 0);
	psd_credit_init(&c, 0);
	test_rng_seed(9);
	for (i = 0; i < 1000; i++) {
		chunks[i].node.len = 1 + test_rng_below(1u << 24);
		total += chunks[i].node.len;
		CHECK_EQ(psd_chunkq_push(&q, &chunks[i].node, 0), 0);
	}
	for (i = 0; i < 1000; i++)
		CHECK(psd_sched_next(&q, &c) == &chunks[i].node);
	CHECK(!psd_sched_next(&q, &c));
	CHECK_U64(c.in_flight, ==, total);
	CHECK_U64(c.max_in_flight_seen, ==, total);
	CHECK_U64(c.started, ==, 1000);
	CHECK(psd_credit_can_start(&c, UINT64_MAX - total));
	psd_chunkq_fini(&q);
}

static void test_chunkq_credit_set_mid_run(void)
{
	struct psd_credit c;

	psd_credit_init(&c, 100);
	CHECK(psd_credit_can_start(&c, 100));
	psd_credit_start(&c, 60);
	psd_credit_start(&c, 40);
	CHECK(!psd_credit_can_start(&c, 1));
	/* Lowered below what is in flight: in-flight bytes stay counted. */
	psd_credit_set(&c, 50);
	CHECK_U64(c.in_flight, ==, 100);
	CHECK(!psd_credit_can_start(&c, 1));
	psd_credit_done(&c, 40);
	CHECK(!psd_credit_can_start(&c, 1)); /* 60 still > 50 */
	psd_credit_done(&c, 60);
	CHECK(psd_credit_can_start(&c, 80)); /* oversized, but alone */
	psd_credit_start(&c, 80);
	CHECK(!psd_credit_can_start(&c, 10));
	psd_credit_done(&c, 80);
	psd_credit_start(&c, 10);
	CHECK(psd_credit_can_start(&c, 40));
	psd_credit_start(&c, 40);
	CHECK(!psd_credit_can_start(&c, 1));
	/* Raised: room at once. */
	psd_credit_set(&c, 1000);
	CHECK(psd_credit_can_start(&c, 950));
	CHECK(!psd_credit_can_start(&c, 951));
	CHECK(!psd_credit_can_start(&c, UINT64_MAX));
	/* Unlimited. */
	psd_credit_set(&c, 0);
	CHECK(psd_credit_can_start(&c, UINT64_MAX - 50));
	CHECK_U64(c.max_in_flight_seen, ==, 100);
	CHECK_U64(c.started, ==, 5);
}

static void test_chunkq_sched_next_keeps_head_of_line(void)
{
	struct test_chunk big;
	struct test_chunk small;
	struct psd_chunkq q;
	struct psd_credit c;

	CHECK_EQ(psd_chunkq_init(&q, 0, 0), 0);
	psd_credit_init(&c, 100);
	CHECK(!psd_sched_next(&q, &c)); /* empty */
	psd_credit_start(&c, 50);	/* something else is in flight */
	big.node.len = 100;
	small.node.len = 10;
	CHECK_EQ(psd_chunkq_push(&q, &small.node, 1), 0);
	CHECK_EQ(psd_chunkq_push(&q, &big.node, 0), 0);
	/* The head does not fit; the smaller one behind it must wait too. */
	CHECK(!psd_sched_next(&q, &c));
	CHECK_U64(psd_chunkq_len(&q), ==, 2);
	CHECK_U64(c.in_flight, ==, 50);
	CHECK_U64(c.started, ==, 1);
	psd_credit_done(&c, 50);
	CHECK(psd_sched_next(&q, &c) == &big.node);
	CHECK(!psd_sched_next(&q, &c)); /* 100 + 10 > 100 */
	psd_credit_done(&c, 100);
	CHECK(psd_sched_next(&q, &c) == &small.node);
	CHECK_U64(c.in_flight, ==, 10);
	psd_chunkq_fini(&q);
}

const struct test_case test_list[] = {
	{ "chunkq_part_chunk_size", test_chunkq_part_chunk_size },
	{ "chunkq_part_fixed_layouts", test_chunkq_part_fixed_layouts },
	{ "chunkq_part_random_layouts", test_chunkq_part_random_layouts },
	{ "chunkq_part_index_rejects", test_chunkq_part_index_rejects },
	{ "chunkq_part_index_random_rejects",
	  test_chunkq_part_index_random_rejects },
	{ "chunkq_heap_matches_reference", test_chunkq_heap_matches_reference },
	{ "chunkq_heap_fifo_mode_matches_reference",
	  test_chunkq_heap_fifo_mode_matches_reference },
	{ "chunkq_equal_priority_is_fifo", test_chunkq_equal_priority_is_fifo },
	{ "chunkq_later_higher_priority_goes_first",
	  test_chunkq_later_higher_priority_goes_first },
	{ "chunkq_fifo_mode_ignores_priority",
	  test_chunkq_fifo_mode_ignores_priority },
	{ "chunkq_remove", test_chunkq_remove },
	{ "chunkq_init_grow_fini", test_chunkq_init_grow_fini },
	{ "chunkq_credit_random_never_exceeds",
	  test_chunkq_credit_random_never_exceeds },
	{ "chunkq_credit_one_chunk_is_stop_and_wait",
	  test_chunkq_credit_one_chunk_is_stop_and_wait },
	{ "chunkq_credit_unlimited", test_chunkq_credit_unlimited },
	{ "chunkq_credit_set_mid_run", test_chunkq_credit_set_mid_run },
	{ "chunkq_sched_next_keeps_head_of_line",
	  test_chunkq_sched_next_keeps_head_of_line },
	{ NULL, NULL },
};
