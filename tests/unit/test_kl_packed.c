// SPDX-License-Identifier: MIT
/*
 * Packed key lists on a server (PSD_F_KLPACKED, common/wire.h): a real
 * KV server in process, served over the loop transport as in
 * test_kv_server.c, one fake worker sending key-list requests built by
 * hand.  Packed pushes and pulls give exact values, small lists (unpacked
 * into the server's scratch keys) and big ones (received into a buffer the
 * empty store adopts, unpacked in place); sections that lie -- widths
 * that do not add up, a gap past 2^64, keys not ascending, a key count
 * the section does not hold -- are refused with -EPROTO and a reason, and
 * nothing of them is stored: their keys stay unknown, the step counts as
 * an empty push and the stored values are unchanged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "klpack.h"
#include "node.h"
#include "../../server/kvs.h"
#include "../../server/role.h"

#define KP_MAX_MSGS 64

struct kp_msg {
	struct psd_hdr h;
	uint8_t *data;
};

static struct kp {
	struct psched_node node;
	struct psd_peer peers[3];
	struct psd_van *srv_van, *wrk_van;
	struct psd_conn *conn;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct kp_msg q[KP_MAX_MSGS];
	unsigned got, used;
	uint64_t req;
} kp;

static int kp_srv_rx_header(void *arg, struct psd_conn *c,
			    const struct psd_hdr *h, void **dst)
{
	struct psched_node *n = arg;

	if (c->peer_id < 0)
		c->peer_id = h->sender;
	return n->role->rx_header(n, c, h, dst);
}

static void kp_srv_rx_data(void *arg, struct psd_conn *c,
			   const struct psd_hdr *h, void *payload)
{
	struct psched_node *n = arg;

	n->role->rx_data(n, c, h, payload);
}

static void kp_srv_closed(void *arg, struct psd_conn *c, int err)
{
	struct psched_node *n = arg;

	(void)err;
	n->role->conn_closed(n, c);
}

static void kp_srv_accepted(void *arg, struct psd_conn *c)
{
	(void)arg;
	psd_conn_set_authed(c);
}

static void kp_wrk_rx_data(void *arg, struct psd_conn *c,
			   const struct psd_hdr *h, void *payload)
{
	struct kp_msg *m;

	(void)arg;
	(void)c;
	pthread_mutex_lock(&kp.lock);
	if (kp.got < KP_MAX_MSGS) {
		m = &kp.q[kp.got++];
		m->h = *h;
		m->data = h->length ? malloc((size_t)h->length) : NULL;
		if (m->data)
			memcpy(m->data, payload, (size_t)h->length);
	}
	pthread_cond_broadcast(&kp.cond);
	pthread_mutex_unlock(&kp.lock);
}

/* A server of one worker; requests up to @max_tensor value bytes. */
static void kp_start(uint64_t max_tensor)
{
	const struct psd_transport_ops *ops = psd_transport_find("loop");
	struct psd_van_opts o = { .ops = ops,
				  .max_tensor = max_tensor,
				  .send_timeout_ms =
					  (unsigned)test_timeout_ms(5000) };
	struct psd_van_cb scb = { .arg = &kp.node,
				  .accepted = kp_srv_accepted,
				  .rx_header = kp_srv_rx_header,
				  .rx_data = kp_srv_rx_data,
				  .closed = kp_srv_closed };
	struct psd_van_cb wcb = { .rx_data = kp_wrk_rx_data };
	struct psd_addr addr = { .host = "127.0.0.1" };
	struct psched_node *n = &kp.node;
	struct psd_peer *p;
	pthread_condattr_t ca;

	if (!ops)
		test_skip("no loop transport");
	memset(&kp, 0, sizeof(kp));
	pthread_mutex_init(&kp.lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&kp.cond, &ca);
	pthread_condattr_destroy(&ca);
	n->cfg.role = PSCHED_ROLE_SERVER;
	snprintf(n->cfg.server_mode, sizeof(n->cfg.server_mode), "sync");
	n->cfg.max_steps_ahead = 64;
	n->num_server = 1;
	n->num_worker = 1;
	n->id = psd_server_id(0);
	n->peers = kp.peers;
	n->npeers = 3;
	p = &kp.peers[psd_worker_id(n, 0)];
	p->id = psd_worker_id(n, 0);
	p->role = PSCHED_ROLE_WORKER;
	p->rank = 0;
	snprintf(p->desc, sizeof(p->desc), "worker 0");
	n->role = &psd_kvs_role;
	CHECK_EQ(psd_kvs_attach(n), 0);
	CHECK_EQ(psd_van_create(&o, &scb, &kp.srv_van), 0);
	n->van = kp.srv_van;
	CHECK_EQ(psd_van_listen(kp.srv_van, &addr, &addr.port), 0);
	CHECK_EQ(psd_van_start(kp.srv_van), 0);
	CHECK_EQ(psd_van_create(&o, &wcb, &kp.wrk_van), 0);
	CHECK_EQ(psd_van_start(kp.wrk_van), 0);
	CHECK_EQ(psd_van_connect(kp.wrk_van, &addr,
				 (unsigned)test_timeout_ms(5000), "server 0",
				 &kp.conn),
		 0);
	psd_conn_set_authed(kp.conn);
}

