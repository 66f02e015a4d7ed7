// SPDX-License-Identifier: MIT
/*
 * KV server requests (server/kvs.h): the one pipeline every request
 * takes (a worker's request, within PS_MAX_TENSOR_BYTES, handed to its
 * family, struct psd_kvs_family), and the dense family: its header is
 * checked against the key's entry, range, config epoch and step before
 * its payload is read, and the payload's destination is chosen then (in
 * place, scratch, or a buffer held until its step opens).  Then init,
 * pull, push, pushpull.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "kvs.h"
#include "partition.h"

/* Request @h names a byte range this server does not hold. */
static bool kvs_out_of_range(const struct psd_kvs_entry *e,
			     const struct psd_hdr *h)
{
	return h->offset < e->off || h->span > e->len ||
	       h->offset - e->off > e->len - h->span || !h->span;
}

static struct psd_kvs_conn *kvs_conn_ctx(struct psd_conn *c)
{
	if (!c->ctx)
		c->ctx = calloc(1, sizeof(struct psd_kvs_conn));
	return c->ctx;
}

static const char *kvs_node_desc(struct psched_node *n, int id)
{
	struct psd_peer *p = psd_node_peer(n, id);

	return p ? p->desc : "an unknown node";
}

/* Tell every other worker whose init of @e was answered that the key's
 * init conflicts: they are past their init (in the barrier that follows
 * it, or beyond) and would otherwise wait for a worker that failed. */
static void kvs_init_conflict_notify(struct psched_node *n,
				     struct psd_kvs_entry *e,
				     const struct psd_hdr *h, int wrank)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_peer *p;
	unsigned r;

	for (r = 0; r < s->nworker; r++) {
		if (!e->inited[r] || (int)r == wrank)
			continue;
		p = psd_node_peer(n, psd_worker_id(n, r));
		if (p && p->conn && !p->dead)
			psd_kvs_send_error(n, p->conn, h, PSCHED_ESIZE,
					   e->conflict, true);
	}
}

/*
 * Two workers disagree on the length or dtype of a key: refuse @h, keep
 * the reason on the entry (every later request on the key is refused with
 * it), and fail what waits on the key's open step now, since that step
 * cannot complete.  At init, also fail every worker whose init of the key
 * was answered.
 */
static int kvs_conflict(struct psched_node *n, struct psd_conn *c,
			struct psd_kvs_entry *e, const struct psd_hdr *h,
			int wrank)
{
	char why[384];

	snprintf(why, sizeof(why),
		 "key %llu: %s %s it as %llu bytes of dtype %u, but %s "
		 "created it on this server as %llu bytes of dtype %u",
		 (unsigned long long)h->key, kvs_node_desc(n, c->peer_id),
		 h->type == PSD_MSG_INIT ? "initialised" : "used",
		 (unsigned long long)h->total, h->dtype,
		 kvs_node_desc(n, e->creator), (unsigned long long)e->total,
		 e->dtype);
	if (!e->conflict)
		e->conflict = strdup(why);
	psd_kvs_reject(n, c, h, PSCHED_ESIZE, why);
	psd_kvs_drop_entry_waits(n, e, NULL, PSCHED_ESIZE, why);
	if (h->type == PSD_MSG_INIT && e->conflict)
		kvs_init_conflict_notify(n, e, h, wrank);
	return PSCHED_ESIZE;
}

