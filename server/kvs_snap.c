// SPDX-License-Identifier: MIT
/*
 * Snapshots (docs/snapshots.md), the server's side: taking them and
 * restoring from one.
 *
 * Taking: with PS_SNAPSHOT_DIR and PS_SNAPSHOT_STEPS=N, step T (every
 * multiple of N) of each sync key is copied the moment the step is
 * applied (psd_kvs_snap_dense(), from kvs_step.c), with the key's
 * optimizer states; later steps may then run on while the copy waits.
 * Once every key that has steps has been copied at T, the keys that
 * never reached T (pushed less often, or only initialised) are copied
 * as they are, and a writer thread writes the file
 * (common/snapfile.h), off the van thread.  A key that reaches the next
 * snapshot step T + N before the others reached T closes snapshot T the
 * same way.  Each server keeps its last two files and removes older
 * ones.
 *
 * Restoring: with PS_RESTORE=DIR the latest complete snapshot is read at
 * start (every file, whatever server count wrote it).  A key created
 * here takes its bytes from the records that cover its range, its
 * optimizer states from the states records once the optimizer is
 * installed; the init's own value is ignored, and its steps count from
 * 0 again.
 *
 * Van thread only, but the writer thread, which owns what it was given.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "kvs_rows.h"
#include "kvs_snap.h"
#include "optim.h"

/* What the writer thread is handed. */
struct snap_job {
	char dir[1024];
	struct psd_auth_secret sec;
	uint64_t step, prune; /* prune: this server's file to remove, 0 none */
	uint32_t server, nservers;
	struct snap_item *items;
	size_t nitems;
};

static void snap_items_free(struct snap_item *it, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (it[i].big)
			psd_big_free(it[i].data);
		else
			free(it[i].data);
	}
	free(it);
}

static void *snap_writer(void *arg)
{
	struct snap_job *j = arg;
	struct psd_snap_out *out =
		calloc(j->nitems ? j->nitems : 1, sizeof(*out));
	size_t i;
	int ret;

	if (!out) {
		psd_err("snapshot of step %llu: no memory to write it",
			(unsigned long long)j->step);
		goto done;
	}
	for (i = 0; i < j->nitems; i++) {
		out[i].kind = j->items[i].kind;
		out[i].part[0].base = j->items[i].head;
		out[i].part[0].len = j->items[i].head_len;
		out[i].part[1].base = j->items[i].data;
		out[i].part[1].len = j->items[i].data_len;
	}
	ret = psd_snap_write(j->dir, &j->sec, j->step, j->server, j->nservers,
			     out, j->nitems);
	if (ret) {
		psd_err("%s", psched_errmsg());
	} else {
		psd_info("snapshot of step %llu written: %zu records in "
			 "%s/step-%llu",
			 (unsigned long long)j->step, j->nitems, j->dir,
			 (unsigned long long)j->step);
		if (j->prune)
			psd_snap_remove(j->dir, j->prune, j->server,
					j->nservers);
	}
	free(out);
done:
	snap_items_free(j->items, j->nitems);
	explicit_bzero(&j->sec, sizeof(j->sec));
	free(j);
	return NULL;
}

/* Wait for the writer of the last snapshot, if one runs. */
static void snap_join(struct psd_kvs_snap *sn)
{
	if (sn->th_live) {
		pthread_join(sn->th, NULL);
		sn->th_live = false;
	}
}

/* The copies become a job for a writer thread. */
static void snap_write(struct psched_node *n, struct psd_kvs_snap *sn)
{
	struct snap_job *j = calloc(1, sizeof(*j));
	int ret;

	if (!j) {
		psd_err("snapshot of step %llu: no memory to write it",
			(unsigned long long)sn->step);
		snap_items_free(sn->items, sn->nitems);
		goto out;
	}
	snprintf(j->dir, sizeof(j->dir), "%s", sn->dir);
	j->sec = n->secret;
	j->step = sn->step + (sn->every && !sn->demand ? sn->base : 0);
	j->server = (uint32_t)n->rank;
	j->nservers = n->num_server;
	j->items = sn->items;
	j->nitems = sn->nitems;
	/* Keep this server's last two (a step taken again replaces its
	 * file: nothing to prune). */
	if (j->step != sn->kept[1]) {
		j->prune = sn->kept[0];
		sn->kept[0] = sn->kept[1];
		sn->kept[1] = j->step;
	}
	snap_join(sn);
	ret = pthread_create(&sn->th, NULL, snap_writer, j);
	if (ret) {
		psd_err("snapshot of step %llu: no writer thread (%s)",
			(unsigned long long)sn->step, strerror(ret));
		snap_items_free(j->items, j->nitems);
		free(j);
	} else {
		sn->th_live = true;
	}
out:
	sn->items = NULL;
	sn->nitems = sn->cap = 0;
	sn->step = 0;
	sn->captured = 0;
}

