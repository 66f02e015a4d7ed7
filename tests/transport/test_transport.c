// SPDX-License-Identifier: MIT
/*
 * Transport conformance suite, one body for every transport: set
 * PS_TEST_TRANSPORT=tcp (default), loop or rdma.  Two vans in this process
 * talk over real connections (TCP on 127.0.0.1; the in-process loop
 * transport; RDMA through rdma_cm on the address in PS_TEST_ADDR or
 * RDMA_VM_ADDR), and a child process (this binary re-executed) plays a
 * peer that dies.  The loop transport cannot reach another process: there
 * the dying peer is a node of this process whose "death" closes its
 * connection abruptly (see tt_spawn()).  Without an RDMA device the rdma
 * run skips with the reason; run it under ../shared/rdma-vm/run-in-rxe-vm
 * (tests/integration/test_rdma_vm.sh).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "tt_util.h"

static void test_transport_refused_connect(void)
{
	struct tt_node a, b;
	struct psd_addr addr = { 0 };
	struct psd_conn *c = NULL;
	uint64_t t0;
	unsigned port;
	int ret;

	tt_node_init(&a, true);
	port = a.port;
	tt_node_fini(&a); /* nothing listens there any more */
	tt_node_init(&b, false);
	snprintf(addr.host, sizeof(addr.host), "%s", tt_host());
	addr.port = port;
	t0 = psd_now_ms();
	ret = psd_van_connect(b.van, &addr, (unsigned)test_timeout_ms(10000),
			      "nobody", &c);
	CHECK_EQ(ret, -ECONNREFUSED);
	CHECK(c == NULL);
	/* Refused, not timed out. */
	CHECK_U64(psd_now_ms() - t0, <, (uint64_t)test_timeout_ms(9000));
	tt_node_fini(&b);
}

