/* SPDX-License-Identifier: MIT */
/*
 * KV server: the storage of row-sparse keys (kvs_rows.c): an
 * open-addressing map from row id to a slot, and rows in slabs.  The
 * lookups are inline (the per-row loops of kvs_rows.c call them thousands
 * of times a step).  Van thread only, like the rest of the server.
 */
#ifndef PSCHED_SERVER_KVS_ROWTAB_H
#define PSCHED_SERVER_KVS_ROWTAB_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct psd_kvs;

#define PSD_ROWS_SLAB_SHIFT 10u
#define PSD_ROWS_SLAB	    (1u << PSD_ROWS_SLAB_SHIFT)
#define PSD_ROWS_EMPTY	    UINT64_MAX
/* Rows a loop over ids looks up ahead of the one it uses: the probe's
 * cache lines are on their way meanwhile (the table outgrows the cache). */
#define PSD_ROWS_AHEAD 8

/* Open-addressing map row id -> slot (linear probing, load <= 3/4). */
struct psd_rows_tab {
	uint64_t *ids;
	uint32_t *idx;
	uint64_t cap; /* power of two, 0 = none yet */
	uint64_t count;
};

/* Rows of rowbytes bytes in slabs of PSD_ROWS_SLAB rows, zeroed. */
struct psd_rows_arena {
	uint8_t **slabs;
	uint64_t nslabs;
	uint64_t count;
	uint64_t rowbytes;
};

static inline uint64_t psd_rows_hash(uint64_t id, uint64_t cap)
{
	return (id * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

/*
 * The prefetches are always inlined: gcc takes a function doing nothing
 * but __builtin_prefetch for one without side effects and drops its
 * calls (seen with gcc 12 -O2: no prefetch instruction was left).
 */
#define PSD_ROWS_INLINE static inline __attribute__((always_inline))

PSD_ROWS_INLINE void psd_rows_tab_prefetch(const struct psd_rows_tab *t,
					   uint64_t id)
{
	uint64_t i;

	if (!t->cap)
		return;
	i = psd_rows_hash(id, t->cap);
	__builtin_prefetch(&t->ids[i]);
	__builtin_prefetch(&t->idx[i]);
}

/* Prefetch the slot of the id PSD_ROWS_AHEAD places after @i in the
 * payload's id list @ids (@nrows ids, 8 bytes each). */
PSD_ROWS_INLINE void psd_rows_tab_prefetch_at(const struct psd_rows_tab *t,
					      const uint8_t *ids, uint64_t i,
					      uint64_t nrows)
{
	uint64_t id;

	if (i + PSD_ROWS_AHEAD < nrows) {
		memcpy(&id, ids + (i + PSD_ROWS_AHEAD) * 8, 8);
		psd_rows_tab_prefetch(t, id);
	}
}

static inline bool psd_rows_tab_get(const struct psd_rows_tab *t, uint64_t id,
				    uint32_t *out)
{
	uint64_t i;

	if (!t->cap)
		return false;
	for (i = psd_rows_hash(id, t->cap);; i = (i + 1) & (t->cap - 1)) {
		if (t->ids[i] == id) {
			*out = t->idx[i];
			return true;
		}
		if (t->ids[i] == PSD_ROWS_EMPTY)
			return false;
	}
}

/* Map @id to @idx (@id not in @t); the table's bytes are counted in
 * s->alloc_bytes.  0 or -ENOMEM. */
int psd_rows_tab_put(struct psd_kvs *s, struct psd_rows_tab *t, uint64_t id,
		     uint32_t idx);
/* Empty @t, keeping its room. */
void psd_rows_tab_clear(struct psd_rows_tab *t);
void psd_rows_tab_fini(struct psd_kvs *s, struct psd_rows_tab *t);

static inline uint8_t *psd_rows_at(const struct psd_rows_arena *a, uint64_t i)
{
	return a->slabs[i >> PSD_ROWS_SLAB_SHIFT] +
	       (i & (PSD_ROWS_SLAB - 1)) * a->rowbytes;
}

/* Prefetch (for a write when @wr) the stored row in @a of the id
 * PSD_ROWS_AHEAD / 2 places after @i in @ids (@nrows ids): its probe's
 * lines were prefetched PSD_ROWS_AHEAD places before
 * (psd_rows_tab_prefetch_at()), so the lookup is cheap by now, and the
 * row, anywhere in the slabs, arrives while the rows before it are
 * folded or copied. */
PSD_ROWS_INLINE void psd_rows_val_prefetch_at(const struct psd_rows_tab *t,
					      const struct psd_rows_arena *a,
					      const uint8_t *ids, uint64_t i,
					      uint64_t nrows, bool wr)
{
	const uint8_t *p;
	uint64_t id, off;
	uint32_t slot;

	if (i + PSD_ROWS_AHEAD / 2 >= nrows)
		return;
	memcpy(&id, ids + (i + PSD_ROWS_AHEAD / 2) * 8, 8);
	if (!psd_rows_tab_get(t, id, &slot))
		return;
	p = psd_rows_at(a, slot);
	for (off = 0; off < a->rowbytes && off < 512; off += 64) {
		if (wr)
			__builtin_prefetch(p + off, 1);
		else
			__builtin_prefetch(p + off, 0);
	}
}

/* A new row (zeroed unless the arena was reset to reuse its slabs); its
 * slot in *@out.  0 or -ENOMEM. */
int psd_rows_arena_new(struct psd_kvs *s, struct psd_rows_arena *a,
		       uint64_t *out);
void psd_rows_arena_fini(struct psd_kvs *s, struct psd_rows_arena *a);

#endif
