// SPDX-License-Identifier: MIT
/*
 * KV server: key lists (PSD_F_KEYLIST, common/wire.h; the worker's side is
 * worker/kvw_keylist.c).
 *
 * The store.  This server's keys live in one sorted array with their
 * values in two value arrays, val (the stored values) and acc (the open
 * step's sums), at element offsets that follow the key order.  While every
 * key has the same length (the common case) no per-key length or offset
 * is kept at all; the first key of another length turns on the per-key
 * arrays.  A key costs its sorted-array entry and its values, no tensor
 * set-up: it appears on its first push (value 0 before).  Sorted arrays,
 * not a hash map, because requests come sorted: finding a list's slots is
 * a linear merge of two sorted runs (sequential memory, no hashing), and a
 * list equal to the whole store -- the same keys every step -- is found
 * with one memcmp and summed as one contiguous vector.  New keys are
 * merged in, which rebuilds the arrays (O(stored + new)) -- except in
 * the first step, where a second worker's list of new keys stays a run
 * of its own whose values follow the first run's, so each worker's own
 * list is one piece of the values (kvs_klapply.c, psd_kl_insert()), and
 * keys that came packed stay packed until something reads them
 * (struct psd_kl_keyhdr).
 *
 * Steps.  Each worker's key-list pushes are its steps 1, 2, ...; every
 * push reaches every server (slices may be empty).  The open step is
 * version + 1; when all W workers' pushes of it are in, each key pushed in
 * it takes its sum as value (keys nobody pushed keep theirs), version
 * advances, waiting pulls are answered and held early pushes of the next
 * step applied.  The first push of a key in a step is copied into acc,
 * later ones added; which keys were pushed is tracked per key (stamp)
 * only when a step has partial lists: when every push of a step names the
 * whole store (or nothing), val and acc are simply swapped.
 *
 * A refused push (a key's length changed, dtype differs, malformed list)
 * stores nothing of it and counts as an empty push of its step, so the
 * other workers' step still completes.  Key lists use sync mode and the
 * default update rule only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "klpack.h"
#include "kvs_kl.h"

uint64_t psd_kl_packed_len(const struct psd_hdr *h)
{
	bool push = psd_msg_is_push(h->type);

	/* psd_hdr_decode() checked that these fit in length */
	return h->length - (push ? h->span : 0) - (h->offset ? 0 : 4 * h->part);
}

/* Request @h with packed keys, received at @own + 8n - P in a buffer
 * from psd_kl_rxbuf(): unpack its keys to the front of @own so that the
 * buffer holds the plain request that *@raw describes.  0, -EPROTO with
 * *@why (nothing to store), -ENOMEM. */
static int kl_unpack_own(struct psd_kvs_kl *kl, const struct psd_hdr *h,
			 void *own, struct psd_hdr *raw, const char **why)
{
	uint64_t sec = psd_kl_packed_len(h);
	uint8_t *src = (uint8_t *)own + (h->part * 8 - sec);
	uint8_t *pk = psd_kl_grow(kl, kl->pk, &kl->pk_cap, sec, 1);

	/* the section sits where the keys' tail goes: moved aside first */
	if (!pk)
		return -ENOMEM;
	kl->pk = pk;
	memcpy(kl->pk, src, (size_t)sec);
	*raw = *h;
	raw->flags &= (uint8_t)~PSD_F_KLPACKED;
	raw->flags |= KL_F_SORTED;
	raw->length = h->length - sec + h->part * 8;
	return psd_klpack_unpack(kl->pk, sec, h->part, own, why);
}

/* Unpack the keys of request @h (PSD_F_KLPACKED) at @p into the scratch
 * array; @l->keys points there.  0 or -EPROTO with *@why. */
