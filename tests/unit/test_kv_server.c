// SPDX-License-Identifier: MIT
/*
 * The KV server's aggregation (server/kvs*.c), in process.  The test
 * builds a server node by hand (kvt_start(): num_worker, mode, partition,
 * a peer table naming W workers), attaches the KV layer with
 * psd_kvs_attach(), and serves it from a van on the loop transport whose
 * callbacks call the node's role hooks (struct psd_role_ops), as the postoffice
 * does.  W fake workers connect over loop connections from a second van and
 * send data messages built as worker/kv_worker.c builds them; every answer each
 * worker gets is queued and checked byte by byte.
 *
 * "Not answered yet" is checked without timing: kvt_expect_quiet() sends a
 * pull of step 0 (always answered at once) and requires that answer to be
 * the worker's next message; the server handles one message at a time on
 * its van thread and a connection keeps order, so any earlier answer
 * would have come first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "node.h"
#include "partition.h"
#include "updater.h"
#include "../../server/kvs.h"
#include "../../server/role.h"

#define KVT_MAX_W    4
#define KVT_MAX_MSGS 64
#define KVT_PROBE    0xfeedull /* request id of kvt_expect_quiet() */

struct kvt_msg {
	struct psd_hdr h;
	uint8_t *data; /* h.length bytes, owned */
};

struct kvt_worker {
	struct psd_conn *conn;
	struct kvt_msg q[KVT_MAX_MSGS];
	unsigned got;  /* messages received */
	unsigned used; /* messages taken by kvt_recv() */
};

static struct kvt {
	struct psched_node node; /* the server, built by hand */
	struct psd_peer peers[2 + KVT_MAX_W];
	struct psd_van *srv_van;
	struct psd_van *wrk_van;
	unsigned nworker;
	pthread_mutex_t lock; /* guards w[].q, got, overflow */
	pthread_cond_t cond;
	bool overflow;
	struct kvt_worker w[KVT_MAX_W];
	/* Held by the server's handlers and by a commit this thread hands
	 * the server (kvt_commit()): a server takes both on its van thread. */
	pthread_mutex_t srv_lock;
} kvt = { .srv_lock = PTHREAD_MUTEX_INITIALIZER };

/* Server side: what the postoffice does for a server node. */
static int kvt_srv_rx_header(void *arg, struct psd_conn *c,
			     const struct psd_hdr *h, void **dst)
{
	struct psched_node *n = arg;
	int ret;

	/* Stands in for the hello: the first message names its worker. */
	if (c->peer_id < 0)
		c->peer_id = h->sender;
	pthread_mutex_lock(&kvt.srv_lock);
	ret = n->role->rx_header(n, c, h, dst);
	pthread_mutex_unlock(&kvt.srv_lock);
	return ret;
}

static void kvt_srv_rx_data(void *arg, struct psd_conn *c,
			    const struct psd_hdr *h, void *payload)
{
	struct psched_node *n = arg;

	pthread_mutex_lock(&kvt.srv_lock);
	n->role->rx_data(n, c, h, payload);
	pthread_mutex_unlock(&kvt.srv_lock);
}

static void kvt_srv_closed(void *arg, struct psd_conn *c, int err)
{
	struct psched_node *n = arg;

	(void)err;
	pthread_mutex_lock(&kvt.srv_lock);
	n->role->conn_closed(n, c);
	pthread_mutex_unlock(&kvt.srv_lock);
}

/* Worker side: queue every answer for the test thread. */
static void kvt_wrk_rx_data(void *arg, struct psd_conn *c,
			    const struct psd_hdr *h, void *payload)
{
	struct kvt_worker *w = c->ctx;
	struct kvt_msg *m;

	(void)arg;
	pthread_mutex_lock(&kvt.lock);
	if (w->got == KVT_MAX_MSGS) {
		kvt.overflow = true;
	} else {
		m = &w->q[w->got];
		m->h = *h;
		m->data = NULL;
		if (h->length) {
			m->data = malloc((size_t)h->length);
			if (m->data)
				memcpy(m->data, payload, (size_t)h->length);
			else
				kvt.overflow = true;
		}
		w->got++;
	}
	pthread_cond_broadcast(&kvt.cond);
	pthread_mutex_unlock(&kvt.lock);
}

/* The one place that knows struct psched_node: a server of rank 0 of one
 * server and @nworker workers (ids as psd_worker_id() gives them). */
static void kvt_node_init(unsigned nworker, const char *mode, uint64_t part)
{
	struct psched_node *n = &kvt.node;
	unsigned r;

	memset(n, 0, sizeof(*n));
	n->cfg.role = PSCHED_ROLE_SERVER;
	snprintf(n->cfg.server_mode, sizeof(n->cfg.server_mode), "%s", mode);
	n->cfg.partition_bytes = part;
	n->cfg.max_steps_ahead = 64;
	n->num_server = 1;
	n->num_worker = nworker;
	n->id = psd_server_id(0);
	n->rank = 0;
	n->peers = kvt.peers;
	n->npeers = 2 + nworker;
	for (r = 0; r < nworker; r++) {
		struct psd_peer *p = &kvt.peers[psd_worker_id(n, r)];

		p->id = psd_worker_id(n, r);
		p->role = PSCHED_ROLE_WORKER;
		p->rank = (int)r;
		snprintf(p->desc, sizeof(p->desc), "worker %u", r);
	}
}

/* Bare vans, no postoffice and so no handshake: the test is the owner
 * that vouches for its own connections (common/auth.h). */
static void kvt_srv_accepted(void *arg, struct psd_conn *c)
{
	(void)arg;
	psd_conn_set_authed(c);
}

/* PS_SERVER_HUGEPAGES of the next kvt_start(). */
static int kvt_hugepages;

