// SPDX-License-Identifier: MIT
/*
 * RDMA transport: RC queue pairs set up with rdma_cm, for ConnectX-class
 * RoCE / InfiniBand and the kernel's soft-RoCE (rxe).
 *
 * Threads.  One progress thread per process (per device) owns the single
 * completion channel and CQ that every QP shares, plus each connection's
 * rdma_cm event channel.  It busy-polls the CQ for PS_RDMA_SPIN_US after
 * the last completion, then arms the CQ and sleeps in epoll, so an idle
 * node burns no CPU.  It never calls into the van: for every incoming
 * message it appends the receive buffer to the connection's in-order
 * queue and bumps the connection's eventfd, which is the c->fd the van
 * polls.  The van thread then runs ->progress(), which makes the two
 * upcalls (psd_van_rx_header(), psd_van_rx_msg()) strictly in message
 * order, exactly as the TCP transport does.
 *
 * Why a separate thread: ->send() is synchronous and is called from the
 * van thread too (a server answers pulls there).  Everything a send waits
 * for -- a free send slot, send credits, the receiver's clear-to-send, the
 * completion of its RDMA write -- is reaped by the progress thread and
 * handed to the sender through a condition variable, so a send never
 * depends on its own thread running ->progress().  A send does depend on
 * the peer's van thread answering a large message's header, exactly as a
 * large TCP send depends on the peer's van thread draining the socket.
 *
 * Wire protocol.  Every SEND starts with struct rdma_wire (24 bytes).
 *  EAGER  wire + psd header + the first payload bytes.  Messages that fit
 *         one buffer (PS_RDMA_BUF_BYTES) are copied into a pre-registered
 *         send slot (inline when tiny) and the send returns at once.
 *  CONT   wire + more payload bytes (copy fallback for large messages).
 *  RTS    wire + psd header of a large message.  The receiver's van thread
 *         asks the consumer for the destination (rx_header), registers it
 *         (registration cache) and answers
 *  CTS    wire with the destination's address and rkey; the sender then
 *         RDMA-writes the payload straight from the caller's buffer into
 *         the destination (pull answers land in the worker's buffer, pushes
 *         in the server's merge buffer) and ends with a write-with-
 *         immediate whose immediate names the request (the RTS cookie).
 *         CTS can also say "discard" or "send it as CONT copies" (the
 *         receiver could not register memory).  A response's send waits
 *         for its writes to complete; a request's send (push, pushpull,
 *         init) returns once they are posted, since the KV API leaves
 *         its buffers alone until the answer (see transport.h): the
 *         next RTS then follows the writes on the wire, so the receiver
 *         finds it queued right behind the write-with-immediate.
 *  CREDIT wire only: returns receive credits when no other traffic does.
 * Receive credits: each side pre-posts PS_RDMA_RECV_DEPTH buffers (+2
 * spare for CREDIT messages) and tells the peer in the connect private
 * data; a sender spends one credit per SEND or write-with-immediate and
 * stops at zero, so a slow receiver stalls the sender instead of causing
 * RNR retries.  The receiver returns credits after its van thread has
 * consumed a buffer, piggybacked on every message or by CREDIT.
 *
 * Registration cache: LRU of MRs by address range with a byte budget
 * (PS_RDMA_MR_BUDGET); unused MRs are deregistered on eviction.  A failed
 * registration (usually the locked-memory limit) is logged once with the
 * knobs to change and the message goes through the copy path instead.
 * Caveat: memory that is freed back to the OS and mapped again at the same
 * address while still cached would keep the old pages; PS_RDMA_MR_BUDGET=0
 * registers per message if an application does that.
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

#include "transport.h"

#ifdef PSCHED_HAVE_RDMA
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RDMA_MAGIC	0x44525350u /* "PSRD" */
#define RDMA_VERSION	1u
#define RDMA_MAX_IOV	8
#define RDMA_CTL_SLOTS	4
#define RDMA_SPARE_RECV 2 /* for CREDIT messages, never counted */
#define RDMA_RESERVE	1 /* credits data may not use: left for CTS */
#define RDMA_MAX_CONNS	4096
#define RDMA_RX_BUDGET	8	 /* messages per ->progress() call */
#define RDMA_WB		8	 /* RDMA write batches in flight */
#define RDMA_WB_LAST	0x800000 /* wr_id slot flag: last WR of a batch */

enum rdma_op {
	RDMA_OP_EAGER = 1,
	RDMA_OP_CONT = 2,
	RDMA_OP_RTS = 3,
	RDMA_OP_CTS = 4,
	RDMA_OP_CREDIT = 5,
};

/* CTS status */
#define RDMA_CTS_WRITE	 0
#define RDMA_CTS_DISCARD 1
#define RDMA_CTS_COPY	 2

/* Little-endian on the wire. */
struct rdma_wire {
	uint8_t op;
	uint8_t status; /* CTS */
	uint16_t credits;
	uint32_t cookie; /* RTS/CTS: names the large message */
	uint64_t addr;	 /* CTS */
	uint32_t rkey;	 /* CTS */
	uint32_t reserved;
};

#define RDMA_WIRE_SIZE sizeof(struct rdma_wire)

/* Connect / accept private data. */
struct rdma_cm_priv {
	uint32_t magic;
	uint16_t version;
	uint16_t recv_depth; /* credits the peer may spend */
	uint32_t buf_bytes;  /* size of each receive buffer */
	int32_t node_id;     /* sender's node id, -1 before the table */
	uint32_t pid;
};

/* wr_id: [gen:16][conn:16][kind:8][slot:24] */
enum rdma_wr_kind {
	RDMA_WR_RECV = 1,
	RDMA_WR_SEND = 2, /* data slot */
	RDMA_WR_CTL = 3,  /* control slot (CTS, CREDIT) */
	RDMA_WR_WRITE = 4,
};

struct rdma_knobs {
	unsigned recv_depth;
	unsigned send_depth;
	unsigned buf_bytes;
	unsigned inline_bytes;
	unsigned cq_depth;
	unsigned spin_us;
	bool spin_set; /* spin_us given: keep it on rxe/siw too */
	uint64_t mr_budget;
	unsigned port;
	int gid_index;
	char device[64];
	bool fail_reg; /* test hook: pretend every payload registration fails */
};

struct rdma_mr {
	struct psd_list lru; /* d->mrs, most recent first */
	uintptr_t start;
	uintptr_t end;
	struct ibv_mr *mr;
	int refs;
	bool cached;
};

struct rdma_conn;

struct rdma_dev {
	pthread_mutex_t lock; /* guards every rdma_conn's shared state */
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	unsigned cq_used;
	int epfd;
	int wakefd;
	pthread_t thread;
	bool stop;
	int refs; /* guarded by rdma_glock */
	struct rdma_conn *conns[RDMA_MAX_CONNS];
	uint16_t gens[RDMA_MAX_CONNS];
	struct rdma_knobs k;

	pthread_mutex_t mr_lock;
	struct psd_list mrs;
	uint64_t mr_bytes;
	bool reg_warned;
};

struct rdma_rxq_ent {
	uint32_t slot;
	uint32_t len;
	bool imm;
	uint32_t imm_data;
};

enum rdma_rx_state {
	RDMA_RX_IDLE = 0,
	RDMA_RX_COPY,  /* collecting CONT parts into dst */
	RDMA_RX_WRITE, /* waiting for the write-with-immediate */
};

struct rdma_conn {
	struct psd_conn base;
	struct rdma_dev *dev;
	struct rdma_event_channel *cmch;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	unsigned idx; /* in dev->conns; 0 = not in the table */
	uint16_t gen;
	bool in_epoll;
	bool accepted;
	pthread_cond_t cond; /* with dev->lock */

	/* All below guarded by dev->lock. */
	bool established;
	int err; /* sticky: the connection is dead */
	unsigned max_inline;
	unsigned recv_cnt; /* recv_depth + spare */
	uint8_t *rxbuf;
	struct ibv_mr *rxmr;
	unsigned rx_posted;
	unsigned send_cnt; /* data slots + control slots */
	uint8_t *txbuf;
	struct ibv_mr *txmr;
	unsigned *free_data; /* stack of free data slot numbers */
	unsigned nfree_data;
	unsigned free_ctl[RDMA_CTL_SLOTS];
	unsigned nfree_ctl;
	unsigned tx_outstanding; /* signaled WRs not yet completed */
	unsigned tx_credits;	 /* peer receive buffers we may use */
	unsigned rx_unannounced; /* re-posted buffers not yet announced */
	unsigned credit_thresh;
	bool credit_inflight;
	unsigned peer_buf;

