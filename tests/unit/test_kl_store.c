// SPDX-License-Identifier: MIT
/*
 * The key-list store (server/kvs_klstore.c, kvs_klapply.c) driven directly, as
 * server/kvs_keylist.c's kl_push() drives it: lists of several workers
 * over several steps against a model of the sums, for the paths that
 * build the store -- the first list adopted from its receive buffer, new
 * keys merged into a step whose pushes so far named the whole store
 * (psd_kl_insert() adds the list as it merges and returns 1), appended
 * keys, per-key lengths, 8-byte elements -- each with the big arrays in
 * huge pages and not, and with huge-page mappings failing
 * (common/bigmem.c falls back to malloc).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "../harness.h"
#include "bigmem.h"
#include "klpack.h"
#include "node.h"
#include "../../server/kvs_kl.h"

#define KST_MAXW 3

struct kst {
	struct psched_node node;
	struct psd_kvs s;
	struct psd_kvs_kl *kl;
	unsigned fused; /* psd_kl_insert() calls that added the list too */
	unsigned runs;	/* lists added as one of the store's runs */
};

static void kst_start(struct kst *t, unsigned nworker, bool huge)
{
	memset(t, 0, sizeof(*t));
	t->s.nworker = nworker;
	t->s.kl_hugepages = huge;
	t->node.role_state = &t->s;
	t->kl = psd_kl_get(&t->node);
	CHECK(t->kl != NULL);
}

static void kst_stop(struct kst *t)
{
	psd_kvs_kl_free(&t->s);
}

/* A list of @n keys key(i) = i * @stride + @first, element size @es,
 * lengths @lens (NULL: @ulen each), values from @vals; in a receive
 * buffer of the store's own (psd_kl_rxbuf()) when @own.  The buffer
 * holding keys, lengths and values is returned in *@buf. */
static struct psd_kl_list kst_list(struct kst *t, uint64_t n, uint64_t stride,
				   uint64_t first, uint32_t ulen,
				   const uint32_t *lens, unsigned es,
				   const uint8_t *vals, bool own, void **buf)
{
	struct psd_kl_list l = { 0 };
	uint64_t i, bytes = 0, len;
	uint8_t *p;

	for (i = 0; i < n; i++)
		bytes += (lens ? lens[i] : ulen) * (uint64_t)es;
	len = n * (lens ? 12 : 8) + bytes;
	p = own ? psd_kl_rxbuf(t->kl, len, 0) : malloc(len ? len : 1);
	CHECK(p != NULL);
	for (i = 0; i < n; i++)
		((uint64_t *)(void *)p)[i] = i * stride + first;
	if (lens)
		memcpy(p + n * 8, lens, n * 4);
	memcpy(p + n * (lens ? 12 : 8), vals, bytes);
	l.n = n;
	l.keys = (const uint64_t *)(void *)p;
	l.lens = lens ? (const uint32_t *)(void *)(p + n * 8) : NULL;
	l.ulen = lens ? 0 : ulen;
	l.vals = p + n * (lens ? 12 : 8);
	l.bytes = bytes;
	l.own = own;
	*buf = p;
	return l;
}

static void kst_list_free(void *buf, bool own)
{
	if (own)
		psd_kl_rxbuf_put(buf);
	else
		free(buf);
}

/* What kl_push() does with a checked push of the open step. */
static void kst_push(struct kst *t, const struct psd_kl_list *lp, uint8_t dtype)
{
	struct psd_kvs_kl *kl = t->kl;
	struct psd_kl_list l = *lp;
	uint64_t nnew = 0, bad = 0, base = 0;
	const uint32_t *idx = NULL;
	bool whole, added = false, run = false;
	int ret = 0;

	if (!kl->has_dtype && l.n) {
		kl->has_dtype = true;
		kl->dtype = dtype;
		kl->esize = psched_dtype_size(dtype);
	}
	whole = psd_kl_is_whole(kl, &l);
	if (!kl->n) {
		nnew = l.n;
	} else if (!whole && psd_kl_run_of(kl, &l, &base)) {
		run = true;
		t->runs++;
	} else if (!whole) {
		ret = psd_kl_insert_new(&t->s, kl, &l);
		CHECK(ret == 0 || ret == 1);
		added = ret == 1;
		t->fused += added;
		ret = added ? 0 : psd_kl_slots(kl, &l, &idx, &nnew, &bad);
	}
	CHECK_EQ(ret, 0);
	if (nnew) {
		bool was_empty = !kl->n;

		ret = psd_kl_insert(&t->s, kl, &l, nnew);
		CHECK(ret == 0 || ret == 1);
		added = ret == 1;
		t->fused += added;
		whole = was_empty;
		if (!was_empty && !added) {
			CHECK_EQ(psd_kl_slots(kl, &l, &idx, &nnew, &bad), 0);
			whole = psd_kl_is_whole(kl, &l);
		}
	}
	if (run)
		CHECK_EQ(psd_kl_add_run(kl, &l, base), 0);
	else if (!added)
		CHECK_EQ(psd_kl_add(kl, &l, whole, idx), 0);
	kl->got++;
}

