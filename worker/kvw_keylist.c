// SPDX-License-Identifier: MIT
/*
 * KV worker: key lists (psched_request() of PSCHED_FAMILY_KEYLIST,
 * include/psched.h; wire format in common/wire.h, PSD_F_KEYLIST).
 *
 * A key list is checked (sorted, distinct, lengths) and cut into one
 * slice per server in a single pass over the keys, without copying them:
 * server s owns the keys in [s * 2^64 / S, (s + 1) * 2^64 / S), so its
 * slice is a contiguous run of the caller's keys, lengths and values, and
 * one chunk per server sends them as they are (up to three iovecs).  The
 * chunks then go through the worker's queue and credit like any other
 * (kvw.h), and a pull answer lands straight in the caller's buffer.
 *
 * A push goes to every server, even with an empty slice: a server counts
 * each worker's key-list steps by these messages (server/kvs_keylist.c).
 * A pull asks only the servers that own some of its keys.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "kvw.h"
#include "klpack.h"

/* One server's slice of a list. */
struct kvw_kl_cut {
	uint64_t first; /* key index */
	uint64_t n;
	uint64_t off; /* value bytes before it */
	uint64_t bytes;
};

/*
 * A list's keys packed per server slice (common/klpack.h): what a
 * request sends instead of its 8-byte keys (PSD_F_KLPACKED) where that
 * halves them at least, and what the cache compares the next list with.
 * Packed once, on the caller's thread before the request is queued, and
 * shared: the cache holds one reference, each request sending from it
 * another (dropped when the request is freed).  Only the cache's holder
 * (under mu) takes references, so a set whose count is 1 is the cache's
 * alone and is packed over in place: its buffers, already faulted in,
 * are reused while lists fit.
 */
struct kvw_klslice {
	struct psd_klpack pk;
	bool wire; /* send pk rather than the keys */
};

struct kvw_klset {
	atomic_uint refs;
	unsigned nsrv;
	struct kvw_klslice sl[]; /* [nsrv], by server rank */
};

/*
 * The last key list this worker sent, its tag, and the tag each server
 * holds (wire.h, PSD_F_KLCACHED): a request with the same keys and
 * lengths reuses the tag, and a server that has it gets no keys again.
 * The keys are kept packed (set; a plain copy of a new 10 M-key list was
 * 80 MB of fresh pages).  With PS_KEYLIST_PACK the set is made before
 * the request is queued (its slices travel); without, while the request
 * is on its way: the caller compares and picks the tag under mu (not
 * w->lock, which the sender and receive threads need), queues the
 * request, then packs and only then drops mu.  srv_tag and nsrv are
 * under w->lock; the rest under mu.  With the cache off (PS_KEYLIST_CACHE
 * =0) and packing on this holds only the set, reused for the next list.
 */
struct kvw_klcache {
	pthread_mutex_t mu;
	bool cache;	   /* PS_KEYLIST_CACHE: tags */
	bool pack;	   /* PS_KEYLIST_PACK: packed keys on the wire */
	uint32_t next_tag; /* the tag of the cached list when valid */
	uint32_t ulen;
	bool valid; /* set/lens hold the list of tag */
	size_t n;
	struct kvw_klset *set;
	uint32_t *lens; /* when ulen is 0 */
	size_t lens_cap;
	bool huge; /* PS_KEYLIST_HUGEPAGES: keys and lens psd_big_alloc'd so */
	uint32_t *srv_tag; /* [num_server]: the tag the server holds */
	unsigned nsrv;
};

/* Drop a hold on @set (NULL is a no-op). */
static void kvw_klset_put(struct kvw_klset *set)
{
	if (!set || atomic_fetch_sub(&set->refs, 1) != 1)
		return;
	for (unsigned s = 0; s < set->nsrv; s++)
		psd_klpack_free(&set->sl[s].pk);
	free(set);
}

void psd_kvw_kl_fini(struct psd_kvw *w)
{
	struct kvw_klcache *c = w->klc;

	if (!c)
		return;
	pthread_mutex_destroy(&c->mu);
	kvw_klset_put(c->set);
	psd_big_free(c->lens);
	free(c->srv_tag);
	free(c);
	w->klc = NULL;
}

/* The cache, made on first use (NULL: cache and packing off, or no
 * memory; lists then always carry their plain keys). */
