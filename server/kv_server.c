// SPDX-License-Identifier: MIT
/*
 * KV server: stores its byte range of every key, aggregates pushes
 * (dist_sync: the W pushes of a step are summed chunk by chunk, then the
 * sum replaces the stored value; async: each push is applied at once) and
 * answers pulls, queueing early ones until their version exists.
 *
 * All state is touched only by the van thread, so there are no locks.
 * Payloads land in place where that is safe (the merge buffer, with one
 * worker) and otherwise in the connection's reusable scratch buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfgtab.h"
#include "node.h"
#include "placement.h"
#include "role.h"
#include "command.h"
#include "updater.h"

struct kvs_wait {
	struct psd_list link;
	struct psd_conn *conn; /* holds a reference */
	struct psd_hdr h;      /* the request */
	uint64_t want;	       /* version that answers it */
	void *buf;	       /* held push payload (early step), owned */
};

struct kvs_entry {
	uint64_t key;
	uint64_t total;
	uint8_t dtype;
	uint64_t off; /* this server's range */
	uint64_t len;
	uint8_t *value;
	uint8_t *merge;
	uint64_t version; /* steps applied */
	/* the open step (version + 1) */
	bool open;
	uint64_t chunk; /* chunk size of its layout */
	uint64_t nchunks;
	uint64_t chunks_done;
	bool upd; /* the updater runs per completed chunk; value has it */
	uint32_t *counts;	/* pushes per chunk */
	struct psd_list *cwait; /* per chunk: pushpulls waiting for it */
	uint64_t counts_cap;
	uint64_t *wbytes;      /* bytes per worker rank */
	struct psd_list pulls; /* struct kvs_wait, want > version */
	struct psd_list held;  /* pushes for later steps, arrival order */
};

/* What rx_header decided for the message now being received. */
struct kvs_conn {
	struct kvs_entry *e;
	int wrank;
	bool direct; /* payload went straight into e->merge */
	void *hold;  /* payload buffer of an early push, owned */
};

struct psd_kvs {
	struct kvs_entry **tab; /* open addressing by key */
	size_t cap;
	size_t count;
	bool async;
	struct psd_updater upd; /* server/updater.c; none = default rule */
	unsigned nworker;
	int broken; /* a worker died: sync steps cannot complete */
	char broken_msg[200];
	struct psd_cfgtab cfgs; /* config epochs, to check chunk layouts */
};

static struct psd_kvs *kvs_of(struct psched_node *n)
{
	return n->app_state;
}

static size_t kvs_slot(uint64_t k, size_t cap)
{
	k ^= k >> 31;
	k *= 0x7fb5d329728ea185ull;
	k ^= k >> 27;
	return (size_t)k & (cap - 1);
}

static struct kvs_entry *kvs_find(struct psd_kvs *s, uint64_t key)
{
	size_t i = kvs_slot(key, s->cap);

	while (s->tab[i]) {
		if (s->tab[i]->key == key)
			return s->tab[i];
		i = (i + 1) & (s->cap - 1);
	}
	return NULL;
}

static int kvs_grow(struct psd_kvs *s)
{
	size_t ncap = s->cap ? s->cap * 2 : 1024, i, j;
	struct kvs_entry **nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++) {
		if (!s->tab[i])
			continue;
		j = kvs_slot(s->tab[i]->key, ncap);
		while (nt[j])
			j = (j + 1) & (ncap - 1);
		nt[j] = s->tab[i];
	}
	free(s->tab);
	s->tab = nt;
	s->cap = ncap;
	return 0;
}

static void kvs_entry_free(struct psched_node *n, struct kvs_entry *e)
{
	if (!e)
		return;
	atomic_fetch_sub(&n->stored_bytes, e->len);
	atomic_fetch_sub(&n->alloc_bytes,
			 2 * e->len + e->counts_cap * (sizeof(*e->counts) +
						       sizeof(*e->cwait)));
	free(e->value);
	free(e->merge);
	free(e->counts);
	free(e->cwait);
	free(e->wbytes);
	free(e);
}

