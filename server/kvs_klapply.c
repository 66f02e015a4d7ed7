// SPDX-License-Identifier: MIT
/*
 * Key lists on a server, the store's updates (server/kvs_kl.h; the store
 * and its key arrays are in kvs_klstore.c): merging the two runs of keys
 * into one, where a list's keys run in the store, inserting new keys,
 * adding a push into the step's sums and the commit that applies them.
 */
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "klpack.h"
#include "kvs_kl.h"

/*
 * One key array again: merge the two runs, and move the values, sums and
 * stamps, kept run after run, into the merged order.  Slots move, so the
 * tagged lists' kept slots go stale (gen).  0 or -ENOMEM (nothing
 * changed).
 */
static int kl_flatten(struct psd_kvs_kl *kl)
{
	uint64_t na = kl->n - kl->n2, i = 0, j = 0, o = 0, *k;
	size_t kb = (size_t)kl->ulen * kl->esize;
	uint32_t *st = NULL;
	uint8_t *val, *acc;

	if (!kl->keys2)
		return 0;
	psd_kl_store_ready(kl);
	k = psd_kl_keys_alloc(kl, kl->n);
	val = psd_kl_alloc(kl, (size_t)kl->n * kb, false);
	acc = psd_kl_alloc(kl, (size_t)kl->n * kb, false);
	if (kl->stamp)
		st = psd_kl_alloc(kl, (size_t)kl->n * 4, false);
	if (!k || !val || !acc || (kl->stamp && !st)) {
		psd_kl_keys_put(k);
		psd_kl_free(val);
		psd_kl_free(acc);
		psd_kl_free(st);
		return -ENOMEM;
	}
	while (i < na || j < kl->n2) {
		bool a = j >= kl->n2 || (i < na && kl->keys[i] < kl->keys2[j]);
		uint64_t from = a ? i : na + j;

		k[o] = a ? kl->keys[i] : kl->keys2[j];
		memcpy(val + o * kb, kl->val + from * kb, kb);
		memcpy(acc + o * kb, kl->acc + from * kb, kb);
		if (st)
			st[o] = kl->stamp[from];
		i += a;
		j += !a;
		o++;
	}
	psd_kl_keys_put(kl->keys);
	psd_kl_keys_put(kl->keys2);
	psd_kl_vals_free(kl->val, kl->val_blk);
	psd_kl_vals_free(kl->acc, kl->acc_blk);
	psd_kl_free(kl->stamp);
	kl->keys = k;
	kl->keys2 = NULL;
	kl->n2 = 0;
	kl->val = val;
	kl->acc = acc;
	kl->val_blk = kl->acc_blk = NULL;
	kl->stamp = st;
	kl->gen++;
	return 0;
}

/* Sorted keys read a piece at a time: a key array as it is, or a still
 * packed block's keys decoded block by block into buf. */
struct kl_src {
	const uint64_t *k; /* the piece */
	uint64_t len;	   /* its keys */
	const uint64_t *arr;
	uint64_t n, next; /* array: keys, where the next piece starts */
	bool packed;
	struct psd_klpack_rd rd;
	uint64_t buf[PSD_KLPACK_BLK];
};

static void kl_src_init(struct kl_src *src, const uint64_t *k, uint64_t n,
			bool blk)
{
	const char *why;

	memset(src, 0, sizeof(*src));
	src->packed = blk && psd_kl_keys_lazy(k);
	if (src->packed) {
		struct psd_kl_keyhdr *h = psd_kl_hdr(k);

		/* checked on arrival: cannot fail */
		if (psd_klpack_rd_init(&src->rd, h->pk, h->pklen, h->pkn, &why))
			src->packed = false, n = 0;
	}
	src->arr = k;
	src->n = src->packed ? 0 : n;
}