	/* receive queue filled by the progress thread, ring of recv_cnt */
	struct rdma_rxq_ent *rxq;
	unsigned rxq_head;
	unsigned rxq_len;

	/* sender side of a large message (one at a time: send_lock) */
	uint32_t tx_cookie;
	bool cts_ready;
	uint8_t cts_status;
	uint64_t cts_addr;
	uint32_t cts_rkey;
	/* RDMA write batches in flight and the MRs they read from */
	struct rdma_mr *wb_mrs[RDMA_WB][RDMA_MAX_IOV];
	bool wb_busy[RDMA_WB];
	unsigned wb_next;
	uint64_t tx_key;

	/* receiver state, van thread only */
	enum rdma_rx_state rx_state;
	struct psd_hdr rx_hdr;
	uint8_t *rx_dst;
	uint64_t rx_got;
	uint32_t rx_cookie;
	struct rdma_mr *rx_mr;
};

static pthread_mutex_t rdma_glock = PTHREAD_MUTEX_INITIALIZER;
static struct rdma_dev *rdma_the_dev;
static atomic_int rdma_local_id = -1;

/* Counters for tests and logs. */
static atomic_uint_fast64_t rdma_st_regs, rdma_st_evicts, rdma_st_rndv,
	rdma_st_eager, rdma_st_copy, rdma_st_reg_fail;

static struct rdma_conn *to_rdma(struct psd_conn *c)
{
	return psd_container_of(c, struct rdma_conn, base);
}

/* ---- knobs ------------------------------------------------------------ */

/* Copy the device's knobs from @src (the van's; NULL: the defaults).
 * options.c validated every range. */
static void rdma_knobs_load(struct rdma_knobs *k,
			    const struct psd_transport_knobs *src)
{
	struct psd_transport_knobs def;

	if (!src) {
		psd_transport_knobs_init(&def, NULL);
		src = &def;
	}
	k->recv_depth = src->rdma_recv_depth;
	k->send_depth = src->rdma_send_depth;
	k->buf_bytes = src->rdma_buf_bytes;
	k->inline_bytes = src->rdma_inline;
	k->cq_depth = src->rdma_cq_depth;
	k->spin_set = src->rdma_spin_us >= 0;
	k->spin_us = k->spin_set ? (unsigned)src->rdma_spin_us : 20;
	k->mr_budget = src->rdma_mr_budget;
	k->port = src->rdma_port;
	k->gid_index = src->rdma_gid_index;
	snprintf(k->device, sizeof(k->device), "%s", src->rdma_device);
	k->fail_reg = src->rdma_test_fail_reg;
}

/* ---- registration cache ------------------------------------------------ */

static void rdma_mr_evict_locked(struct rdma_dev *d, uint64_t need)
{
	struct psd_list *pos, *tmp;
	struct rdma_mr *m;

	for (pos = d->mrs.prev, tmp = pos->prev;
	     pos != &d->mrs && d->mr_bytes + need > d->k.mr_budget;
	     pos = tmp, tmp = pos->prev) {
		m = psd_container_of(pos, struct rdma_mr, lru);
		if (m->refs)
			continue;
		psd_list_del(&m->lru);
		d->mr_bytes -= m->end - m->start;
		ibv_dereg_mr(m->mr);
		free(m);
		atomic_fetch_add(&rdma_st_evicts, 1);
	}
}

static void rdma_mr_reg_failed(struct rdma_dev *d, size_t len, int err,
			       const char *peer, uint64_t key)
{
	bool first;

	atomic_fetch_add(&rdma_st_reg_fail, 1);
	pthread_mutex_lock(&d->mr_lock);
	first = !d->reg_warned;
	d->reg_warned = true;
	pthread_mutex_unlock(&d->mr_lock);
	psd_log(first ? PSD_LOG_WARN : PSD_LOG_DEBUG,
		"rdma: cannot register %zu bytes for key %llu with %s: %s; "
		"copying through send buffers instead (slower).  Raise the "
		"locked-memory limit (ulimit -l, LimitMEMLOCK=) or lower "
		"PS_RDMA_MR_BUDGET (now %llu bytes)",
		len, (unsigned long long)key, peer, strerror(-err),
		(unsigned long long)d->k.mr_budget);
}

/* Registered region covering [addr, addr+len); takes a reference. */
static int rdma_mr_get(struct rdma_dev *d, void *addr, size_t len,
		       struct rdma_mr **out)
{
	uintptr_t s = (uintptr_t)addr, e = s + len;
	struct psd_list *pos;
	struct rdma_mr *m;
	struct ibv_mr *mr;

	if (d->k.fail_reg)
		return -ENOMEM;
	pthread_mutex_lock(&d->mr_lock);
	psd_list_for_each (pos, &d->mrs) {
		m = psd_container_of(pos, struct rdma_mr, lru);
		if (m->start <= s && e <= m->end) {
			m->refs++;
			psd_list_del(&m->lru);
			psd_list_add_tail(d->mrs.next, &m->lru);
			pthread_mutex_unlock(&d->mr_lock);
			*out = m;
			return 0;
		}
	}
	rdma_mr_evict_locked(d, len);
	pthread_mutex_unlock(&d->mr_lock);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	mr = ibv_reg_mr(d->pd, addr, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		/* Maybe the cache holds the locked memory: drop it, retry. */
		pthread_mutex_lock(&d->mr_lock);
		rdma_mr_evict_locked(d, d->k.mr_budget + 1);
		pthread_mutex_unlock(&d->mr_lock);
		mr = ibv_reg_mr(d->pd, addr, len,
				IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE);
	}
	if (!mr) {
		int ret = psd_neg_errno();

		free(m);
		return ret;
	}
	atomic_fetch_add(&rdma_st_regs, 1);
	m->start = s;
	m->end = e;
	m->mr = mr;
	m->refs = 1;
	pthread_mutex_lock(&d->mr_lock);
	m->cached = d->mr_bytes + len <= d->k.mr_budget;
	if (m->cached) {
		d->mr_bytes += len;
		psd_list_add_tail(d->mrs.next, &m->lru);
	}
	pthread_mutex_unlock(&d->mr_lock);
	*out = m;
	return 0;
}

static void rdma_mr_put(struct rdma_dev *d, struct rdma_mr *m)
{
	bool drop;

	if (!m)
		return;
	pthread_mutex_lock(&d->mr_lock);
	drop = --m->refs == 0 && !m->cached;
	pthread_mutex_unlock(&d->mr_lock);
	if (drop) {
		ibv_dereg_mr(m->mr);
		free(m);
	}
}

/* ---- device and progress thread ---------------------------------------- */

static uint64_t rdma_wr_id(struct rdma_conn *rc, unsigned kind, unsigned slot)
{
	return ((uint64_t)rc->gen << 48) | ((uint64_t)rc->idx << 32) |
	       ((uint64_t)kind << 24) | slot;
}

static void rdma_wake_van(struct rdma_conn *rc)
{
	uint64_t one = 1;

	if (rc->base.fd >= 0)
		(void)!write(rc->base.fd, &one, sizeof(one));
}

/* dev->lock held: the connection is dead; wake everyone. */
static void rdma_set_err(struct rdma_conn *rc, int err)
{
	if (!rc->err)
		rc->err = err;
	pthread_cond_broadcast(&rc->cond);
	rdma_wake_van(rc);
}

static uint8_t *rdma_rx_slot(struct rdma_conn *rc, unsigned slot)
{
	return rc->rxbuf + (size_t)slot * rc->dev->k.buf_bytes;
}

static uint8_t *rdma_tx_slot(struct rdma_conn *rc, unsigned slot)
{
	return rc->txbuf + (size_t)slot * rc->dev->k.buf_bytes;
}

static int rdma_post_recv(struct rdma_conn *rc, unsigned slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rdma_rx_slot(rc, slot),
		.length = rc->dev->k.buf_bytes,
		.lkey = rc->rxmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = rdma_wr_id(rc, RDMA_WR_RECV, slot),
				  .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret;

	ret = -ibv_post_recv(rc->qp, &wr, &bad);
	if (!ret)
		rc->rx_posted++;
	return ret;
}

/*
 * dev->lock held: post a SEND of @len bytes from slot @slot (kind @kind)
 * with the credits we owe piggybacked.
 */
