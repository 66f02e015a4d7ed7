// SPDX-License-Identifier: MIT
/*
 * The worker's KV layer (worker/kvw_*.c) against fake servers played by
 * this test: a detached worker node (psd_kvw_node_create_detached(), no
 * scheduler) talks over loop-transport connections to one van per fake
 * server; each fake server logs every chunk header it receives and answers
 * at once or when the test says so.  Config messages are fed straight into
 * the worker's config hook.  Every wait is bounded; no timing asserts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "../../worker/kvw.h"
#include "../helpers/requests.h"
#include "placement.h"

#define TK_MAX_SRV 2
#define TK_MAX_LOG 256
#define TK_WAIT_MS 10000

struct tk_ctx;

/* The transport of the worker's van (NULL: loop, as the servers'). */
static const struct psd_transport_ops *tk_worker_ops;
/* Answers the worker chose device memory for (psd_conn.rx_dev). */
static atomic_uint tk_rx_dev_count;

struct tk_srv {
	struct tk_ctx *t;
	unsigned rank;
	struct psd_van *van;
	unsigned port;
	struct psd_conn *conn; /* accepted; one reference ours */
	bool hold;	       /* false: answer on receipt */
	struct psd_hdr log[TK_MAX_LOG];
	bool answered[TK_MAX_LOG];
	uint64_t sum[TK_MAX_LOG]; /* FNV-1a of each payload */
	size_t nlog;
	uint64_t unacked; /* pushed bytes received and not acked */
	uint64_t max_unacked;
	unsigned unacked_msgs;
	unsigned max_unacked_msgs;
};

/* One per test, never freed on failure: threads of a failed test may
 * still point at it. */
struct tk_ctx {
	pthread_mutex_t lock; /* guards the tk_srv logs and tk_done */
	pthread_cond_t cond;
	struct psched_node *n;
	struct psd_van *wvan;
	struct psd_conn *wconn[TK_MAX_SRV];
	struct tk_srv srv[TK_MAX_SRV];
	unsigned nsrv;
};

struct tk_done {
	struct tk_ctx *t;
	bool fired;
	int err;
};

/* The bytes a fake server answers a pull of @key at tensor offset @off. */
static uint8_t tk_pattern(uint64_t key, uint64_t off)
{
	return (uint8_t)(off * 7 + key);
}

static void tk_deadline(struct timespec *ts)
{
	psd_deadline(ts, (unsigned)test_timeout_ms(TK_WAIT_MS));
}

/* ---- fake servers (their van threads) ---- */

static void tk_srv_accepted(void *arg, struct psd_conn *c)
{
	struct tk_srv *fs = arg;

	/* Bare vans, no postoffice and so no handshake: the test is the
	 * owner that vouches for its own connections (common/auth.h). */
	psd_conn_set_authed(c);
	psd_conn_get(c);
	pthread_mutex_lock(&fs->t->lock);
	fs->conn = c;
	pthread_cond_broadcast(&fs->t->cond);
	pthread_mutex_unlock(&fs->t->lock);
}

static int tk_srv_rx_header(void *arg, struct psd_conn *c,
			    const struct psd_hdr *h, void **dst)
{
	(void)arg;
	(void)c;
	(void)h;
	*dst = NULL; /* the scratch buffer */
	return 0;
}

/* Any thread.  Answer logged message @idx of @fs like kv_server does. */
static void tk_srv_answer(struct tk_srv *fs, size_t idx)
{
	struct psd_hdr h;
	struct iovec iov = { 0 };
	struct psd_conn *c;
	uint8_t *buf = NULL;
	uint64_t i;

	pthread_mutex_lock(&fs->t->lock);
	CHECK(idx < fs->nlog && !fs->answered[idx]);
	fs->answered[idx] = true;
	h = fs->log[idx];
	if (kvw_is_push(h.type)) {
		fs->unacked -= h.length;
		fs->unacked_msgs--;
	}
	c = fs->conn;
	pthread_mutex_unlock(&fs->t->lock);
	h.sender = psd_server_id(fs->rank);
	h.status = 0;
	h.flags = 0;
	h.length = 0;
	if (h.type != PSD_MSG_PULL) {
		uint8_t type = h.type;

		h.type = PSD_MSG_PUSH_ACK;
		psd_conn_send(c, &h, NULL, 0);
		h.type = type;
	}
	if (h.type != PSD_MSG_PULL && h.type != PSD_MSG_PUSHPULL)
		return;
	buf = malloc(h.span);
	CHECK(buf);
	for (i = 0; i < h.span; i++)
		buf[i] = tk_pattern(h.key, h.offset + i);
	h.type = PSD_MSG_PULL_RESP;
	h.length = h.span;
	iov.iov_base = buf;
	iov.iov_len = h.span;
	psd_conn_send(c, &h, &iov, 1);
	free(buf);
}

