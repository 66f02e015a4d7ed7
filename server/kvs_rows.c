// SPDX-License-Identifier: MIT
/*
 * KV server: row-sparse keys (embedding tables; common/rows.h, wire.h
 * PSD_F_ROWS).  A server holds the row range placement gives it, but
 * stores only the rows ever pushed: a hash table from row id to a slot
 * in slabs of rows (a row never pushed reads as zeros), so memory follows
 * the rows stored, not the table's size.
 *
 * Sync steps: each worker sends every server holding rows of the table
 * its pieces of a step (at least one, possibly empty), each announcing
 * how many pieces it sent; the pieces' rows are summed into a sparse
 * merge table, and once every worker's pieces are in, each merged row is
 * folded into the stored row (default: the sum replaces it; an optimizer
 * updates only those rows, lazily, with per-row states).  Rows not pushed
 * in a step are left alone.  Async: each piece is folded at once (default:
 * added).  Pulls wait until the version includes the puller's step; a
 * pushpull piece is a push whose answer is a pull of its own ids for its
 * step (its payload starts like a pull's: prefix, then ids).
 *
 * Van thread only, like the rest of the server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "kvs_rows.h"
#include "rows.h"

/* The rows of a push payload whose prefix and ids are at @head. */
static const uint8_t *rows_after(const uint8_t *head)
{
	struct psd_rows_prefix p;

	psd_rows_prefix_get(head, &p);
	return head + PSD_ROWS_PREFIX + (uint64_t)p.nrows * 8;
}

static struct psd_kvs_rows *rows_all(struct psd_kvs *s)
{
	if (!s->rows) {
		s->rows = calloc(1, sizeof(*s->rows));
		if (s->rows)
			psd_map_init(&s->rows->keys);
	}
	return s->rows;
}

static void rows_drop(struct psched_node *n, struct psd_conn *c, int err,
		      const char *why)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct kvs_rows *e;
	size_t pos = 0;

	if (!s->rows)
		return;
	while ((e = psd_map_next(&s->rows->keys, &pos, NULL))) {
		psd_kvs_drop_waits(n, &e->pulls, c, err, why);
		psd_kvs_drop_waits(n, &e->held, c, err, why);
	}
}

static void rows_entry_free(void *val, void *arg)
{
	struct psched_node *n = arg;
	struct psd_kvs *s = psd_kvs_of(n);
	struct kvs_rows *e = val;

	psd_kvs_drop_waits(n, &e->pulls, NULL, 0, NULL);
	psd_kvs_drop_waits(n, &e->held, NULL, 0, NULL);
	psd_rows_tab_fini(s, &e->tab);
	psd_rows_tab_fini(s, &e->mtab);
	atomic_fetch_sub(&s->stored_bytes, e->val.count * e->rowbytes);
	psd_rows_arena_fini(s, &e->val);
	psd_rows_arena_fini(s, &e->state);
	psd_rows_arena_fini(s, &e->merge);
	free(e->got);
	free(e->want);
	free(e);
}

static void rows_fini(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (!s->rows)
		return;
	psd_map_clear(&s->rows->keys, rows_entry_free, n);
	psd_map_fini(&s->rows->keys);
	free(s->rows->rbuf);
	free(s->rows->hbuf);
	free(s->rows);
	s->rows = NULL;
}

static struct kvs_rows *rows_entry_create(struct psched_node *n,
					  const struct psd_hdr *h)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct kvs_rows *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->key = h->key;
	e->total = h->total;
	e->rowbytes = h->part;
	e->dtype = h->dtype;
	psd_rows_place(h->total / h->part, n->num_server, (unsigned)n->rank,
		       &e->lo, &e->n);
	e->val.rowbytes = e->merge.rowbytes = e->rowbytes;
	e->got = calloc(s->nworker ? s->nworker : 1, sizeof(*e->got));
	e->want = calloc(s->nworker ? s->nworker : 1, sizeof(*e->want));
	psd_list_init(&e->pulls);
	psd_list_init(&e->held);
	if (!e->got || !e->want || psd_map_put(&rows_all(s)->keys, h->key, e)) {
		free(e->got);
		free(e->want);
		free(e);
		return NULL;
	}
	return e;
}

/* Check @h against the key's entry (created by an init); NULL when
 * refused (answered). */