/* The stored value bytes of @key (NULL: not stored); its slot is its
 * rank in the first run, or the first run's length plus its rank in the
 * second. */
static const uint8_t *kst_val(const struct psd_kvs_kl *kl, uint64_t key,
			      uint32_t *len)
{
	uint64_t na = kl->n - kl->n2;
	uint64_t ja = psd_kl_lower(kl->keys, 0, na, key);
	uint64_t jb = psd_kl_lower(kl->keys2, 0, kl->n2, key);
	bool in = (ja < na && kl->keys[ja] == key) ||
		  (jb < kl->n2 && kl->keys2[jb] == key);

	if (!in)
		return NULL;
	uint64_t j = ja < na && kl->keys[ja] == key ? ja : na + jb;

	*len = psd_kl_slen(kl, j);
	return kl->val + psd_kl_soff(kl, j) * kl->esize;
}

/* Every key in [0, @nkeys) holds model[key] (float32, one element). */
static void kst_check_f32(const struct psd_kvs_kl *kl, const float *model,
			  const bool *stored, uint64_t nkeys)
{
	uint64_t k, wrong = 0, first = nkeys;
	uint32_t len;

	for (k = 0; k < nkeys; k++) {
		const uint8_t *v = kst_val(kl, k, &len);
		float f;

		if (!stored[k]) {
			wrong += v != NULL;
			continue;
		}
		if (!v || len != 1) {
			wrong++;
			continue;
		}
		memcpy(&f, v, 4);
		if (f != model[k] && first == nkeys)
			first = k;
		wrong += f != model[k];
	}
	if (first < nkeys)
		fprintf(stderr, "# key %llu: want %g\n",
			(unsigned long long)first, (double)model[first]);
	CHECK_U64(wrong, ==, 0);
}

/*
 * W workers, float32 one element per key, worker w owns keys
 * w, w + W, ... (interleaved, disjoint) -- ps-bench --keys-per-request's
 * shape.  Step 1 builds the store (worker 0's list adopted when @own,
 * the others merged in and added as they merge), steps 2 and 3 are
 * partial lists on the built store (step 3: the last worker pushes
 * nothing, its keys keep their values).
 */
static void kst_interleaved(unsigned nw, uint64_t per, bool own, bool huge)
{
	uint64_t nkeys = per * nw, i;
	float *model = calloc(nkeys, sizeof(float));
	bool *stored = calloc(nkeys, 1);
	float *v = malloc(per * sizeof(float));
	struct kst t;
	unsigned w, step;

	CHECK(model && stored && v);
	kst_start(&t, nw, huge);
	for (step = 1; step <= 3; step++) {
		for (w = 0; w < nw; w++) {
			struct psd_kl_list l;
			void *buf;
			uint64_t n = step == 3 && w == nw - 1 ? 0 : per;

			for (i = 0; i < n; i++) {
				v[i] = (float)(step * 1000 + w * 100 + i % 97);
				model[i * nw + w] = v[i];
				stored[i * nw + w] = true;
			}
			l = kst_list(&t, n, nw, w, 1, NULL, 4, (uint8_t *)v,
				     own && step == 1 && n, &buf);
			kst_push(&t, &l, PSCHED_F32);
			l.tag = step * 100 + w + 1;
			psd_kl_remember(t.kl, (int)w, &l, w == 0 && step == 1);
			if (n) /* an empty list is not kept */
				CHECK_INT(t.kl->wc[w].tag, ==, (int)l.tag);
			/* a list in its receive buffer is kept, not copied */
			if (l.own && w)
				CHECK(t.kl->wc[w].keys == l.keys);
			if (!l.own && n)
				CHECK(t.kl->wc[w].keys != l.keys);
			kst_list_free(buf, l.own);
		}
		psd_kl_commit(&t.s, t.kl);
		CHECK_U64(t.kl->version, ==, step);
		kst_check_f32(t.kl, model, stored, nkeys);
	}
	/* step 1's later workers went in with the merge */
	CHECK_INT(t.fused, ==, (int)nw - 1);
	/* 2 workers' own buffers: the second list's keys stayed a run of
	 * their own; a third list merged them into one array */
	CHECK(!t.kl->keys2 || (own && nw == 2));
	if (own && nw == 2)
		CHECK_U64(t.kl->n2, ==, per);
	kst_stop(&t);
	free(model);
	free(stored);
	free(v);
}