static void kvt_start(unsigned nworker, const char *mode, uint64_t part)
{
	const struct psd_transport_ops *ops = psd_transport_find("loop");
	struct psd_van_opts o = { .ops = ops,
				  .max_tensor = 1ull << 40,
				  .send_timeout_ms =
					  (unsigned)test_timeout_ms(5000) };
	struct psd_van_cb scb = { .arg = &kvt.node,
				  .accepted = kvt_srv_accepted,
				  .rx_header = kvt_srv_rx_header,
				  .rx_data = kvt_srv_rx_data,
				  .closed = kvt_srv_closed };
	struct psd_van_cb wcb = { .rx_data = kvt_wrk_rx_data };
	struct psd_addr addr = { .host = "127.0.0.1" };
	pthread_condattr_t ca;
	unsigned r;

	if (!ops)
		test_skip("no loop transport");
	CHECK(nworker <= KVT_MAX_W);
	memset(&kvt, 0, sizeof(kvt));
	kvt.nworker = nworker;
	pthread_mutex_init(&kvt.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&kvt.cond, &ca);
	pthread_condattr_destroy(&ca);
	kvt_node_init(nworker, mode, part);
	kvt.node.cfg.server_hugepages = kvt_hugepages;
	kvt.node.role = &psd_kvs_role;
	CHECK_EQ(psd_kvs_attach(&kvt.node), 0);
	CHECK_EQ(psd_van_create(&o, &scb, &kvt.srv_van), 0);
	kvt.node.van = kvt.srv_van;
	CHECK_EQ(psd_van_listen(kvt.srv_van, &addr, &addr.port), 0);
	CHECK_EQ(psd_van_start(kvt.srv_van), 0);
	CHECK_EQ(psd_van_create(&o, &wcb, &kvt.wrk_van), 0);
	CHECK_EQ(psd_van_start(kvt.wrk_van), 0);
	for (r = 0; r < nworker; r++) {
		CHECK_EQ(psd_van_connect(kvt.wrk_van, &addr,
					 (unsigned)test_timeout_ms(5000),
					 "server 0", &kvt.w[r].conn),
			 0);
		/* Before the first send, so before any answer. */
		kvt.w[r].conn->ctx = &kvt.w[r];
		psd_conn_set_authed(kvt.w[r].conn);
	}
}

static void kvt_stop(void)
{
	unsigned r, i;

	for (r = 0; r < kvt.nworker; r++)
		psd_conn_put(kvt.w[r].conn);
	psd_van_destroy(kvt.wrk_van);
	psd_van_destroy(kvt.srv_van);
	kvt.node.role->detach(&kvt.node);
	for (r = 0; r < kvt.nworker; r++)
		for (i = 0; i < kvt.w[r].got; i++)
			free(kvt.w[r].q[i].data);
	pthread_cond_destroy(&kvt.cond);
	pthread_mutex_destroy(&kvt.lock);
}

/* A request for the whole tensor @key (one server holds all of it). */
static struct psd_hdr kvt_req(uint8_t type, uint8_t dtype, uint64_t key,
			      uint64_t total, uint64_t step)
{
	struct psd_hdr h = {
		.type = type,
		.dtype = dtype,
		.key = key,
		.total = total,
		.span = total,
		.step = step,
	};

	return h;
}

/* Send @h from worker @w with @payload (h->span bytes, or none). */
static void kvt_send(unsigned w, struct psd_hdr h, const void *payload)
{
	struct iovec iov = { .iov_base = (void *)(uintptr_t)payload,
			     .iov_len = payload ? (size_t)h.span : 0 };

	h.sender = psd_worker_id(&kvt.node, w);
	h.length = payload ? h.span : 0;
	CHECK_EQ(psd_conn_send(kvt.w[w].conn, &h, &iov, payload ? 1 : 0), 0);
}

/* Worker @w's next answer (bounded wait); the caller must not free it. */
static const struct kvt_msg *kvt_recv(unsigned w)
{
	struct kvt_worker *kw = &kvt.w[w];
	struct timespec ts;
	const struct kvt_msg *m;

	psd_deadline(&ts, (unsigned)test_timeout_ms(5000));
	pthread_mutex_lock(&kvt.lock);
	while (kw->got == kw->used && !kvt.overflow)
		if (pthread_cond_timedwait(&kvt.cond, &kvt.lock, &ts))
			break;
	m = kw->got > kw->used ? &kw->q[kw->used++] : NULL;
	pthread_mutex_unlock(&kvt.lock);
	CHECK(!kvt.overflow);
	if (!m)
		test_fail_at(__FILE__, __LINE__,
			     "worker %u: no answer within the timeout", w);
	return m;
}

/* Next answer of @w must be @type with @status (and is returned). */
static const struct kvt_msg *kvt_expect(unsigned w, uint8_t type, int status)
{
	const struct kvt_msg *m = kvt_recv(w);

	CHECK_EQ(m->h.type, type);
	CHECK_EQ(m->h.status, status);
	return m;
}

/* Nothing is on its way to @w: a probe's answer comes next. */
static void kvt_expect_quiet(unsigned w, uint8_t dtype, uint64_t key,
			     uint64_t total)
{
	struct psd_hdr h = kvt_req(PSD_MSG_PULL, dtype, key, total, 0);
	const struct kvt_msg *m;

	h.req = KVT_PROBE;
	kvt_send(w, h, NULL);
	m = kvt_expect(w, PSD_MSG_PULL_RESP, 0);
	CHECK_U64(m->h.req, ==, KVT_PROBE);
}

/* Push (or pushpull) @val of step @step from @w, cut as the worker cuts
 * with partition @part (kvw_chunk_send(): the wire carries the chunk
 * size, 0 for the whole range).  Returns the number of chunks; chunk j
 * has request id j. */
static uint64_t kvt_push(unsigned w, struct psd_hdr h, uint64_t part,
			 const void *val)
{
	unsigned es = psched_dtype_size((enum psched_dtype)h.dtype);
	uint64_t total = h.total;
	uint64_t c = psd_part_chunk_size(part, es, total);
	uint64_t cnt = psd_part_count(total, c);
	uint64_t j;

	for (j = 0; j < cnt; j++) {
		psd_part_chunk(0, total, c, j, &h.offset, &h.span);
		h.part = c == total ? 0 : c;
		h.req = j;
		kvt_send(w, h, (const uint8_t *)val + h.offset);
	}
	return cnt;
}