static int rdma_post_slot(struct rdma_conn *rc, unsigned kind, unsigned slot,
			  size_t len)
{
	uint8_t *buf = rdma_tx_slot(rc, slot);
	struct rdma_wire *w = (struct rdma_wire *)(void *)buf;
	struct ibv_sge sge = { .addr = (uintptr_t)buf,
			       .length = (uint32_t)len,
			       .lkey = rc->txmr->lkey };
	struct ibv_send_wr wr = { .wr_id = rdma_wr_id(rc, kind, slot),
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	unsigned give =
		rc->rx_unannounced > 0xffff ? 0xffff : rc->rx_unannounced;
	int ret;

	w->credits = htole16((uint16_t)give);
	if (len <= rc->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	ret = -ibv_post_send(rc->qp, &wr, &bad);
	if (ret)
		return ret;
	rc->rx_unannounced -= give;
	rc->tx_outstanding++;
	return 0;
}

/* dev->lock held: send a CREDIT message if enough credits are owed. */
static void rdma_maybe_credit(struct rdma_conn *rc)
{
	struct rdma_wire *w;
	unsigned slot;

	if (rc->err || rc->credit_inflight || !rc->established ||
	    rc->rx_unannounced < rc->credit_thresh || !rc->nfree_ctl)
		return;
	slot = rc->free_ctl[--rc->nfree_ctl];
	w = (struct rdma_wire *)(void *)rdma_tx_slot(rc, slot);
	memset(w, 0, sizeof(*w));
	w->op = RDMA_OP_CREDIT;
	if (rdma_post_slot(rc, RDMA_WR_CTL, slot, RDMA_WIRE_SIZE)) {
		rc->free_ctl[rc->nfree_ctl++] = slot;
		return;
	}
	rc->credit_inflight = true;
}

static void rdma_wc_error(struct rdma_conn *rc, const struct ibv_wc *wc,
			  unsigned kind)
{
	static const char *const what[] = { "?", "receive", "send", "send",
					    "RDMA write" };

	if (wc->status != IBV_WC_WR_FLUSH_ERR && !rc->err &&
	    !atomic_load(&rc->base.closed))
		psd_err("rdma: %s with %s failed: %s (vendor error 0x%x%s)",
			what[kind <= RDMA_WR_WRITE ? kind : 0], rc->base.peer,
			ibv_wc_status_str(wc->status), wc->vendor_err,
			kind == RDMA_WR_WRITE ? ", while writing a key" : "");
	rdma_set_err(rc,
		     wc->status == IBV_WC_WR_FLUSH_ERR ? -ECONNRESET : -EIO);
}

/* dev->lock held: a receive completed. */
static void rdma_on_recv(struct rdma_conn *rc, const struct ibv_wc *wc,
			 unsigned slot)
{
	const struct rdma_wire *w = (const void *)rdma_rx_slot(rc, slot);
	struct rdma_rxq_ent *e;

	rc->rx_posted--;
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		e = &rc->rxq[(rc->rxq_head + rc->rxq_len++) % rc->recv_cnt];
		e->slot = slot;
		e->len = wc->byte_len;
		e->imm = true;
		e->imm_data = ntohl(wc->imm_data);
		rdma_wake_van(rc);
		return;
	}
	if (wc->byte_len < RDMA_WIRE_SIZE) {
		psd_err("rdma: dropping connection from %s: %u-byte message",
			rc->base.peer, wc->byte_len);
		rdma_set_err(rc, -EPROTO);
		return;
	}
	rc->tx_credits += le16toh(w->credits);
	pthread_cond_broadcast(&rc->cond);
	switch (w->op) {
	case RDMA_OP_CTS:
		if (!rc->cts_ready && le32toh(w->cookie) == rc->tx_cookie) {
			rc->cts_ready = true;
			rc->cts_status = w->status;
			rc->cts_addr = le64toh(w->addr);
			rc->cts_rkey = le32toh(w->rkey);
		} else {
			psd_err("rdma: dropping connection from %s: "
				"unexpected clear-to-send %u",
				rc->base.peer, le32toh(w->cookie));
			rdma_set_err(rc, -EPROTO);
		}
		rc->rx_unannounced++;
		if (rdma_post_recv(rc, slot))
			rdma_set_err(rc, -EIO);
		rdma_maybe_credit(rc);
		return;
	case RDMA_OP_CREDIT:
		if (rdma_post_recv(rc, slot))
			rdma_set_err(rc, -EIO);
		return;
	default:
		e = &rc->rxq[(rc->rxq_head + rc->rxq_len++) % rc->recv_cnt];
		e->slot = slot;
		e->len = wc->byte_len;
		e->imm = false;
		rdma_wake_van(rc);
		return;
	}
}

/* dev->lock held: write batch @wb is over; drop its MR references. */
static void rdma_wb_done(struct rdma_conn *rc, unsigned wb)
{
	int i;

	if (wb >= RDMA_WB || !rc->wb_busy[wb])
		return;
	for (i = 0; i < RDMA_MAX_IOV; i++) {
		rdma_mr_put(rc->dev, rc->wb_mrs[wb][i]);
		rc->wb_mrs[wb][i] = NULL;
	}
	rc->wb_busy[wb] = false;
	pthread_cond_broadcast(&rc->cond);
}

static void rdma_on_wc(struct rdma_dev *d, const struct ibv_wc *wc)
{
	unsigned idx = (unsigned)(wc->wr_id >> 32) & 0xffff;
	unsigned gen = (unsigned)(wc->wr_id >> 48);
	unsigned kind = (unsigned)(wc->wr_id >> 24) & 0xff;
	unsigned slot = (unsigned)wc->wr_id & 0xffffff;
	struct rdma_conn *rc;

	if (idx >= RDMA_MAX_CONNS || d->gens[idx] != gen || !d->conns[idx])
		return; /* connection already gone */
	rc = d->conns[idx];
	if (kind != RDMA_WR_RECV)
		rc->tx_outstanding--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (kind == RDMA_WR_RECV)
			rc->rx_posted--;
		else if (kind == RDMA_WR_SEND)
			rc->free_data[rc->nfree_data++] = slot;
		else if (kind == RDMA_WR_CTL)
			rc->free_ctl[rc->nfree_ctl++] = slot;
		else if (kind == RDMA_WR_WRITE && (slot & RDMA_WB_LAST))
			rdma_wb_done(rc, slot & ~RDMA_WB_LAST);
		rdma_wc_error(rc, wc, kind);
		return;
	}
	switch (kind) {
	case RDMA_WR_RECV:
		rdma_on_recv(rc, wc, slot);
		break;
	case RDMA_WR_SEND:
		rc->free_data[rc->nfree_data++] = slot;
		pthread_cond_broadcast(&rc->cond);
		break;
	case RDMA_WR_CTL:
		if (((struct rdma_wire *)(void *)rdma_tx_slot(rc, slot))->op ==
		    RDMA_OP_CREDIT)
			rc->credit_inflight = false;
		rc->free_ctl[rc->nfree_ctl++] = slot;
		pthread_cond_broadcast(&rc->cond);
		rdma_maybe_credit(rc);
		break;
	case RDMA_WR_WRITE:
		if (slot & RDMA_WB_LAST)
			rdma_wb_done(rc, slot & ~RDMA_WB_LAST);
		break;
	}
}

/* dev->lock held: connection manager events on a connection. */
static void rdma_on_cm(struct rdma_conn *rc)
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
			rdma_maybe_credit(rc);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			rdma_set_err(rc, -ECONNRESET);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			psd_err("rdma: connection with %s: %s (status %d)",
				rc->base.peer, rdma_event_str(type), status);
			rdma_set_err(rc, -ECONNRESET);
			break;
		default:
			break;
		}
	}
}

static void rdma_poll_batch(struct rdma_dev *d, struct ibv_wc *wc, int n)
{
	int i;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < n; i++)
		rdma_on_wc(d, &wc[i]);
	pthread_mutex_unlock(&d->lock);
}

static void rdma_handle_events(struct rdma_dev *d, struct epoll_event *ev,
			       int n, unsigned *unacked)
{
	struct ibv_cq *cq;
	void *ctx;
	uint64_t v;
	unsigned idx;
	int i;

	for (i = 0; i < n; i++) {
		if (ev[i].data.u64 == 0) {
			while (!ibv_get_cq_event(d->ch, &cq, &ctx))
				(*unacked)++;
			if (*unacked >= 64) {
				ibv_ack_cq_events(d->cq, *unacked);
				*unacked = 0;
			}
		} else if (ev[i].data.u64 == 1) {
			(void)!read(d->wakefd, &v, sizeof(v));
		} else {
			idx = (unsigned)(ev[i].data.u64 & 0xffff);
			pthread_mutex_lock(&d->lock);
			if (d->conns[idx] &&
			    d->gens[idx] == (uint16_t)(ev[i].data.u64 >> 16))
				rdma_on_cm(d->conns[idx]);
			pthread_mutex_unlock(&d->lock);
		}
	}
}

