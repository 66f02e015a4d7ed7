// SPDX-License-Identifier: MIT
/*
 * KV server entries (server/kvs.h): one per key, holding this server's
 * byte range of it (value and merge buffer), and the byte counters that
 * psched_node_stats() reports.
 */
#include <stdlib.h>
#include <string.h>
#include "bigmem.h"
#include "kvs.h"
#include "placement.h"

struct psd_kvs_entry *psd_kvs_entry_find(struct psd_kvs *s, uint64_t key)
{
	return psd_map_get(&s->entries, key);
}

/* Bytes allocated for @e beyond the struct: value, merge, per-chunk
 * counts and wait lists. */
static uint64_t kvs_entry_alloc_bytes(const struct psd_kvs_entry *e)
{
	return 2 * e->len +
	       e->counts_cap * (sizeof(*e->counts) + sizeof(*e->cwait));
}

/*
 * Value and merge buffer of an entry: one block of 2 x len, the two
 * halves swapped at each step (kvs_step_finish), so the block starts at
 * the lower of the two.  From KVS_HUGE_MIN on it is its own mapping,
 * aligned to 2 MiB with MADV_HUGEPAGE: a 1 MiB key's pair is one huge
 * page.  Pushes are copied into it and pulls out of it by the
 * transports (shm: process_vm_readv, which pins the other process's
 * pages one page-table entry at a time, and walks one entry per huge
 * page instead; the copy misses the TLB 512 times less).  Only with
 * PS_SERVER_HUGEPAGES=1: it pays when the workers' buffers are huge
 * pages too (shm push 1 MiB about 1.9x); with workers' 4 KiB pages shm
 * pushes measured 0.67x of plain calloc'd buffers.  Allocated
 * when a key is created, never on the data path (with the kernel's
 * defrag=madvise a huge page fault may compact memory).  The block is
 * rounded up to whole huge pages when that wastes at most 1/8
 * (psd_huge_map(), common/bigmem.c); when the mapping fails, calloc.
 */
#ifndef KVS_HUGE_MIN
#define KVS_HUGE_MIN PSD_HUGE
#endif

static int kvs_pair_alloc(const struct psd_kvs *s, struct psd_kvs_entry *e)
{
	uint8_t *a = NULL;

	if (s->hugepages && 2 * e->len >= KVS_HUGE_MIN)
		a = psd_huge_map(2 *
				 e->len); /* zeroed: the value starts at 0 */
	if (!a) {
		e->value = calloc(2, e->len);
		e->merge = e->value ? e->value + e->len : NULL;
		return e->value ? 0 : -ENOMEM;
	}
	e->value = a;
	e->merge = a + e->len;
	e->pair_mapped = true;
	return 0;
}

static void kvs_pair_free(struct psd_kvs_entry *e)
{
	uint8_t *base = e->value < e->merge ? e->value : e->merge;

	if (!base)
		return;
	if (!e->pair_mapped)
		free(base);
	else
		psd_huge_unmap(base, 2 * e->len);
}

/* Free the buffers of @e, which is not (or no longer) accounted. */
static void kvs_entry_release(struct psd_kvs_entry *e)
{
	kvs_pair_free(e);
	free(e->counts);
	free(e->cwait);
	free(e->wbytes);
	free(e->inited);
	free(e->conflict);
	free(e);
}

void psd_kvs_entry_free(struct psd_kvs *s, struct psd_kvs_entry *e)
{
	if (!e)
		return;
	atomic_fetch_sub(&s->stored_bytes, e->len);
	atomic_fetch_sub(&s->alloc_bytes, kvs_entry_alloc_bytes(e));
	s->unfilled_bytes -= e->len - e->filled;
	kvs_entry_release(e);
}