static int kvs_check_entry(struct psched_node *n, struct psd_conn *c,
			   const struct psd_hdr *h, int wrank,
			   struct psd_kvs_entry **ep)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_entry *e = psd_kvs_entry_find(s, h->key);
	int ret;

	if (!e && psd_kvs_rows_has(s, h->key))
		return psd_kvs_reject(n, c, h, PSCHED_ESIZE,
				      "the key is row-sparse here: use the "
				      "row-sparse calls");
	if (!e && h->type == PSD_MSG_PULL)
		return psd_kvs_reject(n, c, h, PSCHED_EUNKNOWNKEY,
				      "unknown key (never pushed or "
				      "initialised)");
	if (!e) {
		ret = psd_kvs_entry_create(n, h, &e);
		if (ret)
			return psd_kvs_reject(n, c, h, ret,
					      "cannot allocate the key's "
					      "storage");
		e->creator = c->peer_id;
		if (psd_kvs_restore_entry(n, e))
			e->conflict = strdup(psched_errmsg());
	}
	if (e->total != h->total || e->dtype != h->dtype)
		return kvs_conflict(n, c, e, h, wrank);
	if (e->conflict)
		return psd_kvs_reject(n, c, h, PSCHED_ESIZE, e->conflict);
	if (h->type == PSD_MSG_INIT && !(h->flags & PSD_F_HAS_VALUE)) {
		*ep = e;
		return 0;
	}
	if (!e->len || kvs_out_of_range(e, h))
		return psd_kvs_reject(n, c, h, -EPROTO,
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
	const struct psd_cfg_entry *want, *got;

	if (h->epoch > psd_cfgtab_last(&s->cfgs)->epoch)
		return false;
	want = psd_cfgtab_for_step(&s->cfgs, h->step);
	if (want->epoch == h->epoch)
		return false;
	/* Cut before a membership-only switch that starts at its step
	 * (docs/elastic.md): the same layout, counted with the new members. */
	got = psd_cfgtab_find(&s->cfgs, h->epoch);
	if (got && got->epoch < want->epoch &&
	    got->partition_bytes == want->partition_bytes)
		return false;
	psd_err("%s pushed key %llu step %llu with config epoch %u, but "
		"that step belongs to epoch %u (from step %llu)",
		c->peer, (unsigned long long)h->key,
		(unsigned long long)h->step, h->epoch, want->epoch,
		(unsigned long long)want->apply_from_step);
	return true;
}

/* A push of a step whose (known) config leaves its worker out. */
static bool kvs_not_member(const struct psd_kvs *s, const struct psd_hdr *h,
			   int wrank)
{
	if (h->epoch > psd_cfgtab_last(&s->cfgs)->epoch)
		return false;
	return wrank < 0 ||
	       !psd_cfg_is_member(psd_cfgtab_for_step(&s->cfgs, h->step),
				  (unsigned)wrank);
}

int psd_kvs_check_member(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, int wrank, bool by_step)
{
	const struct psd_kvs *s = psd_kvs_of(n);
	const struct psd_cfg_entry *cfg =
		psd_cfgtab_for_step(&s->cfgs, h->step);

	if (by_step ? wrank >= 0 && psd_cfg_is_member(cfg, (unsigned)wrank)
		    : !kvs_not_member(s, h, wrank))
		return 0;
	return psd_kvs_rejectf(n, c, h, -EPROTO,
			       "worker rank %d is no member of step %llu "
			       "(config epoch %u): it left the job",
			       wrank, (unsigned long long)h->step,
			       by_step ? cfg->epoch : h->epoch);
}

unsigned psd_kvs_step_nmembers(const struct psd_kvs *s, uint64_t step)
{
	return psd_cfg_nmembers(psd_cfgtab_for_step(&s->cfgs, step),
				s->nworker);
}

int psd_kvs_hold_early(struct psched_node *n, struct psd_conn *c,
		       struct psd_kvs_conn *kc, const struct psd_hdr *h,
		       uint64_t open, const char *what, void **dst)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (psd_kvs_admit_early(n, c, h, open, what))
		return PSD_RX_DISCARD;
	kc->hold = malloc(h->length ? (size_t)h->length : 1);
	if (!kc->hold) {
		psd_kvs_reject(n, c, h, -ENOMEM,
			       "no memory to hold an early push");
		return PSD_RX_DISCARD;
	}
	kc->hold_len = h->length;
	s->parked_bytes += h->length;
	*dst = kc->hold;
	return 0;
}

/* Chunks a layout nobody agreed on here may have: its counts cost 20
 * bytes a chunk, at most 0.5% of the range on the sender's word. */
#define KVS_TRUST_CHUNKS(len) (1 + (len) / 4096)