static void *rdma_progress_thread(void *arg)
{
	struct rdma_dev *d = arg;
	struct epoll_event ev[16];
	struct ibv_wc wc[32];
	uint64_t last = psd_now_us();
	unsigned unacked = 0;
	int n;

	while (!d->stop) {
		n = ibv_poll_cq(d->cq, PSD_ARRAY_SIZE(wc), wc);
		if (n > 0) {
			rdma_poll_batch(d, wc, n);
			last = psd_now_us();
			continue;
		}
		if (psd_now_us() - last < d->k.spin_us) {
			n = epoll_wait(d->epfd, ev, PSD_ARRAY_SIZE(ev), 0);
			if (n > 0)
				rdma_handle_events(d, ev, n, &unacked);
			continue;
		}
		if (ibv_req_notify_cq(d->cq, 0))
			psd_err("rdma: cannot arm the completion queue");
		n = ibv_poll_cq(d->cq, PSD_ARRAY_SIZE(wc), wc);
		if (n > 0) {
			rdma_poll_batch(d, wc, n);
			last = psd_now_us();
			continue;
		}
		n = epoll_wait(d->epfd, ev, PSD_ARRAY_SIZE(ev), 1000);
		if (n > 0)
			rdma_handle_events(d, ev, n, &unacked);
		last = psd_now_us();
	}
	if (unacked)
		ibv_ack_cq_events(d->cq, unacked);
	return NULL;
}

static int rdma_set_nonblock(int fd)
{
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return psd_neg_errno();
	return 0;
}

static void rdma_dev_free(struct rdma_dev *d)
{
	struct psd_list *pos, *tmp;
	struct rdma_mr *m;
	uint64_t one = 1;

	if (d->thread) {
		d->stop = true;
		(void)!write(d->wakefd, &one, sizeof(one));
		pthread_join(d->thread, NULL);
	}
	psd_list_for_each_safe (pos, tmp, &d->mrs) {
		m = psd_container_of(pos, struct rdma_mr, lru);
		ibv_dereg_mr(m->mr);
		free(m);
	}
	if (d->cq)
		ibv_destroy_cq(d->cq);
	if (d->ch)
		ibv_destroy_comp_channel(d->ch);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->epfd >= 0)
		close(d->epfd);
	if (d->wakefd >= 0)
		close(d->wakefd);
	pthread_mutex_destroy(&d->mr_lock);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int rdma_dev_setup(struct rdma_dev *d, struct ibv_context *verbs)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct ibv_device_attr da;
	int ret;

	d->verbs = verbs;
	/* Software RoCE runs in the kernel on the same CPUs: spinning only
	 * takes them away from it, so by default do not spin there. */
	if (!d->k.spin_set &&
	    (!strncmp(ibv_get_device_name(verbs->device), "rxe", 3) ||
	     !strncmp(ibv_get_device_name(verbs->device), "siw", 3)))
		d->k.spin_us = 0;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd)
		return psd_neg_errno();
	d->ch = ibv_create_comp_channel(verbs);
	if (!d->ch)
		return psd_neg_errno();
	ret = rdma_set_nonblock(d->ch->fd);
	if (ret)
		return ret;
	if (!ibv_query_device(verbs, &da) && da.max_cqe > 0 &&
	    d->k.cq_depth > (unsigned)da.max_cqe)
		d->k.cq_depth = (unsigned)da.max_cqe;
	d->cq = ibv_create_cq(verbs, (int)d->k.cq_depth, d, d->ch, 0);
	if (!d->cq)
		return psd_neg_errno();
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	d->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->epfd < 0 || d->wakefd < 0)
		return psd_neg_errno();
	ev.data.u64 = 0;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->ch->fd, &ev))
		return psd_neg_errno();
	ev.data.u64 = 1;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, d->wakefd, &ev))
		return psd_neg_errno();
	ret = pthread_create(&d->thread, NULL, rdma_progress_thread, d);
	if (ret) {
		d->thread = 0;
		return -ret;
	}
	return 0;
}

/*
 * The registration cache keys MRs by address.  Memory that malloc hands
 * back to the OS and maps again later at the same address would get new
 * pages behind a cached MR's back, so, as MPI libraries do, keep freed
 * heap memory mapped: no trimming, no mmap'd chunks.
 */
static void rdma_keep_heap(void)
{
	static atomic_bool done;

	if (atomic_exchange(&done, true))
		return;
	mallopt(M_TRIM_THRESHOLD, -1);
	mallopt(M_MMAP_MAX, 0);
}

/* Take a reference on the process's device state for @verbs. */
static int rdma_dev_get(struct ibv_context *verbs,
			const struct psd_transport_knobs *knobs,
			struct rdma_dev **out)
{
	struct rdma_dev *d;
	int ret;

	pthread_mutex_lock(&rdma_glock);
	d = rdma_the_dev;
	if (d) {
		if (d->verbs != verbs) {
			pthread_mutex_unlock(&rdma_glock);
			return psd_set_errmsg(
				-ENOTSUP,
				"rdma: connections on two devices (%s and %s); "
				"set PS_RDMA_DEVICE and use addresses of one "
				"device",
				ibv_get_device_name(d->verbs->device),
				ibv_get_device_name(verbs->device));
		}
		d->refs++;
		pthread_mutex_unlock(&rdma_glock);
		*out = d;
		return 0;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		pthread_mutex_unlock(&rdma_glock);
		return -ENOMEM;
	}
	d->epfd = -1;
	d->wakefd = -1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->mr_lock, NULL);
	psd_list_init(&d->mrs);
	rdma_knobs_load(&d->k, knobs);
	ret = rdma_dev_setup(d, verbs);
	if (ret) {
		pthread_mutex_unlock(&rdma_glock);
		rdma_dev_free(d);
		return ret;
	}
	if (d->k.mr_budget)
		rdma_keep_heap();
	d->refs = 1;
	rdma_the_dev = d;
	pthread_mutex_unlock(&rdma_glock);
	psd_info("rdma: using %s (CQ depth %u, buffers %u x %u bytes, "
		 "registration budget %llu bytes)",
		 ibv_get_device_name(verbs->device), d->k.cq_depth,
		 d->k.recv_depth, d->k.buf_bytes,
		 (unsigned long long)d->k.mr_budget);
	*out = d;
	return 0;
}

static void rdma_dev_put(struct rdma_dev *d)
{
	bool last;

	if (!d)
		return;
	pthread_mutex_lock(&rdma_glock);
	last = --d->refs == 0;
	if (last)
		rdma_the_dev = NULL;
	pthread_mutex_unlock(&rdma_glock);
	if (last)
		rdma_dev_free(d);
}

/* ---- connection setup ---------------------------------------------------- */

static int rdma_listen_on(struct psd_listener *l, const struct psd_addr *addr)
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
	ret = rdma_set_nonblock(ch->fd);
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

static void rdma_listen_close(struct psd_listener *l)
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

static void rdma_fill_priv(struct rdma_cm_priv *p, const struct rdma_knobs *k)
{
	memset(p, 0, sizeof(*p));
	p->magic = htole32(RDMA_MAGIC);
	p->version = htole16(RDMA_VERSION);
	p->recv_depth = htole16((uint16_t)k->recv_depth);
	p->buf_bytes = htole32(k->buf_bytes);
	p->node_id = (int32_t)htole32((uint32_t)atomic_load(&rdma_local_id));
	p->pid = htole32((uint32_t)getpid());
}

/* Check the peer's private data; sets credits.  dev->lock not needed (the
 * connection is not in use yet). */
