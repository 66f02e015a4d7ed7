// SPDX-License-Identifier: MIT
/*
 * Transport conformance, failures (run once per transport, like
 * test_transport.c): a peer that dies while sending or receiving, and for
 * RDMA the registration cache budget and failing registrations.
 */
#include "tt_util.h"

/* ---- a child process as the peer that dies ---------------------------- */

/*
 * The loop transport only links vans of one process, so for it the peer
 * that dies is a node of this process (tt_peer) and its death is an
 * abrupt close of its connection, which is what the kernel does to the
 * sockets of a killed process.  Its "pid" is 1; the sender runs on a
 * thread, the receiver dies on its own van thread (die_on_header).
 */
static struct {
	struct tt_node node;
	struct psd_conn *conn;
	uint8_t *buf;
	bool sending;
	pthread_t thr;
} tt_peer;

static void *tt_peer_send_main(void *arg)
{
	unsigned i;

	(void)arg;
	for (i = 0; i < 4; i++)
		if (tt_send(tt_peer.conn, 50, i, tt_peer.buf, 65536))
			return NULL;
	tt_send(tt_peer.conn, 50, 4, tt_peer.buf, 64 << 20); /* killed */
	return NULL;
}

static pid_t tt_peer_spawn(const char *mode, unsigned port)
{
	tt_peer.buf = malloc(64 << 20);
	CHECK(tt_peer.buf != NULL);
	tt_node_init(&tt_peer.node, false);
	tt_peer.node.die_on_header = !strcmp(mode, "recv");
	tt_peer.node.kill_min_len = 1 << 20;
	tt_peer.conn = tt_connect(&tt_peer.node, port);
	tt_peer.sending = !strcmp(mode, "send");
	if (tt_peer.sending)
		CHECK_EQ(pthread_create(&tt_peer.thr, NULL, tt_peer_send_main,
					NULL),
			 0);
	return 1;
}

static void tt_peer_reap(void)
{
	if (tt_peer.sending)
		pthread_join(tt_peer.thr, NULL);
	psd_conn_put(tt_peer.conn);
	tt_node_fini(&tt_peer.node);
	free(tt_peer.buf);
	memset(&tt_peer, 0, sizeof(tt_peer));
}

static void tt_kill(pid_t pid)
{
	if (tt_is_loop())
		psd_conn_close(tt_peer.conn);
	else
		kill(pid, SIGKILL);
}