int psd_kvs_layout_check(const struct psd_kvs *s, const struct psd_kvs_entry *e,
			 const struct psd_hdr *h)
{
	unsigned es = psched_dtype_size((enum psched_dtype)e->dtype);
	uint64_t chunk = psd_part_chunk_size(h->part, es, e->len);
	bool known = h->epoch <= psd_cfgtab_last(&s->cfgs)->epoch;
	const struct psd_cfg_entry *cfg;

	if (e->open || h->step != e->version + 1 || chunk == e->len)
		return 0;
	if (known) {
		/* A scheduler's config is every node's; epoch 0 is each
		 * node's own start-up sizes, which may differ. */
		cfg = psd_cfgtab_for_step(&s->cfgs, h->step);
		if (chunk ==
		    psd_part_chunk_size(cfg->partition_bytes, es, e->len))
			return 0;
		if (cfg->epoch)
			return -EPROTO;
	}
	if (psd_part_count(e->len, chunk) <= KVS_TRUST_CHUNKS(e->len))
		return 0;
	return known ? -EPROTO : 1;
}

static void kvs_layout_refuse(struct psched_node *n, struct psd_conn *c,
			      const struct psd_hdr *h)
{
	const struct psd_cfg_entry *cfg =
		psd_cfgtab_for_step(&psd_kvs_of(n)->cfgs, h->step);

	psd_kvs_rejectf(n, c, h, -EPROTO,
			"chunks of %llu bytes are not the layout of step %llu "
			"(config epoch %u: partition %llu bytes%s)",
			(unsigned long long)h->part,
			(unsigned long long)h->step, cfg->epoch,
			(unsigned long long)cfg->partition_bytes,
			cfg->epoch ? ""
				   : ", this server's PS_PARTITION_BYTES; "
				     "start servers and workers with the same "
				     "one");
}

/* Where the payload of a sync push goes, decided before it is read. */
static int kvs_push_header(struct psched_node *n, struct psd_conn *c,
			   struct psd_kvs_conn *kc, const struct psd_hdr *h,
			   void **dst)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_entry *e = kc->e;
	char what[48];
	uint64_t idx;
	int layout;

	if (kvs_epoch_mismatch(s, h, c)) {
		psd_kvs_reject(n, c, h, -EPROTO,
			       "chunk cut with another config epoch than its "
			       "step's");
		return PSD_RX_DISCARD;
	}
	if (psd_kvs_check_member(n, c, h, kc->wrank, false))
		return PSD_RX_DISCARD;
	if (h->step <= e->version) {
		psd_kvs_reject(n, c, h, -EPROTO, "step already applied");
		return PSD_RX_DISCARD;
	}
	layout = psd_kvs_layout_check(s, e, h);
	if (layout < 0) {
		kvs_layout_refuse(n, c, h);
		return PSD_RX_DISCARD;
	}
	if (h->step > e->version + 1 || layout) {
		snprintf(what, sizeof(what), "push of key %llu",
			 (unsigned long long)h->key);
		return psd_kvs_hold_early(n, c, kc, h, e->version + 1, what,
					  dst);
	}
	if (psd_kvs_step_open(s, e, h->part) ||
	    psd_kvs_chunk_index(e, h, &idx)) {
		psd_kvs_reject(n, c, h, -EPROTO,
			       "chunk does not fit the step's layout");
		return PSD_RX_DISCARD;
	}
	/* One worker: nobody else writes this chunk, so land in place. */
	if (s->nworker == 1 && e->counts[idx] == 0 &&
	    !(h->flags & PSD_F_COMPRESSED)) {
		*dst = e->merge + (h->offset - e->off);
		kc->direct = true;
	}
	return 0;
}

/* The dense family's header: the key's entry, then a sync push's step. */
static int kvs_dense_header(struct psched_node *n, struct psd_conn *c,
			    struct psd_kvs_conn *kc, const struct psd_hdr *h,
			    void **dst)
{
	if (kvs_check_entry(n, c, h, kc->wrank, &kc->e))
		return PSD_RX_DISCARD; /* already answered */
	if (h->type != PSD_MSG_PUSH && h->type != PSD_MSG_PUSHPULL)
		return 0;
	if (psd_kvs_of(n)->async)
		return 0;
	return kvs_push_header(n, c, kc, h, dst);
}

