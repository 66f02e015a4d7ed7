// SPDX-License-Identifier: MIT
/*
 * The open step of a key (server/kvs.h): its chunk layout, cut by the
 * same rule the worker cuts with (common/partition.h), the sum of the W
 * pushes of every chunk, the updater, and the version bump that answers
 * the waiting pulls and lets held pushes of the next step in.
 */
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "kvs.h"
#include "gpu/gpu.h"
#include "partition.h"
#include "rows.h"

/* Every wait list is empty while no step is open. */
static int kvs_counts_grow(struct psd_kvs *s, struct psd_kvs_entry *e,
			   uint64_t nch)
{
	struct psd_list *nw;
	uint32_t *nc;

	if (nch <= e->counts_cap)
		return 0;
	if (nch > SIZE_MAX / sizeof(*nw))
		return -ENOMEM;
	nc = realloc(e->counts, nch * sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	e->counts = nc;
	nw = realloc(e->cwait, nch * sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	e->cwait = nw;
	atomic_fetch_add(&s->alloc_bytes,
			 (nch - e->counts_cap) * (sizeof(*nc) + sizeof(*nw)));
	e->counts_cap = nch;
	return 0;
}

int psd_kvs_step_open(struct psd_kvs *s, struct psd_kvs_entry *e, uint64_t part)
{
	unsigned es = psched_dtype_size((enum psched_dtype)e->dtype);
	uint64_t chunk = psd_part_chunk_size(part, es, e->len);
	uint64_t nch;
	uint64_t i;
	int ret;

	if (e->open)
		return chunk == e->chunk ? 0 : -EPROTO;
	nch = psd_part_count(e->len, chunk);
	ret = kvs_counts_grow(s, e, nch);
	if (ret)
		return ret;
	for (i = 0; i < nch; i++)
		psd_list_init(&e->cwait[i]);
	memset(e->counts, 0, nch * sizeof(*e->counts));
	memset(e->wbytes, 0, s->nworker * sizeof(*e->wbytes));
	e->chunk = chunk;
	e->nchunks = nch;
	e->chunks_done = 0;
	e->upd = psd_upd_covers(&s->upd, e->dtype);
	e->open_ms = psd_now_ms();
	e->want_epoch = psd_cfgtab_for_step(&s->cfgs, e->version + 1)->epoch;
	e->want = psd_cfg_nmembers(
		psd_cfgtab_for_step(&s->cfgs, e->version + 1), s->nworker);
	e->open = true;
	return 0;
}

int psd_kvs_chunk_index(const struct psd_kvs_entry *e, const struct psd_hdr *h,
			uint64_t *idx)
{
	return psd_part_index(e->off, e->len, e->chunk, h->offset, h->span,
			      idx);
}

/* The row sum vectorises: the same sums, element by element. */
void psd_kvs_sum(uint8_t dtype, void *dst, const void *src, uint64_t len)
{
	psd_rows_add(dtype, dst, src, len);
}

void psd_kvs_sum_on(struct psd_kvs *s, uint8_t dtype, void *dst,
		    const void *src, uint64_t len)
{
	if (s->gpu_sum && (dtype == PSCHED_F32 || dtype == PSCHED_F16 ||
			   dtype == PSCHED_BF16)) {
		if (!psd_gpu_sum_host(0, dtype, dst, src,
				      (size_t)len / psched_dtype_size(dtype)))
			return;
		psd_err("server: GPU sum failed (%s); summing on the CPU from "
			"now on",
			psched_errmsg());
		s->gpu_sum = false;
	}
	psd_kvs_sum(dtype, dst, src, len);
}

static void kvs_process_held(struct psched_node *n, struct psd_kvs_entry *e);

/* The open step has all W pushes of every chunk: apply it. */
static void kvs_step_finish(struct psched_node *n, struct psd_kvs_entry *e)
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
	psd_kvs_snap_dense(n, e);
	psd_kvs_answer_pulls(n, e);
	kvs_process_held(n, e);
}

/* Add one worker's push of the open step (payload already received). */
static int kvs_contribute(struct psd_kvs *s, struct psd_kvs_entry *e,
			  const struct psd_hdr *h, const void *payload,
			  int wrank, bool direct, uint64_t *idxp)
{
	uint64_t idx;
	uint8_t *dst;

	if (psd_kvs_chunk_index(e, h, &idx) || e->counts[idx] >= s->nworker ||
	    e->wbytes[wrank] + h->span > e->len)
		return -EPROTO;
	dst = e->merge + (h->offset - e->off);
	if (h->flags & PSD_F_COMPRESSED) {
		/* Dequantised straight into the sum (never lands direct). */
		if (psd_cmp_unpack(payload, h->length, (float *)(void *)dst,
				   (size_t)(h->span / 4), e->counts[idx] != 0))
			return -EPROTO;
	} else if (!direct) {
		if (e->counts[idx] == 0)
			memcpy(dst, payload, (size_t)h->span);
		else
			psd_kvs_sum_on(s, e->dtype, dst, payload, h->span);
	}
	if (e->counts[idx] == 0)
		psd_kvs_entry_filled(s, e, h->span);
	e->wbytes[wrank] += h->span;
	if (++e->counts[idx] == e->want)
		e->chunks_done++;
	*idxp = idx;
	return 0;
}

/* Chunk @idx of the open step is complete: fold it into the value with
 * the updater, or copy it if the updater changed to one that does not
 * cover this dtype since the step opened. */
static void kvs_chunk_update(struct psd_kvs *s, struct psd_kvs_entry *e,
			     uint64_t idx)
{
	uint64_t off;
	uint64_t len;
	uint64_t rel;

	psd_part_chunk(e->off, e->len, e->chunk, idx, &off, &len);
	rel = off - e->off;
	if (!psd_upd_apply(&s->upd, e->key, e->dtype, e->off, e->len, off,
			   e->value + rel, e->merge + rel, len))
		memcpy(e->value + rel, e->merge + rel, (size_t)len);
}

/* After the push of chunk @idx was summed: ack it, queue it until its
 * chunk is complete, or refuse it (a pushpull that can never complete). */
static void kvs_push_answer(struct psched_node *n, struct psd_conn *c,
			    struct psd_kvs_entry *e, const struct psd_hdr *h,
			    uint64_t idx, bool acked)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (h->type != PSD_MSG_PUSHPULL) {
		if (!acked)
			psd_kvs_reply_status(n, c, h, 0);
	} else if (e->counts[idx] < e->want && s->broken) {
		psd_kvs_reject(n, c, h, s->broken, s->broken_msg);
	} else if (e->counts[idx] < e->want) {
		if (psd_kvs_queue_wait(c, &e->cwait[idx], h, h->step, NULL, 0))
			psd_kvs_reply_status(n, c, h, -ENOMEM);
		else if (!acked)
			psd_kvs_send_ack(n, c, h);
	}
}

