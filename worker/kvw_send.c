// SPDX-License-Identifier: MIT
/*
 * KV worker: the sender thread, the credit pump and the sending of one
 * chunk (kvw.h explains the locking words used here).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kvw.h"

/* Locked.  The header of @ch on the wire. */
static void kvw_chunk_hdr(const struct psched_node *n,
			  const struct kvw_chunk *ch, struct psd_hdr *h,
			  struct iovec *iov, int *niov)
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
	*niov = 1;
	if (r->rows)
		psd_kvw_rows_hdr(ch, h, iov, niov);
}

/* A chunk is kept aside only when the next one is at most this long
 * (a large one would delay it by its whole send). */
#define KVW_HOLD_NEXT_MAX (16u * 1024u)

/*
 * Connections the sender thread sent small chunks to with
 * psd_conn_send_more() in one pump, each with a reference: flushed when
 * the queue has nothing more to start, so the chunks of a burst of small
 * requests go out in one write each.
 */
struct kvw_held {
	struct psd_conn *c[8];
	unsigned n;
};

/* Locked.  Whether the chunk being sent on @c may wait for the next one:
 * another chunk can start right away, and @c is or can be in @held. */
static bool kvw_may_hold(struct psd_kvw *w, struct kvw_held *held,
			 const struct psd_conn *c)
{
	struct psd_chunk_node *head = psd_chunkq_peek(&w->q);
	unsigned i;

	if (!held || !c || !head || head->len > KVW_HOLD_NEXT_MAX ||
	    !psd_credit_can_start(&w->credit, head->len))
		return false;
	for (i = 0; i < held->n; i++)
		if (held->c[i] == c)
			return true;
	return held->n < PSD_ARRAY_SIZE(held->c);
}

/* Unlocked.  Send what @held kept aside and drop the references. */
static void kvw_held_flush(struct kvw_held *held)
{
	unsigned i;

	for (i = 0; i < held->n; i++) {
		psd_conn_flush(held->c[i]);
		psd_conn_put(held->c[i]);
	}
	held->n = 0;
}

static void kvw_held_add(struct kvw_held *held, struct psd_conn *c)
{
	unsigned i;

	for (i = 0; i < held->n; i++)
		if (held->c[i] == c)
			return;
	psd_conn_get(c);
	held->c[held->n++] = c;
}

/*
 * Locked on entry and return; dropped around the send and, when the send
 * completed the request, around its callback.  Send @ch, just taken off
 * the queue by psd_sched_next() (which counted it in flight).  With
 * @held, a small chunk may be kept aside for @held's flush.
 */