static void kvs_on_pull(struct psched_node *n, struct psd_conn *c,
			struct psd_kvs_entry *e, const struct psd_hdr *h)
{
	int ret = psd_kvs_pull_ready(n, c, h, e->version, 0);

	if (ret > 0)
		psd_kvs_reply_pull(n, c, e, h);
	else if (!ret && psd_kvs_queue_pull(n, c, &e->pulls, h, NULL, 0))
		psd_kvs_reply_status(n, c, h, -ENOMEM);
}

static void kvs_on_init(struct psched_node *n, struct psd_conn *c,
			struct psd_kvs_conn *kc, const struct psd_hdr *h,
			const void *payload)
{
	struct psd_kvs_entry *e = kc->e;

	/* Another worker's conflicting init may have come in between this
	 * one's header and its payload: its notice went only to workers
	 * already answered, so this one is refused here. */
	if (e->conflict) {
		psd_kvs_reject(n, c, h, PSCHED_ESIZE, e->conflict);
		return;
	}
	/* A restored key keeps the snapshot's value. */
	if ((h->flags & PSD_F_HAS_VALUE) && !e->restored) {
		memcpy(e->value + (h->offset - e->off), payload,
		       (size_t)h->span);
		psd_kvs_entry_filled(psd_kvs_of(n), e, h->span);
	}
	if (kc->wrank >= 0 && (unsigned)kc->wrank < psd_kvs_of(n)->nworker)
		e->inited[kc->wrank] = true;
	psd_kvs_reply_status(n, c, h, 0);
}

static void kvs_on_async_push(struct psched_node *n, struct psd_conn *c,
			      struct psd_kvs_entry *e, const struct psd_hdr *h,
			      const void *payload)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint8_t *dst = e->value + (h->offset - e->off);

	if (h->flags & PSD_F_COMPRESSED) {
		/* Dequantise into the scratch, then as an uncompressed push. */
		void *nb = psd_kvs_room(s->cmp_buf, &s->cmp_cap, h->span);

		if (!nb) {
			psd_kvs_reject(n, c, h, -ENOMEM,
				       "no memory to dequantise");
			return;
		}
		s->cmp_buf = nb;
		if (psd_cmp_unpack(payload, h->length, s->cmp_buf,
				   (size_t)(h->span / 4), 0)) {
			psd_kvs_reject(n, c, h, -EPROTO,
				       "malformed compressed chunk");
			return;
		}
		payload = s->cmp_buf;
	}
	if (!psd_upd_apply(&s->upd, e->key, e->dtype, e->off, e->len, h->offset,
			   dst, payload, h->span))
		psd_kvs_sum_on(s, e->dtype, dst, payload, h->span);
	psd_kvs_entry_filled(s, e, h->span);
	e->version++;
	if (h->type == PSD_MSG_PUSHPULL)
		psd_kvs_reply_pull(n, c, e, h);
	else
		psd_kvs_reply_status(n, c, h, 0);
}

/* A push of a later step: keep its payload until that step opens. */
static void kvs_on_early_push(struct psched_node *n, struct psd_conn *c,
			      struct psd_kvs_conn *kc, const struct psd_hdr *h)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_entry *e = kc->e;
	void *buf = kc->hold;

	kc->hold = NULL;
	/* The van reads other connections while this payload trickles in:
	 * the step this push was early for may have opened meanwhile (the
	 * held list was already scanned then), so it applies now; held, it
	 * would wait for a step that cannot finish without it. */
	if (h->step == e->version + 1 && !psd_kvs_layout_check(s, e, h)) {
		psd_kvs_push_apply(n, c, e, h, buf, kc->wrank, false, false);
		psd_kvs_hold_free(s, buf, h->length);
		return;
	}
	if (psd_kvs_queue_wait(c, &e->held, h, h->step, buf, h->length)) {
		psd_kvs_hold_free(s, buf, h->length);
		psd_kvs_reply_status(n, c, h, -ENOMEM);
		return;
	}
	psd_kvs_send_ack(n, c, h);
}