/*
 * The store as two runs (the first step's second list kept as keys2):
 * lookups of keys in either run and of missing ones, a length refused
 * in the second run, a whole-store list recognised through both runs and
 * remembered as a copy, then new keys added (the runs merged into one
 * array), values exact throughout.
 */
static void test_kl_store_two_runs(void)
{
	uint64_t per = 3000, nkeys = 2 * per + 50, i, nnew = 0, bad = 0;
	float *model = calloc(nkeys, sizeof(float));
	bool *stored = calloc(nkeys, 1);
	float *v = malloc(nkeys * sizeof(float));
	const uint32_t *idx;
	struct psd_kl_list l;
	uint64_t q[3];
	struct kst t;
	void *buf;
	unsigned w;

	CHECK(model && stored && v);
	kst_start(&t, 2, false);
	for (w = 0; w < 2; w++) {
		for (i = 0; i < per; i++) {
			v[i] = (float)(10 * w + i % 89);
			model[2 * i + w] = v[i];
			stored[2 * i + w] = true;
		}
		l = kst_list(&t, per, 2, w, 1, NULL, 4, (uint8_t *)v, true,
			     &buf);
		kst_push(&t, &l, PSCHED_F32);
		l.tag = w + 1;
		psd_kl_remember(t.kl, (int)w, &l, w == 0);
		kst_list_free(buf, true);
	}
	CHECK(t.kl->keys2 != NULL);
	CHECK_U64(t.kl->n2, ==, per);
	CHECK_INT(t.fused, ==, 1);
	psd_kl_commit(&t.s, t.kl);
	kst_check_f32(t.kl, model, stored, nkeys);
	/* slots run after run: key 1 (the second run's first) is slot per,
	 * key 2 (the first run's second) slot 1, 2*per+7 new */
	q[0] = 1, q[1] = 2, q[2] = 2 * per + 7;
	l = (struct psd_kl_list){ .n = 3, .keys = q, .ulen = 1 };
	CHECK_EQ(psd_kl_slots(t.kl, &l, &idx, &nnew, &bad), 0);
	CHECK_U64(nnew, ==, 1);
	CHECK_U64(idx[0], ==, per);
	CHECK_U64(idx[1], ==, 1);
	CHECK_U64(idx[2], ==, KL_NONE);
	/* a key of the second run with another length */
	q[0] = 3;
	l = (struct psd_kl_list){ .n = 1, .keys = q, .ulen = 2 };
	CHECK_EQ(psd_kl_slots(t.kl, &l, &idx, &nnew, &bad), PSCHED_ESIZE);
	CHECK_U64(bad, ==, 0);
	/* step 2: each worker its own run again -- worker 0's keys in a
	 * copy of their own (compared), worker 1's its tagged list (the
	 * run's own array) -- found as runs, values exact */
	for (w = 0; w < 2; w++) {
		uint64_t base = 7;

		for (i = 0; i < per; i++) {
			v[i] = (float)(w * 7 + i % 13) + 0.25f;
			model[2 * i + w] = v[i];
		}
		l = kst_list(&t, per, 2, w, 1, NULL, 4, (uint8_t *)v, false,
			     &buf);
		if (w)
			l.keys = t.kl->wc[1].keys;
		CHECK(l.keys != t.kl->keys || !w);
		CHECK(psd_kl_run_of(t.kl, &l, &base));
		CHECK_U64(base, ==, w ? per : 0);
		kst_push(&t, &l, PSCHED_F32);
		kst_list_free(buf, false);
	}
	CHECK_INT(t.runs, ==, 2);
	/* a pull of a run is answered from the values in one piece */
	psd_kl_commit(&t.s, t.kl);
	kst_check_f32(t.kl, model, stored, nkeys);
	CHECK(!memcmp(t.kl->val + per * 4, v, per * 4));
	/* step 3: worker 0 every key (both runs: not a run, not the store
	 * in value order), worker 1 new keys after it */
	for (i = 0; i < 2 * per; i++) {
		v[i] = (float)(i % 31) + 0.5f;
		model[i] = v[i];
	}
	l = kst_list(&t, 2 * per, 1, 0, 1, NULL, 4, (uint8_t *)v, false, &buf);
	CHECK(!psd_kl_is_whole_cmp(t.kl, &l));
	CHECK(!psd_kl_run_of(t.kl, &l, &bad));
	kst_push(&t, &l, PSCHED_F32);
	l.tag = 7;
	psd_kl_remember(t.kl, 0, &l, false);
	CHECK(t.kl->wc[0].keys != t.kl->keys); /* a copy: two runs */
	CHECK(!memcmp(t.kl->wc[0].keys, l.keys, (size_t)l.n * 8));
	kst_list_free(buf, false);
	for (i = 0; i < 50; i++) {
		v[i] = (float)(1000 + i);
		model[2 * per + i] = v[i];
		stored[2 * per + i] = true;
	}
	l = kst_list(&t, 50, 1, 2 * per, 1, NULL, 4, (uint8_t *)v, false, &buf);
	kst_push(&t, &l, PSCHED_F32);
	kst_list_free(buf, false);
	CHECK(t.kl->keys2 == NULL); /* keys added: one array again */
	CHECK_U64(t.kl->n, ==, nkeys);
	for (i = 1; i < nkeys; i++)
		CHECK(t.kl->keys[i] == t.kl->keys[i - 1] + 1);
	psd_kl_commit(&t.s, t.kl);
	kst_check_f32(t.kl, model, stored, nkeys);
	/* the remembered whole list still reads (ASan: not freed) */
	CHECK_U64(t.kl->wc[0].keys[2 * per - 1], ==, 2 * per - 1);
	kst_stop(&t);
	free(model);
	free(stored);
	free(v);
}