struct snap_item *psd_snap_item_new(struct psd_kvs_snap *sn)
{
	struct snap_item *ni;

	if (sn->nitems == sn->cap) {
		size_t cap = sn->cap ? 2 * sn->cap : 64;

		ni = realloc(sn->items, cap * sizeof(*ni));
		if (!ni)
			return NULL;
		sn->items = ni;
		sn->cap = cap;
	}
	ni = &sn->items[sn->nitems++];
	memset(ni, 0, sizeof(*ni));
	return ni;
}

/* psd_upd_range_fn: the range of one entry (@arg), no other key. */
static bool snap_range_one(void *arg, uint64_t key, uint8_t *dtype,
			   uint64_t *total, uint64_t *off, uint64_t *len)
{
	const struct psd_kvs_entry *e = arg;

	if (key != e->key)
		return false;
	*dtype = e->dtype;
	*total = e->total;
	*off = e->off;
	*len = e->len;
	return true;
}

/* Copy @e as it is now (its value, its optimizer states). */
static int snap_copy(struct psd_kvs *s, struct psd_kvs_snap *sn,
		     struct psd_kvs_entry *e)
{
	struct snap_item *it = psd_snap_item_new(sn);
	uint8_t *states = NULL;
	size_t slen = 0;
	char name[16] = { 0 };

	if (!it)
		return -ENOMEM;
	it->kind = PSD_SNAP_DENSE;
	it->head_len = SNAP_DENSE_HEAD;
	memcpy(it->head, &e->key, 8);
	memcpy(it->head + 8, &e->total, 8);
	memcpy(it->head + 16, &e->off, 8);
	memcpy(it->head + 24, &e->len, 8);
	memcpy(it->head + 32, &e->version, 8);
	it->head[40] = e->dtype;
	/* Huge pages where they can be had: a copy of a big range costs
	 * its page faults first, on the van thread. */
	it->data = psd_big_alloc(e->len ? e->len : 1, true, false);
	it->big = true;
	if (!it->data)
		return -ENOMEM;
	memcpy(it->data, e->value, (size_t)e->len);
	it->data_len = (size_t)e->len;
	e->snap_step = sn->step;
	if (psd_upd_key_states_dump(&s->upd, e->key, snap_range_one, e, &states,
				    &slen, name))
		return -ENOMEM;
	if (!slen) {
		free(states);
		return 0;
	}
	it = psd_snap_item_new(sn);
	if (!it) {
		free(states);
		return -ENOMEM;
	}
	it->kind = PSD_SNAP_STATES;
	it->head_len = SNAP_STATES_HEAD;
	memcpy(it->head, name, 16);
	it->data = states;
	it->data_len = slen;
	return 0;
}

/* Drop snapshot sn->step (logged with @why). */
static void snap_abandon(struct psd_kvs_snap *sn, const char *why)
{
	psd_warn("snapshot of step %llu not taken: %s",
		 (unsigned long long)sn->step, why);
	snap_items_free(sn->items, sn->nitems);
	sn->items = NULL;
	sn->nitems = sn->cap = 0;
	sn->step = 0;
	sn->captured = 0;
}

/* Every key not copied at sn->step is copied as it is; then written. */
static void snap_close(struct psched_node *n, struct psd_kvs_snap *sn)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_entry *e;
	char why[160];
	size_t pos = 0;

	while ((e = psd_map_next(&s->entries, &pos, NULL))) {
		if (e->snap_step == sn->step || e->conflict)
			continue;
		/* An updater folds each chunk into the value as it
		 * completes: mid-step, the value is half of two steps. */
		if (e->open && e->upd) {
			snprintf(why, sizeof(why),
				 "key %llu is half-way through step %llu",
				 (unsigned long long)e->key,
				 (unsigned long long)e->version + 1);
			snap_abandon(sn, why);
			return;
		}
		if (snap_copy(s, sn, e)) {
			snap_abandon(sn, "no memory for the copies");
			return;
		}
	}
	/* A row table's steps need not line up with the dense keys' (a
	 * KVStore's init of one is a step of it): psched_snapshot() takes
	 * them, between steps. */
	if (s->rows && psd_map_count(&s->rows->keys) && !sn->rows_warned) {
		psd_warn("snapshot of step %llu: row-sparse tables are not in "
			 "periodic snapshots; take them with "
			 "psched_snapshot() / kv.snapshot()",
			 (unsigned long long)sn->step);
		sn->rows_warned = true;
	}
	snap_write(n, sn);
}