/* The next piece into src->k / src->len; false at the end. */
static bool kl_src_next(struct kl_src *src)
{
	if (src->packed) {
		src->len = psd_klpack_rd_next(&src->rd, src->buf);
		src->k = src->buf;
	} else {
		src->k = src->arr + src->next;
		src->len = src->n - src->next;
		src->next = src->n;
	}
	return src->len != 0;
}

/*
 * The sums of a second run, run after run: the store's (@kl, one run,
 * sums kl->acc) then @l's values, into @acc (kb bytes a key), checking
 * on the way that the runs share no key (@l's keys were guessed new).
 * One walk through both runs' keys (packed ones decoded a block at a
 * time, never written out) that copies as it goes: a walk that only
 * compares plus two copies after it cost the 2+2 cold push of 10 M keys
 * about 10 ms more.  A branch per key, not a select: two workers' keys
 * alternate at every key, which the branch predictor follows, while a
 * select chains each load to the compare before it (5 M + 5 M
 * alternating keys alone: 13 ms with branches, 31 ms with selects).
 * false: a key of @l is stored, @acc partly written.
 */
static bool kl_run2_sums(const struct psd_kvs_kl *kl,
			 const struct psd_kl_list *l, uint8_t *acc, size_t kb)
{
	struct kl_src src[2], *a = &src[0], *b = &src[1];
	uint64_t na = kl->n, nb = l->n, i = 0, j = 0, ia = 0, ib = 0;
	const uint32_t *sa = (const uint32_t *)(const void *)kl->acc;
	const uint32_t *lv = (const uint32_t *)(const void *)l->vals;
	uint32_t *oa = (uint32_t *)(void *)acc, *ob = oa + na;
	bool more, ok = true;

	kl_src_init(a, kl->keys, na, true);
	kl_src_init(b, l->keys, nb, l->own || l->blk);
	more = kl_src_next(a) && kl_src_next(b);
	while (more && ok) {
		const uint64_t *x = a->k, *y = b->k;
		uint64_t xa = a->len, yb = b->len;

		while (ia < xa && ib < yb) {
			if (x[ia] < y[ib]) {
				if (kb == 4)
					oa[i] = sa[i];
				else
					memcpy(acc + i * kb, kl->acc + i * kb,
					       kb);
				i++;
				ia++;
			} else if (y[ib] < x[ia]) {
				if (kb == 4)
					ob[j] = lv[j];
				else
					memcpy(acc + (na + j) * kb,
					       l->vals + j * kb, kb);
				j++;
				ib++;
			} else {
				ok = false;
				break;
			}
		}
		if (ia == xa) {
			more = kl_src_next(a);
			ia = 0;
		}
		if (ib == yb && more) {
			more = kl_src_next(b);
			ib = 0;
		}
	}
	if (!ok)
		return false;
	memcpy(acc + i * kb, kl->acc + i * kb, (size_t)((na - i) * kb));
	memcpy(acc + (na + j) * kb, l->vals + j * kb, (size_t)((nb - j) * kb));
	return true;
}

bool psd_kl_run_of(const struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		   uint64_t *base)
{
	uint64_t na = kl->n - kl->n2;

	if (!kl->keys2 || !l->n || l->lens || l->ulen != kl->ulen)
		return false;
	if (l->keys == kl->keys || l->keys == kl->keys2) {
		*base = l->keys == kl->keys ? 0 : na;
		return l->n == (l->keys == kl->keys ? na : kl->n2);
	}
	if (l->n != na && l->n != kl->n2)
		return false;
	psd_kl_store_ready(kl);
	psd_kl_list_ready(l);
	if (l->n == na && !memcmp(l->keys, kl->keys, na * 8)) {
		*base = 0;
		return true;
	}
	if (l->n == kl->n2 && !memcmp(l->keys, kl->keys2, kl->n2 * 8)) {
		*base = na;
		return true;
	}
	return false;
}