static int kl_parse_packed(struct psd_kvs_kl *kl, const struct psd_hdr *h,
			   const uint8_t *p, struct psd_kl_list *l,
			   const char **why)
{
	uint64_t *k;

	if (kl->max_ukeys && l->n > kl->max_ukeys) {
		/* a few bytes must not claim gigabytes of keys */
		*why = "packed keys: more keys than PS_MAX_TENSOR_BYTES holds "
		       "once unpacked";
		return -EPROTO;
	}
	k = psd_kl_grow(kl, kl->ukeys, &kl->ukeys_cap, l->n, sizeof(*k));
	if (!k) {
		*why = "no memory to unpack the keys";
		return -EPROTO;
	}
	kl->ukeys = k;
	l->keys = k;
	return psd_klpack_unpack(p, psd_kl_packed_len(h), l->n, kl->ukeys, why);
}

/* Parse and check request @h's payload (keys, lengths, values) into @l,
 * or take the keys of the tagged list it names (PSD_F_KLCACHED) of worker
 * @wrank.  0 or -EPROTO with *@why. */
static int kl_parse(struct psd_kvs_kl *kl, const struct psd_hdr *h,
		    const void *payload, unsigned esize, int wrank,
		    struct psd_kl_list *l, const char **why)
{
	static const uint64_t none; /* an empty message has no payload */
	const uint8_t *p = payload ? payload : (const void *)&none;
	uint64_t i, bytes = 0, bad = 0;
	uint32_t zero = 0;
	struct psd_kl_wcache *wc = wrank >= 0 ? &kl->wc[wrank] : NULL;
	const uint8_t *rest;
	int ret;

	l->wc = NULL;
	l->tag = 0;
	l->own = false; /* the caller says when it is */
	l->blk = false;
	if (h->flags & PSD_F_KLCACHED) {
		/* checked when its keys came */
		if (!wc || wc->tag != h->epoch || wc->n != h->part ||
		    wc->ulen != h->offset) {
			*why = "key-list tag unknown (its keys never came)";
			return -EPROTO;
		}
		l->n = wc->n;
		l->keys = wc->keys;
		l->blk = true;
		l->ulen = wc->ulen;
		l->lens = wc->ulen ? NULL : wc->lens;
		l->vals = payload;
		l->bytes = h->span;
		l->wc = wc;
		return 0;
	}
	l->n = h->part;
	l->keys = (const uint64_t *)(const void *)p;
	l->ulen = (uint32_t)h->offset;
	if (h->flags & PSD_F_KLPACKED) {
		ret = kl_parse_packed(kl, h, p, l, why);
		if (ret)
			return ret;
		rest = p + psd_kl_packed_len(h);
	} else {
		/* branch-free: vectorised over millions of keys */
		if (!(h->flags & KL_F_SORTED))
			for (i = 1; i < l->n; i++)
				bad |= l->keys[i] <= l->keys[i - 1];
		rest = p + 8 * l->n;
	}
	l->lens = h->offset ? NULL : (const uint32_t *)(const void *)rest;
	l->vals = rest + (h->offset ? 0 : 4 * l->n);
	if (bad) {
		*why = "keys not sorted ascending, or repeated";
		return -EPROTO;
	}
	if (l->lens) {
		for (i = 0; i < l->n; i++) {
			zero |= l->lens[i] == 0;
			bytes += l->lens[i];
		}
		bytes *= esize;
	} else {
		bytes = l->n * l->ulen * esize;
	}
	if (zero) {
		*why = "a key of length 0";
		return -EPROTO;
	}
	if (bytes != h->span) {
		*why = "key lengths do not add up to the value bytes";
		return -EPROTO;
	}
	l->bytes = bytes;
	l->tag = h->epoch; /* psd_kl_remember() once handled */
	return 0;
}

/* The answer header to request @h. */
static struct psd_hdr kl_answer(struct psched_node *n, const struct psd_hdr *h,
				int type, uint64_t bytes)
{
	struct psd_hdr a = psd_kvs_answer_hdr(n, h, (uint8_t)type, 0,
					      PSD_F_KEYLIST, bytes);

	a.offset = 0;
	a.total = a.span = bytes;
	a.part = 0;
	return a;
}

