// SPDX-License-Identifier: MIT
/*
 * KV worker: push / pull / pushpull / init requests, with ByteScheduler's
 * scheduling built in (ARCHITECTURE.md, key decisions 1-3).
 *
 * A request is cut into chunks: per key, per server range (placement), and
 * within a range into pieces of the partition size of the config that the
 * key's step falls under (config epochs, cfgtab.h).  Chunks wait in one
 * priority queue (smaller priority = sooner, ties in arrival order; plain
 * arrival order in FIFO mode) and start only through the credit gate: a
 * chunk may start while the bytes in flight plus its own fit the credit, or
 * when nothing is in flight.  A push or pushpull chunk is in flight from its
 * start until the server acknowledges its bytes; pull chunks carry no
 * credit (they move no bytes out and cannot hold a push back).
 *
 * Why not until a pushpull's pull answer, as ByteScheduler counts it: that
 * answer waits for every other worker's push of the chunk, and two workers
 * whose senders started chunks in different orders (requests arrive at
 * slightly different times) then each hold their credit for chunks the
 * other cannot start: a deadlock, seen in test_sched.sh.  So the server
 * acks a pushpull chunk on receipt, and the answer follows when ready.
 *
 * Who sends: a request that fits in one small message and finds the queue
 * empty is sent by the caller at once (no thread hand-off, for latency);
 * everything else is sent by the worker's sender thread, so a push returns
 * at once and compute overlaps communication.  The van thread never sends
 * payloads: it only settles chunks and wakes the sender.
 *
 * Config switches are two-phase (proto/psched.proto, Config): between a
 * PREPARE and its COMMIT (or ABORT), pushes of steps beyond the highest
 * step this worker had pushed are parked, so no chunk is ever cut with a
 * config its servers and the other workers do not use for that step.
 *
 * Every wait is bounded and a dead server fails every request that still
 * needs it, naming the server, key and step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfgtab.h"
#include "chunkq.h"
#include "node.h"
#include "placement.h"
#include "role.h"
#include "command.h"
#include "timeline.h"

#define KVW_IDX_BITS 24u
#define KVW_IDX_MASK ((1u << KVW_IDX_BITS) - 1u)
/* Requests up to this many payload bytes in one chunk go out inline. */
#define KVW_INLINE_MAX (256u * 1024u)

struct kvw_key {
	uint64_t key;
	uint64_t total;
	uint8_t dtype;
	uint64_t step;	   /* pushes of this key so far */
	uint64_t last_req; /* duplicate-key check within a request */
	bool used;
};

struct kvw_srv {
	unsigned pending; /* chunks still owed by this server */
	unsigned busy;	  /* payload being received from it now */
};

struct kvw_slot {
	uint64_t key;
	uint64_t total;
	uint64_t step;
	uint8_t *dst;	    /* pull destination, NULL for push */
	const uint8_t *src; /* push source, NULL for pull */
	uint32_t epoch;	    /* config the step is cut with */
	uint64_t part;	    /* partition bytes of that config */
};

enum kvw_chunk_state {
	KVW_CH_QUEUED = 0,
	KVW_CH_SENDING,
	KVW_CH_SENT,
	KVW_CH_DONE,
};

struct kvw_chunk {
	struct psd_chunk_node node; /* node.len: bytes the credit counts */
	struct kvw_req *req;
	uint64_t off; /* absolute tensor offset */
	uint64_t span;
	uint64_t part; /* chunk size of this range's layout (header) */
	uint32_t slot;
	uint16_t srank;
	uint8_t state;
	bool credited; /* its bytes count against the credit now */
	uint64_t t_start;
	uint64_t t_push; /* credit given back */
};

struct kvw_req {
	uint64_t id;
	uint8_t type;
	uint8_t dtype;
	uint8_t flags;
	int priority;
	unsigned pending; /* chunks not yet settled (+1 per hold) */
	unsigned busy;	  /* receives in progress into caller memory */
	unsigned sending; /* chunks being sent by some thread now */
	bool done;
	bool cancelled;	      /* late answers are discarded */
	bool parked;	      /* waiting for a config commit */
	uint64_t deadline_ms; /* callback requests: fail after this */
	int err;
	char msg[320];
	psched_done_fn *cb;
	void *cb_arg;
	struct psd_list park_link;
	struct kvw_srv *srv; /* [num_server], indexed by server rank */
	struct kvw_chunk *chunks;
	size_t nchunks;
	size_t nslots;
	struct kvw_slot slots[];
};

/* Progress reported to the scheduler's autotuner. */
struct kvw_metrics {
	uint64_t bytes_pushed;
	uint64_t bytes_pulled;
	uint64_t last_step; /* max_step when the last report went out */
	uint64_t last_us;   /* and when; 0: nothing pushed yet */
};

struct psd_kvw {
	pthread_mutex_t lock;
	pthread_cond_t cond;	  /* request completion, receives drained */
	pthread_cond_t send_cond; /* sender thread: work may start */
	struct kvw_req **reqs;	  /* by index; id low bits */
	uint32_t *free_idx;
	size_t nfree;
	size_t cap;
	uint64_t gen;
	struct kvw_key *keys; /* open addressing by key */
	size_t kcap;
	size_t kcount;
	uint64_t max_step; /* highest step pushed of any key */

	bool fifo;
	struct psd_chunkq q;
	struct psd_credit credit;
	uint32_t credit_epoch; /* config whose credit is in force */
	struct psd_cfgtab cfgs;
	bool preparing; /* a PREPARE is open */
	uint32_t prep_epoch;
	uint64_t prep_step; /* pushes beyond this step park */
	struct psd_list parked;

	pthread_t sender;
	bool sender_started;
	bool stop;
	struct psd_timeline tl;
	struct kvw_metrics met; /* autotuner reports, see kvw_metrics_note */
};

