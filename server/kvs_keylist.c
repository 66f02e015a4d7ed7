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
 * merged in, which rebuilds the arrays (O(stored + new)).
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

#include "kvs.h"

#define KL_NONE UINT32_MAX

/* Big arrays: calloc gets fresh zero pages from the kernel without a
 * memset.  (Not madvise(MADV_HUGEPAGE): with the kernel's "defrag=madvise"
 * its faults compact memory synchronously, seconds on a busy machine.) */
static void *kl_alloc(size_t len, bool zero)
{
	return zero ? calloc(1, len ? len : 1) : malloc(len ? len : 1);
}

/* Key arrays are shared between the store and the workers' tagged lists
 * (a list that is the whole store needs no copy): refcounted, the count
 * in a 64-byte header before the keys. */
struct kl_keyhdr {
	size_t refs;
	char pad[56];
};

static uint64_t *kl_keys_alloc(uint64_t n)
{
	struct kl_keyhdr *h = kl_alloc(sizeof(*h) + (size_t)n * 8, false);

	if (!h)
		return NULL;
	h->refs = 1;
	return (uint64_t *)(void *)(h + 1);
}

static uint64_t *kl_keys_get(uint64_t *k)
{
	((struct kl_keyhdr *)(void *)k - 1)->refs++;
	return k;
}

static void kl_keys_put(uint64_t *k)
{
	struct kl_keyhdr *h;

	if (!k)
		return;
	h = (struct kl_keyhdr *)(void *)k - 1;
	if (!--h->refs)
		free(h);
}

/* A worker's last tagged list on this server (wire.h PSD_F_KLCACHED). */
struct kl_wcache {
	uint32_t tag; /* 0: none */
	uint32_t ulen;
	uint64_t n;
	uint64_t *keys;
	uint32_t *lens;	    /* when ulen is 0 */
	uint64_t whole_gen; /* gen + 1 when it was the whole store */
	uint32_t *idx;	    /* its slots in the store, valid while */
	uint64_t idx_gen;   /* ... this is gen + 1 */
};

struct psd_kvs_kl {
	bool has_dtype;
	uint8_t dtype;
	unsigned esize;
	uint64_t n;	/* keys stored */
	uint64_t *keys; /* sorted */
	uint32_t ulen;	/* elements of every key, 0: lens/offs */
	uint32_t *lens;
	uint64_t *offs;	   /* element offset of each key */
	uint64_t nelem;	   /* elements stored */
	uint8_t *val, *acc; /* nelem elements each */
	uint32_t *stamp;   /* per key: step whose push acc holds */
	uint64_t version;  /* steps applied */
	unsigned got;	   /* workers whose push of the open step is in */
	bool *have;	   /* [nworker] */
	unsigned full;	   /* pushes of the whole store this step */
	bool partial;	   /* stamps in use this step */
	struct psd_list held;  /* early pushes, struct psd_kvs_wait */
	struct psd_list pulls; /* pulls for a later version */
	struct kl_wcache *wc;  /* [nworker]: each worker's tagged list */
	uint64_t gen;	       /* bumped when keys are added */
	uint32_t *idx;	       /* slots of the list being handled */
	uint64_t idx_cap;
	uint8_t *out; /* a pull answer gathered */
	uint64_t out_cap;
};

/* A list as it arrived (payload pointers into the message). */
struct kl_list {
	uint64_t n;
	const uint64_t *keys;
	const uint32_t *lens; /* NULL: ulen each */
	uint32_t ulen;
	const uint8_t *vals; /* push only */
	uint64_t bytes;
	struct kl_wcache *wc; /* the tagged copy, if any */
	uint32_t tag;	      /* came with its keys and this tag */
};

static uint32_t kl_len_of(const struct kl_list *l, uint64_t i)
{
	return l->lens ? l->lens[i] : l->ulen;
}

static uint32_t kl_slen(const struct psd_kvs_kl *kl, uint64_t j)
{
	return kl->ulen ? kl->ulen : kl->lens[j];
}

static uint64_t kl_soff(const struct psd_kvs_kl *kl, uint64_t j)
{
	return kl->ulen ? j * kl->ulen : kl->offs[j];
}

static struct psd_kvs_kl *kl_get(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (!s->kl) {
		s->kl = calloc(1, sizeof(*s->kl));
		if (!s->kl)
			return NULL;
		s->kl->have = calloc(s->nworker ? s->nworker : 1, 1);
		s->kl->wc = calloc(s->nworker ? s->nworker : 1,
				   sizeof(*s->kl->wc));
		if (!s->kl->have || !s->kl->wc) {
			free(s->kl->have);
			free(s->kl->wc);
			free(s->kl);
			s->kl = NULL;
			return NULL;
		}
		psd_list_init(&s->kl->held);
		psd_list_init(&s->kl->pulls);
	}
	return s->kl;
}