static void tk_srv_rx_data(void *arg, struct psd_conn *c,
			   const struct psd_hdr *h, void *payload)
{
	struct tk_srv *fs = arg;
	struct tk_ctx *t = fs->t;
	size_t idx;
	bool hold;

	(void)c;
	pthread_mutex_lock(&t->lock);
	idx = fs->nlog;
	if (idx >= TK_MAX_LOG) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	fs->sum[idx] = 14695981039346656037ull;
	for (size_t i = 0; payload && i < h->length; i++)
		fs->sum[idx] = (fs->sum[idx] ^ ((const uint8_t *)payload)[i]) *
			       1099511628211ull;
	fs->log[fs->nlog++] = *h;
	if (kvw_is_push(h->type)) {
		fs->unacked += h->length;
		fs->unacked_msgs++;
		if (fs->unacked > fs->max_unacked)
			fs->max_unacked = fs->unacked;
		if (fs->unacked_msgs > fs->max_unacked_msgs)
			fs->max_unacked_msgs = fs->unacked_msgs;
	}
	hold = fs->hold;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	if (!hold)
		tk_srv_answer(fs, idx);
}

/* ---- the worker's van: what the postoffice would do ---- */

static int tk_w_rx_header(void *arg, struct psd_conn *c,
			  const struct psd_hdr *h, void **dst)
{
	struct psched_node *n = arg;
	int ret = n->role->rx_header(n, c, h, dst);

	if (!ret && c->rx_dev)
		atomic_fetch_add(&tk_rx_dev_count, 1);
	return ret;
}

static void tk_w_rx_data(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			 void *payload)
{
	struct psched_node *n = arg;

	n->role->rx_data(n, c, h, payload);
}

static void tk_w_closed(void *arg, struct psd_conn *c, int err)
{
	struct psched_node *n = arg;
	struct psd_peer *p;
	bool down;

	(void)err;
	pthread_mutex_lock(&n->lock);
	p = psd_node_peer(n, c->peer_id);
	down = !p || p->dead || p->conn != c;
	if (!down)
		p->dead = true;
	pthread_mutex_unlock(&n->lock);
	if (!down)
		n->role->peer_failed(n, p, PSCHED_ENODEDEAD,
				     "connection closed");
}

/* ---- set-up, tear-down, waits ---- */

static struct tk_ctx *tk_setup(unsigned nsrv, uint64_t part, uint64_t credit,
			       unsigned req_timeout_ms)
{
	const struct psd_transport_ops *ops = psd_transport_find("loop");
	struct psd_van_opts vo = { .ops = ops,
				   .max_tensor = 1u << 30,
				   .send_timeout_ms =
					   (unsigned)test_timeout_ms(10000) };
	struct psd_addr addr = { .host = "127.0.0.1" };
	struct psched_cfg cfg;
	pthread_condattr_t ca;
	struct tk_ctx *t;
	unsigned s;

	CHECK(ops);
	t = calloc(1, sizeof(*t));
	CHECK(t);
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	t->nsrv = nsrv;
	psd_cfg_defaults(&cfg);
	cfg.partition_bytes = part;
	cfg.credit_bytes = credit;
	snprintf(cfg.scheduling, sizeof(cfg.scheduling), "priority");
	if (req_timeout_ms)
		cfg.request_timeout_ms = req_timeout_ms;
	CHECK_EQ(psd_kvw_node_create_detached(&cfg, nsrv, &t->n), 0);
	for (s = 0; s < nsrv; s++) {
		struct tk_srv *fs = &t->srv[s];
		struct psd_van_cb cb = { .arg = fs,
					 .accepted = tk_srv_accepted,
					 .rx_header = tk_srv_rx_header,
					 .rx_data = tk_srv_rx_data };

		fs->t = t;
		fs->rank = s;
		CHECK_EQ(psd_van_create(&vo, &cb, &fs->van), 0);
		CHECK_EQ(psd_van_listen(fs->van, &addr, &fs->port), 0);
		CHECK_EQ(psd_van_start(fs->van), 0);
	}
	{
		struct psd_van_cb cb = { .arg = t->n,
					 .rx_header = tk_w_rx_header,
					 .rx_data = tk_w_rx_data,
					 .closed = tk_w_closed };
		struct psd_van_opts wvo = vo;

		if (tk_worker_ops)
			wvo.ops = tk_worker_ops;
		CHECK_EQ(psd_van_create(&wvo, &cb, &t->wvan), 0);
		CHECK_EQ(psd_van_start(t->wvan), 0);
	}
	for (s = 0; s < nsrv; s++) {
		struct psd_peer *p = psd_node_peer(t->n, psd_server_id(s));
		struct psd_conn *c;

		addr.port = t->srv[s].port;
		CHECK_EQ(psd_van_connect(t->wvan, &addr, 1000, p->desc, &c), 0);
		psd_conn_set_authed(c); /* no handshake here, see above */
		c->peer_id = p->id;
		pthread_mutex_lock(&t->n->lock);
		p->conn = c;
		pthread_mutex_unlock(&t->n->lock);
		t->wconn[s] = c;
	}
	return t;
}