static struct kvs_rows *rows_check_entry(struct psched_node *n,
					 struct psd_conn *c,
					 const struct psd_hdr *h)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_rows *all = rows_all(s);
	struct kvs_rows *e = all ? psd_map_get(&all->keys, h->key) : NULL;

	if (!all) {
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory for row tables");
		return NULL;
	}
	if (!e && psd_kvs_entry_find(s, h->key)) {
		psd_kvs_reject(
			n, c, h, PSCHED_ESIZE,
			"the key is a dense tensor here, not row-sparse");
		return NULL;
	}
	if (!e && h->type != PSD_MSG_INIT) {
		psd_kvs_reject(n, c, h, PSCHED_EUNKNOWNKEY,
			       "unknown row-sparse key (never initialised)");
		return NULL;
	}
	if (!e) {
		e = rows_entry_create(n, h);
		if (!e) {
			psd_kvs_reject(n, c, h, -ENOMEM,
				       "no memory for a row-sparse key");
			return NULL;
		}
		e->creator = c->peer_id;
		if (psd_kvs_restore_rows(n, e)) {
			/* Refused at every init while the shapes differ. */
			psd_kvs_reject(n, c, h, PSCHED_ESIZE, psched_errmsg());
			psd_map_del(&all->keys, h->key);
			rows_entry_free(e, n);
			return NULL;
		}
	}
	if (e->total != h->total || e->rowbytes != h->part ||
	    e->dtype != h->dtype) {
		psd_kvs_rejectf(n, c, h, PSCHED_ESIZE,
				"row-sparse key %llu: %llu rows of %llu bytes "
				"of dtype %u asked, but the table has %llu "
				"rows of %llu bytes of dtype %u",
				(unsigned long long)h->key,
				(unsigned long long)(h->total / h->part),
				(unsigned long long)h->part, h->dtype,
				(unsigned long long)(e->total / e->rowbytes),
				(unsigned long long)e->rowbytes, e->dtype);
		return NULL;
	}
	if (h->offset != e->lo * e->rowbytes || h->span != e->n * e->rowbytes ||
	    !e->n) {
		psd_kvs_reject(n, c, h, -EPROTO,
			       "row range is not the one this server holds");
		return NULL;
	}
	return e;
}

static int rows_header(struct psched_node *n, struct psd_conn *c,
		       struct psd_kvs_conn *kc, const struct psd_hdr *h,
		       void **dst)
{
	struct kvs_rows *e = rows_check_entry(n, c, h);
	char what[48];

	if (!e)
		return PSD_RX_DISCARD;
	kc->rows = e;
	if (psd_msg_is_push(h->type) && !psd_kvs_of(n)->async &&
	    psd_kvs_check_member(n, c, h, kc->wrank, true))
		return PSD_RX_DISCARD;
	if (psd_msg_is_push(h->type) && !psd_kvs_of(n)->async &&
	    h->step > e->version + 1) {
		/* held in a buffer of its own until its step opens */
		snprintf(what, sizeof(what), "row push of key %llu",
			 (unsigned long long)h->key);
		return psd_kvs_hold_early(n, c, kc, h, e->version + 1, what,
					  dst);
	}
	/* A push's rows are only summed or copied: read them where the
	 * transport has them (its prefix and ids are copied before they
	 * are checked, rows_data()). */
	if (psd_msg_is_push(h->type) && c->rx_inplace &&
	    h->length >= PSD_ROWS_PREFIX)
		*dst = c->rx_inplace;
	return 0;
}

/* Row id @i of the @nrows at @ids, the stored rows ahead of it
 * prefetched (for a write when @wr). */
PSD_ROWS_INLINE uint64_t rows_id_ahead(const struct kvs_rows *e,
				       const uint8_t *ids, uint64_t i,
				       uint64_t nrows, bool wr)
{
	uint64_t id;

	psd_rows_tab_prefetch_at(&e->tab, ids, i, nrows);
	psd_rows_val_prefetch_at(&e->tab, &e->val, ids, i, nrows, wr);
	memcpy(&id, ids + i * 8, 8);
	return id;
}

/* What rows_fill() writes: the rows of @e that @ids ask, in order. */
struct rows_ask {
	const struct kvs_rows *e;
	const uint8_t *ids;
	uint64_t nrows;
};

/* psd_fill_fn: the asked rows into a pull answer (zeros for rows never
 * pushed). */
