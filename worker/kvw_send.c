// SPDX-License-Identifier: MIT
/*
 * KV worker: starting a request of any family, the sender thread, the
 * credit pump, and sending one chunk then completing its send (kvw.h
 * explains the locking words used here).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kvw.h"

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

/* What one send of a chunk needs, read under the lock. */
struct kvw_tx {
	struct psd_hdr h;
	struct iovec iov[3];
	int niov;
	struct kvw_gpu_job job, next;
	struct psd_stage_buf stg;
	struct psd_peer *p;
	struct psd_conn *conn;
	bool more;
	bool filled;
	char why[256];
};

/* Locked.  @ch, just taken off the queue, starts: its header, payload and
 * device job into @tx; its request is held while the send runs. */
static void kvw_chunk_start(struct psched_node *n, struct kvw_chunk *ch,
			    struct kvw_held *held, struct kvw_tx *tx)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r = ch->req;
	struct psd_chunk_node *head;

	tx->niov = 1;
	r->fam->hdr(n, ch, &tx->h, tx->iov, &tx->niov);
	ch->state = KVW_CH_SENDING;
	ch->credited = true;
	ch->t_start = psd_now_us();
	/* Device values go out of pinned slots (kvw_gpu.c); the chunk due
	 * next, if on a device too, is copied meanwhile. */
	psd_kvw_gpu_job(ch, &tx->job);
	if (tx->job.on && (head = psd_chunkq_peek(&w->q)))
		psd_kvw_gpu_job(psd_container_of(head, struct kvw_chunk, node),
				&tx->next);
	/* The request cannot complete (and be freed by its callback or
	 * waiter) while its caller memory is on its way out. */
	r->sending++;
	r->pending++;
	tx->p = psd_node_peer(n, psd_server_id(ch->srank));
	tx->conn = tx->p->conn;
	tx->filled = r->fam->filled && r->fam->filled(ch);
	tx->more = !tx->job.on && !tx->job.direct && !tx->filled &&
		   kvw_may_hold(w, held, tx->conn);
}

/* Unlocked.  Hand @tx of @ch to the transport: 0 or -errno (tx->why says
 * more when the transport did). */
static int kvw_chunk_xmit(struct psd_kvw *w, struct kvw_chunk *ch,
			  struct kvw_held *held, struct kvw_tx *tx)
{
	struct psd_peer *p = tx->p;
	int ret = 0;

	/* GPUDirect: the device pointer itself goes to the transport (iov
	 * is s->src + off already); staged if it cannot take it. */
	if (tx->job.direct && !p->dead && p->conn) {
		ret = psd_conn_send_dev(p->conn, &tx->h, tx->iov, 1);
		if (ret != -EOPNOTSUPP) {
			if (ret)
				snprintf(tx->why, sizeof(tx->why), "%s",
					 psched_errmsg());
			return ret;
		}
		psd_kvw_gpu_direct_refused(w, psched_errmsg());
		tx->job.on = true;
		ret = 0;
	}
	if (tx->job.on && !p->dead && p->conn) {
		ret = psd_kvw_gpu_stage_push(w, &tx->job, &tx->next, &tx->stg);
		tx->iov[0].iov_base = tx->stg.host;
	}
	if (ret) {
		snprintf(tx->why, sizeof(tx->why), "%s", psched_errmsg());
		return ret;
	}
	if (p->dead || !tx->conn)
		return PSCHED_ENODEDEAD;
	if (tx->filled)
		return psd_conn_send_fill(tx->conn, &tx->h, ch->req->fam->fill,
					  ch, tx->iov[0].iov_base);
	if (!tx->more)
		return psd_conn_send(tx->conn, &tx->h, tx->iov, tx->niov);
	ret = psd_conn_send_more(tx->conn, &tx->h, tx->iov, tx->niov);
	if (!ret)
		kvw_held_add(held, tx->conn);
	return ret;
}

/* Locked.  The send of @ch failed with @ret: say why. */
static void kvw_chunk_failed(struct kvw_req *r, const struct kvw_tx *tx,
			     int ret)
{
	const char *why = tx->why[0] ? tx->why : psched_strerror(ret);

	/* A reset or a broken pipe while sending: the server closed its end
	 * (it died, or left with the job), usually before the van has seen
	 * the connection go; say so. */
	if (ret == -ECONNRESET || ret == -EPIPE)
		psd_kvw_req_error(r, ret,
				  "%s of key %llu (step %llu) failed: %s died "
				  "or left the job: the connection broke "
				  "while sending (%s)",
				  psd_msg_type_name(r->type),
				  (unsigned long long)tx->h.key,
				  (unsigned long long)tx->h.step, tx->p->desc,
				  why);
	else
		psd_kvw_req_error(
			r, ret, "%s of key %llu (step %llu) to %s failed: %s",
			psd_msg_type_name(r->type),
			(unsigned long long)tx->h.key,
			(unsigned long long)tx->h.step, tx->p->desc, why);
}

/* Locked on entry and return; dropped around the callback when the send
 * completed the request.  The send of @ch returned @ret: release what it
 * held, fail the chunk on an error. */
static void kvw_chunk_sent(struct psd_kvw *w, struct kvw_chunk *ch,
			   struct kvw_tx *tx, int ret)
{
	struct kvw_req *r = ch->req;
	bool fire = false;