static struct psd_kvw *kvw_of(struct psched_node *n)
{
	return n->app_state;
}

static uint64_t kvw_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static struct kvw_key *kvw_key_find(struct psd_kvw *w, uint64_t key)
{
	size_t i = (size_t)kvw_hash(key) & (w->kcap - 1);

	while (w->keys[i].used) {
		if (w->keys[i].key == key)
			return &w->keys[i];
		i = (i + 1) & (w->kcap - 1);
	}
	return NULL;
}

static int kvw_key_grow(struct psd_kvw *w)
{
	struct kvw_key *old = w->keys;
	size_t oldcap = w->kcap, i, j;

	w->kcap = oldcap ? oldcap * 2 : 1024;
	w->keys = calloc(w->kcap, sizeof(*w->keys));
	if (!w->keys) {
		w->keys = old;
		w->kcap = oldcap;
		return -ENOMEM;
	}
	for (i = 0; i < oldcap; i++) {
		if (!old[i].used)
			continue;
		j = (size_t)kvw_hash(old[i].key) & (w->kcap - 1);
		while (w->keys[j].used)
			j = (j + 1) & (w->kcap - 1);
		w->keys[j] = old[i];
	}
	free(old);
	return 0;
}

static struct kvw_key *kvw_key_add(struct psd_kvw *w, uint64_t key)
{
	size_t i;

	if ((w->kcount + 1) * 2 > w->kcap && kvw_key_grow(w))
		return NULL;
	i = (size_t)kvw_hash(key) & (w->kcap - 1);
	while (w->keys[i].used)
		i = (i + 1) & (w->kcap - 1);
	w->keys[i].used = true;
	w->keys[i].key = key;
	w->kcount++;
	return &w->keys[i];
}

static struct kvw_req *kvw_req_find(struct psd_kvw *w, uint64_t id)
{
	size_t idx = (size_t)(id & KVW_IDX_MASK);
	struct kvw_req *r;

	if (idx >= w->cap)
		return NULL;
	r = w->reqs[idx];
	return r && r->id == id ? r : NULL;
}

