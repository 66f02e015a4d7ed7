// SPDX-License-Identifier: MIT
/*
 * RDMA transport, connection setup and teardown through rdma_cm: listen,
 * connect, accept, queue pair and buffers, close; the ops table. Design and
 * wire protocol: rdma_internal.h.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "rdma_internal.h"

static atomic_int rdmt_local_id = -1;

/* dev->lock held: connection manager events on a connection. */
void psd_rdmt_on_cm(struct rdmt_conn *rc)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	int status;

	while (rc->cmch && !rdma_get_cm_event(rc->cmch, &ev)) {
		type = ev->event;
		status = ev->status;
		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			rc->established = true;
			pthread_cond_broadcast(&rc->cond);
			psd_rdmt_maybe_credit(rc);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			psd_rdmt_set_err(rc, -ECONNRESET);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			psd_err("rdma: connection with %s: %s (status %d)",
				rc->base.peer, rdma_event_str(type), status);
			psd_rdmt_set_err(rc, -ECONNRESET);
			break;
		default:
			break;
		}
	}
}

static int rdmt_listen_on(struct psd_listener *l, const struct psd_addr *addr)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	int ret;

	ret = psd_addr_resolve(addr, &sin);
	if (ret)
		return ret;
	ch = rdma_create_event_channel();
	if (!ch)
		return psd_set_errmsg(psd_neg_errno(),
				      "rdma: no rdma_cm (%s); is an RDMA "
				      "device present?",
				      strerror(errno));
	ret = psd_rdmt_set_nonblock(ch->fd);
	if (ret)
		goto err_ch;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		ret = psd_neg_errno();
		goto err_ch;
	}
	if (rdma_bind_addr(id, (struct sockaddr *)&sin) ||
	    rdma_listen(id, 1024)) {
		ret = psd_neg_errno();
		psd_set_errmsg(ret, "rdma: cannot listen on %s:%u: %s",
			       addr->host[0] ? addr->host : "0.0.0.0",
			       addr->port, strerror(-ret));
		rdma_destroy_id(id);
		goto err_ch;
	}
	l->priv = id;
	l->fd = ch->fd;
	l->port = ntohs(rdma_get_src_port(id));
	return 0;

err_ch:
	rdma_destroy_event_channel(ch);
	return ret;
}

static void rdmt_listen_close(struct psd_listener *l)
{
	struct rdma_cm_id *id = l->priv;
	struct rdma_event_channel *ch;

	if (!id)
		return;
	ch = id->channel;
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	l->priv = NULL;
	l->fd = -1;
}

static void rdmt_fill_priv(struct rdmt_cm_priv *p, const struct rdmt_conn *rc)
{
	const struct rdmt_knobs *k = &rc->dev->k;

	memset(p, 0, sizeof(*p));
	p->magic = htole32(RDMT_MAGIC);
	p->version = htole16(RDMT_VERSION);
	p->recv_depth = htole16((uint16_t)k->recv_depth);
	p->buf_bytes = htole32(k->buf_bytes);
	p->node_id = (int32_t)htole32((uint32_t)atomic_load(&rdmt_local_id));
	p->pid = htole32((uint32_t)getpid());
	if (rc->lane_qp) {
		p->lane_qpn = htole32(rc->lane_qp->qp_num);
		p->lane_psn = htole32(rc->lane_psn);
	}
}

/* Check the peer's private data; sets credits.  dev->lock not needed (the
 * connection is not in use yet). */