void psd_kvs_push_apply(struct psched_node *n, struct psd_conn *c,
			struct psd_kvs_entry *e, const struct psd_hdr *h,
			const void *payload, int wrank, bool direct, bool acked)
{
	struct psd_kvs *s = psd_kvs_of(n);
	int ret = psd_kvs_layout_check(s, e, h)
			  ? -EPROTO
			  : psd_kvs_step_open(s, e, h->part);
	uint64_t idx = 0;

	/* Pushed with a config this server has not seen committed yet: its
	 * members are unknown until the commit comes (psd_kvs_step_config()).
	 */
	if (!ret && h->epoch > psd_cfgtab_last(&s->cfgs)->epoch) {
		e->want = KVS_WANT_PENDING;
		e->want_epoch = h->epoch;
	}
	if (!ret)
		ret = kvs_contribute(s, e, h, payload, wrank, direct, &idx);
	if (ret) {
		psd_kvs_reject(n, c, h, -EPROTO,
			       "chunk does not fit the step's layout, was "
			       "pushed twice, or is a malformed compressed "
			       "chunk");
		return;
	}
	kvs_push_answer(n, c, e, h, idx, acked);
	if (e->counts[idx] == e->want) {
		if (e->upd)
			kvs_chunk_update(s, e, idx);
		if (h->type == PSD_MSG_PUSHPULL)
			psd_kvs_reply_chunk(n, c, e, h);
		psd_kvs_answer_chunk(n, e, idx);
	}
	if (e->chunks_done == e->nchunks)
		kvs_step_finish(n, e);
}

/* The open step of @e learnt its members: complete the chunks that have
 * them all. */
static void kvs_step_settle(struct psched_node *n, struct psd_kvs_entry *e)
{
	struct psd_kvs *s = psd_kvs_of(n);
	const struct psd_cfg_entry *c;
	uint64_t i;

	c = psd_cfgtab_for_step(&s->cfgs, e->version + 1);
	if (e->want != KVS_WANT_PENDING) {
		/* Opened under an older epoch that a membership-only switch
		 * from this step replaced: count its members. */
		e->want_epoch = c->epoch;
	} else if (c->epoch != e->want_epoch) {
		psd_err("key %llu step %llu: pushed with config epoch %u, but "
			"the step belongs to epoch %u",
			(unsigned long long)e->key,
			(unsigned long long)e->version + 1, e->want_epoch,
			c->epoch);
		return;
	}
	e->want = psd_cfg_nmembers(c, s->nworker);
	for (i = 0; i < e->nchunks; i++) {
		if (e->counts[i] != e->want)
			continue;
		e->chunks_done++;
		if (e->upd)
			kvs_chunk_update(s, e, i);
		psd_kvs_answer_chunk(n, e, i);
	}
	if (e->chunks_done == e->nchunks)
		kvs_step_finish(n, e);
}

void psd_kvs_step_config(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint32_t last = psd_cfgtab_last(&s->cfgs)->epoch;
	struct psd_kvs_entry *e;
	size_t pos = 0;

	while ((e = psd_map_next(&s->entries, &pos, NULL))) {
		/* Pushes held for this commit (psd_kvs_layout_check()). */
		if (!e->open) {
			if (!psd_list_empty(&e->held))
				kvs_process_held(n, e);
			continue;
		}
		if (e->want == KVS_WANT_PENDING
			    ? e->want_epoch <= last
			    : psd_cfgtab_for_step(&s->cfgs, e->version + 1)
					      ->epoch != e->want_epoch)
			kvs_step_settle(n, e);
	}
}