static void test_kl_store_first_step_merged_and_added(void)
{
	kst_interleaved(2, 1000, false, false);
	kst_interleaved(3, 777, false, false);
	kst_interleaved(2, 1000, true, false);
	/* 1M keys per worker: the arrays are big enough to be mapped */
	kst_interleaved(2, 1u << 20, true, true);
}

/*
 * After a committed step: both workers push the whole store, then in
 * step 2 worker 0 pushes it again and worker 1 a list of new keys only,
 * interleaved with it.  The new keys are merged and added at once; until
 * step 2 commits the stored values (what a pull of step 1 reads) must
 * still be step 1's for the old keys and 0 for the new.
 */
static void test_kl_store_merge_keeps_committed_values(void)
{
	uint64_t n = 5000, i, nkeys = 2 * n;
	float *model = calloc(nkeys, sizeof(float));
	bool *stored = calloc(nkeys, 1);
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	struct psd_kl_list l;
	struct kst t;
	void *buf;
	unsigned w;

	CHECK(model && stored && a && b);
	kst_start(&t, 2, false);
	for (w = 0; w < 2; w++) { /* step 1: even keys from both */
		for (i = 0; i < n; i++)
			a[i] = (float)(w + 1) * (float)(i % 50);
		l = kst_list(&t, n, 2, 0, 1, NULL, 4, (uint8_t *)a, w == 0,
			     &buf);
		kst_push(&t, &l, PSCHED_F32);
		kst_list_free(buf, l.own);
	}
	psd_kl_commit(&t.s, t.kl);
	for (i = 0; i < n; i++) {
		model[2 * i] = 3.0f * (float)(i % 50);
		stored[2 * i] = true;
	}
	kst_check_f32(t.kl, model, stored, nkeys);
	for (i = 0; i < n; i++) {
		a[i] = (float)i;
		b[i] = (float)(7 * i);
	}
	l = kst_list(&t, n, 2, 0, 1, NULL, 4, (uint8_t *)a, false, &buf);
	kst_push(&t, &l, PSCHED_F32); /* whole store */
	kst_list_free(buf, false);
	l = kst_list(&t, n, 2, 1, 1, NULL, 4, (uint8_t *)b, false, &buf);
	kst_push(&t, &l, PSCHED_F32); /* all new, interleaved */
	kst_list_free(buf, false);
	CHECK_INT(t.fused, ==, 1);
	for (i = 0; i < n; i++)
		stored[2 * i + 1] = true; /* model: still step 1's */
	kst_check_f32(t.kl, model, stored, nkeys);
	psd_kl_commit(&t.s, t.kl);
	for (i = 0; i < n; i++) {
		model[2 * i] = a[i];
		model[2 * i + 1] = b[i];
	}
	kst_check_f32(t.kl, model, stored, nkeys);
	kst_stop(&t);
	free(model);
	free(stored);
	free(a);
	free(b);
}

/*
 * The other merge paths with the list added as it merges: per-key
 * lengths (float32, 1..3 elements), 8-byte elements (int64), and new keys
 * all after the stored ones (appended).  Checked element by element.
 */
