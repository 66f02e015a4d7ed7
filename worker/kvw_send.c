// SPDX-License-Identifier: MIT
/*
 * KV worker: the sender thread, the credit pump and the sending of one
 * chunk (kvw.h explains the locking words used here).
 */
#include <stdio.h>

#include "kvw.h"

/* Locked.  The header of @ch on the wire. */
static void kvw_chunk_hdr(const struct psched_node *n,
			  const struct kvw_chunk *ch, struct psd_hdr *h,
			  struct iovec *iov)
{
	const struct kvw_req *r = ch->req;
	const struct kvw_slot *s = &r->slots[ch->slot];
	bool payload = kvw_is_push(r->type) || (r->flags & PSD_F_HAS_VALUE);

	*h = (struct psd_hdr){
		.type = r->type,
		.dtype = r->dtype,
		.flags = r->flags,
		.sender = n->id,
		.key = s->key,
		.total = s->total,
		.offset = ch->off,
		.span = ch->span,
		.length = !payload ? 0
			  : r->cmp ? ch->clen
				   : ch->span,
		.part = ch->part,
		.step = s->step,
		.req = r->id,
		.slot = (uint32_t)(ch - r->chunks),
		.epoch = s->epoch,
		.priority = r->priority,
	};
	iov->iov_base = !payload ? NULL
			: r->cmp ? (void *)(r->cbuf + ch->coff)
				 : (void *)(uintptr_t)(s->src + ch->off);
	iov->iov_len = (size_t)h->length;
	if (r->rows)
		psd_kvw_rows_hdr(ch, h, iov);
}

/*
 * Locked on entry and return; dropped around the send and, when the send
 * completed the request, around its callback.  Send @ch, just taken off
 * the queue by psd_sched_next() (which counted it in flight).
 */
void psd_kvw_chunk_send_unlocks(struct psched_node *n, struct kvw_chunk *ch)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r = ch->req;
	struct psd_peer *p = psd_node_peer(n, psd_server_id(ch->srank));
	struct kvw_gpu_job job, next = { 0 };
	struct psd_stage_buf stg = { 0 };
	struct psd_chunk_node *head;
	struct psd_hdr h;
	struct iovec iov;
	bool fire = false, sent = false;
	char why[256] = "";
	int ret = 0;

	kvw_chunk_hdr(n, ch, &h, &iov);
	ch->state = KVW_CH_SENDING;
	ch->credited = true;
	ch->t_start = psd_now_us();
	/* Device values go out of pinned slots (kvw_gpu.c); the chunk due
	 * next, if on a device too, is copied meanwhile. */
	psd_kvw_gpu_job(ch, &job);
	if (job.on && (head = psd_chunkq_peek(&w->q)))
		psd_kvw_gpu_job(psd_container_of(head, struct kvw_chunk, node),
				&next);
	/* The request cannot complete (and be freed by its callback or
	 * waiter) while its caller memory is on its way out. */
	r->sending++;
	r->pending++;
	pthread_mutex_unlock(&w->lock);
	/* GPUDirect: the device pointer itself goes to the transport (iov
	 * is s->src + off already); staged if it cannot take it. */
	if (job.direct && !p->dead && p->conn) {
		ret = psd_conn_send_dev(p->conn, &h, &iov, 1);
		sent = ret != -EOPNOTSUPP;
		if (sent && ret)
			snprintf(why, sizeof(why), "%s", psched_errmsg());
		if (!sent) {
			psd_kvw_gpu_direct_refused(w, psched_errmsg());
			job.on = true;
			ret = 0;
		}
	}
	if (job.on && !p->dead && p->conn) {
		ret = psd_kvw_gpu_stage_push(w, &job, &next, &stg);
		iov.iov_base = stg.host;
	}
	if (!sent && !ret)
		ret = p->dead || !p->conn ? PSCHED_ENODEDEAD
					  : psd_conn_send(p->conn, &h, &iov, 1);
	else if (!sent)
		snprintf(why, sizeof(why), "%s", psched_errmsg());
	if (stg.n)
		psd_kvw_gpu_unstage(w, &stg);
	pthread_mutex_lock(&w->lock);
	r->sending--;
	if (ch->state == KVW_CH_SENDING)
		ch->state = KVW_CH_SENT;
	if (ret && ch->state != KVW_CH_DONE) {
		psd_kvw_req_error(
			r, ret, "%s of key %llu (step %llu) to %s failed: %s",
			psd_msg_type_name(r->type), (unsigned long long)h.key,
			(unsigned long long)h.step, p->desc,
			why[0] ? why : psched_strerror(ret));
		fire = psd_kvw_chunk_settle(w, ch, true);
	}
	if (psd_kvw_req_settle(w, r))
		fire = true;
	if (!r->sending)
		pthread_cond_broadcast(&w->cond);
	if (fire) {
		pthread_mutex_unlock(&w->lock);
		psd_kvw_req_run_cb(w, r);
		pthread_mutex_lock(&w->lock);
	}
}

/* Locked on entry and return, dropped around every send.  Start every
 * chunk the queue and the credit allow. */
static void kvw_pump_unlocks(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_chunk_node *node;

	while ((node = psd_sched_next(&w->q, &w->credit)))
		psd_kvw_chunk_send_unlocks(
			n, psd_container_of(node, struct kvw_chunk, node));
}

/* Locked. */
bool psd_kvw_send_inline(struct psd_kvw *w, const struct kvw_req *r)
{
	return r->nchunks == 1 && !r->on_gpu && psd_chunkq_len(&w->q) == 1 &&
	       r->chunks[0].span <= KVW_INLINE_MAX &&
	       psd_credit_can_start(&w->credit, r->chunks[0].node.len);
}

/* The sender thread: holds w->lock except while sending, running a
 * callback or sleeping. */
static void *kvw_sender_main(void *arg)
{
	struct psched_node *n = arg;
	struct psd_kvw *w = kvw_of(n);
	struct timespec ts;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		kvw_pump_unlocks(n);
		psd_kvw_expire_unlocks(n);
		/* Timed, as a guard against a lost wake-up. */
		psd_deadline(&ts, 200);
		pthread_cond_timedwait(&w->send_cond, &w->lock, &ts);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Unlocked. */
int psd_kvw_sender_start(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	int ret;

	ret = -pthread_create(&w->sender, NULL, kvw_sender_main, n);
	w->sender_started = !ret;
	return ret;
}

/* Unlocked.  Safe when the thread never started. */
void psd_kvw_sender_stop(struct psd_kvw *w)
{
	if (!w->sender_started)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->send_cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->sender, NULL);
	w->sender_started = false;
}