/* Everything the test started must be answered by now. */
static void tk_teardown(struct tk_ctx *t)
{
	unsigned s;

	psd_van_destroy(t->wvan);
	for (s = 0; s < t->nsrv; s++)
		psd_van_destroy(t->srv[s].van);
	psd_kvw_node_destroy_detached(t->n);
	for (s = 0; s < t->nsrv; s++) {
		psd_conn_put(t->wconn[s]);
		psd_conn_put(t->srv[s].conn);
	}
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Wait until @fs has logged at least @cnt messages; returns how many. */
static size_t tk_wait_logged(struct tk_srv *fs, size_t cnt)
{
	struct tk_ctx *t = fs->t;
	struct timespec ts;
	size_t got;
	int ret = 0;

	tk_deadline(&ts);
	pthread_mutex_lock(&t->lock);
	while (fs->nlog < cnt && !ret)
		ret = pthread_cond_timedwait(&t->cond, &t->lock, &ts);
	got = fs->nlog;
	pthread_mutex_unlock(&t->lock);
	CHECK_U64(got, >=, cnt);
	return got;
}

static void tk_hold(struct tk_srv *fs, bool hold)
{
	pthread_mutex_lock(&fs->t->lock);
	fs->hold = hold;
	pthread_mutex_unlock(&fs->t->lock);
}

static size_t tk_logged(struct tk_srv *fs)
{
	size_t got;

	pthread_mutex_lock(&fs->t->lock);
	got = fs->nlog;
	pthread_mutex_unlock(&fs->t->lock);
	return got;
}

static void tk_on_done(int err, uint64_t req, void *arg)
{
	struct tk_done *d = arg;

	(void)req;
	pthread_mutex_lock(&d->t->lock);
	d->fired = true;
	d->err = err;
	pthread_cond_broadcast(&d->t->cond);
	pthread_mutex_unlock(&d->t->lock);
}

static bool tk_fired(struct tk_done *d)
{
	bool f;

	pthread_mutex_lock(&d->t->lock);
	f = d->fired;
	pthread_mutex_unlock(&d->t->lock);
	return f;
}

/* Wait for @d's callback; returns its error. */
static int tk_wait_done(struct tk_done *d)
{
	struct timespec ts;
	int ret = 0;
	bool f;

	tk_deadline(&ts);
	pthread_mutex_lock(&d->t->lock);
	while (!d->fired && !ret)
		ret = pthread_cond_timedwait(&d->t->cond, &d->t->lock, &ts);
	f = d->fired;
	pthread_mutex_unlock(&d->t->lock);
	CHECK(f);
	return d->err;
}

/* A key of @total f32 bytes that lives whole on server @rank of @nsrv. */
static uint64_t tk_key_on(unsigned rank, unsigned nsrv, uint64_t total,
			  uint64_t from)
{
	uint64_t k, off, len;

	for (k = from; k < from + 10000; k++) {
		psd_place(k, total, 4, nsrv, rank, &off, &len);
		if (len == total)
			return k;
	}
	CHECK(!"no key placed on that server");
	return 0;
}

static int tk_push(struct tk_ctx *t, uint64_t key, const void *buf,
		   uint64_t len, int prio, struct tk_done *d, uint64_t *id)
{
	const void *vals[1] = { buf };

	return psched_push(t->n, &key, 1, vals, &len, PSCHED_F32, prio,
			   d ? tk_on_done : NULL, d, id);
}

static int tk_wait(struct tk_ctx *t, uint64_t id)
{
	return psched_wait(t->n, id, (unsigned)test_timeout_ms(TK_WAIT_MS));
}

/* ---- tests ---- */

/*
 * Credit 1 byte: every 1 KiB chunk is larger than the credit and goes
 * alone; while the first is unanswered, three more queue up and leave in
 * priority order (smaller first), one per ack.
 */
static void test_kv_worker_priority_order(void)
{
	struct tk_ctx *t = tk_setup(1, 0, 1, 0);
	static uint8_t buf[1024];
	int prio[4] = { 0, 5, 1, 3 };
	uint64_t id[4];
	size_t i;

	tk_hold(&t->srv[0], true);
	CHECK_EQ(tk_push(t, 10, buf, sizeof(buf), prio[0], NULL, &id[0]), 0);
	tk_wait_logged(&t->srv[0], 1);
	for (i = 1; i < 4; i++)
		CHECK_EQ(tk_push(t, 10 + i, buf, sizeof(buf), prio[i], NULL,
				 &id[i]),
			 0);
	for (i = 0; i < 4; i++) {
		/* Nothing else may leave before this ack. */
		CHECK_EQ(tk_logged(&t->srv[0]), i + 1);
		tk_srv_answer(&t->srv[0], i);
		if (i < 3)
			tk_wait_logged(&t->srv[0], i + 2);
	}
	for (i = 0; i < 4; i++)
		CHECK_EQ(tk_wait(t, id[i]), 0);
	CHECK_EQ(t->srv[0].log[0].key, 10);
	CHECK_EQ(t->srv[0].log[1].key, 12); /* priority 1 */
	CHECK_EQ(t->srv[0].log[2].key, 13); /* priority 3 */
	CHECK_EQ(t->srv[0].log[3].key, 11); /* priority 5 */
	CHECK_EQ(t->srv[0].log[1].priority, 1);
	CHECK_EQ(t->srv[0].max_unacked_msgs, 1);
	CHECK_EQ(t->srv[0].nlog, 4);
	tk_teardown(t);
}

/*
 * Partition 16 KiB, credit 48 KiB: a 256 KiB push is 16 chunks; exactly
 * three are out before any ack, each ack lets one more go, the bytes the
 * server holds unacked never exceed the credit, and the request completes
 * only with the last ack.
 */
static void test_kv_worker_credit_bounds_bytes_in_flight(void)
{
	const uint64_t part = 16384, credit = 3 * 16384, len = 256 * 1024;
	struct tk_ctx *t = tk_setup(1, part, credit, 0);
	struct tk_srv *fs = &t->srv[0];
	struct tk_done d = { .t = t };
	uint64_t covered = 0;
	uint8_t *buf = calloc(1, len);
	size_t i, want;

	CHECK(buf);
	tk_hold(fs, true);
	CHECK_EQ(tk_push(t, 20, buf, len, 0, &d, NULL), 0);
	for (i = 0; i < 16; i++) {
		want = i + 3 < 16 ? i + 3 : 16;
		tk_wait_logged(fs, want);
		CHECK(!tk_fired(&d));
		tk_srv_answer(fs, i);
	}
	CHECK_EQ(tk_wait_done(&d), 0);
	CHECK_EQ(fs->nlog, 16);
	CHECK_U64(fs->max_unacked, <=, credit);
	CHECK_U64(fs->max_unacked, ==, credit); /* the credit was used */
	for (i = 0; i < 16; i++) {
		CHECK_EQ(fs->log[i].span, part);
		CHECK_EQ(fs->log[i].part, part);
		CHECK_EQ(fs->log[i].step, 1);
		covered |= 1ull << (fs->log[i].offset / part);
	}
	CHECK_U64(covered, ==, 0xffff);
	free(buf);
	tk_teardown(t);
}

/*
 * A pushpull spread over two servers: one answers at once, the other
 * holds.  After the first server's answers are processed (a later probe
 * request to it completed), the request is still open; it completes with
 * the second server's answer, with the pulled bytes in place.
 */
static void test_kv_worker_wait_needs_every_chunk(void)
{
	const uint64_t len = 128 * 1024;
	struct tk_ctx *t = tk_setup(2, 0, 0, 0);
	struct tk_done dk = { .t = t }, dp = { .t = t };
	uint8_t *src = calloc(1, len), *dst = calloc(1, len);
	const void *pv[1] = { src };
	void *dv[1] = { dst };
	uint64_t key = 30, probe, i, off, l;
	static uint8_t pbuf[256];

	CHECK(src && dst);
	tk_hold(&t->srv[1], true);
	psd_place(key, len, 4, 2, 1, &off, &l);
	CHECK(l > 0 && l < len); /* really split over both */
	CHECK_EQ(psched_pushpull(t->n, &key, 1, pv, dv, &len, PSCHED_F32, 0,
				 tk_on_done, &dk, NULL),
		 0);
	tk_wait_logged(&t->srv[0], 1);
	tk_wait_logged(&t->srv[1], 1);
	probe = tk_key_on(0, 2, sizeof(pbuf), 1000);
	CHECK_EQ(tk_push(t, probe, pbuf, sizeof(pbuf), 0, &dp, NULL), 0);
	CHECK_EQ(tk_wait_done(&dp), 0);
	CHECK(!tk_fired(&dk));
	tk_srv_answer(&t->srv[1], 0);
	CHECK_EQ(tk_wait_done(&dk), 0);
	for (i = 0; i < len; i++)
		if (dst[i] != tk_pattern(key, i))
			break;
	CHECK_U64(i, ==, len);
	free(src);
	free(dst);
	tk_teardown(t);
}

/*
 * A server that never answers: psched_wait() fails by its timeout, and a
 * callback request by the request timeout, naming the server, key and
 * step.  The late answers are then discarded and the server still works.
 */
static void test_kv_worker_timeout_names_server_key_step(void)
{
	struct tk_ctx *t = tk_setup(2, 0, 0, (unsigned)test_timeout_ms(300));
	struct tk_done d = { .t = t }, d2 = { .t = t };
	static uint8_t buf[4096];
	uint64_t key = tk_key_on(1, 2, sizeof(buf), 40);
	uint64_t key2 = tk_key_on(1, 2, sizeof(buf), key + 1);
	char want[64];
	uint64_t id;
	int ret;

	tk_hold(&t->srv[1], true);
	CHECK_EQ(tk_push(t, key, buf, sizeof(buf), 0, NULL, &id), 0);
	tk_wait_logged(&t->srv[1], 1);
	ret = psched_wait(t->n, id, (unsigned)test_timeout_ms(200));
	CHECK_EQ(ret, -ETIMEDOUT);
	snprintf(want, sizeof(want), "key %llu (step 1)",
		 (unsigned long long)key);
	CHECK(strstr(psched_errmsg(), want));
	CHECK(strstr(psched_errmsg(), "server 2 (rank 1"));
	CHECK(strstr(psched_errmsg(), "timed out"));

	CHECK_EQ(tk_push(t, key2, buf, sizeof(buf), 0, &d, NULL), 0);
	CHECK_EQ(tk_wait_done(&d), -ETIMEDOUT);

	/* Late answers land nowhere; the server is still usable. */
	tk_hold(&t->srv[1], false);
	tk_srv_answer(&t->srv[1], 0);
	tk_srv_answer(&t->srv[1], 1);
	CHECK_EQ(tk_push(t, key, buf, sizeof(buf), 0, &d2, NULL), 0);
	CHECK_EQ(tk_wait_done(&d2), 0);
	CHECK_EQ(t->srv[1].log[2].step, 2);
	tk_teardown(t);
}

static void tk_config(struct tk_ctx *t, int phase, uint32_t epoch,
		      uint64_t part, uint64_t from)
{
	Psched__Config m = PSCHED__CONFIG__INIT;

	m.phase = phase;
	m.epoch = epoch;
	m.partition_bytes = part;
	m.apply_from_step = from;
	t->n->role->on_config(t->n, &m);
}

/* Messages of @key at @step in @fs's log. */
static size_t tk_count(struct tk_srv *fs, uint64_t key, uint64_t step)
{
	size_t i, cnt = 0;

	pthread_mutex_lock(&fs->t->lock);
	for (i = 0; i < fs->nlog; i++)
		if (fs->log[i].key == key && fs->log[i].step == step)
			cnt++;
	pthread_mutex_unlock(&fs->t->lock);
	return cnt;
}

/*
 * After a PREPARE at step 1, a push of step 2 is held: a later push of a
 * step-1 key overtakes it.  The COMMIT (partition 4 KiB from step 2)
 * releases it, cut with the new config.
 */
static void test_kv_worker_park_until_commit(void)
{
	const uint64_t len = 16384;
	struct tk_ctx *t = tk_setup(1, 0, 0, 0);
	struct tk_srv *fs = &t->srv[0];
	uint8_t *buf = calloc(1, len);
	uint64_t id, id2, idq, i;
	size_t from;

	CHECK(buf);
	CHECK_EQ(tk_push(t, 50, buf, len, 0, NULL, &id), 0);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(tk_count(fs, 50, 1), 1);

	tk_config(t, PSCHED__CONFIG__PHASE__PREPARE, 1, 4096, 2);
	CHECK_EQ(tk_push(t, 50, buf, len, 0, NULL, &id2), 0);
	/* Issued after, same priority: it leaves after step 2 would have. */
	CHECK_EQ(tk_push(t, 51, buf, 1024, 0, NULL, &idq), 0);
	CHECK_EQ(tk_wait(t, idq), 0);
	CHECK_EQ(tk_count(fs, 50, 2), 0);
	from = tk_logged(fs);

	tk_config(t, PSCHED__CONFIG__PHASE__COMMIT, 1, 4096, 2);
	CHECK_EQ(tk_wait(t, id2), 0);
	CHECK_EQ(tk_count(fs, 50, 2), 4);
	for (i = from; i < from + 4; i++) {
		CHECK_EQ(fs->log[i].key, 50);
		CHECK_EQ(fs->log[i].epoch, 1);
		CHECK_EQ(fs->log[i].span, 4096);
		CHECK_EQ(fs->log[i].part, 4096);
	}
	free(buf);
	tk_teardown(t);
}

/*
 * A COMMIT with more credit lets a step already running under less go on
 * at once (credit is the worker's own); its partition still waits for its
 * step.  Partition 4 KiB, credit 4 KiB, answers held: one chunk of a 16
 * KiB push is out; the COMMIT (credit 64 KiB from step 2) lets the other
 * three go.  One with less credit does not take it away early.
 */
static void test_kv_worker_commit_raises_credit_now(void)
{
	const uint64_t len = 16384;
	struct tk_ctx *t = tk_setup(1, 4096, 4096, 0);
	struct tk_srv *fs = &t->srv[0];
	uint8_t *buf = calloc(1, len);
	Psched__Config m = PSCHED__CONFIG__INIT;
	uint64_t id, credit;
	size_t i;

	CHECK(buf);
	tk_hold(fs, true);
	CHECK_EQ(tk_push(t, 70, buf, len, 0, NULL, &id), 0);
	tk_wait_logged(fs, 1);
	usleep(50000); /* room for a second chunk, were credit not held */
	CHECK_U64(tk_logged(fs), ==, 1);
	m.phase = PSCHED__CONFIG__PHASE__COMMIT;
	m.epoch = 1;
	m.partition_bytes = 8192;
	m.credit_bytes = 65536;
	m.apply_from_step = 2;
	t->n->role->on_config(t->n, &m);
	tk_wait_logged(fs, 4);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(fs->log[i].step, 1);
		CHECK_EQ(fs->log[i].span, 4096); /* step 1 keeps its cut */
	}
	/* less credit from step 3: not before it */
	m.epoch = 2;
	m.credit_bytes = 4096;
	m.apply_from_step = 3;
	t->n->role->on_config(t->n, &m);
	pthread_mutex_lock(&kvw_of(t->n)->lock);
	credit = kvw_of(t->n)->credit.credit;
	pthread_mutex_unlock(&kvw_of(t->n)->lock);
	CHECK_U64(credit, ==, 65536);
	tk_hold(fs, false);
	for (i = 0; i < 4; i++)
		tk_srv_answer(fs, i);
	CHECK_EQ(tk_wait(t, id), 0);
	free(buf);
	tk_teardown(t);
}