static void rows_fill(void *arg, uint8_t *dst, size_t len)
{
	const struct rows_ask *a = arg;
	const struct kvs_rows *e = a->e;
	uint64_t i, id;
	uint32_t slot;

	(void)len;
	for (i = 0; i < a->nrows; i++) {
		id = rows_id_ahead(e, a->ids, i, a->nrows, false);
		if (psd_rows_tab_get(&e->tab, id, &slot))
			memcpy(dst + i * e->rowbytes,
			       psd_rows_at(&e->val, slot), (size_t)e->rowbytes);
		else
			memset(dst + i * e->rowbytes, 0, (size_t)e->rowbytes);
	}
}

/*
 * Send the answer to @req: @nrows rows of @e, of step @step, that @fill
 * writes (with @arg) straight into the transport's buffer where it has
 * one (shm), else into the reply buffer, whose pages are touched only
 * then.  0, or -ENOMEM before anything was done; @fill runs once
 * otherwise, whatever becomes of the send.
 */
static int rows_answer(struct psched_node *n, struct psd_conn *c,
		       const struct kvs_rows *e, const struct psd_hdr *req,
		       uint64_t step, uint64_t nrows, psd_fill_fn fill,
		       void *arg)
{
	struct psd_kvs_rows *all = psd_kvs_of(n)->rows;
	uint64_t len = nrows * e->rowbytes;
	struct psd_hdr h = psd_kvs_answer_hdr(n, req, PSD_MSG_PULL_RESP, 0,
					      PSD_F_ROWS, len);

	uint8_t *nb = psd_kvs_room(all->rbuf, &all->rcap, len);

	if (!nb)
		return -ENOMEM;
	all->rbuf = nb;
	h.step = step;
	psd_conn_send_fill(c, &h, fill, arg, all->rbuf);
	return 0;
}

/* Answer pull @req (its payload @payload: prefix and ids, checked) with
 * the rows of @e it asks. */
static void rows_reply_pull(struct psched_node *n, struct psd_conn *c,
			    struct kvs_rows *e, const struct psd_hdr *req,
			    const uint8_t *payload)
{
	struct rows_ask a = { .e = e, .ids = payload + PSD_ROWS_PREFIX };
	struct psd_rows_prefix p;

	psd_rows_prefix_get(payload, &p);
	a.nrows = p.nrows;
	if (rows_answer(n, c, e, req, e->version, p.nrows, rows_fill, &a))
		psd_kvs_reject(n, c, req, -ENOMEM,
			       "no memory for a row-sparse answer");
}

/* Stored row @id of @e (created zero when new), or NULL (no memory). */
static uint8_t *rows_stored(struct psd_kvs *s, struct kvs_rows *e, uint64_t id,
			    uint32_t *slotp)
{
	uint64_t slot;
	uint32_t i;

	if (psd_rows_tab_get(&e->tab, id, &i)) {
		*slotp = i;
		return psd_rows_at(&e->val, i);
	}
	if (psd_rows_arena_new(s, &e->val, &slot) ||
	    psd_rows_tab_put(s, &e->tab, id, (uint32_t)slot))
		return NULL;
	atomic_fetch_add(&s->stored_bytes, e->rowbytes);
	*slotp = (uint32_t)slot;
	return psd_rows_at(&e->val, slot);
}

/* Lazy update: the installed optimizer updates stored row @slot (@w)
 * with gradient @g, keeping that row's states (common/optim_rows.c).
 * 0 done, 1 no optimizer applies (the default rule does), -ENOMEM. */
static int rows_optimize(struct psd_kvs *s, struct kvs_rows *e, uint64_t id,
			 uint32_t slot, uint8_t *w, const uint8_t *g)
{
	uint64_t width = e->rowbytes / psched_dtype_size(e->dtype);
	uint64_t need, i;
	unsigned ns;
	uint8_t *st;

	if (!psd_upd_rows_covers(&s->upd, e->dtype, &ns))
		return 1;
	/* Restored states of another optimizer start over. */
	if (e->state_opt[0]) {
		if (strncmp(e->state_opt, s->upd.name, 16))
			psd_rows_arena_fini(s, &e->state);
		e->state_opt[0] = 0;
	}
	/* Per row: ns state arrays of width doubles, then the row's update
	 * count.  A change of optimizer state layout starts them over. */
	need = ns * width * 8 + 8;
	if (e->state.rowbytes != need) {
		psd_rows_arena_fini(s, &e->state);
		e->state.rowbytes = need;
	}
	while (e->state.count <= slot)
		if (psd_rows_arena_new(s, &e->state, &i))
			return -ENOMEM;
	st = psd_rows_at(&e->state, slot);
	psd_upd_rows_apply(&s->upd, e->key, e->dtype, id, width, w, g,
			   (double *)(void *)st,
			   (uint32_t *)(void *)(st + ns * width * 8));
	return 0;
}