static struct kvw_klcache *kvw_klc_get(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_klcache *c;

	if (!n->cfg.keylist_cache && !n->cfg.keylist_pack)
		return NULL;
	pthread_mutex_lock(&w->lock);
	c = w->klc;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		c->srv_tag = calloc(n->num_server ? n->num_server : 1,
				    sizeof(*c->srv_tag));
		if (!c->srv_tag || pthread_mutex_init(&c->mu, NULL)) {
			free(c->srv_tag);
			free(c);
			c = NULL;
		} else {
			c->nsrv = n->num_server;
			c->huge = n->cfg.keylist_hugepages != 0;
			c->cache = n->cfg.keylist_cache != 0;
			c->pack = n->cfg.keylist_pack != 0;
			w->klc = c;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return c;
}

/* mu held.  A set the cache alone holds, to pack the next list into:
 * the last one when no request holds it any more, else a new one. */
static struct kvw_klset *kvw_klset_fresh(struct kvw_klcache *c)
{
	struct kvw_klset *set = c->set;
	unsigned s;

	if (set && atomic_load(&set->refs) == 1)
		return set;
	kvw_klset_put(set);
	c->set = set = calloc(1, sizeof(*set) + c->nsrv * sizeof(set->sl[0]));
	if (!set)
		return NULL;
	atomic_init(&set->refs, 1);
	set->nsrv = c->nsrv;
	for (s = 0; s < c->nsrv; s++)
		set->sl[s].pk.huge = c->huge;
	return set;
}

/* mu held.  Pack list @keys cut as @cut into a set of the cache's; a
 * slice travels packed (@wire) when that takes at most half its keys'
 * bytes.  *@sorted: every slice was found strictly ascending on the way
 * (so is the list: see kvw_kl_sorted()).  The set, or NULL (no memory:
 * nothing packed, the cache invalid, *@sorted false). */
static struct kvw_klset *kvw_kl_pack(struct kvw_klcache *c,
				     const uint64_t *keys,
				     const struct kvw_kl_cut *cut, bool wire,
				     bool *sorted)
{
	struct kvw_klset *set = kvw_klset_fresh(c);
	unsigned s;
	int ret;

	c->valid = false;
	*sorted = false;
	if (!set)
		return NULL;
	*sorted = true;
	for (s = 0; s < set->nsrv; s++) {
		struct kvw_klslice *sl = &set->sl[s];
		uint64_t half = cut[s].n * 4;

		/* the cache needs every slice; the wire only small ones */
		ret = psd_klpack_set(&sl->pk, keys + cut[s].first, cut[s].n,
				     c->cache ? UINT64_MAX : half);
		sl->wire = wire && !ret && cut[s].n && sl->pk.len <= half;
		*sorted = *sorted && sl->pk.sorted;
		if (ret < 0) {
			for (s = 0; s < set->nsrv; s++)
				set->sl[s].wire = false;
			*sorted = false;
			return NULL;
		}
	}
	return set;
}

/* mu held.  Is list @keys/@lens/@ulen, cut as @cut, the cached one? */
static bool kvw_kl_is_cached(const struct kvw_klcache *c, size_t nkeys,
			     const uint64_t *keys, const uint32_t *lens,
			     uint32_t ulen, const struct kvw_kl_cut *cut)
{
	unsigned s;

	if (!c->cache || !c->valid || c->n != nkeys || c->ulen != ulen ||
	    !c->set)
		return false;
	for (s = 0; s < c->set->nsrv; s++)
		if (!psd_klpack_equal(&c->set->sl[s].pk, keys + cut[s].first,
				      cut[s].n))
			return false;
	return ulen || !memcmp(c->lens, lens, nkeys * 4);
}

/* mu held.  The tag of list @keys/@lens/@ulen (0 with the cache off)
 * and the packed set its request sends from (a reference for it, or
 * NULL): the cached ones when the list is the cached list, else new ones
 * (*@copy true: kvw_kl_copy() once the request is queued).  *@sorted:
 * the slices are known strictly ascending (the cached list, which was
 * checked, or found so while packing); false: not known. */
static uint32_t kvw_kl_tag(struct kvw_klcache *c, size_t nkeys,
			   const uint64_t *keys, const uint32_t *lens,
			   uint32_t ulen, const struct kvw_kl_cut *cut,
			   struct kvw_klset **set, bool *copy, bool *sorted)
{
	uint32_t tag = 0;

	*copy = false;
	*set = NULL;
	*sorted = false;
	if (kvw_kl_is_cached(c, nkeys, keys, lens, ulen, cut)) {
		tag = c->next_tag;
		*set = c->pack ? c->set : NULL;
		*sorted = true;
	} else {
		c->valid = false;
		if (c->cache) {
			if (!++c->next_tag)
				c->next_tag = 1;
			tag = c->next_tag;
			*copy = true;
		}
		/* packed now: the request sends it */
		if (c->pack) {
			*set = kvw_kl_pack(c, keys, cut, true, sorted);
			*copy = *copy && *set; /* no memory: not cached */
		}
	}
	if (*set)
		atomic_fetch_add(&(*set)->refs, 1);
	return tag;
}

/* mu held.  Keep list @keys/@lens/@ulen as the list of the tag just
 * picked (packed already with PS_KEYLIST_PACK); without memory the cache
 * stays invalid (the next request sends its keys under a new tag). */
static void kvw_kl_copy(struct kvw_klcache *c, size_t nkeys,
			const uint64_t *keys, const uint32_t *lens,
			uint32_t ulen, const struct kvw_kl_cut *cut)
{
	bool sorted;

	if (!ulen && nkeys > c->lens_cap) {
		psd_big_free(c->lens);
		c->lens = psd_big_alloc(nkeys * 4, c->huge, false);
		c->lens_cap = c->lens ? nkeys : 0;
	}
	if (!ulen && !c->lens)
		return;
	if (!c->pack && !kvw_kl_pack(c, keys, cut, false, &sorted))
		return;
	if (!ulen)
		memcpy(c->lens, lens, nkeys * 4);
	c->n = nkeys;
	c->ulen = ulen;
	c->valid = true;
}

/*
 * Unlocked.  Are the keys strictly ascending?  One pass over 8 bytes a
 * key, which for 10 M keys took about as long as packing them, so it is
 * skipped when the pack's first pass found every slice ascending, or the
 * list is the cached one.  The borders between slices need no look then:
 * kvw_kl_cut()'s binary search ends at an index i with keys[i - 1] below
 * the server's first key and keys[i] at or above it (each bound is set by
 * a probe at that very index), so keys[i - 1] < keys[i].  0 or -EINVAL
 * with psched_errmsg() set.
 */
static int kvw_kl_sorted(size_t nkeys, const uint64_t *keys)
{
	uint64_t bad = 0;
	size_t i;

	for (i = 1; i < nkeys; i++)
		bad |= keys[i] <= keys[i - 1];
	if (!bad)
		return 0;
	for (i = 1; keys[i] > keys[i - 1]; i++)
		;
	return psd_set_errmsg(-EINVAL,
			      "key list: keys must be sorted ascending "
			      "without duplicates, but key %zu (%llu) "
			      "follows %llu",
			      i, (unsigned long long)keys[i],
			      (unsigned long long)keys[i - 1]);
}

/*
 * Unlocked.  Cut the list per server (binary searches; on a list that
 * is not sorted they still give borders in order, as a lower bound never
 * falls for a larger key, and kvw_kl_sorted() refuses the list after); *@ulen
 * is the common length of every key (0 if they differ).  The length
 * checks are branch-free loops (vectorised): this runs on the caller's
 * thread for lists of millions of keys.  0 or -EINVAL / -E2BIG with
 * psched_errmsg() set.
 */
static int kvw_kl_cut(size_t nkeys, const uint64_t *keys, const uint32_t *lens,
		      uint32_t len, unsigned esize, unsigned nserver,
		      struct kvw_kl_cut *cut, uint32_t *ulen)
{
	uint64_t off = 0, sum;
	uint32_t zero, diff;
	size_t i, lo;
	unsigned s;

	*ulen = lens ? (nkeys ? lens[0] : 1) : len;
	for (s = 0; s < nserver; s++) {
		cut[s].first = s ? psd_kl_lower(keys, 0, nkeys,
						(uint64_t)(((unsigned __int128)s
							    << 64) /
							   nserver))
				 : 0;
		if (s)
			cut[s - 1].n = cut[s].first - cut[s - 1].first;
	}
	cut[nserver - 1].n = nkeys - cut[nserver - 1].first;
	for (s = 0; s < nserver; s++) {
		lo = cut[s].first;
		cut[s].off = off;
		if (!lens) {
			sum = cut[s].n * len;
		} else {
			sum = 0;
			zero = 0;
			diff = 0;
			for (i = lo; i < lo + cut[s].n; i++) {
				sum += lens[i];
				zero |= lens[i] == 0;
				diff |= lens[i] ^ *ulen;
			}
			if (diff)
				*ulen = 0;
			if (zero) {
				for (i = lo; lens[i]; i++)
					;
				return psd_set_errmsg(
					-EINVAL,
					"key list: key %llu (index %zu) has "
					"length 0",
					(unsigned long long)keys[i], i);
			}
		}
		if (sum > (UINT64_MAX - off) / esize)
			return psd_set_errmsg(-E2BIG,
					      "key list: values overflow");
		cut[s].bytes = sum * esize;
		off += cut[s].bytes;
	}
	return 0;
}

/* Locked.  ->hdr: a slice's keys (plain, packed or cached), lengths and
 * values. */
static void kvw_kl_hdr(const struct psched_node *n, const struct kvw_chunk *ch,
		       struct psd_hdr *h, struct iovec *iov, int *niov)
{
	const struct kvw_req *r = ch->req;
	struct kvw_klcache *c = kvw_of(n)->klc;
	const struct kvw_klslice *sl;
	bool cached = false;
	int k = 0;

	/* Only the sender thread sends key-list chunks, in the order their
	 * headers are made here: a server has a tag from the first chunk
	 * that carried its keys on. */
	if (r->kl_tag && ch->kl_n && c && ch->srank < c->nsrv) {
		cached = c->srv_tag[ch->srank] == r->kl_tag;
		c->srv_tag[ch->srank] = r->kl_tag;
	}
	psd_kvw_hdr_base(n, ch, h);
	h->key = ch->kl_n ? r->kl_keys[ch->kl_first] : 0;
	h->total = ch->span;
	h->offset = r->kl_len;
	h->part = ch->kl_n;
	h->epoch = ch->kl_n ? r->kl_tag : 0;
	if (cached)
		h->flags |= PSD_F_KLCACHED;
	sl = ch->kl_n && !cached && r->kl_set && ch->srank < r->kl_set->nsrv
		     ? &r->kl_set->sl[ch->srank]
		     : NULL;
	if (sl && sl->wire && sl->pk.n == ch->kl_n) {
		h->flags |= PSD_F_KLPACKED;
		psd_iov_add(iov, &k, sl->pk.buf, sl->pk.len);
	} else if (ch->kl_n && !cached) {
		psd_iov_add(iov, &k, r->kl_keys + ch->kl_first, ch->kl_n * 8);
	}
	if (ch->kl_n && !r->kl_len && !cached)
		psd_iov_add(iov, &k, r->kl_lens + ch->kl_first, ch->kl_n * 4);
	if (kvw_is_push(r->type) && ch->span)
		psd_iov_add(iov, &k, r->slots[0].src + ch->off, ch->span);
	h->length = psd_iov_len(iov, k);
	*niov = k;
}

/* Locked.  A request of the chunks @cut asks for. */
static int kvw_kl_req_make(struct psched_node *n, uint8_t type,
			   const struct kvw_kl_cut *cut, struct kvw_req **out)
{
	bool push = kvw_is_push(type);
	struct kvw_req *r;
	size_t nch = 0;
	unsigned s;

	for (s = 0; s < n->num_server; s++)
		nch += push || cut[s].n;
	r = psd_kvw_req_alloc(n, &psd_kvw_keylist, type, 1, PSCHED_F32);
	if (r && nch && !(r->chunks = calloc(nch, sizeof(*r->chunks)))) {
		psd_kvw_req_free(r);
		r = NULL;
	}
	if (!r)
		return psd_set_errmsg(-ENOMEM, "no memory for a key list");
	r->nchunks = nch;
	nch = 0;
	for (s = 0; s < n->num_server; s++) {
		struct kvw_chunk *ch;

		if (!push && !cut[s].n)
			continue;
		ch = &r->chunks[nch++];
		ch->req = r;
		ch->srank = (uint16_t)s;
		ch->off = cut[s].off;
		ch->span = cut[s].bytes;
		ch->kl_first = cut[s].first;
		ch->kl_n = cut[s].n;
		/* credit counts the bytes a push sends */
		ch->node.len = push ? cut[s].bytes : 0;
		r->srv[s].pending++;
	}
	*out = r;
	return 0;
}

/* Locked.  What request @r of @nkeys keys sends and receives. */
static void kvw_kl_req_set(struct psd_kvw *w, struct kvw_req *r, size_t nkeys,
			   const uint64_t *keys, const uint32_t *lens,
			   const void *push_vals, void *pull_vals,
			   enum psched_dtype dtype, uint64_t total)
{
	r->kl_keys = keys;
	r->kl_lens = lens;
	r->dtype = (uint8_t)dtype;
	r->flags = PSD_F_KEYLIST;
	r->slots[0].key = nkeys ? keys[0] : 0;
	r->slots[0].total = total;
	r->slots[0].src = push_vals;
	r->slots[0].dst = pull_vals;
	/* w->kl_step advances once the request is issued */
	r->slots[0].step = w->kl_step + (kvw_is_push(r->type) ? 1 : 0);
}

/* Unlocked.  Check, cut, register and queue one key-list request. */
int psd_kvw_kl_issue(struct psched_node *n, uint8_t type, size_t nkeys,
		     const uint64_t *keys, const uint32_t *lens, uint32_t len,
		     const void *push_vals, void *pull_vals,
		     enum psched_dtype dtype, int priority, psched_done_fn *cb,
		     void *arg, uint64_t *req)
{
	struct kvw_klcache *c = NULL;
	struct kvw_klset *set = NULL;
	struct kvw_req *r = NULL;
	struct kvw_kl_cut *cut;
	bool fire = false, copy = false, sorted = false;
	uint32_t ulen, tag = 0;
	int ret;

	ret = psd_kvw_issue_check(n, cb, req);
	if (ret)
		return ret;
	if ((unsigned)dtype > PSCHED_DTYPE_MAX)
		return psd_set_errmsg(-EINVAL, "key list: unknown dtype %d",
				      (int)dtype);
	if (nkeys &&
	    (!keys || (!lens && !len) || (kvw_is_push(type) && !push_vals) ||
	     (type != PSD_MSG_PUSH && !pull_vals)))
		return psd_set_errmsg(-EINVAL,
				      "key list of %zu keys: keys, values and "
				      "lens (or len) are needed",
				      nkeys);
	cut = calloc(n->num_server ? n->num_server : 1, sizeof(*cut));
	if (!cut)
		return psd_set_errmsg(-ENOMEM, "no memory for a key list");
	ret = kvw_kl_cut(nkeys, keys, lens, len, psched_dtype_size(dtype),
			 n->num_server, cut, &ulen);
	c = !ret && nkeys ? kvw_klc_get(n) : NULL;
	if (c) {
		pthread_mutex_lock(&c->mu);
		tag = kvw_kl_tag(c, nkeys, keys, lens, ulen, cut, &set, &copy,
				 &sorted);
	}
	if (!ret && !sorted)
		ret = kvw_kl_sorted(nkeys, keys);
	if (!ret) {
		struct psd_kvw *w = kvw_of(n);

		pthread_mutex_lock(&w->lock);
		ret = psd_kvw_fatal(n);
		if (!ret)
			ret = kvw_kl_req_make(n, type, cut, &r);
		if (!ret) {
			kvw_kl_req_set(w, r, nkeys, keys, lens, push_vals,
				       pull_vals, dtype,
				       cut[n->num_server - 1].off +
					       cut[n->num_server - 1].bytes);
			r->kl_len = ulen;
			r->kl_tag = tag;
			r->kl_set = set; /* @r holds it now */
			set = NULL;
			ret = psd_kvw_req_issue_unlocks(n, r, priority, cb, arg,
							req, &fire);
			w->kl_step += !ret && kvw_is_push(type);
		}
		pthread_mutex_unlock(&w->lock);
	}
	/* The request is on its way; the caller's keys stay valid until it
	 * completes, so the copy is made meanwhile. */
	if (!ret && copy)
		kvw_kl_copy(c, nkeys, keys, lens, ulen, cut);
	if (c)
		pthread_mutex_unlock(&c->mu);
	kvw_klset_put(set);
	free(cut);
	if (fire)
		psd_kvw_req_run_cb(kvw_of(n), r);
	return ret;
}

/* Locked.  ->rx_dst: a pull answer lands in the caller's values at its
 * slice. */
static void *kvw_kl_rx_dst(struct kvw_req *r, const struct kvw_chunk *ch,
			   const struct psd_hdr *h, const struct psd_conn *c)
{
	(void)h;
	(void)c;
	return r->slots[0].dst ? r->slots[0].dst + ch->off : NULL;
}

static void kvw_kl_free(struct kvw_req *r)
{
	kvw_klset_put(r->kl_set);
}

const struct kvw_family psd_kvw_keylist = {
	.what = "key-list ",
	.flag = PSD_F_KEYLIST,
	.hdr = kvw_kl_hdr,
	.rx_dst = kvw_kl_rx_dst,
	.free = kvw_kl_free,
};