/* Answer pull (or pushpull) @h of the keys @keys/@lens now. */
static void kl_answer_list(struct psched_node *n, struct psd_conn *c,
			   const struct psd_hdr *h,
			   const struct psd_kl_list *lp)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	struct psd_kl_list l = *lp;
	struct psd_hdr a;
	struct iovec iov;
	uint64_t nnew = 0, bad = 0, i, off = 0, base = 0;
	const uint32_t *idx;
	uint8_t *out;
	int ret;

	if (psd_kl_is_whole(kl, &l) || psd_kl_run_of(kl, &l, &base)) {
		/* the values are in one piece: the whole store, or a run */
		a = kl_answer(n, h, PSD_MSG_PULL_RESP, l.bytes);
		a.step = kl->version;
		iov.iov_base = kl->val + base * kl->ulen * kl->esize;
		iov.iov_len = (size_t)l.bytes;
		psd_conn_send(c, &a, &iov, 1);
		return;
	}
	ret = psd_kl_slots(kl, &l, &idx, &nnew, &bad);
	if (ret == -ENOMEM) {
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory for a key list");
		return;
	}
	if (ret || nnew) {
		for (i = 0; !ret && i < l.n; i++)
			if (idx[i] == KL_NONE) {
				bad = i;
				break;
			}
		psd_kvs_rejectf(n, c, h, ret ? ret : PSCHED_EUNKNOWNKEY,
				"key-list pull of %llu keys: key %llu %s",
				(unsigned long long)l.n,
				(unsigned long long)l.keys[bad],
				ret ? "has another length on this server"
				    : "was never pushed to this server");
		return;
	}
	out = psd_kl_grow(kl, kl->out, &kl->out_cap, l.bytes, 1);
	if (!out) {
		psd_kvs_reject(n, c, h, -ENOMEM,
			       "no memory to answer a key list");
		return;
	}
	kl->out = out;
	if (kl->ulen == 1 && kl->esize == 4) {
		uint32_t *o = (uint32_t *)(void *)kl->out;
		const uint32_t *v = (const uint32_t *)(const void *)kl->val;

		for (i = 0; i < l.n; i++)
			o[i] = v[idx[i]];
	} else {
		for (i = 0; i < l.n; i++) {
			uint64_t len =
				(uint64_t)psd_kl_len_of(&l, i) * kl->esize;

			memcpy(kl->out + off,
			       kl->val + psd_kl_soff(kl, idx[i]) * kl->esize,
			       (size_t)len);
			off += len;
		}
	}
	a = kl_answer(n, h, PSD_MSG_PULL_RESP, l.bytes);
	a.step = kl->version;
	iov.iov_base = kl->out;
	iov.iov_len = (size_t)l.bytes;
	psd_conn_send(c, &a, &iov, l.bytes ? 1 : 0);
}

/* A plain copy of @l's keys (and lengths) followed by room for @extra
 * bytes, or NULL (no memory); *@h, the request @l came with, then
 * describes a request of that copy. */
static uint8_t *kl_keys_copy(const struct psd_kl_list *l, uint64_t extra,
			     struct psd_hdr *h)
{
	uint64_t len = l->n * (l->lens ? 12 : 8) + extra;
	uint8_t *buf = malloc(len ? (size_t)len : 1);

	if (!buf)
		return NULL;
	if (l->n) {
		psd_kl_list_ready(l);
		memcpy(buf, l->keys, (size_t)l->n * 8);
		if (l->lens)
			memcpy(buf + l->n * 8, l->lens, (size_t)l->n * 4);
	}
	h->length = len;
	h->flags &= (uint8_t) ~(PSD_F_KLCACHED | PSD_F_KLPACKED);
	h->epoch = 0;
	return buf;
}

/* Pull @h of list @l waits for version h->step: keep a copy of its keys
 * (a tagged list may be replaced meanwhile). */