void psd_kvs_snap_dense(struct psched_node *n, struct psd_kvs_entry *e)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_snap *sn = s->snap;
	uint64_t t = e->version;

	if (!sn || !sn->every)
		return;
	if (t == 1)
		sn->nstepped++;
	if (t % sn->every)
		return;
	if (sn->step && t > sn->step)
		snap_close(n, sn); /* the others lag a whole period */
	if (!sn->step && t > sn->last) {
		sn->step = sn->last = t;
		sn->captured = 0;
	}
	if (t != sn->step)
		return;
	if (snap_copy(s, sn, e)) {
		snap_abandon(sn, "no memory for the copies");
		return;
	}
	if (++sn->captured >= sn->nstepped)
		snap_close(n, sn);
}

/* Has row-sparse key @r a step under way (pieces in, or held)? */
static bool snap_rows_busy(const struct kvs_rows *r)
{
	return r->wdone || r->merge.count || !psd_list_empty(&r->held);
}

int psd_kvs_snap_now(struct psched_node *n, uint64_t step)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_snap *sn = s->snap;
	struct psd_kvs_entry *e;
	struct kvs_rows *r;
	size_t pos = 0;

	if (!sn || !sn->dir[0])
		return psd_set_errmsg(-EINVAL,
				      "this server has no PS_SNAPSHOT_DIR to "
				      "write snapshots into");
	if (sn->step)
		return psd_set_errmsg(-EBUSY,
				      "this server is taking the snapshot of "
				      "step %llu (PS_SNAPSHOT_STEPS)",
				      (unsigned long long)sn->step);
	while ((e = psd_map_next(&s->entries, &pos, NULL)))
		if (e->open || !psd_list_empty(&e->held))
			return psd_set_errmsg(-EBUSY,
					      "key %llu has step %llu under "
					      "way (snapshots are taken "
					      "between steps)",
					      (unsigned long long)e->key,
					      (unsigned long long)e->version +
						      1);
	pos = 0;
	while (s->rows && (r = psd_map_next(&s->rows->keys, &pos, NULL)))
		if (snap_rows_busy(r))
			return psd_set_errmsg(-EBUSY,
					      "row-sparse key %llu has "
					      "step %llu under way (snapshots "
					      "are taken between steps)",
					      (unsigned long long)r->key,
					      (unsigned long long)r->version +
						      1);
	sn->step = step;
	sn->demand = true;
	pos = 0;
	while ((e = psd_map_next(&s->entries, &pos, NULL)))
		if (!e->conflict && snap_copy(s, sn, e))
			goto nomem;
	pos = 0;
	while (s->rows && (r = psd_map_next(&s->rows->keys, &pos, NULL)))
		if (psd_snap_rows_copy(s, sn, r))
			goto nomem;
	snap_write(n, sn);
	sn->demand = false;
	return 0;
nomem:
	sn->demand = false;
	snap_abandon(sn, "no memory for the copies");
	return psd_set_errmsg(-ENOMEM, "no memory to copy the snapshot");
}

/* -- restoring ------------------------------------------------------ */

struct snap_dense {
	uint64_t key, total, off, len, version;
	uint8_t dtype;
	const uint8_t *data;
};

static int snap_dense_of(const struct psd_snap_file *f, const uint8_t *body,
			 uint64_t blen, struct snap_dense *d)
{
	if (blen < SNAP_DENSE_HEAD)
		goto bad;
	memcpy(&d->key, body, 8);
	memcpy(&d->total, body + 8, 8);
	memcpy(&d->off, body + 16, 8);
	memcpy(&d->len, body + 24, 8);
	memcpy(&d->version, body + 32, 8);
	d->dtype = body[40];
	d->data = body + SNAP_DENSE_HEAD;
	if (d->len != blen - SNAP_DENSE_HEAD || d->off > d->total ||
	    d->len > d->total - d->off ||
	    !psched_dtype_size((enum psched_dtype)d->dtype))
		goto bad;
	return 0;
bad:
	return psd_set_errmsg(-EPROTO, "snapshot %s: malformed dense record",
			      f->path);
}

