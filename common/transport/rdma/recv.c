// SPDX-License-Identifier: MIT
/*
 * RDMA transport, the receive path: pre-posted receive buffers, the in-order
 * receive queue, CTS answers and the ->progress() upcalls into the van.
 * Design and wire protocol: rdma_internal.h.
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

static uint8_t *rdmt_rx_slot(struct rdmt_conn *rc, unsigned slot)
{
	return rc->rxbuf + (size_t)slot * rc->dev->k.buf_bytes;
}

int psd_rdmt_post_recv(struct rdmt_conn *rc, unsigned slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rdmt_rx_slot(rc, slot),
		.length = rc->dev->k.buf_bytes,
		.lkey = rc->rxmr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = psd_rdmt_wr_id(rc, RDMT_WR_RECV,
							  slot),
				  .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int ret;

	ret = -ibv_post_recv(rc->qp, &wr, &bad);
	if (!ret)
		rc->rx_posted++;
	return ret;
}

/* dev->lock held: a receive completed. */
void psd_rdmt_on_recv(struct rdmt_conn *rc, const struct ibv_wc *wc,
		      unsigned slot)
{
	const struct rdmt_wire *w = (const void *)rdmt_rx_slot(rc, slot);
	struct rdmt_rxq_ent *e;

	rc->rx_posted--;
	/* The peer wrote this after its lane was set up (lane.c). */
	rc->lane_tx = rc->lane_up;
	/* Everything but CREDIT (spare buffers) spent one of our credits. */
	if ((wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ||
	     wc->byte_len < RDMT_WIRE_SIZE || w->op != RDMT_OP_CREDIT) &&
	    rc->peer_credits)
		rc->peer_credits--;
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		e = &rc->rxq[(rc->rxq_head + rc->rxq_len++) % rc->recv_cnt];
		e->slot = slot;
		e->len = wc->byte_len;
		e->imm = true;
		e->imm_data = ntohl(wc->imm_data);
		psd_rdmt_wake_van(rc);
		return;
	}
	if (wc->byte_len < RDMT_WIRE_SIZE) {
		psd_err("rdma: dropping connection from %s: %u-byte message",
			rc->base.peer, wc->byte_len);
		psd_rdmt_set_err(rc, -EPROTO);
		return;
	}
	rc->tx_credits += le16toh(w->credits);
	pthread_cond_broadcast(&rc->cond);
	if (w->regrant)
		psd_rdmt_on_regrant(rc, le32toh(w->regrant));
	if (rc->nreturn)
		psd_rdmt_maybe_return(rc);
	switch (w->op) {
	case RDMT_OP_CTS:
		if (!rc->cts_ready && le32toh(w->cookie) == rc->tx_cookie) {
			rc->cts_ready = true;
			rc->cts_status = w->status;
			rc->cts_addr = le64toh(w->addr);
			rc->cts_rkey = le32toh(w->rkey);
		} else {
			psd_err("rdma: dropping connection from %s: "
				"unexpected clear-to-send %u",
				rc->base.peer, le32toh(w->cookie));
			psd_rdmt_set_err(rc, -EPROTO);
		}
		rc->rx_unannounced++;
		if (psd_rdmt_post_recv(rc, slot))
			psd_rdmt_set_err(rc, -EIO);
		psd_rdmt_maybe_credit(rc);
		return;
	case RDMT_OP_CREDIT:
		if (psd_rdmt_post_recv(rc, slot))
			psd_rdmt_set_err(rc, -EIO);
		return;
	case RDMT_OP_GRANT:
		psd_rdmt_on_grant(rc, (const uint8_t *)w, wc->byte_len);
		rc->rx_unannounced++;
		if (psd_rdmt_post_recv(rc, slot))
			psd_rdmt_set_err(rc, -EIO);
		psd_rdmt_maybe_credit(rc);
		return;
	default:
		e = &rc->rxq[(rc->rxq_head + rc->rxq_len++) % rc->recv_cnt];
		e->slot = slot;
		e->len = wc->byte_len;
		e->imm = false;
		psd_rdmt_wake_van(rc);
		return;
	}
}

/* Van thread: take a control slot and a credit (the reserved one too).
 * On 0 dev->lock is held; the caller posts the slot (psd_rdmt_post_slot,
 * RDMT_WR_CTL) and unlocks.  Control slots and the reserved credit are
 * freed by the progress thread, so this wait never needs the van. */
int psd_rdmt_ctl_take(struct rdmt_conn *rc, unsigned *slot)
{
	struct rdmt_dev *d = rc->dev;
	struct timespec dl;
	int ret = 0;

	psd_deadline(&dl, 10000);
	pthread_mutex_lock(&d->lock);
	while (!rc->err && (!rc->nfree_ctl || !rc->tx_credits))
		if (pthread_cond_timedwait(&rc->cond, &d->lock, &dl) ==
		    ETIMEDOUT) {
			ret = psd_set_errmsg(-ETIMEDOUT,
					     "rdma: %s took no control "
					     "message for 10 s",
					     rc->base.peer);
			break;
		}
	if (rc->err || ret) {
		ret = rc->err ?: ret;
		pthread_mutex_unlock(&d->lock);
		return ret;
	}
	*slot = rc->free_ctl[--rc->nfree_ctl];
	rc->tx_credits--;
	return 0;
}