/* What psd_kl_insert() builds: the new arrays and how it fills them. */
struct kl_ins {
	uint64_t nnew, tot;
	uint64_t addel; /* elements of the new keys */
	bool uni;	/* one length, ulen, before and after */
	uint32_t ulen;
	unsigned es;
	bool adopt, adopt_acc, fuse, vcopy, run2; /* see psd_kl_insert() */
	uint64_t *keys, *offs, *acc_blk;
	uint32_t *lens, *stamp;
	uint8_t *val, *acc;
	uint64_t k, e; /* keys and elements written */
};

/* Which way @l's @nnew new keys go in, and what they add. */
static void kl_ins_plan(const struct psd_kvs_kl *kl,
			const struct psd_kl_list *l, uint64_t nnew,
			struct kl_ins *in)
{
	uint64_t i;

	memset(in, 0, sizeof(*in));
	in->nnew = nnew;
	in->tot = kl->n + nnew;
	in->uni = kl->ulen || !kl->n;
	in->ulen = kl->n ? kl->ulen : psd_kl_len_of(l, 0);
	in->es = kl->esize;
	/* The first list into an empty store, in a buffer of its own: its
	 * keys become the key array and (one length, aligned values) its
	 * values the open step's sums, without a copy -- fresh pages for a
	 * copy cost as much as the copy itself. */
	in->adopt = l->own && !kl->n && nnew == l->n;
	in->adopt_acc = in->adopt && l->ulen && !kl->full && !kl->partial &&
			!((uintptr_t)l->vals % (in->es < 8 ? in->es : 8));
	in->fuse = kl->n && nnew == l->n && kl->full && !kl->partial;
	/* nothing committed yet: every value is 0, as the new array */
	in->vcopy = kl->version != 0;
	/* @l's keys become the second run: no merged key array */
	in->run2 = in->fuse && !in->vcopy && l->own && !kl->keys2 &&
		   !kl->stamp && kl->ulen && !l->lens && l->ulen == kl->ulen;
	if (!l->lens && nnew == l->n) { /* no pass over millions of keys */
		in->addel = l->n * l->ulen;
		in->uni = in->uni && l->ulen == in->ulen;
		return;
	}
	for (i = 0; i < l->n; i++)
		if (nnew == l->n || kl->idx[i] == KL_NONE) {
			in->addel += psd_kl_len_of(l, i);
			if (psd_kl_len_of(l, i) != in->ulen)
				in->uni = false;
		}
}

static void kl_ins_free(struct kl_ins *in)
{
	psd_kl_keys_put(in->keys);
	psd_kl_free(in->val);
	psd_kl_vals_free(in->acc, in->acc_blk);
	psd_kl_free(in->lens);
	psd_kl_free(in->offs);
	psd_kl_free(in->stamp);
}

/* The new arrays: 0 or -ENOMEM (none kept). */
static int kl_ins_alloc(const struct psd_kvs_kl *kl,
			const struct psd_kl_list *l, struct kl_ins *in)
{
	uint64_t bytes = (kl->nelem + in->addel) * in->es;

	if (in->adopt)
		in->keys = psd_kl_keys_get((uint64_t *)(uintptr_t)l->keys);
	else if (!in->run2)
		in->keys = psd_kl_keys_alloc(kl, in->tot);
	in->val = psd_kl_alloc(kl, (size_t)bytes, true);
	if (in->adopt_acc) {
		in->acc = (uint8_t *)(uintptr_t)l->vals;
		in->acc_blk = psd_kl_keys_get((uint64_t *)(uintptr_t)l->keys);
	} else {
		in->acc = psd_kl_alloc(kl, (size_t)bytes, true);
		/* every sum is written by this push or the merge */
		if (in->acc)
			psd_big_populate(in->acc, bytes);
	}
	if (!in->uni) {
		in->lens = psd_kl_alloc(kl, (size_t)in->tot * 4, false);
		in->offs = psd_kl_alloc(kl, (size_t)in->tot * 8, false);
	}
	if (kl->stamp)
		in->stamp = psd_kl_alloc(kl, (size_t)in->tot * 4, true);
	if ((!in->keys && !in->run2) || !in->val || !in->acc ||
	    (!in->uni && (!in->lens || !in->offs)) ||
	    (kl->stamp && !in->stamp)) {
		kl_ins_free(in);
		return -ENOMEM;
	}
	return 0;
}