/* Fold summed row @g of row @id into the stored row; @add: the default
 * rule adds (async) instead of replacing (sync).  *@row (if @row): the
 * stored row, NULL when it could not be made.  0 or -ENOMEM. */
static int rows_fold(struct psd_kvs *s, struct kvs_rows *e, uint64_t id,
		     const uint8_t *g, bool add, uint8_t **row)
{
	uint32_t slot;
	uint8_t *w = rows_stored(s, e, id, &slot);
	int ret;

	if (row)
		*row = w;
	if (!w)
		return -ENOMEM;
	ret = rows_optimize(s, e, id, slot, w, g);
	if (ret <= 0)
		return ret;
	if (add)
		psd_rows_add(e->dtype, w, g, e->rowbytes);
	else
		memcpy(w, g, (size_t)e->rowbytes);
	return 0;
}

static void rows_fold_failed(const struct kvs_rows *e, uint64_t id)
{
	psd_err("row-sparse key %llu step %llu: no memory to store row %llu; "
		"it keeps its old value",
		(unsigned long long)e->key,
		(unsigned long long)(e->version + 1), (unsigned long long)id);
}

/* What rows_fold_fill() folds and answers: a pushpull piece's rows. */
struct rows_fold_ask {
	struct psd_kvs *s;
	struct kvs_rows *e;
	const uint8_t *head; /* prefix and ids, checked */
	const uint8_t *rows;
	bool add;
};

/* psd_fill_fn: fold each row of the piece into its stored row (as
 * rows_fold()) and write the result into the answer. */
static void rows_fold_fill(void *arg, uint8_t *dst, size_t len)
{
	const struct rows_fold_ask *a = arg;
	struct kvs_rows *e = a->e;
	const uint8_t *ids = a->head + PSD_ROWS_PREFIX;
	struct psd_rows_prefix p;
	uint64_t i, id;
	uint8_t *w;

	(void)len;
	psd_rows_prefix_get(a->head, &p);
	for (i = 0; i < p.nrows; i++) {
		id = rows_id_ahead(e, ids, i, p.nrows, true);
		if (rows_fold(a->s, e, id, a->rows + i * e->rowbytes, a->add,
			      &w))
			rows_fold_failed(e, id);
		/* A row that could not be stored reads as zeros. */
		if (w)
			memcpy(dst + i * e->rowbytes, w, (size_t)e->rowbytes);
		else
			memset(dst + i * e->rowbytes, 0, (size_t)e->rowbytes);
	}
}

/*
 * A pushpull piece whose rows are final once folded (every other
 * worker's pieces of its step are in and no piece summed rows; async:
 * always): fold them and answer in one pass, each row written into the
 * answer right after its fold, so it is not looked up and read again.
 * 0, or -ENOMEM with nothing done (the caller folds and answers
 * separately).
 */
static int rows_fold_answer(struct psched_node *n, struct psd_conn *c,
			    struct kvs_rows *e, const struct psd_hdr *req,
			    const uint8_t *head, const uint8_t *rows, bool add)
{
	struct rows_fold_ask a = { .s = psd_kvs_of(n),
				   .e = e,
				   .head = head,
				   .rows = rows,
				   .add = add };
	struct psd_rows_prefix p;

	psd_rows_prefix_get(head, &p);
	/* Answered as of the step its rows now include. */
	return rows_answer(n, c, e, req, e->version + 1, p.nrows,
			   rows_fold_fill, &a);
}

/*
 * Sum a checked push payload into the open step's merge rows.  @last:
 * every other worker's pieces of the step are in, so a row no earlier
 * piece of the step had is its own sum (this worker's pieces are
 * disjoint): folded into the stored row straight from the payload (no
 * merge copy; with one worker every row goes this way), the others
 * summed into their merge rows, which rows_step_finish() folds.  @head:
 * the prefix and ids (checked, in our memory), @rows: the rows (may be
 * read in place).  0, or -ENOMEM (only when !@last: with @last no merge
 * row is made).
 */