/* A key this server has not seen: allocate its range (zero value). */
static int kvs_create(struct psched_node *n, const struct psd_hdr *h,
		      struct kvs_entry **out)
{
	struct psd_kvs *s = kvs_of(n);
	struct kvs_entry *e;
	size_t i;

	if ((s->count + 1) * 2 > s->cap && kvs_grow(s))
		return -ENOMEM;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = h->key;
	e->total = h->total;
	e->dtype = h->dtype;
	psd_place(h->key, h->total, psched_dtype_size(h->dtype), n->num_server,
		  (unsigned)n->rank, &e->off, &e->len);
	psd_list_init(&e->pulls);
	psd_list_init(&e->held);
	e->wbytes = calloc(s->nworker, sizeof(*e->wbytes));
	if (e->len) {
		e->value = calloc(1, e->len);
		e->merge = malloc(e->len);
	}
	if (!e->wbytes || (e->len && (!e->value || !e->merge))) {
		kvs_entry_free(n, e);
		return -ENOMEM;
	}
	atomic_fetch_add(&n->stored_bytes, e->len);
	atomic_fetch_add(&n->alloc_bytes, 2 * e->len);
	i = kvs_slot(e->key, s->cap);
	while (s->tab[i])
		i = (i + 1) & (s->cap - 1);
	s->tab[i] = e;
	s->count++;
	*out = e;
	return 0;
}

/* The push's bytes are here (held or summed): the worker's credit for
 * them comes back, even when a pushpull's answer must wait for the other
 * workers.  Holding credit across that wait deadlocks as soon as two
 * workers start their chunks in different orders. */
static void kvs_send_ack(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *req)
{
	struct psd_hdr h = *req;

	h.type = PSD_MSG_PUSH_ACK;
	h.sender = n->id;
	h.status = 0;
	h.length = 0;
	h.flags = 0;
	psd_conn_send(c, &h, NULL, 0);
}

/* Answer one request with a status and no payload. */
static void kvs_reply_status(struct psched_node *n, struct psd_conn *c,
			     const struct psd_hdr *req, int status)
{
	struct psd_hdr h = *req;

	h.type = req->type == PSD_MSG_PULL || req->type == PSD_MSG_PUSHPULL
			 ? PSD_MSG_PULL_RESP
			 : PSD_MSG_PUSH_ACK;
	h.sender = n->id;
	h.status = status;
	h.length = 0;
	h.flags = 0;
	psd_conn_send(c, &h, NULL, 0);
}

/* Answer a pull with the bytes it names, from @base (the value, or the
 * open step's merge buffer), as version @step. */
static void kvs_reply_data(struct psched_node *n, struct psd_conn *c,
			   const struct kvs_entry *e, const struct psd_hdr *req,
			   const uint8_t *base, uint64_t step)
{
	struct psd_hdr h = *req;
	struct iovec iov;

	h.type = PSD_MSG_PULL_RESP;
	h.sender = n->id;
	h.flags = 0;
	h.step = step;
	h.length = h.span;
	iov.iov_base = (void *)(uintptr_t)(base + (h.offset - e->off));
	iov.iov_len = (size_t)h.span;
	psd_conn_send(c, &h, &iov, 1);
}

static void kvs_reply_pull(struct psched_node *n, struct psd_conn *c,
			   struct kvs_entry *e, const struct psd_hdr *req)
{
	kvs_reply_data(n, c, e, req, e->value, e->version);
}

/* Request @h names a byte range this server does not hold. */
static bool kvs_out_of_range(const struct kvs_entry *e, const struct psd_hdr *h)
{
	return h->offset < e->off || h->span > e->len ||
	       h->offset - e->off > e->len - h->span || !h->span;
}

static int kvs_reject(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, int err, const char *why)
{
	psd_err("rejecting %s of key %llu (offset %llu, %llu bytes, step "
		"%llu) from %s: %s",
		psd_msg_type_name(h->type), (unsigned long long)h->key,
		(unsigned long long)h->offset, (unsigned long long)h->span,
		(unsigned long long)h->step, c->peer, why);
	kvs_reply_status(n, c, h, err);
	return err;
}

