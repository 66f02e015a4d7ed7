/* SPDX-License-Identifier: MIT */
/* The conformance suite's nodes and helpers (test_transport*.c). */
#ifndef PSCHED_TESTS_TRANSPORT_TT_UTIL_H
#define PSCHED_TESTS_TRANSPORT_TT_UTIL_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "cfg.h"
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
	uint64_t direct_headers; /* with psd_conn.rx_direct (rdma writes) */
	uint64_t msgs;
	uint64_t bytes;
	uint64_t discarded;
	uint64_t bad; /* content, order or header errors seen */
	char bad_msg[200];
	uint64_t next_step[TT_MAX_KEYS];
	int closed;
	int last_err;
	bool gate;	      /* rx_data blocks while set */
	pid_t kill_on_header; /* kill_fn(this pid) when a big header comes */
	void (*kill_fn)(pid_t pid);
	uint64_t kill_min_len;
	bool die_on_header; /* child: die when a big header comes */
	bool inplace;	    /* take psd_conn.rx_inplace when offered */
	uint64_t inplace_msgs;
};

static const char *tt_transport(void)
{
	const char *t = getenv("PS_TEST_TRANSPORT");

	return t && *t ? t : "tcp";
}

static inline bool tt_is_rdma(void)
{
	return !strcmp(tt_transport(), "rdma");
}