static int rows_merge(struct psd_kvs *s, struct kvs_rows *e,
		      const uint8_t *head, const uint8_t *rows, bool last)
{
	const uint8_t *ids = head + PSD_ROWS_PREFIX;
	struct psd_rows_prefix p;
	uint64_t i, id, slot;
	uint32_t m;

	psd_rows_prefix_get(head, &p);
	for (i = 0; i < p.nrows; i++) {
		memcpy(&id, ids + i * 8, 8);
		if (e->mtab.count) {
			psd_rows_tab_prefetch_at(&e->mtab, ids, i, p.nrows);
			if (psd_rows_tab_get(&e->mtab, id, &m)) {
				psd_rows_add(
					e->dtype, psd_rows_at(&e->merge, m),
					rows + i * e->rowbytes, e->rowbytes);
				continue;
			}
		}
		if (last) {
			psd_rows_tab_prefetch_at(&e->tab, ids, i, p.nrows);
			psd_rows_val_prefetch_at(&e->tab, &e->val, ids, i,
						 p.nrows, true);
			if (rows_fold(s, e, id, rows + i * e->rowbytes, false,
				      NULL))
				rows_fold_failed(e, id);
			continue;
		}
		if (psd_rows_arena_new(s, &e->merge, &slot) ||
		    psd_rows_tab_put(s, &e->mtab, id, (uint32_t)slot))
			return -ENOMEM;
		memcpy(psd_rows_at(&e->merge, slot), rows + i * e->rowbytes,
		       (size_t)e->rowbytes);
	}
	return 0;
}

/* Every worker's pieces are in: fold the merged rows, bump the version,
 * answer the pulls it covers. */
static void rows_step_finish(struct psched_node *n, struct kvs_rows *e)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_wait *w;
	uint64_t i;

	for (i = 0; i < e->mtab.cap && e->mtab.count; i++)
		if (e->mtab.ids[i] != PSD_ROWS_EMPTY &&
		    rows_fold(s, e, e->mtab.ids[i],
			      psd_rows_at(&e->merge, e->mtab.idx[i]), false,
			      NULL))
			rows_fold_failed(e, e->mtab.ids[i]);
	psd_rows_tab_clear(&e->mtab);
	/* The merge slabs stay for the next step (rows are overwritten). */
	e->merge.count = 0;
	memset(e->got, 0, s->nworker * sizeof(*e->got));
	memset(e->want, 0, s->nworker * sizeof(*e->want));
	e->wdone = 0;
	e->version++;
	while ((w = psd_kvs_wait_pull(&e->pulls, e->version))) {
		rows_reply_pull(n, w->conn, e, &w->h, w->buf);
		psd_kvs_wait_free(s, w);
	}
}

/* A checked piece of the open step from worker @wrank: summed (0), or
 * refused and answered (an error).  With @answer (a pushpull's piece):
 * when every other worker's pieces of the step are in and none of the
 * step's pieces summed rows (mtab empty: one worker, or the others pushed
 * no rows here), its rows are final once folded, so each is folded and
 * written into the answer in one pass (rows_fold_answer()), without
 * waiting for the step's other pieces, and 1 says it was answered. */
static int rows_piece(struct psched_node *n, struct psd_conn *c,
		      struct kvs_rows *e, const struct psd_hdr *h,
		      const uint8_t *head, const uint8_t *rows, int wrank,
		      bool answer)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_rows_prefix p;
	unsigned want;
	bool last;

	psd_rows_prefix_get(head, &p);
	if ((e->want[wrank] && e->want[wrank] != p.pieces) ||
	    e->got[wrank] >= p.pieces) {
		psd_kvs_rejectf(n, c, h, -EPROTO,
				"row push announces %u pieces for step %llu, "
				"but %u were announced and %u received",
				p.pieces, (unsigned long long)h->step,
				e->want[wrank], e->got[wrank]);
		return -EPROTO;
	}
	/* Every other worker's pieces of the step are in: rows of this
	 * worker's pieces (disjoint) that no other piece summed are final
	 * once folded, whether or not this piece completes the step. */
	want = psd_kvs_step_nmembers(s, e->version + 1);
	last = e->wdone + 1 >= want;
	answer = answer && last && !e->mtab.count &&
		 !rows_fold_answer(n, c, e, h, head, rows, false);
	if (!answer && rows_merge(s, e, head, rows, last))
		return psd_kvs_reject(n, c, h, -ENOMEM,
				      "no memory to sum a row-sparse push");
	e->want[wrank] = p.pieces;
	if (++e->got[wrank] == p.pieces && ++e->wdone >= want)
		rows_step_finish(n, e);
	return answer;
}

