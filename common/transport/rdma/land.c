// SPDX-License-Identifier: MIT
/*
 * RDMA transport, the rendezvous cache: landing buffers granted to the peer
 * (receiver), the peer's grants (sender, progress thread), delivery of a
 * cached write.  Design: rdma_internal.h, "Rendezvous cache"; the
 * bookkeeping is land_tab.c.
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_internal.h"

uint8_t *psd_rdmt_wb_hdr(struct rdmt_conn *rc, unsigned wb)
{
	return rc->txbuf + (size_t)rc->send_cnt * rc->dev->k.buf_bytes +
	       (size_t)wb * RDMT_LAND_HDR;
}

/* Van thread: tell the peer about slot @slot (grant or release). */
static int land_post(struct rdmt_conn *rc, unsigned slot, uint8_t status,
		     unsigned gen, const struct rdmt_land *l)
{
	struct rdmt_dev *d = rc->dev;
	struct rdmt_wire *w;
	uint64_t body[3];
	unsigned ctl;
	int ret;

	ret = psd_rdmt_ctl_take(rc, &ctl);
	if (ret)
		return ret;
	w = (struct rdmt_wire *)(void *)psd_rdmt_tx_slot(rc, ctl);
	memset(w, 0, RDMT_GRANT_SIZE);
	w->op = RDMT_OP_GRANT;
	w->status = status;
	w->cookie = htole32(slot | gen << 16);
	if (status == RDMT_GRANT_GIVE) {
		w->addr = htole64((uintptr_t)l->buf);
		w->rkey = htole32(((struct ibv_mr *)l->mr)->rkey);
		body[0] = htole64(l->key);
		body[1] = htole64(l->off);
		body[2] = htole64(l->len);
		memcpy((uint8_t *)w + RDMT_WIRE_SIZE, body, sizeof(body));
	}
	ret = psd_rdmt_post_slot(rc, RDMT_WR_CTL, ctl, RDMT_GRANT_SIZE);
	if (ret) {
		rc->free_ctl[rc->nfree_ctl++] = ctl;
		psd_rdmt_set_err(rc, ret);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/*
 * Van thread: a message of @h's range came by RTS/CTS into host memory;
 * grant the peer a landing buffer for the next one.  Nothing (0) when the
 * cache is off, the range has a slot already, there is no room, or the
 * buffer cannot be registered: the range keeps using RTS/CTS.
 */
int psd_rdmt_land_offer(struct rdmt_conn *rc, const struct psd_hdr *h)
{
	struct rdmt_land_tab *t = &rc->land;
	size_t size = (size_t)rdmt_land_size(h->length);
	struct ibv_mr *mr;
	unsigned gen;
	void *buf;
	int slot, revoke;

	if (psd_rdmt_land_find(t, h->key, h->offset, h->length) >= 0)
		return 0;
	slot = psd_rdmt_land_pick(t, h->length, &revoke);
	if (revoke >= 0)
		return land_post(rc, (unsigned)revoke, RDMT_GRANT_REVOKE,
				 t->v[revoke].gen, NULL);
	if (slot < 0)
		return 0;
	buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	if (!buf)
		return 0;
	mr = ibv_reg_mr(rc->dev->pd, buf, size,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		psd_log(PSD_LOG_DEBUG,
			"rdma: no landing buffer for key %llu from %s: %s",
			(unsigned long long)h->key, rc->base.peer,
			strerror(errno));
		free(buf);
		return 0;
	}
	gen = psd_rdmt_land_grant(t, (unsigned)slot, h->key, h->offset,
				  h->length, buf, mr);
	return land_post(rc, (unsigned)slot, RDMT_GRANT_GIVE, gen, &t->v[slot]);
}

/* Van thread: post the re-grant no SEND took along as a GRANT. */
static int land_flush(struct rdmt_conn *rc)
{
	uint32_t cookie;
	unsigned slot;

	pthread_mutex_lock(&rc->dev->lock);
	cookie = rc->regrant;
	rc->regrant = 0;
	pthread_mutex_unlock(&rc->dev->lock);
	if (!cookie)
		return 0;
	slot = cookie & 0xffffu;
	return land_post(rc, slot, RDMT_GRANT_GIVE, cookie >> 16,
			 &rc->land.v[slot]);
}

/*
 * Van thread: BUSY @slot is free again (its payload is copied out or
 * delivered): grant it again or release it.  @defer: the re-grant waits
 * in rc->regrant for the next SEND to the peer (the answer the upcall
 * about to run is likely to send); land_flush() posts it otherwise.
 */
static int land_again(struct rdmt_conn *rc, unsigned slot, bool defer)
{
	struct rdmt_land_tab *t = &rc->land;
	struct rdmt_land *l = &t->v[slot];
	void *buf = NULL, *mr = NULL;
	unsigned gen;

	if (psd_rdmt_land_done(t, slot, &buf, &mr)) {
		gen = psd_rdmt_land_grant(t, slot, l->key, l->off, l->len, NULL,
					  NULL);
		if (!defer)
			return land_post(rc, slot, RDMT_GRANT_GIVE, gen, l);
		pthread_mutex_lock(&rc->dev->lock);
		rc->regrant = slot | gen << 16;
		rc->regrant_by = pthread_self();
		pthread_mutex_unlock(&rc->dev->lock);
		return 0;
	}
	/* The peer's grant is used up: nothing can write here any more. */
	ibv_dereg_mr(mr);
	free(buf);
	return land_post(rc, slot, RDMT_GRANT_RELEASE, 0, NULL);
}

/* Van thread: a cached write (immediate with RDMT_IMM_LAND) is in. */
int psd_rdmt_rx_land(struct rdmt_conn *rc, const struct rdmt_rxq_ent *e)
{
	struct rdmt_land *l;
	const char *why;
	uint8_t *buf, *payload;
	bool copied;
	uint64_t want;
	uint32_t len;
	void *dst;
	int slot, ret;

	if (rc->rx_state != RDMT_RX_IDLE) {
		psd_err("rdma: dropping connection from %s: cached RDMA write "
			"in the middle of another message",
			rc->base.peer);
		return -EPROTO;
	}
	/* Shorter than a whole write of the slot named: its first part
	 * came on the lane (lane.c). */
	want = psd_rdmt_land_want(&rc->land, e->imm_data);
	len = e->len;
	if (want) {
		ret = psd_rdmt_lane_join(rc, e->imm_data, e->len, want, &len);
		if (ret)
			return ret;
	}
	slot = psd_rdmt_land_claim(&rc->land, e->imm_data, len, &why);
	if (slot < 0) {
		psd_err("rdma: dropping connection from %s: RDMA write with "
			"immediate 0x%08x %s",
			rc->base.peer, e->imm_data, why);
		return -EPROTO;
	}
	l = &rc->land.v[slot];
	buf = l->buf;
	ret = psd_hdr_decode(buf + l->len, psd_van_max_tensor(&rc->base),
			     &rc->rx_hdr, &why);
	if (ret) {
		psd_err("rdma: dropping connection from %s: malformed header "
			"in a cached write: %s",
			rc->base.peer, why);
		return ret;
	}
	if (rc->rx_hdr.key != l->key || rc->rx_hdr.offset != l->off ||
	    rc->rx_hdr.length != l->len) {
		psd_err("rdma: dropping connection from %s: cached write of "
			"key %llu (offset %llu, %llu bytes) into the landing "
			"buffer of key %llu (offset %llu, %llu bytes)",
			rc->base.peer, (unsigned long long)rc->rx_hdr.key,
			(unsigned long long)rc->rx_hdr.offset,
			(unsigned long long)rc->rx_hdr.length,
			(unsigned long long)l->key, (unsigned long long)l->off,
			(unsigned long long)l->len);
		return -EPROTO;
	}
	/* The CPU copies out of the landing buffer: no device memory. */
	rc->base.rx_direct = false;
	ret = psd_van_rx_header(&rc->base, &rc->rx_hdr, &dst);
	if (ret < 0)
		return ret;
	payload = buf;
	if (ret == PSD_RX_DISCARD)
		payload = NULL;
	else if (dst != rc->base.scratch) {
		/* The consumer chose the place (in place, parked, a pull's
		 * output): one copy.  Otherwise hand the landing buffer over.
		 */
		memcpy(dst, payload, (size_t)l->len);
		payload = dst;
	}
	rc->n_landed++;
	/* Copied out (or dropped): the buffer is free before the upcall, so
	 * its answer can carry the re-grant and the peer's next write of
	 * the range need not wait for a GRANT behind it. */
	copied = payload != buf;
	if (copied) {
		ret = land_again(rc, (unsigned)slot, true);
		if (ret)
			return ret;
	}
	psd_van_rx_msg(&rc->base, &rc->rx_hdr, payload);
	if (atomic_load(&rc->base.closed))
		return -ECONNRESET;
	if (copied)
		return land_flush(rc);
	return land_again(rc, (unsigned)slot, false);
}

/* Progress thread, dev->lock held: a SEND carried a re-grant. */
void psd_rdmt_on_regrant(struct rdmt_conn *rc, uint32_t cookie)
{
	if (psd_rdmt_grant_again(&rc->grants, cookie & 0xffffu, cookie >> 16)) {
		psd_err("rdma: dropping connection from %s: re-grant of "
			"landing buffer %u (generation %u), which this side "
			"has not written",
			rc->base.peer, cookie & 0xffffu, cookie >> 16);
		psd_rdmt_set_err(rc, -EPROTO);
		return;
	}
	atomic_fetch_add(&psd_rdmt_st_regrants, 1);
	pthread_cond_broadcast(&rc->cond);
}

/* Progress thread, dev->lock held: a GRANT from the peer. */
void psd_rdmt_on_grant(struct rdmt_conn *rc, const uint8_t *p, uint32_t len)
{
	const struct rdmt_wire *w = (const void *)p;
	uint32_t cookie = le32toh(w->cookie);
	uint64_t body[3];
	int ret;

	if (len < RDMT_GRANT_SIZE || w->status > RDMT_GRANT_REVOKE) {
		psd_err("rdma: dropping connection from %s: bad grant "
			"(%u bytes, status %u)",
			rc->base.peer, len, w->status);
		psd_rdmt_set_err(rc, -EPROTO);
		return;
	}
	if (w->status == RDMT_GRANT_REVOKE) {
		if (psd_rdmt_grant_revoke(&rc->grants, cookie & 0xffffu,
					  cookie >> 16)) {
			rc->nreturn++;
			psd_rdmt_maybe_return(rc);
		}
		return;
	}
	memcpy(body, p + RDMT_WIRE_SIZE, sizeof(body));
	ret = psd_rdmt_grant_take(
		&rc->grants, cookie & 0xffffu, w->status == RDMT_GRANT_RELEASE,
		cookie >> 16, le64toh(body[0]), le64toh(body[1]),
		le64toh(body[2]), le64toh(w->addr), le32toh(w->rkey));
	if (ret) {
		psd_err("rdma: dropping connection from %s: bad grant of "
			"slot %u (%s)",
			rc->base.peer, cookie & 0xffffu, strerror(-ret));
		psd_rdmt_set_err(rc, ret);
		return;
	}
	if (w->status == RDMT_GRANT_GIVE)
		atomic_fetch_add(&psd_rdmt_st_grants, 1);
	pthread_cond_broadcast(&rc->cond);
}

/* dev->lock held (progress thread): post the RETURNs owed, as control
 * slots and credits (never the reserved one) allow; the rest go when a
 * control slot or credits come back. */
void psd_rdmt_maybe_return(struct rdmt_conn *rc)
{
	struct rdmt_grant *g;
	struct rdmt_wire *w;
	unsigned i, ctl;

	for (i = 0; rc->nreturn && i < rc->grants.n; i++) {
		g = &rc->grants.v[i];
		if (g->state != RDMT_GRANT_RETURN)
			continue;
		if (rc->err || !rc->established || !rc->nfree_ctl ||
		    rc->tx_credits <= RDMT_RESERVE)
			return;
		ctl = rc->free_ctl[--rc->nfree_ctl];
		w = (struct rdmt_wire *)(void *)psd_rdmt_tx_slot(rc, ctl);
		memset(w, 0, RDMT_WIRE_SIZE);
		w->op = RDMT_OP_RETURN;
		w->cookie = htole32(i | (unsigned)g->gen << 16);
		if (psd_rdmt_post_slot(rc, RDMT_WR_CTL, ctl, RDMT_WIRE_SIZE)) {
			rc->free_ctl[rc->nfree_ctl++] = ctl;
			psd_rdmt_set_err(rc, -EIO);
			return;
		}
		rc->tx_credits--;
		g->state = RDMT_GRANT_NONE;
		rc->nreturn--;
	}
}

/* Van thread: the peer returned a revoked grant unused. */
int psd_rdmt_rx_return(struct rdmt_conn *rc, const uint8_t *p, uint32_t len)
{
	const struct rdmt_wire *w = (const void *)p;
	uint32_t cookie = le32toh(w->cookie);
	void *buf = NULL, *mr = NULL;

	(void)len;
	if (psd_rdmt_land_returned(&rc->land, cookie & 0xffffu, cookie >> 16,
				   &buf, &mr)) {
		psd_err("rdma: dropping connection from %s: it returned "
			"landing buffer %u (generation %u), which was not "
			"revoked",
			rc->base.peer, cookie & 0xffffu, cookie >> 16);
		return -EPROTO;
	}
	ibv_dereg_mr(mr);
	free(buf);
	return 0;
}

/* fini, after the QP is destroyed: no write can land any more. */
void psd_rdmt_land_fini(struct rdmt_conn *rc)
{
	struct rdmt_land_tab *t = &rc->land;
	unsigned i;

	if (rc->n_cached || rc->n_rndv || rc->n_landed)
		psd_info("rdma: connection with %s closed: sent %llu large "
			 "messages by cached write, %llu by RTS/CTS (%llu of "
			 "them half on the lane); received %llu by cached "
			 "write",
			 rc->base.peer, (unsigned long long)rc->n_cached,
			 (unsigned long long)rc->n_rndv,
			 (unsigned long long)rc->n_lane,
			 (unsigned long long)rc->n_landed);
	for (i = 0; t->v && i < t->n; i++) {
		if (t->v[i].mr)
			ibv_dereg_mr(t->v[i].mr);
		free(t->v[i].buf);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
	free(rc->grants.v);
	memset(&rc->grants, 0, sizeof(rc->grants));
}