/* Every key new and after the stored ones (an empty store, say): append,
 * no merge. */
static void kl_ins_append(const struct psd_kvs_kl *kl,
			  const struct psd_kl_list *l, struct kl_ins *in)
{
	uint64_t i, j, k = kl->n, e = kl->nelem;
	unsigned es = in->es;

	if (kl->n) {
		if (in->keys)
			memcpy(in->keys, kl->keys, (size_t)kl->n * 8);
		if (in->vcopy)
			memcpy(in->val, kl->val, (size_t)(kl->nelem * es));
		memcpy(in->acc, kl->acc, (size_t)(kl->nelem * es));
	}
	if (in->fuse)
		memcpy(in->acc + kl->nelem * es, l->vals, (size_t)l->bytes);
	if (!in->adopt && in->keys)
		memcpy(in->keys + kl->n, l->keys, (size_t)l->n * 8);
	if (in->stamp)
		memcpy(in->stamp, kl->stamp, (size_t)kl->n * 4);
	if (in->uni) {
		in->k = k + l->n;
		in->e = e + in->addel;
		return;
	}
	for (j = 0; j < kl->n; j++) {
		in->lens[j] = psd_kl_slen(kl, j);
		in->offs[j] = psd_kl_soff(kl, j);
	}
	for (i = 0; i < l->n; i++, k++) {
		in->lens[k] = psd_kl_len_of(l, i);
		in->offs[k] = e;
		e += in->lens[k];
	}
	in->k = k;
	in->e = e;
}

/* The merge of one 4-byte element per key, before and after, without a
 * call per key.  0, or -EEXIST: a key of @l is stored (@nnew was a
 * guess). */
static int kl_ins_merge4(const struct psd_kvs_kl *kl,
			 const struct psd_kl_list *l, struct kl_ins *in)
{
	const uint32_t *ov = (const uint32_t *)(const void *)kl->val;
	const uint32_t *oa = (const uint32_t *)(const void *)kl->acc;
	const uint32_t *lv = (const uint32_t *)(const void *)l->vals;
	uint32_t *nv = (uint32_t *)(void *)in->val;
	uint32_t *na = (uint32_t *)(void *)in->acc;
	uint64_t *keys = in->keys, i = 0, j = 0, k = 0;
	uint32_t *stamp = in->stamp;
	bool guess = in->nnew == l->n, fuse = in->fuse, vcopy = in->vcopy;

	while (i < l->n || j < kl->n) {
		if (j < kl->n && (i >= l->n || kl->keys[j] <= l->keys[i])) {
			if (i < l->n && kl->keys[j] == l->keys[i]) {
				if (guess)
					return -EEXIST;
				i++;
			}
			keys[k] = kl->keys[j];
			if (vcopy)
				nv[k] = ov[j];
			na[k] = oa[j];
			if (stamp)
				stamp[k] = kl->stamp[j];
			j++;
		} else {
			if (fuse)
				na[k] = lv[i];
			keys[k] = l->keys[i++];
		}
		k++;
	}
	in->k = in->e = k;
	return 0;
}

/* The merge: i over the list, j over the store, k out, e elements.  0 or
 * -EEXIST as kl_ins_merge4(). */