/* Pushes held for the step now open, in arrival order. */
static void rows_replay_held(struct psched_node *n, struct kvs_rows *e)
{
	struct psd_kvs_wait *w;
	struct psd_peer *p;

	while ((w = psd_kvs_wait_step(&e->held, e->version + 1))) {
		p = psd_node_peer(n, w->h.sender);
		if (p && p->role == PSCHED_ROLE_WORKER)
			rows_piece(n, w->conn, e, &w->h, w->buf,
				   rows_after(w->buf), p->rank, false);
		psd_kvs_wait_free(psd_kvs_of(n), w);
	}
}

static void rows_on_pull(struct psched_node *n, struct psd_conn *c,
			 struct kvs_rows *e, const struct psd_hdr *h,
			 const uint8_t *payload);

void psd_kvs_rows_config(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct kvs_rows *e;
	size_t pos = 0;

	if (!s->rows || s->async)
		return;
	while ((e = psd_map_next(&s->rows->keys, &pos, NULL))) {
		if (!e->wdone ||
		    e->wdone < psd_kvs_step_nmembers(s, e->version + 1))
			continue;
		rows_step_finish(n, e);
		rows_replay_held(n, e);
	}
}

/* A checked push of @e (sync mode); @hold: its payload, held since its
 * header came early (psd_kvs_hold_early()).  A pushpull is answered with
 * its rows once its step is applied instead of with an ack.  Returns
 * @hold unless it is held on (NULL then). */
static void *rows_on_push(struct psched_node *n, struct psd_conn *c,
			  struct kvs_rows *e, const struct psd_hdr *h,
			  const uint8_t *head, const uint8_t *rows, int wrank,
			  void *hold)
{
	int ret;

	if (h->step <= e->version) {
		psd_kvs_reject(n, c, h, -EPROTO, "step already applied");
		return hold;
	}
	if (h->step == e->version + 1) {
		/* The answer only for a piece summed: a refusal answers
		 * it.  Its step may have opened while an early one came. */
		ret = rows_piece(n, c, e, h, head, rows, wrank,
				 h->type == PSD_MSG_PUSHPULL);
		if (!ret && h->type == PSD_MSG_PUSHPULL)
			rows_on_pull(n, c, e, h, head);
		else if (!ret)
			psd_kvs_send_ack(n, c, h);
		rows_replay_held(n, e);
		return hold;
	}
	if (!hold) { /* not early at its header: cannot be early now */
		psd_kvs_reject(n, c, h, -EPROTO, "row push not held");
		return NULL;
	}
	if (psd_kvs_queue_wait(c, &e->held, h, h->step, hold, h->length)) {
		psd_kvs_reject(n, c, h, -ENOMEM,
			       "no memory to hold an early row push");
		return hold;
	}
	if (h->type == PSD_MSG_PUSHPULL)
		rows_on_pull(n, c, e, h, head); /* waits for its step */
	else
		psd_kvs_send_ack(n, c, h);
	return NULL;
}

/* Async: fold each row at once (default rule: add). */
static void rows_on_async_push(struct psched_node *n, struct psd_conn *c,
			       struct kvs_rows *e, const struct psd_hdr *h,
			       const uint8_t *head, const uint8_t *rows)
{
	struct psd_rows_prefix p;
	uint64_t i, id;

	if (h->type == PSD_MSG_PUSHPULL &&
	    !rows_fold_answer(n, c, e, h, head, rows, true)) {
		e->version++;
		return;
	}
	psd_rows_prefix_get(head, &p);
	for (i = 0; i < p.nrows; i++) {
		id = rows_id_ahead(e, head + PSD_ROWS_PREFIX, i, p.nrows, true);
		if (rows_fold(psd_kvs_of(n), e, id, rows + i * e->rowbytes,
			      true, NULL)) {
			psd_kvs_reject(n, c, h, -ENOMEM,
				       "no memory to store rows");
			return;
		}
	}
	e->version++;
	if (h->type == PSD_MSG_PUSHPULL)
		rows_reply_pull(n, c, e, h, head);
	else
		psd_kvs_reply_status(n, c, h, 0);
}

/* A checked pull (or the pull of a pushpull, whose payload starts with
 * the same prefix and ids): answered now if the table includes step
 * h->step, else queued with a copy of its ids until it does. */
