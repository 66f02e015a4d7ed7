// SPDX-License-Identifier: MIT
/*
 * Snapshots of row-sparse keys (docs/snapshots.md; kvs_snap.c takes and
 * restores the rest): a table's stored rows, copied whole with their
 * optimizer states at the snapshot's step, and put back row by row into
 * the tables of a job of any server count (each server takes the ids of
 * its own row range).  Van thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "kvs_rows.h"
#include "kvs_snap.h"

struct snap_rows {
	uint64_t key, total, rowbytes, version, nrows, srb;
	uint8_t dtype;
	char name[17];
	const uint8_t *ids, *rows, *states;
};

static bool snap_rows_of(const uint8_t *body, uint64_t blen,
			 struct snap_rows *r)
{
	uint64_t per;

	if (blen < SNAP_ROWS_HEAD)
		return false;
	memcpy(&r->key, body, 8);
	memcpy(&r->total, body + 8, 8);
	memcpy(&r->rowbytes, body + 16, 8);
	memcpy(&r->version, body + 24, 8);
	memcpy(&r->nrows, body + 32, 8);
	memcpy(&r->srb, body + 40, 8);
	r->dtype = body[48];
	memcpy(r->name, body + 56, 16);
	r->name[16] = 0;
	if (!r->rowbytes || r->total % r->rowbytes ||
	    !psched_dtype_size((enum psched_dtype)r->dtype) ||
	    r->rowbytes % psched_dtype_size((enum psched_dtype)r->dtype) ||
	    r->rowbytes > (1u << 30) || r->srb > (1u << 30))
		return false;
	per = 8 + r->rowbytes + r->srb;
	if (r->nrows > (blen - SNAP_ROWS_HEAD) / per ||
	    r->nrows * per != blen - SNAP_ROWS_HEAD)
		return false;
	r->ids = body + SNAP_ROWS_HEAD;
	r->rows = r->ids + r->nrows * 8;
	r->states = r->rows + r->nrows * r->rowbytes;
	return true;
}

bool psd_snap_rows_ok(const uint8_t *body, uint64_t blen)
{
	struct snap_rows r;

	return snap_rows_of(body, blen, &r);
}

int psd_snap_rows_copy(struct psd_kvs *s, struct psd_kvs_snap *sn,
		       struct kvs_rows *e)
{
	struct snap_item *it = psd_snap_item_new(sn);
	uint64_t nrows = e->tab.count, srb = e->state.rowbytes, i, k = 0;
	uint8_t *ids, *rows, *states;
	uint32_t slot;

	if (!it)
		return -ENOMEM;
	it->kind = PSD_SNAP_ROWS;
	it->head_len = SNAP_ROWS_HEAD;
	memcpy(it->head, &e->key, 8);
	memcpy(it->head + 8, &e->total, 8);
	memcpy(it->head + 16, &e->rowbytes, 8);
	memcpy(it->head + 24, &e->version, 8);
	memcpy(it->head + 32, &nrows, 8);
	memcpy(it->head + 40, &srb, 8);
	it->head[48] = e->dtype;
	if (srb && atomic_load(&s->upd.kind) == PSD_UPD_OPT)
		memcpy(it->head + 56, s->upd.name, 16);
	it->data_len = (size_t)(nrows * (8 + e->rowbytes + srb));
	it->data = malloc(it->data_len ? it->data_len : 1);
	if (!it->data)
		return -ENOMEM;
	ids = it->data;
	rows = ids + nrows * 8;
	states = rows + nrows * e->rowbytes;
	for (i = 0; i < e->tab.cap; i++) {
		if (e->tab.ids[i] == PSD_ROWS_EMPTY)
			continue;
		slot = e->tab.idx[i];
		memcpy(ids + k * 8, &e->tab.ids[i], 8);
		memcpy(rows + k * e->rowbytes, psd_rows_at(&e->val, slot),
		       (size_t)e->rowbytes);
		/* A row never updated by the optimizer has no states yet:
		 * zeros, as a new one starts. */
		if (srb && slot < e->state.count)
			memcpy(states + k * srb, psd_rows_at(&e->state, slot),
			       (size_t)srb);
		else if (srb)
			memset(states + k * srb, 0, (size_t)srb);
		k++;
	}
	e->snap_step = sn->step;
	return 0;
}