static void kp_stop(void)
{
	psd_conn_put(kp.conn);
	psd_van_destroy(kp.wrk_van);
	psd_van_destroy(kp.srv_van);
	kp.node.role->detach(&kp.node);
	for (unsigned i = 0; i < kp.got; i++)
		free(kp.q[i].data);
	pthread_cond_destroy(&kp.cond);
	pthread_mutex_destroy(&kp.lock);
}

/* The next answer (bounded wait): @type with @status. */
static const struct kp_msg *kp_expect(uint8_t type, int status)
{
	struct timespec ts;
	const struct kp_msg *m = NULL;

	psd_deadline(&ts, (unsigned)test_timeout_ms(5000));
	pthread_mutex_lock(&kp.lock);
	while (kp.got == kp.used)
		if (pthread_cond_timedwait(&kp.cond, &kp.lock, &ts))
			break;
	if (kp.got > kp.used)
		m = &kp.q[kp.used++];
	pthread_mutex_unlock(&kp.lock);
	if (!m)
		test_fail_at(__FILE__, __LINE__,
			     "no answer within the timeout");
	CHECK_EQ(m->h.type, type);
	CHECK_EQ(m->h.status, status);
	return m;
}

/*
 * Send a key-list @type of @n keys of one float32, step @step, keys as
 * the @klen bytes at @keys (packed when @packed, else n u64), values
 * @vals (pushes).
 */
static void kp_send(uint8_t type, uint64_t n, const void *keys, uint64_t klen,
		    bool packed, const float *vals, uint64_t step)
{
	bool push = type != PSD_MSG_PULL;
	struct psd_hdr h = {
		.type = type,
		.dtype = PSCHED_F32,
		.flags = (uint8_t)(PSD_F_KEYLIST |
				   (packed ? PSD_F_KLPACKED : 0)),
		.sender = psd_worker_id(&kp.node, 0),
		.key = 1,
		.total = n * 4,
		.span = n * 4,
		.offset = 1,
		.part = n,
		.step = step,
		.req = ++kp.req,
	};
	struct iovec iov[2] = {
		{ .iov_base = (void *)(uintptr_t)keys,
		  .iov_len = (size_t)klen },
		{ .iov_base = (void *)(uintptr_t)vals,
		  .iov_len = (size_t)n * 4 },
	};

	h.length = klen + (push ? n * 4 : 0);
	CHECK_EQ(psd_conn_send(kp.conn, &h, iov, push ? 2 : 1), 0);
}

/* Push @n keys packed (section @pk) with values @v at @step: @status. */
static void kp_push(const struct psd_klpack *pk, const uint8_t *sec, uint64_t n,
		    const float *v, uint64_t step, int status)
{
	kp_send(PSD_MSG_PUSH, n, sec ? sec : pk->buf, pk->len, true, v, step);
	kp_expect(PSD_MSG_PUSH_ACK, status);
}

/* Pull plain keys @k[0, @n) at version @step: their values must be @want
 * (NULL: refused as never pushed). */
static void kp_pull(const uint64_t *k, uint64_t n, uint64_t step,
		    const float *want)
{
	const struct kp_msg *m;

	kp_send(PSD_MSG_PULL, n, k, n * 8, false, NULL, step);
	if (!want) {
		kp_expect(PSD_MSG_PULL_RESP, PSCHED_EUNKNOWNKEY);
		return;
	}
	m = kp_expect(PSD_MSG_PULL_RESP, 0);
	CHECK_U64(m->h.length, ==, n * 4);
	CHECK(m->data && !memcmp(m->data, want, (size_t)n * 4));
}

static void kp_put64(uint8_t *p, uint64_t x)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(x >> (8 * i));
}

/* Lists of @n keys (first block strided, second with 1-byte excesses)
 * pushed packed: bad sections refused, nothing stored; good ones exact,
 * and a packed pull of them too. */