static void rows_on_pull(struct psched_node *n, struct psd_conn *c,
			 struct kvs_rows *e, const struct psd_hdr *h,
			 const uint8_t *payload)
{
	struct psd_rows_prefix p;
	struct psd_hdr q = *h;
	void *buf;
	int ret;

	psd_rows_prefix_get(payload, &p);
	q.length = PSD_ROWS_PREFIX + (uint64_t)p.nrows * 8;
	ret = psd_kvs_pull_ready(n, c, h, e->version, q.length);
	if (ret > 0)
		rows_reply_pull(n, c, e, h, payload);
	if (ret)
		return;
	buf = malloc((size_t)q.length);
	if (!buf || psd_kvs_queue_pull(n, c, &e->pulls, &q, buf, q.length)) {
		free(buf);
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory to queue a pull");
		return;
	}
	memcpy(buf, payload, (size_t)q.length);
	/* A pushpull's bytes are in: its credit comes back now (waiting
	 * for the other workers with it deadlocks, psd_kvs_send_ack()). */
	if (h->type == PSD_MSG_PUSHPULL)
		psd_kvs_send_ack(n, c, h);
}

/*
 * A push read in place (psd_conn.rx_inplace): its peer can still write
 * there, so its prefix and ids are copied once into our memory, the row
 * count bounded by the length, and only the copy is checked and used; the
 * rows stay where they are.  The copy, or NULL when refused.
 */
static const uint8_t *rows_head_copy(struct psched_node *n, struct psd_conn *c,
				     const struct psd_hdr *h,
				     const uint8_t *payload)
{
	struct psd_kvs_rows *all = psd_kvs_of(n)->rows;
	struct psd_rows_prefix p;
	uint8_t *nb;
	uint64_t len;

	psd_rows_prefix_get(payload, &p);
	len = PSD_ROWS_PREFIX + (uint64_t)p.nrows * 8;
	if (len > h->length) {
		psd_kvs_rejectf(n, c, h, -EPROTO,
				"row count %u does not match the payload of "
				"%llu bytes",
				p.nrows, (unsigned long long)h->length);
		return NULL;
	}
	nb = psd_kvs_room(all->hbuf, &all->hcap, len);
	if (!nb) {
		psd_kvs_reject(n, c, h, -ENOMEM,
			       "no memory for a row-sparse push");
		return NULL;
	}
	all->hbuf = nb;
	memcpy(all->hbuf, payload, (size_t)len);
	psd_rows_prefix_put(all->hbuf, &p); /* the count bounded above */
	return all->hbuf;
}

static void rows_data(struct psched_node *n, struct psd_conn *c,
		      struct psd_kvs_conn *kc, const struct psd_hdr *h,
		      void *payload)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct kvs_rows *e = kc->rows;
	const uint8_t *head = payload, *rows;
	void *hold = kc->hold; /* an early push's payload, @payload */
	char why[256];

	kc->hold = NULL;
	if (h->type == PSD_MSG_INIT) {
		psd_kvs_reply_status(n, c, h, 0);
		return;
	}
	if (payload && payload == c->rx_inplace) {
		head = rows_head_copy(n, c, h, payload);
		if (!head)
			return;
	}
	if (psd_rows_check(h, head, e->lo, e->n, why, sizeof(why))) {
		psd_kvs_reject(n, c, h, -EPROTO, why);
		psd_kvs_hold_free(s, hold, h->length);
		return;
	}
	rows = (const uint8_t *)payload + (rows_after(head) - head);
	if (h->type == PSD_MSG_PULL)
		rows_on_pull(n, c, e, h, head);
	else if (s->async)
		rows_on_async_push(n, c, e, h, head, rows);
	else if (kc->wrank >= 0 && (unsigned)kc->wrank < s->nworker)
		hold = rows_on_push(n, c, e, h, head, rows, kc->wrank, hold);
	psd_kvs_hold_free(s, hold, h->length);
}

bool psd_kvs_rows_has(const struct psd_kvs *s, uint64_t key)
{
	return s->rows && psd_map_get(&s->rows->keys, key);
}

const struct psd_kvs_family psd_kvs_rowsparse = {
	.flag = PSD_F_ROWS,
	.noun = "row-sparse key",
	.obj = "table",
	.header = rows_header,
	.data = rows_data,
	.drop = rows_drop,
	.fini = rows_fini,
};