static int rdmt_take_priv(struct rdmt_conn *rc, const void *data, size_t len)
{
	struct rdmt_cm_priv p;

	if (!data || len < sizeof(p)) {
		psd_err("rdma: %s sent no psched connection data (not a "
			"psched node?)",
			rc->base.peer);
		return -EPROTO;
	}
	memcpy(&p, data, sizeof(p));
	if (le32toh(p.magic) != RDMT_MAGIC ||
	    le16toh(p.version) != RDMT_VERSION || le16toh(p.recv_depth) < 4 ||
	    le32toh(p.buf_bytes) < 1024) {
		psd_err("rdma: %s sent bad connection data (magic %08x, "
			"version %u): not a psched node of this version",
			rc->base.peer, le32toh(p.magic), le16toh(p.version));
		return -EPROTO;
	}
	if (le32toh(p.buf_bytes) != rc->dev->k.buf_bytes) {
		psd_err("rdma: %s uses PS_RDMA_BUF_BYTES=%u, this node %u; "
			"set it the same on every node",
			rc->base.peer, le32toh(p.buf_bytes),
			rc->dev->k.buf_bytes);
		return -EPROTO;
	}
	/* The connecting side learns these once established, when the
	 * progress thread may have taken a message from the peer already
	 * (TSan saw it): add the credits, under the lock. */
	pthread_mutex_lock(&rc->dev->lock);
	rc->tx_credits += le16toh(p.recv_depth);
	rc->peer_buf = le32toh(p.buf_bytes);
	pthread_mutex_unlock(&rc->dev->lock);
	rc->lane_peer_qpn = le32toh(p.lane_qpn) & 0xffffff;
	rc->lane_peer_psn = le32toh(p.lane_psn) & 0xffffff;
	if ((int32_t)le32toh((uint32_t)p.node_id) >= 0 &&
	    !strchr(rc->base.peer, '#'))
		snprintf(rc->base.peer + strlen(rc->base.peer),
			 sizeof(rc->base.peer) - strlen(rc->base.peer), " #%d",
			 (int32_t)le32toh((uint32_t)p.node_id));
	return 0;
}

static int rdmt_alloc_bufs(struct rdmt_conn *rc)
{
	struct rdmt_dev *d = rc->dev;
	size_t b = d->k.buf_bytes;
	unsigned i;

	rc->recv_cnt = d->k.recv_depth + RDMT_SPARE_RECV;
	rc->send_cnt = d->k.send_depth + RDMT_CTL_SLOTS;
	rc->rxbuf = aligned_alloc(4096, ((rc->recv_cnt * b) + 4095) & ~4095ul);
	/* + a header per write batch for cached writes (psd_rdmt_wb_hdr) */
	rc->txbuf = aligned_alloc(
		4096, ((rc->send_cnt * b) + RDMT_WB * RDMT_LAND_HDR + 4095) &
			      ~4095ul);
	rc->free_data = calloc(d->k.send_depth, sizeof(unsigned));
	rc->rxq = calloc(rc->recv_cnt, sizeof(*rc->rxq));
	if (!rc->rxbuf || !rc->txbuf || !rc->free_data || !rc->rxq)
		return -ENOMEM;
	rc->rxmr = ibv_reg_mr(d->pd, rc->rxbuf, rc->recv_cnt * b,
			      IBV_ACCESS_LOCAL_WRITE);
	rc->txmr = ibv_reg_mr(d->pd, rc->txbuf,
			      rc->send_cnt * b + RDMT_WB * RDMT_LAND_HDR, 0);
	if (!rc->rxmr || !rc->txmr) {
		int ret = psd_neg_errno();

		return psd_set_errmsg(ret,
				      "rdma: cannot register %zu bytes of "
				      "connection buffers: %s; raise ulimit "
				      "-l or lower PS_RDMA_RECV_DEPTH / "
				      "PS_RDMA_SEND_DEPTH / PS_RDMA_BUF_BYTES",
				      (rc->recv_cnt + rc->send_cnt) * b,
				      strerror(-ret));
	}
	for (i = 0; i < d->k.send_depth; i++)
		rc->free_data[rc->nfree_data++] = i;
	for (i = 0; i < RDMT_CTL_SLOTS; i++)
		rc->free_ctl[rc->nfree_ctl++] = d->k.send_depth + i;
	rc->credit_thresh = d->k.recv_depth / 4 ? d->k.recv_depth / 4 : 1;
	rc->peer_credits = d->k.recv_depth; /* told in the connect data */
	rc->land.cap = d->k.mr_budget / 4 < RDMT_LAND_CAP ? d->k.mr_budget / 4
							  : RDMT_LAND_CAP;
	return 0;
}

/* The connection's send queue: its slots, the writes of a batch and a
 * write per batch. */