/* Chunk size of a step's layout: @part rounded down to the element
 * size, whole range when 0 or larger than the range. */
static uint64_t kvs_chunk_size(const struct kvs_entry *e, uint64_t part)
{
	unsigned es = psched_dtype_size((enum psched_dtype)e->dtype);

	part -= part % es;
	if (!part || part > e->len)
		return e->len;
	return part;
}

static int kvs_step_open(struct kvs_entry *e, struct psched_node *n,
			 uint64_t part)
{
	struct psd_kvs *s = kvs_of(n);
	uint64_t chunk = kvs_chunk_size(e, part), nch, i;
	struct psd_list *nw;
	uint32_t *nc;

	if (e->open)
		return chunk == e->chunk ? 0 : -EPROTO;
	nch = (e->len + chunk - 1) / chunk;
	if (nch > e->counts_cap) {
		/* Every wait list is empty while no step is open. */
		nc = realloc(e->counts, nch * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		e->counts = nc;
		nw = realloc(e->cwait, nch * sizeof(*nw));
		if (!nw)
			return -ENOMEM;
		e->cwait = nw;
		atomic_fetch_add(&n->alloc_bytes,
				 (nch - e->counts_cap) *
					 (sizeof(*nc) + sizeof(*nw)));
		e->counts_cap = nch;
	}
	for (i = 0; i < nch; i++)
		psd_list_init(&e->cwait[i]);
	memset(e->counts, 0, nch * sizeof(*e->counts));
	memset(e->wbytes, 0, s->nworker * sizeof(*e->wbytes));
	e->chunk = chunk;
	e->nchunks = nch;
	e->chunks_done = 0;
	e->upd = psd_upd_covers(&s->upd, e->dtype);
	e->open = true;
	return 0;
}

/* Chunk index of a push in the open step's layout, or -EPROTO. */
static int kvs_chunk_index(const struct kvs_entry *e, const struct psd_hdr *h,
			   uint64_t *idx)
{
	uint64_t rel = h->offset - e->off, want;

	if (rel % e->chunk)
		return -EPROTO;
	*idx = rel / e->chunk;
	want = e->len - rel < e->chunk ? e->len - rel : e->chunk;
	return h->span == want ? 0 : -EPROTO;
}

/* dst += src for @len bytes of @dtype (RAW: the last push wins). */
static void kvs_sum(uint8_t dtype, void *dst, const void *src, uint64_t len)
{
	size_t i, n;

	switch (dtype) {
	case PSCHED_F32: {
		float *d = dst;
		const float *s = src;

		for (i = 0, n = (size_t)len / 4; i < n; i++)
			d[i] += s[i];
		break;
	}
	case PSCHED_F64: {
		double *d = dst;
		const double *s = src;

		for (i = 0, n = (size_t)len / 8; i < n; i++)
			d[i] += s[i];
		break;
	}
	case PSCHED_I32: {
		uint32_t *d = dst; /* unsigned: wraparound, not UB */
		const uint32_t *s = src;

		for (i = 0, n = (size_t)len / 4; i < n; i++)
			d[i] += s[i];
		break;
	}
	case PSCHED_I64: {
		uint64_t *d = dst;
		const uint64_t *s = src;

		for (i = 0, n = (size_t)len / 8; i < n; i++)
			d[i] += s[i];
		break;
	}
	case PSCHED_F16:
		psd_f16_add(dst, src, (size_t)len / 2);
		break;
	default:
		memcpy(dst, src, (size_t)len);
		break;
	}
}

/* Answer, in priority order, every queued pull the version now covers. */
static void kvs_answer_pulls(struct psched_node *n, struct kvs_entry *e)
{
	struct psd_list *pos;
	struct kvs_wait *best;

	for (;;) {
		best = NULL;
		psd_list_for_each (pos, &e->pulls) {
			struct kvs_wait *w =
				psd_container_of(pos, struct kvs_wait, link);

			if (w->want <= e->version &&
			    (!best || w->h.priority < best->h.priority))
				best = w;
		}
		if (!best)
			return;
		psd_list_del(&best->link);
		kvs_reply_pull(n, best->conn, e, &best->h);
		psd_conn_put(best->conn);
		free(best);
	}
}

static int kvs_queue_wait(struct psd_conn *c, struct psd_list *list,
			  const struct psd_hdr *h, uint64_t want)
{
	struct kvs_wait *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->conn = c;
	psd_conn_get(c);
	w->h = *h;
	w->want = want;
	psd_list_add_tail(list, &w->link);
	return 0;
}

static void kvs_process_held(struct psched_node *n, struct kvs_entry *e);

/* The open step has all W pushes of every chunk: apply it. */
static void kvs_step_finish(struct psched_node *n, struct kvs_entry *e)
{
	uint8_t *tmp = e->value;

	/* Default updater: the aggregate replaces the stored value (with an
	 * updater, kvs_chunk_update() already folded each chunk in). */
	if (!e->upd) {
		e->value = e->merge;
		e->merge = tmp;
	}
	e->version++;
	e->open = false;
	kvs_answer_pulls(n, e);
	kvs_process_held(n, e);
}

/* Add one worker's push of the open step (payload already received). */
static int kvs_contribute(struct psched_node *n, struct kvs_entry *e,
			  const struct psd_hdr *h, const void *payload,
			  int wrank, bool direct, uint64_t *idxp)
{
	struct psd_kvs *s = kvs_of(n);
	uint64_t idx;
	uint8_t *dst;

	if (kvs_chunk_index(e, h, &idx) || e->counts[idx] >= s->nworker ||
	    e->wbytes[wrank] + h->span > e->len)
		return -EPROTO;
	dst = e->merge + (h->offset - e->off);
	if (!direct) {
		if (e->counts[idx] == 0)
			memcpy(dst, payload, (size_t)h->span);
		else
			kvs_sum(e->dtype, dst, payload, h->span);
	}
	e->wbytes[wrank] += h->span;
	if (++e->counts[idx] == s->nworker)
		e->chunks_done++;
	*idxp = idx;
	return 0;
}

/* Answer a pushpull from the open step's merge buffer (or the value,
 * where the updater folds each chunk in): its chunk has all W pushes, so
 * those bytes are final for the step while other chunks are still coming,
 * and the worker need not wait for the whole tensor. */
static void kvs_reply_chunk(struct psched_node *n, struct psd_conn *c,
			    struct kvs_entry *e, const struct psd_hdr *req)
{
	kvs_reply_data(n, c, e, req, e->upd ? e->value : e->merge,
		       e->version + 1);
}

/* Chunk @idx of the open step is complete: fold it into the value with
 * the updater (server/updater.c), or copy it if the updater changed to
 * one that does not cover this dtype since the step opened. */
static void kvs_chunk_update(struct psched_node *n, struct kvs_entry *e,
			     uint64_t idx)
{
	uint64_t rel = idx * e->chunk;
	uint64_t len = e->len - rel < e->chunk ? e->len - rel : e->chunk;

	if (!psd_upd_apply(&kvs_of(n)->upd, e->key, e->dtype, e->off, e->len,
			   e->off + rel, e->value + rel, e->merge + rel, len))
		memcpy(e->value + rel, e->merge + rel, (size_t)len);
}

/* Chunk @idx of the open step is complete: answer its pushpulls. */
static void kvs_answer_chunk(struct psched_node *n, struct kvs_entry *e,
			     uint64_t idx)
{
	struct psd_list *pos, *tmp;

	psd_list_for_each_safe (pos, tmp, &e->cwait[idx]) {
		struct kvs_wait *w =
			psd_container_of(pos, struct kvs_wait, link);

		psd_list_del(&w->link);
		kvs_reply_chunk(n, w->conn, e, &w->h);
		psd_conn_put(w->conn);
		free(w);
	}
}

/* Sync push of the open step received: account, ack, maybe finish. */
static void kvs_push_apply(struct psched_node *n, struct psd_conn *c,
			   struct kvs_entry *e, const struct psd_hdr *h,
			   const void *payload, int wrank, bool direct,
			   bool acked)
{
	struct psd_kvs *s = kvs_of(n);
	int ret = kvs_step_open(e, n, h->part);
	uint64_t idx = 0;

	if (!ret)
		ret = kvs_contribute(n, e, h, payload, wrank, direct, &idx);
	if (ret) {
		kvs_reject(n, c, h, -EPROTO,
			   "chunk does not fit the step's layout, or was "
			   "pushed twice");
		return;
	}
	if (h->type != PSD_MSG_PUSHPULL) {
		if (!acked)
			kvs_reply_status(n, c, h, 0);
	} else if (e->counts[idx] < s->nworker && s->broken) {
		kvs_reject(n, c, h, s->broken, s->broken_msg);
	} else if (e->counts[idx] < s->nworker) {
		if (kvs_queue_wait(c, &e->cwait[idx], h, h->step))
			kvs_reply_status(n, c, h, -ENOMEM);
		else if (!acked)
			kvs_send_ack(n, c, h);
	}
	if (e->counts[idx] == s->nworker) {
		if (e->upd)
			kvs_chunk_update(n, e, idx);
		if (h->type == PSD_MSG_PUSHPULL)
			kvs_reply_chunk(n, c, e, h);
		kvs_answer_chunk(n, e, idx);
	}
	if (e->chunks_done == e->nchunks)
		kvs_step_finish(n, e);
}

/* Pushes that arrived for later steps, in arrival order.  Applying one
 * may finish a step, which recurses here; rescan after each. */
static void kvs_process_held(struct psched_node *n, struct kvs_entry *e)
{
	struct psd_list *pos;
	struct kvs_wait *w;
	struct psd_peer *p;

	for (;;) {
		w = NULL;
		psd_list_for_each (pos, &e->held) {
			w = psd_container_of(pos, struct kvs_wait, link);
			if (w->h.step == e->version + 1)
				break;
			w = NULL;
		}
		if (!w)
			return;
		psd_list_del(&w->link);
		p = psd_node_peer(n, w->conn->peer_id);
		if (!atomic_load(&w->conn->closed) && p)
			kvs_push_apply(n, w->conn, e, &w->h, w->buf, p->rank,
				       false, true);
		psd_conn_put(w->conn);
		free(w->buf);
		free(w);
	}
}

static struct kvs_conn *kvs_conn_ctx(struct psd_conn *c)
{
	if (!c->ctx)
		c->ctx = calloc(1, sizeof(struct kvs_conn));
	return c->ctx;
}

static int kvs_check_entry(struct psched_node *n, struct psd_conn *c,
			   const struct psd_hdr *h, struct kvs_entry **ep)
{
	struct psd_kvs *s = kvs_of(n);
	struct kvs_entry *e = kvs_find(s, h->key);
	int ret;

	if (!e && h->type == PSD_MSG_PULL)
		return kvs_reject(n, c, h, PSCHED_EUNKNOWNKEY,
				  "unknown key (never pushed or initialised)");
	if (!e) {
		ret = kvs_create(n, h, &e);
		if (ret)
			return kvs_reject(n, c, h, ret,
					  "cannot allocate the key's storage");
	}
	if (e->total != h->total || e->dtype != h->dtype)
		return kvs_reject(n, c, h, PSCHED_ESIZE,
				  "size or dtype differs from the key's");
	if (h->type == PSD_MSG_INIT && !(h->flags & PSD_F_HAS_VALUE)) {
		*ep = e;
		return 0;
	}
	if (!e->len || kvs_out_of_range(e, h))
		return kvs_reject(n, c, h, -EPROTO,
				  "range is not held by this server");
	*ep = e;
	return 0;
}

/*
 * A push of step s must be cut with the config that covers s.  An epoch
 * newer than any this server knows is taken on trust (its commit may
 * still be on its way here); a known one must be the step's.
 */
static bool kvs_epoch_mismatch(const struct psd_kvs *s, const struct psd_hdr *h,
			       const struct psd_conn *c)
{
	const struct psd_cfg_entry *want;

	if (h->epoch > psd_cfgtab_last(&s->cfgs)->epoch)
		return false;
	want = psd_cfgtab_for_step(&s->cfgs, h->step);
	if (want->epoch == h->epoch)
		return false;
	psd_err("%s pushed key %llu step %llu with config epoch %u, but "
		"that step belongs to epoch %u (from step %llu)",
		c->peer, (unsigned long long)h->key,
		(unsigned long long)h->step, h->epoch, want->epoch,
		(unsigned long long)want->apply_from_step);
	return true;
}

/* Where the payload of a push goes, decided before it is read. */
static int kvs_push_header(struct psched_node *n, struct psd_conn *c,
			   struct kvs_conn *kc, const struct psd_hdr *h,
			   void **dst)
{
	struct psd_kvs *s = kvs_of(n);
	struct kvs_entry *e = kc->e;
	uint64_t idx;

	if (s->async)
		return 0;
	if (kvs_epoch_mismatch(s, h, c)) {
		kvs_reject(n, c, h, -EPROTO,
			   "chunk cut with another config epoch than its "
			   "step's");
		return PSD_RX_DISCARD;
	}
	if (h->step <= e->version) {
		kvs_reject(n, c, h, -EPROTO, "step already applied");
		return PSD_RX_DISCARD;
	}
	if (h->step > e->version + 1) {
		kc->hold = malloc((size_t)h->length);
		if (!kc->hold) {
			kvs_reject(n, c, h, -ENOMEM,
				   "no memory to hold an early push");
			return PSD_RX_DISCARD;
		}
		*dst = kc->hold;
		return 0;
	}
	if (kvs_step_open(e, n, h->part) || kvs_chunk_index(e, h, &idx)) {
		kvs_reject(n, c, h, -EPROTO,
			   "chunk does not fit the step's layout");
		return PSD_RX_DISCARD;
	}
	/* One worker: nobody else writes this chunk, so land in place. */
	if (s->nworker == 1 && e->counts[idx] == 0) {
		*dst = e->merge + (h->offset - e->off);
		kc->direct = true;
	}
	return 0;
}

static int kvs_rx_header(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, void **dst)
{
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvs_conn *kc;
	int ret;

	if (!psd_msg_is_request(h->type) || !p ||
	    p->role != PSCHED_ROLE_WORKER) {
		psd_err("dropping connection from %s: %s message %s", c->peer,
			psd_msg_type_name(h->type),
			p ? "is not a request" : "before hello");
		return -EPROTO;
	}
	kc = kvs_conn_ctx(c);
	if (!kc)
		return -ENOMEM;
	memset(kc, 0, sizeof(*kc));
	kc->wrank = p->rank;
	ret = kvs_check_entry(n, c, h, &kc->e);
	if (ret)
		return h->length ? PSD_RX_DISCARD : 0; /* already answered */
	if (h->type != PSD_MSG_PUSH && h->type != PSD_MSG_PUSHPULL)
		return 0;
	ret = kvs_push_header(n, c, kc, h, dst);
	if (ret == PSD_RX_DISCARD)
		kc->e = NULL; /* answered already; ignore the payload */
	return ret;
}

static void kvs_on_pull(struct psched_node *n, struct psd_conn *c,
			struct kvs_entry *e, const struct psd_hdr *h)
{
	struct psd_kvs *s = kvs_of(n);

	if (s->async || e->version >= h->step) {
		kvs_reply_pull(n, c, e, h);
		return;
	}
	if (s->broken) {
		kvs_reject(n, c, h, PSCHED_ENODEDEAD, s->broken_msg);
		return;
	}
	if (kvs_queue_wait(c, &e->pulls, h, h->step))
		kvs_reply_status(n, c, h, -ENOMEM);
}

static void kvs_on_init(struct psched_node *n, struct psd_conn *c,
			struct kvs_entry *e, const struct psd_hdr *h,
			const void *payload)
{
	if (h->flags & PSD_F_HAS_VALUE)
		memcpy(e->value + (h->offset - e->off), payload,
		       (size_t)h->span);
	kvs_reply_status(n, c, h, 0);
}

static void kvs_on_async_push(struct psched_node *n, struct psd_conn *c,
			      struct kvs_entry *e, const struct psd_hdr *h,
			      const void *payload)
{
	uint8_t *dst = e->value + (h->offset - e->off);

	if (!psd_upd_apply(&kvs_of(n)->upd, e->key, e->dtype, e->off, e->len,
			   h->offset, dst, payload, h->span))
		kvs_sum(e->dtype, dst, payload, h->span);
	e->version++;
	if (h->type == PSD_MSG_PUSHPULL)
		kvs_reply_pull(n, c, e, h);
	else
		kvs_reply_status(n, c, h, 0);
}

static void kvs_rx_data(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *h, void *payload)
{
	struct kvs_conn *kc = c->ctx;
	struct kvs_wait *w;

	if (!kc || !kc->e)
		return; /* rejected at the header */
	switch (h->type) {
	case PSD_MSG_PULL:
		kvs_on_pull(n, c, kc->e, h);
		return;
	case PSD_MSG_INIT:
		kvs_on_init(n, c, kc->e, h, payload);
		return;
	default:
		break;
	}
	if (kvs_of(n)->async) {
		kvs_on_async_push(n, c, kc->e, h, payload);
		return;
	}
	if (kc->hold) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			free(kc->hold);
			kc->hold = NULL;
			kvs_reply_status(n, c, h, -ENOMEM);
			return;
		}
		w->conn = c;
		psd_conn_get(c);
		w->h = *h;
		w->buf = kc->hold;
		kc->hold = NULL;
		kvs_send_ack(n, c, h);
		psd_list_add_tail(&kc->e->held, &w->link);
		return;
	}
	kvs_push_apply(n, c, kc->e, h, payload, kc->wrank, kc->direct, false);
}

