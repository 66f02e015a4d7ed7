// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "../../worker/chunkq.h"

#define HEAP_OPS 10000

struct test_chunk {
	unsigned int id;
	struct psd_chunk_node node;
};

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