static unsigned rdmt_qp_send_wr(const struct rdmt_conn *rc)
{
	return rc->send_cnt + RDMT_MAX_IOV + RDMT_WB;
}

/* Completions the connection's QP may have in the shared CQ at once:
 * its send queue and its receive queue. */
static unsigned rdmt_qp_cq_need(const struct rdmt_conn *rc)
{
	return rdmt_qp_send_wr(rc) + rc->recv_cnt;
}

static int rdmt_create_qp_on(struct rdmt_conn *rc)
{
	struct rdmt_dev *d = rc->dev;
	struct ibv_qp_init_attr qa = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = rdmt_qp_send_wr(rc),
			 .max_recv_wr = rc->recv_cnt,
			 /* a cached write: payload iovs + header */
			 .max_send_sge = RDMT_MAX_IOV + 1,
			 .max_recv_sge = 1,
			 .max_inline_data = d->k.inline_bytes },
	};
	unsigned need = rdmt_qp_cq_need(rc);

	if (!psd_rdmt_cq_take(d, need))
		return psd_set_errmsg(-ENOSPC,
				      "rdma: completion queue full (%u "
				      "entries); raise PS_RDMA_CQ_DEPTH for "
				      "more connections",
				      d->k.cq_depth);
	if (rdma_create_qp(rc->id, d->pd, &qa)) {
		/* Some devices cap inline data lower: retry without. */
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(rc->id, d->pd, &qa)) {
			int ret = psd_neg_errno();

			psd_rdmt_cq_give(d, need);
			return psd_set_errmsg(ret,
					      "rdma: cannot create a queue "
					      "pair: %s (PS_RDMA_SEND_DEPTH, "
					      "PS_RDMA_RECV_DEPTH)",
					      strerror(-ret));
		}
	}
	rc->qp = rc->id->qp;
	rc->max_inline = qa.cap.max_inline_data;
	return 0;
}

/* Put @rc in the device table, post every receive buffer. */
static int rdmt_conn_activate(struct rdmt_conn *rc)
{
	struct rdmt_dev *d = rc->dev;
	unsigned i;
	int ret = -ENOSPC;

	pthread_mutex_lock(&d->lock);
	for (i = 1; i < RDMT_MAX_CONNS; i++) {
		if (!d->conns[i]) {
			d->conns[i] = rc;
			rc->idx = i;
			rc->gen = ++d->gens[i];
			ret = 0;
			break;
		}
	}
	for (i = 0; !ret && i < rc->recv_cnt; i++)
		ret = psd_rdmt_post_recv(rc, i);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Hand the connection's cm events to the progress thread. */
static int rdmt_conn_watch(struct rdmt_conn *rc)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ev.data.u64 = 2ull << 32 | (uint64_t)rc->gen << 16 | rc->idx;
	if (epoll_ctl(rc->dev->epfd, EPOLL_CTL_ADD, rc->cmch->fd, &ev))
		return psd_neg_errno();
	rc->in_epoll = true;
	return 0;
}

/* Create the QP and buffers on @rc->id (its verbs context is known). */
static int rdmt_conn_setup(struct rdmt_conn *rc)
{
	int ret;

	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rc->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc->base.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (rc->base.fd < 0)
		return psd_neg_errno();
	if (!rc->id->verbs)
		return psd_set_errmsg(-ENODEV, "rdma: no device for %s",
				      rc->base.peer);
	ret = psd_rdmt_dev_get(rc->id->verbs, psd_van_knobs(rc->base.van),
			       &rc->dev);
	if (ret)
		return ret;
	if (rc->dev->k.device[0] &&
	    strcmp(rc->dev->k.device,
		   ibv_get_device_name(rc->id->verbs->device)))
		return psd_set_errmsg(
			-ENODEV,
			"rdma: %s is reached through device "
			"%s, not PS_RDMA_DEVICE=%s",
			rc->base.peer,
			ibv_get_device_name(rc->id->verbs->device),
			rc->dev->k.device);
	ret = rdmt_alloc_bufs(rc);
	if (ret)
		return ret;
	ret = rdmt_create_qp_on(rc);
	if (ret)
		return ret;
	return psd_rdmt_lane_create(rc);
}