static void test_transport_exchange(void)
{
	static const size_t sizes[] = {
		1,	   3,	  100,	 4096,	 16384 - 121, 16384 - 120,
		16384 - 1, 16384, 16385, 100000, 1 << 20,     (4 << 20) + 3,
		64 << 20,
	};
	struct tt_node a, b;
	struct psd_conn *ab, *ba;
	uint64_t want;
	uint8_t *buf;
	size_t i;

	tt_ops(); /* skips before anything is allocated */
	buf = malloc(64 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++) {
		tt_exchange_one(ab, &b, buf, sizes[i], 1);
		tt_exchange_one(ba, &a, buf, sizes[i], 2);
	}
	/* The same buffers again (registration cache hits for RDMA). */
	tt_exchange_one(ab, &b, buf, 1 << 20, 1);
	tt_exchange_one(ba, &a, buf, 1 << 20, 2);
	/* A message the receiver discards, then one it keeps. */
	pthread_mutex_lock(&b.lock);
	want = b.msgs + 2;
	pthread_mutex_unlock(&b.lock);
	CHECK_EQ(tt_send(ab, TT_DISCARD, 0, buf, 1 << 20), 0);
	CHECK_EQ(tt_send(ab, TT_DISCARD, 0, buf, 100), 0);
	tt_wait(&b, want, 0, 60000, "discarded messages");
	CHECK_U64(b.discarded, ==, 2);
	tt_exchange_one(ab, &b, buf, 5000, 1);
	CHECK_U64(b.next_step[1], ==, PSD_ARRAY_SIZE(sizes) + 2);
	CHECK_U64(a.next_step[2], ==, PSD_ARRAY_SIZE(sizes) + 1);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

struct tt_sender {
	struct psd_conn *c;
	uint64_t key;
	unsigned count;
	const size_t *sizes;
	unsigned nsizes;
	atomic_uint sent;
	int err;
	pthread_t thr;
};

static void *tt_sender_main(void *arg)
{
	struct tt_sender *s = arg;
	size_t max = 0, len;
	uint8_t *buf;
	unsigned i;

	for (i = 0; i < s->nsizes; i++)
		if (s->sizes[i] > max)
			max = s->sizes[i];
	buf = malloc(max);
	if (!buf) {
		s->err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < s->count; i++) {
		len = s->sizes[i % s->nsizes];
		s->err = tt_send(s->c, s->key, i, buf, len);
		if (s->err)
			break;
		atomic_fetch_add(&s->sent, 1);
	}
	free(buf);
	return NULL;
}

static void tt_sender_start(struct tt_sender *s, struct psd_conn *c,
			    uint64_t key, unsigned count, const size_t *sizes,
			    unsigned nsizes)
{
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->key = key;
	s->count = count;
	s->sizes = sizes;
	s->nsizes = nsizes;
	CHECK_EQ(pthread_create(&s->thr, NULL, tt_sender_main, s), 0);
}

static void test_transport_many_outstanding(void)
{
	static const size_t sizes[] = { 64, 3000, 20000, 70000, 1, 9000 };
	struct tt_sender s[5];
	struct tt_node a, b;
	struct psd_conn *ab, *ba;
	unsigned i, per = 150;

	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	for (i = 0; i < 4; i++)
		tt_sender_start(&s[i], ab, 10 + i, per, sizes,
				PSD_ARRAY_SIZE(sizes));
	tt_sender_start(&s[4], ba, 20, per, sizes, PSD_ARRAY_SIZE(sizes));
	for (i = 0; i < 5; i++) {
		pthread_join(s[i].thr, NULL);
		CHECK_EQ(s[i].err, 0);
		CHECK_EQ(atomic_load(&s[i].sent), per);
	}
	tt_wait(&b, 4 * per, 0, 60000, "many outstanding a->b");
	tt_wait(&a, per, 0, 60000, "many outstanding b->a");
	tt_check_clean(&a);
	tt_check_clean(&b);
	for (i = 0; i < 4; i++)
		CHECK_U64(b.next_step[10 + i], ==, per);
	CHECK_U64(a.next_step[20], ==, per);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
}

/* Sender far ahead of a receiver that does not consume: it must block,
 * then finish once the receiver resumes, everything in order. */
static void tt_stall(struct tt_node *b, struct psd_conn *ab, size_t len,
		     unsigned count, bool must_stall)
{
	struct tt_sender s;
	uint64_t base = b->msgs;
	unsigned sent;

	pthread_mutex_lock(&b->lock);
	b->gate = true;
	pthread_mutex_unlock(&b->lock);
	tt_sender_start(&s, ab, 30 + (len & 7), count, &len, 1);
	usleep((useconds_t)test_timeout_ms(700) * 1000);
	sent = atomic_load(&s.sent);
	pthread_mutex_lock(&b->lock);
	b->gate = false;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	if (must_stall)
		CHECK_U64(sent, <, count);
	pthread_join(s.thr, NULL);
	CHECK_EQ(s.err, 0);
	CHECK_EQ(atomic_load(&s.sent), count);
	tt_wait(b, base + count, 0, 60000, "after the stall");
	tt_check_clean(b);
	CHECK_U64(b->next_step[30 + (len & 7)], ==, count);
}

static void test_transport_credit_stall(void)
{
	struct tt_node a, b;
	struct psd_conn *ab;

	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	/* 26 MB: more than any socket buffer, so TCP stalls too. */
	tt_stall(&b, ab, 65536, 400, true);
	/* Small messages: only a credit scheme must stall these. */
	tt_stall(&b, ab, 1001, 600, tt_is_rdma());
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
}

/* Close a connection while a thread is sending large messages on it: the
 * send fails (no hang), both sides see the close, the nodes keep working. */
static void tt_close_busy(bool close_sender_side)
{
	static const size_t big = 1 << 20;
	struct tt_node a, b;
	struct psd_conn *ab, *ba, *ab2;
	struct tt_sender s;
	uint8_t *buf;

	tt_ops(); /* skips before anything is allocated */
	buf = malloc(big);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	ba = tt_wait_accepted(&b, 1);
	tt_sender_start(&s, ab, 40, 100000, &big, 1);
	tt_wait(&b, 3, 0, 30000, "first messages");
	psd_conn_close(close_sender_side ? ab : ba);
	pthread_join(s.thr, NULL);
	CHECK_INT(s.err, <, 0);
	tt_wait(&a, 0, 1, 30000, "close seen by the sender's van");
	tt_wait(&b, 0, 1, 30000, "close seen by the receiver's van");
	tt_check_clean(&b);
	/* A new connection between the same nodes works. */
	ab2 = tt_connect(&a, b.port);
	tt_exchange_one(ab2, &b, buf, big, 41);
	psd_conn_put(ab2);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

static void test_transport_close_while_busy(void)
{
	tt_close_busy(true);
	tt_close_busy(false);
}

/* Requests from distinct buffers, never touched until received, mixed
 * with small responses: all arrive intact and in order. */
static void test_transport_requests(void)
{
	enum { N = 24 };
	static const size_t big = (1 << 20) + 8;
	struct tt_node a, b;
	struct psd_conn *ab;
	uint8_t *bufs[N], small[512];
	int i;

	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	for (i = 0; i < N; i++) {
		bufs[i] = malloc(big);
		CHECK(bufs[i] != NULL);
	}
	for (i = 0; i < N; i++) {
		CHECK_EQ(tt_send_type(ab, PSD_MSG_PUSH, 5, (uint64_t)i, bufs[i],
				      big - (size_t)(i % 3) * 8),
			 0);
		CHECK_EQ(tt_send(ab, 6, (uint64_t)i, small,
				 sizeof(small) - (size_t)i),
			 0);
	}
	tt_wait(&b, 2 * N, 0, 60000, "requests and responses");
	tt_check_clean(&b);
	CHECK_U64(b.next_step[5], ==, N);
	CHECK_U64(b.next_step[6], ==, N);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	for (i = 0; i < N; i++)
		free(bufs[i]);
}

struct tt_req_sender {
	struct psd_conn *c;
	uint8_t **bufs;
	size_t len;
	unsigned count;
	atomic_uint sent;
	int err;
};

static void *tt_req_sender_main(void *arg)
{
	struct tt_req_sender *s = arg;
	unsigned i;

	for (i = 0; i < s->count; i++) {
		s->err = tt_send_type(s->c, PSD_MSG_PUSH, 8, i, s->bufs[i],
				      s->len);
		if (s->err)
			break;
		atomic_fetch_add(&s->sent, 1);
	}
	return NULL;
}

/*
 * Large requests to a receiver that stopped consuming (its van thread
 * blocked in rx_data after the first): shm returns from each send once
 * the frame is posted, up to its window of 64 unacknowledged requests
 * (SHM_CMA_WINDOW), then blocks; every transport delivers them all
 * intact once the receiver resumes.  4 MiB: above what shm places in
 * its ring (4 MiB - 4 KiB), so shm's receiver reads them from ours.
 */
static void test_transport_requests_pipelined(void)
{
	enum { WINDOW = 64, N = WINDOW + 5 };
	static const size_t len = 4 << 20;
	struct tt_req_sender s = { .len = len, .count = N };
	bool shm = !strcmp(tt_transport(), "shm");
	struct tt_node a, b;
	struct psd_conn *ab;
	uint8_t *bufs[N];
	pthread_t thr;
	unsigned sent, i;

	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	for (i = 0; i < N; i++) {
		bufs[i] = malloc(len);
		CHECK(bufs[i] != NULL);
	}
	s.c = ab;
	s.bufs = bufs;
	pthread_mutex_lock(&b.lock);
	b.gate = true;
	pthread_mutex_unlock(&b.lock);
	CHECK_EQ(pthread_create(&thr, NULL, tt_req_sender_main, &s), 0);
	/* Until the sender stops: no more sent in 500 ms (filling 4 MiB
	 * buffers takes a while, longer under the sanitizers).  Over shm,
	 * not before its window is full: a sender the host did not run
	 * for 500 ms has not stopped. */
	for (i = 0, sent = UINT_MAX; i < 120; i++) {
		unsigned now;

		usleep((useconds_t)test_timeout_ms(500) * 1000);
		now = atomic_load(&s.sent);
		if (now == N)
			break;
		if (now == sent && (!shm || now >= WINDOW + 1))
			break;
		sent = now;
	}
	sent = atomic_load(&s.sent);
	pthread_mutex_lock(&b.lock);
	b.gate = false;
	pthread_cond_broadcast(&b.cond);
	pthread_mutex_unlock(&b.lock);
	if (shm) {
		/* the first was read before rx_data blocked, 64 more posted */
		CHECK_U64(sent, ==, WINDOW + 1);
	}
	pthread_join(thr, NULL);
	CHECK_EQ(s.err, 0);
	CHECK_EQ(atomic_load(&s.sent), N);
	tt_wait(&b, N, 0, 60000, "pipelined requests");
	tt_check_clean(&b);
	CHECK_U64(b.next_step[8], ==, N);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	for (i = 0; i < N; i++)
		free(bufs[i]);
}

/*
 * psd_conn_send_dev() (GPUDirect RDMA; host memory stands in for device
 * memory here, no RDMA device can register GPU memory in the test VM):
 * rdma sends every size, even one that fits an eager SEND, by RDMA
 * writes from the registration, and the receiver is told (rx_direct) so
 * it may choose device memory; an ordinary small send is not.  Other
 * transports answer -EOPNOTSUPP and the connection stays usable.
 */
static void test_transport_send_dev(void)
{
	static const size_t sizes[] = { 1, 100, 16384, 1 << 20 };
	struct psd_rdma_stats s0, s1;
	struct tt_node a, b;
	struct psd_conn *ab;
	uint64_t direct;
	uint8_t *buf;
	size_t i;
	int ret;

	tt_ops();
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	psd_rdma_stats(&s0);
	for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++) {
		struct psd_hdr h = { .type = PSD_MSG_PULL_RESP,
				     .dtype = PSCHED_RAW,
				     .key = 3,
				     .total = sizes[i],
				     .span = sizes[i],
				     .length = sizes[i],
				     .step = i };
		struct iovec iov = { .iov_base = buf, .iov_len = sizes[i] };

		tt_fill(buf, sizes[i], tt_seed(3, i, sizes[i]));
		ret = psd_conn_send_dev(ab, &h, &iov, 1);
		if (!tt_is_rdma()) {
			CHECK_EQ(ret, -EOPNOTSUPP);
			CHECK(strstr(psched_errmsg(), "device memory") != NULL);
			continue;
		}
		if (ret)
			test_fail_at(__FILE__, __LINE__,
				     "send_dev of %zu bytes: %s (%s)", sizes[i],
				     psched_strerror(ret), psched_errmsg());
		tt_wait(&b, i + 1, 0, 60000, "send_dev");
	}
	tt_check_clean(&b);
	pthread_mutex_lock(&b.lock);
	direct = b.direct_headers;
	pthread_mutex_unlock(&b.lock);
	if (tt_is_rdma()) {
		psd_rdma_stats(&s1);
		CHECK_U64(b.next_step[3], ==, PSD_ARRAY_SIZE(sizes));
		CHECK_U64(direct, ==, PSD_ARRAY_SIZE(sizes));
		CHECK_U64(s1.rndv - s0.rndv, ==, PSD_ARRAY_SIZE(sizes));
		CHECK_U64(s1.eager - s0.eager, ==, 0);
		CHECK_U64(s1.copy - s0.copy, ==, 0);
	} else {
		CHECK_U64(b.msgs, ==, 0);
		CHECK_U64(direct, ==, 0);
	}
	/* The connection is fine; a small ordinary send is no rdma write. */
	tt_exchange_one(ab, &b, buf, 100, 4);
	pthread_mutex_lock(&b.lock);
	CHECK_U64(b.direct_headers, ==, direct);
	pthread_mutex_unlock(&b.lock);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

/*
 * psd_conn_send_more() (tcp keeps small messages aside until the next
 * send or psd_conn_flush()): the caller's buffer is free once it
 * returns (it is overwritten here before the flush), and kept, sent and
 * flushed messages arrive whole and in order, small and large mixed on
 * one key.  Transports without ->send_more() send at once.
 */
static void test_transport_send_more(void)
{
	static const size_t sizes[] = { 1,     100,   4096,    16384 - 120,
					16384, 3000,  1 << 20, 7,
					50000, 16200, 5,       65536 };
	struct tt_node a, b;
	struct psd_conn *ab;
	uint8_t *buf;
	uint64_t step = 0;
	unsigned i, round;
	int ret;

	tt_ops();
	buf = malloc(1 << 20);
	CHECK(buf != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	for (round = 0; round < 3; round++) {
		for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++, step++) {
			struct psd_hdr h = { .type = PSD_MSG_PULL_RESP,
					     .dtype = PSCHED_RAW,
					     .key = 3,
					     .total = sizes[i],
					     .span = sizes[i],
					     .length = sizes[i],
					     .step = step };
			struct iovec iov = { .iov_base = buf,
					     .iov_len = sizes[i] };

			tt_fill(buf, sizes[i], tt_seed(3, step, sizes[i]));
			/* Round 1 sends every third one plainly. */
			ret = round == 1 && i % 3 == 2
				      ? psd_conn_send(ab, &h, &iov, 1)
				      : psd_conn_send_more(ab, &h, &iov, 1);
			CHECK_EQ(ret, 0);
			memset(buf, 0xee, sizes[i]);
		}
		CHECK_EQ(psd_conn_flush(ab), 0);
		tt_wait(&b, step, 0, 60000, "messages sent with send_more");
		tt_check_clean(&b);
	}
	/* More than the transport keeps aside at once (many small ones). */
	for (i = 0; i < 200; i++, step++) {
		CHECK_EQ(tt_send(ab, 3, step, buf, 1000), 0);
		memset(buf, 0xee, 1000);
	}
	tt_wait(&b, step, 0, 60000, "small messages");
	tt_check_clean(&b);
	CHECK_U64(b.next_step[3], ==, step);
	CHECK_EQ(psd_conn_flush(ab), 0); /* nothing kept: a no-op */
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(buf);
}

/* A message whose payload is several pieces in separate buffers (a key
 * list's keys, lengths and values): it arrives whole and in order, small
 * and large, the first time and again (RDMA: by RTS/CTS, then into a
 * cached grant), with an empty piece among them. */
static void test_transport_pieces(void)
{
	static const size_t sizes[][3] = {
		{ 24, 0, 12 },
		{ 800, 400, 1200 },
		{ 400000, 200001, 200000 },
		{ 3 << 20, 0, (1 << 20) + 5 },
	};
	struct tt_node a, b;
	struct psd_conn *ab;
	uint8_t *whole, *piece[3];
	size_t i, k, off, len;
	uint64_t want, step = 0;
	int rep;

	tt_ops();
	whole = malloc(5 << 20);
	CHECK(whole != NULL);
	tt_node_init(&a, false);
	tt_node_init(&b, true);
	ab = tt_connect(&a, b.port);
	tt_wait_accepted(&b, 1);
	for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++) {
		struct iovec iov[3];

		len = sizes[i][0] + sizes[i][1] + sizes[i][2];
		for (k = 0; k < 3; k++) {
			piece[k] = malloc(sizes[i][k] + 1);
			CHECK(piece[k] != NULL);
		}
		for (rep = 0; rep < 2; rep++, step++) {
			struct psd_hdr h = { .type = PSD_MSG_PULL_RESP,
					     .dtype = PSCHED_RAW,
					     .key = 4,
					     .total = len,
					     .span = len,
					     .length = len,
					     .step = step };

			tt_fill(whole, len, tt_seed(4, step, len));
			for (k = 0, off = 0; k < 3; off += sizes[i][k++]) {
				memcpy(piece[k], whole + off, sizes[i][k]);
				iov[k].iov_base = piece[k];
				iov[k].iov_len = sizes[i][k];
			}
			pthread_mutex_lock(&b.lock);
			want = b.msgs + 1;
			pthread_mutex_unlock(&b.lock);
			CHECK_EQ(psd_conn_send(ab, &h, iov, 3), 0);
			tt_wait(&b, want, 0, 60000, "a message in pieces");
			tt_check_clean(&b);
		}
		for (k = 0; k < 3; k++)
			free(piece[k]);
	}
	CHECK_U64(b.next_step[4], ==, step);
	psd_conn_put(ab);
	tt_node_fini(&a);
	tt_node_fini(&b);
	free(whole);
}

/* ---- tcp: a payload that comes in trickles ---------------------------- */

/* A plain socket to @port (the peer of a trusted van, which takes data
 * messages without a handshake). */
static int trickle_dial(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0);
	inet_pton(AF_INET, tt_host(), &a.sin_addr);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void trickle_write(int fd, const uint8_t *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/*
 * The receive low-water mark (common/transport/tcp.c) must never keep a
 * message waiting for bytes its sender does not send: large payloads are
 * written in pieces with pauses between them, the last piece a few bytes
 * or just under the mark's floor, and each message must be delivered
 * whole while its sender waits for it; a small message after a large one
 * must come at once (the mark back at 1, which the socket then says).
 */
static void test_transport_tcp_trickle(void)
{
	/* Payload length, then the pieces it is written in (the rest last). */
	static const size_t plan[][4] = {
		{ 300000, 200000, 99990, 0 },
		{ (2 << 20) + 7, 1 << 20, 917506, 131070 },
		{ 1 << 20, 500000, 500000, 48000 },
		{ 700001, 1, 700000, 0 },
	};
	struct psd_hdr h = { .type = PSD_MSG_PULL_RESP,
			     .dtype = PSCHED_RAW,
			     .key = 5 };
	struct tt_node b;
	struct psd_conn *bc;
	uint8_t *buf, hdr[PSD_HDR_SIZE];
	size_t i, k, off, len, piece;
	uint64_t step = 0, want;
	socklen_t sl;
	int fd, lowat;

	if (strcmp(tt_transport(), "tcp"))
		test_skip("the receive low-water mark is TCP's");
	buf = malloc(3 << 20);
	CHECK(buf != NULL);
	tt_node_init(&b, true);
	fd = trickle_dial(b.port);
	bc = tt_wait_accepted(&b, 1);
	for (i = 0; i <= PSD_ARRAY_SIZE(plan); i++, step++) {
		/* After the large ones: one small message. */
		len = i < PSD_ARRAY_SIZE(plan) ? plan[i][0] : 100;
		h.total = h.span = h.length = len;
		h.step = step;
		tt_fill(buf, len, tt_seed(5, step, len));
		psd_hdr_encode(&h, hdr);
		pthread_mutex_lock(&b.lock);
		want = b.msgs + 1;
		pthread_mutex_unlock(&b.lock);
		trickle_write(fd, hdr, sizeof(hdr));
		for (k = 1, off = 0; off < len; k++) {
			piece = k < 4 && i < PSD_ARRAY_SIZE(plan) && plan[i][k]
					? plan[i][k]
					: len - off;
			trickle_write(fd, buf + off, piece);
			off += piece;
			usleep(30000); /* the reader runs dry meanwhile */
		}
		tt_wait(&b, want, 0, 10000, "a message sent in trickles");
		tt_check_clean(&b);
		/* Read on the van thread already: the mark is back at 1. */
		sl = sizeof(lowat);
		CHECK_EQ(getsockopt(bc->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat,
				    &sl),
			 0);
		CHECK_EQ(lowat, 1);
	}
	CHECK_U64(b.next_step[5], ==, step);
	close(fd);
	tt_node_fini(&b);
	free(buf);
}

struct tt_fill_arg {
	uint64_t seed;
	unsigned calls;
};

static void tt_fill_cb(void *arg, uint8_t *dst, size_t len)
{
	struct tt_fill_arg *a = arg;

	a->calls++;
	tt_fill(dst, len, a->seed);
}

/*
 * psd_conn_send_fill() on every transport: the payload a fill writes
 * arrives whole and in order with plain sends between, whether the
 * transport places it (shm: in the ring, padded so that it never wraps,
 * and the receiver may read it there) or the caller's buffer carries it
 * (every other transport, and shm above its placing limit).  The
 * receiver takes rx_inplace whenever it is offered; only shm offers it,
 * and only for placed payloads: filled ones, and plain sends from 32 KiB
 * (SHM_CMA_MIN) up to the limit, which shm copies into the ring.
 */
static void test_transport_send_fill(void)
{
	/* Sizes so that placed payloads land at many ring offsets, some
	 * needing padding, one above the 4 MiB - 4 KiB placing limit. */
	static const size_t sizes[] = {
		700001, 5000, 3000000, 1, 2, (4 << 20) + 3, 65536, 999999
	};
	const size_t place_max = (4 << 20) - 4096, plain_min = 32 << 10;
	struct tt_fill_arg a = { 0 };
	struct tt_node x, b;
	struct psd_conn *ab;
	uint64_t step = 0, want = 0, placed = 0;
	struct psd_hdr h = { .type = PSD_MSG_PULL_RESP,
			     .dtype = PSCHED_RAW,
			     .key = 7 };
	uint8_t *buf;
	unsigned round, i;
	bool shm = !strcmp(tt_transport(), "shm");

	tt_ops(); /* skips before anything is allocated */
	buf = malloc(5 << 20);
	CHECK(buf != NULL);
	tt_node_init(&x, false);
	tt_node_init(&b, true);
	b.inplace = true;
	ab = tt_connect(&x, b.port);
	for (round = 0; round < 12; round++) {
		for (i = 0; i < PSD_ARRAY_SIZE(sizes); i++, step++) {
			h.total = h.span = h.length = sizes[i];
			h.step = step;
			if ((i + round) % 3 == 2) {
				/* A plain send in between (ring or CMA). */
				CHECK_EQ(tt_send(ab, 7, step, buf, sizes[i]),
					 0);
				if (sizes[i] >= plain_min &&
				    sizes[i] <= place_max)
					placed++;
			} else {
				a.seed = tt_seed(7, step, sizes[i]);
				/* The fallback buffer holds garbage: only
				 * the fill's bytes may arrive. */
				memset(buf, 0xa5, sizes[i]);
				CHECK_EQ(psd_conn_send_fill(ab, &h, tt_fill_cb,
							    &a, buf),
					 0);
				if (sizes[i] && sizes[i] <= place_max)
					placed++;
			}
			want++;
		}
	}
	tt_wait(&b, want, 0, 60000, "filled messages");
	tt_check_clean(&b);
	CHECK_U64(b.next_step[7], ==, step);
	CHECK_U64(a.calls, ==, want - 4 * PSD_ARRAY_SIZE(sizes));
	if (shm)
		CHECK_U64(b.inplace_msgs, ==, placed);
	else
		CHECK_U64(b.inplace_msgs, ==, 0);
	psd_conn_put(ab);
	tt_node_fini(&x);
	tt_node_fini(&b);
	free(buf);
}

const struct test_case test_list[] = {
	{ "transport_refused_connect", test_transport_refused_connect },
	{ "transport_exchange", test_transport_exchange },
	{ "transport_pieces", test_transport_pieces },
	{ "transport_tcp_trickle", test_transport_tcp_trickle },
	{ "transport_send_more", test_transport_send_more },
	{ "transport_send_fill", test_transport_send_fill },
	{ "transport_many_outstanding", test_transport_many_outstanding },
	{ "transport_credit_stall", test_transport_credit_stall },
	{ "transport_requests", test_transport_requests },
	{ "transport_requests_pipelined", test_transport_requests_pipelined },
	{ "transport_send_dev", test_transport_send_dev },
	{ "transport_close_while_busy", test_transport_close_while_busy },
	{ NULL, NULL },
};
