/* SPDX-License-Identifier: MIT */
/*
 * The one u64 -> pointer hash map of the library (keys, requests, stored
 * tensors, optimizer state).  Open addressing with linear probing, a power
 * of two capacity kept at most half full, and backward-shift deletion, so
 * lookups never walk tombstones.
 *
 * Values are caller-owned pointers and must not be NULL (NULL marks an
 * empty slot).  Not thread-safe: the caller's lock guards the map.  Any
 * put or del may move entries, so an iteration is valid only while the
 * map does not change.
 */
#ifndef PSCHED_COMMON_MAP_H
#define PSCHED_COMMON_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct psd_map_slot {
	uint64_t key;
	void *val; /* NULL: empty */
};

struct psd_map {
	struct psd_map_slot *slots;
	size_t cap; /* 0 or a power of two */
	size_t count;
};

/* An empty map; allocates nothing until the first put. */
void psd_map_init(struct psd_map *m);
/* Free the table (not the values).  Safe on an initialised empty map. */
void psd_map_fini(struct psd_map *m);

/* The value of @key, or NULL. */
void *psd_map_get(const struct psd_map *m, uint64_t key);
/*
 * Insert @key -> @val (@val != NULL).  -EEXIST if @key is present (the map
 * is unchanged), -ENOMEM if the table cannot grow, else 0.
 */
int psd_map_put(struct psd_map *m, uint64_t key, void *val);
/* Remove @key; returns its value, or NULL if it was absent. */
void *psd_map_del(struct psd_map *m, uint64_t key);

static inline size_t psd_map_count(const struct psd_map *m)
{
	return m->count;
}

/*
 * Iterate: start with *@pos = 0; each call returns the next value (and its
 * key in *@key when @key is not NULL), or NULL at the end.  The map must
 * not change during the walk; to drop entries, collect them first or use
 * psd_map_clear().
 */
void *psd_map_next(const struct psd_map *m, size_t *pos, uint64_t *key);

/* Call @fn on every value (in no set order), then empty the map. */
void psd_map_clear(struct psd_map *m, void (*fn)(void *val, void *arg),
		   void *arg);

#endif