/* Wait for one cm event on @ch; returns its type and copies private data. */
static int rdmt_cm_wait(struct rdma_event_channel *ch, uint64_t deadline,
			enum rdma_cm_event_type *type, int *status,
			struct rdmt_cm_priv *priv, size_t *priv_len)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	uint64_t now;
	int ret;

	for (;;) {
		if (!rdma_get_cm_event(ch, &ev))
			break;
		if (errno != EAGAIN)
			return psd_neg_errno();
		now = psd_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		ret = poll(&p, 1, (int)(deadline - now));
		if (ret < 0 && errno != EINTR)
			return psd_neg_errno();
	}
	*type = ev->event;
	*status = ev->status;
	if (priv_len) {
		*priv_len = 0;
		if (ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= sizeof(*priv)) {
			memcpy(priv, ev->param.conn.private_data,
			       sizeof(*priv));
			*priv_len = sizeof(*priv);
		}
	}
	rdma_ack_cm_event(ev);
	return 0;
}

static int rdmt_cm_expect(struct rdmt_conn *rc, const struct psd_addr *addr,
			  uint64_t deadline, enum rdma_cm_event_type want,
			  struct rdmt_cm_priv *priv, size_t *priv_len)
{
	enum rdma_cm_event_type type = RDMA_CM_EVENT_CONNECT_ERROR;
	int status = 0, ret;

	ret = rdmt_cm_wait(rc->cmch, deadline, &type, &status, priv, priv_len);
	if (ret == -ETIMEDOUT)
		return psd_set_errmsg(ret,
				      "rdma: no answer from %s:%u while "
				      "waiting for %s",
				      addr->host, addr->port,
				      rdma_event_str(want));
	if (ret)
		return ret;
	if (type == want)
		return 0;
	if (type == RDMA_CM_EVENT_REJECTED)
		return psd_set_errmsg(-ECONNREFUSED,
				      "rdma: %s:%u refused the connection "
				      "(nothing listening there, or not a "
				      "psched RDMA node; status %d)",
				      addr->host, addr->port, status);
	return psd_set_errmsg(
		type == RDMA_CM_EVENT_UNREACHABLE ? -EHOSTUNREACH
						  : -ECONNREFUSED,
		"rdma: cannot reach %s:%u: %s (status %d: %s); rdma_cm needs "
		"an IP address of an RDMA netdev, not loopback",
		addr->host, addr->port, rdma_event_str(type), status,
		strerror(status < 0 ? -status : status));
}

static int rdmt_connect_to(struct psd_conn *c, const struct psd_addr *addr,
			   unsigned timeout_ms)
{
	struct rdmt_conn *rc = to_rdmt(c);
	uint64_t deadline = psd_now_ms() + timeout_ms;
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdmt_cm_priv mine, theirs;
	struct sockaddr_in sin;
	size_t plen = 0;
	int ret;

	ret = psd_addr_resolve(addr, &sin);
	if (ret)
		return ret;
	rc->cmch = rdma_create_event_channel();
	if (!rc->cmch)
		return psd_set_errmsg(psd_neg_errno(),
				      "rdma: no rdma_cm (%s); is an RDMA "
				      "device present?",
				      strerror(errno));
	ret = psd_rdmt_set_nonblock(rc->cmch->fd);
	if (ret)
		return ret;
	if (rdma_create_id(rc->cmch, &rc->id, rc, RDMA_PS_TCP))
		return psd_neg_errno();
	if (rdma_resolve_addr(rc->id, NULL, (struct sockaddr *)&sin,
			      timeout_ms < 2000 ? 2000 : (int)timeout_ms))
		return psd_set_errmsg(psd_neg_errno(),
				      "rdma: cannot resolve %s: %s", addr->host,
				      strerror(errno));
	ret = rdmt_cm_expect(rc, addr, deadline, RDMA_CM_EVENT_ADDR_RESOLVED,
			     NULL, NULL);
	if (ret)
		return ret;
	if (rdma_resolve_route(rc->id, 2000))
		return psd_set_errmsg(psd_neg_errno(),
				      "rdma: no route to %s: %s (rdma_cm "
				      "needs an address of an RDMA netdev)",
				      addr->host, strerror(errno));
	ret = rdmt_cm_expect(rc, addr, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED,
			     NULL, NULL);
	if (ret)
		return ret;
	ret = rdmt_conn_setup(rc);
	if (ret)
		return ret;
	ret = rdmt_conn_activate(rc);
	if (ret)
		return ret;
	rdmt_fill_priv(&mine, rc);
	cp.private_data = &mine;
	cp.private_data_len = sizeof(mine);
	if (rdma_connect(rc->id, &cp))
		return psd_neg_errno();
	/* The progress thread ignores this channel until established. */
	ret = rdmt_cm_expect(rc, addr, deadline, RDMA_CM_EVENT_ESTABLISHED,
			     &theirs, &plen);
	if (ret)
		return ret;
	ret = rdmt_take_priv(rc, plen ? &theirs : NULL, plen);
	if (ret)
		return ret;
	/* The acceptor's lane was ready before it accepted. */
	ret = psd_rdmt_lane_connect(rc, rc->lane_peer_qpn, rc->lane_peer_psn);
	if (ret)
		return ret;
	pthread_mutex_lock(&rc->dev->lock);
	rc->established = true;
	rc->lane_up = rc->lane_qp && rc->lane_peer_qpn;
	rc->lane_tx = rc->lane_up;
	pthread_mutex_unlock(&rc->dev->lock);
	return rdmt_conn_watch(rc);
}