/* Push a whole step from @w and take its acks. */
static void kvt_push_acked(unsigned w, struct psd_hdr h, uint64_t part,
			   const void *val)
{
	uint64_t cnt = kvt_push(w, h, part, val);
	uint64_t j;

	for (j = 0; j < cnt; j++)
		kvt_expect(w, PSD_MSG_PUSH_ACK, 0);
}

/* Pull @key at @step from @w and check it equals @want (version @step). */
static void kvt_pull_check(unsigned w, uint8_t dtype, uint64_t key,
			   uint64_t total, uint64_t step, const void *want)
{
	const struct kvt_msg *m;

	kvt_send(w, kvt_req(PSD_MSG_PULL, dtype, key, total, step), NULL);
	m = kvt_expect(w, PSD_MSG_PULL_RESP, 0);
	CHECK_U64(m->h.step, ==, step);
	CHECK_U64(m->h.length, ==, total);
	CHECK(!memcmp(m->data, want, (size_t)total));
}

#define KVT_N 37 /* elements: odd, so the last chunk is short */

/* Three workers push one step of @dtype cut with @part; every pull sees
 * the exact sum. */
static void kvt_sum_case(uint8_t dtype, uint64_t part, const void *const *in,
			 const void *want)
{
	uint64_t total = KVT_N * psched_dtype_size((enum psched_dtype)dtype);
	struct psched_stats st;
	unsigned w;

	kvt_start(3, "sync", part);
	for (w = 0; w < 3; w++)
		kvt_push_acked(w, kvt_req(PSD_MSG_PUSH, dtype, 7, total, 1),
			       part, in[w]);
	for (w = 0; w < 3; w++)
		kvt_pull_check(w, dtype, 7, total, 1, want);
	psched_node_stats(&kvt.node, &st);
	CHECK_U64(st.stored_bytes, ==, total);
	CHECK_U64(st.alloc_bytes, >=, 2 * total);
	kvt_stop();
}

static void test_kv_server_sum_f32_exact(void)
{
	float in[3][KVT_N], want[KVT_N];
	const void *p[3] = { in[0], in[1], in[2] };
	int i, w;

	for (i = 0; i < KVT_N; i++) {
		want[i] = 0;
		for (w = 0; w < 3; w++) {
			/* Quarters below 2^10: every partial sum is exact. */
			in[w][i] = (float)(i * 3 - w * 17) * 0.25f + 100.5f * w;
			want[i] += in[w][i];
		}
	}
	kvt_sum_case(PSCHED_F32, 12, p, want);
}

static void test_kv_server_sum_i64_exact(void)
{
	int64_t in[3][KVT_N], want[KVT_N];
	const void *p[3] = { in[0], in[1], in[2] };
	int i, w;

	for (i = 0; i < KVT_N; i++) {
		want[i] = 0;
		for (w = 0; w < 3; w++) {
			/* Beyond float precision: a float sum would round. */
			in[w][i] = ((int64_t)1 << 53) + i * 1000003 - w * 7 -
				   (w == 2 ? ((int64_t)3 << 54) : 0);
			want[i] += in[w][i];
		}
	}
	kvt_sum_case(PSCHED_I64, 0, p, want);
}

static void test_kv_server_sum_f16_exact(void)
{
	uint16_t in[3][KVT_N], want[KVT_N];
	const void *p[3] = { in[0], in[1], in[2] };
	float sum;
	int i, w;

	for (i = 0; i < KVT_N; i++) {
		sum = 0;
		for (w = 0; w < 3; w++) {
			/* Small integers and halves: exact in half. */
			float v = (float)(i - 10 * w) + (w == 1 ? 0.5f : 0);

			in[w][i] = psd_f32_to_f16(v);
			sum += v;
		}
		want[i] = psd_f32_to_f16(sum);
	}
	kvt_sum_case(PSCHED_F16, 6, p, want);
}

/*
 * A partition smaller than the element is one element per chunk, on the
 * worker and on the server alike (psd_part_chunk_size): with 1-byte
 * partitions (the server's own config too) float32 goes in 4-byte chunks.
 * The server used to read a partition below the element size as "the
 * whole range"; the wire only carries multiples of the element size, so
 * this checks the end-to-end path, and the shared rule keeps it so.
 */
static void test_kv_server_partition_below_element(void)
{
	float a[KVT_N], b[KVT_N], want[KVT_N];
	int i;

	for (i = 0; i < KVT_N; i++) {
		a[i] = (float)i;
		b[i] = (float)(2 * i) + 0.5f;
		want[i] = a[i] + b[i];
	}
	kvt_start(2, "sync", 1);
	CHECK_U64(kvt_push(0,
			   kvt_req(PSD_MSG_PUSH, PSCHED_F32, 3, sizeof(a), 1),
			   1, a),
		  ==, KVT_N);
	for (i = 0; i < KVT_N; i++)
		kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	kvt_push_acked(1, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 3, sizeof(b), 1), 1,
		       b);
	kvt_pull_check(0, PSCHED_F32, 3, sizeof(want), 1, want);
	kvt_stop();
}

/* A pull of step s waits until all W pushes of s are in. */
static void test_kv_server_pull_waits_for_all_pushes(void)
{
	float v[3][8], want[8];
	const struct kvt_msg *m;
	int i;
	unsigned w;

	for (i = 0; i < 8; i++) {
		v[0][i] = (float)i;
		v[1][i] = 10.0f;
		v[2][i] = -0.5f * (float)i;
		want[i] = v[0][i] + v[1][i] + v[2][i];
	}
	kvt_start(3, "sync", 0);
	/* The key exists once the first push is in. */
	kvt_push_acked(1, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 9, sizeof(want), 1),
		       0, v[1]);
	kvt_send(0, kvt_req(PSD_MSG_PULL, PSCHED_F32, 9, sizeof(want), 1),
		 NULL);
	kvt_push_acked(0, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 9, sizeof(want), 1),
		       0, v[0]);
	/* Two of three pushes: the pull is still waiting. */
	kvt_expect_quiet(0, PSCHED_F32, 9, sizeof(want));
	kvt_push_acked(2, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 9, sizeof(want), 1),
		       0, v[2]);
	m = kvt_expect(0, PSD_MSG_PULL_RESP, 0);
	CHECK_U64(m->h.step, ==, 1);
	CHECK(!memcmp(m->data, want, sizeof(want)));
	for (w = 0; w < 3; w++)
		kvt_expect_quiet(w, PSCHED_F32, 9, sizeof(want));
	kvt_stop();
}