	r->sending--;
	if (ch->state == KVW_CH_SENDING)
		ch->state = KVW_CH_SENT;
	/* A staged copy a transport may still read (transport.h,
	 * req_send_early) stays until the chunk settles (its answer, an
	 * error or a cancel), unless that happened already. */
	if (tx->stg.n && !ret && tx->conn && tx->conn->ops->req_send_early &&
	    ch->state != KVW_CH_DONE)
		ch->tx_stg = tx->stg;
	else if (tx->stg.n)
		psd_kvw_gpu_unstage(w, &tx->stg);
	if (ret && ch->state != KVW_CH_DONE) {
		kvw_chunk_failed(r, tx, ret);
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
	struct kvw_tx tx = { .niov = 1 };
	int ret;

	kvw_chunk_start(n, ch, held, &tx);
	pthread_mutex_unlock(&w->lock);
	ret = kvw_chunk_xmit(w, ch, held, &tx);
	pthread_mutex_lock(&w->lock);
	kvw_chunk_sent(w, ch, &tx, ret);
}

int psd_kvw_issue_check(const struct psched_node *n, psched_done_fn *cb,
			const uint64_t *req)
{
	if (!n || !kvw_of(n) || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL, "only workers push and pull");
	if (!req && !cb)
		return psd_set_errmsg(-EINVAL, "need a request id or callback");
	return 0;
}

int psd_kvw_fatal(const struct psched_node *n)
{
	return n->fatal ? psd_set_errmsg(n->fatal, "%s", n->fatal_msg) : 0;
}

/* Locked.  Queue every chunk of @r, or none (r->nchunks 0 then). */
static int kvw_req_queue(struct psched_node *n, struct kvw_req *r)
{
	struct psd_kvw *w = kvw_of(n);
	size_t k;
	int ret;

	for (k = 0; k < r->nchunks; k++) {
		ret = psd_chunkq_push(&w->q, &r->chunks[k].node, r->priority);
		if (ret) {
			while (k--)
				psd_chunkq_remove(&w->q, &r->chunks[k].node);
			r->nchunks = 0;
			memset(r->srv, 0, n->num_server * sizeof(*r->srv));
			return psd_set_errmsg(ret, "no memory to queue chunks");
		}
	}
	r->pending += (unsigned)r->nchunks;
	return 0;
}

int psd_kvw_req_layout(struct psched_node *n, struct kvw_req *r)
{
	int ret = 0;

	if (r->fam->stepped)
		psd_kvw_req_config(kvw_of(n), r);
	if (r->fam->layout)
		ret = r->fam->layout(n, r);
	return ret ? ret : kvw_req_queue(n, r);
}

/*
 * Locked on entry and return; dropped around an inline send.  Hand the
 * registered request @r to the sender: park it, or cut it into chunks and
 * queue them, sending them at once when its family says that is quicker.
 */
static void kvw_req_start_unlocks(struct psched_node *n, struct kvw_req *r)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_chunk_node *node;
	size_t k, nch;
	int ret;

	if (r->parked) {
		r->pending++; /* held until the config commit */
		psd_list_add_tail(&w->parked, &r->park_link);
		return;
	}
	ret = psd_kvw_req_layout(n, r);
	if (ret) {
		psd_kvw_req_error(r, ret, "%s", psched_errmsg());
		r->pending = 1;
	} else if (r->fam->send_inline && r->fam->send_inline(n, w, r)) {
		/* what the queue gives next, as many chunks as @r has */
		for (k = 0, nch = r->nchunks; k < nch; k++) {
			node = psd_sched_next(&w->q, &w->credit);
			if (!node)
				break;
			kvw_chunk_send(
				n,
				psd_container_of(node, struct kvw_chunk, node),
				NULL);
		}
	}
	psd_kvw_kick(w);
}

int psd_kvw_req_issue_unlocks(struct psched_node *n, struct kvw_req *r,
			      int priority, psched_done_fn *cb, void *arg,
			      uint64_t *req, bool *fire)
{
	struct psd_kvw *w = kvw_of(n);
	int ret = psd_kvw_req_register(w, r);

	if (ret) {
		psd_kvw_req_free(r);
		return psd_set_errmsg(ret, "too many requests in flight");
	}
	r->cb = cb;
	r->cb_arg = arg;
	r->deadline_ms = psd_now_ms() + n->cfg.request_timeout_ms;
	r->priority = w->fifo ? 0 : priority;
	r->pending = 1; /* held until issued */
	if (req)
		*req = r->id;
	kvw_req_start_unlocks(n, r);
	*fire = psd_kvw_req_settle(w, r);
	return 0;
}

void psd_kvw_hdr_base(const struct psched_node *n, const struct kvw_chunk *ch,
		      struct psd_hdr *h)
{
	const struct kvw_req *r = ch->req;
	const struct kvw_slot *s = &r->slots[ch->slot];

	*h = (struct psd_hdr){
		.type = r->type,
		.dtype = r->dtype,
		.flags = r->flags,
		.sender = n->id,
		.key = s->key,
		.total = s->total,
		.offset = ch->off,
		.span = ch->span,
		.part = ch->part,
		.step = s->step,
		.req = r->id,
		.slot = (uint32_t)(ch - r->chunks),
		.epoch = s->epoch,
		.priority = r->priority,
	};
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