/*
 * A server whose connection dies fails the request waiting on it (naming
 * it), and later requests that need it; the other server still works.
 */
static void test_kv_worker_dead_server_fails_requests(void)
{
	struct tk_ctx *t = tk_setup(2, 0, 0, 0);
	static uint8_t buf[4096];
	uint64_t k1 = tk_key_on(1, 2, sizeof(buf), 60);
	uint64_t k0 = tk_key_on(0, 2, sizeof(buf), 60);
	struct psd_conn *c;
	uint64_t id;

	tk_hold(&t->srv[1], true);
	CHECK_EQ(tk_push(t, k1, buf, sizeof(buf), 0, NULL, &id), 0);
	tk_wait_logged(&t->srv[1], 1);
	pthread_mutex_lock(&t->lock);
	c = t->srv[1].conn;
	pthread_mutex_unlock(&t->lock);
	psd_conn_close(c);
	CHECK_EQ(tk_wait(t, id), PSCHED_ENODEDEAD);
	CHECK(strstr(psched_errmsg(), "server 2 (rank 1"));
	CHECK(strstr(psched_errmsg(), "died"));

	CHECK_EQ(tk_push(t, k0, buf, sizeof(buf), 0, NULL, &id), 0);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(tk_push(t, k1, buf, sizeof(buf), 0, NULL, &id), 0);
	CHECK_EQ(tk_wait(t, id), PSCHED_ENODEDEAD);
	CHECK_EQ(tk_logged(&t->srv[1]), 1);
	tk_teardown(t);
}