/* Drop every wait of @c (or all of them when @c is NULL, replying
 * @err first). */
static void kvs_drop_waits(struct psched_node *n, struct psd_list *head,
			   struct psd_conn *c, int err, const char *why)
{
	struct psd_list *pos, *tmp;

	psd_list_for_each_safe (pos, tmp, head) {
		struct kvs_wait *w =
			psd_container_of(pos, struct kvs_wait, link);

		if (c && w->conn != c)
			continue;
		psd_list_del(&w->link);
		if (err && !w->buf)
			kvs_reject(n, w->conn, &w->h, err, why);
		psd_conn_put(w->conn);
		free(w->buf);
		free(w);
	}
}

/* Every wait of @e: pulls, pushpulls waiting for a chunk, and (unless
 * @pulls_only) early pushes held for a later step. */
static void kvs_drop_entry_waits(struct psched_node *n, struct kvs_entry *e,
				 struct psd_conn *c, int err, const char *why,
				 bool pulls_only)
{
	uint64_t i;

	kvs_drop_waits(n, &e->pulls, c, err, why);
	for (i = 0; e->open && i < e->nchunks; i++)
		kvs_drop_waits(n, &e->cwait[i], c, err, why);
	if (!pulls_only)
		kvs_drop_waits(n, &e->held, c, err, why);
}