static void kst_generic(bool lens_on, uint8_t dtype, bool append)
{
	const uint64_t n = 3000;
	unsigned es = psched_dtype_size(dtype), w;
	uint32_t *lens = malloc(n * 4);
	uint8_t *vals[2];
	uint64_t bytes[2] = { 0, 0 }, i, e, off;
	struct psd_kl_list l;
	struct kst t;
	void *buf;

	CHECK(lens != NULL);
	for (i = 0; i < n; i++)
		lens[i] = lens_on ? 1 + (uint32_t)(i % 3) : 2;
	kst_start(&t, 2, false);
	for (w = 0; w < 2; w++) {
		for (i = 0; i < n; i++)
			bytes[w] += (uint64_t)lens[i] * es;
		vals[w] = malloc(bytes[w]);
		CHECK(vals[w] != NULL);
		for (e = 0; e < bytes[w] / es; e++) {
			if (dtype == PSCHED_I64) {
				int64_t x = (int64_t)(w * 1000000 + e);

				memcpy(vals[w] + e * es, &x, 8);
			} else {
				float x = (float)(w * 10000 + e);

				memcpy(vals[w] + e * es, &x, 4);
			}
		}
		/* keys: interleaved (w, w + 2, ...), or worker 1's after
		 * all of worker 0's */
		l = kst_list(&t, n, append ? 1 : 2, append ? w * n : w,
			     lens_on ? 0 : 2, lens_on ? lens : NULL, es,
			     vals[w], false, &buf);
		kst_push(&t, &l, dtype);
		kst_list_free(buf, false);
	}
	CHECK_INT(t.fused, ==, 1);
	psd_kl_commit(&t.s, t.kl);
	for (w = 0; w < 2; w++)
		for (i = 0, off = 0; i < n; i++) {
			uint64_t key = append ? w * n + i : 2 * i + w;
			uint32_t len = 0;
			const uint8_t *v = kst_val(t.kl, key, &len);

			CHECK(v != NULL);
			if (!v)
				break;
			CHECK_INT(len, ==, lens[i]);
			CHECK_INT(memcmp(v, vals[w] + off, (size_t)len * es),
				  ==, 0);
			off += (uint64_t)lens[i] * es;
		}
	kst_stop(&t);
	free(vals[0]);
	free(vals[1]);
	free(lens);
}

static void test_kl_store_merge_paths(void)
{
	kst_generic(true, PSCHED_F32, false);
	kst_generic(false, PSCHED_I64, false);
	kst_generic(true, PSCHED_I64, false);
	kst_generic(false, PSCHED_F32, true);
	kst_generic(true, PSCHED_F32, true);
}

/* psd_big_alloc(): mapped from PSD_BIG_MIN with huge pages asked for,
 * 2 MiB-aligned and zeroed; malloc'd below that, without, or when the
 * mapping fails -- every one usable and freed the same way. */
static void test_kl_store_bigmem_fallback(void)
{
	uint64_t len = PSD_BIG_MIN + 12345, i, nz = 0;
	uint8_t *p;

	p = psd_big_alloc(len, true, true);
	CHECK(p != NULL);
	CHECK(psd_big_is_mapped(p));
	CHECK_U64((uintptr_t)(p - 64) % PSD_HUGE, ==, 0);
	for (i = 0; i < len; i += 4096)
		nz += p[i] != 0;
	CHECK_U64(nz, ==, 0);
	memset(p, 0xab, len);
	psd_big_free(p);

	psd_huge_test_fail(1); /* mmap refused: malloc'd, still zeroed */
	p = psd_big_alloc(len, true, true);
	CHECK(p != NULL);
	CHECK(!psd_big_is_mapped(p));
	for (i = 0, nz = 0; i < len; i += 4096)
		nz += p[i] != 0;
	CHECK_U64(nz, ==, 0);
	memset(p, 0xcd, len);
	psd_big_free(p);
	p = psd_big_alloc(len, true, false); /* the failure was one call */
	CHECK(psd_big_is_mapped(p));
	psd_big_free(p);

	p = psd_big_alloc(len, false, false); /* not asked for */
	CHECK(p != NULL && !psd_big_is_mapped(p));
	psd_big_free(p);
	p = psd_big_alloc(PSD_BIG_MIN - 1, true, false); /* small */
	CHECK(p != NULL && !psd_big_is_mapped(p));
	psd_big_free(p);
	psd_big_free(NULL);

	/* whole mappings: the length is rounded to huge pages only when
	 * that wastes at most 1/8 */
	CHECK_U64(psd_huge_map_len(PSD_HUGE * 8 + 1), ==, PSD_HUGE * 9);
	CHECK_U64(psd_huge_map_len(PSD_HUGE + 1), ==, PSD_HUGE + 4096);
	CHECK(psd_huge_map(0) == NULL);

	/* a store built while every mapping fails: the same sums */
	psd_huge_test_fail(1000);
	kst_interleaved(2, 1u << 20, true, true);
	psd_huge_test_fail(0);
}

