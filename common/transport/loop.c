// SPDX-License-Identifier: MIT
/*
 * Loop transport: connections between vans of one process, for unit
 * tests that run a node's KV layer in-process.  A connection is a pipe
 * of two bounded byte rings (one per direction) behaving like a TCP
 * stream: the sender copies header and payload into the peer's ring,
 * waiting while it is full; the receiver's van polls an eventfd that is
 * readable while its ring holds bytes or the pipe was shut.  Bytes
 * already in a ring are still delivered after the peer closed (like a
 * FIN after data); a local close is seen at once.
 *
 * Addresses: listeners live in a process-wide table keyed by port; the
 * host is not looked at (every listener is "local"); port 0 picks a free
 * fake port, never one handed out before in this process.
 *
 * Locking: loop_lock guards the listener table and pending connections;
 * pipe->lock guards both rings and the shut flags.  Upcalls into the van
 * run without either lock held, so they may close any connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "transport.h"

#define LOOP_RING_SIZE (1u << 20) /* bytes buffered per direction */
#define LOOP_RX_BUDGET (8u << 20) /* bytes one progress() call moves */
#define LOOP_PORT_BASE 20000u

struct loop_ring {
	uint8_t *buf;
	size_t head; /* next byte to read */
	size_t len;  /* bytes buffered */
};

/* One side of a pipe: what it receives, and how its van is woken. */
struct loop_end {
	struct loop_ring rx;
	int evfd; /* the van polls this; owned by the pipe */
	bool shut;
};

struct loop_pipe {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* room in a ring, or a side shut */
	atomic_int refs;	/* connector, acceptor or pending queue */
	struct loop_end end[2]; /* 0: connector, 1: acceptor */
	struct psd_list link;	/* listener's pending list (loop_lock) */
	unsigned port;
	unsigned serial;
};

struct loop_listener {
	struct psd_list link;	 /* loop_listeners */
	struct psd_list pending; /* pipes not accepted yet */
	unsigned port;
	int evfd;
};

struct loop_conn {
	struct psd_conn base;
	struct loop_pipe *pipe;
	int side;
	/* Receive state, van thread only. */
	uint8_t hbuf[PSD_HDR_SIZE];
	size_t hgot;
	bool in_payload;
	struct psd_hdr hdr;
	uint8_t *dst; /* payload destination, NULL = discard */
	uint64_t got;
};

static pthread_mutex_t loop_lock = PTHREAD_MUTEX_INITIALIZER;
static struct psd_list loop_listeners = { &loop_listeners, &loop_listeners };
static unsigned loop_next_port = LOOP_PORT_BASE;
static unsigned loop_next_serial;

static struct loop_conn *to_loop(struct psd_conn *c)
{
	return psd_container_of(c, struct loop_conn, base);
}

static void loop_evfd_signal(int fd)
{
	uint64_t one = 1;

	(void)!write(fd, &one, sizeof(one));
}

static void loop_evfd_clear(int fd)
{
	uint64_t v;

	(void)!read(fd, &v, sizeof(v));
}

static int loop_evfd_create(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	return fd < 0 ? psd_neg_errno() : fd;
}

/* ---- pipes ------------------------------------------------------------ */