static void kvs_conn_closed(struct psched_node *n, struct psd_conn *c)
{
	struct psd_kvs *s = kvs_of(n);
	struct kvs_conn *kc = c->ctx;
	size_t i;

	for (i = 0; i < s->cap; i++)
		if (s->tab[i])
			kvs_drop_entry_waits(n, s->tab[i], c, 0, NULL, false);
	if (kc) {
		free(kc->hold);
		free(kc);
		c->ctx = NULL;
	}
}

/* A worker died: in sync mode no open step can complete any more. */
static void kvs_peer_failed(struct psched_node *n, struct psd_peer *p, int err,
			    const char *why)
{
	struct psd_kvs *s = kvs_of(n);
	size_t i;

	if (p->role != PSCHED_ROLE_WORKER || s->async)
		return;
	s->broken = err;
	snprintf(s->broken_msg, sizeof(s->broken_msg),
		 "%s died (%s): sync steps cannot complete", p->desc, why);
	for (i = 0; i < s->cap; i++)
		if (s->tab[i])
			kvs_drop_entry_waits(n, s->tab[i], NULL, err,
					     s->broken_msg, true);
}

static void kvs_destroy(struct psched_node *n)
{
	struct psd_kvs *s = kvs_of(n);
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->cap; i++) {
		struct kvs_entry *e = s->tab[i];

		if (!e)
			continue;
		kvs_drop_entry_waits(n, e, NULL, 0, NULL, false);
		kvs_entry_free(n, e);
	}
	psd_cfgtab_fini(&s->cfgs);
	free(s->tab);
	psd_upd_fini(&s->upd);
	free(s);
	n->app_state = NULL;
}