/* Pulls queued before their version exist are answered by priority
 * (smaller first, ties in arrival order) once it does. */
static void test_kv_server_early_pulls_by_priority(void)
{
	static const int prio[] = { 5, -1, 3, 3, 0 };
	static const uint64_t order[] = { 1, 4, 2, 3, 0 };
	float v[4] = { 1, 2, 3, 4 }, want[4];
	struct psd_hdr h = kvt_req(PSD_MSG_PULL, PSCHED_F32, 11, sizeof(v), 1);
	const struct kvt_msg *m;
	unsigned i;

	for (i = 0; i < 4; i++)
		want[i] = 2 * v[i];
	kvt_start(2, "sync", 0);
	kvt_push_acked(1, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 11, sizeof(v), 1),
		       0, v);
	for (i = 0; i < PSD_ARRAY_SIZE(prio); i++) {
		h.priority = prio[i];
		h.req = 100 + i;
		kvt_send(0, h, NULL);
	}
	kvt_expect_quiet(0, PSCHED_F32, 11, sizeof(v));
	kvt_push(0, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 11, sizeof(v), 1), 0, v);
	kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	for (i = 0; i < PSD_ARRAY_SIZE(order); i++) {
		m = kvt_expect(0, PSD_MSG_PULL_RESP, 0);
		CHECK_U64(m->h.req, ==, 100 + order[i]);
		CHECK_EQ(m->h.priority, prio[order[i]]);
		CHECK(!memcmp(m->data, want, sizeof(want)));
	}
	kvt_stop();
}

/* A push of step s + 1 is held (and acked) until step s is applied; it
 * neither counts towards s nor is lost. */
static void test_kv_server_later_step_held(void)
{
	float a1[6], b1[6], a2[6], b2[6], s1[6], s2[6];
	int i;

	for (i = 0; i < 6; i++) {
		a1[i] = (float)i;
		b1[i] = 100.0f;
		a2[i] = 1000.0f + (float)i;
		b2[i] = 0.25f;
		s1[i] = a1[i] + b1[i];
		s2[i] = a2[i] + b2[i];
	}
	kvt_start(2, "sync", 8);
	kvt_push_acked(0, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 5, sizeof(a1), 1),
		       8, a1);
	kvt_push_acked(0, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 5, sizeof(a2), 2),
		       8, a2);
	/* Step 1 has one push of two, step 2 is not open: nothing yet. */
	kvt_send(1, kvt_req(PSD_MSG_PULL, PSCHED_F32, 5, sizeof(s2), 2), NULL);
	kvt_expect_quiet(1, PSCHED_F32, 5, sizeof(s1));
	kvt_push_acked(1, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 5, sizeof(b1), 1),
		       8, b1);
	kvt_pull_check(0, PSCHED_F32, 5, sizeof(s1), 1, s1);
	/* The held push went into step 2; it needs worker 1's too. */
	kvt_expect_quiet(1, PSCHED_F32, 5, sizeof(s1));
	kvt_push(1, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 5, sizeof(b2), 2), 8, b2);
	for (i = 0; i < 3; i++)
		kvt_expect(1, PSD_MSG_PUSH_ACK, 0);
	{
		const struct kvt_msg *m = kvt_expect(1, PSD_MSG_PULL_RESP, 0);

		CHECK_U64(m->h.step, ==, 2);
		CHECK(!memcmp(m->data, s2, sizeof(s2)));
	}
	kvt_pull_check(0, PSCHED_F32, 5, sizeof(s2), 2, s2);
	kvt_stop();
}

/* Send one push chunk of step @step at [@off, @off + @span) that must be
 * refused with -EPROTO. */
static void kvt_push_refused(struct psd_hdr h, uint64_t off, uint64_t span,
			     const float *val)
{
	const struct kvt_msg *m;

	h.offset = off;
	h.span = span;
	kvt_send(0, h, (const uint8_t *)val + off);
	m = kvt_expect(0, PSD_MSG_PUSH_ACK, -EPROTO);
	CHECK_U64(m->h.offset, ==, off);
	CHECK_U64(m->h.length, ==, 0);
}

/* Chunks that do not fit the step's layout, its config epoch or its
 * step are refused with an error answer and change nothing. */
static void test_kv_server_bad_chunk_refused(void)
{
	Psched__Config cfg = PSCHED__CONFIG__INIT;
	float v[4] = { 1, 2, 3, 4 }, bad[4] = { -9, -9, -9, -9 };
	float want1[4], want2[4];
	struct psd_hdr h;
	int i;

	for (i = 0; i < 4; i++) {
		want1[i] = 2 * v[i];
		want2[i] = v[i] + 10.0f;
	}
	kvt_start(2, "sync", 8);
	for (i = 0; i < 2; i++)
		kvt_push_acked((unsigned)i,
			       kvt_req(PSD_MSG_PUSH, PSCHED_F32, 2, 16, 1), 8,
			       v);
	kvt_pull_check(0, PSCHED_F32, 2, 16, 1, want1);
	/* Epoch 1 starts at step 10: step 2 still belongs to epoch 0. */
	cfg.epoch = 1;
	cfg.partition_bytes = 8;
	cfg.apply_from_step = 10;
	kvt.node.role->on_config(&kvt.node, &cfg);

	h = kvt_req(PSD_MSG_PUSH, PSCHED_F32, 2, 16, 2);
	h.part = 8;
	kvt_push_refused(h, 4, 8, bad);	 /* not on a chunk boundary */
	kvt_push_refused(h, 0, 4, bad);	 /* shorter than its chunk */
	kvt_push_refused(h, 0, 12, bad); /* longer than its chunk */
	h.part = 4;
	kvt_push_refused(h, 0, 4, bad); /* another layout for step 2 */
	h.part = 8;
	h.epoch = 1;
	kvt_push_refused(h, 0, 8, bad); /* cut with the wrong epoch */
	h.epoch = 0;
	h.step = 1;
	kvt_push_refused(h, 0, 8, bad); /* step already applied */
	kvt_pull_check(1, PSCHED_F32, 2, 16, 1, want1);

	/* Step 2 still takes exactly the W good pushes. */
	kvt_push_acked(0, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 2, 16, 2), 8, v);
	for (i = 0; i < 4; i++)
		bad[i] = 10.0f;
	kvt_push_acked(1, kvt_req(PSD_MSG_PUSH, PSCHED_F32, 2, 16, 2), 8, bad);
	kvt_pull_check(0, PSCHED_F32, 2, 16, 2, want2);
	kvt_stop();
}

