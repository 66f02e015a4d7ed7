// SPDX-License-Identifier: MIT
/*
 * Key lists on a server: the store (server/kvs_kl.h; the design is at the
 * top of kvs_keylist.c): sorted keys, values, per-step sums, the big
 * arrays and refcounted key arrays, the workers' tagged lists, lookups.
 * Inserting keys, adding a push and the commit are in kvs_klapply.c,
 * parsing a request in kvs_keylist.c.
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
 * as filling them).  Every one is freed with psd_kl_free(). */
void *psd_kl_alloc(const struct psd_kvs_kl *kl, size_t len, bool zero)
{
	return psd_big_alloc(len ? len : 1, kl->huge, zero);
}

void psd_kl_free(void *p)
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
 * form (psd_kl_key_at(), psd_kl_has(), the second run's walk). */

struct psd_kl_keyhdr *psd_kl_hdr(const uint64_t *k)
{
	return (struct psd_kl_keyhdr *)(void *)(uintptr_t)k - 1;
}

uint64_t *psd_kl_keys_alloc(const struct psd_kvs_kl *kl, uint64_t n)
{
	struct psd_kl_keyhdr *h =
		psd_kl_alloc(kl, sizeof(*h) + (size_t)n * 8, false);

	if (!h)
		return NULL;
	h->refs = 1;
	h->pk = NULL;
	return (uint64_t *)(void *)(h + 1);
}

uint64_t *psd_kl_keys_get(uint64_t *k)
{
	psd_kl_hdr(k)->refs++;
	return k;
}

void psd_kl_keys_put(uint64_t *k)
{
	struct psd_kl_keyhdr *h;

	if (!k)
		return;
	h = psd_kl_hdr(k);
	if (!--h->refs) {
		free(h->pk);
		psd_kl_free(h);
	}
}

/* Are the keys of block @k (NULL: none) still packed? */
bool psd_kl_keys_lazy(const uint64_t *k)
{
	return k && psd_kl_hdr(k)->pk;
}

bool psd_kl_keys_packed(const uint64_t *k)
{
	return psd_kl_keys_lazy(k);
}

/* Write block @k's keys out if they are still packed. */
static void kl_keys_ready(const uint64_t *k)
{
	struct psd_kl_keyhdr *h;
	const char *why = "";

	if (!psd_kl_keys_lazy(k))
		return;
	h = psd_kl_hdr(k);
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
void psd_kl_store_ready(const struct psd_kvs_kl *kl)
{
	kl_keys_ready(kl->keys);
	kl_keys_ready(kl->keys2);
}

/* Key @i of block @k, packed or not. */
uint64_t psd_kl_key_at(const uint64_t *k, uint64_t i)
{
	uint64_t blk[PSD_KLPACK_BLK];
	struct psd_klpack_rd rd;
	struct psd_kl_keyhdr *h;
	const char *why;

	if (!psd_kl_keys_lazy(k))
		return k[i];
	h = psd_kl_hdr(k);
	if (psd_klpack_rd_init(&rd, h->pk, h->pklen, h->pkn, &why))
		return 0; /* checked on arrival: not reached */
	psd_klpack_rd_seek(&rd, i / PSD_KLPACK_BLK);
	psd_klpack_rd_next(&rd, blk);
	return blk[i % PSD_KLPACK_BLK];
}

/* Key @i of list @l, packed or not (only a key block may be packed). */
uint64_t psd_kl_lkey_at(const struct psd_kl_list *l, uint64_t i)
{
	return l->own || l->blk ? psd_kl_key_at(l->keys, i) : l->keys[i];
}

/* Is @key among the @n keys of block @k, packed or not? */
bool psd_kl_has(const uint64_t *k, uint64_t n, uint64_t key)
{
	uint64_t blk[PSD_KLPACK_BLK], lo = 0, hi, got, j;
	struct psd_klpack_rd rd;
	struct psd_kl_keyhdr *h;
	const char *why;

	if (!n)
		return false;
	if (!psd_kl_keys_lazy(k)) {
		j = psd_kl_lower(k, 0, n, key);
		return j < n && k[j] == key;
	}
	h = psd_kl_hdr(k);
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
	uint64_t *k = psd_kl_keys_alloc(kl, (len + 7) / 8);

	/* what is written next (received, keys unpacked), at once */
	if (k && from < len)
		psd_big_populate((uint8_t *)k + from, len - from);
	return k;
}

int psd_kl_own_lazy(const struct psd_hdr *h, void *own, struct psd_hdr *raw,
		    const char **why)
{
	uint64_t sec = psd_kl_packed_len(h);
	struct psd_kl_keyhdr *kh = psd_kl_hdr(own);
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
	psd_kl_keys_put(buf);
}

/* Free value array @p, which lies in key block @blk when adopted. */
void psd_kl_vals_free(uint8_t *p, uint64_t *blk)
{
	if (blk)
		psd_kl_keys_put(blk);
	else
		psd_kl_free(p);
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
	psd_kl_keys_put(kl->keys);
	psd_kl_keys_put(kl->keys2);
	psd_kl_free(kl->lens);
	psd_kl_free(kl->offs);
	psd_kl_vals_free(kl->val, kl->val_blk);
	psd_kl_vals_free(kl->acc, kl->acc_blk);
	psd_kl_free(kl->stamp);
	for (unsigned w = 0; w < s->nworker; w++) {
		psd_kl_keys_put(kl->wc[w].keys);
		psd_kl_free(kl->wc[w].lens);
		psd_kl_free(kl->wc[w].idx);
	}
	free(kl->wc);
	free(kl->have);
	psd_kl_free(kl->idx);
	psd_kl_free(kl->out);
	psd_kl_free(kl->ukeys);
	psd_kl_free(kl->pk);
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
	k = share    ? psd_kl_keys_get(kl->keys)
	    : l->own ? psd_kl_keys_get((uint64_t *)(uintptr_t)l->keys)
		     : psd_kl_keys_alloc(kl, l->n);
	ln = l->lens ? psd_kl_alloc(kl, (size_t)l->n * 4, false) : NULL;
	psd_kl_keys_put(wc->keys);
	psd_kl_free(wc->lens);
	psd_kl_free(wc->idx);
	memset(wc, 0, sizeof(*wc));
	if (!k || (l->lens && !ln)) {
		psd_kl_keys_put(k);
		psd_kl_free(ln);
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
	p = psd_kl_alloc(kl, (size_t)(n * esize), false);
	if (!p)
		return NULL;
	psd_kl_free(buf);
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
	psd_kl_store_ready(kl);
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
	if (psd_kl_lkey_at(l, 0) != psd_kl_key_at(kl->keys, 0))
		return false;
	if (l->keys != kl->keys) {
		psd_kl_store_ready(kl);
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