/*
 * Worker 1's list in step 1 is new keys but one, a stored key near its
 * end that psd_kl_insert_new()'s 16 probes miss: the merge gives up there,
 * nothing changed, and the list goes the long way (looked up, merged,
 * added) -- the shared key holds both workers' values.  Then the same with
 * the shared key where a probe finds it.
 */
static void kst_guess_wrong(uint64_t shared_at, bool own)
{
	const uint64_t m = 1000;
	uint64_t i, n = 0, nkeys = 2 * m;
	float *model = calloc(nkeys, sizeof(float));
	bool *stored = calloc(nkeys, 1);
	float *a = malloc(m * sizeof(float)), *b = malloc((m + 1) * 4);
	uint64_t *bk = malloc((m + 1) * 8);
	struct psd_kl_list l;
	struct kst t;
	void *buf;

	CHECK(model && stored && a && b && bk);
	kst_start(&t, 2, false);
	for (i = 0; i < m; i++) {
		a[i] = (float)(i + 1);
		model[2 * i] = a[i];
		stored[2 * i] = true;
	}
	l = kst_list(&t, m, 2, 0, 1, NULL, 4, (uint8_t *)a, true, &buf);
	kst_push(&t, &l, PSCHED_F32);
	kst_list_free(buf, true);
	/* odd keys, and the even key 2 * shared_at in order */
	for (i = 0; i < m; i++) {
		if (2 * i + 1 > 2 * shared_at &&
		    (!n || bk[n - 1] < 2 * shared_at)) {
			bk[n] = 2 * shared_at;
			b[n] = 1000.0f;
			model[2 * shared_at] += b[n++];
		}
		bk[n] = 2 * i + 1;
		b[n] = (float)(7 * i);
		model[2 * i + 1] = b[n++];
		stored[2 * i + 1] = true;
	}
	/* a list of arbitrary keys: built by hand, keys from bk */
	l = kst_list(&t, n, 1, 0, 1, NULL, 4, (uint8_t *)b, own, &buf);
	memcpy(buf, bk, n * 8);
	kst_push(&t, &l, PSCHED_F32);
	kst_list_free(buf, own);
	CHECK_INT(t.fused, ==, 0);
	CHECK(t.kl->partial); /* the long way: stamps */
	psd_kl_commit(&t.s, t.kl);
	kst_check_f32(t.kl, model, stored, nkeys);
	kst_stop(&t);
	free(model);
	free(stored);
	free(a);
	free(b);
	free(bk);
}

static void test_kl_store_new_keys_guess_wrong(void)
{
	/* at index 998 of 1001: no probe there */
	kst_guess_wrong(997, false);
	kst_guess_wrong(0, false); /* the first key: probed */
	/* in a receive buffer of its own: the second run's merge of the
	 * sums is what finds the stored key */
	kst_guess_wrong(997, true);
	kst_guess_wrong(0, true);
}

/*
 * The first step's second list kept as a second run, where the runs do
 * not interleave to the end: worker 0 pushes @na even keys from @a0,
 * worker 1 @nb odd keys from @b0 (both in receive buffers of their own),
 * @ul float32 elements a key; whichever run outlasts the other, at either
 * end, every sum lands on its key.
 */
static void kst_run2(uint64_t a0, uint64_t na, uint64_t b0, uint64_t nb,
		     uint32_t ul)
{
	uint64_t nkeys = (a0 + 2 * na > b0 + 2 * nb ? a0 + 2 * na
						    : b0 + 2 * nb),
		 i, k, wrong = 0;
	float *model = calloc(nkeys * ul, sizeof(float));
	bool *stored = calloc(nkeys, 1);
	float *v = malloc((na > nb ? na : nb) * ul * sizeof(float));
	struct psd_kl_list l;
	struct kst t;
	void *buf;
	uint32_t e, len;

	CHECK(model && stored && v);
	kst_start(&t, 2, false);
	for (i = 0; i < na * ul; i++)
		v[i] = (float)(i % 101 + 1);
	for (i = 0; i < na; i++) {
		memcpy(model + (a0 + 2 * i) * ul, v + i * ul, ul * 4);
		stored[a0 + 2 * i] = true;
	}
	l = kst_list(&t, na, 2, a0, ul, NULL, 4, (uint8_t *)v, true, &buf);
	kst_push(&t, &l, PSCHED_F32);
	kst_list_free(buf, true);
	for (i = 0; i < nb * ul; i++)
		v[i] = (float)(1000 + i % 103);
	for (i = 0; i < nb; i++) {
		memcpy(model + (b0 + 2 * i) * ul, v + i * ul, ul * 4);
		stored[b0 + 2 * i] = true;
	}
	l = kst_list(&t, nb, 2, b0, ul, NULL, 4, (uint8_t *)v, true, &buf);
	kst_push(&t, &l, PSCHED_F32);
	kst_list_free(buf, true);
	CHECK_INT(t.fused, ==, 1);
	CHECK(t.kl->keys2 != NULL);
	psd_kl_commit(&t.s, t.kl);
	for (k = 0; k < nkeys; k++) {
		const uint8_t *p = kst_val(t.kl, k, &len);

		if (!stored[k] || !p || len != ul) {
			wrong += stored[k] != (p != NULL);
			continue;
		}
		for (e = 0; e < ul; e++) {
			float f;

			memcpy(&f, p + e * 4, 4);
			wrong += f != model[k * ul + e];
		}
	}
	CHECK_U64(wrong, ==, 0);
	kst_stop(&t);
	free(model);
	free(stored);
	free(v);
}