/* A states record: the optimizer's name, then whole state records. */
static bool snap_states_ok(const uint8_t *body, uint64_t blen)
{
	struct psd_opt_rec r;
	size_t pos, used;

	if (blen < SNAP_STATES_HEAD || !memchr(body, 0, SNAP_STATES_HEAD))
		return false;
	for (pos = SNAP_STATES_HEAD; pos < blen; pos += used)
		if (psd_opt_rec_parse(body + pos, (size_t)(blen - pos), &r,
				      &used) ||
		    !used)
			return false;
	return true;
}

/* Check every record of the set once, at start. */
static int snap_check_set(const struct psd_snap_set *set)
{
	struct snap_dense d;
	const uint8_t *body;
	uint64_t blen;
	struct psd_snap_cursor cur = { 0 };
	const struct psd_snap_file *f;
	uint32_t kind;
	int ret;

	while (psd_snap_set_next(set, &cur, &kind, &body, &blen, &f)) {
		if (kind == PSD_SNAP_DENSE) {
			ret = snap_dense_of(f, body, blen, &d);
			if (ret)
				return ret;
		} else if (kind == PSD_SNAP_STATES &&
			   !snap_states_ok(body, blen)) {
			return psd_set_errmsg(
				-EPROTO, "snapshot %s: malformed states record",
				f->path);
		} else if (kind == PSD_SNAP_ROWS &&
			   !psd_snap_rows_ok(body, blen)) {
			return psd_set_errmsg(
				-EPROTO, "snapshot %s: malformed rows record",
				f->path);
		}
	}
	return 0;
}

/* Copy the snapshot's bytes of @e's range; *@found: some record had the
 * key. */
static int snap_fill(struct psd_kvs_snap *sn, struct psd_kvs_entry *e,
		     bool *found)
{
	uint64_t covered = 0, lo, hi;
	struct snap_dense d;
	const uint8_t *body;
	uint64_t blen;
	struct psd_snap_cursor cur = { 0 };
	const struct psd_snap_file *f;
	uint32_t kind;

	*found = false;
	while (psd_snap_set_next(&sn->set, &cur, &kind, &body, &blen, &f)) {
		if (kind != PSD_SNAP_DENSE ||
		    snap_dense_of(f, body, blen, &d) || d.key != e->key)
			continue;
		*found = true;
		if (d.total != e->total || d.dtype != e->dtype)
			return psd_set_errmsg(
				PSCHED_ESIZE,
				"key %llu: the snapshot of step %llu "
				"holds %llu bytes of %s, the job "
				"declares %llu bytes of %s",
				(unsigned long long)e->key,
				(unsigned long long)sn->set.step,
				(unsigned long long)d.total,
				psched_dtype_name(d.dtype),
				(unsigned long long)e->total,
				psched_dtype_name(e->dtype));
		lo = d.off > e->off ? d.off : e->off;
		hi = d.off + d.len < e->off + e->len ? d.off + d.len
						     : e->off + e->len;
		if (lo >= hi)
			continue;
		memcpy(e->value + (lo - e->off), d.data + (lo - d.off),
		       (size_t)(hi - lo));
		covered += hi - lo;
	}
	if (*found && covered != e->len)
		return psd_set_errmsg(-EPROTO,
				      "key %llu: the snapshot of step %llu "
				      "covers %llu of the %llu bytes this "
				      "server holds",
				      (unsigned long long)e->key,
				      (unsigned long long)sn->set.step,
				      (unsigned long long)covered,
				      (unsigned long long)e->len);
	return 0;
}

/* psd_upd_range_fn over the restored entries. */
static bool snap_range_restored(void *arg, uint64_t key, uint8_t *dtype,
				uint64_t *total, uint64_t *off, uint64_t *len)
{
	struct psd_kvs_entry *e = psd_kvs_entry_find(arg, key);

	if (!e || !e->states_due)
		return false;
	return snap_range_one(e, key, dtype, total, off, len);
}

