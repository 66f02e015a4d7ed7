// SPDX-License-Identifier: MIT
/*
 * RDMA transport, the device: knobs, protection domain, the shared CQ and
 * completion channel, and the progress thread that reaps completions and CM
 * events; probing and counters. Design and wire protocol: rdma_internal.h.
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

static pthread_mutex_t rdmt_glock = PTHREAD_MUTEX_INITIALIZER;
static struct rdmt_dev *rdmt_the_dev; /* guarded by rdmt_glock */

atomic_uint_fast64_t psd_rdmt_st_regs, psd_rdmt_st_evicts, psd_rdmt_st_rndv,
	psd_rdmt_st_eager, psd_rdmt_st_copy, psd_rdmt_st_reg_fail,
	psd_rdmt_st_cached, psd_rdmt_st_regrants, psd_rdmt_st_grants,
	psd_rdmt_st_lane;

/* Copy the device's knobs from @src (the van's; NULL: the defaults).
 * options.c validated every range. */
static void rdmt_knobs_load(struct rdmt_knobs *k,
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
	k->lane_set = src->rdma_lane_min >= 0;
	k->lane_min = k->lane_set ? (uint64_t)src->rdma_lane_min : 262144;
}

uint64_t psd_rdmt_wr_id(struct rdmt_conn *rc, unsigned kind, unsigned slot)
{
	return ((uint64_t)rc->gen << 48) | ((uint64_t)rc->idx << 32) |
	       ((uint64_t)kind << 24) | slot;
}

void psd_rdmt_wake_van(struct rdmt_conn *rc)
{
	uint64_t one = 1;

	if (rc->base.fd >= 0)
		(void)!write(rc->base.fd, &one, sizeof(one));
}

/* Reserve @n entries of the shared CQ for a QP's work requests; false
 * when they do not fit (PS_RDMA_CQ_DEPTH). */
bool psd_rdmt_cq_take(struct rdmt_dev *d, unsigned n)
{
	bool ok;

	pthread_mutex_lock(&d->lock);
	ok = d->cq_used + n <= d->k.cq_depth;
	if (ok)
		d->cq_used += n;
	pthread_mutex_unlock(&d->lock);
	return ok;
}

void psd_rdmt_cq_give(struct rdmt_dev *d, unsigned n)
{
	pthread_mutex_lock(&d->lock);
	d->cq_used -= n;
	pthread_mutex_unlock(&d->lock);
}

/* dev->lock held: the connection is dead; wake everyone. */
void psd_rdmt_set_err(struct rdmt_conn *rc, int err)
{
	if (!rc->err)
		rc->err = err;
	/* rdma_disconnect() and a failed main QP leave the lane alone. */
	psd_rdmt_lane_abort(rc);
	pthread_cond_broadcast(&rc->cond);
	psd_rdmt_wake_van(rc);
}

static void rdmt_wc_error(struct rdmt_conn *rc, const struct ibv_wc *wc,
			  unsigned kind)
{
	static const char *const what[] = {
		"?",	      "receive",      "send",		"send",
		"RDMA write", "lane receive", "lane RDMA write"
	};

	if (wc->status != IBV_WC_WR_FLUSH_ERR && !rc->err &&
	    !atomic_load(&rc->base.closed))
		psd_err("rdma: %s with %s failed: %s (vendor error 0x%x%s)",
			what[kind <= RDMT_WR_LANE_WRITE ? kind : 0],
			rc->base.peer, ibv_wc_status_str(wc->status),
			wc->vendor_err,
			kind == RDMT_WR_WRITE || kind == RDMT_WR_LANE_WRITE
				? ", while writing a key"
				: "");
	psd_rdmt_set_err(rc, wc->status == IBV_WC_WR_FLUSH_ERR ? -ECONNRESET
							       : -EIO);
}