static inline bool tt_is_loop(void)
{
	return !strcmp(tt_transport(), "loop");
}

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
		psd_cfg_defaults(&tt_cfg);
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
static inline uint64_t tt_word(uint64_t seed, uint64_t j)
{
	uint64_t z = seed * 0x9e3779b97f4a7c15ull + j;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void tt_fill(uint8_t *p, size_t len, uint64_t seed)
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

static inline bool tt_check(const uint8_t *p, size_t len, uint64_t seed)
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

static inline uint64_t tt_seed(uint64_t key, uint64_t step, uint64_t len)
{
	return key * 1000003u + step * 7919u + len;
}

static inline void tt_bad(struct tt_node *n, const char *what,
			  const struct psd_hdr *h)
{
	if (!n->bad++)
		snprintf(n->bad_msg, sizeof(n->bad_msg),
			 "%s (key %llu step %llu length %llu)", what,
			 (unsigned long long)h->key,
			 (unsigned long long)h->step,
			 (unsigned long long)h->length);
}

static inline void tt_accepted(void *arg, struct psd_conn *c)
{
	struct tt_node *n = arg;

	/* Bare vans, no postoffice and so no handshake: the test is the
	 * owner that vouches for its connections (common/auth.h). */
	psd_conn_set_authed(c);
	pthread_mutex_lock(&n->lock);
	if (n->naccepted < TT_MAX_CONNS) {
		psd_conn_get(c);
		n->accepted[n->naccepted++] = c;
	}
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

/* Van thread: a receive buffer per connection, kept until the end. */
static inline uint8_t *tt_rxbuf(struct tt_node *n, struct psd_conn *c,
				size_t len)
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

static inline int tt_rx_header(void *arg, struct psd_conn *c,
			       const struct psd_hdr *h, void **dst)
{
	struct tt_node *n = arg;

	pthread_mutex_lock(&n->lock);
	n->headers++;
	if (c->rx_direct)
		n->direct_headers++;
	if (n->kill_on_header > 0 && h->length >= n->kill_min_len) {
		n->kill_fn(n->kill_on_header);
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
	if (n->inplace && c->rx_inplace) {
		/* Checked in tt_rx_data() before it returns: read once. */
		*dst = c->rx_inplace;
		pthread_mutex_lock(&n->lock);
		n->inplace_msgs++;
		if ((uintptr_t)c->rx_inplace % 64)
			tt_bad(n, "in-place payload not 64-byte aligned", h);
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	*dst = tt_rxbuf(n, c, (size_t)h->length);
	return *dst ? 0 : -ENOMEM;
}

static inline void tt_rx_data(void *arg, struct psd_conn *c,
			      const struct psd_hdr *h, void *payload)
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

static inline void tt_closed(void *arg, struct psd_conn *c, int err)
{
	struct tt_node *n = arg;

	(void)c;
	pthread_mutex_lock(&n->lock);
	n->closed++;
	n->last_err = err;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

/* tt_node_init() with the node's own receive and closed callbacks. */
static inline void
tt_node_init_cb(struct tt_node *n, bool listen,
		int (*rx_header)(void *, struct psd_conn *,
				 const struct psd_hdr *, void **),
		void (*rx_data)(void *, struct psd_conn *,
				const struct psd_hdr *, void *),
		void (*closed)(void *, struct psd_conn *, int))
{
	struct psd_van_opts vo = { .ops = tt_ops(),
				   .max_tensor = 1ull << 30,
				   .send_timeout_ms =
					   (unsigned)test_timeout_ms(20000),
				   .cfg = tt_config(),
				   .trusted = true };
	struct psd_van_cb cb = { .arg = n,
				 .accepted = tt_accepted,
				 .rx_header = rx_header,
				 .rx_data = rx_data,
				 .closed = closed };
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

/* tt_node_init() with the node's own receive callbacks. */
static inline void
tt_node_init_rx(struct tt_node *n, bool listen,
		int (*rx_header)(void *, struct psd_conn *,
				 const struct psd_hdr *, void **),
		void (*rx_data)(void *, struct psd_conn *,
				const struct psd_hdr *, void *))
{
	tt_node_init_cb(n, listen, rx_header, rx_data, tt_closed);
}

static inline void tt_node_init(struct tt_node *n, bool listen)
{
	tt_node_init_rx(n, listen, tt_rx_header, tt_rx_data);
}

static inline void tt_node_fini(struct tt_node *n)
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

static inline struct psd_conn *tt_connect(struct tt_node *from, unsigned port)
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
	psd_conn_set_authed(c); /* see tt_accepted() */
	return c;
}

/* Wait until @n has accepted @count connections; returns the last. */
static inline struct psd_conn *tt_wait_accepted(struct tt_node *n, int count)
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
static inline void tt_wait(struct tt_node *n, uint64_t msgs, int closed, int ms,
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

static inline void tt_check_clean(struct tt_node *n)
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
static inline int tt_send_type(struct psd_conn *c, uint8_t type, uint64_t key,
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

static inline int tt_send(struct psd_conn *c, uint64_t key, uint64_t step,
			  uint8_t *buf, size_t len)
{
	return tt_send_type(c, PSD_MSG_PULL_RESP, key, step, buf, len);
}

/* Send the next message of @key (@type, @len bytes) and wait until @rx
 * has it, intact.  A push may return before its write landed: the wait
 * also keeps @buf untouched until then. */
static inline void tt_exchange_type(struct psd_conn *c, struct tt_node *rx,
				    uint8_t type, uint8_t *buf, size_t len,
				    uint64_t key)
{
	uint64_t want, step;
	int ret;

	/* The receiver's van thread writes both under rx->lock. */
	pthread_mutex_lock(&rx->lock);
	want = rx->msgs + 1;
	step = rx->next_step[key];
	pthread_mutex_unlock(&rx->lock);
	ret = tt_send_type(c, type, key, step, buf, len);
	if (ret)
		test_fail_at(
			__FILE__, __LINE__,
			"send of step %llu of key %llu, %zu bytes: %s (%s)",
			(unsigned long long)step, (unsigned long long)key, len,
			psched_strerror(ret), psched_errmsg());
	tt_wait(rx, want, 0, 60000, "exchange");
	tt_check_clean(rx);
}

static inline void tt_exchange_one(struct psd_conn *c, struct tt_node *rx,
				   uint8_t *buf, size_t len, uint64_t key)
{
	tt_exchange_type(c, rx, PSD_MSG_PULL_RESP, buf, len, key);
}

/* Skip unless the transport under test is rdma (@what: the feature). */
static inline void tt_rdma_only(const char *what)
{
	char why[128] = "RDMA transport only";

	tt_ops();
	if (tt_is_rdma())
		return;
	if (what)
		snprintf(why, sizeof(why), "RDMA transport only (%s)", what);
	test_skip(why);
}

/* The RDMA transport's counters (process-wide). */
static inline struct psd_rdma_stats tt_rdma_stats(void)
{
	struct psd_rdma_stats st;

	psd_rdma_stats(&st);
	return st;
}

#endif