/*
 * psched_test() says 0 while a server holds the answer and 1 once it came
 * (never blocking); the request is then waited for as usual and is gone.
 * A server whose connection drops counts in psched_num_dead_nodes().
 */
static void test_kv_worker_test_and_dead_count(void)
{
	struct tk_ctx *t = tk_setup(2, 0, 0, 0);
	static uint8_t buf[4096];
	uint64_t k1 = tk_key_on(1, 2, sizeof(buf), 70);
	struct psd_conn *c;
	uint64_t id;
	int i, r = 0;

	tk_hold(&t->srv[1], true);
	CHECK_EQ(tk_push(t, k1, buf, sizeof(buf), 0, NULL, &id), 0);
	tk_wait_logged(&t->srv[1], 1);
	CHECK_EQ(psched_test(t->n, id), 0);
	CHECK_EQ(psched_test(t->n, id), 0); /* asking twice changes nothing */
	tk_srv_answer(&t->srv[1], 0);
	for (i = 0; i < 2000 && (r = psched_test(t->n, id)) == 0; i++)
		usleep(1000 * (unsigned)test_timeout_ms(5) / 5);
	CHECK_EQ(r, 1);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(psched_test(t->n, id), -ENOENT);
	CHECK(strstr(psched_errmsg(), "no request"));

	CHECK_EQ(psched_num_dead_nodes(t->n, PSCHED_GROUP_ALL), 0);
	CHECK_EQ(psched_num_dead_nodes(t->n, 0), -EINVAL);
	CHECK_EQ(psched_num_dead_nodes(t->n, 8), -EINVAL);
	tk_hold(&t->srv[1], true);
	CHECK_EQ(tk_push(t, k1, buf, sizeof(buf), 0, NULL, &id), 0);
	tk_wait_logged(&t->srv[1], 2);
	pthread_mutex_lock(&t->lock);
	c = t->srv[1].conn;
	pthread_mutex_unlock(&t->lock);
	psd_conn_close(c);
	CHECK_EQ(tk_wait(t, id), PSCHED_ENODEDEAD);
	CHECK_EQ(psched_num_dead_nodes(t->n, PSCHED_GROUP_SERVERS), 1);
	CHECK_EQ(psched_num_dead_nodes(t->n, PSCHED_GROUP_WORKERS), 0);
	CHECK_EQ(psched_num_dead_nodes(t->n, PSCHED_GROUP_ALL), 1);
	tk_teardown(t);
}