static void kvw_chunk_send(struct psched_node *n, struct kvw_chunk *ch,
			   struct kvw_held *held)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r = ch->req;
	struct psd_peer *p = psd_node_peer(n, psd_server_id(ch->srank));
	struct kvw_gpu_job job, next = { 0 };
	struct psd_stage_buf stg = { 0 };
	struct psd_chunk_node *head;
	struct psd_hdr h;
	struct iovec iov = { 0 }, kiov[3], *v;
	int niov = 1;
	bool fire = false, sent = false, more, filled;
	struct psd_conn *conn;
	char why[256] = "";
	int ret = 0;

	if (r->kl)
		psd_kvw_kl_hdr(n, ch, &h, kiov, &niov);
	else
		kvw_chunk_hdr(n, ch, &h, r->rows ? kiov : &iov, &niov);
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
	conn = p->conn;
	filled = r->rows && psd_kvw_rows_filled(ch);
	more = !job.on && !job.direct && !filled && kvw_may_hold(w, held, conn);
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
	v = r->kl || r->rows ? kiov : &iov;
	if (!sent && !ret && (p->dead || !conn))
		ret = PSCHED_ENODEDEAD;
	else if (!sent && !ret && filled)
		ret = psd_conn_send_fill(conn, &h, psd_kvw_rows_fill, ch,
					 v[0].iov_base);
	else if (!sent && !ret && more)
		ret = psd_conn_send_more(conn, &h, v, niov);
	else if (!sent && !ret)
		ret = psd_conn_send(conn, &h, v, niov);
	else if (!sent)
		snprintf(why, sizeof(why), "%s", psched_errmsg());
	if (more && !ret)
		kvw_held_add(held, conn);
	pthread_mutex_lock(&w->lock);
	r->sending--;
	if (ch->state == KVW_CH_SENDING)
		ch->state = KVW_CH_SENT;
	/* A staged copy a transport may still read (transport.h,
	 * req_send_early) stays until the chunk settles (its answer, an
	 * error or a cancel), unless that happened already. */
	if (stg.n && !ret && conn && conn->ops->req_send_early &&
	    ch->state != KVW_CH_DONE)
		ch->tx_stg = stg;
	else if (stg.n)
		psd_kvw_gpu_unstage(w, &stg);
	if (ret && ch->state != KVW_CH_DONE) {
		/* A reset or a broken pipe while sending: the server closed
		 * its end (it died, or left with the job), usually before the
		 * van has seen the connection go; say so. */
		if (ret == -ECONNRESET || ret == -EPIPE)
			psd_kvw_req_error(
				r, ret,
				"%s of key %llu (step %llu) failed: %s died or "
				"left the job: the connection broke while "
				"sending (%s)",
				psd_msg_type_name(r->type),
				(unsigned long long)h.key,
				(unsigned long long)h.step, p->desc,
				why[0] ? why : psched_strerror(ret));
		else
			psd_kvw_req_error(
				r, ret,
				"%s of key %llu (step %llu) to %s failed: %s",
				psd_msg_type_name(r->type),
				(unsigned long long)h.key,
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

void psd_kvw_chunk_send_unlocks(struct psched_node *n, struct kvw_chunk *ch)
{
	kvw_chunk_send(n, ch, NULL);
}

/* At most one look at the path per this many microseconds. */
#define KVW_FLOOR_GAP_US 1000

/*
 * Locked.  The head chunk waits for credit: did the credit or the path
 * set the rate?  The transport says whether the path of the chunk's
 * connection has room (tcp: its round trip is near the minimum, no
 * standing queue holds what is in flight, common/transport/tcp_info.c):
 * then the credit kept the link from being used, and the worker's link
 * reading is a floor (docs/tuner.md).  Other transports cannot tell and
 * never report a floor.
 */
static void kvw_floor_look(struct psched_node *n, struct psd_kvw *w)
{
	struct psd_chunk_node *node = psd_chunkq_peek(&w->q);
	struct kvw_metrics *km = &w->met;
	struct psd_peer *p;
	uint32_t rtt = 0;
	uint64_t now;
	int ret;

	if (!node || !w->credit.in_flight)
		return;
	now = psd_now_us();
	if (now - km->lim_us < KVW_FLOOR_GAP_US)
		return;
	km->lim_us = now;
	p = psd_node_peer(
		n,
		psd_server_id(
			psd_container_of(node, struct kvw_chunk, node)->srank));
	if (!p || !p->conn || p->dead)
		return;
	ret = psd_conn_tx_room(p->conn, &rtt);
	if (ret < 0)
		return;
	if (rtt > km->rtt_us)
		km->rtt_us = rtt;
	km->lim_n++;
	km->floor_n += (unsigned)ret;
}

/* Locked on entry and return, dropped around every send and the flush.
 * Start every chunk the queue and the credit allow. */
static void kvw_pump_unlocks(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_chunk_node *node;
	struct kvw_held held = { .n = 0 };

	for (;;) {
		while ((node = psd_sched_next(&w->q, &w->credit)))
			kvw_chunk_send(
				n,
				psd_container_of(node, struct kvw_chunk, node),
				&held);
		if (!held.n) {
			kvw_floor_look(n, w);
			return;
		}
		pthread_mutex_unlock(&w->lock);
		kvw_held_flush(&held);
		pthread_mutex_lock(&w->lock);
	}
}

/*
 * Locked.  Whether the caller sends @r itself: one small chunk, alone in
 * the queue, and, if it carries a payload, no push bytes in flight.  The
 * last condition keeps a burst of pushes (40 issued back to back) for
 * the sender thread, which writes its small chunks together
 * (kvw_may_hold()): sent inline, each cost a write and a wake-up of the
 * server, and the caller's writes contended for the socket with the van
 * thread reading the acks (push 4 KiB x 40: 2-5x fewer Gbit/s).  A push
 * issued after the previous one's ack (serial use), and a pull right
 * after a push, still skip the thread hand-off.
 */
bool psd_kvw_send_inline(struct psd_kvw *w, const struct kvw_req *r)
{
	bool payload = kvw_is_push(r->type) || (r->flags & PSD_F_HAS_VALUE);

	return r->nchunks == 1 && !r->on_gpu && psd_chunkq_len(&w->q) == 1 &&
	       (!payload || !w->credit.in_flight) &&
	       r->chunks[0].span <= KVW_INLINE_MAX &&
	       psd_credit_can_start(&w->credit, r->chunks[0].node.len);
}

/*
 * PS_SENDER_NICE: this thread's niceness (Linux keeps one per thread).
 * The sender posts every queued chunk; on a soft-RoCE device each post
 * does the device's work on the posting CPU, and at 64 KiB the sender
 * is the busiest thread of a push (docs/transports.md "RDMA").  Without the
 * right to lower it (CAP_SYS_NICE or RLIMIT_NICE) the job runs on at the
 * process's niceness, with a warning naming the knob.
 */
static void kvw_sender_nice(const struct psched_node *n)
{
	int want = n->cfg.sender_nice;
	int err;

	if (!want)
		return;
	err = setpriority(PRIO_PROCESS, (id_t)gettid(), want) ? errno : 0;
	if (err)
		psd_warn("worker: PS_SENDER_NICE=%d: cannot set the sender "
			 "thread's niceness: %s%s; it keeps the process's",
			 want, strerror(err),
			 err == EACCES || err == EPERM
				 ? " (lowering it needs CAP_SYS_NICE or "
				   "RLIMIT_NICE)"
				 : "");
	else
		psd_info("worker: sender thread at niceness %d "
			 "(PS_SENDER_NICE)",
			 want);
}

/* The sender thread: holds w->lock except while sending, running a
 * callback or sleeping. */
static void *kvw_sender_main(void *arg)
{
	struct psched_node *n = arg;
	struct psd_kvw *w = kvw_of(n);
	struct timespec ts;

	kvw_sender_nice(n);
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
	if (!ret)
		pthread_setname_np(w->sender, "ps-sender");
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