static void loop_pipe_put(struct loop_pipe *p)
{
	int i;

	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	for (i = 0; i < 2; i++) {
		close(p->end[i].evfd);
		free(p->end[i].rx.buf);
	}
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int loop_pipe_create(unsigned port, struct loop_pipe **out)
{
	pthread_condattr_t ca;
	struct loop_pipe *p = NULL;
	int i, ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->end[0].evfd = -1;
	p->end[1].evfd = -1;
	for (i = 0; i < 2; i++) {
		ret = loop_evfd_create();
		if (ret < 0)
			goto err_free;
		p->end[i].evfd = ret;
		p->end[i].rx.buf = malloc(LOOP_RING_SIZE);
		if (!p->end[i].rx.buf) {
			ret = -ENOMEM;
			goto err_free;
		}
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&p->refs, 1); /* the connector's */
	psd_list_init(&p->link);
	p->port = port;
	*out = p;
	return 0;

err_free:
	for (i = 0; i < 2; i++) {
		if (p->end[i].evfd >= 0)
			close(p->end[i].evfd);
		free(p->end[i].rx.buf);
	}
	free(p);
	return ret;
}

/* Stop @side of @p: both sides' vans wake up and see the end. */
static void loop_pipe_shut(struct loop_pipe *p, int side)
{
	pthread_mutex_lock(&p->lock);
	p->end[side].shut = true;
	loop_evfd_signal(p->end[0].evfd);
	loop_evfd_signal(p->end[1].evfd);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static bool loop_pipe_is_shut(const struct loop_pipe *p)
{
	return p->end[0].shut || p->end[1].shut;
}

/* Copy @len bytes into @r (which has room); pipe lock held. */
static void loop_ring_put(struct loop_ring *r, const uint8_t *src, size_t len)
{
	size_t tail = (r->head + r->len) % LOOP_RING_SIZE;
	size_t n = LOOP_RING_SIZE - tail;

	if (n > len)
		n = len;
	memcpy(r->buf + tail, src, n);
	memcpy(r->buf, src + n, len - n);
	r->len += len;
}

/* Take @len buffered bytes out of @r into @dst (NULL: drop them). */
static void loop_ring_get(struct loop_ring *r, uint8_t *dst, size_t len)
{
	size_t n = LOOP_RING_SIZE - r->head;

	if (n > len)
		n = len;
	if (dst) {
		memcpy(dst, r->buf + r->head, n);
		memcpy(dst + n, r->buf, len - n);
	}
	r->head = (r->head + len) % LOOP_RING_SIZE;
	r->len -= len;
}

/* ---- listeners -------------------------------------------------------- */

/* loop_lock held. */
static struct loop_listener *loop_listener_find(unsigned port)
{
	struct psd_list *pos;
	struct loop_listener *ll;

	psd_list_for_each (pos, &loop_listeners) {
		ll = psd_container_of(pos, struct loop_listener, link);
		if (ll->port == port)
			return ll;
	}
	return NULL;
}

/* loop_lock held: a port nobody listens on and nobody used before. */
static unsigned loop_port_pick(void)
{
	while (loop_listener_find(loop_next_port) || !loop_next_port)
		loop_next_port++;
	return loop_next_port++;
}

static int loop_listen(struct psd_listener *l, const struct psd_addr *addr)
{
	struct loop_listener *ll;
	int ret;

	ll = calloc(1, sizeof(*ll));
	if (!ll)
		return -ENOMEM;
	ret = loop_evfd_create();
	if (ret < 0)
		goto err_free;
	ll->evfd = ret;
	psd_list_init(&ll->pending);
	pthread_mutex_lock(&loop_lock);
	if (addr->port && loop_listener_find(addr->port)) {
		pthread_mutex_unlock(&loop_lock);
		ret = psd_set_errmsg(-EADDRINUSE,
				     "cannot listen on loop port %u: in use",
				     addr->port);
		goto err_close;
	}
	ll->port = addr->port ? addr->port : loop_port_pick();
	psd_list_add_tail(&loop_listeners, &ll->link);
	pthread_mutex_unlock(&loop_lock);
	l->fd = ll->evfd;
	l->port = ll->port;
	l->priv = ll;
	return 0;

err_close:
	close(ll->evfd);
err_free:
	free(ll);
	return ret;
}

static int loop_accept(struct psd_listener *l, struct psd_conn *c)
{
	struct loop_listener *ll = l->priv;
	struct loop_conn *lc = to_loop(c);
	struct loop_pipe *p = NULL;

	pthread_mutex_lock(&loop_lock);
	if (psd_list_empty(&ll->pending)) {
		loop_evfd_clear(ll->evfd);
		pthread_mutex_unlock(&loop_lock);
		return -EAGAIN;
	}
	p = psd_container_of(ll->pending.next, struct loop_pipe, link);
	psd_list_del(&p->link);
	pthread_mutex_unlock(&loop_lock);
	/* The pending queue's reference is the acceptor's now. */
	lc->pipe = p;
	lc->side = 1;
	c->fd = p->end[1].evfd;
	snprintf(c->peer, sizeof(c->peer), "loop:%u#%u", p->port, p->serial);
	return 0;
}

static void loop_listen_close(struct psd_listener *l)
{
	struct loop_listener *ll = l->priv;
	struct loop_pipe *p = NULL;

	if (!ll)
		return;
	pthread_mutex_lock(&loop_lock);
	psd_list_del(&ll->link);
	pthread_mutex_unlock(&loop_lock);
	/* Unlisted: no connector can queue more.  Reset the queued ones. */
	while (!psd_list_empty(&ll->pending)) {
		p = psd_container_of(ll->pending.next, struct loop_pipe, link);
		psd_list_del(&p->link);
		loop_pipe_shut(p, 1);
		loop_pipe_put(p);
	}
	close(ll->evfd);
	free(ll);
	l->priv = NULL;
	l->fd = -1;
}

/* ---- connections ------------------------------------------------------ */

static int loop_connect(struct psd_conn *c, const struct psd_addr *addr,
			unsigned timeout_ms)
{
	struct loop_conn *lc = to_loop(c);
	struct loop_listener *ll;
	struct loop_pipe *p = NULL;
	int ret;

	(void)timeout_ms; /* never waits: the "handshake" is the queueing */
	ret = loop_pipe_create(addr->port, &p);
	if (ret)
		return ret;
	pthread_mutex_lock(&loop_lock);
	ll = loop_listener_find(addr->port);
	if (!ll) {
		pthread_mutex_unlock(&loop_lock);
		loop_pipe_put(p);
		return psd_set_errmsg(-ECONNREFUSED,
				      "nothing listens on loop port %u",
				      addr->port);
	}
	p->serial = ++loop_next_serial;
	atomic_fetch_add(&p->refs, 1); /* the pending queue's */
	psd_list_add_tail(&ll->pending, &p->link);
	loop_evfd_signal(ll->evfd);
	pthread_mutex_unlock(&loop_lock);
	lc->pipe = p;
	lc->side = 0;
	c->fd = p->end[0].evfd;
	return 0;
}

/* Append @len bytes for the peer, waiting for room; pipe lock held.
 * -ETIMEDOUT after @timeout_ms without room, -ECONNRESET once shut. */
static int loop_write(struct loop_conn *lc, const uint8_t *src, size_t len,
		      unsigned timeout_ms)
{
	struct loop_pipe *p = lc->pipe;
	struct loop_end *peer = &p->end[!lc->side];
	struct timespec ts;
	size_t n;

	psd_deadline(&ts, timeout_ms);
	while (len) {
		if (loop_pipe_is_shut(p))
			return -ECONNRESET;
		n = LOOP_RING_SIZE - peer->rx.len;
		if (!n) {
			if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) ==
			    ETIMEDOUT)
				return -ETIMEDOUT;
			continue;
		}
		if (n > len)
			n = len;
		loop_ring_put(&peer->rx, src, n);
		loop_evfd_signal(peer->evfd);
		src += n;
		len -= n;
		psd_deadline(&ts, timeout_ms); /* progress: a new deadline */
	}
	return 0;
}