int psd_kvs_entry_create(struct psched_node *n, const struct psd_hdr *h,
			 struct psd_kvs_entry **out)
{
	struct psd_kvs *s = psd_kvs_of(n);
	struct psd_kvs_entry *e;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = h->key;
	e->total = h->total;
	e->dtype = h->dtype;
	psd_place(h->key, h->total, psched_dtype_size(h->dtype), n->num_server,
		  (unsigned)n->rank, &e->off, &e->len);
	psd_list_init(&e->pulls);
	psd_list_init(&e->held);
	e->wbytes = calloc(s->nworker, sizeof(*e->wbytes));
	e->inited = calloc(s->nworker, sizeof(*e->inited));
	if (!e->wbytes || !e->inited || (e->len && kvs_pair_alloc(s, e))) {
		ret = -ENOMEM;
		goto err_release;
	}
	ret = psd_map_put(&s->entries, e->key, e);
	if (ret)
		goto err_release;
	atomic_fetch_add(&s->stored_bytes, e->len);
	atomic_fetch_add(&s->alloc_bytes, kvs_entry_alloc_bytes(e));
	s->unfilled_bytes += e->len;
	*out = e;
	return 0;

err_release:
	kvs_entry_release(e);
	return ret;
}

void psd_kvs_entry_filled(struct psd_kvs *s, struct psd_kvs_entry *e,
			  uint64_t bytes)
{
	if (bytes > e->len - e->filled)
		bytes = e->len - e->filled;
	e->filled += bytes;
	s->unfilled_bytes -= bytes;
}

bool psd_kvs_has_steps(const struct psd_kvs *s)
{
	const struct psd_kvs_entry *e;
	size_t pos = 0;

	while ((e = psd_map_next(&s->entries, &pos, NULL)))
		if (e->version || e->open || !psd_list_empty(&e->held))
			return true;
	return false;
}

void *psd_kvs_room(void *buf, uint64_t *cap, uint64_t len)
{
	void *nb;

	if (buf && len <= *cap)
		return buf;
	if (!len)
		len = 1; /* NULL says no memory */
	nb = realloc(buf, (size_t)len);
	if (nb)
		*cap = len;
	return nb;
}

void psd_kvs_hold_free(struct psd_kvs *s, void *buf, uint64_t len)
{
	if (!buf)
		return;
	free(buf);
	s->parked_bytes -= len;
}

/* Default: room for two steps' worth of everything this server stores,
 * and never less than 256 MiB.  Only stored bytes that arrived count: a
 * key declared by an init without a value costs its sender nothing, so
 * it must not raise the limit. */
uint64_t psd_kvs_parked_limit(const struct psd_kvs *s)
{
	uint64_t two = 2 * ((uint64_t)atomic_load(&s->stored_bytes) -
			    s->unfilled_bytes);

	if (s->max_parked)
		return s->max_parked;
	return two > (256ull << 20) ? two : 256ull << 20;
}

int psd_kvs_admit_early(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *h, uint64_t open,
			const char *what)
{
	struct psd_kvs *s = psd_kvs_of(n);
	uint64_t ahead = h->step - open;
	uint64_t limit = psd_kvs_parked_limit(s);

	/* A worker died: the open step never completes, nor this one. */
	if (s->broken)
		return psd_kvs_reject(n, c, h, s->broken, s->broken_msg);
	if (ahead > s->max_ahead)
		return psd_kvs_rejectf(n, c, h, -ERANGE,
				       "%s for step %llu is %llu steps ahead "
				       "of the open step %llu on this "
				       "server (PS_MAX_STEPS_AHEAD=%llu)",
				       what, (unsigned long long)h->step,
				       (unsigned long long)ahead,
				       (unsigned long long)open,
				       (unsigned long long)s->max_ahead);
	if (h->length > limit || s->parked_bytes > limit - h->length)
		return psd_kvs_rejectf(n, c, h, -ENOBUFS,
				       "%s for step %llu (open step %llu): no "
				       "room to hold %llu more bytes, %llu "
				       "bytes of early pushes are held "
				       "already (PS_MAX_PARKED_BYTES=%llu)",
				       what, (unsigned long long)h->step,
				       (unsigned long long)open,
				       (unsigned long long)h->length,
				       (unsigned long long)s->parked_bytes,
				       (unsigned long long)limit);
	return 0;
}
