// SPDX-License-Identifier: MIT
/*
 * Optimizer state transfer, the server's side (server/kvs.h): a worker
 * saving or loading optimizer states (psched_kvstore_save/
 * load_optimizer_states) fetches this server's records piece by piece
 * (OP_DUMP), or sends the file's records piece by piece (OP_LOAD); the
 * records apply to this server's byte range of each key
 * (common/updater.h psd_upd_states_load), so any server count or
 * partition size loads any file.
 */
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "optim.h"

void psd_kvs_states_drop(struct psd_kvs *s)
{
	free(s->xfer);
	s->xfer = NULL;
	s->xfer_len = 0;
	s->xfer_op = 0;
}

/* psd_upd_range_fn over the server's entries. */
static bool kvs_range_of(void *arg, uint64_t key, uint8_t *dtype,
			 uint64_t *total, uint64_t *off, uint64_t *len)
{
	struct psd_kvs_entry *e = psd_kvs_entry_find(arg, key);

	if (!e)
		return false;
	*dtype = e->dtype;
	*total = e->total;
	*off = e->off;
	*len = e->len;
	return true;
}

/* Keys with a step open or held pushes: states would move under it. */
static int kvs_states_busy(struct psd_kvs *s)
{
	struct psd_kvs_entry *e;
	size_t pos = 0;

	while ((e = psd_map_next(&s->entries, &pos, NULL)))
		if (e->open || !psd_list_empty(&e->held))
			return psd_set_errmsg(-EBUSY,
					      "optimizer states: key %llu has "
					      "a step in progress (wait for "
					      "the pushes first)",
					      (unsigned long long)e->key);
	return 0;
}

static int kvs_states_dump(struct psd_kvs *s, const Psched__OptStates *st,
			   Psched__CommandAck *ack)
{
	size_t piece;
	int ret;

	if (st->offset == 0) {
		psd_kvs_states_drop(s);
		ret = kvs_states_busy(s);
		if (ret)
			return ret;
		ret = psd_upd_states_dump(&s->upd, kvs_range_of, s, &s->xfer,
					  &s->xfer_len, s->xfer_name);
		if (ret)
			return ret;
		s->xfer_op = PSCHED__OPT_STATES__OP__OP_DUMP;
	} else if (s->xfer_op != PSCHED__OPT_STATES__OP__OP_DUMP) {
		return psd_set_errmsg(-EPROTO,
				      "optimizer states: dump piece at %llu "
				      "without a dump from 0",
				      (unsigned long long)st->offset);
	}
	ack->total = s->xfer_len;
	ack->message = s->xfer_name; /* the optimizer the records are of */
	if (st->offset >= s->xfer_len)
		return 0;
	piece = s->xfer_len - (size_t)st->offset;
	if (piece > PSD_OPT_PIECE)
		piece = PSD_OPT_PIECE;
	ack->data.data = s->xfer + st->offset;
	ack->data.len = piece;
	return 0;
}

static int kvs_states_load(struct psd_kvs *s, const Psched__OptStates *st)
{
	int ret;

	if (st->offset == 0) {
		psd_kvs_states_drop(s);
		if (!st->name || strlen(st->name) > 15 ||
		    st->total > ((uint64_t)1 << 40))
			return psd_set_errmsg(-EINVAL,
					      "optimizer states: bad load "
					      "(name or size)");
		s->xfer = malloc(st->total ? (size_t)st->total : 1);
		if (!s->xfer)
			return psd_set_errmsg(-ENOMEM,
					      "optimizer states: no memory "
					      "for %llu bytes",
					      (unsigned long long)st->total);
		s->xfer_len = (size_t)st->total;
		s->xfer_op = PSCHED__OPT_STATES__OP__OP_LOAD;
		strcpy(s->xfer_name, st->name);
	}
	if (s->xfer_op != PSCHED__OPT_STATES__OP__OP_LOAD ||
	    st->total != s->xfer_len || st->offset > s->xfer_len ||
	    st->data.len > s->xfer_len - st->offset) {
		psd_kvs_states_drop(s);
		return psd_set_errmsg(-EPROTO,
				      "optimizer states: load piece [%llu, "
				      "+%zu) does not fit the load of %llu "
				      "bytes",
				      (unsigned long long)st->offset,
				      st->data.len,
				      (unsigned long long)st->total);
	}
	if (st->data.len)
		memcpy(s->xfer + st->offset, st->data.data, st->data.len);
	if (st->offset + st->data.len < s->xfer_len)
		return 0;
	ret = kvs_states_busy(s);
	if (!ret)
		ret = psd_upd_states_load(&s->upd, s->xfer_name, s->xfer,
					  s->xfer_len, kvs_range_of, s, false);
	psd_kvs_states_drop(s);
	return ret;
}

int psd_kvs_states_command(struct psched_node *n, const Psched__OptStates *st,
			   Psched__CommandAck *ack)
{
	struct psd_kvs *s = psd_kvs_of(n);

	switch (st->op) {
	case PSCHED__OPT_STATES__OP__OP_DUMP:
		return kvs_states_dump(s, st, ack);
	case PSCHED__OPT_STATES__OP__OP_LOAD:
		return kvs_states_load(s, st);
	default:
		return psd_set_errmsg(-EINVAL,
				      "optimizer states: unknown op %d",
				      (int)st->op);
	}
}
