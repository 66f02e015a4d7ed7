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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "van.h"

#define TT_MAX_CONNS 16
#define TT_DISCARD   0xd15cad0ull /* key the receiver throws away */
#define TT_MAX_KEYS  64

struct tt_rxbuf {
	struct psd_conn *c;
	uint8_t *buf;
	size_t cap;
};

struct tt_node {
	struct psd_van *van;
	unsigned port;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct psd_conn *accepted[TT_MAX_CONNS];
	int naccepted;
	struct tt_rxbuf rx[TT_MAX_CONNS];
	uint64_t headers;
	uint64_t msgs;
	uint64_t bytes;
	uint64_t discarded;
	uint64_t bad; /* content, order or header errors seen */
	char bad_msg[200];
	uint64_t next_step[TT_MAX_KEYS];
	int closed;
	int last_err;
	bool gate;	      /* rx_data blocks while set */
	pid_t kill_on_header; /* SIGKILL this pid when a big header comes */
	uint64_t kill_min_len;
	bool die_on_header; /* child: die when a big header comes */
};

static const char *tt_transport(void)
{
	const char *t = getenv("PS_TEST_TRANSPORT");

	return t && *t ? t : "tcp";
}

static bool tt_is_rdma(void)
{
	return !strcmp(tt_transport(), "rdma");
}

static bool tt_is_loop(void)
{
	return !strcmp(tt_transport(), "loop");
}

static void tt_kill(pid_t pid);

static const char *tt_host(void)
{
	const char *h = getenv("PS_TEST_ADDR");

	if (h && *h)
		return h;
	h = getenv("RDMA_VM_ADDR");
	if (tt_is_rdma() && h && *h)
		return h;
	return "127.0.0.1";
}

/* The vans' configuration: defaults and PS_* variables (PS_RDMA_DEVICE in
 * the VM suite); a test may change a knob before it creates its nodes. */
static struct psched_cfg tt_cfg;

static const struct psched_cfg *tt_config(void)
{
	static bool loaded;

	if (!loaded) {
		psched_cfg_init(&tt_cfg);
		if (psched_cfg_from_env(&tt_cfg))
			test_fail_at(__FILE__, __LINE__, "environment: %s",
				     psched_errmsg());
		loaded = true;
	}
	return &tt_cfg;
}

static const struct psd_transport_ops *tt_ops(void)
{
	struct psd_transport_knobs k;

	const struct psd_transport_ops *ops =
		psd_transport_find(tt_transport());
	static char why[200];
	char probe[160];

	if (!ops) {
		snprintf(why, sizeof(why), "transport '%s' not built in",
			 tt_transport());
		test_skip(why);
	}
	psd_transport_knobs_init(&k, tt_config());
	if (tt_is_rdma() && !psd_rdma_probe(&k, probe, sizeof(probe))) {
		snprintf(why, sizeof(why),
			 "rdma: %s (run under ../shared/rdma-vm/run-in-rxe-vm)",
			 probe);
		test_skip(why);
	}
	return ops;
}

/* Content of message (key, step): 8-byte words of a keyed hash. */
static uint64_t tt_word(uint64_t seed, uint64_t j)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + j;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void tt_fill(uint8_t *p, size_t len, uint64_t seed)
{
	size_t j;
	uint64_t w;

	for (j = 0; j + 8 <= len; j += 8) {
		w = tt_word(seed, j / 8);
		memcpy(p + j, &w, 8);
	}
	w = tt_word(seed, j / 8);
	memcpy(p + j, &w, len - j);
}

static bool tt_check(const uint8_t *p, size_t len, uint64_t seed)
{
	size_t j;
	uint64_t w;

	for (j = 0; j + 8 <= len; j += 8) {
		w = tt_word(seed, j / 8);
		if (memcmp(p + j, &w, 8))
			return false;
	}
	w = tt_word(seed, j / 8);
	return !memcmp(p + j, &w, len - j);
}

static uint64_t tt_seed(uint64_t key, uint64_t step, uint64_t len)
{
	return key * 1000003u + step * 7919u + len;
}

static void tt_bad(struct tt_node *n, const char *what, const struct psd_hdr *h)
{
	if (!n->bad++)
		snprintf(n->bad_msg, sizeof(n->bad_msg),
			 "%s (key %llu step %llu length %llu)", what,
			 (unsigned long long)h->key,
			 (unsigned long long)h->step,
			 (unsigned long long)h->length);
}