void psd_kvs_kl_free(struct psd_kvs *s)
{
	struct psd_kvs_kl *kl = s->kl;

	if (!kl)
		return;
	kl_keys_put(kl->keys);
	free(kl->lens);
	free(kl->offs);
	free(kl->val);
	free(kl->acc);
	free(kl->stamp);
	for (unsigned w = 0; w < s->nworker; w++) {
		kl_keys_put(kl->wc[w].keys);
		free(kl->wc[w].lens);
		free(kl->wc[w].idx);
	}
	free(kl->wc);
	free(kl->have);
	free(kl->idx);
	free(kl->out);
	free(kl);
	s->kl = NULL;
}

/*
 * Remember tagged list @l of worker @wrank (its keys came with @tag): the
 * store's key array when @whole, else a copy (none when out of memory: a
 * later request naming the tag is then refused).
 */
static void kl_remember(struct psd_kvs_kl *kl, int wrank,
			const struct kl_list *l, bool whole)
{
	struct kl_wcache *wc;
	uint64_t *k;
	uint32_t *ln;

	if (wrank < 0 || !l->tag || l->wc || !l->n)
		return;
	wc = &kl->wc[wrank];
	k = whole ? kl_keys_get(kl->keys) : kl_keys_alloc(l->n);
	ln = l->lens ? malloc((size_t)l->n * 4) : NULL;
	kl_keys_put(wc->keys);
	free(wc->lens);
	free(wc->idx);
	memset(wc, 0, sizeof(*wc));
	if (!k || (l->lens && !ln)) {
		kl_keys_put(k);
		free(ln);
		return;
	}
	if (!whole)
		memcpy(k, l->keys, (size_t)l->n * 8);
	if (ln)
		memcpy(ln, l->lens, (size_t)l->n * 4);
	wc->tag = l->tag;
	wc->n = l->n;
	wc->ulen = l->ulen;
	wc->keys = k;
	wc->lens = ln;
	wc->whole_gen = whole ? kl->gen + 1 : 0;
}

/* Parse and check the payload of request @h; for pushes the values too.
 * 0 or -EPROTO with *@why. */
static int kl_parse(struct psd_kvs_kl *kl, const struct psd_hdr *h,
		    const void *payload, unsigned esize, int wrank,
		    struct kl_list *l, const char **why)
{
	const uint8_t *p = payload;
	uint64_t i, bytes = 0, bad = 0;
	uint32_t zero = 0;
	struct kl_wcache *wc = wrank >= 0 ? &kl->wc[wrank] : NULL;