static int kvw_req_register(struct psd_kvw *w, struct kvw_req *r)
{
	size_t i, ncap;

	if (!w->nfree) {
		ncap = w->cap ? w->cap * 2 : 256;
		if (ncap > KVW_IDX_MASK)
			return -EBUSY;
		struct kvw_req **nr = realloc(w->reqs, ncap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		w->reqs = nr;
		uint32_t *nf = realloc(w->free_idx, ncap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		w->free_idx = nf;
		for (i = w->cap; i < ncap; i++) {
			w->reqs[i] = NULL;
			w->free_idx[w->nfree++] =
				(uint32_t)(ncap - 1 - (i - w->cap));
		}
		w->cap = ncap;
	}
	i = w->free_idx[--w->nfree];
	r->id = (++w->gen << KVW_IDX_BITS) | i;
	w->reqs[i] = r;
	return 0;
}

static void kvw_req_unregister(struct psd_kvw *w, struct kvw_req *r)
{
	size_t idx = (size_t)(r->id & KVW_IDX_MASK);

	if (idx < w->cap && w->reqs[idx] == r) {
		w->reqs[idx] = NULL;
		w->free_idx[w->nfree++] = (uint32_t)idx;
	}
}

static void kvw_req_free(struct kvw_req *r)
{
	free(r->chunks);
	free(r->srv);
	free(r);
}

/* Lock held.  First error wins; the request completes when nothing is
 * pending. */
static void kvw_req_error(struct kvw_req *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kvw_req_error(struct kvw_req *r, int err, const char *fmt, ...)
{
	va_list ap;

	if (r->err)
		return;
	r->err = err;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

/*
 * Lock held.  One hold of @r is released.  Returns true if the request
 * just completed and its callback should run (after unlock).
 */
static bool kvw_req_settle(struct psd_kvw *w, struct kvw_req *r)
{
	if (r->pending)
		r->pending--;
	if (r->pending || r->done)
		return false;
	r->done = true;
	pthread_cond_broadcast(&w->cond);
	return r->cb != NULL;
}

/* Lock held: wake the sender if the head of the queue may start. */
static void kvw_kick(struct psd_kvw *w)
{
	struct psd_chunk_node *head = psd_chunkq_peek(&w->q);

	if (head && !w->stop && psd_credit_can_start(&w->credit, head->len))
		pthread_cond_signal(&w->send_cond);
}

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
	if (r->type == PSD_MSG_PULL || r->type == PSD_MSG_PUSHPULL)
		rec.t_pull = now;
	psd_tl_add(&w->tl, &rec);
}

/* Lock held.  The server has @ch's bytes: its credit comes back. */
static void kvw_chunk_uncredit(struct psd_kvw *w, struct kvw_chunk *ch)
{
	if (!ch->credited)
		return;
	ch->credited = false;
	ch->t_push = psd_now_us();
	psd_credit_done(&w->credit, ch->node.len);
	kvw_kick(w);
}

/*
 * Lock held.  Chunk @ch is answered, failed or cancelled: give back its
 * credit (or take it off the queue) and release its hold on the request.
 */
static bool kvw_chunk_settle(struct psd_kvw *w, struct kvw_chunk *ch,
			     bool failed)
{
	struct kvw_req *r = ch->req;

	if (ch->state == KVW_CH_DONE)
		return false;
	if (ch->state == KVW_CH_QUEUED)
		psd_chunkq_remove(&w->q, &ch->node);
	else
		kvw_chunk_uncredit(w, ch);
	if (psd_tl_on(&w->tl))
		kvw_tl_record(w, ch, failed);
	ch->state = KVW_CH_DONE;
	if (r->srv[ch->srank].pending)
		r->srv[ch->srank].pending--;
	kvw_kick(w);
	return kvw_req_settle(w, r);
}

/* Callback requests free themselves once done and idle. */
static void kvw_req_run_cb(struct psd_kvw *w, struct kvw_req *r)
{
	r->cb(r->err, r->id, r->cb_arg);
	pthread_mutex_lock(&w->lock);
	kvw_req_unregister(w, r);
	pthread_mutex_unlock(&w->lock);
	kvw_req_free(r);
}

static const char *kvw_type_name(uint8_t type)
{
	return psd_msg_type_name(type);
}

/* Lock held.  Send one chunk; the lock is dropped around the send. */
static void kvw_chunk_send(struct psched_node *n, struct kvw_chunk *ch)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r = ch->req;
	const struct kvw_slot *s = &r->slots[ch->slot];
	bool payload = r->type == PSD_MSG_PUSH || r->type == PSD_MSG_PUSHPULL ||
		       (r->flags & PSD_F_HAS_VALUE);
	struct psd_hdr h = {
		.type = r->type,
		.dtype = r->dtype,
		.flags = r->flags,
		.sender = n->id,
		.key = s->key,
		.total = s->total,
		.offset = ch->off,
		.span = ch->span,
		.length = payload ? ch->span : 0,
		.part = ch->part,
		.step = s->step,
		.req = r->id,
		.slot = (uint32_t)(ch - r->chunks),
		.epoch = s->epoch,
		.priority = r->priority,
	};
	struct iovec iov = {
		.iov_base =
			payload ? (void *)(uintptr_t)(s->src + ch->off) : NULL,
		.iov_len = payload ? (size_t)ch->span : 0,
	};
	struct psd_peer *p = psd_node_peer(n, psd_server_id(ch->srank));
	bool fire = false;
	int ret;

	ch->state = KVW_CH_SENDING;
	ch->credited = true;
	ch->t_start = psd_now_us();
	/* The request cannot complete (and be freed by its callback or
	 * waiter) while its caller memory is on its way out. */
	r->sending++;
	r->pending++;
	pthread_mutex_unlock(&w->lock);
	ret = p->dead || !p->conn ? PSCHED_ENODEDEAD
				  : psd_conn_send(p->conn, &h, &iov, 1);
	pthread_mutex_lock(&w->lock);
	r->sending--;
	if (ch->state == KVW_CH_SENDING)
		ch->state = KVW_CH_SENT;
	if (ret && ch->state != KVW_CH_DONE) {
		kvw_req_error(r, ret,
			      "%s of key %llu (step %llu) to %s failed: %s",
			      kvw_type_name(r->type), (unsigned long long)h.key,
			      (unsigned long long)h.step, p->desc,
			      psched_strerror(ret));
		fire = kvw_chunk_settle(w, ch, true);
	}
	if (kvw_req_settle(w, r))
		fire = true;
	if (!r->sending)
		pthread_cond_broadcast(&w->cond);
	if (fire) {
		pthread_mutex_unlock(&w->lock);
		kvw_req_run_cb(w, r);
		pthread_mutex_lock(&w->lock);
	}
}

/* Lock held.  Start every chunk the queue and the credit allow. */
static void kvw_pump(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_chunk_node *node;

	while ((node = psd_sched_next(&w->q, &w->credit)))
		kvw_chunk_send(n,
			       psd_container_of(node, struct kvw_chunk, node));
}

static void kvw_req_cancel(struct psched_node *n, struct kvw_req *r);
static void kvw_req_timed_out(struct psched_node *n, struct kvw_req *r,
			      unsigned timeout_ms);

/*
 * Lock held (sender thread).  A request with a callback has nobody in
 * psched_wait() to bound it: fail it at the request timeout, naming what
 * it still waits for, like psched_wait() does.  One being sent right now
 * is left for the next round.
 */
static void kvw_expire(struct psched_node *n)
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
		kvw_req_timed_out(n, r, n->cfg.request_timeout_ms);
		psd_err("%s", r->msg);
		kvw_req_cancel(n, r);
		r->done = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		kvw_req_run_cb(w, r);
		pthread_mutex_lock(&w->lock);
	}
}

static void *kvw_sender_main(void *arg)
{
	struct psched_node *n = arg;
	struct psd_kvw *w = kvw_of(n);
	struct timespec ts;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		kvw_pump(n);
		kvw_expire(n);
		/* Timed, as a guard against a lost wake-up. */
		psd_deadline(&ts, 200);
		pthread_cond_timedwait(&w->send_cond, &w->lock, &ts);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int psd_kvw_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst);
int psd_kvw_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvw_chunk *ch;
	struct kvw_slot *s;
	struct kvw_req *r;

	if (!p || p->role != PSCHED_ROLE_SERVER ||
	    (h->type != PSD_MSG_PUSH_ACK && h->type != PSD_MSG_PULL_RESP)) {
		psd_err("dropping connection from %s: unexpected %s message",
			c->peer, psd_msg_type_name(h->type));
		return -EPROTO;
	}
	*dst = NULL;
	if (!h->length)
		return 0;
	pthread_mutex_lock(&w->lock);
	r = kvw_req_find(w, h->req);
	if (r && !r->cancelled && h->slot < r->nchunks) {
		ch = &r->chunks[h->slot];
		s = &r->slots[ch->slot];
		/* Only the exact bytes this chunk asked for, from its server.
		 */
		if (s->dst && s->key == h->key && s->total == h->total &&
		    ch->off == h->offset && ch->span == h->length &&
		    ch->srank == p->rank && ch->state != KVW_CH_DONE) {
			*dst = s->dst + h->offset;
			r->busy++;
			r->srv[p->rank].busy++;
		}
	}
	pthread_mutex_unlock(&w->lock);
	/* Late or unknown answers land in the scratch buffer. */
	return 0;
}