static void kl_pull_wait(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, const struct psd_kl_list *l)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	struct psd_hdr wh = *h;
	uint8_t *buf = kl_keys_copy(l, 0, &wh);

	if (!buf || psd_kvs_queue_pull(n, c, &kl->pulls, &wh, buf, wh.length)) {
		free(buf);
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory to queue a pull");
	}
}

/*
 * Store the new keys of @l (checked) and add it to the open step: 0,
 * PSCHED_ESIZE (key *@bad has another length here) or -errno, nothing
 * stored.  *@whole: @l is the whole store.
 */
static int kl_store(struct psd_kvs *s, struct psd_kvs_kl *kl,
		    const struct psd_kl_list *l, bool *whole, uint64_t *bad)
{
	uint64_t nnew = 0, base = 0;
	const uint32_t *idx = NULL;
	bool added = false, run = false, was_empty = !kl->n;
	int ret = 0;

	*whole = psd_kl_is_whole(kl, l);
	if (was_empty) {
		nnew = l->n; /* all new: no lookup, psd_kl_insert() appends */
	} else if (!*whole && psd_kl_run_of(kl, l, &base)) {
		run = true; /* one of the runs: slots base, base + 1, ... */
	} else if (!*whole) {
		ret = psd_kl_insert_new(s, kl, l);
		added = ret == 1;
		if (!ret)
			ret = psd_kl_slots(kl, l, &idx, &nnew, bad);
		else if (added)
			ret = 0;
	}
	if (!ret && nnew) {
		ret = psd_kl_insert(s, kl, l, nnew);
		added = ret == 1; /* merged into the sums as well */
		if (added)
			ret = 0;
		/* into an empty store the list is the whole store */
		*whole = !ret && was_empty;
		if (!ret && !was_empty && !added)
			ret = psd_kl_slots(kl, l, &idx, &nnew, bad);
		if (!ret && !was_empty && !added)
			*whole = psd_kl_is_whole(kl, l);
	}
	if (!ret && !added)
		ret = run ? psd_kl_add_run(kl, l, base)
			  : psd_kl_add(kl, l, *whole, idx);
	return ret;
}

/* Parse push @h into @l, refusing it when malformed; *@raw: @h, or the
 * plain request its keys make when they came packed into a buffer of
 * their own (@own) and are unpacked there first. */
static int kl_push_parse(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, const void *payload,
			 int wrank, bool own, struct psd_hdr *raw,
			 struct psd_kl_list *l)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	void *buf = (void *)(uintptr_t)payload;
	const char *why = "";
	int ret = 0;

	*raw = *h;
	if (own && (h->flags & PSD_F_KLPACKED)) {
		/* one length: the keys may stay packed until read */
		ret = h->offset ? psd_kl_own_lazy(h, buf, raw, &why)
				: kl_unpack_own(kl, h, buf, raw, &why);
		if (ret == -ENOMEM)
			why = "no memory to unpack the keys";
		if (ret)
			*raw = *h;
	}
	if (!ret)
		ret = kl_parse(kl, raw, payload, psched_dtype_size(h->dtype),
			       wrank, l, &why);
	if (ret)
		return psd_kvs_rejectf(n, c, raw, -EPROTO,
				       "malformed key list: %s (nothing "
				       "stored)",
				       why);
	l->own = own;
	return 0;
}

/*
 * Push @h of worker @wrank for the open step, payload @payload: check it,
 * store its new keys and add it, or refuse it whole; either way the
 * worker's push of the step is counted.  @acked: it was acked when held.
 */
