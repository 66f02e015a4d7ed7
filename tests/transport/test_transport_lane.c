// SPDX-License-Identifier: MIT
/*
 * The RDMA lane (common/transport/rdma/lane.c) on a real device: with
 * PS_RDMA_LANE_MIN set, every RDMA write of that many payload bytes or
 * more goes half on the connection's second queue pair, both ways
 * (the connecting side at once, the accepting side after the peer's
 * first message), for answers and requests, by RTS/CTS and by cached
 * write; the receiver joins the halves, and every payload arrives intact
 * and in order, also with many pushes in flight at once.  Smaller writes
 * and PS_RDMA_LANE_MIN=0 use one queue pair.  RDMA only
 * (PS_TEST_TRANSPORT=rdma, in the soft-RoCE VM:
 * tests/integration/test_rdma_vm.sh); other transports skip.
 */
#include "tt_util.h"

/* Send @n messages of @len bytes on key @key (answers, or pushes when
 * @push), each waited for; the writes among them that went split. */
static uint64_t tt_run(struct psd_conn *c, struct tt_node *rx, uint8_t *buf,
		       size_t len, uint64_t key, unsigned n, bool push)
{
	uint64_t l0 = tt_rdma_stats().lane;
	unsigned i;

	for (i = 0; i < n; i++)
		tt_exchange_type(c, rx, push ? PSD_MSG_PUSH : PSD_MSG_PULL_RESP,
				 buf, len, key);
	return tt_rdma_stats().lane - l0;
}

static void test_lane_split(void)
{
	/* from the threshold up, an odd length, the cache's largest and
	 * beyond it (RTS/CTS every time) */
	static const size_t sizes[] = { 65536, 1 << 20, (3 << 20) + 5,
					(4 << 20) + 8 };
	int lane0 = tt_cfg.rdma_lane_min;
	struct tt_node a, b;
	struct psd_conn *ab, *ba;
	uint8_t *buf;
	size_t i;

	tt_rdma_only("the lane");
	buf = malloc(5 << 20);
	CHECK(buf != NULL);
	tt_cfg.rdma_lane_min = 65536;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++) {
		CHECK_U64(tt_run(ab, &b, buf, sizes[i], 1 + i, 6, false), ==,
			  6);
		CHECK_U64(tt_run(ba, &a, buf, sizes[i], 1 + i, 6, false), ==,
			  6);
		CHECK_U64(tt_run(ab, &b, buf, sizes[i], 10 + i, 6, true), ==,
			  6);
	}
	/* Below the threshold: one queue pair. */
	CHECK_U64(tt_run(ab, &b, buf, 65535, 20, 4, false), ==, 0);
	CHECK_U64(tt_run(ba, &a, buf, 65535, 20, 4, false), ==, 0);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_lane_min = lane0;
	free(buf);
}

/* Many pushes in flight: the halves of different messages must join in
 * the order sent, whichever queue pair is ahead. */
static void test_lane_in_flight(void)
{
	enum { N = 24, LEN = (512 << 10) + 64 };
	int lane0 = tt_cfg.rdma_lane_min;
	struct tt_node a, b;
	struct psd_conn *ab;
	uint8_t *bufs[N];
	uint64_t l0, want, step0[4];
	unsigned r, i;
	int ret;

	tt_rdma_only("the lane");
	tt_cfg.rdma_lane_min = 65536;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	for (i = 0; i < N; i++) {
		bufs[i] = malloc(LEN);
		CHECK(bufs[i] != NULL);
	}
	l0 = tt_rdma_stats().lane;
	for (r = 0; r < 3; r++) {
		pthread_mutex_lock(&b.lock);
		want = b.msgs + N;
		for (i = 0; i < 4; i++)
			step0[i] = b.next_step[30 + i];
		pthread_mutex_unlock(&b.lock);
		/* Four keys, each's steps in order; buffers stay untouched
		 * until all arrived (a request's send may return before its
		 * writes landed). */
		for (i = 0; i < N; i++) {
			ret = tt_send_type(ab, PSD_MSG_PUSH, 30 + i % 4,
					   step0[i % 4] + i / 4, bufs[i], LEN);
			if (ret)
				test_fail_at(__FILE__, __LINE__,
					     "push %u of round %u: %s (%s)", i,
					     r, psched_strerror(ret),
					     psched_errmsg());
		}
		tt_wait(&b, want, 0, 60000, "pushes in flight");
		tt_check_clean(&b);
	}
	CHECK_U64(tt_rdma_stats().lane - l0, ==, 3 * N);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	for (i = 0; i < N; i++)
		free(bufs[i]);
	tt_cfg.rdma_lane_min = lane0;
}

/* PS_RDMA_LANE_MIN=0: no lane, every write on one queue pair. */
static void test_lane_off(void)
{
	int lane0 = tt_cfg.rdma_lane_min;
	struct tt_node a, b;
	struct psd_conn *ab, *ba;
	uint8_t *buf;

	tt_rdma_only("the lane");
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	tt_cfg.rdma_lane_min = 0;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	CHECK_U64(tt_run(ab, &b, buf, 1 << 20, 5, 5, false), ==, 0);
	CHECK_U64(tt_run(ba, &a, buf, 1 << 20, 5, 5, true), ==, 0);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_lane_min = lane0;
	free(buf);
}

const struct test_case test_list[] = {
	{ "lane_split", test_lane_split },
	{ "lane_in_flight", test_lane_in_flight },
	{ "lane_off", test_lane_off },
	{ NULL, NULL },
};