/* Declare row-sparse key @key (@rows rows of 4 f32) on the worker only,
 * as psched_row_sparse_init() would without its server round trip. */
static void tk_rows_key(struct tk_ctx *t, uint64_t key, uint64_t rows)
{
	struct psd_kvw *w = kvw_of(t->n);
	struct kvw_key *k;

	pthread_mutex_lock(&w->lock);
	k = psd_kvw_key_add(w, key, rows * 16, PSCHED_F32);
	CHECK(k);
	k->rowbytes = 16;
	pthread_mutex_unlock(&w->lock);
}

/* Answer logged message @idx of @fs with a row-sparse pull answer of
 * status @status and @len bytes (of 0x5a). */
static void tk_rows_reply(struct tk_srv *fs, size_t idx, int status,
			  uint64_t len)
{
	uint8_t buf[64];
	struct iovec iov = { .iov_base = buf, .iov_len = (size_t)len };
	struct psd_hdr h;
	struct psd_conn *c;

	CHECK_U64(len, <=, sizeof(buf));
	memset(buf, 0x5a, sizeof(buf));
	pthread_mutex_lock(&fs->t->lock);
	CHECK(idx < fs->nlog && !fs->answered[idx]);
	fs->answered[idx] = true;
	h = fs->log[idx];
	c = fs->conn;
	pthread_mutex_unlock(&fs->t->lock);
	h.sender = psd_server_id(fs->rank);
	h.type = PSD_MSG_PULL_RESP;
	h.flags = PSD_F_ROWS;
	h.status = status;
	h.length = len;
	CHECK_EQ(psd_conn_send(c, &h, &iov, len ? 1 : 0), 0);
}

