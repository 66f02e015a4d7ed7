// SPDX-License-Identifier: MIT
/*
 * Key lists on a server: the store (server/kvs_kl.h; the design is at the
 * top of kvs_keylist.c): sorted keys, values, per-step sums, the workers'
 * tagged lists, lookups, inserting keys, adding a push, the commit
 * (parsing a request is in kvs_keylist.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "klpack.h"
#include "kvs_kl.h"

/* Big arrays: fresh zero pages from the kernel without a memset, in
 * transparent huge pages unless PS_KEYLIST_HUGEPAGES=0 (common/bigmem.h:
 * 10 M keys make 120 MB of arrays whose first-touch faults cost as much
 * as filling them).  Every one is freed with kl_free(). */
static void *kl_alloc(const struct psd_kvs_kl *kl, size_t len, bool zero)
{
	return psd_big_alloc(len ? len : 1, kl->huge, zero);
}

static void kl_free(void *p)
{
	psd_big_free(p);
}

/* Key arrays are shared between the store and the workers' tagged lists
 * (a list that is the whole store needs no copy): refcounted, the count
 * in a 64-byte header before the keys.
 *
 * A first-step list that came packed into a buffer of its own keeps its
 * keys packed (pk: the section, checked when it came) until something
 * reads them: the 2+2 cold push of 10 M keys then writes no key array at
 * all on the servers (40 MB of fresh pages per list, which cost about as
 * much as the rest of the push), and a worker's own list, pushed and
 * pulled by its tag every step after, never needs them.  Everything that
 * reads a block's keys calls kl_keys_ready() first, or reads the packed
 * form (kl_key_at(), kl_has(), the second run's walk). */
struct kl_keyhdr {
	size_t refs;
	uint8_t *pk; /* packed keys not yet written out (malloc'd) */
	uint64_t pklen, pkn;
	char pad[32];
};

static struct kl_keyhdr *kl_hdr(const uint64_t *k)
{
	return (struct kl_keyhdr *)(void *)(uintptr_t)k - 1;
}

static uint64_t *kl_keys_alloc(const struct psd_kvs_kl *kl, uint64_t n)
{
	struct kl_keyhdr *h = kl_alloc(kl, sizeof(*h) + (size_t)n * 8, false);

	if (!h)
		return NULL;
	h->refs = 1;
	h->pk = NULL;
	return (uint64_t *)(void *)(h + 1);
}

static uint64_t *kl_keys_get(uint64_t *k)
{
	kl_hdr(k)->refs++;
	return k;
}

static void kl_keys_put(uint64_t *k)
{
	struct kl_keyhdr *h;

	if (!k)
		return;
	h = kl_hdr(k);
	if (!--h->refs) {
		free(h->pk);
		kl_free(h);
	}
}

/* Are the keys of block @k (NULL: none) still packed? */
static bool kl_keys_lazy(const uint64_t *k)
{
	return k && kl_hdr(k)->pk;
}

bool psd_kl_keys_packed(const uint64_t *k)
{
	return kl_keys_lazy(k);
}

/* Write block @k's keys out if they are still packed. */
static void kl_keys_ready(const uint64_t *k)
{
	struct kl_keyhdr *h;
	const char *why = "";

	if (!kl_keys_lazy(k))
		return;
	h = kl_hdr(k);
	/* checked when it came (psd_kl_own_lazy()): cannot fail */
	if (psd_klpack_unpack(h->pk, h->pklen, h->pkn, (uint64_t *)(uintptr_t)k,
			      &why))
		psd_err("key lists: packed keys checked on arrival no longer "
			"unpack: %s",
			why);
	free(h->pk);
	h->pk = NULL;
}

void psd_kl_list_ready(const struct psd_kl_list *l)
{
	if (l->own || l->blk)
		kl_keys_ready(l->keys);
}

/* The store's keys written out. */
static void kl_store_ready(const struct psd_kvs_kl *kl)
{
	kl_keys_ready(kl->keys);
	kl_keys_ready(kl->keys2);
}

/* Key @i of block @k, packed or not. */
static uint64_t kl_key_at(const uint64_t *k, uint64_t i)
{
	uint64_t blk[PSD_KLPACK_BLK];
	struct psd_klpack_rd rd;
	struct kl_keyhdr *h;
	const char *why;

	if (!kl_keys_lazy(k))
		return k[i];
	h = kl_hdr(k);
	if (psd_klpack_rd_init(&rd, h->pk, h->pklen, h->pkn, &why))
		return 0; /* checked on arrival: not reached */
	psd_klpack_rd_seek(&rd, i / PSD_KLPACK_BLK);
	psd_klpack_rd_next(&rd, blk);
	return blk[i % PSD_KLPACK_BLK];
}