	l->wc = NULL;
	l->tag = 0;
	if (h->flags & PSD_F_KLCACHED) {
		/* checked when its keys came */
		if (!wc || wc->tag != h->epoch || wc->n != h->part ||
		    wc->ulen != h->offset) {
			*why = "key-list tag unknown (its keys never came)";
			return -EPROTO;
		}
		l->n = wc->n;
		l->keys = wc->keys;
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
	l->lens = h->offset ? NULL
			    : (const uint32_t *)(const void *)(p + 8 * l->n);
	l->vals = p + l->n * (h->offset ? 8 : 12);
	/* branch-free loops: vectorised over millions of keys */
	for (i = 1; i < l->n; i++)
		bad |= l->keys[i] <= l->keys[i - 1];
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
	l->tag = h->epoch; /* kl_remember() once handled */
	return 0;
}

static int kl_idx_reserve(struct psd_kvs_kl *kl, uint64_t n)
{
	uint32_t *p;

	if (n <= kl->idx_cap)
		return 0;
	p = kl_alloc((size_t)n * sizeof(*p), false);
	if (!p)
		return -ENOMEM;
	free(kl->idx);
	kl->idx = p;
	kl->idx_cap = n;
	return 0;
}

/* Lower bound of @key in keys[lo, n). */
static uint64_t kl_lower(const uint64_t *keys, uint64_t lo, uint64_t n,
			 uint64_t key)
{
	uint64_t hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (keys[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Slots of @l in the store into kl->idx (KL_NONE: not stored); *@nnew
 * counts those.  A stored key of another length: PSCHED_ESIZE with the key
 * in *@bad.  Short lists are searched, long ones merged.
 */
static int kl_lookup(struct psd_kvs_kl *kl, const struct kl_list *l,
		     uint64_t *nnew, uint64_t *bad)
{
	bool search = l->n * 24 < kl->n;
	uint64_t i, j = 0;

	*nnew = 0;
	if (kl_idx_reserve(kl, l->n))
		return -ENOMEM;
	for (i = 0; i < l->n; i++) {
		uint64_t k = l->keys[i];

		if (search)
			j = kl_lower(kl->keys, j, kl->n, k);
		else
			while (j < kl->n && kl->keys[j] < k)
				j++;
		if (j < kl->n && kl->keys[j] == k) {
			if (kl_slen(kl, j) != kl_len_of(l, i)) {
				kl->idx[i] = (uint32_t)j;
				*bad = i;
				return PSCHED_ESIZE;
			}
			kl->idx[i] = (uint32_t)j;
		} else {
			kl->idx[i] = KL_NONE;
			(*nnew)++;
		}
	}
	return 0;
}

/*
 * The slots of @l (every key stored) in *@idx: a tagged list's are kept
 * until keys are added, so a list pushed every step is looked up once.
 * 0, PSCHED_ESIZE (key index in *@bad) or -ENOMEM; *@nnew as kl_lookup.
 */
static int kl_slots(struct psd_kvs_kl *kl, const struct kl_list *l,
		    const uint32_t **idx, uint64_t *nnew, uint64_t *bad)
{
	struct kl_wcache *wc = l->wc;
	int ret;

	*nnew = 0;
	if (wc && wc->idx && wc->idx_gen == kl->gen + 1) {
		*idx = wc->idx;
		return 0;
	}
	ret = kl_lookup(kl, l, nnew, bad);
	*idx = kl->idx;
	if (ret || *nnew || !wc)
		return ret;
	if (!wc->idx)
		wc->idx = malloc((size_t)l->n * sizeof(*wc->idx));
	if (wc->idx) {
		memcpy(wc->idx, kl->idx, (size_t)l->n * sizeof(*wc->idx));
		wc->idx_gen = kl->gen + 1;
	}
	return 0;
}

/* The whole store, key for key and length for length? */
static bool kl_is_whole_cmp(const struct psd_kvs_kl *kl,
			    const struct kl_list *l)
{
	uint64_t i;

	if (l->n != kl->n || !l->n ||
	    memcmp(l->keys, kl->keys, (size_t)l->n * 8))
		return false;
	if (!l->lens && l->ulen == kl->ulen)
		return true;
	for (i = 0; i < l->n; i++)
		if (kl_len_of(l, i) != kl_slen(kl, i))
			return false;
	return true;
}

/* Remembered for a tagged list until keys are added. */
static bool kl_is_whole(const struct psd_kvs_kl *kl, const struct kl_list *l)
{
	bool whole;

	if (l->wc && l->wc->whole_gen == kl->gen + 1)
		return true;
	whole = kl_is_whole_cmp(kl, l);
	if (whole && l->wc)
		l->wc->whole_gen = kl->gen + 1;
	return whole;
}

/*
 * Merge the @nnew keys of @l that kl->idx marks new into the store (zero
 * values).  Either everything is rebuilt or nothing changes (-ENOMEM).
 */
static int kl_insert(struct psd_kvs *s, struct psd_kvs_kl *kl,
		     const struct kl_list *l, uint64_t nnew)
{
	uint64_t tot = kl->n + nnew, addel = 0, i, j = 0, k = 0, e = 0;
	bool uni = kl->ulen || !kl->n;
	uint32_t ulen = kl->n ? kl->ulen : kl_len_of(l, 0);
	uint64_t *keys, *offs = NULL;
	uint32_t *lens = NULL, *stamp = NULL;
	uint8_t *val, *acc;
	unsigned es = kl->esize;

	for (i = 0; i < l->n; i++)
		if (nnew == l->n || kl->idx[i] == KL_NONE) {
			addel += kl_len_of(l, i);
			if (kl_len_of(l, i) != ulen)
				uni = false;
		}
	if (tot >= KL_NONE)
		return -E2BIG;
	keys = kl_keys_alloc(tot);
	val = kl_alloc((size_t)((kl->nelem + addel) * es), true);
	acc = kl_alloc((size_t)((kl->nelem + addel) * es), true);
	if (!uni) {
		lens = malloc((size_t)tot * 4);
		offs = malloc((size_t)tot * 8);
	}
	if (kl->stamp)
		stamp = calloc((size_t)tot, 4);
	if (!keys || !val || !acc || (!uni && (!lens || !offs)) ||
	    (kl->stamp && !stamp)) {
		kl_keys_put(keys);
		free(val);
		free(acc);
		free(lens);
		free(offs);
		free(stamp);
		return -ENOMEM;
	}
	/* Every key new and after the stored ones (an empty store, say):
	 * append, no merge. */
	if (nnew == l->n && (!kl->n || l->keys[0] > kl->keys[kl->n - 1])) {
		memcpy(keys, kl->keys, (size_t)kl->n * 8);
		memcpy(keys + kl->n, l->keys, (size_t)l->n * 8);
		memcpy(val, kl->val, (size_t)(kl->nelem * es));
		memcpy(acc, kl->acc, (size_t)(kl->nelem * es));
		if (stamp)
			memcpy(stamp, kl->stamp, (size_t)kl->n * 4);
		k = kl->n;
		e = kl->nelem;
		if (!uni) {
			for (j = 0; j < kl->n; j++) {
				lens[j] = kl_slen(kl, j);
				offs[j] = kl_soff(kl, j);
			}
			for (i = 0; i < l->n; i++, k++) {
				lens[k] = kl_len_of(l, i);
				offs[k] = e;
				e += lens[k];
			}
		} else {
			k += l->n;
			e += addel;
		}
		goto done;
	}
	/* One 4-byte element per key, before and after: merge without a
	 * call per key. */
	if (uni && ulen == 1 && es == 4 && (!kl->n || kl->ulen == 1)) {
		const uint32_t *ov = (const uint32_t *)(const void *)kl->val;
		const uint32_t *oa = (const uint32_t *)(const void *)kl->acc;
		uint32_t *nv = (uint32_t *)(void *)val;
		uint32_t *na = (uint32_t *)(void *)acc;

		i = 0;
		while (i < l->n || j < kl->n) {
			if (j < kl->n &&
			    (i >= l->n || kl->keys[j] <= l->keys[i])) {
				if (i < l->n && kl->keys[j] == l->keys[i])
					i++;
				keys[k] = kl->keys[j];
				nv[k] = ov[j];
				na[k] = oa[j];
				if (stamp)
					stamp[k] = kl->stamp[j];
				j++;
			} else {
				keys[k] = l->keys[i++];
			}
			k++;
		}
		e = k;
		goto done;
	}
	/* merge: i over the list, j over the store, k out, e elements */
	i = 0;
	while (i < l->n || j < kl->n) {
		bool old = j < kl->n &&
			   (i >= l->n || kl->keys[j] <= l->keys[i]);
		uint32_t len;

		if (old) {
			if (i < l->n && kl->keys[j] == l->keys[i])
				i++; /* stored already */
			len = kl_slen(kl, j);
			keys[k] = kl->keys[j];
			memcpy(val + e * es, kl->val + kl_soff(kl, j) * es,
			       (size_t)len * es);
			memcpy(acc + e * es, kl->acc + kl_soff(kl, j) * es,
			       (size_t)len * es);
			if (stamp)
				stamp[k] = kl->stamp[j];
			j++;
		} else {
			len = kl_len_of(l, i);
			keys[k] = l->keys[i++];
		}
		if (!uni) {
			lens[k] = len;
			offs[k] = e;
		}
		e += len;
		k++;
	}
done:
	kl_keys_put(kl->keys);
	free(kl->val);
	free(kl->acc);
	free(kl->lens);
	free(kl->offs);
	free(kl->stamp);
	kl->keys = keys;
	kl->val = val;
	kl->acc = acc;
	kl->lens = lens;
	kl->offs = offs;
	kl->stamp = stamp;
	kl->ulen = uni ? ulen : 0;
	kl->n = tot;
	kl->nelem = e;
	kl->gen++;
	atomic_fetch_add(&s->stored_bytes, addel * es);
	atomic_fetch_add(&s->alloc_bytes, addel * es * 2);
	return 0;
}

/* The open step turns partial: stamp every key a whole-store push of it
 * filled already. */
static int kl_go_partial(struct psd_kvs_kl *kl, uint32_t cur)
{
	uint64_t j;

	if (kl->partial)
		return 0;
	if (!kl->stamp) {
		kl->stamp = calloc((size_t)(kl->n ? kl->n : 1), 4);
		if (!kl->stamp)
			return -ENOMEM;
	}
	if (kl->full)
		for (j = 0; j < kl->n; j++)
			kl->stamp[j] = cur;
	kl->partial = true;
	return 0;
}

/* Add list @l (checked, all keys stored, kl->idx filled unless @whole) to
 * the open step. */
static int kl_add(struct psd_kvs_kl *kl, const struct kl_list *l, bool whole,
		  const uint32_t *idx)
{
	uint32_t cur = (uint32_t)(kl->version + 1);
	uint64_t i, off = 0;
	unsigned es = kl->esize;
	int ret;

	if (whole && !kl->partial) {
		if (!kl->full++)
			memcpy(kl->acc, l->vals, (size_t)l->bytes);
		else
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
		uint64_t j = whole ? i : idx[i];
		uint64_t len = (uint64_t)kl_len_of(l, i) * es;
		uint8_t *dst = kl->acc + kl_soff(kl, j) * es;

		if (kl->stamp[j] == cur) {
			psd_kvs_sum(kl->dtype, dst, l->vals + off, len);
		} else {
			memcpy(dst, l->vals + off, (size_t)len);
			kl->stamp[j] = cur;
		}
		off += len;
	}
	return 0;
}

/* The answer header to request @h. */
static struct psd_hdr kl_answer(struct psched_node *n, const struct psd_hdr *h,
				int type, uint64_t bytes)
{
	struct psd_hdr a = *h;

	a.type = (uint8_t)type;
	a.sender = n->id;
	a.status = 0;
	a.flags = PSD_F_KEYLIST;
	a.offset = 0;
	a.total = a.span = a.length = bytes;
	a.part = 0;
	return a;
}

/* Answer pull (or pushpull) @h of the keys @keys/@lens now. */
static void kl_answer_list(struct psched_node *n, struct psd_conn *c,
			   const struct psd_hdr *h, const struct kl_list *lp)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	struct kl_list l = *lp;
	struct psd_hdr a;
	struct iovec iov;
	uint64_t nnew = 0, bad = 0, i, off = 0;
	const uint32_t *idx;
	int ret;

	if (kl_is_whole(kl, &l)) {
		a = kl_answer(n, h, PSD_MSG_PULL_RESP, l.bytes);
		a.step = kl->version;
		iov.iov_base = kl->val;
		iov.iov_len = (size_t)l.bytes;
		psd_conn_send(c, &a, &iov, 1);
		return;
	}
	ret = kl_slots(kl, &l, &idx, &nnew, &bad);
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
		psd_kvs_rejectf(
			n, c, h, ret ? ret : PSCHED_EUNKNOWNKEY,
			"key-list pull of %llu keys: key %llu %s",
			(unsigned long long)l.n,
			(unsigned long long)l.keys[bad],
			ret ? "has another length on this server"
			    : "was never pushed to this server");
		return;
	}
	if (l.bytes > kl->out_cap) {
		uint8_t *p = realloc(kl->out, (size_t)l.bytes);

		if (!p) {
			psd_kvs_reject(n, c, h, -ENOMEM,
				       "no memory to answer a key list");
			return;
		}
		kl->out = p;
		kl->out_cap = l.bytes;
	}
	if (kl->ulen == 1 && kl->esize == 4) {
		uint32_t *o = (uint32_t *)(void *)kl->out;
		const uint32_t *v = (const uint32_t *)(const void *)kl->val;

		for (i = 0; i < l.n; i++)
			o[i] = v[idx[i]];
	} else {
		for (i = 0; i < l.n; i++) {
			uint64_t len = (uint64_t)kl_len_of(&l, i) * kl->esize;

			memcpy(kl->out + off,
			       kl->val + kl_soff(kl, idx[i]) * kl->esize,
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

/* Answer pull @h whose keys are in @payload (or cached, @wrank's). */
static void kl_answer_pull(struct psched_node *n, struct psd_conn *c,
			   const struct psd_hdr *h, const void *payload,
			   int wrank)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	const char *why = "";
	struct kl_list l;

	if (kl_parse(kl, h, payload, psched_dtype_size(h->dtype), wrank, &l,
		     &why)) {
		psd_kvs_reject(n, c, h, -EPROTO, why);
		return;
	}
	kl_answer_list(n, c, h, &l);
}

/* Pull @h of list @l waits for version h->step: keep a copy of its keys
 * (a tagged list may be replaced meanwhile). */
static void kl_pull_wait(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, const struct kl_list *l)
{
	struct psd_kvs_kl *kl = psd_kvs_of(n)->kl;
	uint64_t len = l->n * (l->lens ? 12 : 8);
	struct psd_hdr wh = *h;
	uint8_t *buf = malloc(len ? (size_t)len : 1);

	/* the wait's header describes the copy: a pull of these keys */
	wh.length = len;
	wh.flags &= (uint8_t)~PSD_F_KLCACHED;
	wh.epoch = 0;
	if (!buf || psd_kvs_queue_wait(c, &kl->pulls, &wh, h->step, buf)) {
		free(buf);
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory to queue a pull");
		return;
	}
	memcpy(buf, l->keys, (size_t)l->n * 8);
	if (l->lens)
		memcpy(buf + l->n * 8, l->lens, (size_t)l->n * 4);
}

static void kl_wait_free(struct psd_kvs_wait *w)
{
	psd_conn_put(w->conn);
	free(w->buf);
	free(w);
}

/*
 * Push @h of worker @wrank for the open step, payload @payload: check it,
 * store its new keys and add it, or refuse it whole; either way the
 * worker's push of the step is counted.  @acked: it was acked when held.
 */
static void kl_push(struct psched_node *n, struct psd_conn *c,
		    const struct psd_hdr *h, const void *payload, int wrank,
		    bool acked)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s->kl;
	uint64_t nnew = 0, bad = 0;
	const char *why = "";
	const uint32_t *idx = NULL;
	struct kl_list l;
	bool whole, refused = true;
	int ret = 0;

	if (kl->has_dtype && h->dtype != kl->dtype) {
		psd_kvs_rejectf(n, c, h, -EINVAL,
				"key list of dtype %s, but this server's key "
				"lists hold %s (nothing stored)",
				psched_dtype_name(h->dtype),
				psched_dtype_name(kl->dtype));
		goto count;
	}
	if (kl_parse(kl, h, payload, psched_dtype_size(h->dtype), wrank, &l,
		     &why)) {
		psd_kvs_rejectf(n, c, h, -EPROTO,
				"malformed key list: %s (nothing stored)", why);
		goto count;
	}
	if (!kl->has_dtype && l.n) {
		kl->has_dtype = true;
		kl->dtype = h->dtype;
		kl->esize = psched_dtype_size(h->dtype);
	}
	whole = kl_is_whole(kl, &l);
	if (!kl->n) {
		nnew = l.n; /* all new: no lookup, kl_insert() appends */
	} else {
		ret = whole ? 0 : kl_slots(kl, &l, &idx, &nnew, &bad);
	}
	if (ret == PSCHED_ESIZE) {
		psd_kvs_rejectf(n, c, h, ret,
				"key list: key %llu has %u elements, but this "
				"server holds it with %u (nothing stored)",
				(unsigned long long)l.keys[bad],
				kl_len_of(&l, bad),
				kl_slen(kl, kl->idx[bad] == KL_NONE
						    ? 0
						    : kl->idx[bad]));
		goto refused_parsed;
	}
	if (!ret && nnew) {
		bool was_empty = !kl->n;

		ret = kl_insert(s, kl, &l, nnew);
		/* into an empty store the list is the whole store */
		whole = !ret && was_empty;
		if (!ret && !was_empty)
			ret = kl_slots(kl, &l, &idx, &nnew, &bad);
		if (!ret && !was_empty)
			whole = kl_is_whole(kl, &l);
	}
	if (!ret)
		ret = kl_add(kl, &l, whole, idx);
	if (ret) {
		psd_kvs_rejectf(n, c, h, ret,
				"key list of %llu keys: %s (nothing stored)",
				(unsigned long long)l.n, psched_strerror(ret));
		goto refused_parsed;
	}
	refused = false;
	kl_remember(kl, wrank, &l, whole);
	goto count;
refused_parsed:
	kl_remember(kl, wrank, &l, false);
count:
	if (!acked && !refused) {
		struct psd_hdr a = kl_answer(n, h, PSD_MSG_PUSH_ACK, 0);

		psd_conn_send(c, &a, NULL, 0);
	}
	if (h->type == PSD_MSG_PUSHPULL && !refused)
		kl_pull_wait(n, c, h, &l);
	kl->have[wrank] = true;
	kl->got++;
}

/* Fold the open step in: the sums become the values of the keys pushed. */
static void kl_commit(struct psd_kvs *s, struct psd_kvs_kl *kl)
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
				memcpy(kl->val + kl_soff(kl, j) * es,
				       kl->acc + kl_soff(kl, j) * es,
				       (size_t)kl_slen(kl, j) * es);
	} else if (kl->full) {
		tmp = kl->val;
		kl->val = kl->acc;
		kl->acc = tmp;
	}
	kl->version++;
	kl->got = 0;
	kl->full = 0;
	kl->partial = false;
	memset(kl->have, 0, s->nworker);
}

/* Answer every waiting pull the version now covers, smaller priority
 * first (ties in arrival order). */
static void kl_answer_pulls(struct psched_node *n, struct psd_kvs_kl *kl)
{
	struct psd_kvs_wait *best;
	struct psd_list *pos;

	for (;;) {
		best = NULL;
		psd_list_for_each (pos, &kl->pulls) {
			struct psd_kvs_wait *w = psd_container_of(
				pos, struct psd_kvs_wait, link);

			if (w->want <= kl->version &&
			    (!best || w->h.priority < best->h.priority))
				best = w;
		}
		if (!best)
			return;
		psd_list_del(&best->link);
		kl_answer_pull(n, best->conn, &best->h, best->buf, -1);
		kl_wait_free(best);
	}
}

/* While the open step has every worker's push: fold it in, answer the
 * pulls it satisfies, apply the held pushes of the next step. */
static void kl_advance(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s->kl;
	struct psd_list *pos, *tmp;

	while (kl->got >= s->nworker) {
		kl_commit(s, kl);
		kl_answer_pulls(n, kl);
		psd_list_for_each_safe (pos, tmp, &kl->held) {
			struct psd_kvs_wait *w = psd_container_of(
				pos, struct psd_kvs_wait, link);
			struct psd_peer *p = psd_node_peer(n, w->conn->peer_id);

			if (w->h.step != kl->version + 1)
				continue;
			psd_list_del(&w->link);
			if (p && p->rank >= 0 && (unsigned)p->rank < s->nworker)
				kl_push(n, w->conn, &w->h, w->buf, p->rank,
					true);
			psd_conn_put(w->conn);
			psd_kvs_hold_free(s, w->buf, w->h.length);
			free(w);
		}
	}
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
	const char *why = "";
	struct kl_list l;
	uint64_t len;
	uint8_t *nb;

	if (kl_parse(kl, h, buf, psched_dtype_size(h->dtype), wrank, &l,
		     &why)) {
		psd_kvs_hold_free(s, buf, h->length);
		return NULL;
	}
	len = l.n * (l.lens ? 12 : 8) + h->span;
	nb = malloc((size_t)len);
	if (!nb) {
		psd_kvs_hold_free(s, buf, h->length);
		return NULL;
	}
	memcpy(nb, l.keys, (size_t)l.n * 8);
	if (l.lens)
		memcpy(nb + l.n * 8, l.lens, (size_t)l.n * 4);
	memcpy(nb + l.n * (l.lens ? 12 : 8), buf, (size_t)h->span);
	psd_kvs_hold_free(s, buf, h->length);
	s->parked_bytes += len;
	h->length = len;
	h->flags &= (uint8_t)~PSD_F_KLCACHED;
	h->epoch = 0;
	return nb;
}

/* A push of a later step: hold its payload until that step opens, within
 * PS_MAX_STEPS_AHEAD and PS_MAX_PARKED_BYTES. */
static int kl_early_header(struct psched_node *n, struct psd_conn *c,
			   struct psd_kvs_conn *kc, const struct psd_hdr *h,
			   void **dst)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint64_t ahead = h->step - (s->kl->version + 1);
	uint64_t limit = psd_kvs_parked_limit(s);

	if (ahead > s->max_ahead) {
		psd_kvs_rejectf(n, c, h, -ERANGE,
				"key-list push for step %llu is %llu steps "
				"ahead of the open step %llu on this server "
				"(PS_MAX_STEPS_AHEAD=%llu)",
				(unsigned long long)h->step,
				(unsigned long long)ahead,
				(unsigned long long)(s->kl->version + 1),
				(unsigned long long)s->max_ahead);
		return PSD_RX_DISCARD;
	}
	if (h->length > limit || s->parked_bytes > limit - h->length) {
		psd_kvs_rejectf(n, c, h, -ENOBUFS,
				"key-list push for step %llu: no room to hold "
				"%llu more bytes (PS_MAX_PARKED_BYTES=%llu)",
				(unsigned long long)h->step,
				(unsigned long long)h->length,
				(unsigned long long)limit);
		return PSD_RX_DISCARD;
	}
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

int psd_kvs_kl_rx_header(struct psched_node *n, struct psd_conn *c,
			 struct psd_kvs_conn *kc, const struct psd_hdr *h,
			 void **dst)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = kl_get(n);
	bool push = h->type == PSD_MSG_PUSH || h->type == PSD_MSG_PUSHPULL;
	int ret = 0;

	if (!kl) {
		psd_kvs_reject(n, c, h, -ENOMEM, "no memory for key lists");
		return h->length ? PSD_RX_DISCARD : 0;
	}
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
	else if (push && h->step <= kl->version)
		ret = psd_kvs_rejectf(n, c, h, -EPROTO,
				      "key-list step %llu already applied",
				      (unsigned long long)h->step);
	else if (push && h->step == kl->version + 1 && kl->have[kc->wrank])
		ret = psd_kvs_rejectf(n, c, h, -EPROTO,
				      "second key-list push for step %llu",
				      (unsigned long long)h->step);
	if (ret)
		return h->length ? PSD_RX_DISCARD : 0;
	if (push && h->step > kl->version + 1) {
		ret = kl_early_header(n, c, kc, h, dst);
		if (ret)
			return ret;
	}
	kc->kl = true;
	return 0;
}

void psd_kvs_kl_rx_data(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *h, void *payload)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_conn *kc = c->ctx;
	struct psd_kvs_kl *kl = s->kl;
	struct psd_hdr hh = *h;
	const char *why = "";
	struct kl_list l;
	void *buf;