/*
 * Row-sparse answers are checked like dense ones: a pull answer with an
 * error status fails the request with the server's reason (not as rows of
 * the wrong length), and rows sent in answer to a push land nowhere (they
 * once landed at NULL + the piece's offset) and fail it.
 */
static void test_kv_worker_rows_answers_checked(void)
{
	struct tk_ctx *t = tk_setup(2, 0, 0, 0);
	uint64_t key = 7, ids[2] = { 1, 40 }, id;
	float rows[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];

	tk_rows_key(t, key, 64); /* rows 0-31 on server 1, 32-63 on 2 */
	tk_hold(&t->srv[0], true);
	tk_hold(&t->srv[1], true);
	CHECK_EQ(rows_pull(t->n, key, 2, ids, out, 0, NULL, NULL, &id), 0);
	tk_wait_logged(&t->srv[0], 1);
	tk_wait_logged(&t->srv[1], 1);
	tk_rows_reply(&t->srv[0], 0, -ENOSPC, 0);
	tk_rows_reply(&t->srv[1], 0, 0, 16);
	CHECK_EQ(tk_wait(t, id), -ENOSPC);
	CHECK(strstr(psched_errmsg(), "rejected row-sparse pull of key 7"));

	CHECK_EQ(rows_push(t->n, key, 2, ids, rows, 0, NULL, NULL, &id), 0);
	tk_wait_logged(&t->srv[0], 2);
	tk_wait_logged(&t->srv[1], 2);
	tk_srv_answer(&t->srv[0], 1);
	tk_rows_reply(&t->srv[1], 1, 0, 16);
	CHECK_EQ(tk_wait(t, id), -EPROTO);
	CHECK(strstr(psched_errmsg(), "with a pull answer"));
	tk_teardown(t);
}

/* Answer raw pull @idx of @fs with @n of its keys, no counts, and @nb
 * bytes 0xC0 + rank. */
static void tk_raw_reply(struct tk_srv *fs, size_t idx, const uint64_t *keys,
			 size_t n, uint64_t nb)
{
	uint8_t vals[64];
	struct iovec iov[2] = { { (void *)(uintptr_t)keys, n * 8 },
				{ vals, (size_t)nb } };
	struct psd_hdr h;
	struct psd_conn *c;

	CHECK_U64(nb, <=, sizeof(vals));
	memset(vals, 0xc0 + fs->rank, sizeof(vals));
	pthread_mutex_lock(&fs->t->lock);
	CHECK(idx < fs->nlog && !fs->answered[idx]);
	fs->answered[idx] = true;
	h = fs->log[idx];
	c = fs->conn;
	pthread_mutex_unlock(&fs->t->lock);
	h.sender = psd_server_id(fs->rank);
	h.type = PSD_MSG_PULL_RESP;
	h.part = n;
	h.offset = 0;
	h.total = h.span = nb;
	h.length = n * 8 + nb;
	CHECK_EQ(psd_conn_send(c, &h, iov, 2), 0);
}

/* What the raw answer callback saw, by server rank (under t->lock). */
struct tk_raw_seen {
	struct tk_ctx *t;
	unsigned answers[TK_MAX_SRV];
	uint64_t first_key[TK_MAX_SRV];
	uint64_t nbytes[TK_MAX_SRV];
	uint8_t byte[TK_MAX_SRV];
};

static void tk_raw_answer(const struct psched_raw_msg *m, void *arg)
{
	struct tk_raw_seen *seen = arg;
	unsigned r = (unsigned)m->rank;

	CHECK(r < TK_MAX_SRV);
	pthread_mutex_lock(&seen->t->lock);
	seen->answers[r]++;
	seen->first_key[r] = m->nkeys ? m->keys[0] : 0;
	seen->nbytes[r] = m->nbytes;
	seen->byte[r] = m->nbytes ? ((const uint8_t *)m->vals)[0] : 0;
	pthread_mutex_unlock(&seen->t->lock);
}

/*
 * Raw requests (worker/kvw_raw.c): cut by ps-lite's key ranges, one
 * message per server that owns keys, sent although they exceed the
 * credit (raw chunks take none) and while nothing was answered; cmd and
 * tag in the header; answers of any length reach the answer callback
 * before completion; @server sends all to one server; malformed requests
 * are refused before anything is sent.
 */