/* A committed config from the scheduler (van thread). */
static void kvs_config(struct psched_node *n, const Psched__Config *m)
{
	struct psd_kvs *s = kvs_of(n);
	struct psd_cfg_entry e = { .epoch = m->epoch,
				   .partition_bytes = m->partition_bytes,
				   .credit_bytes = m->credit_bytes,
				   .apply_from_step = m->apply_from_step };
	int ret;

	if (m->phase != PSCHED__CONFIG__PHASE__COMMIT)
		return;
	ret = psd_cfgtab_add(&s->cfgs, &e);
	if (ret && ret != -EALREADY)
		psd_err("config epoch %u refused: %s", m->epoch,
			psched_strerror(ret));
	else
		psd_info("config epoch %u from step %llu: partition %llu "
			 "bytes",
			 m->epoch, (unsigned long long)m->apply_from_step,
			 (unsigned long long)m->partition_bytes);
}

/* Some key has steps applied, open or held: the mode is in use. */
static bool kvs_has_steps(const struct psd_kvs *s)
{
	size_t i;

	for (i = 0; i < s->cap; i++)
		if (s->tab[i] && (s->tab[i]->version || s->tab[i]->open ||
				  !psd_list_empty(&s->tab[i]->held)))
			return true;
	return false;
}

/* A worker's ServerCommand (common/command.c checked the fields). */
static int kvs_command(struct psched_node *n, int mode,
		       const struct psched_optimizer *opt)
{
	struct psd_kvs *s = kvs_of(n);
	bool async = mode == PSCHED__SERVER_MODE__MODE_ASYNC;
	int ret;

	if (mode && async != s->async && kvs_has_steps(s))
		return psd_set_errmsg(-EBUSY,
				      "cannot switch to %s mode: keys were "
				      "already pushed in %s mode",
				      async ? "async" : "sync",
				      s->async ? "async" : "sync");
	if (opt) {
		ret = psd_upd_set_optimizer(&s->upd, opt);
		if (ret)
			return ret;
	}
	if (mode)
		s->async = async;
	return 0;
}