static void rdmt_on_wc(struct rdmt_dev *d, const struct ibv_wc *wc)
{
	unsigned idx = (unsigned)(wc->wr_id >> 32) & 0xffff;
	unsigned gen = (unsigned)(wc->wr_id >> 48);
	unsigned kind = (unsigned)(wc->wr_id >> 24) & 0xff;
	unsigned slot = (unsigned)wc->wr_id & 0xffffff;
	struct rdmt_conn *rc;

	if (idx >= RDMT_MAX_CONNS || d->gens[idx] != gen || !d->conns[idx])
		return; /* connection already gone */
	rc = d->conns[idx];
	if (kind != RDMT_WR_RECV && kind != RDMT_WR_LANE_RECV)
		rc->tx_outstanding--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (kind == RDMT_WR_RECV)
			rc->rx_posted--;
		else if (kind == RDMT_WR_LANE_RECV)
			rc->lane_rx_posted--;
		else if (kind == RDMT_WR_LANE_WRITE)
			psd_rdmt_wb_part(rc, slot);
		else if (kind == RDMT_WR_SEND)
			rc->free_data[rc->nfree_data++] = slot;
		else if (kind == RDMT_WR_CTL)
			rc->free_ctl[rc->nfree_ctl++] = slot;
		else if (kind == RDMT_WR_WRITE && (slot & RDMT_WB_LAST))
			psd_rdmt_wb_part(rc, slot & ~RDMT_WB_LAST);
		rdmt_wc_error(rc, wc, kind);
		return;
	}
	switch (kind) {
	case RDMT_WR_RECV:
		psd_rdmt_on_recv(rc, wc, slot);
		break;
	case RDMT_WR_SEND:
		rc->free_data[rc->nfree_data++] = slot;
		pthread_cond_broadcast(&rc->cond);
		break;
	case RDMT_WR_CTL:
		if (((struct rdmt_wire *)(void *)psd_rdmt_tx_slot(rc, slot))
			    ->op == RDMT_OP_CREDIT)
			rc->credit_inflight = false;
		rc->free_ctl[rc->nfree_ctl++] = slot;
		pthread_cond_broadcast(&rc->cond);
		psd_rdmt_maybe_credit(rc);
		if (rc->nreturn)
			psd_rdmt_maybe_return(rc);
		break;
	case RDMT_WR_WRITE:
		if (slot & RDMT_WB_LAST)
			psd_rdmt_wb_part(rc, slot & ~RDMT_WB_LAST);
		break;
	case RDMT_WR_LANE_RECV:
		psd_rdmt_lane_on_recv(rc, wc);
		break;
	case RDMT_WR_LANE_WRITE:
		psd_rdmt_wb_part(rc, slot);
		break;
	}
}

static void rdmt_poll_batch(struct rdmt_dev *d, struct ibv_wc *wc, int n)
{
	int i;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < n; i++)
		rdmt_on_wc(d, &wc[i]);
	pthread_mutex_unlock(&d->lock);
}

static void rdmt_handle_events(struct rdmt_dev *d, struct epoll_event *ev,
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
				psd_rdmt_on_cm(d->conns[idx]);
			pthread_mutex_unlock(&d->lock);
		}
	}
}

static void *rdmt_progress_thread(void *arg)
{
	struct rdmt_dev *d = arg;
	struct epoll_event ev[16];
	struct ibv_wc wc[32];
	uint64_t last = psd_now_us();
	unsigned unacked = 0;
	int n;

	while (!atomic_load(&d->stop)) {
		n = ibv_poll_cq(d->cq, PSD_ARRAY_SIZE(wc), wc);
		if (n > 0) {
			rdmt_poll_batch(d, wc, n);
			last = psd_now_us();
			continue;
		}
		if (psd_now_us() - last < d->k.spin_us) {
			n = epoll_wait(d->epfd, ev, PSD_ARRAY_SIZE(ev), 0);
			if (n > 0)
				rdmt_handle_events(d, ev, n, &unacked);
			continue;
		}
		if (ibv_req_notify_cq(d->cq, 0))
			psd_err("rdma: cannot arm the completion queue");
		n = ibv_poll_cq(d->cq, PSD_ARRAY_SIZE(wc), wc);
		if (n > 0) {
			rdmt_poll_batch(d, wc, n);
			last = psd_now_us();
			continue;
		}
		n = epoll_wait(d->epfd, ev, PSD_ARRAY_SIZE(ev), 1000);
		if (n > 0)
			rdmt_handle_events(d, ev, n, &unacked);
		last = psd_now_us();
	}
	if (unacked)
		ibv_ack_cq_events(d->cq, unacked);
	return NULL;
}

int psd_rdmt_set_nonblock(int fd)
{
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return psd_neg_errno();
	return 0;
}

