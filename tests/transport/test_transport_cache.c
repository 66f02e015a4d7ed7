// SPDX-License-Identifier: MIT
/*
 * The RDMA rendezvous cache on a real device (common/transport/rdma/
 * land.c; the bookkeeping alone is tests/unit/test_rdma_land.c): after a
 * range came by RTS/CTS, later messages of the same (key, offset, length)
 * go as one cached write, both ways, for answers and requests, discarded
 * or kept; ranges that change (as a config switch changes partition
 * sizes) get their own grants; over the cap, ranges no longer used are
 * revoked and their room goes to new ones; every payload arrives intact
 * and in order.  RDMA only (PS_TEST_TRANSPORT=rdma, in the soft-RoCE VM:
 * tests/integration/test_rdma_vm.sh); other transports skip.
 */
#include "tt_util.h"

/* Send @n messages of @len bytes on key @key (answers, or pushes when
 * @push), each waited for; the cached writes among them. */
static uint64_t tt_run(struct psd_conn *c, struct tt_node *rx, uint8_t *buf,
		       size_t len, uint64_t key, unsigned n, bool push)
{
	uint64_t c0 = tt_rdma_stats().cached;
	unsigned i;

	for (i = 0; i < n; i++)
		tt_exchange_type(c, rx, push ? PSD_MSG_PUSH : PSD_MSG_PULL_RESP,
				 buf, len, key);
	return tt_rdma_stats().cached - c0;
}