void psd_kvw_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload);
void psd_kvw_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvw_chunk *ch;
	struct kvw_req *r;
	bool fire = false;

	pthread_mutex_lock(&w->lock);
	r = kvw_req_find(w, h->req);
	ch = r && h->slot < r->nchunks ? &r->chunks[h->slot] : NULL;
	if (!ch || r->slots[ch->slot].key != h->key || ch->srank != p->rank) {
		pthread_mutex_unlock(&w->lock);
		psd_debug("discarding late %s for request %llu from %s",
			  psd_msg_type_name(h->type),
			  (unsigned long long)h->req, c->peer);
		return;
	}
	if (h->length && r->slots[ch->slot].dst && r->srv[p->rank].busy &&
	    payload == r->slots[ch->slot].dst + h->offset) {
		r->busy--;
		r->srv[p->rank].busy--;
	}
	if (!h->status && h->type == PSD_MSG_PUSH_ACK &&
	    r->type == PSD_MSG_PUSHPULL) {
		/* Its bytes are in; the pull answer comes later. */
		kvw_chunk_uncredit(w, ch);
		pthread_mutex_unlock(&w->lock);
		return;
	}
	if (h->status)
		kvw_req_error(r, h->status,
			      "%s rejected %s of key %llu (step %llu): %s",
			      p->desc, kvw_type_name(r->type),
			      (unsigned long long)h->key,
			      (unsigned long long)r->slots[ch->slot].step,
			      psched_strerror(h->status));
	else if (h->type == PSD_MSG_PULL_RESP && h->length != ch->span)
		kvw_req_error(r, -EPROTO,
			      "%s answered %s of key %llu (step %llu) with "
			      "%llu bytes instead of %llu",
			      p->desc, kvw_type_name(r->type),
			      (unsigned long long)h->key,
			      (unsigned long long)r->slots[ch->slot].step,
			      (unsigned long long)h->length,
			      (unsigned long long)ch->span);
	fire = kvw_chunk_settle(w, ch, h->status != 0);
	if (!r->busy)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (fire)
		kvw_req_run_cb(w, r);
}

/* A server died: fail everything that still needs it. */
static void kvw_peer_failed(struct psched_node *n, struct psd_peer *p, int err,
			    const char *why)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req **fire;
	size_t i, j, nf = 0;

	if (p->role != PSCHED_ROLE_SERVER)
		return;
	/* No more payload from it lands in caller memory (we are the van
	 * thread, so no receive is in progress right now). */
	if (p->conn)
		psd_conn_close(p->conn);
	pthread_mutex_lock(&w->lock);
	fire = calloc(w->cap + 1, sizeof(*fire));
	for (i = 0; i < w->cap; i++) {
		struct kvw_req *r = w->reqs[i];
		bool f = false;

		if (!r || !r->srv[p->rank].pending)
			continue;
		kvw_req_error(r, err,
			      "%s of key %llu (step %llu) failed: %s died (%s)",
			      kvw_type_name(r->type),
			      (unsigned long long)r->slots[0].key,
			      (unsigned long long)r->slots[0].step, p->desc,
			      why);
		r->busy -= r->srv[p->rank].busy;
		r->srv[p->rank].busy = 0;
		for (j = 0; j < r->nchunks; j++)
			if (r->chunks[j].srank == p->rank)
				f |= kvw_chunk_settle(w, &r->chunks[j], true);
		if (f && fire)
			fire[nf++] = r;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < nf; i++)
		kvw_req_run_cb(w, fire[i]);
	free(fire);
}

/* Lock held.  Check one key of a new request against what this worker
 * knows of it (creating it unless pulling). */
static int kvw_key_check(struct psd_kvw *w, struct psched_node *n, uint8_t type,
			 uint64_t key, uint64_t len, enum psched_dtype dtype,
			 struct kvw_key **out)
{
	const char *tn = kvw_type_name(type);
	struct kvw_key *k;

	if (!len || len % psched_dtype_size(dtype) ||
	    len > n->cfg.max_tensor_bytes)
		return psd_set_errmsg(
			PSCHED_ESIZE,
			"%s of key %llu: length %llu is zero, not "
			"a multiple of the element size or above "
			"PS_MAX_TENSOR_BYTES",
			tn, (unsigned long long)key, (unsigned long long)len);
	k = kvw_key_find(w, key);
	if (!k && type == PSD_MSG_PULL)
		return psd_set_errmsg(PSCHED_EUNKNOWNKEY,
				      "pull of key %llu: the key was never "
				      "pushed or initialised by this worker",
				      (unsigned long long)key);
	if (!k) {
		k = kvw_key_add(w, key);
		if (!k)
			return psd_set_errmsg(-ENOMEM, "no memory for keys");
		k->total = len;
		k->dtype = (uint8_t)dtype;
	}
	if (k->total != len || k->dtype != dtype)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "%s of key %llu: %llu bytes of dtype %d, "
				      "but the key has %llu bytes of dtype %d",
				      tn, (unsigned long long)key,
				      (unsigned long long)len, (int)dtype,
				      (unsigned long long)k->total,
				      (int)k->dtype);
	if (k->last_req == w->gen)
		return psd_set_errmsg(-EINVAL, "%s: key %llu appears twice", tn,
				      (unsigned long long)key);
	k->last_req = w->gen;
	*out = k;
	return 0;
}

static bool kvw_is_push(uint8_t type)
{
	return type == PSD_MSG_PUSH || type == PSD_MSG_PUSHPULL;
}

/* Lock held.  Validate the keys and build the request; steps are only
 * advanced once every key passed. */