static void kl_push(struct psched_node *n, struct psd_conn *c,
		    const struct psd_hdr *h, const void *payload, int wrank,
		    bool acked, bool own)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s->kl;
	struct psd_kl_list l;
	struct psd_hdr raw;
	uint64_t bad = 0;
	bool whole;
	int ret = -EINVAL;

	if (kl->has_dtype && h->dtype != kl->dtype)
		psd_kvs_rejectf(n, c, h, -EINVAL,
				"key list of dtype %s, but this server's key "
				"lists hold %s (nothing stored)",
				psched_dtype_name(h->dtype),
				psched_dtype_name(kl->dtype));
	else if (!kl_push_parse(n, c, h, payload, wrank, own, &raw, &l))
		ret = 0;
	if (ret)
		goto count;
	h = &raw;
	if (!kl->has_dtype && l.n) {
		kl->has_dtype = true;
		kl->dtype = h->dtype;
		kl->esize = psched_dtype_size(h->dtype);
	}
	ret = kl_store(s, kl, &l, &whole, &bad);
	if (ret == PSCHED_ESIZE)
		psd_kvs_rejectf(n, c, h, ret,
				"key list: key %llu has %u elements, but this "
				"server holds it with %u (nothing stored)",
				(unsigned long long)l.keys[bad],
				psd_kl_len_of(&l, bad),
				psd_kl_slen(kl, kl->idx[bad] == KL_NONE
							? 0
							: kl->idx[bad]));
	else if (ret)
		psd_kvs_rejectf(n, c, h, ret,
				"key list of %llu keys: %s (nothing stored)",
				(unsigned long long)l.n, psched_strerror(ret));
	psd_kl_remember(kl, wrank, &l, !ret && whole);
count:
	if (!acked && !ret) {
		struct psd_hdr a = kl_answer(n, h, PSD_MSG_PUSH_ACK, 0);

		psd_conn_send(c, &a, NULL, 0);
	}
	if (h->type == PSD_MSG_PUSHPULL && !ret)
		kl_pull_wait(n, c, h, &l);
	kl->have[wrank] = true;
	kl->got++;
}

/* A pull (@wrank's, or -1: a queued one whose keys are in @payload):
 * answered if the version covers it, else queued. */
static void kl_on_pull(struct psched_node *n, struct psd_conn *c,
		       const struct psd_hdr *h, const void *payload, int wrank)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	const char *why = "";
	struct psd_kl_list l;
	int ret;

	if (kl_parse(kl, h, payload, psched_dtype_size(h->dtype), wrank, &l,
		     &why)) {
		psd_kvs_reject(n, c, h, -EPROTO, why);
		return;
	}
	if (l.tag) {
		psd_kl_remember(kl, wrank, &l,
				kl->n == l.n && psd_kl_is_whole_cmp(kl, &l));
		if (kl->wc[wrank].tag == l.tag)
			l.wc = &kl->wc[wrank];
	}
	/* A pull the version covers is answered even after a worker left
	 * (the others may still pull its last step). */
	ret = psd_kvs_pull_ready(n, c, h, kl->version,
				 (uint64_t)l.n * (l.lens ? 12 : 8));
	if (ret > 0)
		kl_answer_list(n, c, h, &l);
	else if (!ret)
		kl_pull_wait(n, c, h, &l);
}

/* While the open step has every worker's push: fold it in, answer the
 * pulls it satisfies (smaller priority first, ties in arrival order),
 * apply the held pushes of the next step. */
static void kl_advance(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s->kl;
	struct psd_kvs_wait *w;
	struct psd_peer *p;

	while (kl->got >= psd_kvs_step_nmembers(s, kl->version + 1)) {
		psd_kl_commit(s, kl);
		while ((w = psd_kvs_wait_pull(&kl->pulls, kl->version))) {
			kl_on_pull(n, w->conn, &w->h, w->buf, -1);
			psd_kvs_wait_free(s, w);
		}
		while ((w = psd_kvs_wait_step(&kl->held, kl->version + 1))) {
			p = psd_node_peer(n, w->conn->peer_id);
			if (p && p->rank >= 0 && (unsigned)p->rank < s->nworker)
				kl_push(n, w->conn, &w->h, w->buf, p->rank,
					true, false);
			psd_kvs_wait_free(s, w);
		}
	}
}