/* Post a CTS (van thread). */
static int rdmt_post_cts(struct rdmt_conn *rc, uint8_t status, uint64_t addr,
			 uint32_t rkey)
{
	struct rdmt_dev *d = rc->dev;
	struct rdmt_wire *w;
	unsigned slot;
	int ret;

	ret = psd_rdmt_ctl_take(rc, &slot);
	if (ret)
		return ret;
	w = (struct rdmt_wire *)(void *)psd_rdmt_tx_slot(rc, slot);
	memset(w, 0, sizeof(*w));
	w->op = RDMT_OP_CTS;
	w->status = status;
	w->cookie = htole32(rc->rx_cookie);
	w->addr = htole64(addr);
	w->rkey = htole32(rkey);
	ret = psd_rdmt_post_slot(rc, RDMT_WR_CTL, slot, RDMT_WIRE_SIZE);
	if (ret) {
		rc->free_ctl[rc->nfree_ctl++] = slot;
		psd_rdmt_set_err(rc, ret);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int rdmt_repost(struct rdmt_conn *rc, unsigned slot)
{
	int ret;

	pthread_mutex_lock(&rc->dev->lock);
	ret = rc->err ? 0 : psd_rdmt_post_recv(rc, slot);
	if (!ret && !rc->err) {
		rc->rx_unannounced++;
		psd_rdmt_maybe_credit(rc);
	}
	pthread_mutex_unlock(&rc->dev->lock);
	return ret;
}

static int rdmt_rx_hdr(struct rdmt_conn *rc, const uint8_t *p, uint32_t len,
		       bool rts)
{
	const char *why;
	int ret;

	if (len < RDMT_WIRE_SIZE + PSD_HDR_SIZE) {
		psd_err("rdma: dropping connection from %s: %u-byte message "
			"has no header",
			rc->base.peer, len);
		return -EPROTO;
	}
	ret = psd_hdr_decode(p + RDMT_WIRE_SIZE, psd_van_max_tensor(&rc->base),
			     &rc->rx_hdr, &why);
	if (ret) {
		psd_err("dropping connection from %s: malformed header: %s",
			rc->base.peer, why);
		return ret;
	}
	rc->base.rx_direct = rts;
	ret = psd_van_rx_header(&rc->base, &rc->rx_hdr, (void **)&rc->rx_dst);
	if (ret < 0)
		return ret;
	if (ret == PSD_RX_DISCARD)
		rc->rx_dst = NULL;
	rc->rx_got = 0;
	return 0;
}

/* Copy a part into place; deliver when complete. */
static int rdmt_rx_part(struct rdmt_conn *rc, const uint8_t *data, size_t n)
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
		rc->rx_state = RDMT_RX_COPY;
		return 0;
	}
	rc->rx_state = RDMT_RX_IDLE;
	psd_van_rx_msg(&rc->base, &rc->rx_hdr, rc->rx_dst);
	return 0;
}

static int rdmt_rx_rts(struct rdmt_conn *rc, const uint8_t *p, uint32_t len)
{
	const struct rdmt_wire *w = (const void *)p;
	struct rdmt_dev *d = rc->dev;
	int ret;

	ret = rdmt_rx_hdr(rc, p, len, true);
	if (ret)
		return ret;
	rc->rx_cookie = le32toh(w->cookie);
	if (!rc->rx_dst) {
		ret = rdmt_post_cts(rc, RDMT_CTS_DISCARD, 0, 0);
		if (!ret)
			psd_van_rx_msg(&rc->base, &rc->rx_hdr, NULL);
		return ret;
	}
	ret = psd_rdmt_mr_get(d, rc->rx_dst, (size_t)rc->rx_hdr.length,
			      &rc->rx_mr);
	if (ret) {
		psd_rdmt_mr_reg_failed(d, (size_t)rc->rx_hdr.length, ret,
				       rc->base.peer, rc->rx_hdr.key);
		rc->rx_mr = NULL;
		/* Device memory takes no CPU copies: into the scratch
		 * buffer, whose address rx_msg passes on. */
		if (rc->base.rx_dev &&
		    !(rc->rx_dst = psd_conn_scratch(&rc->base,
						    (size_t)rc->rx_hdr.length)))
			return -ENOMEM;
		rc->rx_state = RDMT_RX_COPY;
		return rdmt_post_cts(rc, RDMT_CTS_COPY, 0, 0);
	}
	rc->rx_state = RDMT_RX_WRITE;
	/* Host memory: worth a cached grant once it is in (land.c). */
	rc->rx_grant = !rc->base.rx_dev;
	return rdmt_post_cts(rc, RDMT_CTS_WRITE, (uintptr_t)rc->rx_dst,
			     rc->rx_mr->mr->rkey);
}