static int kvw_req_build(struct psched_node *n, uint8_t type,
			 const uint64_t *keys, size_t nkeys,
			 const void *const *push_vals, void *const *pull_vals,
			 const uint64_t *lens, enum psched_dtype dtype,
			 struct kvw_req **out)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_key *k = NULL;
	struct kvw_req *r;
	size_t i;
	int ret;

	if (!nkeys || !keys || !lens || (unsigned)dtype > PSCHED_F16)
		return psd_set_errmsg(-EINVAL,
				      "%s: no keys, no lengths or a bad dtype",
				      kvw_type_name(type));
	r = calloc(1, sizeof(*r) + nkeys * sizeof(r->slots[0]));
	if (!r)
		return -ENOMEM;
	r->srv = calloc(n->num_server, sizeof(*r->srv));
	if (!r->srv) {
		free(r);
		return -ENOMEM;
	}
	r->type = type;
	r->dtype = (uint8_t)dtype;
	r->nslots = nkeys;
	psd_list_init(&r->park_link);
	w->gen++;
	for (i = 0; i < nkeys; i++) {
		ret = kvw_key_check(w, n, type, keys[i], lens[i], dtype, &k);
		if (ret) {
			kvw_req_free(r);
			return ret;
		}
		r->slots[i].key = keys[i];
		r->slots[i].total = lens[i];
		r->slots[i].dst = pull_vals ? pull_vals[i] : NULL;
		r->slots[i].src = push_vals ? push_vals[i] : NULL;
		r->slots[i].step = k->step;
	}
	for (i = 0; i < nkeys && kvw_is_push(type); i++) {
		k = kvw_key_find(w, keys[i]);
		r->slots[i].step = ++k->step;
		if (k->step > w->max_step)
			w->max_step = k->step;
		/* A step beyond what the open PREPARE was told of waits for
		 * its commit. */
		if (w->preparing && k->step > w->prep_step)
			r->parked = true;
	}
	*out = r;
	return 0;
}

/* Lock held.  Chunk size of server range @len of slot @s. */
static uint64_t kvw_chunk_size(const struct psd_kvw *w, const struct kvw_req *r,
			       const struct kvw_slot *s, uint64_t len)
{
	unsigned esize = psched_dtype_size((enum psched_dtype)r->dtype);

	/* Raw bytes are not summed but replaced by one push: cut into chunks,
	 * each chunk's last writer could differ, mixing workers' pushes. */
	if (w->fifo || r->type == PSD_MSG_INIT || !s->part ||
	    r->dtype == PSCHED_RAW)
		return len;
	return psd_part_chunk_size(s->part, esize, len);
}

/* Lock held.  The config of each slot's step; a push of a step under a
 * newer config switches the credit too. */
static void kvw_req_config(struct psd_kvw *w, struct kvw_req *r)
{
	const struct psd_cfg_entry *e;
	size_t i;

	for (i = 0; i < r->nslots; i++) {
		struct kvw_slot *s = &r->slots[i];

		e = psd_cfgtab_for_step(&w->cfgs, s->step);
		s->epoch = e->epoch;
		s->part = e->partition_bytes;
		if (kvw_is_push(r->type) && e->epoch > w->credit_epoch &&
		    !w->fifo) {
			w->credit_epoch = e->epoch;
			psd_credit_set(&w->credit, e->credit_bytes);
			psd_info("config epoch %u in force from step %llu: "
				 "partition %llu bytes, credit %llu bytes",
				 e->epoch,
				 (unsigned long long)e->apply_from_step,
				 (unsigned long long)e->partition_bytes,
				 (unsigned long long)e->credit_bytes);
		}
	}
}

/* Lock held.  Cut @r into chunks and queue them. */
static int kvw_req_layout(struct psched_node *n, struct kvw_req *r)
{
	struct psd_kvw *w = kvw_of(n);
	unsigned esize = psched_dtype_size((enum psched_dtype)r->dtype);
	uint64_t off, len, c, cnt, total = 0, j;
	size_t i, k = 0;
	unsigned s;
	int ret;

	kvw_req_config(w, r);
	for (i = 0; i < r->nslots; i++) {
		for (s = 0; s < n->num_server; s++) {
			psd_place(r->slots[i].key, r->slots[i].total, esize,
				  n->num_server, s, &off, &len);
			if (len)
				total += psd_part_count(
					len, kvw_chunk_size(w, r, &r->slots[i],
							    len));
		}
	}
	if (total > UINT32_MAX)
		return psd_set_errmsg(-E2BIG,
				      "%s of key %llu: %llu chunks; raise "
				      "PS_PARTITION_BYTES",
				      kvw_type_name(r->type),
				      (unsigned long long)r->slots[0].key,
				      (unsigned long long)total);
	r->chunks = calloc(total, sizeof(*r->chunks));
	if (!r->chunks)
		return -ENOMEM;
	r->nchunks = total;
	for (i = 0; i < r->nslots; i++) {
		for (s = 0; s < n->num_server; s++) {
			psd_place(r->slots[i].key, r->slots[i].total, esize,
				  n->num_server, s, &off, &len);
			if (!len)
				continue;
			c = kvw_chunk_size(w, r, &r->slots[i], len);
			cnt = psd_part_count(len, c);
			for (j = 0; j < cnt; j++, k++) {
				struct kvw_chunk *ch = &r->chunks[k];

				ch->req = r;
				ch->slot = (uint32_t)i;
				ch->srank = (uint16_t)s;
				ch->part = c == len ? 0 : c;
				psd_part_chunk(off, len, c, j, &ch->off,
					       &ch->span);
				ch->node.len = kvw_is_push(r->type) ||
							       (r->flags &
								PSD_F_HAS_VALUE)
						       ? ch->span
						       : 0;
				r->srv[s].pending++;
			}
		}
	}
	for (k = 0; k < r->nchunks; k++) {
		ret = psd_chunkq_push(&w->q, &r->chunks[k].node, r->priority);
		if (ret) {
			while (k--)
				psd_chunkq_remove(&w->q, &r->chunks[k].node);
			free(r->chunks);
			r->chunks = NULL;
			r->nchunks = 0;
			memset(r->srv, 0, n->num_server * sizeof(*r->srv));
			return psd_set_errmsg(ret, "no memory to queue chunks");
		}
	}
	r->pending += (unsigned)r->nchunks;
	return 0;
}

