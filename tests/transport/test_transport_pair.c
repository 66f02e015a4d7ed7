// SPDX-License-Identifier: MIT
/*
 * Split pairs (van.h psd_conn_pair(), PS_TCP_SPLIT): two real connections
 * between two vans, bound as a pair on both sides as the postoffice binds
 * them (the server's sends on the request connection redirected to the
 * answers one).
 *  - the server's messages on the request connection arrive on the
 *    worker's answers connection, in order; the worker's on its request
 *    connection arrive on the server's;
 *  - closing either connection, on either side, closes both on both
 *    sides, and when the first closed callback runs the other
 *    connection is already closed (nothing more can arrive on it).
 */
#include "tt_util.h"

/* Which connection each node's messages came on, and what the closed
 * callback saw. */
static struct {
	struct psd_conn *last_rx[2];
	int pair_open_at_close; /* closed callbacks that found the pair open */
} seen;

static struct tt_node srv, wrk;

static int node_ix(void *arg)
{
	return arg == &srv ? 0 : 1;
}

static void pair_rx_data(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			 void *payload)
{
	struct tt_node *n = arg;

	pthread_mutex_lock(&n->lock);
	seen.last_rx[node_ix(arg)] = c;
	pthread_mutex_unlock(&n->lock);
	tt_rx_data(arg, c, h, payload);
}

static void pair_closed(void *arg, struct psd_conn *c, int err)
{
	struct tt_node *n = arg;
	struct psd_conn *p = atomic_load(&c->pair);

	pthread_mutex_lock(&n->lock);
	if (p && !atomic_load(&p->closed))
		seen.pair_open_at_close++;
	pthread_mutex_unlock(&n->lock);
	tt_closed(arg, c, err);
}

static void pair_node_init(struct tt_node *n, bool listen)
{
	tt_node_init_cb(n, listen, tt_rx_header, pair_rx_data, pair_closed);
}

/* The pair, bound on both sides: w_req/w_ans on the worker's van,
 * s_req/s_ans the server's ends of them. */
static struct psd_conn *w_req, *w_ans, *s_req, *s_ans;

static void pair_setup(void)
{
	if (strcmp(tt_transport(), "tcp"))
		test_skip("split pairs are TCP only (PS_TCP_SPLIT)");
	memset(&seen, 0, sizeof(seen));
	pair_node_init(&srv, true);
	pair_node_init(&wrk, false);
	w_req = tt_connect(&wrk, srv.port);
	s_req = tt_wait_accepted(&srv, 1);
	psd_conn_get(s_req); /* ours, beyond tt_node_fini() */
	w_ans = tt_connect(&wrk, srv.port);
	s_ans = tt_wait_accepted(&srv, 2);
	w_req->channel = s_req->channel = PSD_CHAN_REQ;
	w_ans->channel = s_ans->channel = PSD_CHAN_ANS;
	psd_conn_pair(s_req, s_ans, true);
	psd_conn_pair(w_req, w_ans, false);
}

static void pair_teardown(void)
{
	tt_node_fini(&wrk);
	psd_conn_unpair(w_req);
	psd_conn_put(w_req);
	psd_conn_put(w_ans);
	tt_node_fini(&srv);
	/* After the vans, as the postoffice does (psd_po_stop()). */
	psd_conn_unpair(s_req);
	psd_conn_put(s_req);
}

static void send_msg(struct psd_conn *c, uint64_t key, uint64_t step,
		     size_t len)
{
	struct psd_hdr h = { .type = PSD_MSG_PUSH,
			     .key = key,
			     .step = step,
			     .length = len,
			     .span = len,
			     .total = len };
	uint8_t *buf = malloc(len);
	struct iovec iov = { buf, len };

	CHECK(buf != NULL);
	tt_fill(buf, len, tt_seed(key, step, len));
	CHECK_EQ(psd_conn_send(c, &h, &iov, 1), 0);
	free(buf);
}

static void test_pair_redirects_server_sends(void)
{
	uint64_t i;

	pair_setup();
	/* Server: answers "on the request connection" (as the KV server
	 * replies on the connection a request came on). */
	for (i = 0; i < 20; i++)
		send_msg(s_req, 1, i, i % 2 ? 300000 : 64);
	tt_wait(&wrk, 20, 0, 10000, "server -> worker");
	pthread_mutex_lock(&wrk.lock);
	CHECK(seen.last_rx[1] == w_ans);
	CHECK_EQ(wrk.bad, 0);
	pthread_mutex_unlock(&wrk.lock);
	/* Worker: requests on its request connection stay there. */
	for (i = 0; i < 5; i++)
		send_msg(w_req, 2, i, 4096);
	tt_wait(&srv, 5, 0, 10000, "worker -> server");
	pthread_mutex_lock(&srv.lock);
	CHECK(seen.last_rx[0] == s_req);
	CHECK_EQ(srv.bad, 0);
	pthread_mutex_unlock(&srv.lock);
	pair_teardown();
}

/* Closing @victim closes all four connections; no closed callback found
 * its pair still open. */
static void pair_close_one(struct psd_conn **victim, const char *what)
{
	pair_setup();
	send_msg(s_req, 1, 0, 1000);
	tt_wait(&wrk, 1, 0, 10000, what);
	psd_conn_close(*victim);
	tt_wait(&wrk, 1, 2, 10000, what);
	tt_wait(&srv, 0, 2, 10000, what);
	CHECK(atomic_load(&w_req->closed) && atomic_load(&w_ans->closed));
	pthread_mutex_lock(&wrk.lock);
	CHECK_EQ(seen.pair_open_at_close, 0);
	pthread_mutex_unlock(&wrk.lock);
	/* Nothing goes out on a closed pair. */
	CHECK(psd_conn_send(w_req, &(struct psd_hdr){ .type = PSD_MSG_PUSH },
			    NULL, 0) != 0);
	pair_teardown();
}

static void test_pair_worker_answers_closed(void)
{
	pair_close_one(&w_ans, "worker closes its answers connection");
}

static void test_pair_worker_request_closed(void)
{
	pair_close_one(&w_req, "worker closes its request connection");
}

static void test_pair_server_answers_closed(void)
{
	pair_close_one(&s_ans, "server closes the answers connection");
}

static void test_pair_server_request_closed(void)
{
	pair_close_one(&s_req, "server closes the request connection");
}

const struct test_case test_list[] = {
	{ "pair_redirects_server_sends", test_pair_redirects_server_sends },
	{ "pair_worker_answers_closed", test_pair_worker_answers_closed },
	{ "pair_worker_request_closed", test_pair_worker_request_closed },
	{ "pair_server_answers_closed", test_pair_server_answers_closed },
	{ "pair_server_request_closed", test_pair_server_request_closed },
	{ NULL, NULL },
};