static void test_kv_worker_raw_requests(void)
{
	struct tk_ctx *t = tk_setup(2, 0, 64, 0);
	const uint64_t keys[3] = { 3, (1ull << 63) + 5, UINT64_MAX };
	uint8_t vals[300];
	struct tk_raw_seen seen = { .t = t };
	struct psched_raw_request rq = {
		.op = PSCHED_OP_PUSH,
		.nkeys = 3,
		.keys = keys,
		.vals = vals,
		.nbytes = 300,
		.cmd = -4,
		.tag = 99,
	};
	struct psched_request bad = { .family = PSCHED_FAMILY_RAW,
				      .op = PSCHED_OP_PUSH };
	struct psd_hdr h;
	uint64_t id, b, e;

	memset(vals, 1, sizeof(vals));
	psched_raw_key_range(2, 0, &b, &e);
	CHECK_U64(b, ==, 0);
	CHECK_U64(e, ==, UINT64_MAX / 2);
	psched_raw_key_range(2, 1, &b, &e);
	CHECK_U64(e, ==, UINT64_MAX);
	tk_hold(&t->srv[0], true);
	tk_hold(&t->srv[1], true);
	CHECK_EQ(psched_raw_request(t->n, &rq, &id), 0);
	tk_wait_logged(&t->srv[0], 1);
	tk_wait_logged(&t->srv[1], 1); /* both out, past the credit */
	h = t->srv[1].log[0];
	CHECK_EQ(h.flags, PSD_F_RAW);
	CHECK_U64(h.part, ==, 2);
	CHECK_U64(h.span, ==, 200);
	CHECK_U64(h.key, ==, keys[1]);
	CHECK_EQ((int)h.epoch, -4);
	CHECK_U64(h.step, ==, 99);
	CHECK_U64(t->srv[0].log[0].span, ==, 100);
	CHECK_EQ(psched_test(t->n, id), 0);
	tk_srv_answer(&t->srv[0], 0);
	tk_srv_answer(&t->srv[1], 0);
	CHECK_EQ(tk_wait(t, id), 0);

	rq.op = PSCHED_OP_PULL;
	rq.vals = NULL;
	rq.nbytes = 0;
	rq.answer = tk_raw_answer;
	rq.answer_arg = &seen;
	CHECK_EQ(psched_raw_request(t->n, &rq, &id), 0);
	tk_wait_logged(&t->srv[0], 2);
	tk_wait_logged(&t->srv[1], 2);
	CHECK_U64(t->srv[0].log[1].length, ==, 8); /* keys only */
	tk_raw_reply(&t->srv[1], 1, keys + 1, 2, 40);
	CHECK_EQ(psched_test(t->n, id), 0);
	tk_raw_reply(&t->srv[0], 1, keys, 1, 0);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(seen.answers[0], 1);
	CHECK_EQ(seen.answers[1], 1);
	CHECK_U64(seen.first_key[1], ==, keys[1]);
	CHECK_U64(seen.nbytes[1], ==, 40);
	CHECK_EQ(seen.byte[1], 0xc1);
	CHECK_U64(seen.nbytes[0], ==, 0);

	/* all to server 0, by name */
	rq.server = 1;
	CHECK_EQ(psched_raw_request(t->n, &rq, &id), 0);
	tk_wait_logged(&t->srv[0], 3);
	CHECK_U64(t->srv[0].log[2].part, ==, 3);
	CHECK_EQ(tk_logged(&t->srv[1]), 2);
	tk_raw_reply(&t->srv[0], 2, keys, 3, 0);
	CHECK_EQ(tk_wait(t, id), 0);

	rq.server = 3; /* no such server */
	CHECK_EQ(psched_raw_request(t->n, &rq, &id), -EINVAL);
	rq.server = 0;
	rq.op = PSCHED_OP_PUSH;
	rq.vals = vals;
	rq.nbytes = 301; /* does not split over 3 keys */
	CHECK_EQ(psched_raw_request(t->n, &rq, &id), -EINVAL);
	CHECK(strstr(psched_errmsg(), "evenly"));
	rq.op = PSCHED_OP_PULL; /* a pull with values */
	CHECK_EQ(psched_raw_request(t->n, &rq, &id), -EINVAL);
	CHECK_EQ(psched_request(t->n, &bad, &id), -EINVAL);
	CHECK(strstr(psched_errmsg(), "psched_raw_request()"));
	CHECK_EQ(tk_logged(&t->srv[0]), 3);
	tk_teardown(t);
}

const struct test_case test_list[] = {
	{ "kv_worker_test_and_dead_count", test_kv_worker_test_and_dead_count },
	{ "kv_worker_priority_order", test_kv_worker_priority_order },
	{ "kv_worker_credit_bounds_bytes_in_flight",
	  test_kv_worker_credit_bounds_bytes_in_flight },
	{ "kv_worker_wait_needs_every_chunk",
	  test_kv_worker_wait_needs_every_chunk },
	{ "kv_worker_timeout_names_server_key_step",
	  test_kv_worker_timeout_names_server_key_step },
	{ "kv_worker_park_until_commit", test_kv_worker_park_until_commit },
	{ "kv_worker_commit_raises_credit_now",
	  test_kv_worker_commit_raises_credit_now },
	{ "kv_worker_dead_server_fails_requests",
	  test_kv_worker_dead_server_fails_requests },
	{ "kv_worker_rows_answers_checked",
	  test_kv_worker_rows_answers_checked },
	{ "kv_worker_raw_requests", test_kv_worker_raw_requests },
	{ NULL, NULL },
};