/* Lock held.  Whether @r goes out on the caller's thread right now. */
static bool kvw_send_inline(struct psd_kvw *w, const struct kvw_req *r)
{
	return r->nchunks == 1 && psd_chunkq_len(&w->q) == 1 &&
	       r->chunks[0].span <= KVW_INLINE_MAX &&
	       psd_credit_can_start(&w->credit, r->chunks[0].node.len);
}

/*
 * Autotuner metrics (docs/tuner.md).  A worker's step is its highest push
 * step over all keys; when it advances and KVW_METRICS_MIN_US passed since
 * the last report (every step if steps are slower), the worker tells the
 * scheduler the steps it completed since then and their mean time.
 * Called on the issuing thread without the worker lock held.
 */
#define KVW_METRICS_MIN_US 20000

static void kvw_metrics_note(struct psched_node *n, uint8_t type,
			     const uint64_t *lens, size_t nkeys)
{
	struct psd_kvw *w = kvw_of(n);
	Psched__Metrics mt = PSCHED__METRICS__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint64_t now = psd_now_us(), bytes = 0;
	struct kvw_metrics *km = &w->met;
	bool send = false;
	size_t i;

	for (i = 0; i < nkeys; i++)
		bytes += lens[i];
	pthread_mutex_lock(&w->lock);
	if (kvw_is_push(type))
		km->bytes_pushed += bytes;
	if (type == PSD_MSG_PULL || type == PSD_MSG_PUSHPULL)
		km->bytes_pulled += bytes;
	if (!km->last_us && w->max_step) {
		km->last_us = now;
		km->last_step = w->max_step;
	} else if (km->last_us && w->max_step > km->last_step &&
		   now - km->last_us >= KVW_METRICS_MIN_US) {
		/* Steps last_step .. max_step - 1 completed since. */
		mt.step = w->max_step - 1;
		mt.step_time_s = (double)(now - km->last_us) / 1e6 /
				 (double)(w->max_step - km->last_step);
		mt.bytes_pushed = km->bytes_pushed;
		mt.bytes_pulled = km->bytes_pulled;
		mt.epoch = w->credit_epoch;
		km->last_us = now;
		km->last_step = w->max_step;
		send = true;
	}
	pthread_mutex_unlock(&w->lock);
	if (!send)
		return;
	m.body_case = PSCHED__CONTROL__BODY_METRICS;
	m.metrics = &mt;
	if (psd_node_send_sched(n, &m))
		psd_debug("cannot send metrics of step %llu to the scheduler",
			  (unsigned long long)mt.step);
}

static int kvw_issue(struct psched_node *n, uint8_t type, const uint64_t *keys,
		     size_t nkeys, const void *const *push_vals,
		     void *const *pull_vals, const uint64_t *lens,
		     enum psched_dtype dtype, int priority, uint8_t flags,
		     psched_done_fn *cb, void *arg, uint64_t *req)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r = NULL;
	bool fire;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL, "only workers push and pull");
	if (!req && !cb)
		return psd_set_errmsg(-EINVAL, "need a request id or callback");
	pthread_mutex_lock(&w->lock);
	if (n->fatal) {
		pthread_mutex_unlock(&w->lock);
		return psd_set_errmsg(n->fatal, "%s", n->fatal_msg);
	}
	ret = kvw_req_build(n, type, keys, nkeys, push_vals, pull_vals, lens,
			    dtype, &r);
	if (ret) {
		pthread_mutex_unlock(&w->lock);
		return ret;
	}
	ret = kvw_req_register(w, r);
	if (ret) {
		pthread_mutex_unlock(&w->lock);
		kvw_req_free(r);
		return ret;
	}
	r->cb = cb;
	r->deadline_ms = psd_now_ms() + n->cfg.request_timeout_ms;
	r->cb_arg = arg;
	r->flags = flags;
	r->priority = w->fifo ? 0 : priority;
	r->pending = 1; /* held until issued */
	if (req)
		*req = r->id;
	if (r->parked) {
		r->pending++; /* held until the config commit */
		psd_list_add_tail(&w->parked, &r->park_link);
	} else {
		ret = kvw_req_layout(n, r);
		if (ret) {
			kvw_req_error(r, ret, "%s", psched_errmsg());
			r->pending = 1;
		} else if (kvw_send_inline(w, r)) {
			struct psd_chunk_node *node =
				psd_sched_next(&w->q, &w->credit);

			if (node)
				kvw_chunk_send(
					n,
					psd_container_of(node, struct kvw_chunk,
							 node));
			kvw_kick(w);
		} else {
			kvw_kick(w);
		}
	}
	fire = kvw_req_settle(w, r);
	pthread_mutex_unlock(&w->lock);
	if (fire)
		kvw_req_run_cb(w, r);
	kvw_metrics_note(n, type, lens, nkeys);
	return 0;
}

int psched_push(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		const void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req)
{
	if (!vals)
		return psd_set_errmsg(-EINVAL, "push without values");
	return kvw_issue(n, PSD_MSG_PUSH, keys, nkeys, vals, NULL, lens, dtype,
			 priority, 0, cb, arg, req);
}

int psched_pull(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req)
{
	if (!vals)
		return psd_set_errmsg(-EINVAL, "pull without buffers");
	return kvw_issue(n, PSD_MSG_PULL, keys, nkeys, NULL, vals, lens, dtype,
			 priority, 0, cb, arg, req);
}