/* A pushpull chunk is answered (to every worker) as soon as that chunk
 * has all W pushes, while other chunks of the step are still open. */
static void test_kv_server_pushpull_per_chunk(void)
{
	float a[4] = { 1, 2, 3, 4 }, b[4] = { 0.5f, 0.5f, 8, 8 }, sum[4];
	struct psd_hdr h = kvt_req(PSD_MSG_PUSHPULL, PSCHED_F32, 4, 16, 1);
	const struct kvt_msg *m;
	unsigned w;
	int i;

	for (i = 0; i < 4; i++)
		sum[i] = a[i] + b[i];
	kvt_start(2, "sync", 8);
	/* Worker 0: both chunks, each acked (credit back) but not answered. */
	CHECK_U64(kvt_push(0, h, 8, a), ==, 2);
	kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	kvt_expect_quiet(0, PSCHED_F32, 4, 16);
	/* Worker 1: chunk 0 only. */
	h.offset = 0;
	h.span = 8;
	h.part = 8;
	kvt_send(1, h, b);
	for (w = 0; w < 2; w++) {
		m = kvt_expect(w, PSD_MSG_PULL_RESP, 0);
		CHECK_U64(m->h.offset, ==, 0);
		CHECK_U64(m->h.span, ==, 8);
		CHECK_U64(m->h.step, ==, 1);
		CHECK(!memcmp(m->data, sum, 8));
	}
	/* Chunk 1 has one push of two: not answered. */
	kvt_expect_quiet(0, PSCHED_F32, 4, 16);
	h.offset = 8;
	h.req = 1;
	kvt_send(1, h, (const uint8_t *)b + 8);
	for (w = 0; w < 2; w++) {
		m = kvt_expect(w, PSD_MSG_PULL_RESP, 0);
		CHECK_U64(m->h.offset, ==, 8);
		CHECK_U64(m->h.req, ==, 1);
		CHECK(!memcmp(m->data, sum + 2, 8));
	}
	kvt_pull_check(1, PSCHED_F32, 4, 16, 1, sum);
	kvt_stop();
}

/* With sgd installed, each completed step is folded in exactly once:
 * w -= lr * (sum of the W gradients), chunk by chunk. */
static void test_kv_server_sgd_once_per_step(void)
{
	struct psched_optimizer opt;
	float w0[6], g0[6], g1[6], want[6];
	struct psd_hdr h = kvt_req(PSD_MSG_INIT, PSCHED_F32, 6, sizeof(w0), 0);
	uint64_t step;
	int i;

	for (i = 0; i < 6; i++) {
		w0[i] = (float)i;
		g0[i] = 0.25f * (float)i;
		g1[i] = 0.5f;
		want[i] = w0[i];
	}
	kvt_start(2, "sync", 8);
	psched_optimizer_init(&opt);
	opt.learning_rate = 0.5;
	CHECK_EQ(psd_kvs_command(&kvt.node, 0, &opt), 0);
	h.flags = PSD_F_HAS_VALUE;
	kvt_send(0, h, w0);
	kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	kvt_pull_check(1, PSCHED_F32, 6, sizeof(w0), 0, w0);
	for (step = 1; step <= 3; step++) {
		kvt_push_acked(
			0,
			kvt_req(PSD_MSG_PUSH, PSCHED_F32, 6, sizeof(g0), step),
			8, g0);
		kvt_push_acked(
			1,
			kvt_req(PSD_MSG_PUSH, PSCHED_F32, 6, sizeof(g1), step),
			8, g1);
		/* Exact in float: quarters and halves times 0.5. */
		for (i = 0; i < 6; i++)
			want[i] -= 0.5f * (g0[i] + g1[i]);
		kvt_pull_check(0, PSCHED_F32, 6, sizeof(want), step, want);
	}
	kvt_stop();
}

/* Early pushes are held within the steps-ahead limit and the byte budget;
 * each one beyond is refused on its own (-ENOBUFS, -ERANGE).  When the
 * other worker catches up the held ones apply, the sum is exact, and no
 * held byte stays counted. */
static void test_kv_server_early_push_limits(void)
{
	float v[4] = { 1, 2, 3, 4 }, want[4];
	struct psd_hdr h = kvt_req(PSD_MSG_PUSH, PSCHED_F32, 5, sizeof(v), 0);
	static const int expect[] = { 0, 0, 0, -ENOBUFS, -ERANGE };
	struct psd_kvs *s;
	unsigned i;

	kvt_start(2, "sync", 0);
	s = psd_kvs_of(&kvt.node);
	s->max_ahead = 3;
	s->max_parked = 2 * sizeof(v);
	for (i = 0; i < 5; i++) {
		h.step = i + 1;
		kvt_send(0, h, v);
		kvt_expect(0, PSD_MSG_PUSH_ACK, expect[i]);
	}

	CHECK_U64(s->parked_bytes, ==, 2 * sizeof(v));
	/* A push for step 1e9 is refused at its header, nothing held. */
	h.step = 1000000000;
	kvt_send(0, h, v);
	kvt_expect(0, PSD_MSG_PUSH_ACK, -ERANGE);
	CHECK_U64(s->parked_bytes, ==, 2 * sizeof(v));
	for (h.step = 1; h.step <= 3; h.step++)
		kvt_push_acked(1, h, 0, v);
	for (i = 0; i < 4; i++)
		want[i] = 2 * v[i];
	kvt_pull_check(0, PSCHED_F32, 5, sizeof(v), 3, want);
	CHECK_U64(s->parked_bytes, ==, 0);
	/* The refused step 4 can still be pushed now that it is open. */
	h.step = 4;
	kvt_push_acked(0, h, 0, v);
	kvt_stop();
}