/* Key @i of list @l, packed or not (only a key block may be packed). */
static uint64_t kl_lkey_at(const struct psd_kl_list *l, uint64_t i)
{
	return l->own || l->blk ? kl_key_at(l->keys, i) : l->keys[i];
}

/* Is @key among the @n keys of block @k, packed or not? */
static bool kl_has(const uint64_t *k, uint64_t n, uint64_t key)
{
	uint64_t blk[PSD_KLPACK_BLK], lo = 0, hi, got, j;
	struct psd_klpack_rd rd;
	struct kl_keyhdr *h;
	const char *why;

	if (!n)
		return false;
	if (!kl_keys_lazy(k)) {
		j = psd_kl_lower(k, 0, n, key);
		return j < n && k[j] == key;
	}
	h = kl_hdr(k);
	if (psd_klpack_rd_init(&rd, h->pk, h->pklen, h->pkn, &why))
		return false; /* checked on arrival: not reached */
	/* the last block whose first key is at most @key */
	hi = rd.nblk;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (psd_klpack_first(h->pk, mid) <= key)
			lo = mid;
		else
			hi = mid;
	}
	psd_klpack_rd_seek(&rd, lo);
	got = psd_klpack_rd_next(&rd, blk);
	for (j = 0; j < got; j++)
		if (blk[j] == key)
			return true;
	return false;
}

void *psd_kl_rxbuf(const struct psd_kvs_kl *kl, uint64_t len, uint64_t from)
{
	uint64_t *k = kl_keys_alloc(kl, (len + 7) / 8);

	/* what is written next (received, keys unpacked), at once */
	if (k && from < len)
		psd_big_populate((uint8_t *)k + from, len - from);
	return k;
}

int psd_kl_own_lazy(const struct psd_hdr *h, void *own, struct psd_hdr *raw,
		    const char **why)
{
	uint64_t sec = psd_kl_packed_len(h);
	struct kl_keyhdr *kh = kl_hdr(own);
	uint8_t *pk;
	int ret;

	/* the section sits where the keys' tail goes: kept aside */
	pk = malloc(sec ? (size_t)sec : 1);
	if (!pk)
		return -ENOMEM;
	memcpy(pk, (uint8_t *)own + (h->part * 8 - sec), (size_t)sec);
	ret = psd_klpack_check(pk, sec, h->part, why);
	if (ret) {
		free(pk);
		return ret;
	}
	free(kh->pk);
	kh->pk = pk;
	kh->pklen = sec;
	kh->pkn = h->part;
	*raw = *h;
	raw->flags &= (uint8_t)~PSD_F_KLPACKED;
	raw->flags |= KL_F_SORTED;
	raw->length = h->length - sec + h->part * 8;
	return 0;
}

void psd_kl_rxbuf_put(void *buf)
{
	kl_keys_put(buf);
}

/* Free value array @p, which lies in key block @blk when adopted. */
static void kl_vals_free(uint8_t *p, uint64_t *blk)
{
	if (blk)
		kl_keys_put(blk);
	else
		kl_free(p);
}

struct psd_kvs_kl *psd_kl_get(struct psched_node *n)
{
	struct psd_kvs *s = psd_kvs_of(n);