int psched_pushpull(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		    const void *const *push_vals, void *const *pull_vals,
		    const uint64_t *lens, enum psched_dtype dtype, int priority,
		    psched_done_fn *cb, void *arg, uint64_t *req)
{
	if (!push_vals || !pull_vals)
		return psd_set_errmsg(-EINVAL, "pushpull without buffers");
	return kvw_issue(n, PSD_MSG_PUSHPULL, keys, nkeys, push_vals, pull_vals,
			 lens, dtype, priority, 0, cb, arg, req);
}

int psched_init(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		const void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, unsigned timeout_ms)
{
	uint64_t req;
	int ret;

	ret = kvw_issue(n, PSD_MSG_INIT, keys, nkeys, vals, NULL, lens, dtype,
			0, n->rank == 0 && vals ? PSD_F_HAS_VALUE : 0, NULL,
			NULL, &req);
	if (ret)
		return ret;
	ret = psched_wait(n, req, timeout_ms);
	if (ret)
		return ret;
	/* Nobody pulls before rank 0's values are in. */
	return psched_barrier(n, PSCHED_GROUP_WORKERS, timeout_ms);
}

/* Lock held: name the servers that still owe answers. */
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

/* Lock held: @r failed its deadline; its message names what it waits for. */
static void kvw_req_timed_out(struct psched_node *n, struct kvw_req *r,
			      unsigned timeout_ms)
{
	char who[256];

	kvw_describe_pending(n, r, who, sizeof(who));
	kvw_req_error(r, -ETIMEDOUT,
		      "%s of key %llu (step %llu%s) timed out after %u ms "
		      "waiting for %s",
		      kvw_type_name(r->type),
		      (unsigned long long)r->slots[0].key,
		      (unsigned long long)r->slots[0].step,
		      r->nslots > 1 ? ", and more keys" : "", timeout_ms, who);
}

/* Lock held.  Give up on @r: queued chunks are dropped, credit of chunks
 * in flight is given back, later answers are discarded; receives in
 * progress into caller memory are stopped by closing their connection. */
static void kvw_req_cancel(struct psched_node *n, struct kvw_req *r)
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
		kvw_chunk_settle(w, &r->chunks[i], true);
	for (s = 0; s < n->num_server; s++)
		if (r->srv[s].busy)
			psd_conn_close(
				psd_node_peer(n, psd_server_id(s))->conn);
	while (r->busy || r->sending)
		pthread_cond_wait(&w->cond, &w->lock);
}

int psched_wait(struct psched_node *n, uint64_t id, unsigned timeout_ms)
{
	struct psd_kvw *w = kvw_of(n);
	struct timespec ts;
	struct kvw_req *r;
	int ret = 0;

	if (!w)
		return psd_set_errmsg(-EINVAL, "only workers wait on requests");
	if (!timeout_ms)
		timeout_ms = n->cfg.request_timeout_ms;
	psd_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&w->lock);
	r = kvw_req_find(w, id);
	if (!r || r->cb) {
		pthread_mutex_unlock(&w->lock);
		return psd_set_errmsg(-ENOENT,
				      "no request %llu to wait for "
				      "(already waited, or it has "
				      "a callback)",
				      (unsigned long long)id);
	}
	while (!r->done && !ret)
		ret = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	if (!r->done)
		kvw_req_timed_out(n, r, timeout_ms);
	kvw_req_cancel(n, r);
	kvw_req_unregister(w, r);
	ret = r->err;
	if (ret)
		psd_set_errmsg(ret, "%s", r->msg);
	pthread_mutex_unlock(&w->lock);
	kvw_req_free(r);
	return ret;
}

/* Lock held.  A PREPARE closed (commit or abort): lay out and queue the
 * parked requests, oldest first. */
static void kvw_unpark(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req **fire = NULL;
	struct psd_list *pos, *tmp;
	size_t nf = 0, cnt = 0, i;

	psd_list_for_each (pos, &w->parked)
		cnt++;
	if (cnt)
		fire = calloc(cnt, sizeof(*fire));
	psd_list_for_each_safe (pos, tmp, &w->parked) {
		struct kvw_req *r =
			psd_container_of(pos, struct kvw_req, park_link);
		int ret;

		psd_list_del(&r->park_link);
		r->parked = false;
		ret = kvw_req_layout(n, r);
		if (ret)
			kvw_req_error(r, ret, "%s of key %llu (step %llu): %s",
				      kvw_type_name(r->type),
				      (unsigned long long)r->slots[0].key,
				      (unsigned long long)r->slots[0].step,
				      psched_strerror(ret));
		if (kvw_req_settle(w, r) && fire)
			fire[nf++] = r;
	}
	kvw_kick(w);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < nf; i++)
		kvw_req_run_cb(w, fire[i]);
	free(fire);
	pthread_mutex_lock(&w->lock);
}

static void kvw_send_ack(struct psched_node *n, uint32_t epoch, uint64_t step)
{
	Psched__ConfigAck a = PSCHED__CONFIG_ACK__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	a.epoch = epoch;
	a.max_step = step;
	m.body_case = PSCHED__CONTROL__BODY_CONFIG_ACK;
	m.config_ack = &a;
	if (psd_node_send_sched(n, &m))
		psd_warn("cannot acknowledge config epoch %u to the scheduler",
			 epoch);
}