static void test_cache_hits(void)
{
	static const size_t sizes[] = { 16385, 65536, 1 << 20, 4 << 20 };
	struct tt_node a, b;
	struct psd_conn *ab, *ba;
	uint64_t hits;
	uint8_t *buf;
	size_t i;

	tt_rdma_only("the rendezvous cache");
	buf = malloc(8 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++) {
		/* The first goes by RTS/CTS, the grant follows it; the
		 * sender may not have it for the second one yet. */
		hits = tt_run(ab, &b, buf, sizes[i], 1 + i, 10, false);
		CHECK_U64(hits, >=, 7);
		hits = tt_run(ba, &a, buf, sizes[i], 1 + i, 10, false);
		CHECK_U64(hits, >=, 7);
		hits = tt_run(ab, &b, buf, sizes[i], 10 + i, 10, true);
		CHECK_U64(hits, >=, 7);
	}
	/* Above RDMT_LAND_MAX_MSG (4 MiB): RTS/CTS every time. */
	CHECK_U64(tt_run(ab, &b, buf, (4 << 20) + 8, 20, 4, false), ==, 0);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

/* The receiver answers every push from inside the upcall, as a server
 * does: a small PULL_RESP of key TT_ANS_KEY, steps counted here. */
#define TT_ANS_KEY 60
static unsigned tt_ans_step;

static void tt_answer_rx_data(void *arg, struct psd_conn *c,
			      const struct psd_hdr *h, void *payload)
{
	static uint8_t ans[64];
	struct tt_node *n = arg;
	bool push = h->type == PSD_MSG_PUSH;
	int ret;

	tt_rx_data(arg, c, h, payload);
	if (!push)
		return;
	ret = tt_send_type(c, PSD_MSG_PULL_RESP, TT_ANS_KEY, tt_ans_step++, ans,
			   sizeof(ans));
	if (ret) {
		pthread_mutex_lock(&n->lock);
		tt_bad(n, "answer from the upcall failed", h);
		pthread_mutex_unlock(&n->lock);
	}
}

/* A push copied out of its landing buffer and answered from the upcall:
 * the answer carries the buffer's re-grant (no GRANT message), so the
 * sender holds the grant as soon as it has the answer. */
static void test_cache_regrant_on_answer(void)
{
	static const size_t sizes[] = { 65536, 1 << 20 };
	struct tt_node a, b;
	struct psd_conn *ab;
	struct psd_rdma_stats s0, s1;
	uint64_t cached, regrants, grants;
	uint8_t *buf;
	size_t i;

	tt_rdma_only("the rendezvous cache");
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	tt_ans_step = 0;
	tt_node_init(&a, false);
	tt_node_init_rx(&b, true, tt_rx_header, tt_answer_rx_data);
	ab = tt_connect(&a, b.port);
	for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++) {
		s0 = tt_rdma_stats();
		tt_run(ab, &b, buf, sizes[i], 5 + i, 12, true);
		tt_wait(&a, 12 * (i + 1), 0, 60000, "answers");
		tt_check_clean(&a);
		s1 = tt_rdma_stats();
		cached = s1.cached - s0.cached;
		regrants = s1.regrants - s0.regrants;
		grants = s1.grants - s0.grants;
		printf("# %zu bytes: %llu of 12 cached, %llu re-grants on "
		       "answers, %llu GRANT messages\n",
		       sizes[i], (unsigned long long)cached,
		       (unsigned long long)regrants,
		       (unsigned long long)grants);
		CHECK_U64(cached, >=, 9);
		/* Every cached push was granted again on its answer (the
		 * first grant is a GRANT: that push came by RTS/CTS). */
		CHECK_U64(regrants, >=, cached);
		/* And none came as a GRANT message: those are only for the
		 * pushes that came by RTS/CTS (the range's first grant). */
		CHECK_U64(grants, <=, 12 - cached);
	}
	CHECK_U64(a.next_step[TT_ANS_KEY], ==, 24);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

/* While set, the receiver discards key 2 (set only between messages). */
static atomic_bool tt_drop2;

static int tt_drop_rx_header(void *arg, struct psd_conn *c,
			     const struct psd_hdr *h, void **dst)
{
	if (h->key == 2 && atomic_load(&tt_drop2)) {
		struct tt_node *n = arg;

		pthread_mutex_lock(&n->lock);
		n->headers++;
		pthread_mutex_unlock(&n->lock);
		return PSD_RX_DISCARD;
	}
	return tt_rx_header(arg, c, h, dst);
}

static void tt_drop_rx_data(void *arg, struct psd_conn *c,
			    const struct psd_hdr *h, void *payload)
{
	struct tt_node *n = arg;

	if (h->key != 2 || !atomic_load(&tt_drop2)) {
		tt_rx_data(arg, c, h, payload);
		return;
	}
	pthread_mutex_lock(&n->lock);
	if (payload)
		tt_bad(n, "discarded payload delivered", h);
	n->discarded++;
	n->msgs++;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

/* A granted range the receiver then discards (a server refusing a push
 * that came too early, say): the cached write is thrown away, the payload
 * is never delivered, and the range stays cached for the next ones. */
static void test_cache_discard(void)
{
	struct tt_node a, b;
	struct psd_conn *ab;
	uint64_t want, c0;
	uint8_t *buf;
	int i;

	tt_rdma_only("the rendezvous cache");
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init_rx(&b, true, tt_drop_rx_header, tt_drop_rx_data);
	ab = tt_connect(&a, b.port);
	CHECK_U64(tt_run(ab, &b, buf, 1 << 20, 2, 4, false), >=, 2);
	atomic_store(&tt_drop2, true);
	c0 = tt_rdma_stats().cached;
	for (i = 0; i < 6; i++) {
		pthread_mutex_lock(&b.lock);
		want = b.msgs + 1;
		pthread_mutex_unlock(&b.lock);
		CHECK_EQ(tt_send(ab, 2, 1000 + i, buf, 1 << 20), 0);
		tt_wait(&b, want, 0, 60000, "discarded message");
	}
	tt_check_clean(&b);
	CHECK_U64(b.discarded, ==, 6);
	CHECK_U64(tt_rdma_stats().cached - c0, >=, 4);
	atomic_store(&tt_drop2, false);
	/* Kept again afterwards, intact and in order. */
	CHECK_U64(tt_run(ab, &b, buf, 1 << 20, 2, 3, false), >=, 2);
	CHECK_U64(b.next_step[2], ==, 7);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

/*
 * Ranges change under live grants, as when a config switch changes the
 * partition size or a key is initialised again with another size: each
 * (key, offset, length) has its own grant and payloads stay intact.
 * Then a small cap (a quarter of PS_RDMA_MR_BUDGET): four 1 MiB ranges
 * fill it; four new ones can only be cached if the old ones are revoked
 * and returned, so hits on the new ones prove the room came back.
 */
static void test_cache_ranges_and_cap(void)
{
	static const size_t lens[] = { 1 << 20, 256 << 10, 1 << 20, 65536,
				       300000 };
	struct tt_node a, b;
	struct psd_conn *ab;
	uint64_t budget0, hits = 0;
	uint8_t *buf;
	size_t i;
	int round;
	unsigned k;

	tt_rdma_only("the rendezvous cache");
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	for (i = 0; i < PSD_ARRAY_SIZE(lens); i++)
		CHECK_U64(tt_run(ab, &b, buf, lens[i], 3, 5, true), >=, 2);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);

	budget0 = tt_cfg.rdma_mr_budget;
	/* Cap: 4 landing buffers of 1 MiB (+ header room), not 5. */
	tt_cfg.rdma_mr_budget = 4 * (4 * ((1 << 20) + 128) + 1000);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	CHECK_U64(tt_rdma_stats().mr_budget, ==, tt_cfg.rdma_mr_budget);
	for (round = 0; round < 3; round++)
		for (k = 0; k < 4; k++)
			tt_run(ab, &b, buf, 1 << 20, 30 + k, 1, false);
	for (round = 0; round < 6; round++)
		for (k = 4; k < 8; k++)
			hits += tt_run(ab, &b, buf, 1 << 20, 30 + k, 1, false);
	CHECK_U64(hits, >=, 4);
	/* And the old ones still work (by RTS/CTS or cached). */
	for (k = 0; k < 4; k++)
		tt_run(ab, &b, buf, 1 << 20, 30 + k, 2, false);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_mr_budget = budget0;
	free(buf);
}

/* PS_RDMA_MR_BUDGET=0 turns the cache off: RTS/CTS every time. */
static void test_cache_off(void)
{
	struct tt_node a, b;
	struct psd_conn *ab;
	uint64_t budget0;
	uint8_t *buf;

	tt_rdma_only("the rendezvous cache");
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	budget0 = tt_cfg.rdma_mr_budget;
	tt_cfg.rdma_mr_budget = 0;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	CHECK_U64(tt_rdma_stats().mr_budget, ==, 0);
	CHECK_U64(tt_run(ab, &b, buf, 1 << 20, 5, 5, false), ==, 0);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_mr_budget = budget0;
	free(buf);
}

const struct test_case test_list[] = {
	{ "cache_hits", test_cache_hits },
	{ "cache_discard", test_cache_discard },
	{ "cache_regrant_on_answer", test_cache_regrant_on_answer },
	{ "cache_ranges_and_cap", test_cache_ranges_and_cap },
	{ "cache_off", test_cache_off },
	{ NULL, NULL },
};