static void kp_case(uint64_t n)
{
	uint64_t *k = malloc(n * 8), *k2 = malloc(n * 8), i;
	float *v = malloc(n * 4), *z = calloc(n + 256, 4);
	uint64_t nblk = (n + 255) / 256, step = 0;
	struct psd_klpack pk = { 0 }, pk2 = { 0 };
	uint8_t *bad;
	const struct kp_msg *m;

	CHECK(k && k2 && v && z);
	for (i = 0; i < n; i++) {
		k[i] = 1000 + 7 * i + (i >= 256 && i < 512 ? i % 3 : 0);
		k2[i] = k[i] + 3; /* other keys, same shape */
		v[i] = (float)(i % 1000) + 0.5f;
	}
	CHECK_EQ(psd_klpack_set(&pk, k, n, UINT64_MAX), 0);
	CHECK_EQ(psd_klpack_set(&pk2, k2, n, UINT64_MAX), 0);
	CHECK(pk.buf[16 * nblk + 1] == 1);
	bad = malloc((size_t)pk.len);
	CHECK(bad != NULL);

	/* into the empty store: widths that take more than the section */
	memcpy(bad, pk.buf, (size_t)pk.len);
	bad[16 * nblk] = 8;
	kp_push(&pk, bad, n, v, ++step, -EPROTO);
	kp_pull(k, n, step, NULL); /* nothing stored */
	/* a gap past 2^64 (block 1's step near 2^64) */
	memcpy(bad, pk.buf, (size_t)pk.len);
	kp_put64(bad + 16 + 8, UINT64_MAX - 1);
	kp_push(&pk, bad, n, v, ++step, -EPROTO);
	kp_pull(k, n, step, NULL);
	/* keys not ascending: block 1 starting below block 0's end */
	memcpy(bad, pk.buf, (size_t)pk.len);
	kp_put64(bad + 16, k[100]);
	kp_push(&pk, bad, n, v, ++step, -EPROTO);
	kp_pull(k, n, step, NULL);
	/* a key count the section does not hold (a block more) */
	kp_send(PSD_MSG_PUSH, n + 256, pk.buf, pk.len, true, z, ++step);
	kp_expect(PSD_MSG_PUSH_ACK, -EPROTO);
	kp_pull(k, n, step, NULL);
	/* the real list: exact */
	kp_push(&pk, NULL, n, v, ++step, 0);
	kp_pull(k, n, step, v);
	/* a bad list of new keys next to stored ones: refused, the stored
	 * values unchanged, the new keys unknown */
	memcpy(bad, pk2.buf, (size_t)pk2.len);
	kp_put64(bad + 16 + 8, 0);
	bad[16 * nblk + 1] = 0; /* block 1 strided with step 0 */
	kp_send(PSD_MSG_PUSH, n, bad,
		pk2.len - ((n > 511 ? 255 : n - 257) + 7) / 8 * 8, true, v,
		++step);
	m = kp_expect(PSD_MSG_PUSH_ACK, -EPROTO);
	(void)m;
	kp_pull(k, n, step, v);
	kp_pull(k2, n, step, NULL);
	/* a packed pull of the stored list */
	kp_send(PSD_MSG_PULL, n, pk.buf, pk.len, true, NULL, step);
	m = kp_expect(PSD_MSG_PULL_RESP, 0);
	CHECK(m->data && !memcmp(m->data, v, (size_t)n * 4));
	/* a malformed packed pull is refused */
	memcpy(bad, pk.buf, (size_t)pk.len);
	bad[16 * nblk + 1] = 9;
	kp_send(PSD_MSG_PULL, n, bad, pk.len, true, NULL, step);
	kp_expect(PSD_MSG_PULL_RESP, -EPROTO);
	psd_klpack_free(&pk);
	psd_klpack_free(&pk2);
	free(bad);
	free(k);
	free(k2);
	free(v);
	free(z);
}

/* Lists under 1 MiB: unpacked into the server's scratch keys. */
static void test_kl_packed_small(void)
{
	kp_start(1ull << 40);
	kp_case(1000);
	kp_stop();
}

/* A list of over 1 MiB into an empty store: received into a buffer the
 * store adopts, unpacked in place in front of its values. */
static void test_kl_packed_adopted(void)
{
	kp_start(1ull << 40);
	kp_case(200000);
	kp_stop();
}

/* A packed list whose keys would unpack above PS_MAX_TENSOR_BYTES is
 * refused before anything is allocated for it; a push of it counts as an
 * empty push of its step (the next step is taken). */
static void test_kl_packed_limit(void)
{
	uint64_t n = 100000;
	uint64_t *k = malloc(n * 8);
	float *v = calloc(n, 4);
	struct psd_klpack pk = { 0 };

	CHECK(k != NULL && v != NULL);
	for (uint64_t i = 0; i < n; i++)
		k[i] = i;
	CHECK_EQ(psd_klpack_set(&pk, k, n, UINT64_MAX), 0);
	kp_start(n * 8 - 8); /* the values fit, the keys do not */
	kp_send(PSD_MSG_PULL, n, pk.buf, pk.len, true, NULL, 0);
	kp_expect(PSD_MSG_PULL_RESP, -EPROTO);
	kp_push(&pk, NULL, n, v, 1, -EPROTO);
	kp_pull(k, n, 1, NULL);
	kp_push(&pk, NULL, n, v, 2, -EPROTO); /* step 1 was counted */
	kp_stop();
	psd_klpack_free(&pk);
	free(k);
	free(v);
}

const struct test_case test_list[] = {
	{ "kl_packed_small", test_kl_packed_small },
	{ "kl_packed_adopted", test_kl_packed_adopted },
	{ "kl_packed_limit", test_kl_packed_limit },
	{ NULL, NULL },
};