/* The states records of the snapshot for the keys @range_of knows,
 * under the optimizer the installed one must be. */
static void snap_load_states(struct psd_kvs *s, psd_upd_range_fn *range_of,
			     void *arg)
{
	struct psd_kvs_snap *sn = s->snap;
	uint8_t *all = NULL, *na;
	size_t len = 0;
	char name[17] = "";
	const uint8_t *body;
	uint64_t blen;
	struct psd_snap_cursor cur = { 0 };
	const struct psd_snap_file *f;
	uint32_t kind;

	while (psd_snap_set_next(&sn->set, &cur, &kind, &body, &blen, &f)) {
		if (kind != PSD_SNAP_STATES)
			continue;
		memcpy(name, body, 16);
		na = realloc(all, len + (size_t)blen);
		if (!na) {
			psd_err("snapshot: no memory to restore "
				"optimizer states");
			free(all);
			return;
		}
		all = na;
		memcpy(all + len, body + SNAP_STATES_HEAD,
		       (size_t)blen - SNAP_STATES_HEAD);
		len += (size_t)blen - SNAP_STATES_HEAD;
	}
	if (len && psd_upd_states_merge(&s->upd, name, all, len, range_of, arg))
		psd_warn("snapshot of step %llu: optimizer states not "
			 "restored (%s); they start over",
			 (unsigned long long)sn->set.step, psched_errmsg());
	free(all);
}

int psd_kvs_restore_entry(struct psched_node *n, struct psd_kvs_entry *e)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_snap *sn = s->snap;
	bool found;
	int ret;

	if (!sn || !sn->restoring || !e->len)
		return 0;
	ret = snap_fill(sn, e, &found);
	if (ret || !found)
		return ret;
	e->restored = true;
	psd_kvs_entry_filled(s, e, e->len);
	e->states_due = true;
	if (atomic_load(&s->upd.kind) == PSD_UPD_OPT) {
		snap_load_states(s, snap_range_one, e);
		e->states_due = false;
	}
	return 0;
}

void psd_kvs_restore_states(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	struct psd_kvs_entry *e;
	size_t pos = 0;

	if (!s->snap || !s->snap->restoring)
		return;
	/* Once per key: a later optimizer change (a new learning rate)
	 * keeps the states the job has since. */
	snap_load_states(s, snap_range_restored, s);
	while ((e = psd_map_next(&s->entries, &pos, NULL)))
		e->states_due = false;
}

int psd_kvs_snap_init(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);
	const struct psched_cfg *cfg = &n->cfg;
	struct psd_kvs_snap *sn;
	int ret;

	if (cfg->snapshot_steps && !cfg->snapshot_dir[0])
		return psd_set_errmsg(-EINVAL,
				      "PS_SNAPSHOT_STEPS=%u needs "
				      "PS_SNAPSHOT_DIR, the directory to "
				      "write snapshots into",
				      cfg->snapshot_steps);
	if (!cfg->snapshot_dir[0] && !cfg->restore[0])
		return 0;
	sn = calloc(1, sizeof(*sn));
	if (!sn)
		return -ENOMEM;
	snprintf(sn->dir, sizeof(sn->dir), "%s", cfg->snapshot_dir);
	sn->every = sn->dir[0] ? cfg->snapshot_steps : 0;
	if (cfg->restore[0]) {
		ret = psd_snap_open(cfg->restore, &n->secret, &sn->set);
		if (!ret)
			ret = snap_check_set(&sn->set);
		if (ret) {
			char why[600];

			snprintf(why, sizeof(why), "%s", psched_errmsg());
			psd_snap_close(&sn->set);
			free(sn);
			return psd_set_errmsg(ret, "cannot restore from %s: %s",
					      cfg->restore, why);
		}
		sn->restoring = true;
		sn->base = sn->set.step;
		psd_info("restoring the snapshot of step %llu (%u servers) "
			 "from %s",
			 (unsigned long long)sn->set.step, sn->set.nservers,
			 sn->set.dir);
	}
	s->snap = sn;
	return 0;
}

void psd_kvs_snap_fini(struct psd_kvs *s)
{
	struct psd_kvs_snap *sn = s->snap;

	if (!sn)
		return;
	snap_join(sn);
	snap_items_free(sn->items, sn->nitems);
	psd_snap_close(&sn->set);
	free(sn);
	s->snap = NULL;
}