static int kl_ins_merge(const struct psd_kvs_kl *kl,
			const struct psd_kl_list *l, struct kl_ins *in)
{
	uint64_t *keys = in->keys, i = 0, j = 0, k = 0, e = 0, lo = 0;
	unsigned es = in->es;
	uint32_t len;

	while (i < l->n || j < kl->n) {
		if (j < kl->n && (i >= l->n || kl->keys[j] <= l->keys[i])) {
			if (i < l->n && kl->keys[j] == l->keys[i]) {
				if (in->nnew == l->n)
					return -EEXIST;
				i++; /* stored already */
			}
			len = psd_kl_slen(kl, j);
			keys[k] = kl->keys[j];
			if (in->vcopy)
				memcpy(in->val + e * es,
				       kl->val + psd_kl_soff(kl, j) * es,
				       (size_t)len * es);
			memcpy(in->acc + e * es,
			       kl->acc + psd_kl_soff(kl, j) * es,
			       (size_t)len * es);
			if (in->stamp)
				in->stamp[k] = kl->stamp[j];
			j++;
		} else {
			len = psd_kl_len_of(l, i);
			if (in->fuse)
				memcpy(in->acc + e * es, l->vals + lo,
				       (size_t)len * es);
			lo += (uint64_t)len * es;
			keys[k] = l->keys[i++];
		}
		if (!in->uni) {
			in->lens[k] = len;
			in->offs[k] = e;
		}
		e += len;
		k++;
	}
	in->k = k;
	in->e = e;
	return 0;
}

/* The new arrays become the store's. */
static void kl_ins_install(struct psd_kvs *s, struct psd_kvs_kl *kl,
			   const struct psd_kl_list *l, struct kl_ins *in)
{
	if (in->run2) {
		kl->keys2 = psd_kl_keys_get((uint64_t *)(uintptr_t)l->keys);
		kl->n2 = l->n;
	} else {
		psd_kl_keys_put(kl->keys);
		kl->keys = in->keys;
	}
	psd_kl_vals_free(kl->val, kl->val_blk);
	psd_kl_vals_free(kl->acc, kl->acc_blk);
	kl->val_blk = NULL;
	kl->acc_blk = in->acc_blk;
	psd_kl_free(kl->lens);
	psd_kl_free(kl->offs);
	psd_kl_free(kl->stamp);
	kl->val = in->val;
	kl->acc = in->acc;
	kl->lens = in->lens;
	kl->offs = in->offs;
	kl->stamp = in->stamp;
	kl->ulen = in->uni ? in->ulen : 0;
	kl->n = in->tot;
	kl->nelem = in->e;
	kl->gen++;
	if (in->fuse)
		kl->full++; /* every key's sum has this step's pushes */
	atomic_fetch_add(&s->stored_bytes, in->addel * in->es);
	atomic_fetch_add(&s->alloc_bytes, in->addel * in->es * 2);
}

/*
 * Merge the @nnew keys of @l that kl->idx marks new into the store (zero
 * values).  Either everything is rebuilt or nothing changes (-ENOMEM).
 *
 * When every key of @l is new and every stored key was pushed in the open
 * step already (whole-store pushes only: the first step of W workers
 * with disjoint lists, say), @l's values go into the sums as its keys are
 * merged in and the step stays whole -- no second lookup, no per-key
 * stamps.  Returns 1 then: @l is added, psd_kl_add() is not called.
 *
 * In the first step, such a list in a receive buffer of its own (one
 * length, no stamps) is not merged key by key: its keys become the
 * store's second run (kl->keys2, the buffer shared with the worker's
 * tagged list), whose values and sums follow the first run's.  That saves
 * writing a merged key array -- 8 bytes a key of fresh pages, 80 MB per
 * server in the 2+2 cold push of 10 M keys -- and merging the sums, and a
 * list that is one of the runs (each worker's own list, every step) finds
 * its values in one piece (psd_kl_run_of()).  The runs are merged into
 * one array when keys are added next (kl_flatten()).
 */