static int rdmt_accept_one(struct psd_listener *l, struct psd_conn *c,
			   struct rdma_cm_id *id, const void *pdata,
			   size_t plen)
{
	struct rdmt_conn *rc = to_rdmt(c);
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct sockaddr_in *peer = (void *)rdma_get_peer_addr(id);
	struct rdmt_cm_priv mine;
	char ip[INET_ADDRSTRLEN] = "?";
	int ret;

	(void)l;
	rc->id = id;
	if (peer && peer->sin_family == AF_INET)
		inet_ntop(AF_INET, &peer->sin_addr, ip, sizeof(ip));
	snprintf(c->peer, sizeof(c->peer), "%s:%u", ip,
		 peer ? ntohs(peer->sin_port) : 0);
	rc->cmch = rdma_create_event_channel();
	if (!rc->cmch)
		return psd_neg_errno();
	ret = psd_rdmt_set_nonblock(rc->cmch->fd);
	if (ret)
		return ret;
	if (rdma_migrate_id(id, rc->cmch))
		return psd_neg_errno();
	ret = rdmt_conn_setup(rc);
	if (ret)
		return ret;
	ret = rdmt_take_priv(rc, pdata, plen);
	if (ret)
		return ret;
	ret = rdmt_conn_activate(rc);
	if (ret)
		return ret;
	ret = rdmt_conn_watch(rc);
	if (ret)
		return ret;
	/* Our lane takes writes before we accept; we write on the peer's
	 * after its first message (lane.c). */
	ret = psd_rdmt_lane_connect(rc, rc->lane_peer_qpn, rc->lane_peer_psn);
	if (ret)
		return ret;
	pthread_mutex_lock(&rc->dev->lock);
	rc->lane_up = rc->lane_qp && rc->lane_peer_qpn;
	pthread_mutex_unlock(&rc->dev->lock);
	rdmt_fill_priv(&mine, rc);
	cp.private_data = &mine;
	cp.private_data_len = sizeof(mine);
	if (rdma_accept(id, &cp))
		return psd_neg_errno();
	rc->accepted = true;
	return 0;
}