/* Put row @j of record @r into @e (a new row of the table), with its
 * states when @states. */
static int snap_row_put(struct psd_kvs *s, struct kvs_rows *e,
			const struct snap_rows *r, uint64_t j, uint64_t id,
			bool states)
{
	uint64_t slot, i;
	uint32_t have;

	if (psd_rows_tab_get(&e->tab, id, &have))
		return 0; /* in two records: the first wins */
	if (psd_rows_arena_new(s, &e->val, &slot) ||
	    psd_rows_tab_put(s, &e->tab, id, (uint32_t)slot))
		return -ENOMEM;
	atomic_fetch_add(&s->stored_bytes, e->rowbytes);
	memcpy(psd_rows_at(&e->val, slot), r->rows + j * r->rowbytes,
	       (size_t)r->rowbytes);
	if (!states)
		return 0;
	while (e->state.count <= slot)
		if (psd_rows_arena_new(s, &e->state, &i))
			return -ENOMEM;
	memcpy(psd_rows_at(&e->state, slot), r->states + j * r->srb,
	       (size_t)r->srb);
	return 0;
}

/* Each record of key @e->key in the snapshot, checked against the
 * table's shape (@fill 0) or put in (@fill 1). */
static int snap_rows_pass(struct psd_kvs *s, struct psd_kvs_snap *sn,
			  struct kvs_rows *e, bool fill, bool *found)
{
	struct snap_rows r;
	const uint8_t *body;
	uint64_t blen, j, id;
	struct psd_snap_cursor cur = { 0 };
	const struct psd_snap_file *f;
	uint32_t kind;
	bool states;
	int ret;

	while (psd_snap_set_next(&sn->set, &cur, &kind, &body, &blen, &f)) {
		if (kind != PSD_SNAP_ROWS || !snap_rows_of(body, blen, &r) ||
		    r.key != e->key)
			continue;
		*found = true;
		if (!fill && (r.total != e->total ||
			      r.rowbytes != e->rowbytes || r.dtype != e->dtype))
			return psd_set_errmsg(
				PSCHED_ESIZE,
				"row-sparse key %llu: the snapshot of "
				"step %llu holds %llu rows of %llu "
				"bytes of %s, the job declares %llu "
				"rows of %llu bytes of %s",
				(unsigned long long)e->key,
				(unsigned long long)sn->set.step,
				(unsigned long long)(r.total / r.rowbytes),
				(unsigned long long)r.rowbytes,
				psched_dtype_name(r.dtype),
				(unsigned long long)(e->total / e->rowbytes),
				(unsigned long long)e->rowbytes,
				psched_dtype_name(e->dtype));
		if (!fill)
			continue;
		/* States of another layout than the ones already
		 * restored (one server had switched optimizer): those
		 * rows' states start over. */
		states = r.srb &&
			 (!e->state.count || e->state.rowbytes == r.srb);
		if (states && !e->state.count) {
			e->state.rowbytes = r.srb;
			memcpy(e->state_opt, r.name, 16);
		}
		for (j = 0; j < r.nrows; j++) {
			memcpy(&id, r.ids + j * 8, 8);
			if (id < e->lo || id - e->lo >= e->n)
				continue;
			ret = snap_row_put(s, e, &r, j, id, states);
			if (ret)
				return psd_set_errmsg(
					ret,
					"row-sparse key %llu: no "
					"memory to restore its rows",
					(unsigned long long)e->key);
		}
	}
	return 0;
}

int psd_kvs_restore_rows(struct psched_node *n, struct kvs_rows *e)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_snap *sn = s->snap;
	bool found = false;
	int ret;

	if (!sn || !sn->restoring)
		return 0;
	ret = snap_rows_pass(s, sn, e, false, &found);
	if (!ret && found)
		ret = snap_rows_pass(s, sn, e, true, &found);
	else if (!ret)
		psd_warn("row-sparse key %llu is not in the snapshot of step "
			 "%llu (periodic snapshots leave tables out): it "
			 "starts from its init",
			 (unsigned long long)e->key,
			 (unsigned long long)sn->set.step);
	return ret;
}