int psd_kl_insert(struct psd_kvs *s, struct psd_kvs_kl *kl,
		  const struct psd_kl_list *l, uint64_t nnew)
{
	struct kl_ins in;
	int ret;

	kl_ins_plan(kl, l, nnew, &in);
	if (!in.run2) {
		ret = kl_flatten(kl);
		if (ret)
			return ret;
		/* merged key by key below (an adopted list's keys are not
		 * read; the second run's walk reads packed keys as they are) */
		psd_kl_store_ready(kl);
		if (!in.adopt)
			psd_kl_list_ready(l);
	}
	if (in.tot >= KL_NONE)
		return -E2BIG;
	ret = kl_ins_alloc(kl, l, &in);
	if (ret)
		return ret;
	if (nnew == l->n &&
	    (!kl->n ||
	     psd_kl_lkey_at(l, 0) > psd_kl_key_at(kl->keys, kl->n - 1))) {
		kl_ins_append(kl, l, &in);
	} else if (in.run2) {
		/* the sums stay run after run, the list's after the store's;
		 * a key of the list stored already (@nnew was a guess) is
		 * found by one walk through both runs' keys */
		ret = kl_run2_sums(kl, l, in.acc, (size_t)in.ulen * in.es)
			      ? 0
			      : -EEXIST;
		in.k = in.tot;
		in.e = kl->nelem + in.addel;
	} else if (in.uni && in.ulen == 1 && in.es == 4 &&
		   (!kl->n || kl->ulen == 1)) {
		ret = kl_ins_merge4(kl, l, &in);
	} else {
		ret = kl_ins_merge(kl, l, &in);
	}
	if (ret) {
		kl_ins_free(&in); /* -EEXIST: psd_kl_insert_new() guessed */
		return ret;
	}
	kl_ins_install(s, kl, l, &in);
	return in.fuse ? 1 : 0;
}

/*
 * A list of one length pushed into a uniform store whose open step so
 * far had whole-store pushes only (the first step's later workers): try
 * psd_kl_insert() with every key taken as new, without the lookup that
 * would count them -- 16 keys are searched first, and the merge gives up
 * at the first stored key it meets (nothing changed then).  1: stored and
 * added; 0: not so (look the list up); -ENOMEM.
 */
int psd_kl_insert_new(struct psd_kvs *s, struct psd_kvs_kl *kl,
		      const struct psd_kl_list *l)
{
	uint64_t i;
	int ret;

	if (!kl->n || !l->n || !kl->full || kl->partial || !kl->ulen ||
	    l->lens || l->ulen != kl->ulen)
		return 0;
	for (i = 0; i < 16; i++) {
		/* on the packed form when the keys are still packed */
		uint64_t key = psd_kl_lkey_at(l, (l->n - 1) * i / 15);

		if (psd_kl_has(kl->keys, kl->n - kl->n2, key) ||
		    (kl->keys2 && psd_kl_has(kl->keys2, kl->n2, key)))
			return 0;
	}
	ret = psd_kl_insert(s, kl, l, l->n);
	return ret == -EEXIST ? 0 : ret;
}

/* The open step turns partial: stamp every key a whole-store push of it
 * filled already. */
static int kl_go_partial(struct psd_kvs_kl *kl, uint32_t cur)
{
	uint64_t j;

	if (kl->partial)
		return 0;
	if (!kl->stamp) {
		kl->stamp = psd_kl_alloc(kl, (size_t)kl->n * 4, true);
		if (!kl->stamp)
			return -ENOMEM;
	}
	if (kl->full)
		for (j = 0; j < kl->n; j++)
			kl->stamp[j] = cur;
	kl->partial = true;
	return 0;
}

/* Add @len bytes at @src to slot @j's sum of step @cur (the first push
 * of the key in the step is copied, later ones summed). */
static void kl_add_at(struct psd_kvs_kl *kl, uint32_t cur, uint64_t j,
		      const uint8_t *src, uint64_t len)
{
	uint8_t *dst = kl->acc + psd_kl_soff(kl, j) * kl->esize;

	if (kl->stamp[j] == cur) {
		psd_kvs_sum(kl->dtype, dst, src, len);
	} else {
		memcpy(dst, src, (size_t)len);
		kl->stamp[j] = cur;
	}
}

