// SPDX-License-Identifier: MIT
/* u64 -> pointer hash map (see map.h). */
#include <errno.h>
#include <stdlib.h>

#include "map.h"

#define MAP_MIN_CAP 64

/* Finalizer of MurmurHash3: keys are often small consecutive integers. */
static size_t map_hash(uint64_t k, size_t cap)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return (size_t)k & (cap - 1);
}

void psd_map_init(struct psd_map *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->count = 0;
}

void psd_map_fini(struct psd_map *m)
{
	free(m->slots);
	psd_map_init(m);
}

static struct psd_map_slot *map_find(const struct psd_map *m, uint64_t key)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = map_hash(key, m->cap); m->slots[i].val;
	     i = (i + 1) & (m->cap - 1))
		if (m->slots[i].key == key)
			return &m->slots[i];
	return NULL;
}

void *psd_map_get(const struct psd_map *m, uint64_t key)
{
	struct psd_map_slot *s = map_find(m, key);

	return s ? s->val : NULL;
}

/* Place an entry known to be absent into a table with room. */
static void map_place(struct psd_map_slot *slots, size_t cap, uint64_t key,
		      void *val)
{
	size_t i = map_hash(key, cap);

	while (slots[i].val)
		i = (i + 1) & (cap - 1);
	slots[i].key = key;
	slots[i].val = val;
}

static int map_grow(struct psd_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : MAP_MIN_CAP;
	struct psd_map_slot *ns;
	size_t i;

	if (ncap < m->cap || ncap > SIZE_MAX / sizeof(*ns))
		return -ENOMEM;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (i = 0; i < m->cap; i++)
		if (m->slots[i].val)
			map_place(ns, ncap, m->slots[i].key, m->slots[i].val);
	free(m->slots);
	m->slots = ns;
	m->cap = ncap;
	return 0;
}

int psd_map_put(struct psd_map *m, uint64_t key, void *val)
{
	int ret;

	if (map_find(m, key))
		return -EEXIST;
	if ((m->count + 1) * 2 > m->cap) {
		ret = map_grow(m);
		if (ret)
			return ret;
	}
	map_place(m->slots, m->cap, key, val);
	m->count++;
	return 0;
}

/* Distance of slot @i from the home slot of the key it holds. */
static size_t map_dist(const struct psd_map *m, size_t i)
{
	return (i - map_hash(m->slots[i].key, m->cap)) & (m->cap - 1);
}

void *psd_map_del(struct psd_map *m, uint64_t key)
{
	struct psd_map_slot *s = map_find(m, key);
	size_t hole, i;
	void *val;

	if (!s)
		return NULL;
	val = s->val;
	hole = (size_t)(s - m->slots);
	/* Backward shift: pull later entries of the probe run into the hole
	 * when the hole lies on their way from their home slot. */
	for (i = (hole + 1) & (m->cap - 1); m->slots[i].val;
	     i = (i + 1) & (m->cap - 1)) {
		if (map_dist(m, i) >= ((i - hole) & (m->cap - 1))) {
			m->slots[hole] = m->slots[i];
			hole = i;
		}
	}
	m->slots[hole].val = NULL;
	m->slots[hole].key = 0;
	m->count--;
	return val;
}

void *psd_map_next(const struct psd_map *m, size_t *pos, uint64_t *key)
{
	size_t i;

	for (i = *pos; i < m->cap; i++) {
		if (m->slots[i].val) {
			*pos = i + 1;
			if (key)
				*key = m->slots[i].key;
			return m->slots[i].val;
		}
	}
	*pos = m->cap;
	return NULL;
}

void psd_map_clear(struct psd_map *m, void (*fn)(void *val, void *arg),
		   void *arg)
{
	size_t i;

	for (i = 0; i < m->cap; i++) {
		if (m->slots[i].val && fn)
			fn(m->slots[i].val, arg);
		m->slots[i].val = NULL;
		m->slots[i].key = 0;
	}
	m->count = 0;
}