static void kvs_dense_data(struct psched_node *n, struct psd_conn *c,
			   struct psd_kvs_conn *kc, const struct psd_hdr *h,
			   void *payload)
{
	switch (h->type) {
	case PSD_MSG_PULL:
		kvs_on_pull(n, c, kc->e, h);
		return;
	case PSD_MSG_INIT:
		kvs_on_init(n, c, kc, h, payload);
		return;
	default:
		break;
	}
	if (psd_kvs_of(n)->async)
		kvs_on_async_push(n, c, kc->e, h, payload);
	else if (kc->hold)
		kvs_on_early_push(n, c, kc, h);
	else
		psd_kvs_push_apply(n, c, kc->e, h, payload, kc->wrank,
				   kc->direct, false);
}

static void kvs_dense_drop(struct psched_node *n, struct psd_conn *c, int err,
			   const char *why)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_entry *e;
	size_t pos = 0;

	while ((e = psd_map_next(&s->entries, &pos, NULL)))
		psd_kvs_drop_entry_waits(n, e, c, err, why);
}

static void kvs_entry_drop(void *val, void *arg)
{
	struct psched_node *n = arg;
	struct psd_kvs_entry *e = val;

	psd_kvs_drop_entry_waits(n, e, NULL, 0, NULL);
	psd_kvs_entry_free(psd_kvs_of(n), e);
}

static void kvs_dense_fini(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	psd_map_clear(&s->entries, kvs_entry_drop, n);
	psd_map_fini(&s->entries);
}

const struct psd_kvs_family psd_kvs_dense = {
	.flag = 0,
	.noun = "key",
	.obj = "tensor",
	.header = kvs_dense_header,
	.data = kvs_dense_data,
	.drop = kvs_dense_drop,
	.fini = kvs_dense_fini,
};

/* The families, in the order their flags are tested (dense last). */
static const struct psd_kvs_family *const kvs_families[] = {
	&psd_kvs_raw,
	&psd_kvs_rowsparse,
	&psd_kvs_keylist,
	&psd_kvs_dense,
};

#define KVS_NFAMILIES (sizeof(kvs_families) / sizeof(kvs_families[0]))

static const struct psd_kvs_family *kvs_family_of(const struct psd_hdr *h)
{
	size_t i;

	for (i = 0; i + 1 < KVS_NFAMILIES; i++)
		if (h->flags & kvs_families[i]->flag)
			return kvs_families[i];
	return &psd_kvs_dense;
}

void psd_kvs_families_drop(struct psched_node *n, struct psd_conn *c, int err,
			   const char *why)
{
	size_t i;

	for (i = 0; i < KVS_NFAMILIES; i++)
		kvs_families[i]->drop(n, c, err, why);
}

void psd_kvs_families_fini(struct psched_node *n)
{
	size_t i;

	for (i = 0; i < KVS_NFAMILIES; i++)
		kvs_families[i]->fini(n);
}

int psd_kvs_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst)
{
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	const struct psd_kvs_family *fam = kvs_family_of(h);
	struct psd_kvs_conn *kc;
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
	if (h->total > psd_van_max_tensor(c)) {
		psd_kvs_rejectf(n, c, h, PSCHED_ESIZE,
				"%s %llu: %s sent a %s of %llu bytes, above "
				"this server's PS_MAX_TENSOR_BYTES %llu",
				fam->noun, (unsigned long long)h->key, p->desc,
				fam->obj, (unsigned long long)h->total,
				(unsigned long long)psd_van_max_tensor(c));
		return PSD_RX_DISCARD;
	}
	ret = fam->header(n, c, kc, h, dst);
	if (!ret)
		kc->fam = fam;
	return ret;
}

void psd_kvs_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload)
{
	struct psd_kvs_conn *kc = c->ctx;
	const struct psd_kvs_family *fam = kc ? kc->fam : NULL;

	if (!fam)
		return; /* refused at the header */
	kc->fam = NULL;
	fam->data(n, c, kc, h, payload);
}