	if (!s->kl) {
		s->kl = calloc(1, sizeof(*s->kl));
		if (!s->kl)
			return NULL;
		s->kl->have = calloc(s->nworker ? s->nworker : 1, 1);
		s->kl->wc =
			calloc(s->nworker ? s->nworker : 1, sizeof(*s->kl->wc));
		if (!s->kl->have || !s->kl->wc) {
			free(s->kl->have);
			free(s->kl->wc);
			free(s->kl);
			s->kl = NULL;
			return NULL;
		}
		s->kl->huge = s->kl_hugepages;
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
	kl_keys_put(kl->keys2);
	kl_free(kl->lens);
	kl_free(kl->offs);
	kl_vals_free(kl->val, kl->val_blk);
	kl_vals_free(kl->acc, kl->acc_blk);
	kl_free(kl->stamp);
	for (unsigned w = 0; w < s->nworker; w++) {
		kl_keys_put(kl->wc[w].keys);
		kl_free(kl->wc[w].lens);
		kl_free(kl->wc[w].idx);
	}
	free(kl->wc);
	free(kl->have);
	kl_free(kl->idx);
	kl_free(kl->out);
	kl_free(kl->ukeys);
	kl_free(kl->pk);
	free(kl);
	s->kl = NULL;
}

/*
 * Remember tagged list @l of worker @wrank (its keys came with @tag): the
 * store's key array when @whole, else a copy (none when out of memory: a
 * later request naming the tag is then refused).
 */
void psd_kl_remember(struct psd_kvs_kl *kl, int wrank,
		     const struct psd_kl_list *l, bool whole)
{
	struct psd_kl_wcache *wc;
	bool share = whole && !kl->keys2; /* the store's keys are the list */
	uint64_t *k;
	uint32_t *ln;

	if (wrank < 0 || !l->tag || l->wc || !l->n)
		return;
	wc = &kl->wc[wrank];
	/* a list in its own receive buffer: keep that (its keys first)
	 * rather than copy the keys into fresh pages */
	k = share    ? kl_keys_get(kl->keys)
	    : l->own ? kl_keys_get((uint64_t *)(uintptr_t)l->keys)
		     : kl_keys_alloc(kl, l->n);
	ln = l->lens ? kl_alloc(kl, (size_t)l->n * 4, false) : NULL;
	kl_keys_put(wc->keys);
	kl_free(wc->lens);
	kl_free(wc->idx);
	memset(wc, 0, sizeof(*wc));
	if (!k || (l->lens && !ln)) {
		kl_keys_put(k);
		kl_free(ln);
		return;
	}
	if (!share && !l->own)
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

void *psd_kl_grow(const struct psd_kvs_kl *kl, void *buf, uint64_t *cap,
		  uint64_t n, size_t esize)
{
	void *p;

	if (buf && n <= *cap)
		return buf;
	p = kl_alloc(kl, (size_t)(n * esize), false);
	if (!p)
		return NULL;
	kl_free(buf);
	*cap = n;
	return p;
}

static int kl_idx_reserve(struct psd_kvs_kl *kl, uint64_t n)
{
	uint32_t *p = psd_kl_grow(kl, kl->idx, &kl->idx_cap, n, sizeof(*p));

	if (!p)
		return -ENOMEM;
	kl->idx = p;
	return 0;
}

/*
 * Slots of @l in the store into kl->idx (KL_NONE: not stored); *@nnew
 * counts those.  A stored key of another length: PSCHED_ESIZE with the key
 * in *@bad.  Short lists are searched, long ones merged.  When every key
 * is new only idx[0] is written (KL_NONE): nothing needs the others then
 * (psd_kl_insert() appends or merges the whole list), and the first list
 * of new keys into a big store does not fill fresh pages with KL_NONE.
 */
static int kl_lookup2(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		      uint64_t *nnew, uint64_t *bad);

static int kl_lookup(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		     uint64_t *nnew, uint64_t *bad)
{
	bool search = l->n * 24 < kl->n;
	uint64_t i, j = 0, h;
	bool hit = false; /* idx[0, i) written */

	*nnew = 0;
	if (kl_idx_reserve(kl, l->n))
		return -ENOMEM;
	kl_store_ready(kl);
	psd_kl_list_ready(l);
	if (kl->keys2)
		return kl_lookup2(kl, l, nnew, bad);
	for (i = 0; i < l->n; i++) {
		uint64_t k = l->keys[i];

		if (search)
			j = psd_kl_lower(kl->keys, j, kl->n, k);
		else
			while (j < kl->n && kl->keys[j] < k)
				j++;
		if (j < kl->n && kl->keys[j] == k) {
			if (!hit)
				for (h = 0; h < i; h++)
					kl->idx[h] = KL_NONE;
			hit = true;
			if (psd_kl_slen(kl, j) != psd_kl_len_of(l, i)) {
				kl->idx[i] = (uint32_t)j;
				*bad = i;
				return PSCHED_ESIZE;
			}
			kl->idx[i] = (uint32_t)j;
		} else {
			if (hit)
				kl->idx[i] = KL_NONE;
			(*nnew)++;
		}
	}
	if (!hit && l->n)
		kl->idx[0] = KL_NONE;
	return 0;
}

/* kl_lookup() of a store in two runs (kl->keys2; one length): a key's
 * slot is its rank in the first run, or the first run's length plus its
 * rank in the second.  Every idx[i] is written. */
static int kl_lookup2(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		      uint64_t *nnew, uint64_t *bad)
{
	const uint64_t *ka = kl->keys, *kb = kl->keys2;
	uint64_t na = kl->n - kl->n2, nb = kl->n2, i, ja = 0, jb = 0, miss = 0;
	bool search = l->n * 24 < kl->n;
	uint32_t *idx = kl->idx;

	for (i = 0; i < l->n; i++) {
		uint64_t k = l->keys[i];
		bool found;

		if (search) {
			ja = psd_kl_lower(ka, ja, na, k);
			jb = psd_kl_lower(kb, jb, nb, k);
		} else {
			while (ja < na && ka[ja] < k)
				ja++;
			while (jb < nb && kb[jb] < k)
				jb++;
		}
		bool in_a = ja < na && ka[ja] == k;

		found = in_a | (jb < nb && kb[jb] == k);
		idx[i] = !found ? KL_NONE
			 : in_a ? (uint32_t)ja
				: (uint32_t)(na + jb);
		miss += !found;
		if (found && psd_kl_len_of(l, i) != kl->ulen) {
			*bad = i;
			*nnew = miss;
			return PSCHED_ESIZE;
		}
	}
	*nnew = miss;
	return 0;
}

/*
 * The slots of @l (every key stored) in *@idx: a tagged list's are kept
 * until keys are added, so a list pushed every step is looked up once.
 * 0, PSCHED_ESIZE (key index in *@bad) or -ENOMEM; *@nnew as kl_lookup.
 */
int psd_kl_slots(struct psd_kvs_kl *kl, const struct psd_kl_list *l,
		 const uint32_t **idx, uint64_t *nnew, uint64_t *bad)
{
	struct psd_kl_wcache *wc = l->wc;
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
	if (!wc->idx) {
		/* the first time: take these slots over rather than copy
		 * them (a later lookup gets a fresh array) */
		wc->idx = kl->idx;
		wc->idx_gen = kl->gen + 1;
		kl->idx = NULL;
		kl->idx_cap = 0;
		*idx = wc->idx;
		return 0;
	}
	memcpy(wc->idx, kl->idx, (size_t)l->n * sizeof(*wc->idx));
	wc->idx_gen = kl->gen + 1;
	return 0;
}

/* The whole store, key for key and length for length? */
bool psd_kl_is_whole_cmp(const struct psd_kvs_kl *kl,
			 const struct psd_kl_list *l)
{
	uint64_t i;

	/* Two runs hold their values run after run, and the second run
	 * starts below the first's end (else it was appended): no sorted
	 * list is the store in value order. */
	if (l->n != kl->n || !l->n || kl->keys2)
		return false;
	/* told apart by the first key without writing out packed keys
	 * (two workers' lists of the same length, say) */
	if (kl_lkey_at(l, 0) != kl_key_at(kl->keys, 0))
		return false;
	if (l->keys != kl->keys) {
		kl_store_ready(kl);
		psd_kl_list_ready(l);
		if (memcmp(l->keys, kl->keys, (size_t)l->n * 8))
			return false;
	}
	if (!l->lens && l->ulen == kl->ulen)
		return true;
	for (i = 0; i < l->n; i++)
		if (psd_kl_len_of(l, i) != psd_kl_slen(kl, i))
			return false;
	return true;
}

/* Remembered for a tagged list until keys are added. */
bool psd_kl_is_whole(const struct psd_kvs_kl *kl, const struct psd_kl_list *l)
{
	bool whole;

	if (l->wc && l->wc->whole_gen == kl->gen + 1)
		return true;
	whole = psd_kl_is_whole_cmp(kl, l);
	if (whole && l->wc)
		l->wc->whole_gen = kl->gen + 1;
	return whole;
}

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
	kl_store_ready(kl);
	k = kl_keys_alloc(kl, kl->n);
	val = kl_alloc(kl, (size_t)kl->n * kb, false);
	acc = kl_alloc(kl, (size_t)kl->n * kb, false);
	if (kl->stamp)
		st = kl_alloc(kl, (size_t)kl->n * 4, false);
	if (!k || !val || !acc || (kl->stamp && !st)) {
		kl_keys_put(k);
		kl_free(val);
		kl_free(acc);
		kl_free(st);
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
	kl_keys_put(kl->keys);
	kl_keys_put(kl->keys2);
	kl_vals_free(kl->val, kl->val_blk);
	kl_vals_free(kl->acc, kl->acc_blk);
	kl_free(kl->stamp);
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
	src->packed = blk && kl_keys_lazy(k);
	if (src->packed) {
		struct kl_keyhdr *h = kl_hdr(k);

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
	kl_store_ready(kl);
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
	uint64_t tot = kl->n + nnew, addel = 0, i, j = 0, k = 0, e = 0;
	bool uni = kl->ulen || !kl->n;
	uint32_t ulen = kl->n ? kl->ulen : psd_kl_len_of(l, 0);
	uint64_t *keys, *offs = NULL, *acc_blk = NULL;
	uint32_t *lens = NULL, *stamp = NULL;
	uint8_t *val, *acc;
	unsigned es = kl->esize;
	/* The first list into an empty store, in a buffer of its own: its
	 * keys become the key array and (one length, aligned values) its
	 * values the open step's sums, without a copy -- fresh pages for a
	 * copy cost as much as the copy itself. */
	bool adopt = l->own && !kl->n && nnew == l->n;
	bool adopt_acc = adopt && l->ulen && !kl->full && !kl->partial &&
			 !((uintptr_t)l->vals % (es < 8 ? es : 8));
	bool fuse = kl->n && nnew == l->n && kl->full && !kl->partial;
	/* nothing committed yet: every value is 0, as the new array */
	bool vcopy = kl->version != 0;
	uint64_t lo = 0; /* value bytes of @l before key i */
	int ret;
	/* @l's keys become the second run: no merged key array */
	bool run2 = fuse && !vcopy && l->own && !kl->keys2 && !kl->stamp &&
		    kl->ulen && !l->lens && l->ulen == kl->ulen;

	if (!run2) {
		ret = kl_flatten(kl);
		if (ret)
			return ret;
		/* merged key by key below (an adopted list's keys are not
		 * read; the second run's walk reads packed keys as they are) */
		kl_store_ready(kl);
		if (!adopt)
			psd_kl_list_ready(l);
	}

	if (!l->lens && nnew == l->n) { /* no pass over millions of keys */
		addel = l->n * l->ulen;
		uni = uni && l->ulen == ulen;
	} else {
		for (i = 0; i < l->n; i++)
			if (nnew == l->n || kl->idx[i] == KL_NONE) {
				addel += psd_kl_len_of(l, i);
				if (psd_kl_len_of(l, i) != ulen)
					uni = false;
			}
	}
	if (tot >= KL_NONE)
		return -E2BIG;
	keys = adopt  ? kl_keys_get((uint64_t *)(uintptr_t)l->keys)
	       : run2 ? NULL
		      : kl_keys_alloc(kl, tot);
	val = kl_alloc(kl, (size_t)((kl->nelem + addel) * es), true);
	if (adopt_acc) {
		acc = (uint8_t *)(uintptr_t)l->vals;
		acc_blk = kl_keys_get((uint64_t *)(uintptr_t)l->keys);
	} else {
		acc = kl_alloc(kl, (size_t)((kl->nelem + addel) * es), true);
		/* every sum is written by this push or the merge below */
		if (acc)
			psd_big_populate(acc, (kl->nelem + addel) * es);
	}
	if (!uni) {
		lens = kl_alloc(kl, (size_t)tot * 4, false);
		offs = kl_alloc(kl, (size_t)tot * 8, false);
	}
	if (kl->stamp)
		stamp = kl_alloc(kl, (size_t)tot * 4, true);
	if ((!keys && !run2) || !val || !acc || (!uni && (!lens || !offs)) ||
	    (kl->stamp && !stamp)) {
		ret = -ENOMEM;
		goto err_free;
	}
	/* Every key new and after the stored ones (an empty store, say):
	 * append, no merge. */
	if (nnew == l->n &&
	    (!kl->n || kl_lkey_at(l, 0) > kl_key_at(kl->keys, kl->n - 1))) {
		if (kl->n) {
			if (keys)
				memcpy(keys, kl->keys, (size_t)kl->n * 8);
			if (vcopy)
				memcpy(val, kl->val, (size_t)(kl->nelem * es));
			memcpy(acc, kl->acc, (size_t)(kl->nelem * es));
		}
		if (fuse)
			memcpy(acc + kl->nelem * es, l->vals, (size_t)l->bytes);
		if (!adopt && keys)
			memcpy(keys + kl->n, l->keys, (size_t)l->n * 8);
		if (stamp)
			memcpy(stamp, kl->stamp, (size_t)kl->n * 4);
		k = kl->n;
		e = kl->nelem;
		if (!uni) {
			for (j = 0; j < kl->n; j++) {
				lens[j] = psd_kl_slen(kl, j);
				offs[j] = psd_kl_soff(kl, j);
			}
			for (i = 0; i < l->n; i++, k++) {
				lens[k] = psd_kl_len_of(l, i);
				offs[k] = e;
				e += lens[k];
			}
		} else {
			k += l->n;
			e += addel;
		}
		goto done;
	}
	if (run2) {
		/* the sums stay run after run, the list's after the store's;
		 * a key of the list stored already (@nnew was a guess) is
		 * found by one walk through both runs' keys */
		if (!kl_run2_sums(kl, l, acc, (size_t)ulen * es))
			goto err_stored;
		k = tot;
		e = kl->nelem + addel;
		goto done;
	}
	/* One 4-byte element per key, before and after: merge without a
	 * call per key. */
	if (uni && ulen == 1 && es == 4 && (!kl->n || kl->ulen == 1)) {
		const uint32_t *ov = (const uint32_t *)(const void *)kl->val;
		const uint32_t *oa = (const uint32_t *)(const void *)kl->acc;
		const uint32_t *lv = (const uint32_t *)(const void *)l->vals;
		uint32_t *nv = (uint32_t *)(void *)val;
		uint32_t *na = (uint32_t *)(void *)acc;

		i = 0;
		while (i < l->n || j < kl->n) {
			if (j < kl->n &&
			    (i >= l->n || kl->keys[j] <= l->keys[i])) {
				if (i < l->n && kl->keys[j] == l->keys[i]) {
					if (nnew == l->n)
						goto err_stored;
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
		e = k;
		goto done;
	}
	/* merge: i over the list, j over the store, k out, e elements */
	i = 0;
	while (i < l->n || j < kl->n) {
		bool old =
			j < kl->n && (i >= l->n || kl->keys[j] <= l->keys[i]);
		uint32_t len;

		if (old) {
			if (i < l->n && kl->keys[j] == l->keys[i]) {
				if (nnew == l->n)
					goto err_stored;
				i++; /* stored already */
			}
			len = psd_kl_slen(kl, j);
			keys[k] = kl->keys[j];
			if (vcopy)
				memcpy(val + e * es,
				       kl->val + psd_kl_soff(kl, j) * es,
				       (size_t)len * es);
			memcpy(acc + e * es, kl->acc + psd_kl_soff(kl, j) * es,
			       (size_t)len * es);
			if (stamp)
				stamp[k] = kl->stamp[j];
			j++;
		} else {
			len = psd_kl_len_of(l, i);
			if (fuse)
				memcpy(acc + e * es, l->vals + lo,
				       (size_t)len * es);
			lo += (uint64_t)len * es;
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
	if (run2) {
		kl->keys2 = kl_keys_get((uint64_t *)(uintptr_t)l->keys);
		kl->n2 = l->n;
	} else {
		kl_keys_put(kl->keys);
		kl->keys = keys;
	}
	kl_vals_free(kl->val, kl->val_blk);
	kl_vals_free(kl->acc, kl->acc_blk);
	kl->val_blk = NULL;
	kl->acc_blk = acc_blk;
	kl_free(kl->lens);
	kl_free(kl->offs);
	kl_free(kl->stamp);
	kl->val = val;
	kl->acc = acc;
	kl->lens = lens;
	kl->offs = offs;
	kl->stamp = stamp;
	kl->ulen = uni ? ulen : 0;
	kl->n = tot;
	kl->nelem = e;
	kl->gen++;
	if (fuse)
		kl->full++; /* every key's sum has this step's pushes */
	atomic_fetch_add(&s->stored_bytes, addel * es);
	atomic_fetch_add(&s->alloc_bytes, addel * es * 2);
	return fuse ? 1 : 0;

err_stored:
	ret = -EEXIST; /* @nnew was a guess (psd_kl_insert_new()) */
err_free:
	kl_keys_put(keys);
	kl_free(val);
	kl_vals_free(acc, acc_blk);
	kl_free(lens);
	kl_free(offs);
	kl_free(stamp);
	return ret;
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
		uint64_t key = kl_lkey_at(l, (l->n - 1) * i / 15);

		if (kl_has(kl->keys, kl->n - kl->n2, key) ||
		    (kl->keys2 && kl_has(kl->keys2, kl->n2, key)))
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
		kl->stamp = kl_alloc(kl, (size_t)kl->n * 4, true);
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
