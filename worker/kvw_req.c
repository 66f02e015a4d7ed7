// SPDX-License-Identifier: MIT
/*
 * KV worker: the request table, settling of chunks and requests, timeouts,
 * cancel and psched_wait() (kvw.h explains the locking words used here).
 */
#include <stdio.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <sched.h>

#include "kvw.h"

/* Locked. */
struct kvw_req *psd_kvw_req_find(struct psd_kvw *w, uint64_t id)
{
	size_t idx = (size_t)(id & KVW_IDX_MASK);
	struct kvw_req *r;

	if (idx >= w->cap)
		return NULL;
	r = w->reqs[idx];
	return r && r->id == id ? r : NULL;
}

/* Locked.  Double both index arrays. */
static int kvw_req_table_grow(struct psd_kvw *w)
{
	size_t i, ncap = w->cap ? w->cap * 2 : 256;
	struct kvw_req **nr;
	uint32_t *nf;

	if (ncap > KVW_IDX_MASK)
		return -EBUSY;
	nr = realloc(w->reqs, ncap * sizeof(*nr));
	if (!nr)
		return -ENOMEM;
	w->reqs = nr;
	nf = realloc(w->free_idx, ncap * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	w->free_idx = nf;
	for (i = w->cap; i < ncap; i++) {
		w->reqs[i] = NULL;
		w->free_idx[w->nfree++] = (uint32_t)(ncap - 1 - (i - w->cap));
	}
	w->cap = ncap;
	return 0;
}

/* Locked.  Give @r an id and a place in the table. */
int psd_kvw_req_register(struct psd_kvw *w, struct kvw_req *r)
{
	size_t i;
	int ret;

	if (!w->nfree) {
		ret = kvw_req_table_grow(w);
		if (ret)
			return ret;
	}
	i = w->free_idx[--w->nfree];
	r->id = (++w->gen << KVW_IDX_BITS) | i;
	w->reqs[i] = r;
	psd_kvw_busy(w, r, true);
	return 0;
}

/* Locked: @r is done after @us microseconds (psched_stats). */
static void kvw_req_count(struct kvw_metrics *km, const struct kvw_req *r,
			  uint64_t us)
{
	unsigned b = 0;

	if (!r->err)
		km->done_ok++;
	else if (r->err == -ETIMEDOUT)
		km->err_timeout++;
	else if (r->err == PSCHED_ENODEDEAD)
		km->err_node_dead++;
	else if (r->err == PSCHED_EREMOTE)
		km->err_remote++;
	else if (r->err == PSCHED_ESHUTDOWN)
		km->err_shutdown++;
	else
		km->err_other++;
	while (b + 1 < PSCHED_LATENCY_BUCKETS &&
	       us > ((uint64_t)PSCHED_LATENCY_BUCKET_US << b))
		b++;
	km->lat_count[b]++;
	km->lat_sum_us += us;
}

void psd_kvw_busy(struct psd_kvw *w, struct kvw_req *r, bool on)
{
	struct kvw_metrics *km = &w->met;
	uint64_t now;

	if (r->inflight == on)
		return;
	r->inflight = on;
	now = psd_now_us();
	if (on)
		r->t_reg_us = now;
	else
		kvw_req_count(km, r, now - r->t_reg_us);
	if (on && !km->inflight++)
		km->busy_since = now;
	else if (!on && !--km->inflight)
		km->busy_us += now - km->busy_since;
	/* The most requests in flight at once in the busy period that just
	 * ended: 1 is serial use (kvw_may_poll()). */
	if (on && km->inflight > w->busy_peak)
		w->busy_peak = km->inflight;
	if (!on && !km->inflight) {
		w->last_busy_peak = w->busy_peak;
		w->busy_peak = 0;
	}
}

/* Locked. */
void psd_kvw_req_unregister(struct psd_kvw *w, struct kvw_req *r)
{
	size_t idx = (size_t)(r->id & KVW_IDX_MASK);

	psd_kvw_busy(w, r, false);
	if (idx < w->cap && w->reqs[idx] == r) {
		w->reqs[idx] = NULL;
		w->free_idx[w->nfree++] = (uint32_t)idx;
	}
}

void psd_kvw_req_free(struct kvw_req *r)
{
	size_t i;

	for (i = 0; i < r->nslots; i++)
		psd_scratch_put(r->scratch, r->slots[i].codes);
	psd_scratch_put(r->scratch, r->cbuf);
	if (r->fam->free)
		r->fam->free(r);
	free(r->chunks);
	free(r->srv);
	free(r);
}

/* Locked.  First error wins; the request completes when nothing is
 * pending. */
void psd_kvw_req_error(struct kvw_req *r, int err, const char *fmt, ...)
{
	va_list ap;

	if (r->err)
		return;
	r->err = err;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

/* Locked. */
bool psd_kvw_req_settle(struct psd_kvw *w, struct kvw_req *r)
{
	if (r->pending)
		r->pending--;
	if (r->pending || r->done)
		return false;
	r->done = true;
	psd_kvw_busy(w, r, false);
	w->last_single = r->nchunks == 1;
	atomic_fetch_add(&w->done_gen, 1);
	if (w->rx_waiting && !pthread_equal(w->rx_waiter, pthread_self()))
		(void)!eventfd_write(w->rx_efd, 1);
	pthread_cond_broadcast(&w->cond);
	return r->cb != NULL;
}

/* Locked. */
void psd_kvw_kick(struct psd_kvw *w)
{
	struct psd_chunk_node *head = psd_chunkq_peek(&w->q);

	if (head && !w->stop && psd_credit_can_start(&w->credit, head->len))
		pthread_cond_signal(&w->send_cond);
}

/* Locked. */
static void kvw_tl_record(struct psd_kvw *w, const struct kvw_chunk *ch,
			  bool failed)
{
	const struct kvw_req *r = ch->req;
	const struct kvw_slot *s = &r->slots[ch->slot];
	uint64_t now = psd_now_us();
	struct psd_tl_rec rec = {
		.key = s->key,
		.offset = ch->off,
		.len = ch->span,
		.step = s->step,
		.t_start = ch->t_start,
		.priority = r->priority,
		.epoch = s->epoch,
		.server = ch->srank,
		.type = r->type,
		.failed = failed,
	};

	if (!ch->t_start)
		return; /* never started */
	rec.t_push = r->type == PSD_MSG_PULL ? 0 : ch->t_push;
	if (psd_msg_is_pull(r->type))
		rec.t_pull = now;
	psd_tl_add(&w->tl, &rec);
}

/* Locked. */
void psd_kvw_chunk_uncredit(struct psd_kvw *w, struct kvw_chunk *ch)
{
	if (!ch->credited)
		return;
	ch->credited = false;
	ch->t_push = psd_now_us();
	psd_credit_done(&w->credit, ch->node.len);
	psd_kvw_kick(w);
}

/* Locked. */
bool psd_kvw_chunk_settle(struct psd_kvw *w, struct kvw_chunk *ch, bool failed)
{
	struct kvw_req *r = ch->req;

	if (ch->state == KVW_CH_DONE)
		return false;
	if (ch->state == KVW_CH_QUEUED)
		psd_chunkq_remove(&w->q, &ch->node);
	else
		psd_kvw_chunk_uncredit(w, ch);
	if (psd_tl_on(&w->tl))
		kvw_tl_record(w, ch, failed);
	ch->state = KVW_CH_DONE;
	if (ch->tx_stg.n) {
		psd_kvw_gpu_unstage(w, &ch->tx_stg);
		ch->tx_stg.n = 0;
	}
	if (r->srv[ch->srank].pending)
		r->srv[ch->srank].pending--;
	psd_kvw_kick(w);
	return psd_kvw_req_settle(w, r);
}

/* Unlocked.  Callback requests free themselves once done and idle. */
void psd_kvw_req_run_cb(struct psd_kvw *w, struct kvw_req *r)
{
	if (r->err)
		psd_set_errmsg(r->err, "%s", r->msg);
	r->cb(r->err, r->id, r->cb_arg);
	pthread_mutex_lock(&w->lock);
	psd_kvw_req_unregister(w, r);
	pthread_mutex_unlock(&w->lock);
	psd_kvw_req_free(r);
}

/* Locked: name the servers that still owe answers. */
static void kvw_describe_pending(struct psched_node *n, struct kvw_req *r,
				 char *buf, size_t len)
{
	struct psd_kvw *w = kvw_of(n);
	size_t used = 0;
	unsigned s;

	buf[0] = '\0';
	if (r->parked) {
		snprintf(buf, len,
			 "the scheduler's commit of config epoch %u "
			 "(the push is held until every node agrees)",
			 w->prep_epoch);
		return;
	}
	for (s = 0; s < n->num_server && used + 2 < len; s++) {
		if (!r->srv[s].pending)
			continue;
		used += (size_t)snprintf(
			buf + used, len - used, "%s%s", used ? ", " : "",
			psd_node_peer(n, psd_server_id(s))->desc);
	}
}

/* Locked. */
void psd_kvw_req_timed_out(struct psched_node *n, struct kvw_req *r,
			   unsigned timeout_ms)
{
	char who[256];

	kvw_describe_pending(n, r, who, sizeof(who));
	psd_kvw_req_error(r, -ETIMEDOUT,
			  "%s of key %llu (step %llu%s) timed out after %u ms "
			  "waiting for %s%s%s",
			  psd_msg_type_name(r->type),
			  (unsigned long long)r->slots[0].key,
			  (unsigned long long)r->slots[0].step,
			  r->nslots > 1 ? ", and more keys" : "", timeout_ms,
			  who, r->notice[0] ? "; " : "", r->notice);
}

/*
 * Locked on entry and return; the wait at the end drops it.  Give up on
 * @r: queued chunks are dropped, credit of chunks in flight is given
 * back, later answers are discarded; receives in progress into caller
 * memory are stopped by closing their connection, and sends in progress
 * from it are waited for.
 */
void psd_kvw_req_cancel_unlocks(struct psched_node *n, struct kvw_req *r)
{
	struct psd_kvw *w = kvw_of(n);
	size_t i;
	unsigned s;

	r->cancelled = true;
	if (r->parked) {
		psd_list_del(&r->park_link);
		r->parked = false;
	}
	for (i = 0; i < r->nchunks; i++)
		psd_kvw_chunk_settle(w, &r->chunks[i], true);
	for (s = 0; s < n->num_server; s++)
		if (r->srv[s].busy)
			psd_conn_close(
				psd_node_peer(n, psd_server_id(s))->conn);
	while (r->busy || r->sending)
		pthread_cond_wait(&w->cond, &w->lock);
}

/*
 * Locked on entry and return, dropped around each callback (sender
 * thread).  A request with a callback has nobody in psched_wait() to bound
 * it: fail it at the request timeout, naming what it still waits for, like
 * psched_wait() does.  One being sent right now is left for the next
 * round.  The table is re-read after every drop.
 */
void psd_kvw_expire_unlocks(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	uint64_t now = psd_now_ms();
	struct kvw_req *r;
	size_t i;

	for (i = 0; i < w->cap; i++) {
		r = w->reqs[i];
		if (!r || !r->cb || r->done || r->cancelled || r->sending ||
		    now < r->deadline_ms)
			continue;
		psd_kvw_req_timed_out(n, r, n->cfg.request_timeout_ms);
		psd_err("%s", r->msg);
		psd_kvw_req_cancel_unlocks(n, r);
		r->done = true;
		atomic_fetch_add(&w->done_gen, 1);
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		psd_kvw_req_run_cb(w, r);
		pthread_mutex_lock(&w->lock);
	}
}

/* Unlocked. */
int psched_test(struct psched_node *n, uint64_t id)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r;
	int ret;

	if (!w)
		return psd_set_errmsg(-EINVAL, "only workers test requests");
	pthread_mutex_lock(&w->lock);
	r = psd_kvw_req_find(w, id);
	if (!r || r->cb)
		ret = psd_set_errmsg(-ENOENT,
				     "no request %llu to test (already "
				     "waited, or it has a callback)",
				     (unsigned long long)id);
	else
		ret = r->done ? 1 : 0;
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/* The completion counter moved (psd_conn_rx_wait()'s test). */
struct kvw_rx_wait {
	struct psd_kvw *w;
	unsigned gen;
};

static bool kvw_rx_done(void *arg)
{
	const struct kvw_rx_wait *x = arg;

	return atomic_load(&x->w->done_gen) != x->gen;
}

/*
 * Locked.  The connection a wait for @r may read the answer on itself
 * (PS_CALLER_RX; psd_conn_rx_wait()), with a reference, or NULL: @r
 * alone in flight, one chunk, not on a GPU, its server's connection
 * one the calling thread may read, and no PS_POLL_US (those waits
 * busy-poll instead, the van loop too).  For a serial caller the answer then
 * wakes this thread only, not the van thread and then this one
 * (measured: serial 4 KiB pushes over loopback TCP, README "Caller
 * receive").
 */
static struct psd_conn *kvw_rx_conn(struct psched_node *n, struct psd_kvw *w,
				    const struct kvw_req *r)
{
	struct psd_conn *c;
	struct psd_peer *p;

	if (!n->cfg.caller_rx || n->cfg.poll_us || w->rx_efd < 0 ||
	    w->met.inflight != 1 || r->nchunks != 1 || r->on_gpu)
		return NULL;
	p = psd_node_peer(n, psd_server_id(r->chunks[0].srank));
	/* (A dead peer's connection is closed: psd_conn_rx_wait() sees
	 * it; p->dead is the node lock's.)  A split pair's answers come
	 * on p->ans, set before the first request. */
	c = p ? (p->ans ? p->ans : p->conn) : NULL;
	if (!c || !c->ops->caller_rx)
		return NULL;
	psd_conn_get(c);
	return c;
}

/*
 * Locked on entry and return, dropped while polling.  Wait for @r until
 * @deadline (@timeout_ms from the call).  First, a lone request reads its
 * answer on this thread when it can (kvw_rx_conn()); then, or else, if
 * @r is the only request in flight and has one
 * chunk, poll w->done_gen (yielding the CPU between looks)
 * for up to the adaptive budget (pollbudget.h, PS_POLL_US): when the
 * answer is due within a few tens of microseconds (a serial caller's
 * small request), the van thread's broadcast then finds nobody asleep
 * and this thread does not pay a wake-up of itself and its vCPU.
 * Returns pthread_cond_timedwait()'s last result.
 */
static int kvw_wait_done(struct psched_node *n, struct psd_kvw *w,
			 struct kvw_req *r, const struct timespec *deadline,
			 unsigned timeout_ms)
{
	struct psd_conn *c;
	uint64_t t0, end;
	bool polled = false;
	unsigned g;
	int ret = 0;

	if (r->done)
		return 0;
	c = kvw_rx_conn(n, w, r);
	if (c) {
		struct kvw_rx_wait x = { .w = w,
					 .gen = atomic_load(&w->done_gen) };

		w->rx_waiting = true;
		w->rx_waiter = pthread_self();
		pthread_mutex_unlock(&w->lock);
		ret = psd_conn_rx_wait(c, w->rx_efd, kvw_rx_done, &x,
				       timeout_ms);
		psd_conn_put(c);
		pthread_mutex_lock(&w->lock);
		w->rx_waiting = false;
		if (!ret && r->done)
			w->met.caller_rx++;
		if (r->done)
			return 0;
		ret = 0; /* the wait below says what happened */
	}
	/* Only a request of one chunk alone in flight polls (serial use):
	 * behind others, or as one of many chunks (a burst of pushes), its
	 * answer is not due soon, and the thread's wake-up is not what the
	 * burst waits for. */
	if (w->spin.cur_us && w->met.inflight == 1 && r->nchunks == 1) {
		polled = true;
		g = atomic_load(&w->done_gen);
		end = psd_now_us() + w->spin.cur_us;
		pthread_mutex_unlock(&w->lock);
		while (atomic_load(&w->done_gen) == g && psd_now_us() < end)
			sched_yield();
		pthread_mutex_lock(&w->lock);
		if (r->done)
			return 0;
	}
	t0 = psd_now_us();
	while (!r->done && !ret)
		ret = pthread_cond_timedwait(&w->cond, &w->lock, deadline);
	psd_poll_budget_slept(&w->spin, polled, r->done, psd_now_us() - t0);
	return ret;
}

int psched_wait(struct psched_node *n, uint64_t id, unsigned timeout_ms)
{
	struct psd_kvw *w = kvw_of(n);
	struct timespec ts;
	struct kvw_req *r;
	uint64_t t0 = psd_now_us();
	int ret = 0;

	if (!w)
		return psd_set_errmsg(-EINVAL, "only workers wait on requests");
	if (!timeout_ms)
		timeout_ms = n->cfg.request_timeout_ms;
	psd_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&w->lock);
	r = psd_kvw_req_find(w, id);
	if (!r || r->cb) {
		pthread_mutex_unlock(&w->lock);
		return psd_set_errmsg(-ENOENT,
				      "no request %llu to wait for "
				      "(already waited, or it has "
				      "a callback)",
				      (unsigned long long)id);
	}
	kvw_wait_done(n, w, r, &ts, timeout_ms);
	w->met.wait_us += psd_now_us() - t0;
	if (!r->done)
		psd_kvw_req_timed_out(n, r, timeout_ms);
	psd_kvw_req_cancel_unlocks(n, r);
	psd_kvw_req_unregister(w, r);
	ret = r->err;
	if (ret)
		psd_set_errmsg(ret, "%s", r->msg);
	pthread_mutex_unlock(&w->lock);
	psd_kvw_req_free(r);
	return ret;
}

int psd_kvw_init_wait(struct psched_node *n, int ret, uint64_t req,
		      unsigned timeout_ms)
{
	if (!ret)
		ret = psched_wait(n, req, timeout_ms);
	/* Nobody pulls before rank 0's values are in. */
	return ret ? ret : psched_barrier(n, PSCHED_GROUP_WORKERS, timeout_ms);
}