static int rdmt_accept_conn(struct psd_listener *l, struct psd_conn *c)
{
	struct rdma_cm_id *lid = l->priv;
	struct rdma_cm_event *ev;
	struct rdmt_cm_priv pd;
	struct rdma_cm_id *id;
	size_t plen = 0;
	int ret;

	for (;;) {
		if (rdma_get_cm_event(lid->channel, &ev))
			return errno == EAGAIN ? -EAGAIN : psd_neg_errno();
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	id = ev->id;
	if (ev->param.conn.private_data &&
	    ev->param.conn.private_data_len >= sizeof(pd)) {
		memcpy(&pd, ev->param.conn.private_data, sizeof(pd));
		plen = sizeof(pd);
	}
	rdma_ack_cm_event(ev);
	ret = rdmt_accept_one(l, c, id, plen ? &pd : NULL, plen);
	if (ret) {
		/* the van logs it, rate-limited with every other refusal */
		psd_set_errmsg(ret, "rdma: refusing a connection from %s: %s",
			       c->peer, psched_strerror(ret));
		if (!to_rdmt(c)->accepted)
			rdma_reject(id, NULL, 0);
		/* fini releases the id with the rest. */
	}
	return ret;
}

static void rdmt_close(struct psd_conn *c)
{
	struct rdmt_conn *rc = to_rdmt(c);

	if (!rc->dev)
		return;
	pthread_mutex_lock(&rc->dev->lock);
	if (rc->id && rc->qp && !rc->err)
		rdma_disconnect(rc->id);
	psd_rdmt_set_err(rc, -ECONNRESET);
	pthread_mutex_unlock(&rc->dev->lock);
}

/* Flush the QP and wait (bounded) until no work request is left. */
static void rdmt_drain(struct rdmt_conn *rc)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct rdmt_dev *d = rc->dev;
	struct timespec dl;

	psd_rdmt_lane_fini(rc);
	ibv_modify_qp(rc->qp, &qa, IBV_QP_STATE);
	psd_deadline(&dl, 2000);
	pthread_mutex_lock(&d->lock);
	rc->err = rc->err ?: -ECONNRESET;
	while (rc->tx_outstanding || rc->rx_posted || rc->lane_rx_posted)
		if (pthread_cond_timedwait(&rc->cond, &d->lock, &dl) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&d->lock);
}

static void rdmt_fini(struct psd_conn *c)
{
	struct rdmt_conn *rc = to_rdmt(c);
	struct rdmt_dev *d = rc->dev;
	int i;

	if (rc->qp && rc->idx)
		rdmt_drain(rc);
	if (d && rc->in_epoll)
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, rc->cmch->fd, NULL);
	if (d && rc->idx) {
		pthread_mutex_lock(&d->lock);
		d->conns[rc->idx] = NULL;
		pthread_mutex_unlock(&d->lock);
	}
	if (d)
		psd_rdmt_lane_destroy(rc);
	if (rc->qp) {
		rdma_destroy_qp(rc->id);
		psd_rdmt_cq_give(d, rdmt_qp_cq_need(rc));
	}
	if (d) {
		psd_rdmt_mr_put(d, rc->rx_mr);
		for (i = 0; i < RDMT_WB; i++) {
			rc->wb_busy[i] = true;
			psd_rdmt_wb_done(rc, (unsigned)i);
		}
	}
	if (d)
		psd_rdmt_land_fini(rc); /* the QP is gone: no write can land */
	if (rc->rxmr)
		ibv_dereg_mr(rc->rxmr);
	if (rc->txmr)
		ibv_dereg_mr(rc->txmr);
	if (rc->id)
		rdma_destroy_id(rc->id);
	if (rc->cmch)
		rdma_destroy_event_channel(rc->cmch);
	free(rc->rxbuf);
	free(rc->txbuf);
	free(rc->free_data);
	free(rc->rxq);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (d)
		pthread_cond_destroy(&rc->cond);
	psd_rdmt_dev_put(d);
	rc->dev = NULL;
	rc->qp = NULL;
	rc->id = NULL;
	rc->cmch = NULL;
}

const struct psd_transport_ops psd_rdma_ops = {
	.name = "rdma",
	.conn_size = sizeof(struct rdmt_conn),
	.req_send_early = true,
	.listen = rdmt_listen_on,
	.accept = rdmt_accept_conn,
	.listen_close = rdmt_listen_close,
	.connect = rdmt_connect_to,
	.send = psd_rdmt_send,
	.send_dev = psd_rdmt_send_dev,
	.progress = psd_rdmt_progress,
	.close = rdmt_close,
	.fini = rdmt_fini,
};

void psd_rdma_set_local_id(int id)
{
	atomic_store(&rdmt_local_id, id);
}