/* Config message from the scheduler (van thread). */
static void kvw_config(struct psched_node *n, const Psched__Config *m)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_cfg_entry e = { .epoch = m->epoch,
				   .partition_bytes = m->partition_bytes,
				   .credit_bytes = m->credit_bytes,
				   .apply_from_step = m->apply_from_step };
	uint64_t step;
	int ret = 0;

	pthread_mutex_lock(&w->lock);
	switch (m->phase) {
	case PSCHED__CONFIG__PHASE__PREPARE:
		w->preparing = true;
		w->prep_epoch = m->epoch;
		w->prep_step = w->max_step;
		step = w->max_step;
		pthread_mutex_unlock(&w->lock);
		kvw_send_ack(n, m->epoch, step);
		return;
	case PSCHED__CONFIG__PHASE__COMMIT:
		step = w->preparing && w->prep_epoch == m->epoch ? w->prep_step
								 : w->max_step;
		if (m->epoch && m->apply_from_step <= step)
			psd_err("config epoch %u starts at step %llu, but this "
				"worker already pushed step %llu",
				m->epoch,
				(unsigned long long)m->apply_from_step,
				(unsigned long long)step);
		ret = psd_cfgtab_add(&w->cfgs, &e);
		if (ret && ret != -EALREADY)
			psd_err("config epoch %u refused: %s", m->epoch,
				psched_strerror(ret));
		break;
	default:
		psd_info("config epoch %u aborted by the scheduler", m->epoch);
		break;
	}
	if (w->preparing && w->prep_epoch == m->epoch) {
		w->preparing = false;
		kvw_unpark(n);
	}
	pthread_mutex_unlock(&w->lock);
}

int psched_timeline_start(struct psched_node *n, size_t max_events)
{
	struct psd_kvw *w = n ? kvw_of(n) : NULL;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL, "only workers keep a timeline");
	pthread_mutex_lock(&w->lock);
	ret = psd_tl_start(&w->tl, max_events);
	pthread_mutex_unlock(&w->lock);
	return ret ? psd_set_errmsg(ret, "no memory for the timeline") : 0;
}

int psched_timeline_write(struct psched_node *n, const char *path)
{
	struct psd_kvw *w = n ? kvw_of(n) : NULL;
	struct psd_tl_rec *copy;
	uint64_t t0, dropped;
	size_t cnt;
	FILE *f;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER || !path)
		return psd_set_errmsg(-EINVAL, "only workers keep a timeline");
	pthread_mutex_lock(&w->lock);
	cnt = w->tl.n;
	t0 = w->tl.t0;
	dropped = w->tl.dropped;
	copy = malloc((cnt ? cnt : 1) * sizeof(*copy));
	if (copy && cnt)
		memcpy(copy, w->tl.v, cnt * sizeof(*copy));
	pthread_mutex_unlock(&w->lock);
	if (!copy)
		return psd_set_errmsg(-ENOMEM, "no memory for the timeline");
	f = fopen(path, "w");
	if (!f) {
		ret = psd_neg_errno();
		free(copy);
		return psd_set_errmsg(ret, "timeline: cannot write %s: %s",
				      path, psched_strerror(ret));
	}
	ret = psd_tl_write_json(f, copy, cnt, t0, dropped, n->id);
	if (fclose(f) && !ret)
		ret = -EIO;
	free(copy);
	return ret ? psd_set_errmsg(ret, "timeline: error writing %s", path)
		   : 0;
}

static int kvw_app_rx_header(struct psched_node *n, struct psd_conn *c,
			     const struct psd_hdr *h, void **dst)
{
	return psd_kvw_rx_header(n, c, h, dst);
}

static void kvw_destroy(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	size_t i;

	if (!w)
		return;
	if (w->sender_started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_broadcast(&w->send_cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->sender, NULL);
	}
	for (i = 0; i < w->cap; i++)
		if (w->reqs[i])
			kvw_req_free(w->reqs[i]);
	free(w->reqs);
	free(w->free_idx);
	free(w->keys);
	psd_chunkq_fini(&w->q);
	psd_cfgtab_fini(&w->cfgs);
	psd_tl_fini(&w->tl);
	pthread_cond_destroy(&w->send_cond);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
	n->app_state = NULL;
}

static void kvw_stats(const struct psched_node *n, struct psched_stats *out)
{
	struct psd_kvw *w = n->app_state;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	out->chunks_started = w->credit.started;
	out->max_in_flight_bytes = w->credit.max_in_flight_seen;
	out->credit_bytes = w->credit.credit;
	out->config_epoch = psd_cfgtab_last(&w->cfgs)->epoch;
	pthread_mutex_unlock(&w->lock);
}

static const struct psd_app kvw_app = {
	.stats = kvw_stats,
	.rx_header = kvw_app_rx_header,
	.rx_data = psd_kvw_rx_data,
	.peer_failed = kvw_peer_failed,
	.config = kvw_config,
	.rx_control = psd_kvw_cmd_rx,
	.destroy = kvw_destroy,
};

static int kvw_init_sched(struct psched_node *n, struct psd_kvw *w)
{
	int ret;

	w->fifo = !strcmp(n->cfg.scheduling, "fifo");
	psd_list_init(&w->parked);
	ret = psd_chunkq_init(&w->q, 1024, w->fifo ? PSD_CHUNKQ_FIFO : 0);
	if (ret)
		return ret;
	psd_credit_init(&w->credit, w->fifo ? 0 : n->cfg.credit_bytes);
	return psd_cfgtab_init(&w->cfgs, w->fifo ? 0 : n->cfg.partition_bytes,
			       w->fifo ? 0 : n->cfg.credit_bytes);
}

int psd_kvw_attach(struct psched_node *n)
{
	struct psd_kvw *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int ret;

	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_cond_init(&w->send_cond, &ca);
	pthread_condattr_destroy(&ca);
	n->app_state = w;
	n->app = &kvw_app;
	ret = kvw_key_grow(w);
	if (!ret)
		ret = kvw_init_sched(n, w);
	if (!ret) {
		ret = -pthread_create(&w->sender, NULL, kvw_sender_main, n);
		w->sender_started = !ret;
	}
	if (ret) {
		kvw_destroy(n);
		return ret;
	}
	return 0;
}