/* Large keys: value and merge buffer are one block, 2 MiB-aligned from
 * 2 MiB on with PS_SERVER_HUGEPAGES=1 (kvs_store.c, transparent huge
 * pages; one calloc without it), the two halves swap at
 * every step, and sums stay exact over several steps, for a pair of
 * exactly one huge page and one that is not rounded up to them. */
static void kvt_large_case(uint64_t key, uint64_t total, bool huge)
{
	size_t n = (size_t)total / 4, i;
	float *in[2], *want = malloc(total);
	const struct psd_kvs_entry *e;
	const uint8_t *lo;
	uint64_t step;
	unsigned w;

	in[0] = malloc(total);
	in[1] = malloc(total);
	CHECK(in[0] && in[1] && want);
	for (step = 1; step <= 3; step++) {
		for (i = 0; i < n; i++) {
			in[0][i] = (float)(i % 1000) + (float)step;
			in[1][i] = 0.5f * (float)step;
			want[i] = in[0][i] + in[1][i];
		}
		for (w = 0; w < 2; w++)
			kvt_push_acked(w,
				       kvt_req(PSD_MSG_PUSH, PSCHED_F32, key,
					       total, step),
				       256 << 10, in[w]);
		for (w = 0; w < 2; w++)
			kvt_pull_check(w, PSCHED_F32, key, total, step, want);
		e = psd_kvs_entry_find(psd_kvs_of(&kvt.node), key);
		CHECK(e != NULL);
		lo = e->value < e->merge ? e->value : e->merge;
		CHECK_U64(
			(uint64_t)((e->value < e->merge ? e->merge : e->value) -
				   lo),
			==, total);
		if (huge)
			CHECK_U64((uintptr_t)lo % (2u << 20), ==, 0);
	}
	free(in[0]);
	free(in[1]);
	free(want);
}

static void test_kv_server_large_key_block(void)
{
	int huge;

	for (huge = 0; huge <= 1; huge++) {
		kvt_hugepages = huge;
		kvt_start(2, "sync", 0);
		kvt_large_case(21, 1u << 20, huge);
		kvt_large_case(22, 3u << 19, huge);
		kvt_stop();
	}
	kvt_hugepages = 0;
}

/* A row-sparse message of @len payload bytes from @w (common/rows.h):
 * key @key, a table of 4 rows of two floats, all on this server. */
static void kvt_rows_send(unsigned w, uint8_t type, uint64_t key, uint64_t step,
			  const void *payload, uint64_t len, int prio,
			  uint64_t req)
{
	struct psd_hdr h = kvt_req(type, PSCHED_F32, key, 32, step);
	struct iovec iov = { .iov_base = (void *)(uintptr_t)payload,
			     .iov_len = (size_t)len };

	h.flags = PSD_F_ROWS;
	h.part = 8; /* bytes per row */
	h.priority = prio;
	h.req = req;
	h.sender = psd_worker_id(&kvt.node, w);
	h.length = len;
	CHECK_EQ(psd_conn_send(kvt.w[w].conn, &h, &iov, len ? 1 : 0), 0);
}

/* A row push of step 1: prefix (@nrows, one piece), ids, rows. */
static void kvt_rows_push(unsigned w, uint64_t key, const uint64_t *ids,
			  uint32_t nrows, const float *rows)
{
	uint8_t buf[8 + 4 * (8 + 8)];
	uint32_t pieces = 1;

	memcpy(buf, &nrows, 4);
	memcpy(buf + 4, &pieces, 4);
	memcpy(buf + 8, ids, nrows * 8);
	memcpy(buf + 8 + nrows * 8, rows, nrows * 8);
	kvt_rows_send(w, PSD_MSG_PUSH, key, 1, buf, 8 + nrows * 16, 0, 7);
}

/* Row-sparse pulls waiting for their step are answered by priority, as
 * dense ones are (smaller first, ties in arrival order). */
static void test_kv_server_rows_pulls_by_priority(void)
{
	static const int prio[] = { 5, -1, 3, 3, 0 };
	static const uint64_t order[] = { 1, 4, 2, 3, 0 };
	static const uint64_t ids0[] = { 0, 2 }, ids1[] = { 1 };
	static const float r0[] = { 1, 2, 5, 6 }, r1[] = { 3, 4 };
	static const float want[] = { 1, 2, 3, 4, 5, 6 };
	uint8_t pull[8 + 3 * 8] = { 3 }; /* 3 rows, 0 pieces */
	const struct kvt_msg *m;
	uint64_t id;
	unsigned i;

	for (id = 0; id < 3; id++)
		memcpy(pull + 8 + id * 8, &id, 8);
	kvt_start(2, "sync", 0);
	kvt_rows_send(0, PSD_MSG_INIT, 21, 0, NULL, 0, 0, 1);
	kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	for (i = 0; i < PSD_ARRAY_SIZE(prio); i++)
		kvt_rows_send(0, PSD_MSG_PULL, 21, 1, pull, sizeof(pull),
			      prio[i], 100 + i);
	/* the pulls wait: the push's ack comes first */
	kvt_rows_push(0, 21, ids0, 2, r0);
	kvt_expect(0, PSD_MSG_PUSH_ACK, 0);
	kvt_rows_push(1, 21, ids1, 1, r1);
	kvt_expect(1, PSD_MSG_PUSH_ACK, 0);
	for (i = 0; i < PSD_ARRAY_SIZE(order); i++) {
		m = kvt_expect(0, PSD_MSG_PULL_RESP, 0);
		CHECK_U64(m->h.req, ==, 100 + order[i]);
		CHECK_U64(m->h.step, ==, 1);
		CHECK_U64(m->h.length, ==, sizeof(want));
		CHECK(!memcmp(m->data, want, sizeof(want)));
	}
	kvt_stop();
}

/* A commit of config @epoch from step @from whose members are the
 * ranks of bitmap @bm (@cnt of them). */