static int rdma_take_priv(struct rdma_conn *rc, const void *data, size_t len)
{
	struct rdma_cm_priv p;

	if (!data || len < sizeof(p)) {
		psd_err("rdma: %s sent no psched connection data (not a "
			"psched node?)",
			rc->base.peer);
		return -EPROTO;
	}
	memcpy(&p, data, sizeof(p));
	if (le32toh(p.magic) != RDMA_MAGIC ||
	    le16toh(p.version) != RDMA_VERSION || le16toh(p.recv_depth) < 4 ||
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
	rc->tx_credits = le16toh(p.recv_depth);
	rc->peer_buf = le32toh(p.buf_bytes);
	if ((int32_t)le32toh((uint32_t)p.node_id) >= 0 &&
	    !strchr(rc->base.peer, '#'))
		snprintf(rc->base.peer + strlen(rc->base.peer),
			 sizeof(rc->base.peer) - strlen(rc->base.peer), " #%d",
			 (int32_t)le32toh((uint32_t)p.node_id));
	return 0;
}

static int rdma_alloc_bufs(struct rdma_conn *rc)
{
	struct rdma_dev *d = rc->dev;
	size_t b = d->k.buf_bytes;
	unsigned i;

	rc->recv_cnt = d->k.recv_depth + RDMA_SPARE_RECV;
	rc->send_cnt = d->k.send_depth + RDMA_CTL_SLOTS;
	rc->rxbuf = aligned_alloc(4096, ((rc->recv_cnt * b) + 4095) & ~4095ul);
	rc->txbuf = aligned_alloc(4096, ((rc->send_cnt * b) + 4095) & ~4095ul);
	rc->free_data = calloc(d->k.send_depth, sizeof(unsigned));
	rc->rxq = calloc(rc->recv_cnt, sizeof(*rc->rxq));
	if (!rc->rxbuf || !rc->txbuf || !rc->free_data || !rc->rxq)
		return -ENOMEM;
	rc->rxmr = ibv_reg_mr(d->pd, rc->rxbuf, rc->recv_cnt * b,
			      IBV_ACCESS_LOCAL_WRITE);
	rc->txmr = ibv_reg_mr(d->pd, rc->txbuf, rc->send_cnt * b, 0);
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
	for (i = 0; i < RDMA_CTL_SLOTS; i++)
		rc->free_ctl[rc->nfree_ctl++] = d->k.send_depth + i;
	rc->credit_thresh = d->k.recv_depth / 4 ? d->k.recv_depth / 4 : 1;
	return 0;
}

static int rdma_create_qp_on(struct rdma_conn *rc)
{
	struct rdma_dev *d = rc->dev;
	struct ibv_qp_init_attr qa = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = rc->send_cnt + RDMA_MAX_IOV,
			 .max_recv_wr = rc->recv_cnt,
			 .max_send_sge = 1,
			 .max_recv_sge = 1,
			 .max_inline_data = d->k.inline_bytes },
	};
	unsigned need = qa.cap.max_send_wr + qa.cap.max_recv_wr;

	pthread_mutex_lock(&d->lock);
	if (d->cq_used + need > d->k.cq_depth) {
		pthread_mutex_unlock(&d->lock);
		return psd_set_errmsg(-ENOSPC,
				      "rdma: completion queue full (%u "
				      "entries); raise PS_RDMA_CQ_DEPTH for "
				      "more connections",
				      d->k.cq_depth);
	}
	d->cq_used += need;
	pthread_mutex_unlock(&d->lock);
	if (rdma_create_qp(rc->id, d->pd, &qa)) {
		/* Some devices cap inline data lower: retry without. */
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(rc->id, d->pd, &qa)) {
			int ret = psd_neg_errno();

			pthread_mutex_lock(&d->lock);
			d->cq_used -= need;
			pthread_mutex_unlock(&d->lock);
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
static int rdma_conn_activate(struct rdma_conn *rc)
{
	struct rdma_dev *d = rc->dev;
	unsigned i;
	int ret = -ENOSPC;

	pthread_mutex_lock(&d->lock);
	for (i = 1; i < RDMA_MAX_CONNS; i++) {
		if (!d->conns[i]) {
			d->conns[i] = rc;
			rc->idx = i;
			rc->gen = ++d->gens[i];
			ret = 0;
			break;
		}
	}
	for (i = 0; !ret && i < rc->recv_cnt; i++)
		ret = rdma_post_recv(rc, i);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* Hand the connection's cm events to the progress thread. */
static int rdma_conn_watch(struct rdma_conn *rc)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ev.data.u64 = 2ull << 32 | (uint64_t)rc->gen << 16 | rc->idx;
	if (epoll_ctl(rc->dev->epfd, EPOLL_CTL_ADD, rc->cmch->fd, &ev))
		return psd_neg_errno();
	rc->in_epoll = true;
	return 0;
}

/* Create the QP and buffers on @rc->id (its verbs context is known). */
static int rdma_conn_setup(struct rdma_conn *rc)
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
	ret = rdma_dev_get(rc->id->verbs, psd_van_knobs(rc->base.van),
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
	ret = rdma_alloc_bufs(rc);
	if (ret)
		return ret;
	return rdma_create_qp_on(rc);
}

/* Wait for one cm event on @ch; returns its type and copies private data. */
static int rdma_cm_wait(struct rdma_event_channel *ch, uint64_t deadline,
			enum rdma_cm_event_type *type, int *status,
			struct rdma_cm_priv *priv, size_t *priv_len)
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

static int rdma_cm_expect(struct rdma_conn *rc, const struct psd_addr *addr,
			  uint64_t deadline, enum rdma_cm_event_type want,
			  struct rdma_cm_priv *priv, size_t *priv_len)
{
	enum rdma_cm_event_type type = RDMA_CM_EVENT_CONNECT_ERROR;
	int status = 0, ret;

	ret = rdma_cm_wait(rc->cmch, deadline, &type, &status, priv, priv_len);
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

static int rdma_connect_to(struct psd_conn *c, const struct psd_addr *addr,
			   unsigned timeout_ms)
{
	struct rdma_conn *rc = to_rdma(c);
	uint64_t deadline = psd_now_ms() + timeout_ms;
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct rdma_cm_priv mine, theirs;
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
	ret = rdma_set_nonblock(rc->cmch->fd);
	if (ret)
		return ret;
	if (rdma_create_id(rc->cmch, &rc->id, rc, RDMA_PS_TCP))
		return psd_neg_errno();
	if (rdma_resolve_addr(rc->id, NULL, (struct sockaddr *)&sin,
			      timeout_ms < 2000 ? 2000 : (int)timeout_ms))
		return psd_set_errmsg(psd_neg_errno(),
				      "rdma: cannot resolve %s: %s", addr->host,
				      strerror(errno));
	ret = rdma_cm_expect(rc, addr, deadline, RDMA_CM_EVENT_ADDR_RESOLVED,
			     NULL, NULL);
	if (ret)
		return ret;
	if (rdma_resolve_route(rc->id, 2000))
		return psd_set_errmsg(psd_neg_errno(),
				      "rdma: no route to %s: %s (rdma_cm "
				      "needs an address of an RDMA netdev)",
				      addr->host, strerror(errno));
	ret = rdma_cm_expect(rc, addr, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED,
			     NULL, NULL);
	if (ret)
		return ret;
	ret = rdma_conn_setup(rc);
	if (ret)
		return ret;
	ret = rdma_conn_activate(rc);
	if (ret)
		return ret;
	rdma_fill_priv(&mine, &rc->dev->k);
	cp.private_data = &mine;
	cp.private_data_len = sizeof(mine);
	if (rdma_connect(rc->id, &cp))
		return psd_neg_errno();
	/* The progress thread ignores this channel until established. */
	ret = rdma_cm_expect(rc, addr, deadline, RDMA_CM_EVENT_ESTABLISHED,
			     &theirs, &plen);
	if (ret)
		return ret;
	ret = rdma_take_priv(rc, plen ? &theirs : NULL, plen);
	if (ret)
		return ret;
	pthread_mutex_lock(&rc->dev->lock);
	rc->established = true;
	pthread_mutex_unlock(&rc->dev->lock);
	return rdma_conn_watch(rc);
}

static int rdma_accept_one(struct psd_listener *l, struct psd_conn *c,
			   struct rdma_cm_id *id, const void *pdata,
			   size_t plen)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct sockaddr_in *peer = (void *)rdma_get_peer_addr(id);
	struct rdma_cm_priv mine;
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
	ret = rdma_set_nonblock(rc->cmch->fd);
	if (ret)
		return ret;
	if (rdma_migrate_id(id, rc->cmch))
		return psd_neg_errno();
	ret = rdma_conn_setup(rc);
	if (ret)
		return ret;
	ret = rdma_take_priv(rc, pdata, plen);
	if (ret)
		return ret;
	ret = rdma_conn_activate(rc);
	if (ret)
		return ret;
	ret = rdma_conn_watch(rc);
	if (ret)
		return ret;
	rdma_fill_priv(&mine, &rc->dev->k);
	cp.private_data = &mine;
	cp.private_data_len = sizeof(mine);
	if (rdma_accept(id, &cp))
		return psd_neg_errno();
	rc->accepted = true;
	return 0;
}

static int rdma_accept_conn(struct psd_listener *l, struct psd_conn *c)
{
	struct rdma_cm_id *lid = l->priv;
	struct rdma_cm_event *ev;
	struct rdma_cm_priv pd;
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
	ret = rdma_accept_one(l, c, id, plen ? &pd : NULL, plen);
	if (ret) {
		psd_warn("rdma: refusing a connection from %s: %s", c->peer,
			 psched_strerror(ret));
		if (!to_rdma(c)->accepted)
			rdma_reject(id, NULL, 0);
		/* fini releases the id with the rest. */
	}
	return ret;
}

/* ---- sending ------------------------------------------------------------ */

/*
 * dev->lock held: wait until the connection is up, a data slot is free
 * and a credit may be spent (@need_slot false: credit only).
 */
static int rdma_wait_tx(struct rdma_conn *rc, bool need_slot,
			const struct timespec *dl)
{
	while (!rc->err && !atomic_load(&rc->base.closed) &&
	       (!rc->established || rc->tx_credits <= RDMA_RESERVE ||
		(need_slot && !rc->nfree_data))) {
		if (pthread_cond_timedwait(&rc->cond, &rc->dev->lock, dl) ==
		    ETIMEDOUT) {
			if (!rc->established)
				return psd_set_errmsg(-ETIMEDOUT,
						      "rdma: %s: connection "
						      "not established",
						      rc->base.peer);
			return psd_set_errmsg(
				-ETIMEDOUT,
				"rdma: %s is not taking messages (%s)",
				rc->base.peer,
				rc->tx_credits <= RDMA_RESERVE
					? "no receive credits"
					: "send queue full");
		}
	}
	if (rc->err)
		return rc->err;
	if (atomic_load(&rc->base.closed))
		return -ECONNRESET;
	return 0;
}

/* Copy @n bytes of the iovec list starting at byte @off into @dst. */
static void rdma_iov_copy(uint8_t *dst, const struct iovec *iov, int niov,
			  uint64_t off, size_t n)
{
	size_t k;
	int i;

	for (i = 0; i < niov && n; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		k = iov[i].iov_len - (size_t)off;
		if (k > n)
			k = n;
		memcpy(dst, (const uint8_t *)iov[i].iov_base + off, k);
		dst += k;
		n -= k;
		off = 0;
	}
}

/*
 * Send bytes [@off, total) as EAGER (with the header, when @with_hdr) and
 * CONT messages copied through send slots.  Each returns when posted.
 */
static int rdma_send_copy(struct rdma_conn *rc, const struct psd_hdr *h,
			  const struct iovec *iov, int niov, bool with_hdr,
			  const struct timespec *dl)
{
	struct rdma_dev *d = rc->dev;
	uint64_t off = 0;
	struct rdma_wire *w;
	size_t room, n, hl;
	uint8_t *buf;
	unsigned slot;
	int ret;

	do {
		hl = RDMA_WIRE_SIZE + (with_hdr ? PSD_HDR_SIZE : 0);
		room = rc->peer_buf - hl;
		n = h->length - off < room ? (size_t)(h->length - off) : room;
		pthread_mutex_lock(&d->lock);
		ret = rdma_wait_tx(rc, true, dl);
		if (ret) {
			pthread_mutex_unlock(&d->lock);
			return ret;
		}
		slot = rc->free_data[--rc->nfree_data];
		rc->tx_credits--;
		pthread_mutex_unlock(&d->lock);
		buf = rdma_tx_slot(rc, slot);
		w = (struct rdma_wire *)(void *)buf;
		memset(w, 0, sizeof(*w));
		w->op = with_hdr ? RDMA_OP_EAGER : RDMA_OP_CONT;
		if (with_hdr)
			psd_hdr_encode(h, buf + RDMA_WIRE_SIZE);
		rdma_iov_copy(buf + hl, iov, niov, off, n);
		pthread_mutex_lock(&d->lock);
		ret = rc->err ?: rdma_post_slot(rc, RDMA_WR_SEND, slot, hl + n);
		if (ret) {
			rc->free_data[rc->nfree_data++] = slot;
			rdma_set_err(rc, ret);
		}
		pthread_mutex_unlock(&d->lock);
		if (ret)
			return ret;
		off += n;
		with_hdr = false;
	} while (off < h->length);
	return 0;
}

/*
 * dev->lock held: post the payload writes as batch @wb, the last with
 * immediate.  On 0 the batch owns the references in @mrs (cleared here)
 * until its last write completes.
 */
static int rdma_post_writes(struct rdma_conn *rc, const struct iovec *iov,
			    int niov, struct rdma_mr **mrs, unsigned wb)
{
	struct ibv_send_wr wr[RDMA_MAX_IOV], *bad;
	struct ibv_sge sge[RDMA_MAX_IOV];
	uint64_t off = 0;
	int i, n = 0, ret;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < niov; i++) {
		if (!iov[i].iov_len)
			continue;
		sge[n].addr = (uintptr_t)iov[i].iov_base;
		sge[n].length = (uint32_t)iov[i].iov_len;
		sge[n].lkey = mrs[i]->mr->lkey;
		wr[n].wr_id = rdma_wr_id(rc, RDMA_WR_WRITE, wb);
		wr[n].send_flags = IBV_SEND_SIGNALED;
		wr[n].sg_list = &sge[n];
		wr[n].num_sge = 1;
		wr[n].opcode = IBV_WR_RDMA_WRITE;
		wr[n].wr.rdma.remote_addr = rc->cts_addr + off;
		wr[n].wr.rdma.rkey = rc->cts_rkey;
		if (n)
			wr[n - 1].next = &wr[n];
		off += iov[i].iov_len;
		n++;
	}
	wr[n - 1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[n - 1].imm_data = htonl(rc->tx_cookie);
	wr[n - 1].wr_id = rdma_wr_id(rc, RDMA_WR_WRITE, wb | RDMA_WB_LAST);
	ret = -ibv_post_send(rc->qp, wr, &bad);
	if (ret) {
		/* The WRs before @bad were posted and will flush. */
		rc->tx_outstanding += (unsigned)(bad - wr);
		return ret;
	}
	rc->tx_outstanding += (unsigned)n;
	rc->wb_busy[wb] = true;
	for (i = 0; i < niov; i++) {
		rc->wb_mrs[wb][i] = mrs[i];
		mrs[i] = NULL;
	}
	return 0;
}

/* dev->lock held: write batch @wb is posted; wait for it.  On a timeout
 * the QP goes to error so the caller's buffer is free again. */
static int rdma_wait_write(struct rdma_conn *rc, unsigned wb,
			   const struct timespec *dl)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct timespec grace;

	while (rc->wb_busy[wb] && !rc->err)
		if (pthread_cond_timedwait(&rc->cond, &rc->dev->lock, dl) ==
		    ETIMEDOUT)
			break;
	if (!rc->wb_busy[wb])
		return rc->err;
	ibv_modify_qp(rc->qp, &qa, IBV_QP_STATE);
	rdma_set_err(rc, -ETIMEDOUT);
	psd_deadline(&grace, 2000);
	while (rc->wb_busy[wb])
		if (pthread_cond_timedwait(&rc->cond, &rc->dev->lock, &grace) ==
		    ETIMEDOUT)
			break;
	return psd_set_errmsg(-ETIMEDOUT,
			      "rdma: write of key %llu to %s did not complete",
			      (unsigned long long)rc->tx_key, rc->base.peer);
}

