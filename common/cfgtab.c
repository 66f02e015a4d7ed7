// SPDX-License-Identifier: MIT
/* Config epochs: the table every worker and server keeps (cfgtab.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cfgtab.h"

int psd_cfgtab_init(struct psd_cfgtab *t, uint64_t partition_bytes,
		    uint64_t credit_bytes)
{
	t->cap = 8;
	t->n = 1;
	t->v = calloc(t->cap, sizeof(*t->v));
	if (!t->v) {
		t->cap = 0;
		t->n = 0;
		return -ENOMEM;
	}
	t->v[0].partition_bytes = partition_bytes;
	t->v[0].credit_bytes = credit_bytes;
	return 0;
}

void psd_cfgtab_fini(struct psd_cfgtab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free((void *)(uintptr_t)t->v[i].members);
	free(t->v);
	t->v = NULL;
	t->n = 0;
	t->cap = 0;
}

int psd_cfgtab_add(struct psd_cfgtab *t, const struct psd_cfg_entry *e)
{
	struct psd_cfg_entry *nv;
	uint8_t *mem = NULL;

	if (!t->n)
		return -EINVAL;
	if (psd_cfgtab_find(t, e->epoch))
		return -EALREADY;
	if (e->epoch < t->v[t->n - 1].epoch)
		return -EINVAL;
	if (t->n == t->cap) {
		nv = realloc(t->v, 2 * t->cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		t->v = nv;
		t->cap *= 2;
	}
	if (e->members && e->members_len) {
		mem = malloc(e->members_len);
		if (!mem)
			return -ENOMEM;
		memcpy(mem, e->members, e->members_len);
	}
	t->v[t->n] = *e;
	t->v[t->n].members = mem;
	t->v[t->n].members_len = mem ? e->members_len : 0;
	t->n++;
	return 0;
}

const struct psd_cfg_entry *psd_cfgtab_for_step(const struct psd_cfgtab *t,
						uint64_t step)
{
	const struct psd_cfg_entry *best = &t->v[0];
	size_t i;

	/* Newest epoch whose start has come; a later epoch may start earlier
	 * than an older one only if configs were committed out of order,
	 * which the scheduler never does, but the newest still wins. */
	for (i = t->n; i-- > 1;) {
		if (t->v[i].apply_from_step <= step) {
			best = &t->v[i];
			break;
		}
	}
	return best;
}

const struct psd_cfg_entry *psd_cfgtab_find(const struct psd_cfgtab *t,
					    uint32_t epoch)
{
	size_t lo = 0, hi = t->n, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (t->v[mid].epoch == epoch)
			return &t->v[mid];
		if (t->v[mid].epoch < epoch)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct psd_cfg_entry *psd_cfgtab_last(const struct psd_cfgtab *t)
{
	return &t->v[t->n - 1];
}

bool psd_cfg_is_member(const struct psd_cfg_entry *e, unsigned rank)
{
	if (!e->members)
		return true;
	if (rank / 8 >= e->members_len)
		return false;
	return e->members[rank / 8] & (1u << (rank % 8));
}

unsigned psd_cfg_nmembers(const struct psd_cfg_entry *e, unsigned nworker)
{
	return e->members ? e->nmembers : nworker;
}

int psd_cfg_members_check(const struct psd_cfg_entry *e, unsigned nworker)
{
	unsigned cnt = 0;
	size_t i;

	if (!e->members || !e->members_len)
		return e->nmembers ? -EPROTO : 0;
	if (e->members_len > (nworker + 7) / 8)
		return -EPROTO;
	for (i = 0; i < e->members_len * 8; i++) {
		if (!(e->members[i / 8] & (1u << (i % 8))))
			continue;
		if (i >= nworker)
			return -EPROTO;
		cnt++;
	}
	return cnt == e->nmembers ? 0 : -EPROTO;
}