/* Pushes that arrived for later steps, in arrival order.  Applying one
 * may finish a step, which recurses here; the list is searched again
 * after each. */
static struct psd_kvs_wait *kvs_held_next(const struct psd_kvs *s,
					  struct psd_kvs_entry *e)
{
	struct psd_list *pos;

	psd_list_for_each (pos, &e->held) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		if (w->want != e->version + 1)
			continue;
		/* Its layout waits for its config's commit: so does its
		 * step. */
		if (psd_kvs_layout_check(s, e, &w->h) > 0)
			return NULL;
		psd_list_del(&w->link);
		return w;
	}
	return NULL;
}

static void kvs_process_held(struct psched_node *n, struct psd_kvs_entry *e)
{
	struct psd_kvs_wait *w;
	struct psd_peer *p;

	while ((w = kvs_held_next(psd_kvs_of(n), e))) {
		p = psd_node_peer(n, w->conn->peer_id);
		if (!atomic_load(&w->conn->closed) && p)
			psd_kvs_push_apply(n, w->conn, e, &w->h, w->buf,
					   p->rank, false, true);
		psd_kvs_wait_free(psd_kvs_of(n), w);
	}
}

/* Since when requests wait for the next step of @e (0: none do). */
static uint64_t kvs_waiting_since(const struct psd_kvs_entry *e)
{
	uint64_t t = 0;

	if (!psd_list_empty(&e->pulls))
		t = psd_container_of(e->pulls.next, struct psd_kvs_wait, link)
			    ->since_ms;
	if (e->open && (!t || e->open_ms < t))
		t = e->open_ms;
	return t;
}

/* "worker 3 (rank 1, host:port), ..." for the members of the next step
 * of @e whose pushes have not all arrived; returns how many. */
static unsigned kvs_describe_missing(struct psched_node *n,
				     const struct psd_kvs_entry *e, char *buf,
				     size_t len)
{
	const struct psd_kvs *s = psd_kvs_of(n);
	const struct psd_cfg_entry *cfg =
		psd_cfgtab_for_step(&s->cfgs, e->version + 1);
	size_t used = 0;
	unsigned r, k = 0;
	struct psd_peer *p;

	buf[0] = '\0';
	for (r = 0; r < s->nworker; r++) {
		if (!psd_cfg_is_member(cfg, r) ||
		    (e->open && e->wbytes[r] >= e->len))
			continue;
		k++;
		p = psd_node_peer(n, psd_worker_id(n, r));
		if (used + 2 < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%s",
						 used ? ", " : "",
						 p ? p->desc : "a worker");
	}
	return k;
}

static void kvs_tell_list(struct psched_node *n, struct psd_list *list,
			  const char *msg)
{
	struct psd_list *pos;

	psd_list_for_each (pos, list) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		if (!atomic_load(&w->conn->closed))
			psd_kvs_send_error(n, w->conn, &w->h, 0, msg, false);
	}
}

/* Tell what waits for the next step of @e which workers it lacks; the
 * words in @msg (0: it lacks none). */
static unsigned kvs_tell_missing(struct psched_node *n, struct psd_kvs_entry *e,
				 char *msg, size_t len)
{
	char who[200];
	unsigned k = kvs_describe_missing(n, e, who, sizeof(who));
	uint64_t i;

	if (!k)
		return 0;
	snprintf(msg, len,
		 "step %llu of key %llu lacks the pushes of %u worker%s: %s",
		 (unsigned long long)e->version + 1, (unsigned long long)e->key,
		 k, k == 1 ? "" : "s", who);
	kvs_tell_list(n, &e->pulls, msg);
	for (i = 0; e->open && i < e->nchunks; i++)
		kvs_tell_list(n, &e->cwait[i], msg);
	return k;
}

/* Requests that waited this long hear what their step lacks. */
static uint64_t kvs_tell_after_ms(const struct psched_node *n)
{
	uint64_t t = n->cfg.request_timeout_ms / 2;

	return t < 1000 ? 1000 : t > 10000 ? 10000 : t;
}

void psd_kvs_tick(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint64_t after = kvs_tell_after_ms(n), now = psd_now_ms();
	struct psd_kvs_entry *e;
	char msg[320], first[320] = "";
	unsigned keys = 0;
	size_t pos = 0;
	uint64_t since;

	if (s->async)
		return;
	while ((e = psd_map_next(&s->entries, &pos, NULL))) {
		if (e->told_step == e->version + 1)
			continue;
		since = kvs_waiting_since(e);
		if (!since || now - since < after)
			continue;
		e->told_step = e->version + 1;
		if (kvs_tell_missing(n, e, msg, sizeof(msg)) && !keys++)
			memcpy(first, msg, sizeof(first));
	}
	if (keys)
		psd_warn("requests wait for more than %llu ms: %s%s",
			 (unsigned long long)after, first,
			 keys > 1 ? " (and more keys)" : "");
}