static int rdmt_rx_imm(struct rdmt_conn *rc, const struct rdmt_rxq_ent *e)
{
	uint32_t len = e->len;
	int ret;

	if (rc->rx_state == RDMT_RX_WRITE && e->imm_data == rc->rx_cookie) {
		ret = psd_rdmt_lane_join(rc, e->imm_data, e->len,
					 rc->rx_hdr.length, &len);
		if (ret)
			return ret;
	}
	if (rc->rx_state != RDMT_RX_WRITE || e->imm_data != rc->rx_cookie ||
	    len != rc->rx_hdr.length) {
		psd_err("rdma: dropping connection from %s: unexpected RDMA "
			"write (immediate %u, %u bytes)",
			rc->base.peer, e->imm_data, len);
		return -EPROTO;
	}
	psd_rdmt_mr_put(rc->dev, rc->rx_mr);
	rc->rx_mr = NULL;
	rc->rx_state = RDMT_RX_IDLE;
	psd_van_rx_msg(&rc->base, &rc->rx_hdr, rc->rx_dst);
	if (!rc->rx_grant)
		return 0;
	rc->rx_grant = false;
	return psd_rdmt_land_offer(rc, &rc->rx_hdr);
}

static int rdmt_rx_one(struct rdmt_conn *rc, const struct rdmt_rxq_ent *e)
{
	const uint8_t *p = rdmt_rx_slot(rc, e->slot);
	const struct rdmt_wire *w = (const void *)p;
	size_t hl = RDMT_WIRE_SIZE + PSD_HDR_SIZE;
	int ret;

	/* RDMT_LANE_LATER: no side effect yet, the entry stays first. */
	if (e->imm && (e->imm_data & RDMT_IMM_LAND))
		ret = psd_rdmt_rx_land(rc, e);
	else if (e->imm)
		ret = rdmt_rx_imm(rc, e);
	else if (w->op == RDMT_OP_EAGER && rc->rx_state == RDMT_RX_IDLE) {
		ret = rdmt_rx_hdr(rc, p, e->len, false);
		if (!ret)
			ret = rdmt_rx_part(rc, p + hl, e->len - hl);
	} else if (w->op == RDMT_OP_CONT && rc->rx_state == RDMT_RX_COPY) {
		ret = rdmt_rx_part(rc, p + RDMT_WIRE_SIZE,
				   e->len - RDMT_WIRE_SIZE);
	} else if (w->op == RDMT_OP_RETURN) {
		/* From the peer's progress thread: between any two parts. */
		ret = psd_rdmt_rx_return(rc, p, e->len);
	} else if (w->op == RDMT_OP_RTS && rc->rx_state == RDMT_RX_IDLE) {
		ret = rdmt_rx_rts(rc, p, e->len);
	} else {
		psd_err("rdma: dropping connection from %s: message op %u in "
			"receive state %d",
			rc->base.peer, w->op, (int)rc->rx_state);
		ret = -EPROTO;
	}
	return ret;
}

int psd_rdmt_progress(struct psd_conn *c)
{
	struct rdmt_conn *rc = to_rdmt(c);
	struct rdmt_dev *d = rc->dev;
	struct rdmt_rxq_ent e;
	unsigned budget;
	uint64_t v;
	int ret;

	(void)!read(c->fd, &v, sizeof(v));
	if (!d)
		return -ECONNRESET;
	for (budget = RDMT_RX_BUDGET;; budget--) {
		pthread_mutex_lock(&d->lock);
		if (!rc->rxq_len) {
			ret = rc->err;
			pthread_mutex_unlock(&d->lock);
			return ret;
		}
		if (!budget) {
			/* Let the van run its tick and other connections
			 * (answers may block in send); come back at once. */
			psd_rdmt_wake_van(rc);
			pthread_mutex_unlock(&d->lock);
			return 0;
		}
		e = rc->rxq[rc->rxq_head];
		pthread_mutex_unlock(&d->lock);
		/* Only this thread takes entries: it stays first meanwhile. */
		ret = rdmt_rx_one(rc, &e);
		if (ret == RDMT_LANE_LATER)
			return 0; /* its lane part wakes us (lane.c) */
		pthread_mutex_lock(&d->lock);
		rc->rxq_head = (rc->rxq_head + 1) % rc->recv_cnt;
		rc->rxq_len--;
		pthread_mutex_unlock(&d->lock);
		if (!ret)
			ret = rdmt_repost(rc, e.slot);
		if (ret)
			return ret;
		if (atomic_load(&c->closed))
			return -ECONNRESET;
	}
}