/* A list of @n keys first + stride * i, one float each (@v), as it
 * arrives packed into a receive buffer of the store's own and is kept
 * packed (psd_kl_own_lazy()). */
static struct psd_kl_list kst_lazy(struct kst *t, uint64_t n, uint64_t stride,
				   uint64_t first, const float *v, void **buf)
{
	struct psd_klpack pk = { 0 };
	struct psd_kl_list l = { 0 };
	uint64_t *k = calloc(n, 8), i;
	struct psd_hdr h = { 0 }, raw;
	const char *why = "";
	uint8_t *p;

	CHECK(k != NULL);
	for (i = 0; i < n; i++)
		k[i] = first + stride * i;
	CHECK_EQ(psd_klpack_set(&pk, k, n, UINT64_MAX), 0);
	CHECK(pk.len < n * 8);
	h.type = PSD_MSG_PUSH;
	h.flags = PSD_F_KEYLIST | PSD_F_KLPACKED;
	h.part = n;
	h.offset = 1;
	h.span = n * 4;
	h.length = pk.len + n * 4;
	p = psd_kl_rxbuf(t->kl, n * 12, n * 8 - pk.len);
	CHECK(p != NULL);
	/* what the receive writes: the section, then the values */
	memcpy(p + n * 8 - pk.len, pk.buf, pk.len);
	memcpy(p + n * 8, v, n * 4);
	CHECK_EQ(psd_kl_own_lazy(&h, p, &raw, &why), 0);
	CHECK_U64(raw.length, ==, n * 12);
	CHECK(psd_kl_keys_packed((uint64_t *)(void *)p));
	l.n = n;
	l.keys = (const uint64_t *)(void *)p;
	l.ulen = 1;
	l.vals = p + n * 8;
	l.bytes = n * 4;
	l.own = true;
	*buf = p;
	psd_klpack_free(&pk);
	free(k);
	return l;
}

/*
 * Two workers' first lists arrive packed into buffers of their own and
 * stay packed through the first step (the store adopts one, the other
 * becomes the second run: the walk that checks them apart reads the packed
 * form) and through pushes and pulls of each worker's own list; a lookup
 * of other keys writes them out -- and then finds the right slots, values
 * exact.  A packed section that lies is refused and nothing kept.
 */