	if (!kc || !kc->kl || !kl)
		return; /* refused at the header */
	kc->kl = false;
	if (h->type == PSD_MSG_PULL) {
		if (kl_parse(kl, h, payload, psched_dtype_size(h->dtype),
			     kc->wrank, &l, &why)) {
			psd_kvs_reject(n, c, h, -EPROTO, why);
			return;
		}
		if (l.tag) {
			kl_remember(kl, kc->wrank, &l,
				    kl->n == l.n && kl_is_whole_cmp(kl, &l));
			if (kl->wc[kc->wrank].tag == l.tag)
				l.wc = &kl->wc[kc->wrank];
		}
		/* A pull the version covers is answered even after a
		 * worker left (the others may still pull its last step). */
		if (kl->version >= h->step)
			kl_answer_list(n, c, h, &l);
		else if (s->broken)
			psd_kvs_reject(n, c, h, s->broken, s->broken_msg);
		else
			kl_pull_wait(n, c, h, &l);
		return;
	}
	buf = kc->hold;
	kc->hold = NULL;
	/* Early when its header came; its step may have opened since. */
	if (buf && h->step != kl->version + 1) {
		/* Its tag is known from now on (later pushes may name it
		 * before this one applies); held, it goes without one. */
		if (h->epoch && !(h->flags & PSD_F_KLCACHED)) {
			if (!kl_parse(kl, h, buf, psched_dtype_size(h->dtype),
				      kc->wrank, &l, &why))
				kl_remember(kl, kc->wrank, &l, false);
			hh.epoch = 0;
		}
		if (h->flags & PSD_F_KLCACHED)
			buf = kl_expand(s, kl, &hh, buf, kc->wrank);
		if (!buf) {
			psd_kvs_reject(n, c, h, -EPROTO,
				       "cannot hold an early key-list push: "
				       "its tag is unknown or no memory");
			return;
		}
		if (psd_kvs_queue_wait(c, &kl->held, &hh, h->step, buf)) {
			psd_kvs_hold_free(s, buf, hh.length);
			psd_kvs_reject(n, c, h, -ENOMEM,
				       "no memory to hold an early push");
			return;
		}
		if (h->type == PSD_MSG_PUSH || h->type == PSD_MSG_PUSHPULL) {
			struct psd_hdr a = kl_answer(n, h, PSD_MSG_PUSH_ACK, 0);

			psd_conn_send(c, &a, NULL, 0);
		}
		return;
	}
	kl_push(n, c, h, buf ? buf : payload, kc->wrank, false);
	if (buf)
		psd_kvs_hold_free(s, buf, h->length);
	kl_advance(n);
}

void psd_kvs_kl_drop(struct psched_node *n, struct psd_conn *c, int err,
		     const char *why)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_kl *kl = s ? s->kl : NULL;
	struct psd_list *pos, *tmp;

	if (!kl)
		return;
	psd_list_for_each_safe (pos, tmp, &kl->pulls) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		if (c && w->conn != c)
			continue;
		psd_list_del(&w->link);
		if (err)
			psd_kvs_reject(n, w->conn, &w->h, err, why);
		kl_wait_free(w);
	}
	psd_list_for_each_safe (pos, tmp, &kl->held) {
		struct psd_kvs_wait *w =
			psd_container_of(pos, struct psd_kvs_wait, link);

		if (c && w->conn != c)
			continue;
		psd_list_del(&w->link);
		if (err && w->h.type == PSD_MSG_PUSHPULL)
			psd_kvs_reject(n, w->conn, &w->h, err, why);
		psd_conn_put(w->conn);
		psd_kvs_hold_free(s, w->buf, w->h.length);
		free(w);
	}
}