static void kvt_commit(uint32_t epoch, uint64_t from, uint8_t bm, unsigned cnt)
{
	Psched__Config cfg = PSCHED__CONFIG__INIT;

	cfg.epoch = epoch;
	cfg.apply_from_step = from;
	cfg.num_members = cnt;
	cfg.members.data = &bm;
	cfg.members.len = 1;
	pthread_mutex_lock(&kvt.srv_lock);
	kvt.node.role->on_config(&kvt.node, &cfg);
	pthread_mutex_unlock(&kvt.srv_lock);
}

/* One whole-range push of step @step, config @epoch, from @w. */
static void kvt_push_epoch(unsigned w, uint64_t step, uint32_t epoch,
			   const float *v, int status)
{
	struct psd_hdr h = kvt_req(PSD_MSG_PUSH, PSCHED_F32, 4, 16, step);

	h.epoch = epoch;
	kvt_send(w, h, v);
	kvt_expect(w, PSD_MSG_PUSH_ACK, status);
}

/*
 * Membership epochs (docs/elastic.md): from a config's first step a
 * step sums exactly its members' pushes.  A non-member's push is
 * refused; a step pushed with a config whose commit has not come yet
 * waits for it (its members are unknown); a membership-only commit from
 * a step already open counts that step with the new members.
 */
static void test_kv_server_membership(void)
{
	float v[3][4], want[4];
	unsigned i, w;

	for (w = 0; w < 3; w++)
		for (i = 0; i < 4; i++)
			v[w][i] = (float)(w + 1) * 100.0f + (float)i;
	kvt_start(3, "sync", 0);
	for (w = 0; w < 3; w++)
		kvt_push_epoch(w, 1, 0, v[w], 0);
	for (i = 0; i < 4; i++)
		want[i] = v[0][i] + v[1][i] + v[2][i];
	kvt_pull_check(0, PSCHED_F32, 4, 16, 1, want);

	/* Step 2: ranks 0 and 2 only; rank 1's push is refused. */
	kvt_commit(1, 2, 0x05, 2);
	kvt_push_epoch(1, 2, 1, v[1], -EPROTO);
	kvt_push_epoch(0, 2, 1, v[0], 0);
	kvt_push_epoch(2, 2, 1, v[2], 0);
	for (i = 0; i < 4; i++)
		want[i] = v[0][i] + v[2][i];
	kvt_pull_check(1, PSCHED_F32, 4, 16, 2, want);

	/* Step 3 under epoch 2 (every rank), pushed before its commit: two
	 * pushes do not complete it, though epoch 1 had two members. */
	kvt_push_epoch(0, 3, 2, v[0], 0);
	kvt_push_epoch(2, 3, 2, v[2], 0);
	kvt_send(0, kvt_req(PSD_MSG_PULL, PSCHED_F32, 4, 16, 3), NULL);
	kvt_expect_quiet(0, PSCHED_F32, 4, 16);
	kvt_commit(2, 3, 0x07, 3);
	kvt_expect_quiet(0, PSCHED_F32, 4, 16);
	kvt_push_epoch(1, 3, 2, v[1], 0);
	for (i = 0; i < 4; i++)
		want[i] = v[0][i] + v[1][i] + v[2][i];
	CHECK(!memcmp(kvt_expect(0, PSD_MSG_PULL_RESP, 0)->data, want, 16));

	/* Step 4 opened under epoch 2; epoch 3 (ranks 0 and 1, the same
	 * layout) starts there: rank 0's push counts, rank 2 is out. */
	kvt_push_epoch(0, 4, 2, v[0], 0);
	kvt_commit(3, 4, 0x03, 2);
	kvt_push_epoch(2, 4, 3, v[2], -EPROTO);
	kvt_push_epoch(1, 4, 3, v[1], 0);
	for (i = 0; i < 4; i++)
		want[i] = v[0][i] + v[1][i];
	kvt_pull_check(2, PSCHED_F32, 4, 16, 4, want);
	kvt_stop();
}

/* What the raw handler of test_kv_server_raw_handler() saw. */
static struct {
	unsigned calls;
	struct psched_raw_msg last; /* arrays point into the copies below */
	uint64_t keys[4];
	uint32_t lens[4];
	uint8_t vals[32];
	struct psched_raw_call *held;
} kvt_raw;

/* Van thread.  cmd 1: acked at once; cmd 2: held for the test thread;
 * a pull: answered with its keys, their lens doubled and bytes 0xA0 + i. */
static void kvt_raw_handler(struct psched_node *n, struct psched_raw_call *call,
			    const struct psched_raw_msg *req, void *arg)
{
	static const uint8_t out[6] = { 0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5 };
	uint32_t lens[4];
	struct psched_raw_msg ans = { 0 };
	size_t i;

	(void)arg;
	CHECK(req->nkeys <= 4 && req->nbytes <= sizeof(kvt_raw.vals));
	kvt_raw.calls++;
	kvt_raw.last = *req;
	memcpy(kvt_raw.keys, req->keys, req->nkeys * 8);
	if (req->lens)
		memcpy(kvt_raw.lens, req->lens, req->nkeys * 4);
	if (req->nbytes)
		memcpy(kvt_raw.vals, req->vals, (size_t)req->nbytes);
	if (req->pull) {
		for (i = 0; i < req->nkeys; i++)
			lens[i] = 3;
		ans.nkeys = req->nkeys;
		ans.keys = req->keys;
		ans.lens = lens;
		ans.nbytes = 3 * req->nkeys;
		ans.vals = out;
		CHECK_EQ(psched_raw_respond(n, call, &ans), 0);
	} else if (req->cmd == 2) {
		kvt_raw.held = call;
	} else {
		CHECK_EQ(psched_raw_respond(n, call, NULL), 0);
	}
}

/* Send raw request @type of @n @keys (with @lens when not NULL) and
 * @nbytes @vals from worker @w. */
