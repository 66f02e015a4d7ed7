// SPDX-License-Identifier: MIT
/*
 * KV server: the row-sparse keys' map and slabs (kvs_rowtab.h).
 */
#include <stdlib.h>
#include <string.h>

#include "kvs.h"
#include "kvs_rowtab.h"

static void rowtab_place(struct psd_rows_tab *t, uint64_t id, uint32_t idx)
{
	uint64_t i = psd_rows_hash(id, t->cap);

	while (t->ids[i] != PSD_ROWS_EMPTY)
		i = (i + 1) & (t->cap - 1);
	t->ids[i] = id;
	t->idx[i] = idx;
	t->count++;
}

static int rowtab_grow(struct psd_kvs *s, struct psd_rows_tab *t)
{
	struct psd_rows_tab nt = { .cap = t->cap ? 2 * t->cap : 1024 };
	uint64_t i;

	nt.ids = malloc(nt.cap * sizeof(*nt.ids));
	nt.idx = malloc(nt.cap * sizeof(*nt.idx));
	if (!nt.ids || !nt.idx) {
		free(nt.ids);
		free(nt.idx);
		return -ENOMEM;
	}
	memset(nt.ids, 0xff, nt.cap * sizeof(*nt.ids));
	for (i = 0; i < t->cap; i++)
		if (t->ids[i] != PSD_ROWS_EMPTY)
			rowtab_place(&nt, t->ids[i], t->idx[i]);
	atomic_fetch_add(&s->alloc_bytes, (nt.cap - t->cap) * 12);
	free(t->ids);
	free(t->idx);
	*t = nt;
	return 0;
}

int psd_rows_tab_put(struct psd_kvs *s, struct psd_rows_tab *t, uint64_t id,
		     uint32_t idx)
{
	int ret;

	if ((t->count + 1) * 4 > t->cap * 3) {
		ret = rowtab_grow(s, t);
		if (ret)
			return ret;
	}
	rowtab_place(t, id, idx);
	return 0;
}

void psd_rows_tab_clear(struct psd_rows_tab *t)
{
	if (t->count)
		memset(t->ids, 0xff, t->cap * sizeof(*t->ids));
	t->count = 0;
}

void psd_rows_tab_fini(struct psd_kvs *s, struct psd_rows_tab *t)
{
	atomic_fetch_sub(&s->alloc_bytes, t->cap * 12);
	free(t->ids);
	free(t->idx);
	memset(t, 0, sizeof(*t));
}

int psd_rows_arena_new(struct psd_kvs *s, struct psd_rows_arena *a,
		       uint64_t *out)
{
	uint64_t sl = a->count >> PSD_ROWS_SLAB_SHIFT;
	uint8_t **ns;

	if (a->count >= UINT32_MAX)
		return -ENOMEM;
	if (sl >= a->nslabs) {
		ns = realloc(a->slabs, (sl + 1) * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		a->slabs = ns;
		ns[sl] = calloc(PSD_ROWS_SLAB, a->rowbytes);
		if (!ns[sl])
			return -ENOMEM;
		a->nslabs = sl + 1;
		atomic_fetch_add(&s->alloc_bytes, PSD_ROWS_SLAB * a->rowbytes);
	}
	*out = a->count++;
	return 0;
}

void psd_rows_arena_fini(struct psd_kvs *s, struct psd_rows_arena *a)
{
	uint64_t i;

	for (i = 0; i < a->nslabs; i++)
		free(a->slabs[i]);
	atomic_fetch_sub(&s->alloc_bytes,
			 a->nslabs * PSD_ROWS_SLAB * a->rowbytes);
	free(a->slabs);
	a->slabs = NULL;
	a->nslabs = a->count = 0;
}