static void rdmt_dev_free(struct rdmt_dev *d)
{
	struct psd_list *pos, *tmp;
	struct rdmt_mr *m;
	uint64_t one = 1;

	psd_rdmt_lane_stop(d);
	if (d->thread) {
		atomic_store(&d->stop, true);
		(void)!write(d->wakefd, &one, sizeof(one));
		pthread_join(d->thread, NULL);
	}
	psd_list_for_each_safe (pos, tmp, &d->mrs) {
		m = psd_container_of(pos, struct rdmt_mr, lru);
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
	pthread_cond_destroy(&d->lane_cond);
	pthread_mutex_destroy(&d->mr_lock);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int rdmt_dev_setup(struct rdmt_dev *d, struct ibv_context *verbs)
{
	struct epoll_event ev = { .events = EPOLLIN };
	const char *name = ibv_get_device_name(verbs->device);
	bool rxe = !strncmp(name, "rxe", 3);
	struct ibv_device_attr da;
	int ret;

	d->verbs = verbs;
	/* Software RoCE runs in the kernel on the same CPUs: spinning only
	 * takes them away from it, so by default do not spin there. */
	if (!d->k.spin_set && (rxe || !strncmp(name, "siw", 3)))
		d->k.spin_us = 0;
	/* ... and posts are where it works: the lane (lane.c) there. */
	if (!d->k.lane_set && !rxe)
		d->k.lane_min = 0;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd)
		return psd_neg_errno();
	d->ch = ibv_create_comp_channel(verbs);
	if (!d->ch)
		return psd_neg_errno();
	ret = psd_rdmt_set_nonblock(d->ch->fd);
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
	ret = pthread_create(&d->thread, NULL, rdmt_progress_thread, d);
	if (ret) {
		d->thread = 0;
		return -ret;
	}
	pthread_setname_np(d->thread, "ps-rdma-poll");
	return psd_rdmt_lane_start(d);
}

/* Take a reference on the process's device state for @verbs. */
int psd_rdmt_dev_get(struct ibv_context *verbs,
		     const struct psd_transport_knobs *knobs,
		     struct rdmt_dev **out)
{
	struct rdmt_dev *d;
	int ret;

	pthread_mutex_lock(&rdmt_glock);
	d = rdmt_the_dev;
	if (d) {
		if (d->verbs != verbs) {
			pthread_mutex_unlock(&rdmt_glock);
			return psd_set_errmsg(
				-ENOTSUP,
				"rdma: connections on two devices (%s and %s); "
				"set PS_RDMA_DEVICE and use addresses of one "
				"device",
				ibv_get_device_name(d->verbs->device),
				ibv_get_device_name(verbs->device));
		}
		d->refs++;
		pthread_mutex_unlock(&rdmt_glock);
		*out = d;
		return 0;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		pthread_mutex_unlock(&rdmt_glock);
		return -ENOMEM;
	}
	d->epfd = -1;
	d->wakefd = -1;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->mr_lock, NULL);
	psd_list_init(&d->mrs);
	psd_list_init(&d->lane_conns);
	pthread_cond_init(&d->lane_cond, NULL);
	rdmt_knobs_load(&d->k, knobs);
	ret = rdmt_dev_setup(d, verbs);
	if (ret) {
		pthread_mutex_unlock(&rdmt_glock);
		rdmt_dev_free(d);
		return ret;
	}
	if (d->k.mr_budget)
		psd_rdmt_keep_heap();
	d->refs = 1;
	rdmt_the_dev = d;
	pthread_mutex_unlock(&rdmt_glock);
	psd_info("rdma: using %s (CQ depth %u, buffers %u x %u bytes, "
		 "registration budget %llu bytes, lane from %llu bytes)",
		 ibv_get_device_name(verbs->device), d->k.cq_depth,
		 d->k.recv_depth, d->k.buf_bytes,
		 (unsigned long long)d->k.mr_budget,
		 (unsigned long long)d->k.lane_min);
	*out = d;
	return 0;
}

void psd_rdmt_dev_put(struct rdmt_dev *d)
{
	bool last;

	if (!d)
		return;
	pthread_mutex_lock(&rdmt_glock);
	last = --d->refs == 0;
	if (last)
		rdmt_the_dev = NULL;
	pthread_mutex_unlock(&rdmt_glock);
	if (last)
		rdmt_dev_free(d);
}

bool psd_rdma_probe(const struct psd_transport_knobs *knobs, char *why,
		    size_t len)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct rdmt_knobs k;
	int n = 0, i;
	bool ok = false;

	rdmt_knobs_load(&k, knobs);
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

void psd_rdma_stats(struct psd_rdma_stats *st)
{
	struct rdmt_dev *d;

	memset(st, 0, sizeof(*st));
	st->regs = atomic_load(&psd_rdmt_st_regs);
	st->evictions = atomic_load(&psd_rdmt_st_evicts);
	st->rndv = atomic_load(&psd_rdmt_st_rndv);
	st->eager = atomic_load(&psd_rdmt_st_eager);
	st->copy = atomic_load(&psd_rdmt_st_copy);
	st->reg_failures = atomic_load(&psd_rdmt_st_reg_fail);
	st->cached = atomic_load(&psd_rdmt_st_cached);
	st->regrants = atomic_load(&psd_rdmt_st_regrants);
	st->grants = atomic_load(&psd_rdmt_st_grants);
	st->lane = atomic_load(&psd_rdmt_st_lane);
	pthread_mutex_lock(&rdmt_glock);
	d = rdmt_the_dev;
	if (d) {
		pthread_mutex_lock(&d->mr_lock);
		st->mr_bytes = d->mr_bytes;
		st->mr_budget = d->k.mr_budget;
		pthread_mutex_unlock(&d->mr_lock);
	}
	pthread_mutex_unlock(&rdmt_glock);
}