static pid_t tt_spawn(const char *mode, unsigned port)
{
	char arg[64];
	pid_t pid;

	if (tt_is_loop())
		return tt_peer_spawn(mode, port);
	snprintf(arg, sizeof(arg), "%s %u", mode, port);
	pid = fork();
	if (pid == 0) {
		setenv("TT_CHILD", arg, 1);
		execl("/proc/self/exe", "test_transport", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void tt_reap(pid_t pid)
{
	int st, i;

	if (tt_is_loop()) {
		tt_peer_reap();
		return;
	}
	for (i = 0; i < 100; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return;
		usleep(100 * 1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

/* Child: connect to the parent; "send": 4 x 64 KiB then 64 MiB (killed
 * by the parent meanwhile); "recv": take messages, die at a big one. */
static void tt_child(const char *spec)
{
	static struct tt_node c;
	struct psd_conn *conn;
	char mode[16];
	unsigned port, i;
	uint8_t *buf;

	if (sscanf(spec, "%15s %u", mode, &port) != 2)
		_exit(2);
	buf = malloc(64 << 20);
	if (!buf)
		_exit(3);
	tt_node_init(&c, false);
	c.die_on_header = !strcmp(mode, "recv");
	c.kill_min_len = 1 << 20;
	conn = tt_connect(&c, port);
	if (!strcmp(mode, "send")) {
		for (i = 0; i < 4; i++)
			if (tt_send(conn, 50, i, buf, 65536))
				_exit(4);
		tt_send(conn, 50, 4, buf, 64 << 20);
		_exit(5); /* the parent should have killed us */
	}
	sleep(60); /* "recv": the van thread dies at the big header */
	_exit(6);
}

__attribute__((constructor)) static void tt_child_hook(void)
{
	const char *spec = getenv("TT_CHILD");

	if (spec) {
		tt_child(spec);
		_exit(7);
	}
}

static void test_transport_peer_dies_sending(void)
{
	static const size_t len = 1 << 20;
	struct tt_node a, b;
	struct psd_conn *ba;
	uint8_t *buf;
	pid_t pid;

	tt_node_init(&b, true);
	pid = tt_spawn("send", b.port);
	CHECK_INT(pid, >, 0);
	pthread_mutex_lock(&b.lock);
	b.kill_on_header = pid;
	b.kill_fn = tt_kill;
	b.kill_min_len = 32 << 20;
	pthread_mutex_unlock(&b.lock);
	tt_wait(&b, 4, 1, 60000, "child's messages, then its death");
	tt_reap(pid);
	CHECK_U64(b.msgs, ==, 4); /* the 64 MiB message never completed */
	CHECK_U64(b.next_step[50], ==, 4);
	tt_check_clean(&b);
	/* The node keeps serving others. */
	buf = malloc(len);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	ba = tt_connect(&a, b.port);
	tt_exchange_one(ba, &b, buf, len, 51);
	psd_conn_put(ba);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

static void test_transport_peer_dies_receiving(void)
{
	struct tt_node a, b;
	struct psd_conn *to_child, *ab;
	uint64_t t0;
	uint8_t *buf;
	pid_t pid;
	int i, ret;

	tt_ops(); /* skips before anything is allocated */
	buf = malloc(64 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, true);
	pid = tt_spawn("recv", a.port);
	CHECK_INT(pid, >, 0);
	to_child = tt_wait_accepted(&a, 1);
	for (i = 0; i < 4; i++)
		CHECK_EQ(tt_send(to_child, 52, (uint64_t)i, buf, 65536), 0);
	t0 = psd_now_ms();
	ret = tt_send(to_child, 52, 4, buf, 64 << 20);
	CHECK_INT(ret, <, 0);
	CHECK_U64(psd_now_ms() - t0, <, (uint64_t)test_timeout_ms(30000));
	tt_wait(&a, 0, 1, 30000, "the dead child's connection dropped");
	tt_reap(pid);
	/* Still serving others. */
	tt_node_init(&b, false);
	ab = tt_connect(&b, a.port);
	tt_exchange_one(ab, &a, buf, 1 << 20, 53);
	psd_conn_put(ab);
	tt_node_fini(&b);
	tt_node_fini(&a);
	free(buf);
}

/* ---- RDMA only: registration cache and failed registrations ------------ */

static void test_transport_rdma_mr_budget(void)
{
	static const size_t len = 1 << 20;
	struct psd_rdma_stats st0, st;
	struct tt_node a, b;
	struct psd_conn *ab;
	uint64_t budget0;
	uint8_t *bufs[8];
	int i, round;

	tt_rdma_only(NULL);
	budget0 = tt_cfg.rdma_mr_budget;
	tt_cfg.rdma_mr_budget = 3 << 20;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	psd_rdma_stats(&st0);
	CHECK_U64(st0.mr_budget, ==, 3 << 20);
	for (i = 0; i < 8; i++) {
		bufs[i] = malloc(len);
		CHECK(bufs[i] != NULL);
	}
	for (round = 0; round < 2; round++)
		for (i = 0; i < 8; i++)
			tt_exchange_one(ab, &b, bufs[i], len, 60);
	psd_rdma_stats(&st);
	CHECK_U64(st.rndv - st0.rndv, ==, 16);
	CHECK_U64(st.evictions, >, st0.evictions);
	CHECK_U64(st.mr_bytes, <=, 3 << 20);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_mr_budget = budget0;
	for (i = 0; i < 8; i++)
		free(bufs[i]);
}

static void test_transport_rdma_registration_fails(void)
{
	struct psd_rdma_stats st0, st;
	struct tt_node a, b;
	struct psd_conn *ab, *ba;
	uint8_t *buf;

	tt_rdma_only(NULL);
	buf = malloc(4 << 20);
	CHECK(buf != NULL);
	tt_cfg.rdma_test_fail_reg = 1;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	psd_rdma_stats(&st0);
	tt_exchange_one(ab, &b, buf, 1 << 20, 61);
	tt_exchange_one(ba, &a, buf, (4 << 20) - 5, 62);
	psd_rdma_stats(&st);
	/* Delivered through the copy path, nothing written in place. */
	CHECK_U64(st.copy - st0.copy, ==, 2);
	CHECK_U64(st.rndv, ==, st0.rndv);
	CHECK_U64(st.reg_failures, >, st0.reg_failures);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_test_fail_reg = 0;
	free(buf);
}

/*
 * GPUDirect with registrations failing (host memory stands in for device
 * memory): psd_conn_send_dev() says -EOPNOTSUPP before sending anything
 * (no RTS, no copies: the receiver sees no message) and the connection
 * goes on.  (The receiver side of a failed registration, rx_dev into the
 * scratch buffer, needs the sender's registration to work and the
 * receiver's to fail, which this one-process knob cannot do.)
 */
static void test_transport_rdma_send_dev_registration_fails(void)
{
	static const size_t len = 1 << 20;
	struct psd_rdma_stats st0, st;
	struct psd_hdr h = { .type = PSD_MSG_PULL_RESP,
			     .dtype = PSCHED_RAW,
			     .key = 7,
			     .total = len,
			     .span = len,
			     .length = len };
	struct tt_node a, b;
	struct psd_conn *ab;
	struct iovec iov;
	uint8_t *buf;

	tt_rdma_only(NULL);
	buf = malloc(len);
	CHECK(buf != NULL);
	tt_cfg.rdma_test_fail_reg = 1;
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	psd_rdma_stats(&st0);
	iov.iov_base = buf;
	iov.iov_len = len;
	CHECK_EQ(psd_conn_send_dev(ab, &h, &iov, 1), -EOPNOTSUPP);
	CHECK(strstr(psched_errmsg(), "device memory") != NULL);
	CHECK(!atomic_load(&ab->closed));
	/* The same bytes the ordinary way: copied, and the only message. */
	tt_exchange_one(ab, &b, buf, len, 63);
	psd_rdma_stats(&st);
	CHECK_U64(b.headers, ==, 1);
	CHECK_U64(b.direct_headers, ==, 0);
	CHECK_U64(st.rndv, ==, st0.rndv);
	CHECK_U64(st.copy - st0.copy, ==, 1);
	CHECK_U64(st.reg_failures, >, st0.reg_failures);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	tt_cfg.rdma_test_fail_reg = 0;
	free(buf);
}

const struct test_case test_list[] = {
	{ "transport_peer_dies_sending", test_transport_peer_dies_sending },
	{ "transport_peer_dies_receiving", test_transport_peer_dies_receiving },
	{ "transport_rdma_mr_budget", test_transport_rdma_mr_budget },
	{ "transport_rdma_registration_fails",
	  test_transport_rdma_registration_fails },
	{ "transport_rdma_send_dev_registration_fails",
	  test_transport_rdma_send_dev_registration_fails },
	{ NULL, NULL },
};