void psd_kvs_kl_config(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (s->kl && s->kl->got)
		kl_advance(n);
}

/*
 * A held early push names a tagged list that a later list of its worker
 * may replace before it applies: give it its keys.  Returns the new
 * buffer (the old one freed, the held bytes recounted, *@h now without
 * the tag), or NULL (nothing held any more).
 */
static void *kl_expand(struct psd_kvs *s, struct psd_kvs_kl *kl,
		       struct psd_hdr *h, void *buf, int wrank)
{
	uint64_t held = h->length;
	const char *why = "";
	struct psd_kl_list l;
	uint8_t *nb = NULL;

	if (!kl_parse(kl, h, buf, psched_dtype_size(h->dtype), wrank, &l, &why))
		nb = kl_keys_copy(&l, h->span, h);
	if (nb) {
		memcpy(nb + (h->length - h->span), buf, (size_t)h->span);
		s->parked_bytes += h->length;
	}
	psd_kvs_hold_free(s, buf, held);
	return nb;
}

/* A first list of this many payload bytes or more lands in a buffer the
 * store adopts; smaller ones are copied from the scratch buffer. */
#define KL_ADOPT_MIN (1u << 20)

static int kl_header(struct psched_node *n, struct psd_conn *c,
		     struct psd_kvs_conn *kc, const struct psd_hdr *h,
		     void **dst)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = psd_kl_get(n);
	bool push = psd_msg_is_push(h->type);
	bool packed = h->flags & PSD_F_KLPACKED;
	/* the request's bytes with plain keys */
	uint64_t raw = packed ? h->length - psd_kl_packed_len(h) + h->part * 8
			      : h->length;
	int ret = 0;

	if (!kl) {
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory for key lists");
		return PSD_RX_DISCARD;
	}
	kl->max_ukeys = psd_van_max_tensor(c) / 8;
	if (s->async)
		ret = psd_kvs_reject(n, c, h, -EOPNOTSUPP,
				     "key lists need sync mode "
				     "(PS_SERVER_MODE=sync)");
	else if (s->broken && push)
		ret = psd_kvs_reject(n, c, h, s->broken, s->broken_msg);
	else if (kc->wrank < 0 || (unsigned)kc->wrank >= s->nworker)
		ret = psd_kvs_reject(n, c, h, -EPROTO, "not a worker");
	else if (!push && kl->has_dtype && h->dtype != kl->dtype)
		ret = psd_kvs_rejectf(n, c, h, -EINVAL,
				      "key-list pull of dtype %s, but this "
				      "server's key lists hold %s",
				      psched_dtype_name(h->dtype),
				      psched_dtype_name(kl->dtype));
	else if (push && psd_kvs_check_member(n, c, h, kc->wrank, true))
		return PSD_RX_DISCARD; /* answered */
	else if (push && h->step <= kl->version)
		ret = psd_kvs_rejectf(n, c, h, -EPROTO,
				      "key-list step %llu already applied",
				      (unsigned long long)h->step);
	else if (push && h->step == kl->version + 1 && kl->have[kc->wrank])
		ret = psd_kvs_rejectf(n, c, h, -EPROTO,
				      "second key-list push for step %llu",
				      (unsigned long long)h->step);
	if (ret)
		return PSD_RX_DISCARD;
	if (push && h->step > kl->version + 1)
		return psd_kvs_hold_early(n, c, kc, h, kl->version + 1,
					  "key-list push", dst);
	if (push && (!kl->n || !kl->version) && h->part &&
	    raw >= KL_ADOPT_MIN && !(h->flags & PSD_F_KLCACHED) &&
	    raw >= h->length && h->part <= kl->max_ukeys) {
		/* keys for an empty store, or of the first step: into a
		 * buffer the store can adopt or keep as the worker's tagged
		 * list (psd_kl_remember()); packed keys land at the end of
		 * their place and are unpacked in front of them */
		kc->kl_own = psd_kl_rxbuf(
			kl, raw,
			(h->flags & PSD_F_KLPACKED) && h->offset
				? raw - h->length /* keys stay packed */
				: 0);
		if (kc->kl_own)
			*dst = (uint8_t *)kc->kl_own + (raw - h->length);
	}
	return 0;
}