static int loop_send(struct psd_conn *c, const struct psd_hdr *h,
		     const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct loop_conn *lc = to_loop(c);
	struct loop_pipe *p = lc->pipe;
	uint8_t hbuf[PSD_HDR_SIZE];
	int i, ret;

	psd_hdr_encode(h, hbuf);
	pthread_mutex_lock(&p->lock);
	ret = loop_write(lc, hbuf, sizeof(hbuf), timeout_ms);
	for (i = 0; i < niov && !ret; i++)
		ret = loop_write(lc, iov[i].iov_base, iov[i].iov_len,
				 timeout_ms);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* Header bytes buffered: decode and ask the van where the payload goes.
 * Called without the pipe lock. */
static int loop_rx_header(struct loop_conn *lc)
{
	const char *why;
	void *dst = NULL;
	int ret;

	lc->hgot = 0;
	ret = psd_hdr_decode(lc->hbuf, psd_van_max_tensor(&lc->base), &lc->hdr,
			     &why);
	if (ret) {
		psd_err("dropping connection from %s: malformed header: %s",
			lc->base.peer, why);
		return ret;
	}
	ret = psd_van_rx_header(&lc->base, &lc->hdr, &dst);
	if (ret < 0)
		return ret;
	lc->dst = dst;
	lc->got = 0;
	lc->in_payload = true;
	return 0;
}

/* Move buffered bytes into the header or payload; pipe lock held.
 * Returns 1 when a header or payload completed, 0 when the ring ran
 * dry or @budget is spent. */
static int loop_rx_copy(struct loop_conn *lc, struct loop_ring *r,
			size_t *budget)
{
	size_t n;

	if (!lc->in_payload) {
		n = PSD_HDR_SIZE - lc->hgot;
		n = n < r->len ? n : r->len;
		loop_ring_get(r, lc->hbuf + lc->hgot, n);
		lc->hgot += n;
		return lc->hgot == PSD_HDR_SIZE;
	}
	n = lc->hdr.length - lc->got < r->len
		    ? (size_t)(lc->hdr.length - lc->got)
		    : r->len;
	n = n < *budget ? n : *budget;
	loop_ring_get(r, lc->dst ? lc->dst + lc->got : NULL, n);
	lc->got += n;
	*budget -= n;
	return lc->got == lc->hdr.length;
}

/* Bytes to move, or an empty payload to deliver. */
static bool loop_rx_is_ready(const struct loop_conn *lc,
			     const struct loop_ring *r)
{
	return r->len || (lc->in_payload && lc->got == lc->hdr.length);
}

/* A header or payload completed: hand it to the van, lock dropped. */
static int loop_rx_deliver(struct loop_conn *lc)
{
	if (!lc->in_payload)
		return loop_rx_header(lc);
	lc->in_payload = false;
	psd_van_rx_msg(&lc->base, &lc->hdr, lc->dst);
	return 0;
}

static int loop_progress(struct psd_conn *c)
{
	struct loop_conn *lc = to_loop(c);
	struct loop_pipe *p = lc->pipe;
	struct loop_end *me = &p->end[lc->side];
	size_t budget = LOOP_RX_BUDGET;
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	loop_evfd_clear(me->evfd);
	for (;;) {
		if (me->shut || atomic_load(&c->closed)) {
			ret = -ECONNRESET;
			break;
		}
		if (!loop_rx_is_ready(lc, &me->rx)) {
			if (p->end[!lc->side].shut)
				ret = -ECONNRESET; /* EOF after the last byte */
			break;
		}
		if (!budget) {
			loop_evfd_signal(me->evfd); /* come back for the rest */
			break;
		}
		if (!loop_rx_copy(lc, &me->rx, &budget))
			continue;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		ret = loop_rx_deliver(lc);
		pthread_mutex_lock(&p->lock);
		if (ret)
			break;
	}
	pthread_cond_broadcast(&p->cond); /* room for the peer's sender */
	pthread_mutex_unlock(&p->lock);
	return ret;
}

static void loop_close(struct psd_conn *c)
{
	struct loop_conn *lc = to_loop(c);

	if (lc->pipe)
		loop_pipe_shut(lc->pipe, lc->side);
}

static void loop_fini(struct psd_conn *c)
{
	struct loop_conn *lc = to_loop(c);

	if (!lc->pipe)
		return;
	loop_pipe_shut(lc->pipe, lc->side);
	loop_pipe_put(lc->pipe);
	lc->pipe = NULL;
	c->fd = -1; /* the pipe owned it */
}

const struct psd_transport_ops psd_loop_ops = {
	.name = "loop",
	.conn_size = sizeof(struct loop_conn),
	.listen = loop_listen,
	.accept = loop_accept,
	.listen_close = loop_listen_close,
	.connect = loop_connect,
	.send = loop_send,
	.progress = loop_progress,
	.close = loop_close,
	.fini = loop_fini,
};