static int rdma_wait_tx_timeout(struct rdma_conn *rc)
{
	return psd_set_errmsg(-ETIMEDOUT, "rdma: %s: RDMA writes stuck",
			      rc->base.peer);
}

/* Large message: RTS, wait for CTS, write in place.  1: use the copy
 * path instead (registration failed here). */
static int rdma_send_rndv(struct rdma_conn *rc, const struct psd_hdr *h,
			  const struct iovec *iov, int niov,
			  const struct timespec *dl)
{
	struct rdma_dev *d = rc->dev;
	struct rdma_mr *mrs[RDMA_MAX_IOV] = { 0 };
	struct rdma_wire *w;
	unsigned slot, wb;
	int i, ret = 0;

	for (i = 0; i < niov && !ret; i++)
		if (iov[i].iov_len)
			ret = rdma_mr_get(d, iov[i].iov_base, iov[i].iov_len,
					  &mrs[i]);
	if (ret) {
		rdma_mr_reg_failed(d, (size_t)h->length, ret, rc->base.peer,
				   h->key);
		ret = 1;
		goto out_put;
	}
	pthread_mutex_lock(&d->lock);
	ret = rdma_wait_tx(rc, true, dl);
	if (ret)
		goto out_unlock;
	slot = rc->free_data[--rc->nfree_data];
	rc->tx_credits--;
	rc->tx_cookie++;
	rc->tx_key = h->key;
	rc->cts_ready = false;
	w = (struct rdma_wire *)(void *)rdma_tx_slot(rc, slot);
	memset(w, 0, sizeof(*w));
	w->op = RDMA_OP_RTS;
	w->cookie = htole32(rc->tx_cookie);
	psd_hdr_encode(h, (uint8_t *)w + RDMA_WIRE_SIZE);
	ret = rdma_post_slot(rc, RDMA_WR_SEND, slot,
			     RDMA_WIRE_SIZE + PSD_HDR_SIZE);
	if (ret) {
		rc->free_data[rc->nfree_data++] = slot;
		rdma_set_err(rc, ret);
		goto out_unlock;
	}
	while (!rc->cts_ready && !rc->err)
		if (pthread_cond_timedwait(&rc->cond, &d->lock, dl) ==
		    ETIMEDOUT)
			break;
	if (!rc->cts_ready) {
		ret = rc->err
			      ?: psd_set_errmsg(-ETIMEDOUT,
						"rdma: %s never cleared key "
						"%llu to send",
						rc->base.peer,
						(unsigned long long)h->key);
		goto out_unlock;
	}
	if (rc->cts_status == RDMA_CTS_DISCARD)
		goto out_unlock;
	if (rc->cts_status == RDMA_CTS_COPY) {
		pthread_mutex_unlock(&d->lock);
		atomic_fetch_add(&rdma_st_copy, 1);
		ret = rdma_send_copy(rc, h, iov, niov, false, dl);
		goto out_put;
	}
	ret = rdma_wait_tx(rc, false, dl);
	wb = rc->wb_next;
	while (!ret && rc->wb_busy[wb]) {
		if (rc->err)
			ret = rc->err;
		else if (pthread_cond_timedwait(&rc->cond, &d->lock, dl))
			ret = rdma_wait_tx_timeout(rc);
	}
	if (!ret) {
		rc->tx_credits--;
		ret = rdma_post_writes(rc, iov, niov, mrs, wb);
		if (ret)
			rdma_set_err(rc, ret);
		rc->wb_next = (wb + 1) % RDMA_WB;
	}
	/* A request's buffers stay untouched until its answer, which comes
	 * after the write landed (KV API): do not wait for the write. */
	if (!ret && !psd_msg_is_request(h->type))
		ret = rdma_wait_write(rc, wb, dl);
	if (!ret)
		atomic_fetch_add(&rdma_st_rndv, 1);
out_unlock:
	pthread_mutex_unlock(&d->lock);
out_put:
	for (i = 0; i < niov; i++)
		rdma_mr_put(d, mrs[i]);
	return ret;
}