static void kvt_send_raw(unsigned w, uint8_t type, uint64_t req, int cmd,
			 size_t n, const uint64_t *keys, const uint32_t *lens,
			 const void *vals, uint64_t nbytes)
{
	struct psd_hdr h = { .type = type, .flags = PSD_F_RAW };
	struct iovec iov[3];
	int k = 0;

	h.sender = psd_worker_id(&kvt.node, w);
	h.key = n ? keys[0] : 0;
	h.part = n;
	h.offset = lens ? 1 : 0;
	h.total = h.span = nbytes;
	h.epoch = (uint32_t)cmd;
	h.step = 0x1234500000000000ull | req;
	h.req = req;
	iov[k].iov_base = (void *)(uintptr_t)keys;
	iov[k++].iov_len = n * 8;
	if (lens) {
		iov[k].iov_base = (void *)(uintptr_t)lens;
		iov[k++].iov_len = n * 4;
	}
	iov[k].iov_base = (void *)(uintptr_t)vals;
	iov[k++].iov_len = (size_t)nbytes;
	for (int i = 0; i < k; i++)
		h.length += iov[i].iov_len;
	CHECK_EQ(psd_conn_send(kvt.w[w].conn, &h, iov, k), 0);
}

/* Raw requests (server/kvs_raw.c) reach the handler as they came, with
 * their cmd, tag and worker; a held push is answered later from another
 * thread and only then acknowledged; a pull's answer carries what the
 * handler gave; without a handler a request is refused. */
static void test_kv_server_raw_handler(void)
{
	const uint64_t keys[2] = { 5, 1ull << 60 };
	const uint32_t lens[2] = { 4, 8 };
	uint8_t vals[12];
	const struct kvt_msg *m;
	size_t i;

	for (i = 0; i < sizeof(vals); i++)
		vals[i] = (uint8_t)(i * 7);
	memset(&kvt_raw, 0, sizeof(kvt_raw));
	kvt_start(2, "sync", 0);
	CHECK_EQ(
		psched_server_set_raw_handler(&kvt.node, kvt_raw_handler, NULL),
		0);
	kvt_send_raw(1, PSD_MSG_PUSH, 1, 2, 2, keys, lens, vals, 12);
	/* the held push is not answered: the next answer is the probe's */
	kvt_send_raw(1, PSD_MSG_PUSH, 2, 1, 2, keys, NULL, vals, 12);
	m = kvt_expect(1, PSD_MSG_PUSH_ACK, 0);
	CHECK_U64(m->h.req, ==, 2);
	CHECK_EQ(m->h.flags, PSD_F_RAW);
	CHECK_EQ(kvt_raw.calls, 2);
	CHECK(kvt_raw.held != NULL);
	CHECK_EQ(psched_raw_respond(&kvt.node, kvt_raw.held, NULL), 0);
	m = kvt_expect(1, PSD_MSG_PUSH_ACK, 0);
	CHECK_U64(m->h.req, ==, 1);
	CHECK_U64(m->h.step, ==, 0x1234500000000001ull); /* tag echoed */

	kvt_send_raw(0, PSD_MSG_PULL, 3, -7, 2, keys, NULL, NULL, 0);
	m = kvt_expect(0, PSD_MSG_PULL_RESP, 0);
	CHECK_EQ(kvt_raw.calls, 3);
	CHECK_EQ(kvt_raw.last.cmd, -7);
	CHECK_U64(kvt_raw.last.tag, ==, 0x1234500000000003ull);
	CHECK(kvt_raw.last.pull && !kvt_raw.last.push);
	CHECK_EQ(kvt_raw.last.rank, 0);
	CHECK_EQ(kvt_raw.last.sender, psd_worker_id(&kvt.node, 0));
	CHECK_U64(m->h.part, ==, 2);
	CHECK_U64(m->h.offset, ==, 1);
	CHECK_U64(m->h.length, ==, 2 * 8 + 2 * 4 + 6);
	CHECK(!memcmp(m->data, keys, 16));
	CHECK_EQ(((const uint32_t *)(m->data + 16))[1], 3);
	CHECK_EQ(m->data[16 + 8 + 5], 0xa5);

	/* what the first push carried, as it came */
	kvt_send_raw(0, PSD_MSG_PUSHPULL, 4, 9, 2, keys, lens, vals, 12);
	kvt_expect(0, PSD_MSG_PULL_RESP, 0);
	CHECK(kvt_raw.last.push && kvt_raw.last.pull);
	CHECK_EQ(kvt_raw.last.nkeys, 2);
	CHECK_U64(kvt_raw.keys[1], ==, 1ull << 60);
	CHECK(kvt_raw.last.lens != NULL);
	CHECK_EQ(kvt_raw.lens[1], 8);
	CHECK_U64(kvt_raw.last.nbytes, ==, 12);
	CHECK(!memcmp(kvt_raw.vals, vals, 12));

	CHECK_EQ(psched_server_set_raw_handler(&kvt.node, NULL, NULL), 0);
	kvt_send_raw(0, PSD_MSG_PUSH, 5, 1, 2, keys, NULL, vals, 12);
	m = kvt_expect(0, PSD_MSG_PUSH_ACK, -EOPNOTSUPP);
	CHECK_U64(m->h.req, ==, 5);
	kvt_stop();
}

const struct test_case test_list[] = {
	{ "kv_server_sum_f32_exact", test_kv_server_sum_f32_exact },
	{ "kv_server_membership", test_kv_server_membership },
	{ "kv_server_sum_i64_exact", test_kv_server_sum_i64_exact },
	{ "kv_server_sum_f16_exact", test_kv_server_sum_f16_exact },
	{ "kv_server_partition_below_element",
	  test_kv_server_partition_below_element },
	{ "kv_server_pull_waits_for_all_pushes",
	  test_kv_server_pull_waits_for_all_pushes },
	{ "kv_server_early_pulls_by_priority",
	  test_kv_server_early_pulls_by_priority },
	{ "kv_server_later_step_held", test_kv_server_later_step_held },
	{ "kv_server_bad_chunk_refused", test_kv_server_bad_chunk_refused },
	{ "kv_server_pushpull_per_chunk", test_kv_server_pushpull_per_chunk },
	{ "kv_server_sgd_once_per_step", test_kv_server_sgd_once_per_step },
	{ "kv_server_early_push_limits", test_kv_server_early_push_limits },
	{ "kv_server_large_key_block", test_kv_server_large_key_block },
	{ "kv_server_rows_pulls_by_priority",
	  test_kv_server_rows_pulls_by_priority },
	{ "kv_server_raw_handler", test_kv_server_raw_handler },
	{ NULL, NULL },
};