/* Push @h, early when its header came, is held (in @buf) until its step
 * opens. */
static void kl_hold(struct psched_node *n, struct psd_conn *c,
		    const struct psd_hdr *h, void *buf, int wrank)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s->kl;
	struct psd_hdr hh = *h;
	const char *why = "";
	struct psd_kl_list l;

	/* Its tag is known from now on (later pushes may name it before
	 * this one applies); held, it goes without one. */
	if (h->epoch && !(h->flags & PSD_F_KLCACHED)) {
		if (!kl_parse(kl, h, buf, psched_dtype_size(h->dtype), wrank,
			      &l, &why))
			psd_kl_remember(kl, wrank, &l, false);
		hh.epoch = 0;
	}
	if (h->flags & PSD_F_KLCACHED)
		buf = kl_expand(s, kl, &hh, buf, wrank);
	if (!buf) {
		psd_kvs_reject(n, c, h, -EPROTO,
			       "cannot hold an early key-list push: its tag "
			       "is unknown or no memory");
		return;
	}
	if (psd_kvs_queue_wait(c, &kl->held, &hh, h->step, buf, hh.length)) {
		psd_kvs_hold_free(s, buf, hh.length);
		psd_kvs_reject(n, c, h, -ENOMEM,
			       "no memory to hold an early push");
		return;
	}
	if (psd_msg_is_push(h->type)) {
		struct psd_hdr a = kl_answer(n, h, PSD_MSG_PUSH_ACK, 0);

		psd_conn_send(c, &a, NULL, 0);
	}
}

static void kl_data(struct psched_node *n, struct psd_conn *c,
		    struct psd_kvs_conn *kc, const struct psd_hdr *h,
		    void *payload)
{
	struct psd_kvs *s = psd_kvs_of(n);
	void *buf = kc->hold, *own = kc->kl_own;

	kc->kl_own = NULL;
	kc->hold = NULL;
	if (own) {
		kl_push(n, c, h, own, kc->wrank, false, true);
		psd_kl_rxbuf_put(own); /* kept if the store adopted it */
	} else if (h->type == PSD_MSG_PULL) {
		kl_on_pull(n, c, h, payload, kc->wrank);
		return;
	} else if (buf && h->step != s->kl->version + 1) {
		/* early when its header came; its step may have opened
		 * since */
		kl_hold(n, c, h, buf, kc->wrank);
		return;
	} else {
		kl_push(n, c, h, buf ? buf : payload, kc->wrank, false, false);
		psd_kvs_hold_free(s, buf, h->length);
	}
	kl_advance(n);
}

static void kl_drop(struct psched_node *n, struct psd_conn *c, int err,
		    const char *why)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s ? s->kl : NULL;

	if (!kl)
		return;
	if (c && c->ctx) {
		struct psd_kvs_conn *kc = c->ctx;

		psd_kl_rxbuf_put(kc->kl_own); /* a message cut short */
		kc->kl_own = NULL;
	}
	psd_kvs_drop_waits(n, &kl->pulls, c, err, why);
	psd_kvs_drop_waits(n, &kl->held, c, err, why);
}

static void kl_fini(struct psched_node *n)
{
	kl_drop(n, NULL, 0, NULL);
	psd_kvs_kl_free(psd_kvs_of(n));
}

const struct psd_kvs_family psd_kvs_keylist = {
	.flag = PSD_F_KEYLIST,
	.noun = "key",
	.obj = "tensor",
	.header = kl_header,
	.data = kl_data,
	.drop = kl_drop,
	.fini = kl_fini,
};