static int rdma_send(struct psd_conn *c, const struct psd_hdr *h,
		     const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct rdma_conn *rc = to_rdma(c);
	struct timespec dl;
	uint64_t total = 0;
	int i, ret;

	if (niov > RDMA_MAX_IOV || niov < 0)
		return -EINVAL;
	for (i = 0; i < niov; i++)
		total += iov[i].iov_len;
	if (total != h->length)
		return -EINVAL;
	psd_deadline(&dl, timeout_ms);
	if (total + RDMA_WIRE_SIZE + PSD_HDR_SIZE <= rc->dev->k.buf_bytes) {
		atomic_fetch_add(&rdma_st_eager, 1);
		return rdma_send_copy(rc, h, iov, niov, true, &dl);
	}
	ret = rdma_send_rndv(rc, h, iov, niov, &dl);
	if (ret != 1)
		return ret;
	atomic_fetch_add(&rdma_st_copy, 1);
	return rdma_send_copy(rc, h, iov, niov, true, &dl);
}

/* ---- receiving (van thread) -------------------------------------------- */

/* Post a CTS (van thread).  Control slots and the reserved credit are
 * freed by the progress thread, so this wait never needs the van. */
static int rdma_post_cts(struct rdma_conn *rc, uint8_t status, uint64_t addr,
			 uint32_t rkey)
{
	struct rdma_dev *d = rc->dev;
	struct rdma_wire *w;
	struct timespec dl;
	unsigned slot;
	int ret = 0;

	psd_deadline(&dl, 10000);
	pthread_mutex_lock(&d->lock);
	while (!rc->err && (!rc->nfree_ctl || !rc->tx_credits))
		if (pthread_cond_timedwait(&rc->cond, &d->lock, &dl) ==
		    ETIMEDOUT) {
			ret = -ETIMEDOUT;
			break;
		}
	if (rc->err || ret) {
		ret = rc->err ?: ret;
		pthread_mutex_unlock(&d->lock);
		return ret;
	}
	slot = rc->free_ctl[--rc->nfree_ctl];
	rc->tx_credits--;
	w = (struct rdma_wire *)(void *)rdma_tx_slot(rc, slot);
	memset(w, 0, sizeof(*w));
	w->op = RDMA_OP_CTS;
	w->status = status;
	w->cookie = htole32(rc->rx_cookie);
	w->addr = htole64(addr);
	w->rkey = htole32(rkey);
	ret = rdma_post_slot(rc, RDMA_WR_CTL, slot, RDMA_WIRE_SIZE);
	if (ret) {
		rc->free_ctl[rc->nfree_ctl++] = slot;
		rdma_set_err(rc, ret);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int rdma_repost(struct rdma_conn *rc, unsigned slot)
{
	int ret;

	pthread_mutex_lock(&rc->dev->lock);
	ret = rc->err ? 0 : rdma_post_recv(rc, slot);
	if (!ret && !rc->err) {
		rc->rx_unannounced++;
		rdma_maybe_credit(rc);
	}
	pthread_mutex_unlock(&rc->dev->lock);
	return ret;
}

static int rdma_rx_hdr(struct rdma_conn *rc, const uint8_t *p, uint32_t len)
{
	const char *why;
	int ret;

	if (len < RDMA_WIRE_SIZE + PSD_HDR_SIZE) {
		psd_err("rdma: dropping connection from %s: %u-byte message "
			"has no header",
			rc->base.peer, len);
		return -EPROTO;
	}
	ret = psd_hdr_decode(p + RDMA_WIRE_SIZE, psd_van_max_tensor(&rc->base),
			     &rc->rx_hdr, &why);
	if (ret) {
		psd_err("dropping connection from %s: malformed header: %s",
			rc->base.peer, why);
		return ret;
	}
	ret = psd_van_rx_header(&rc->base, &rc->rx_hdr, (void **)&rc->rx_dst);
	if (ret < 0)
		return ret;
	if (ret == PSD_RX_DISCARD)
		rc->rx_dst = NULL;
	rc->rx_got = 0;
	return 0;
}

/* Copy a part into place; deliver when complete. */
static int rdma_rx_part(struct rdma_conn *rc, const uint8_t *data, size_t n)
{
	if (n > rc->rx_hdr.length - rc->rx_got) {
		psd_err("rdma: dropping connection from %s: %zu payload bytes "
			"beyond the announced %llu",
			rc->base.peer, n,
			(unsigned long long)rc->rx_hdr.length);
		return -EPROTO;
	}
	if (rc->rx_dst && n)
		memcpy(rc->rx_dst + rc->rx_got, data, n);
	rc->rx_got += n;
	if (rc->rx_got < rc->rx_hdr.length) {
		rc->rx_state = RDMA_RX_COPY;
		return 0;
	}
	rc->rx_state = RDMA_RX_IDLE;
	psd_van_rx_msg(&rc->base, &rc->rx_hdr, rc->rx_dst);
	return 0;
}

static int rdma_rx_rts(struct rdma_conn *rc, const uint8_t *p, uint32_t len)
{
	const struct rdma_wire *w = (const void *)p;
	struct rdma_dev *d = rc->dev;
	int ret;

	ret = rdma_rx_hdr(rc, p, len);
	if (ret)
		return ret;
	rc->rx_cookie = le32toh(w->cookie);
	if (!rc->rx_dst) {
		ret = rdma_post_cts(rc, RDMA_CTS_DISCARD, 0, 0);
		if (!ret)
			psd_van_rx_msg(&rc->base, &rc->rx_hdr, NULL);
		return ret;
	}
	ret = rdma_mr_get(d, rc->rx_dst, (size_t)rc->rx_hdr.length, &rc->rx_mr);
	if (ret) {
		rdma_mr_reg_failed(d, (size_t)rc->rx_hdr.length, ret,
				   rc->base.peer, rc->rx_hdr.key);
		rc->rx_mr = NULL;
		rc->rx_state = RDMA_RX_COPY;
		return rdma_post_cts(rc, RDMA_CTS_COPY, 0, 0);
	}
	rc->rx_state = RDMA_RX_WRITE;
	return rdma_post_cts(rc, RDMA_CTS_WRITE, (uintptr_t)rc->rx_dst,
			     rc->rx_mr->mr->rkey);
}

static int rdma_rx_imm(struct rdma_conn *rc, const struct rdma_rxq_ent *e)
{
	if (rc->rx_state != RDMA_RX_WRITE || e->imm_data != rc->rx_cookie ||
	    e->len != rc->rx_hdr.length) {
		psd_err("rdma: dropping connection from %s: unexpected RDMA "
			"write (immediate %u, %u bytes)",
			rc->base.peer, e->imm_data, e->len);
		return -EPROTO;
	}
	rdma_mr_put(rc->dev, rc->rx_mr);
	rc->rx_mr = NULL;
	rc->rx_state = RDMA_RX_IDLE;
	psd_van_rx_msg(&rc->base, &rc->rx_hdr, rc->rx_dst);
	return 0;
}

static int rdma_rx_one(struct rdma_conn *rc, const struct rdma_rxq_ent *e)
{
	const uint8_t *p = rdma_rx_slot(rc, e->slot);
	const struct rdma_wire *w = (const void *)p;
	size_t hl = RDMA_WIRE_SIZE + PSD_HDR_SIZE;
	int ret;

	if (e->imm)
		ret = rdma_rx_imm(rc, e);
	else if (w->op == RDMA_OP_EAGER && rc->rx_state == RDMA_RX_IDLE) {
		ret = rdma_rx_hdr(rc, p, e->len);
		if (!ret)
			ret = rdma_rx_part(rc, p + hl, e->len - hl);
	} else if (w->op == RDMA_OP_CONT && rc->rx_state == RDMA_RX_COPY) {
		ret = rdma_rx_part(rc, p + RDMA_WIRE_SIZE,
				   e->len - RDMA_WIRE_SIZE);
	} else if (w->op == RDMA_OP_RTS && rc->rx_state == RDMA_RX_IDLE) {
		ret = rdma_rx_rts(rc, p, e->len);
	} else {
		psd_err("rdma: dropping connection from %s: message op %u in "
			"receive state %d",
			rc->base.peer, w->op, (int)rc->rx_state);
		ret = -EPROTO;
	}
	if (ret)
		return ret;
	return rdma_repost(rc, e->slot);
}

static int rdma_progress(struct psd_conn *c)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_dev *d = rc->dev;
	struct rdma_rxq_ent e;
	unsigned budget;
	uint64_t v;
	int ret;

	(void)!read(c->fd, &v, sizeof(v));
	if (!d)
		return -ECONNRESET;
	for (budget = RDMA_RX_BUDGET;; budget--) {
		pthread_mutex_lock(&d->lock);
		if (!rc->rxq_len) {
			ret = rc->err;
			pthread_mutex_unlock(&d->lock);
			return ret;
		}
		if (!budget) {
			/* Let the van run its tick and other connections
			 * (answers may block in send); come back at once. */
			rdma_wake_van(rc);
			pthread_mutex_unlock(&d->lock);
			return 0;
		}
		e = rc->rxq[rc->rxq_head];
		rc->rxq_head = (rc->rxq_head + 1) % rc->recv_cnt;
		rc->rxq_len--;
		pthread_mutex_unlock(&d->lock);
		ret = rdma_rx_one(rc, &e);
		if (ret)
			return ret;
		if (atomic_load(&c->closed))
			return -ECONNRESET;
	}
}

/* ---- teardown ------------------------------------------------------------ */

static void rdma_close(struct psd_conn *c)
{
	struct rdma_conn *rc = to_rdma(c);

	if (!rc->dev)
		return;
	pthread_mutex_lock(&rc->dev->lock);
	if (rc->id && rc->qp && !rc->err)
		rdma_disconnect(rc->id);
	rdma_set_err(rc, -ECONNRESET);
	pthread_mutex_unlock(&rc->dev->lock);
}

/* Flush the QP and wait (bounded) until no work request is left. */
static void rdma_drain(struct rdma_conn *rc)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct rdma_dev *d = rc->dev;
	struct timespec dl;

	ibv_modify_qp(rc->qp, &qa, IBV_QP_STATE);
	psd_deadline(&dl, 2000);
	pthread_mutex_lock(&d->lock);
	rc->err = rc->err ?: -ECONNRESET;
	while (rc->tx_outstanding || rc->rx_posted)
		if (pthread_cond_timedwait(&rc->cond, &d->lock, &dl) ==
		    ETIMEDOUT)
			break;
	pthread_mutex_unlock(&d->lock);
}