static void tt_accepted(void *arg, struct psd_conn *c)
{
	struct tt_node *n = arg;

	pthread_mutex_lock(&n->lock);
	if (n->naccepted < TT_MAX_CONNS) {
		psd_conn_get(c);
		n->accepted[n->naccepted++] = c;
	}
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

/* Van thread: a receive buffer per connection, kept until the end. */
static uint8_t *tt_rxbuf(struct tt_node *n, struct psd_conn *c, size_t len)
{
	struct tt_rxbuf *r = NULL;
	int i;

	for (i = 0; i < TT_MAX_CONNS; i++) {
		if (n->rx[i].c == c || !n->rx[i].c) {
			r = &n->rx[i];
			break;
		}
	}
	if (!r)
		return NULL;
	r->c = c;
	if (r->cap < len) {
		/* Messages on one connection arrive one at a time. */
		free(r->buf);
		r->buf = malloc(len);
		r->cap = r->buf ? len : 0;
	}
	return r->buf;
}

static int tt_rx_header(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			void **dst)
{
	struct tt_node *n = arg;

	pthread_mutex_lock(&n->lock);
	n->headers++;
	if (n->kill_on_header > 0 && h->length >= n->kill_min_len) {
		tt_kill(n->kill_on_header);
		n->kill_on_header = 0;
	}
	pthread_mutex_unlock(&n->lock);
	if (n->die_on_header && h->length >= n->kill_min_len) {
		if (!tt_is_loop())
			raise(SIGKILL);
		/* The in-process peer "dies": its connection stops dead. */
		psd_conn_close(c);
		return -ECONNRESET;
	}
	if (h->key == TT_DISCARD)
		return PSD_RX_DISCARD;
	*dst = tt_rxbuf(n, c, (size_t)h->length);
	return *dst ? 0 : -ENOMEM;
}

static void tt_rx_data(void *arg, struct psd_conn *c, const struct psd_hdr *h,
		       void *payload)
{
	struct tt_node *n = arg;

	(void)c;
	pthread_mutex_lock(&n->lock);
	while (n->gate)
		pthread_cond_wait(&n->cond, &n->lock);
	if (h->key == TT_DISCARD) {
		if (payload)
			tt_bad(n, "discarded payload delivered", h);
		n->discarded++;
	} else if ((h->type != PSD_MSG_PUSH && h->type != PSD_MSG_PULL_RESP) ||
		   h->span != h->length || h->total != h->length ||
		   h->key >= TT_MAX_KEYS) {
		tt_bad(n, "header fields changed in transit", h);
	} else if (h->step != n->next_step[h->key]) {
		tt_bad(n, "message out of order", h);
	} else if (!payload || !tt_check(payload, (size_t)h->length,
					 tt_seed(h->key, h->step, h->length))) {
		tt_bad(n, "payload corrupted", h);
	} else {
		n->next_step[h->key]++;
	}
	n->msgs++;
	n->bytes += h->length;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

static void tt_closed(void *arg, struct psd_conn *c, int err)
{
	struct tt_node *n = arg;

	(void)c;
	pthread_mutex_lock(&n->lock);
	n->closed++;
	n->last_err = err;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

static void tt_node_init(struct tt_node *n, bool listen)
{
	struct psd_van_opts vo = { .ops = tt_ops(),
				   .max_tensor = 1ull << 30,
				   .send_timeout_ms =
					   (unsigned)test_timeout_ms(20000),
				   .cfg = tt_config() };
	struct psd_van_cb cb = { .arg = n,
				 .accepted = tt_accepted,
				 .rx_header = tt_rx_header,
				 .rx_data = tt_rx_data,
				 .closed = tt_closed };
	struct psd_addr a = { .port = 0 };
	pthread_condattr_t ca;

	memset(n, 0, sizeof(*n));
	pthread_mutex_init(&n->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&n->cond, &ca);
	pthread_condattr_destroy(&ca);
	CHECK_EQ(psd_van_create(&vo, &cb, &n->van), 0);
	if (listen) {
		snprintf(a.host, sizeof(a.host), "%s", tt_host());
		if (psd_van_listen(n->van, &a, &n->port))
			test_fail_at(__FILE__, __LINE__, "listen on %s: %s",
				     a.host, psched_errmsg());
	}
	CHECK_EQ(psd_van_start(n->van), 0);
}

static void tt_node_fini(struct tt_node *n)
{
	int i;

	for (i = 0; i < n->naccepted; i++)
		psd_conn_put(n->accepted[i]);
	psd_van_destroy(n->van);
	for (i = 0; i < TT_MAX_CONNS; i++)
		free(n->rx[i].buf);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
}

static struct psd_conn *tt_connect(struct tt_node *from, unsigned port)
{
	struct psd_addr a = { .port = port };
	struct psd_conn *c = NULL;
	int ret;

	snprintf(a.host, sizeof(a.host), "%s", tt_host());
	ret = psd_van_connect(from->van, &a, (unsigned)test_timeout_ms(10000),
			      "test peer", &c);
	if (ret)
		test_fail_at(__FILE__, __LINE__, "connect to %s:%u: %s (%s)",
			     a.host, port, psched_strerror(ret),
			     psched_errmsg());
	return c;
}

/* Wait until @n has accepted @count connections; returns the last. */
static struct psd_conn *tt_wait_accepted(struct tt_node *n, int count)
{
	struct timespec ts;
	struct psd_conn *c;

	psd_deadline(&ts, (unsigned)test_timeout_ms(10000));
	pthread_mutex_lock(&n->lock);
	while (n->naccepted < count)
		if (pthread_cond_timedwait(&n->cond, &n->lock, &ts)) {
			pthread_mutex_unlock(&n->lock);
			test_fail_at(__FILE__, __LINE__,
				     "connection %d never accepted", count);
		}
	c = n->accepted[count - 1];
	pthread_mutex_unlock(&n->lock);
	return c;
}

/* Wait until @n has received @msgs messages (or closed @closed
 * connections); fails the test on a timeout. */
static void tt_wait(struct tt_node *n, uint64_t msgs, int closed, int ms,
		    const char *what)
{
	struct timespec ts;

	psd_deadline(&ts, (unsigned)test_timeout_ms(ms));
	pthread_mutex_lock(&n->lock);
	while (n->msgs < msgs || n->closed < closed)
		if (pthread_cond_timedwait(&n->cond, &n->lock, &ts)) {
			uint64_t got = n->msgs;
			int cl = n->closed;

			pthread_mutex_unlock(&n->lock);
			test_fail_at(__FILE__, __LINE__,
				     "%s: %llu of %llu messages, %d of %d "
				     "closes within %d ms",
				     what, (unsigned long long)got,
				     (unsigned long long)msgs, cl, closed, ms);
		}
	pthread_mutex_unlock(&n->lock);
}

static void tt_check_clean(struct tt_node *n)
{
	if (n->bad)
		test_fail_at(__FILE__, __LINE__, "%llu bad messages, first: %s",
			     (unsigned long long)n->bad, n->bad_msg);
}

/*
 * Send message (key, step) of @len bytes from @buf, filled here.  A
 * response type: send() returns only when @buf may be reused.  Requests
 * (tt_send_type with PSD_MSG_PUSH) may return earlier: their buffers stay
 * untouched until the answer, as the KV API promises.
 */
static int tt_send_type(struct psd_conn *c, uint8_t type, uint64_t key,
			uint64_t step, uint8_t *buf, size_t len)
{
	struct psd_hdr h = { .type = type,
			     .dtype = PSCHED_RAW,
			     .key = key,
			     .total = len,
			     .span = len,
			     .length = len,
			     .step = step };
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	if (key != TT_DISCARD)
		tt_fill(buf, len, tt_seed(key, step, len));
	return psd_conn_send(c, &h, &iov, 1);
}

static int tt_send(struct psd_conn *c, uint64_t key, uint64_t step,
		   uint8_t *buf, size_t len)
{
	return tt_send_type(c, PSD_MSG_PULL_RESP, key, step, buf, len);
}

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

static void tt_exchange_one(struct psd_conn *c, struct tt_node *rx,
			    uint8_t *buf, size_t len, uint64_t key)
{
	uint64_t want;
	int ret;

	pthread_mutex_lock(&rx->lock);
	want = rx->msgs + 1;
	pthread_mutex_unlock(&rx->lock);
	ret = tt_send(c, key, rx->next_step[key], buf, len);
	if (ret)
		test_fail_at(__FILE__, __LINE__, "send of %zu bytes: %s (%s)",
			     len, psched_strerror(ret), psched_errmsg());
	tt_wait(rx, want, 0, 60000, "exchange");
	tt_check_clean(rx);
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

static void tt_rdma_only(void)
{
	tt_ops();
	if (!tt_is_rdma())
		test_skip("RDMA transport only");
}

static void test_transport_rdma_mr_budget(void)
{
	static const size_t len = 1 << 20;
	struct psd_rdma_stats st0, st;
	struct tt_node a, b;
	struct psd_conn *ab;
	uint64_t budget0;
	uint8_t *bufs[8];
	int i, round;

	tt_rdma_only();
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

	tt_rdma_only();
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

const struct test_case test_list[] = {
	{ "transport_refused_connect", test_transport_refused_connect },
	{ "transport_exchange", test_transport_exchange },
	{ "transport_many_outstanding", test_transport_many_outstanding },
	{ "transport_credit_stall", test_transport_credit_stall },
	{ "transport_requests", test_transport_requests },
	{ "transport_close_while_busy", test_transport_close_while_busy },
	{ "transport_peer_dies_sending", test_transport_peer_dies_sending },
	{ "transport_peer_dies_receiving", test_transport_peer_dies_receiving },
	{ "transport_rdma_mr_budget", test_transport_rdma_mr_budget },
	{ "transport_rdma_registration_fails",
	  test_transport_rdma_registration_fails },
	{ NULL, NULL },
};