int psd_kl_add_run(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		   uint64_t base)
{
	uint32_t cur = (uint32_t)(kl->version + 1);
	size_t kb = (size_t)kl->ulen * kl->esize;
	uint32_t *st;
	uint64_t i;
	int ret = kl_go_partial(kl, cur);

	if (ret)
		return ret;
	st = kl->stamp + base;
	if (kl->dtype == PSCHED_F32 && kl->ulen == 1) {
		/* one pass with selects: vectorised */
		const float *v = (const float *)(const void *)l->vals;
		float *a = (float *)(void *)kl->acc + base;

		for (i = 0; i < l->n; i++) {
			a[i] = st[i] == cur ? a[i] + v[i] : v[i];
			st[i] = cur;
		}
		return 0;
	}
	for (i = 0; i < l->n; i++)
		kl_add_at(kl, cur, base + i, l->vals + i * kb, kb);
	return 0;
}

/* Add list @l (checked, all keys stored, kl->idx filled unless @whole) to
 * the open step. */
int psd_kl_add(struct psd_kvs_kl *kl, const struct psd_kl_list *l, bool whole,
	       const uint32_t *idx)
{
	uint32_t cur = (uint32_t)(kl->version + 1);
	uint64_t i, off = 0;
	unsigned es = kl->esize;
	int ret;

	if (whole && !kl->partial) {
		if (!kl->full++) {
			if (kl->acc != l->vals) /* else adopted: in place */
				memcpy(kl->acc, l->vals, (size_t)l->bytes);
		} else
			psd_kvs_sum(kl->dtype, kl->acc, l->vals, l->bytes);
		return 0;
	}
	ret = kl_go_partial(kl, cur);
	if (ret)
		return ret;
	if (!whole && kl->dtype == PSCHED_F32 && kl->ulen == 1) {
		/* one float per key: the common sparse case, one pass */
		const float *v = (const float *)(const void *)l->vals;
		float *a = (float *)(void *)kl->acc;
		uint32_t *st = kl->stamp;

		for (i = 0; i < l->n; i++) {
			uint32_t j = idx[i];

			if (st[j] == cur) {
				a[j] += v[i];
			} else {
				a[j] = v[i];
				st[j] = cur;
			}
		}
		return 0;
	}
	for (i = 0; i < l->n; i++) {
		uint64_t len = (uint64_t)psd_kl_len_of(l, i) * es;

		kl_add_at(kl, cur, whole ? i : idx[i], l->vals + off, len);
		off += len;
	}
	return 0;
}

/* Fold the open step in: the sums become the values of the keys pushed. */
void psd_kl_commit(struct psd_kvs *s, struct psd_kvs_kl *kl)
{
	uint32_t cur = (uint32_t)(kl->version + 1);
	unsigned es = kl->esize;
	uint8_t *tmp;
	uint64_t j;

	if (kl->partial && kl->ulen == 1 && es == 4) {
		uint32_t *v = (uint32_t *)(void *)kl->val;
		const uint32_t *a = (const uint32_t *)(const void *)kl->acc;

		for (j = 0; j < kl->n; j++)
			v[j] = kl->stamp[j] == cur ? a[j] : v[j];
	} else if (kl->partial) {
		for (j = 0; j < kl->n; j++)
			if (kl->stamp[j] == cur)
				memcpy(kl->val + psd_kl_soff(kl, j) * es,
				       kl->acc + psd_kl_soff(kl, j) * es,
				       (size_t)psd_kl_slen(kl, j) * es);
	} else if (kl->full) {
		uint64_t *blk = kl->val_blk;

		tmp = kl->val;
		kl->val = kl->acc;
		kl->acc = tmp;
		kl->val_blk = kl->acc_blk;
		kl->acc_blk = blk;
	}
	kl->version++;
	kl->got = 0;
	kl->full = 0;
	kl->partial = false;
	memset(kl->have, 0, s->nworker);
}
