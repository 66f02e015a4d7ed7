// SPDX-License-Identifier: MIT
/*
 * RDMA transport, the send path: eager SENDs, CONT copies, RTS/CTS rendezvous
 * with RDMA writes, credits. Design and wire protocol: rdma_internal.h.
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

uint8_t *psd_rdmt_tx_slot(struct rdmt_conn *rc, unsigned slot)
{
	return rc->txbuf + (size_t)slot * rc->dev->k.buf_bytes;
}

/*
 * dev->lock held: post a SEND of @len bytes from slot @slot (kind @kind)
 * with the credits we owe and a pending re-grant piggybacked.
 * @drop_lock: unlock around ibv_post_send() (a sender thread, holding
 * the connection and its send_lock; see rdmt_post_writes() for why).
 * Such a post takes the re-grant only on the thread that set it (the
 * van thread): a GRANT or REVOKE that thread posts later then cannot
 * overtake it on the wire.
 */
static int rdmt_post(struct rdmt_conn *rc, unsigned kind, unsigned slot,
		     size_t len, bool drop_lock)
{
	uint8_t *buf = psd_rdmt_tx_slot(rc, slot);
	struct rdmt_wire *w = (struct rdmt_wire *)(void *)buf;
	struct ibv_sge sge = { .addr = (uintptr_t)buf,
			       .length = (uint32_t)len,
			       .lkey = rc->txmr->lkey };
	struct ibv_send_wr wr = { .wr_id = psd_rdmt_wr_id(rc, kind, slot),
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	unsigned give =
		rc->rx_unannounced > 0xffff ? 0xffff : rc->rx_unannounced;
	uint32_t regrant = rc->regrant;
	int ret;

	if (drop_lock && !pthread_equal(rc->regrant_by, pthread_self()))
		regrant = 0;
	w->credits = htole16((uint16_t)give);
	w->regrant = htole32(regrant);
	if (len <= rc->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	/* Counted before the post: its completion may come first. */
	rc->rx_unannounced -= give;
	rc->peer_credits += give;
	rc->tx_outstanding++;
	if (regrant)
		rc->regrant = 0;
	if (drop_lock)
		pthread_mutex_unlock(&rc->dev->lock);
	ret = -ibv_post_send(rc->qp, &wr, &bad);
	if (drop_lock)
		pthread_mutex_lock(&rc->dev->lock);
	if (!ret)
		return 0;
	rc->rx_unannounced += give;
	rc->peer_credits -= give;
	rc->tx_outstanding--;
	if (regrant && !rc->regrant)
		rc->regrant = regrant;
	pthread_cond_broadcast(&rc->cond);
	return ret;
}

int psd_rdmt_post_slot(struct rdmt_conn *rc, unsigned kind, unsigned slot,
		       size_t len)
{
	return rdmt_post(rc, kind, slot, len, false);
}

/* dev->lock held: send a CREDIT message if enough credits are owed. */
void psd_rdmt_maybe_credit(struct rdmt_conn *rc)
{
	struct rdmt_wire *w;
	unsigned slot;

	if (rc->err || rc->credit_inflight || !rc->established ||
	    !rc->rx_unannounced || !rc->nfree_ctl)
		return;
	/* Owed enough, or the peer may be stuck on its reserve. */
	if (rc->rx_unannounced < rc->credit_thresh &&
	    rc->peer_credits > RDMT_RESERVE)
		return;
	slot = rc->free_ctl[--rc->nfree_ctl];
	w = (struct rdmt_wire *)(void *)psd_rdmt_tx_slot(rc, slot);
	memset(w, 0, sizeof(*w));
	w->op = RDMT_OP_CREDIT;
	if (psd_rdmt_post_slot(rc, RDMT_WR_CTL, slot, RDMT_WIRE_SIZE)) {
		rc->free_ctl[rc->nfree_ctl++] = slot;
		return;
	}
	rc->credit_inflight = true;
}

/* dev->lock held: write batch @wb is over; drop its MR references. */
void psd_rdmt_wb_done(struct rdmt_conn *rc, unsigned wb)
{
	int i;

	if (wb >= RDMT_WB || !rc->wb_busy[wb])
		return;
	for (i = 0; i < RDMT_MAX_IOV; i++) {
		psd_rdmt_mr_put(rc->dev, rc->wb_mrs[wb][i]);
		rc->wb_mrs[wb][i] = NULL;
	}
	rc->wb_busy[wb] = false;
	pthread_cond_broadcast(&rc->cond);
}

/*
 * dev->lock held: wait until the connection is up, a data slot is free
 * and a credit may be spent (@need_slot false: credit only).
 */
static int rdmt_wait_tx(struct rdmt_conn *rc, bool need_slot,
			const struct timespec *dl)
{
	while (!rc->err && !atomic_load(&rc->base.closed) &&
	       (!rc->established || rc->tx_credits <= RDMT_RESERVE ||
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
				rc->tx_credits <= RDMT_RESERVE
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
static void rdmt_iov_copy(uint8_t *dst, const struct iovec *iov, int niov,
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
static int rdmt_send_copy(struct rdmt_conn *rc, const struct psd_hdr *h,
			  const struct iovec *iov, int niov, bool with_hdr,
			  const struct timespec *dl)
{
	struct rdmt_dev *d = rc->dev;
	uint64_t off = 0;
	struct rdmt_wire *w;
	size_t room, n, hl;
	uint8_t *buf;
	unsigned slot;
	int ret;

	do {
		hl = RDMT_WIRE_SIZE + (with_hdr ? PSD_HDR_SIZE : 0);
		room = rc->peer_buf - hl;
		n = h->length - off < room ? (size_t)(h->length - off) : room;
		pthread_mutex_lock(&d->lock);
		ret = rdmt_wait_tx(rc, true, dl);
		if (ret) {
			pthread_mutex_unlock(&d->lock);
			return ret;
		}
		slot = rc->free_data[--rc->nfree_data];
		rc->tx_credits--;
		pthread_mutex_unlock(&d->lock);
		buf = psd_rdmt_tx_slot(rc, slot);
		w = (struct rdmt_wire *)(void *)buf;
		memset(w, 0, sizeof(*w));
		w->op = with_hdr ? RDMT_OP_EAGER : RDMT_OP_CONT;
		if (with_hdr)
			psd_hdr_encode(h, buf + RDMT_WIRE_SIZE);
		rdmt_iov_copy(buf + hl, iov, niov, off, n);
		pthread_mutex_lock(&d->lock);
		ret = rc->err
			      ?: rdmt_post(rc, RDMT_WR_SEND, slot, hl + n,
					   true);
		if (ret) {
			rc->free_data[rc->nfree_data++] = slot;
			psd_rdmt_set_err(rc, ret);
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
 * dev->lock held: post the payload write to @raddr/@rkey as batch @wb:
 * one write with immediate @imm gathering every piece of @iov (and, for
 * @hdr, a cached write (land.c), the header right after the payload).
 * One write, not one per piece: the receiver's completion reports the
 * bytes of the write that carries the immediate, and it checks them
 * against the whole message (a key list's keys, lengths and values are
 * three pieces).  On 0 the batch owns the references in @mrs (cleared
 * here) until the write completes.  Drops dev->lock around the post:
 * everything the write's completion and the peer's answer to it touch
 * (batch, credits, the grant's state) must be set before the call.
 */
static int rdmt_post_writes(struct rdmt_conn *rc, const struct iovec *iov,
			    int niov, struct rdmt_mr **mrs, unsigned wb,
			    uint64_t raddr, uint32_t rkey, uint32_t imm,
			    const struct psd_hdr *hdr)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge[RDMT_MAX_IOV + 1], rest[RDMT_MAX_IOV + 1];
	uint64_t payload = 0, rest_raddr;
	int i, ns = 0, nrest, ret;
	bool split;

	memset(&wr, 0, sizeof(wr));
	for (i = 0; i < niov; i++) {
		if (!iov[i].iov_len)
			continue;
		payload += iov[i].iov_len;
		sge[ns].addr = (uintptr_t)iov[i].iov_base;
		sge[ns].length = (uint32_t)iov[i].iov_len;
		sge[ns].lkey = mrs[i]->mr->lkey;
		ns++;
	}
	if (hdr) {
		uint8_t *hb = psd_rdmt_wb_hdr(rc, wb);

		psd_hdr_encode(hdr, hb);
		sge[ns].addr = (uintptr_t)hb;
		sge[ns].length = PSD_HDR_SIZE;
		sge[ns].lkey = rc->txmr->lkey;
		ns++;
	}
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = sge;
	wr.num_sge = ns;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(imm);
	wr.wr_id = psd_rdmt_wr_id(rc, RDMT_WR_WRITE, wb | RDMT_WB_LAST);
	/* The batch is the write's before it is posted: its completion
	 * may be reaped before ibv_post_send() returns. */
	rc->tx_outstanding++;
	rc->wb_busy[wb] = true;
	rc->wb_parts[wb] = 1;
	for (i = 0; i < niov; i++) {
		rc->wb_mrs[wb][i] = mrs[i];
		mrs[i] = NULL;
	}
	/* Half of a large one goes on the lane, by the lane thread. */
	split = psd_rdmt_lane_split(rc, sge, ns, payload, wb, raddr, rkey, imm,
				    rest, &nrest, &rest_raddr);
	if (split) {
		wr.sg_list = rest;
		wr.num_sge = nrest;
		wr.wr.rdma.remote_addr = rest_raddr;
	}
	/* Soft-RoCE (rxe) moves the whole write inside ibv_post_send():
	 * with dev->lock held, the progress thread could take no
	 * completion (the answers, credits and grants this side waits
	 * for) meanwhile.  The caller holds the connection (no fini) and
	 * its send_lock (no other sender); the QP takes concurrent posts. */
	pthread_mutex_unlock(&rc->dev->lock);
	ret = -ibv_post_send(rc->qp, &wr, &bad);
	pthread_mutex_lock(&rc->dev->lock);
	if (!ret)
		return 0;
	rc->tx_outstanding--;
	if (split) {
		/* The lane part owns the batch now: it goes when that
		 * completes or is dropped (the caller fails the conn). */
		psd_rdmt_wb_part(rc, wb);
		return ret;
	}
	rc->wb_busy[wb] = false;
	for (i = 0; i < niov; i++) {
		mrs[i] = rc->wb_mrs[wb][i];
		rc->wb_mrs[wb][i] = NULL;
	}
	pthread_cond_broadcast(&rc->cond);
	return ret;
}

/* dev->lock held: write batch @wb is posted; wait for it.  On a timeout
 * the QP goes to error so the caller's buffer is free again. */
static int rdmt_wait_write(struct rdmt_conn *rc, unsigned wb,
			   const struct timespec *dl)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct timespec grace;

	int dead;

	while (rc->wb_busy[wb] && !rc->err)
		if (pthread_cond_timedwait(&rc->cond, &rc->dev->lock, dl) ==
		    ETIMEDOUT)
			break;
	if (!rc->wb_busy[wb])
		return rc->err;
	/* Failed meanwhile (a split write's other part may be pending), or
	 * timed out: both QPs go to error (set_err takes the lane), so the
	 * writes flush and the caller's buffer is free again. */
	dead = rc->err;
	ibv_modify_qp(rc->qp, &qa, IBV_QP_STATE);
	psd_rdmt_set_err(rc, -ETIMEDOUT);
	psd_deadline(&grace, 2000);
	while (rc->wb_busy[wb])
		if (pthread_cond_timedwait(&rc->cond, &rc->dev->lock, &grace) ==
		    ETIMEDOUT)
			break;
	if (dead)
		return dead;
	return psd_set_errmsg(-ETIMEDOUT,
			      "rdma: write of key %llu to %s did not complete",
			      (unsigned long long)rc->tx_key, rc->base.peer);
}

static int rdmt_wait_tx_timeout(struct rdmt_conn *rc)
{
	return psd_set_errmsg(-ETIMEDOUT, "rdma: %s: RDMA writes stuck",
			      rc->base.peer);
}

/*
 * Large message with a grant from the peer for its (key, offset, length):
 * RDMA-write payload and header into the granted landing buffer, no
 * RTS/CTS (rendezvous cache, rdma_internal.h).  1: no usable grant, use
 * RTS/CTS.  A USED grant comes back (or is released) once the peer's
 * van thread delivered the previous message of the range: RTS/CTS would
 * wait for that too (the RTS queues behind it), so waiting for the grant
 * adds no dependency on the peer that RTS/CTS does not have.
 */
static int rdmt_send_cached(struct rdmt_conn *rc, const struct psd_hdr *h,
			    const struct iovec *iov, int niov,
			    const struct timespec *dl)
{
	struct rdmt_dev *d = rc->dev;
	struct rdmt_mr *mrs[RDMT_MAX_IOV] = { 0 };
	struct rdmt_grant *g;
	unsigned wb = 0;
	int i, gi, ret = 0;

	if (h->length > RDMT_LAND_MAX_MSG)
		return 1;
	pthread_mutex_lock(&d->lock);
	gi = psd_rdmt_grant_find(&rc->grants, h->key, h->offset, h->length);
	pthread_mutex_unlock(&d->lock);
	if (gi < 0)
		return 1;
	for (i = 0; i < niov && !ret; i++)
		if (iov[i].iov_len)
			ret = psd_rdmt_mr_get(d, iov[i].iov_base,
					      iov[i].iov_len, &mrs[i]);
	if (ret) {
		ret = 1; /* RTS/CTS registers again and says why */
		goto out_put;
	}
	pthread_mutex_lock(&d->lock);
	for (;;) {
		g = &rc->grants.v[gi];
		if (rc->err || atomic_load(&rc->base.closed)) {
			ret = rc->err ?: -ECONNRESET;
			break;
		}
		/* Released, or the slot now holds another range. */
		if (g->state == RDMT_GRANT_NONE || g->key != h->key ||
		    g->off != h->offset || g->len != h->length) {
			ret = 1;
			break;
		}
		if (g->state == RDMT_GRANT_USED) {
			if (pthread_cond_timedwait(&rc->cond, &d->lock, dl) ==
			    ETIMEDOUT) {
				ret = psd_set_errmsg(
					-ETIMEDOUT,
					"rdma: %s never took back its "
					"landing buffer of key %llu",
					rc->base.peer,
					(unsigned long long)h->key);
				break;
			}
			continue;
		}
		if (!rc->established || rc->tx_credits <= RDMT_RESERVE) {
			ret = rdmt_wait_tx(rc, false, dl);
			if (ret)
				break;
			continue;
		}
		wb = rc->wb_next;
		if (!rc->wb_busy[wb])
			break;
		if (pthread_cond_timedwait(&rc->cond, &d->lock, dl)) {
			ret = rdmt_wait_tx_timeout(rc);
			break;
		}
	}
	if (ret)
		goto out_unlock;
	rc->tx_credits--;
	rc->tx_key = h->key;
	/* Before the post: the re-grant may come before it returns. */
	g->state = RDMT_GRANT_USED;
	rc->wb_next = (wb + 1) % RDMT_WB;
	ret = rdmt_post_writes(rc, iov, niov, mrs, wb, g->addr, g->rkey,
			       rdmt_imm_land((unsigned)gi, g->gen), h);
	if (ret) {
		psd_rdmt_set_err(rc, ret);
		goto out_unlock;
	}
	/* As RTS/CTS: a request's buffers wait for its answer. */
	if (!psd_msg_is_request(h->type))
		ret = rdmt_wait_write(rc, wb, dl);
	if (!ret) {
		atomic_fetch_add(&psd_rdmt_st_rndv, 1);
		atomic_fetch_add(&psd_rdmt_st_cached, 1);
		rc->n_cached++;
	}
out_unlock:
	pthread_mutex_unlock(&d->lock);
out_put:
	for (i = 0; i < niov; i++)
		psd_rdmt_mr_put(d, mrs[i]);
	return ret;
}

/* Large message: RTS, wait for CTS, write in place.  1: use the copy
 * path instead (registration failed here).  @dev: the payload is GPU
 * memory (GPUDirect), which the CPU must not read: no copy path, and a
 * receiver that asks for copies gets the connection dropped. */
static int rdmt_send_rndv(struct rdmt_conn *rc, const struct psd_hdr *h,
			  const struct iovec *iov, int niov, bool dev,
			  const struct timespec *dl)
{
	struct rdmt_dev *d = rc->dev;
	struct rdmt_mr *mrs[RDMT_MAX_IOV] = { 0 };
	struct rdmt_wire *w;
	unsigned slot, wb;
	int i, ret = 0;

	for (i = 0; i < niov && !ret; i++)
		if (iov[i].iov_len)
			ret = psd_rdmt_mr_get(d, iov[i].iov_base,
					      iov[i].iov_len, &mrs[i]);
	if (ret && dev) {
		atomic_fetch_add(&psd_rdmt_st_reg_fail, 1);
		ret = psd_set_errmsg(-EOPNOTSUPP,
				     "rdma: cannot register %llu bytes of "
				     "device memory for key %llu with %s: %s",
				     (unsigned long long)h->length,
				     (unsigned long long)h->key, rc->base.peer,
				     strerror(-ret));
		goto out_put;
	}
	if (ret) {
		psd_rdmt_mr_reg_failed(d, (size_t)h->length, ret, rc->base.peer,
				       h->key);
		ret = 1;
		goto out_put;
	}
	pthread_mutex_lock(&d->lock);
	ret = rdmt_wait_tx(rc, true, dl);
	if (ret)
		goto out_unlock;
	slot = rc->free_data[--rc->nfree_data];
	rc->tx_credits--;
	/* Bit 31 of an immediate marks a cached write (land_tab.h). */
	rc->tx_cookie = (rc->tx_cookie + 1) & ~RDMT_IMM_LAND;
	rc->tx_key = h->key;
	rc->cts_ready = false;
	w = (struct rdmt_wire *)(void *)psd_rdmt_tx_slot(rc, slot);
	memset(w, 0, sizeof(*w));
	w->op = RDMT_OP_RTS;
	w->cookie = htole32(rc->tx_cookie);
	psd_hdr_encode(h, (uint8_t *)w + RDMT_WIRE_SIZE);
	ret = rdmt_post(rc, RDMT_WR_SEND, slot, RDMT_WIRE_SIZE + PSD_HDR_SIZE,
			true);
	if (ret) {
		rc->free_data[rc->nfree_data++] = slot;
		psd_rdmt_set_err(rc, ret);
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
	if (rc->cts_status == RDMT_CTS_DISCARD)
		goto out_unlock;
	if (rc->cts_status == RDMT_CTS_COPY && dev) {
		/* The receiver waits for copies this side cannot make. */
		psd_rdmt_set_err(rc, -EIO);
		ret = psd_set_errmsg(-EIO,
				     "rdma: %s could not register its buffer "
				     "for key %llu and asked for a copy, which "
				     "a GPUDirect payload cannot have; "
				     "connection dropped (raise its locked-"
				     "memory limit, or PS_GPU_DIRECT=0)",
				     rc->base.peer, (unsigned long long)h->key);
		goto out_unlock;
	}
	if (rc->cts_status == RDMT_CTS_COPY) {
		pthread_mutex_unlock(&d->lock);
		atomic_fetch_add(&psd_rdmt_st_copy, 1);
		ret = rdmt_send_copy(rc, h, iov, niov, false, dl);
		goto out_put;
	}
	/* A credit and a free write batch at once: while this waits for
	 * the batch, the van thread's CTS or GRANT may spend credits. */
	for (;;) {
		ret = rdmt_wait_tx(rc, false, dl);
		if (ret)
			break;
		wb = rc->wb_next;
		if (!rc->wb_busy[wb])
			break;
		if (pthread_cond_timedwait(&rc->cond, &d->lock, dl)) {
			ret = rdmt_wait_tx_timeout(rc);
			break;
		}
	}
	if (!ret) {
		rc->tx_credits--;
		rc->wb_next = (wb + 1) % RDMT_WB;
		ret = rdmt_post_writes(rc, iov, niov, mrs, wb, rc->cts_addr,
				       rc->cts_rkey, rc->tx_cookie, NULL);
		if (ret)
			psd_rdmt_set_err(rc, ret);
	}
	/* A request's buffers stay untouched until its answer, which comes
	 * after the write landed (KV API): do not wait for the write. */
	if (!ret && !psd_msg_is_request(h->type))
		ret = rdmt_wait_write(rc, wb, dl);
	if (!ret) {
		atomic_fetch_add(&psd_rdmt_st_rndv, 1);
		rc->n_rndv++;
	}
out_unlock:
	pthread_mutex_unlock(&d->lock);
out_put:
	for (i = 0; i < niov; i++)
		psd_rdmt_mr_put(d, mrs[i]);
	return ret;
}

int psd_rdmt_send(struct psd_conn *c, const struct psd_hdr *h,
		  const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct rdmt_conn *rc = to_rdmt(c);
	struct timespec dl;
	uint64_t total = 0;
	int i, ret;

	if (niov > RDMT_MAX_IOV || niov < 0)
		return -EINVAL;
	for (i = 0; i < niov; i++)
		total += iov[i].iov_len;
	if (total != h->length)
		return -EINVAL;
	psd_deadline(&dl, timeout_ms);
	if (total + RDMT_WIRE_SIZE + PSD_HDR_SIZE <= rc->dev->k.buf_bytes) {
		atomic_fetch_add(&psd_rdmt_st_eager, 1);
		return rdmt_send_copy(rc, h, iov, niov, true, &dl);
	}
	ret = rdmt_send_cached(rc, h, iov, niov, &dl);
	if (ret != 1)
		return ret;
	ret = rdmt_send_rndv(rc, h, iov, niov, false, &dl);
	if (ret != 1)
		return ret;
	atomic_fetch_add(&psd_rdmt_st_copy, 1);
	return rdmt_send_copy(rc, h, iov, niov, true, &dl);
}

/* GPUDirect: always RTS/CTS and RDMA writes from the device memory's
 * registration, whatever the size (an eager SEND would copy it). */
int psd_rdmt_send_dev(struct psd_conn *c, const struct psd_hdr *h,
		      const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct rdmt_conn *rc = to_rdmt(c);
	struct timespec dl;
	uint64_t total = 0;
	int i;

	if (niov > RDMT_MAX_IOV || niov < 1)
		return -EINVAL;
	for (i = 0; i < niov; i++)
		total += iov[i].iov_len;
	if (total != h->length || !total)
		return -EINVAL;
	psd_deadline(&dl, timeout_ms);
	/* A grant is fine: the NIC reads the device memory either way. */
	i = rdmt_send_cached(rc, h, iov, niov, &dl);
	if (i != 1)
		return i;
	return rdmt_send_rndv(rc, h, iov, niov, true, &dl);
}