static void rdma_fini(struct psd_conn *c)
{
	struct rdma_conn *rc = to_rdma(c);
	struct rdma_dev *d = rc->dev;
	int i;

	if (rc->qp && rc->idx)
		rdma_drain(rc);
	if (d && rc->in_epoll)
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, rc->cmch->fd, NULL);
	if (d && rc->idx) {
		pthread_mutex_lock(&d->lock);
		d->conns[rc->idx] = NULL;
		pthread_mutex_unlock(&d->lock);
	}
	if (rc->qp) {
		rdma_destroy_qp(rc->id);
		pthread_mutex_lock(&d->lock);
		d->cq_used -= rc->send_cnt + RDMA_MAX_IOV + rc->recv_cnt;
		pthread_mutex_unlock(&d->lock);
	}
	if (d) {
		rdma_mr_put(d, rc->rx_mr);
		for (i = 0; i < RDMA_WB; i++) {
			rc->wb_busy[i] = true;
			rdma_wb_done(rc, (unsigned)i);
		}
	}
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
	rdma_dev_put(d);
	rc->dev = NULL;
	rc->qp = NULL;
	rc->id = NULL;
	rc->cmch = NULL;
}

const struct psd_transport_ops psd_rdma_ops = {
	.name = "rdma",
	.conn_size = sizeof(struct rdma_conn),
	.listen = rdma_listen_on,
	.accept = rdma_accept_conn,
	.listen_close = rdma_listen_close,
	.connect = rdma_connect_to,
	.send = rdma_send,
	.progress = rdma_progress,
	.close = rdma_close,
	.fini = rdma_fini,
};

/* ---- probing (auto transport) ------------------------------------------- */

bool psd_rdma_probe(const struct psd_transport_knobs *knobs, char *why,
		    size_t len)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct rdma_knobs k;
	int n = 0, i;
	bool ok = false;

	rdma_knobs_load(&k, knobs);
	list = ibv_get_device_list(&n);
	if (!list || !n) {
		snprintf(why, len, "no RDMA device");
		if (list)
			ibv_free_device_list(list);
		return false;
	}
	snprintf(why, len, "no RDMA device%s%s with an active port %u",
		 k.device[0] ? " named " : "", k.device, k.port);
	for (i = 0; i < n && !ok; i++) {
		struct ibv_context *ctx;
		union ibv_gid gid;

		if (k.device[0] &&
		    strcmp(k.device, ibv_get_device_name(list[i])))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		if (!ibv_query_port(ctx, (uint8_t)k.port, &pa) &&
		    pa.state == IBV_PORT_ACTIVE &&
		    (k.gid_index < 0 ||
		     !ibv_query_gid(ctx, (uint8_t)k.port, k.gid_index, &gid))) {
			ok = true;
			snprintf(why, len, "%s port %u active",
				 ibv_get_device_name(list[i]), k.port);
		}
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	return ok;
}

void psd_rdma_set_local_id(int id)
{
	atomic_store(&rdma_local_id, id);
}

void psd_rdma_stats(struct psd_rdma_stats *st)
{
	struct rdma_dev *d;

	memset(st, 0, sizeof(*st));
	st->regs = atomic_load(&rdma_st_regs);
	st->evictions = atomic_load(&rdma_st_evicts);
	st->rndv = atomic_load(&rdma_st_rndv);
	st->eager = atomic_load(&rdma_st_eager);
	st->copy = atomic_load(&rdma_st_copy);
	st->reg_failures = atomic_load(&rdma_st_reg_fail);
	pthread_mutex_lock(&rdma_glock);
	d = rdma_the_dev;
	if (d) {
		pthread_mutex_lock(&d->mr_lock);
		st->mr_bytes = d->mr_bytes;
		st->mr_budget = d->k.mr_budget;
		pthread_mutex_unlock(&d->mr_lock);
	}
	pthread_mutex_unlock(&rdma_glock);
}

#else /* !PSCHED_HAVE_RDMA */

bool psd_rdma_probe(const struct psd_transport_knobs *knobs, char *why,
		    size_t len)
{
	(void)knobs;
	snprintf(why, len, "built without libibverbs/librdmacm");
	return false;
}

void psd_rdma_set_local_id(int id)
{
	(void)id;
}

void psd_rdma_stats(struct psd_rdma_stats *st)
{
	memset(st, 0, sizeof(*st));
}

#endif