static void test_kl_store_lazy_keys(void)
{
	const uint64_t per = 3000;
	uint64_t nkeys = 2 * per, i, nnew = 0, bad = 0, base = 9;
	float *model = calloc(nkeys, sizeof(float));
	bool *stored = calloc(nkeys, 1);
	float *v = malloc(per * sizeof(float));
	const uint64_t *runk[2];
	struct psd_kl_list l;
	const uint32_t *idx;
	struct psd_hdr h, raw;
	const char *why = "";
	uint64_t q[3];
	void *buf;
	struct kst t;
	unsigned w;

	CHECK(model && stored && v);
	kst_start(&t, 2, false);
	for (w = 0; w < 2; w++) {
		for (i = 0; i < per; i++) {
			v[i] = (float)(w * 100 + i % 37);
			model[2 * i + w] = v[i];
			stored[2 * i + w] = true;
		}
		l = kst_lazy(&t, per, 2, w, v, &buf);
		runk[w] = l.keys;
		kst_push(&t, &l, PSCHED_F32);
		psd_kl_rxbuf_put(buf);
	}
	CHECK_INT(t.fused, ==, 1);
	CHECK(t.kl->keys == runk[0] && t.kl->keys2 == runk[1]);
	psd_kl_commit(&t.s, t.kl);
	CHECK(psd_kl_keys_packed(t.kl->keys));
	CHECK(psd_kl_keys_packed(t.kl->keys2));
	/* step 2: each worker its own list by its tag (the run's array) */
	for (w = 0; w < 2; w++) {
		for (i = 0; i < per; i++) {
			v[i] = (float)(w * 10 + i % 7) + 0.5f;
			model[2 * i + w] = v[i];
		}
		l = (struct psd_kl_list){ .n = per,
					  .keys = runk[w],
					  .ulen = 1,
					  .vals = (uint8_t *)v,
					  .bytes = per * 4,
					  .blk = true };
		CHECK(!psd_kl_is_whole_cmp(t.kl, &l));
		CHECK(psd_kl_run_of(t.kl, &l, &base));
		CHECK_U64(base, ==, w ? per : 0);
		kst_push(&t, &l, PSCHED_F32);
	}
	CHECK_INT(t.runs, ==, 2);
	psd_kl_commit(&t.s, t.kl);
	CHECK(psd_kl_keys_packed(t.kl->keys));
	CHECK(psd_kl_keys_packed(t.kl->keys2));
	CHECK(!memcmp(t.kl->val + per * 4, v, per * 4));
	/* a lookup of other keys writes both runs out, slots right */
	q[0] = 1, q[1] = 2 * per - 2, q[2] = 2 * per + 7;
	l = (struct psd_kl_list){ .n = 3, .keys = q, .ulen = 1 };
	CHECK_EQ(psd_kl_slots(t.kl, &l, &idx, &nnew, &bad), 0);
	CHECK_U64(nnew, ==, 1);
	CHECK_U64(idx[0], ==, per);
	CHECK_U64(idx[1], ==, per - 1);
	CHECK_U64(idx[2], ==, KL_NONE);
	CHECK(!psd_kl_keys_packed(t.kl->keys));
	CHECK(!psd_kl_keys_packed(t.kl->keys2));
	kst_check_f32(t.kl, model, stored, nkeys);
	kst_stop(&t);

	/* one worker: its packed list adopted, then a plain copy of it is
	 * the whole store (the first keys agree: written out, compared) */
	kst_start(&t, 1, false);
	for (i = 0; i < per; i++)
		v[i] = (float)(i % 11);
	l = kst_lazy(&t, per, 3, 5, v, &buf);
	kst_push(&t, &l, PSCHED_F32);
	psd_kl_rxbuf_put(buf);
	psd_kl_commit(&t.s, t.kl);
	CHECK(psd_kl_keys_packed(t.kl->keys));
	l = kst_list(&t, per, 3, 5, 1, NULL, 4, (uint8_t *)v, false, &buf);
	CHECK(psd_kl_is_whole_cmp(t.kl, &l));
	CHECK(!psd_kl_keys_packed(t.kl->keys));
	kst_list_free(buf, false);
	kst_stop(&t);

	/* a section whose key count lies: refused, nothing kept */
	kst_start(&t, 1, false);
	for (i = 0; i < per; i++)
		v[i] = 1.0f;
	l = kst_lazy(&t, per, 2, 0, v, &buf);
	h = (struct psd_hdr){ .flags = PSD_F_KEYLIST | PSD_F_KLPACKED,
			      .part = per + 1,
			      .offset = 1,
			      .span = (per + 1) * 4 };
	h.length = psd_klpack_min_len(per) + h.span;
	CHECK_EQ(psd_kl_own_lazy(&h, buf, &raw, &why), -EPROTO);
	CHECK(strstr(why, "packed keys") != NULL);
	psd_kl_rxbuf_put(buf);
	kst_stop(&t);
	free(model);
	free(stored);
	free(v);
}

static void test_kl_store_second_run_ends(void)
{
	for (uint32_t ul = 1; ul <= 3; ul += 2) { /* 4 bytes a key, 12 */
		/* the list runs on past the store, the store past the list */
		kst_run2(0, 1000, 1, 1300, ul);
		kst_run2(0, 1300, 1, 1000, ul);
		/* the list starts below the store, the store below the list */
		kst_run2(600, 1000, 1, 1000, ul);
		kst_run2(0, 1000, 601, 1000, ul);
		kst_run2(0, 1, 1, 1, ul);
	}
}

const struct test_case test_list[] = {
	{ "kl_store_first_step_merged_and_added",
	  test_kl_store_first_step_merged_and_added },
	{ "kl_store_merge_keeps_committed_values",
	  test_kl_store_merge_keeps_committed_values },
	{ "kl_store_merge_paths", test_kl_store_merge_paths },
	{ "kl_store_two_runs", test_kl_store_two_runs },
	{ "kl_store_new_keys_guess_wrong", test_kl_store_new_keys_guess_wrong },
	{ "kl_store_second_run_ends", test_kl_store_second_run_ends },
	{ "kl_store_lazy_keys", test_kl_store_lazy_keys },
	{ "kl_store_bigmem_fallback", test_kl_store_bigmem_fallback },
	{ NULL, NULL },
};