int psched_server_set_updater(struct psched_node *n, psched_updater_fn *fn,
			      void *arg)
{
	if (!n || n->cfg.role != PSCHED_ROLE_SERVER || !kvs_of(n))
		return psd_set_errmsg(-EINVAL,
				      "psched_server_set_updater: not a "
				      "server node");
	psd_upd_set_custom(&kvs_of(n)->upd, fn, arg);
	return 0;
}

static const struct psd_app kvs_app = {
	.config = kvs_config,
	.rx_header = kvs_rx_header,
	.rx_data = kvs_rx_data,
	.peer_failed = kvs_peer_failed,
	.conn_closed = kvs_conn_closed,
	.command = kvs_command,
	.rx_control = psd_kvs_cmd_rx,
	.destroy = kvs_destroy,
};

int psd_kvs_attach(struct psched_node *n)
{
	struct psd_kvs *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->async = !strcmp(n->cfg.server_mode, "async");
	s->nworker = n->num_worker;
	psd_upd_init(&s->upd);
	if (kvs_grow(s) || psd_cfgtab_init(&s->cfgs, n->cfg.partition_bytes,
					   n->cfg.credit_bytes)) {
		psd_upd_fini(&s->upd);
		free(s->tab);
		free(s);
		return -ENOMEM;
	}
	n->app_state = s;
	n->app = &kvs_app;
	return 0;
}
